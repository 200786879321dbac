// The hit path's fast parts, against a model: sizes rounded in integer
// operations (allocate and allocateId), stats kept in flat per-pool records
// (allocation, allocated and requested figures: current, peak, allocated,
// freed, per pool and over both, through resets), history and strict mode
// switched on and off while ids and handles are live.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { DoubleFreeError, MockSegmentSource } from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import {
  type CachedBlock,
  CachingAllocator,
  PYTORCH_SEGMENTS,
} from "./caching_allocator.ts";

const KiB = 1024;
const MiB = 2 ** 20;

/** Sizes around the granule and pool limits, and anywhere up to 24 MiB. */
const sizeArb = fc.oneof(
  fc.constantFrom(0, 1, 511, 512, 513, 1023, 1024, 1025),
  fc.constantFrom(MiB - 1, MiB, MiB + 1, 10 * MiB - 1, 10 * MiB),
  fc.integer({ min: 0, max: 64 * KiB }),
  fc.integer({ min: 0, max: 24 * MiB }),
);

type Op =
  | { kind: "allocId" | "allocHandle"; size: number }
  | { kind: "freeId" | "freeHandle" | "staleFree"; index: number }
  | { kind: "resetPeak" | "resetAccumulated" | "history" | "noHistory" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant("allocId" as const),
      size: sizeArb,
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("allocHandle" as const),
      size: sizeArb,
    }),
  },
  {
    weight: 7,
    arbitrary: fc.record({
      kind: fc.constant("freeId" as const),
      index: fc.nat(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("freeHandle" as const),
      index: fc.nat(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("staleFree" as const),
      index: fc.nat(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constantFrom(
        "resetPeak" as const,
        "resetAccumulated" as const,
        "history" as const,
        "noHistory" as const,
      ),
    }),
  },
);

/** One figure of the model: current, peak, allocated, freed. */
class Figure {
  current = 0;
  peak = 0;
  allocated = 0;
  freed = 0;
  add(d: number): void {
    this.current += d;
    this.allocated += d;
    this.peak = Math.max(this.peak, this.current);
  }
  sub(d: number): void {
    this.current -= d;
    this.freed += d;
  }
}

const NAMES = ["allocation", "allocatedBytes", "requestedBytes"] as const;
const POOLS = ["all", "smallPool", "largePool"] as const;

type Model = Record<
  (typeof NAMES)[number],
  Record<(typeof POOLS)[number], Figure>
>;

function newModel(): Model {
  const pools = () => ({
    all: new Figure(),
    smallPool: new Figure(),
    largePool: new Figure(),
  });
  return {
    allocation: pools(),
    allocatedBytes: pools(),
    requestedBytes: pools(),
  };
}

/** The default block granule. */
const GRANULE = 256;

function rounded(n: number, granule = GRANULE): number {
  return Math.max(granule, Math.ceil(n / granule) * granule);
}

/**
 * A block of `n` requested bytes: exactly the rounded size in the small
 * pool (always split), at least that in the large pool (a rest of up to
 * 1 MiB stays with the block, own segments round to 2 MiB).
 */
function checkSize(blockBytes: number, n: number): void {
  // (PYTORCH_SEGMENTS: 512-byte granules)
  const r = rounded(n, 512);
  if (r <= MiB) assert.equal(blockBytes, r, `${n}`);
  else assert.ok(blockBytes >= r, `${n}`);
}

describe("CachingAllocator hit path (integer rounding, flat stats, watch flag)", () => {
  it("keeps sizes, stats and history right through ids, handles and resets", () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 1, maxLength: 60 }),
        fc.boolean(),
        (ops, strict) => {
          const allocator = new CachingAllocator(new MockSegmentSource(), {
            ...PYTORCH_SEGMENTS,
            strict,
          });
          const model = newModel();
          const ids: { id: number; size: number; requested: number }[] = [];
          const handles: CachedBlock<unknown>[] = [];
          const stale: number[] = [];
          let history = false;
          let events = 0;
          const move = (size: number, requested: number, sign: 1 | -1) => {
            const pool = size <= MiB ? "smallPool" : "largePool";
            const amounts = [1, size, requested];
            NAMES.forEach((name, k) => {
              for (const p of ["all", pool] as const) {
                if (sign > 0) model[name][p].add(amounts[k]);
                else model[name][p].sub(amounts[k]);
              }
            });
          };
          for (const op of ops) {
            switch (op.kind) {
              case "allocId": {
                const id = allocator.allocateId(op.size);
                const size = allocator.blockByteLength(id);
                checkSize(size, op.size);
                ids.push({ id, size, requested: op.size });
                move(size, op.size, 1);
                if (history) events++;
                break;
              }
              case "allocHandle": {
                const block = allocator.allocate(op.size);
                checkSize(block.blockByteLength, op.size);
                handles.push(block);
                move(block.blockByteLength, op.size, 1);
                if (history) events++;
                break;
              }
              case "freeId": {
                if (ids.length === 0) break;
                const [b] = ids.splice(op.index % ids.length, 1);
                allocator.freeById(b.id);
                stale.push(b.id);
                move(b.size, b.requested, -1);
                if (history) events += 2; // free_requested, free_completed
                break;
              }
              case "freeHandle": {
                if (handles.length === 0) break;
                const [b] = handles.splice(op.index % handles.length, 1);
                move(b.blockByteLength, b.byteLength, -1);
                b.release();
                if (history) events += 2;
                break;
              }
              case "staleFree": {
                if (stale.length === 0) break;
                const id = stale[op.index % stale.length];
                const before = JSON.stringify(allocator.memoryStats());
                assert.throws(() => allocator.freeById(id), DoubleFreeError);
                assert.equal(JSON.stringify(allocator.memoryStats()), before);
                break;
              }
              case "resetPeak":
                allocator.resetPeakStats();
                for (const name of NAMES) {
                  for (const p of POOLS) {
                    model[name][p].peak = model[name][p].current;
                  }
                }
                break;
              case "resetAccumulated":
                allocator.resetAccumulatedStats();
                for (const name of NAMES) {
                  for (const p of POOLS) {
                    model[name][p].allocated = model[name][p].freed = 0;
                  }
                }
                break;
              case "history":
                allocator.recordHistory();
                history = true;
                events = 0;
                break;
              case "noHistory":
                allocator.recordHistory(false);
                history = false;
                break;
            }
            const stats = allocator.memoryStats();
            for (const name of NAMES) {
              for (const p of POOLS) {
                assert.deepEqual(
                  stats[name][p],
                  { ...model[name][p] },
                  `${name}.${p} after ${op.kind}`,
                );
              }
            }
            // Nothing pends: active figures equal the allocation figures.
            assert.deepEqual(stats.active, stats.allocation);
            assert.deepEqual(stats.activeBytes, stats.allocatedBytes);
            allocator.validate();
            if (history) {
              const recorded = allocator.snapshot().history.filter((e) =>
                e.action === "alloc" || e.action === "free_requested" ||
                e.action === "free_completed"
              ).length;
              assert.equal(recorded, events);
            }
          }
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("rounds in integers up to 1 GiB and like roundSize() beyond", () => {
    const allocator = new CachingAllocator(
      new MockSegmentSource({ maxSegmentByteLength: 2 ** 33 }),
    );
    for (
      const n of [
        2 ** 30 - 1,
        2 ** 30,
        2 ** 30 + 1,
        2 ** 31 - 1,
        2 ** 31,
        2 ** 32 + 1,
      ]
    ) {
      const id = allocator.allocateId(n);
      assert.equal(allocator.blockByteLength(id), rounded(n), `${n}`);
      allocator.freeById(id);
      allocator.emptyCache();
    }
  });

  it("rounds with power-of-two divisions when they are set", () => {
    const allocator = new CachingAllocator(new MockSegmentSource(), {
      roundupPower2Divisions: 4,
    });
    for (const n of [1, 600, 5000, 70_000, 3 * MiB + 5]) {
      const id = allocator.allocateId(n);
      assert.equal(allocator.blockByteLength(id), allocator.roundSize(n));
      const handle = allocator.allocate(n);
      assert.equal(handle.blockByteLength, allocator.roundSize(n));
      handle.release();
      allocator.freeById(id);
    }
    assert.equal(allocator.roundSize(70_000), 81920); // not 70144: divisions
  });
});
