import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  InvalidArgumentError,
  type MockMemory,
  MockSegmentSource,
  OutOfMemoryError,
} from "@allot/core";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";
import { type LiveBlock, livePattern } from "./_test_planned_bytes.ts";
import { StepPoolGroup } from "./step_pool_group.ts";
import { modelRuns } from "../core/_test_faults.ts";

type Op =
  | { kind: "alloc"; size: number }
  | { kind: "free"; index: number }
  | { kind: "step" }
  | { kind: "repeat" }
  | { kind: "trim"; target: number }
  | { kind: "bad"; size: number };

const sizeArb = fc.oneof(
  { weight: 5, arbitrary: fc.integer({ min: 1, max: 4096 }) },
  { weight: 2, arbitrary: fc.integer({ min: 4096, max: 65536 }) },
  { weight: 2, arbitrary: fc.constantFrom(256, 1000, 4096, 12288) },
);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 8,
    arbitrary: sizeArb.map((size) => ({ kind: "alloc", size }) as Op),
  },
  {
    weight: 7,
    arbitrary: fc.nat(1000).map((index) => ({ kind: "free", index }) as Op),
  },
  { weight: 2, arbitrary: fc.constant({ kind: "step" } as Op) },
  { weight: 1, arbitrary: fc.constant({ kind: "repeat" } as Op) },
  {
    weight: 1,
    arbitrary: fc.nat(1 << 18).map((target) =>
      ({ kind: "trim", target }) as Op
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(-1, 1.5, NaN, Infinity, 2 ** 53).map((size) =>
      ({ kind: "bad", size }) as Op
    ),
  },
);

type Live = LiveBlock;

/** Every byte of the first and last 32 of a block, and every 61st between. */
const { fill, check } = livePattern(32);

/** A step: requests, and for each the request after which it is freed (or never). */
const templateArb = fc.array(
  fc.record({
    size: sizeArb,
    life: fc.oneof(fc.integer({ min: 0, max: 6 }), fc.constant(-1)),
  }),
  { minLength: 1, maxLength: 12 },
);

