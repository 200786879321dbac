import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { type MockMemory, MockSegmentSource } from "@allot/core";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";
import { StepPoolGroup } from "./step_pool_group.ts";
import { modelRuns } from "../core/_test_faults.ts";

// Blocks that outlive their step (state a training step carries to the
// next: weights, optimizer slots, a GAN's other model) made while the
// previous generation still lives: where a segment for one would take
// held bytes past the bound, it takes a free range of the arena instead.

interface Live {
  block: PlannedBlock<MockMemory>;
  size: number;
  seed: number;
}

function fill(l: Live) {
  const bytes = l.block.memory.bytes!;
  for (let i = 0; i < l.size; i += i < 16 || i >= l.size - 17 ? 1 : 97) {
    bytes[l.block.byteOffset + i] = (l.seed + i * 31) & 255;
  }
}

function check(l: Live) {
  const bytes = l.block.memory.bytes!;
  for (let i = 0; i < l.size; i += i < 16 || i >= l.size - 17 ? 1 : 97) {
    if (bytes[l.block.byteOffset + i] !== ((l.seed + i * 31) & 255)) {
      assert.fail(
        `block of ${l.size} bytes at ${l.block.byteOffset} overwritten at +${i}`,
      );
    }
  }
}

describe("StepPlannedPool: carried generations", () => {
  it("a new generation made before the old one goes, transients peaking apart: held within the ratio, no segment made once settled", () => {
    const source = new MockSegmentSource({ alignment: 256, backed: true });
    const pool = new StepPlannedPool(source);
    const gen = 4, state = 16384, scratch = 65536;
    let carried: Live[] = [];
    let seed = 1;
    let madeAt5 = 0;
    for (let step = 0; step < 12; step++) {
      // the transients peak early, beside the old generation only
      const t = [scratch, scratch, scratch / 2].map((size) => ({
        block: pool.allocate(size),
        size,
        seed: seed++,
      }));
      for (const l of t) fill(l);
      for (const l of t) check(l), pool.free(l.block);
      // then the whole new generation, then the old one goes
      const next: Live[] = [];
      for (let i = 0; i < gen; i++) {
        const l = { block: pool.allocate(state), size: state, seed: seed++ };
        fill(l);
        next.push(l);
      }
      for (const l of carried) check(l), pool.free(l.block);
      carried = next;
      const s = pool.allocate(scratch / 4);
      pool.free(s);
      pool.endStep();
      pool.validate();
      if (step === 5) madeAt5 = pool.segmentsCreated;
    }
    for (const l of carried) check(l), pool.free(l.block);
    // the peak: the transients and one generation (160 KiB + 64 KiB); apart,
    // the arena and two generations outside it would hold 288 KiB
    const bound = 1.1 * pool.peakRequestedBytes + 2048;
    assert.ok(
      pool.peakReservedBytes <= bound,
      `peak held ${pool.peakReservedBytes} > ${bound}`,
    );
    assert.equal(pool.segmentsCreated, madeAt5);
    pool.emptyCache();
    assert.equal(source.reservedBytes, 0);
  });

  it("random carried generations beside planned transients (alone or in a group, fast path and checked path): bytes intact, no overlap, stats equal a recount, everything returned", () => {
    fc.assert(
      fc.property(
        fc.record({
          scratch: fc.array(
            fc.record({
              size: fc.integer({ min: 1, max: 80_000 }),
              life: fc.integer({ min: 0, max: 4 }),
            }),
            { minLength: 1, maxLength: 8 },
          ),
          state: fc.array(fc.integer({ min: 1, max: 40_000 }), {
            minLength: 1,
            maxLength: 6,
          }),
          // where in the step the new generation is made, and when each
          // old block goes (after the new one of its index: an overlap)
          stateAt: fc.nat(8),
          lag: fc.integer({ min: 0, max: 6 }),
          vary: fc.array(fc.nat(20), { maxLength: 4 }),
          steps: fc.integer({ min: 3, max: 16 }),
          grouped: fc.boolean(),
          capacity: fc.constantFrom(1 << 19, 1 << 21, Infinity),
        }),
        (c) => {
          const source = new MockSegmentSource({
            capacityBytes: c.capacity,
            alignment: 256,
            backed: true,
          });
          const group = c.grouped ? new StepPoolGroup() : undefined;
          const pool = new StepPlannedPool(source, { group });
          const all = new Set<Live>();
          let seed = 1;
          const take = (size: number): Live | undefined => {
            let block: PlannedBlock<MockMemory>;
            try {
              block = pool.allocate(size);
            } catch {
              return undefined;
            }
            const l = { block, size, seed: seed++ };
            fill(l);
            all.add(l);
            return l;
          };
          const give = (l: Live | undefined) => {
            if (l === undefined) return;
            check(l);
            pool.free(l.block);
            all.delete(l);
          };
          const recount = () => {
            pool.validate();
            for (const l of all) check(l);
            assert.equal(
              pool.requestedBytes,
              [...all].reduce((n, l) => n + l.size, 0),
            );
            assert.equal(pool.reservedBytes, source.reservedBytes);
          };
          let old: (Live | undefined)[] = [];
          for (let s = 0; s < c.steps; s++) {
            const pending: [Live | undefined, number][] = [];
            const next: (Live | undefined)[] = [];
            let op = 0;
            const makeState = () => {
              c.state.forEach((size, i) => {
                next.push(take(size));
                // the old block of this index goes `lag` requests later
                pending.push([old[i], op + c.lag]);
              });
            };
            c.scratch.forEach((r, i) => {
              if (i === c.stateAt % c.scratch.length) makeState();
              const size = c.vary.includes(s * 8 + i) ? r.size + 256 : r.size;
              pending.push([take(size), ++op + r.life]);
              for (let k = pending.length - 1; k >= 0; k--) {
                if (pending[k][1] <= op) give(pending.splice(k, 1)[0][0]);
              }
              if (op % 3 === 0) recount();
            });
            if (next.length === 0) makeState();
            for (const [l] of pending) give(l);
            old = next;
            if (group) group.endStep();
            else pool.endStep();
            recount();
          }
          for (const l of old) give(l);
          recount();
          assert.equal(pool.requestedBytes, 0);
          pool.emptyCache();
          assert.equal(source.reservedBytes, 0);
          assert.equal(pool.segmentCount, 0);
        },
      ),
      { numRuns: Math.max(20, modelRuns() >> 1) },
    );
  });
});
