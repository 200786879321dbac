// StepPlannedPool in heap mode from the outside (review 5): steps that never
// repeat, blocks freed out of order, double frees, stale handles from an
// earlier step or pass, foreign blocks, trim() and emptyCache() mid-step. A
// refused free changes nothing; live blocks keep their bytes and never
// overlap; requested bytes equal a recount after every call.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  type MockMemory,
  MockSegmentSource,
} from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";

type Block = PlannedBlock<MockMemory>;
interface Live {
  block: Block;
  size: number;
  seed: number;
}

function fill(l: Live) {
  const bytes = l.block.memory.bytes!;
  for (let i = 0; i < l.size; i += 1 + (i >> 2)) {
    bytes[l.block.byteOffset + i] = (l.seed + i * 31) & 255;
  }
  bytes[l.block.byteOffset + l.size - 1] = l.seed & 255;
}

function check(l: Live) {
  const bytes = l.block.memory.bytes!;
  for (let i = 0; i < l.size - 1; i += 1 + (i >> 2)) {
    assert.equal(
      bytes[l.block.byteOffset + i],
      (l.seed + i * 31) & 255,
      `block of ${l.size} at ${l.block.byteOffset} overwritten at +${i}`,
    );
  }
  assert.equal(bytes[l.block.byteOffset + l.size - 1], l.seed & 255);
}

type Op =
  | { k: "alloc"; size: number }
  | { k: "free"; at: number }
  | { k: "stale"; at: number }
  | { k: "foreign" }
  | { k: "end" }
  | { k: "trim"; target: number }
  | { k: "empty" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      k: fc.constant("alloc" as const),
      size: fc.oneof(
        fc.integer({ min: 0, max: 600 }),
        fc.integer({ min: 601, max: 40_000 }),
        fc.integer({ min: 40_001, max: 3_000_000 }),
      ),
    }),
  },
  {
    weight: 8,
    arbitrary: fc.record({ k: fc.constant("free" as const), at: fc.nat() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant("stale" as const), at: fc.nat() }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("foreign" as const) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("end" as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("trim" as const),
      target: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 2 ** 24 })),
    }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("empty" as const) }) },
);

describe("StepPlannedPool heap mode (review 5)", () => {
  it("random non-repeating steps with double frees, stale and foreign handles, trim and emptyCache mid-step", () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 150, size: "max" }),
        fc.boolean(),
        (ops, strict) => {
          const source = new MockSegmentSource({ backed: true });
          const pool = new StepPlannedPool(source, { strict });
          const other = new StepPlannedPool(
            new MockSegmentSource({ backed: true }),
          );
          const foreign = other.allocate(64);
          const live: Live[] = [];
          const freed: Block[] = [];
          let seed = 1;
          for (const o of ops) {
            switch (o.k) {
              case "alloc": {
                const block = pool.allocate(o.size);
                assert.ok(block.byteLength >= o.size);
                assert.equal(block.requestedByteLength, o.size);
                const l = { block, size: o.size, seed: seed++ };
                if (o.size > 0) fill(l);
                live.push(l);
                break;
              }
              case "free":
                if (live.length > 0) {
                  const [l] = live.splice(o.at % live.length, 1);
                  if (l.size > 0) check(l);
                  pool.free(l.block);
                  freed.push(l.block);
                }
                break;
              case "stale":
              case "foreign": {
                if (o.k === "stale" && freed.length === 0) break;
                const b = o.k === "stale"
                  ? freed[o.at % freed.length]
                  : foreign;
                const before = [
                  pool.requestedBytes,
                  pool.reservedBytes,
                  pool.segmentCount,
                  pool.segmentsCreated,
                  pool.segmentsReleased,
                  JSON.stringify(pool.stats()),
                ];
                assert.throws(() => pool.free(b), DoubleFreeError);
                assert.deepEqual(
                  [
                    pool.requestedBytes,
                    pool.reservedBytes,
                    pool.segmentCount,
                    pool.segmentsCreated,
                    pool.segmentsReleased,
                    JSON.stringify(pool.stats()),
                  ],
                  before,
                );
                break;
              }
              case "end":
                pool.endStep();
                break;
              case "trim":
                pool.trim(o.target);
                break;
              case "empty":
                pool.emptyCache();
                break;
            }
            pool.validate();
            let want = 0;
            for (const l of live) want += l.size;
            assert.equal(pool.requestedBytes, want);
            assert.equal(pool.reservedBytes, source.reservedBytes);
            for (const l of live) if (l.size > 0) check(l);
            // no two live blocks of one memory overlap
            const sorted = live.map((l) => l.block).filter((b) =>
              b.byteLength > 0
            ).sort((a, b) =>
              a.memory === b.memory ? a.byteOffset - b.byteOffset : 0
            );
            for (let i = 0; i < sorted.length; i++) {
              for (let j = i + 1; j < sorted.length; j++) {
                const a = sorted[i], b = sorted[j];
                if (a.memory !== b.memory) continue;
                assert.ok(
                  a.byteOffset + a.byteLength <= b.byteOffset ||
                    b.byteOffset + b.byteLength <= a.byteOffset,
                  "live blocks overlap",
                );
              }
            }
          }
          for (const l of live) pool.free(l.block);
          pool.endStep();
          pool.emptyCache();
          pool.validate();
          assert.equal(pool.requestedBytes, 0);
          assert.equal(pool.reservedBytes, source.reservedBytes);
          other.free(foreign);
        },
      ),
      { numRuns: modelRuns(150) },
    );
  });
});