describe("StepPlannedPool model", () => {
  it("steps drawn from a few templates (repeating, alternating, varied): bytes intact and state consistent", () => {
    fc.assert(
      fc.property(
        fc.array(templateArb, { minLength: 1, maxLength: 3 }),
        fc.array(fc.tuple(fc.nat(2), fc.nat(16)), {
          minLength: 2,
          maxLength: 10,
        }),
        (templates, schedule) => {
          const source = new MockSegmentSource({
            alignment: 256,
            backed: true,
          });
          const pool = new StepPlannedPool(source);
          const carried: Live[] = [];
          let seed = 1;
          for (const [t, vary] of schedule) {
            const template = templates[t % templates.length];
            const pending: { l: Live; at: number }[] = [];
            template.forEach((req, i) => {
              // now and then a request of another size
              const size = vary === i ? req.size + 256 : req.size;
              const block = pool.allocate(size);
              const l = { block, size, seed: seed++ };
              fill(l);
              if (req.life < 0) carried.push(l);
              else pending.push({ l, at: i + req.life });
              for (let k = pending.length - 1; k >= 0; k--) {
                if (pending[k].at <= i) {
                  check(pending[k].l);
                  pool.free(pending[k].l.block);
                  pending.splice(k, 1);
                }
              }
              // blocks carried from earlier steps die a few steps later
              if (carried.length > 3 && vary % 3 === 0) {
                const old = carried.shift()!;
                check(old);
                pool.free(old.block);
              }
            });
            for (const p of pending) {
              check(p.l);
              pool.free(p.l.block);
            }
            for (const l of carried) check(l);
            pool.endStep();
            pool.validate();
          }
          for (const l of carried) pool.free(l.block);
          pool.emptyCache();
          assert.equal(source.reservedBytes, 0);
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("long runs of steps that grow a little (plans just over an old arena, trims at step ends): bytes intact and state consistent", () => {
    fc.assert(
      fc.property(
        templateArb,
        fc.integer({ min: 66, max: 90 }),
        fc.array(fc.nat(11), { minLength: 1, maxLength: 6 }),
        (template, steps, growAt) => {
          const source = new MockSegmentSource({
            alignment: 256,
            backed: true,
          });
          const pool = new StepPlannedPool(source);
          const carried: Live[] = [];
          const grown = template.map(() => 0);
          let seed = 1;
          for (let s = 0; s < steps; s++) {
            // after the window, a request grows by one alignment now and then
            // (plans just over the arena are laid out inside it)
            if (s > 64 && s % 3 === 0) {
              const i = growAt[s % growAt.length] % template.length;
              grown[i] += 256;
            }
            const pending: { l: Live; at: number }[] = [];
            template.forEach((req, i) => {
              const size = req.size + grown[i];
              const l = { block: pool.allocate(size), size, seed: seed++ };
              fill(l);
              if (req.life < 0) carried.push(l);
              else pending.push({ l, at: i + req.life });
              for (let k = pending.length - 1; k >= 0; k--) {
                if (pending[k].at <= i) {
                  check(pending[k].l);
                  pool.free(pending[k].l.block);
                  pending.splice(k, 1);
                }
              }
            });
            for (const p of pending) {
              check(p.l);
              pool.free(p.l.block);
            }
            // blocks that outlived their step go a step later
            while (carried.length > 2) {
              const old = carried.shift()!;
              check(old);
              pool.free(old.block);
            }
            pool.endStep();
            pool.validate();
            assert.equal(pool.reservedBytes, source.reservedBytes);
            assert.equal(
              pool.requestedBytes,
              carried.reduce((n, l) => n + l.size, 0),
            );
          }
          for (const l of carried) {
            check(l);
            pool.free(l.block);
          }
          pool.emptyCache();
          assert.equal(source.reservedBytes, 0);
        },
      ),
      { numRuns: Math.max(10, modelRuns() >> 2) },
    );
  });

  it("steps that drift (blocks grown each step, small blocks kept for a while, a pool beside it in a group, a capped source): bytes intact and state consistent", () => {
    fc.assert(
      fc.property(
        fc.record({
          caches: fc.integer({ min: 1, max: 4 }),
          start: fc.integer({ min: 64, max: 8192 }),
          growth: fc.constantFrom(0, 4, 256, 512, 1000, 4096),
          scratch: fc.array(fc.integer({ min: 1, max: 40_000 }), {
            maxLength: 4,
          }),
          small: fc.array(fc.integer({ min: 1, max: 600 }), { maxLength: 3 }),
          keepFor: fc.integer({ min: 0, max: 12 }),
          steps: fc.integer({ min: 5, max: 40 }),
          passes: fc.integer({ min: 1, max: 3 }),
          capacity: fc.constantFrom(1 << 18, 1 << 20, Infinity),
          grouped: fc.boolean(),
        }),
        (c) => {
          const source = new MockSegmentSource({
            capacityBytes: c.capacity,
            alignment: 256,
            backed: true,
          });
          const group = c.grouped ? new StepPoolGroup() : undefined;
          const pool = new StepPlannedPool(source, { group });
          const otherSource = new MockSegmentSource({
            alignment: 256,
            backed: true,
          });
          const other = c.grouped
            ? new StepPlannedPool(otherSource, { group })
            : undefined;
          let seed = 1;
          const all = new Set<Live>();
          const take = (size: number): Live | undefined => {
            let block: PlannedBlock<MockMemory>;
            try {
              block = pool.allocate(size);
            } catch (e) {
              assert.ok(e instanceof OutOfMemoryError);
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
          for (let pass = 0; pass < c.passes; pass++) {
            let caches: (Live | undefined)[] = [];
            const kept: [Live | undefined, number][] = [];
            for (let s = 0; s < c.steps; s++) {
              const scratch = c.scratch.map((n) => take(n + s * 8));
              const next = Array.from(
                { length: c.caches },
                () => take(c.start + s * c.growth),
              );
              for (const l of caches) give(l);
              caches = next;
              for (const n of c.small) kept.push([take(n), s + c.keepFor]);
              for (let k = kept.length - 1; k >= 0; k--) {
                if (kept[k][1] <= s) give(kept.splice(k, 1)[0][0]);
              }
              for (const l of scratch) give(l);
              const u = other?.allocate(4 + s);
              if (group) group.endStep();
              else pool.endStep();
              if (u) other!.free(u);
              pool.validate();
              other?.validate();
              for (const l of all) check(l);
              assert.equal(
                pool.requestedBytes,
                [...all].reduce((n, l) => n + l.size, 0),
              );
              assert.equal(pool.reservedBytes, source.reservedBytes);
              if (group) {
                assert.equal(
                  group.reservedBytes,
                  source.reservedBytes + otherSource.reservedBytes,
                );
              }
            }
            for (const l of caches) give(l);
            for (const [l] of kept) give(l);
            if (group) group.endStep();
            else pool.endStep();
          }
          assert.equal(pool.requestedBytes, 0);
          pool.validate();
          pool.emptyCache();
          other?.emptyCache();
          assert.equal(source.reservedBytes, 0);
          assert.equal(otherSource.reservedBytes, 0);
          assert.equal(pool.segmentCount, 0);
        },
      ),
      { numRuns: Math.max(10, modelRuns() >> 2) },
    );
  });

  it("random allocate/free/step/trim: bytes intact, no overlap, stats equal a recount, everything returned", () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 160 }),
        fc.constantFrom(1 << 20, 1 << 22, Infinity),
        (ops, capacity) => {
          const source = new MockSegmentSource({
            capacityBytes: capacity,
            alignment: 256,
            backed: true,
          });
          const pool = new StepPlannedPool(source);
          const live: Live[] = [];
          let seed = 1;
          let stepOps: Op[] = [];
          let lastStep: Op[] = [];
          const run = (op: Op) => {
            if (op.kind === "alloc") {
              const held = pool.reservedBytes,
                requestedBytes = pool.requestedBytes;
              let block: PlannedBlock<MockMemory>;
              try {
                block = pool.allocate(op.size);
              } catch (e) {
                assert.ok(e instanceof OutOfMemoryError);
                assert.equal(pool.requestedBytes, requestedBytes);
                assert.ok(pool.reservedBytes <= held);
                return;
              }
              assert.ok(block.byteLength >= op.size);
              assert.equal(block.byteOffset % 256, 0);
              const l = { block, size: op.size, seed: seed++ };
              fill(l);
              live.push(l);
            } else if (op.kind === "free") {
              if (live.length === 0) return;
              const [l] = live.splice(op.index % live.length, 1);
              check(l);
              pool.free(l.block);
              assert.throws(() => pool.free(l.block), DoubleFreeError);
            } else if (op.kind === "step") {
              pool.endStep();
            } else if (op.kind === "trim") {
              const after = pool.trim(op.target);
              assert.equal(after, pool.reservedBytes);
              // honoured: down to the target, or to the segments that hold
              // a live block (every whole free one was given back)
              const pinned = new Set(live.map((l) => l.block.memory));
              let pinnedBytes = 0;
              for (const m of pinned) pinnedBytes += m.bytes!.length;
              assert.ok(
                after <= Math.max(op.target, pinnedBytes),
                `trim(${op.target}) left ${after}, live segments ${pinnedBytes}`,
              );
            } else if (op.kind === "bad") {
              const held = pool.reservedBytes, n = pool.requestedBytes;
              assert.throws(() => pool.allocate(op.size), InvalidArgumentError);
              assert.equal(pool.reservedBytes, held);
              assert.equal(pool.requestedBytes, n);
            }
          };
          for (const op of ops) {
            if (op.kind === "repeat") {
              // replay the last step's requests (frees of its own blocks by
              // position) so plans are followed, switched and broken
              const start = live.length;
              for (const o of lastStep) {
                if (o.kind === "alloc") run(o);
                else if (o.kind === "free" && live.length > start) {
                  run({
                    kind: "free",
                    index: start + (o.index % (live.length - start)),
                  });
                }
              }
              pool.endStep();
              continue;
            }
            run(op);
            stepOps.push(op);
            if (op.kind === "step") {
              lastStep = stepOps;
              stepOps = [];
            }
            for (const l of live) if (l.seed % 7 === 0) check(l);
            pool.validate();
            assert.equal(
              pool.requestedBytes,
              live.reduce((n, l) => n + l.size, 0),
            );
            assert.equal(pool.reservedBytes, source.reservedBytes);
            assert.ok(pool.peakReservedBytes >= pool.reservedBytes);
          }
          for (const l of live) check(l);
          for (const l of live) pool.free(l.block);
          pool.validate();
          pool.emptyCache();
          assert.equal(pool.reservedBytes, 0);
          assert.equal(source.reservedBytes, 0);
          assert.equal(pool.segmentCount, 0);
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});
