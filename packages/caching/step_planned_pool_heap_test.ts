// StepPlannedPool on work whose steps do not repeat (issue #15): while any of
// the last steps left its plan, the arena serves as a heap (best fit over
// its free ranges for requests the plan does not place; small requests over
// the bound take arena ranges or ranges of free large segments instead of a
// segment made by trimming another). Random step sequences that never repeat
// within a pass, replayed over a few passes (as a runtime reruns its loop):
// live blocks never overlap and keep their bytes, stats equal a recount,
// held bytes stay within the bound the pool states, everything goes back.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type MockMemory,
  MockSegmentSource,
  OutOfMemoryError,
} from "@allot/core";
import { assertDisjoint, modelRuns } from "../core/_test_faults.ts";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";
import { type LiveBlock, livePattern } from "./_test_planned_bytes.ts";
import { StepPoolGroup } from "./step_pool_group.ts";

type Live = LiveBlock;

/** Every byte of the first and last 16 of a block, and every 61st between. */
const { fill, check } = livePattern(16);

/** Sizes like a small model's: scalars and biases, 512 B rows, 2-8 KiB tiles. */
const sizeArb = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 512 }) },
  { weight: 3, arbitrary: fc.constantFrom(256, 512, 2048, 4096, 6144) },
  { weight: 2, arbitrary: fc.integer({ min: 513, max: 8192 }) },
  { weight: 1, arbitrary: fc.integer({ min: 8193, max: 40_000 }) },
);

/** A request: its size, and how many requests later it is freed (-1: carried into the next step). */
const requestArb = fc.record({
  size: sizeArb,
  life: fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 8 }) },
    { weight: 1, arbitrary: fc.constant(-1) },
  ),
});

/** Steps that differ from each other (lengths and sizes drawn apart). */
const stepsArb = fc.array(
  fc.array(requestArb, { minLength: 4, maxLength: 40 }),
  { minLength: 8, maxLength: 20 },
);

describe("StepPlannedPool on steps that never repeat (heap mode)", () => {
  it("random non-repeating steps over passes, alone or in a group, capped or not: no overlap, bytes intact, stats equal a recount, held within the bound, all returned", () => {
    fc.assert(
      fc.property(
        stepsArb,
        fc.integer({ min: 2, max: 3 }),
        fc.boolean(),
        fc.constantFrom(1 << 19, 1 << 21, Infinity),
        (steps, passes, grouped, capacity) => {
          const source = new MockSegmentSource({
            capacityBytes: capacity,
            alignment: 256,
            backed: true,
          });
          const group = grouped ? new StepPoolGroup() : undefined;
          const pool = new StepPlannedPool(source, { group });
          const otherSource = new MockSegmentSource({ alignment: 256 });
          const other = grouped
            ? new StepPlannedPool(otherSource, { group })
            : undefined;
          const all = new Set<Live>();
          let seed = 1, live = 0, refused = 0;
          // the bound the pool keeps free segments within, at a step's end:
          // maxHeldRatio times the peak live bytes of the last 64 steps, at
          // least the blocks' bytes plus a small segment; on top of it the
          // arena laid out for a plan (at most the step's peak blocks), and
          // the segments that hold live blocks
          const peaks: number[] = [];
          let stepPeak = 0;
          const take = (size: number): Live | undefined => {
            let block: PlannedBlock<MockMemory>;
            try {
              block = pool.allocate(size);
            } catch (e) {
              assert.ok(e instanceof OutOfMemoryError);
              refused++;
              return undefined;
            }
            assert.ok(block.byteLength >= size);
            assert.equal(block.byteOffset % 256, 0);
            const l = { block, size, seed: seed++ };
            fill(l);
            all.add(l);
            live += size;
            if (live > stepPeak) stepPeak = live;
            return l;
          };
          const give = (l: Live | undefined) => {
            if (l === undefined) return;
            check(l);
            pool.free(l.block);
            all.delete(l);
            live -= l.size;
          };
          const recount = () => {
            pool.validate();
            for (const l of all) check(l);
            assertDisjoint(
              [...all].map(({ block }) =>
                [
                  block.memory,
                  block.byteOffset,
                  block.byteOffset + block.byteLength,
                ] as const
              ),
            );
            const s = pool.stats();
            assert.equal(pool.requestedBytes, live);
            assert.equal(s.requestedBytes.current, live);
            assert.equal(
              s.requestedBytes.allocated - s.requestedBytes.freed,
              live,
            );
            assert.equal(pool.reservedBytes, source.reservedBytes);
            assert.equal(s.reservedBytes.current, source.reservedBytes);
            assert.equal(s.segmentCount, source.liveSegmentCount);
            assert.equal(
              s.segmentsCreated - s.segmentsReleased,
              s.segmentCount,
            );
            if (group) {
              assert.equal(
                group.reservedBytes,
                source.reservedBytes + otherSource.reservedBytes,
              );
            }
          };
          let carried: Live[] = [];
          for (let pass = 0; pass < passes; pass++) {
            for (const step of steps) {
              const next: Live[] = [];
              const pending: { l: Live | undefined; at: number }[] = [];
              step.forEach((req, i) => {
                const l = take(req.size);
                if (req.life < 0) {
                  if (l) next.push(l);
                } else pending.push({ l, at: i + req.life });
                for (let k = pending.length - 1; k >= 0; k--) {
                  if (pending[k].at <= i) give(pending.splice(k, 1)[0].l);
                }
                // what the last step carried goes half way through this one
                if (i === step.length >> 1) {
                  for (const c of carried) give(c);
                  carried = [];
                }
              });
              for (const p of pending) give(p.l);
              for (const c of carried) give(c);
              carried = next;
              const u = other?.allocate(4 + (seed % 300));
              if (group) group.endStep();
              else pool.endStep();
              if (u) other!.free(u);
              recount();
              peaks.push(stepPeak);
              stepPeak = live;
              if (capacity === Infinity && refused === 0) {
                // free segments within the ratio of the recent peaks, plus
                // the arena and the segments live blocks hold
                const recent = Math.max(...peaks.slice(-64));
                const pinned = new Set(
                  [...all].map((l) => l.block.memory),
                );
                let pinnedBytes = 0;
                for (const m of pinned) pinnedBytes += m.bytes!.length;
                const arena = pool.arenaByteLength;
                assert.ok(
                  pool.reservedBytes <=
                    Math.max(
                            pool.maxHeldRatio * recent,
                            recent + 2048 + 256,
                          ) * (grouped ? 1 : 1.05) + arena + pinnedBytes,
                  `held ${pool.reservedBytes}, recent peak ${recent}, arena ${arena}, pinned ${pinnedBytes}`,
                );
              }
            }
          }
          for (const c of carried) give(c);
          if (group) group.endStep();
          else pool.endStep();
          recount();
          assert.equal(pool.requestedBytes, 0);
          pool.emptyCache();
          other?.emptyCache();
          assert.equal(pool.reservedBytes, 0);
          assert.equal(source.reservedBytes, 0);
          assert.equal(otherSource.reservedBytes, 0);
          assert.equal(pool.segmentCount, 0);
        },
      ),
      { numRuns: Math.max(20, modelRuns() >> 2) },
    );
  });
});
