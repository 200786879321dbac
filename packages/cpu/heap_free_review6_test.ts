// CpuHeap.free() written out for good fit and compact, from the outside
// (review 6): hostile offsets (NaN, -0, fractions, huge, strings, interior
// and stale offsets, another heap's) are refused and change nothing, and a
// fast-check model over every placement writes a byte pattern to every live
// block while allocations (aligned or not), frees, reallocs, resizes in
// place and growth run in any order: every pattern survives, the integrity
// check holds, the counts add up, and everything goes back at the end.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "../core/_test_faults.ts";
import { AllotError, DoubleFreeError, OutOfMemoryError } from "@allot/core";
import { CpuHeap, type CpuHeapPlacement } from "./heap.ts";

const KiB = 1024;
const PLACEMENTS: CpuHeapPlacement[] = ["good-fit", "compact", "first-fit"];

function heapOf(placement: CpuHeapPlacement): CpuHeap {
  return new CpuHeap(64 * KiB, { placement, maxByteLength: 256 * KiB });
}

function state(heap: CpuHeap): string {
  return JSON.stringify([
    heap.stats(),
    heap.snapshot(),
    heap.freeRegionCount,
    heap.largestFreeBytes,
  ]);
}

describe("CpuHeap.free() (review 6)", () => {
  it("CpuHeap.free(): hostile, interior, stale and foreign offsets are refused and change nothing, on every placement", () => {
    for (const placement of PLACEMENTS) {
      const heap = heapOf(placement), other = heapOf(placement);
      const a = heap.alloc(100), b = heap.alloc(1000), c = heap.alloc(5);
      heap.bytes(b, 1000).fill(0x5a);
      heap.free(a); // (a free neighbour for b to merge with, if it could)
      const foreign = other.alloc(3000);
      const before = state(heap);
      const bad: unknown[] = [
        NaN,
        Infinity,
        -Infinity,
        -1,
        -64,
        b + 0.5,
        b + 1,
        b + heap.alignment, // inside b
        2 ** 31,
        2 ** 32 + b,
        2 ** 53,
        String(b),
        `${b}`,
        null,
        undefined,
        {},
        { valueOf: () => b },
        [b],
        BigInt(b),
        a, // freed
        foreign, // another heap's (past every block of this one)
        heap.byteLength, // the end
      ];
      for (const value of bad) {
        assert.throws(
          () => heap.free(value as number),
          AllotError,
          `${placement}: ${String(value)}`,
        );
        assert.equal(state(heap), before, `${placement}: ${String(value)}`);
      }
      assert.throws(() => heap.free(a), DoubleFreeError);
      assert.ok(heap.bytes(b, 1000).every((x) => x === 0x5a));
      heap.checkIntegrity();
      heap.free(b);
      heap.free(c);
      assert.equal(heap.allocationCount, 0);
      assert.equal(heap.freeRegionCount, 1);
      assert.equal(heap.largestFreeBytes, heap.byteLength);
      other.free(foreign);
    }
  });

  it("CpuHeap.free(-0) frees the block at offset 0 (-0 is 0), on every placement", () => {
    for (const placement of PLACEMENTS) {
      const heap = heapOf(placement);
      const a = heap.alloc(64);
      assert.equal(a, 0);
      heap.free(-0);
      assert.equal(heap.allocationCount, 0);
      assert.throws(() => heap.free(0), DoubleFreeError);
      heap.checkIntegrity();
    }
  });

  it("model: byte patterns survive allocations, frees (every merge case), reallocs, resizes in place and growth; counts add up; everything goes back (every placement)", () => {
    type Op =
      | { op: "alloc"; size: number; align: number }
      | { op: "free"; i: number }
      | { op: "realloc"; i: number; size: number }
      | { op: "resize"; i: number; size: number }
      | { op: "bad"; i: number; delta: number };
    const size = fc.oneof(
      { weight: 3, arbitrary: fc.integer({ min: 0, max: 512 }) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 24 * KiB }) },
    );
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          op: fc.constant("alloc" as const),
          size,
          align: fc.constantFrom(0, 0, 0, 16, 128, 4096),
        }),
      },
      {
        weight: 6,
        arbitrary: fc.record({ op: fc.constant("free" as const), i: fc.nat() }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          op: fc.constant("realloc" as const),
          i: fc.nat(),
          size,
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          op: fc.constant("resize" as const),
          i: fc.nat(),
          size,
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("bad" as const),
          i: fc.nat(),
          delta: fc.integer({ min: 1, max: 63 }),
        }),
      },
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...PLACEMENTS),
        fc.array(op, { maxLength: 150, size: "max" }),
        (placement, ops) => {
          const heap = heapOf(placement);
          const live: { offset: number; length: number; fill: number }[] = [];
          let fill = 1;
          const write = (
            b: { offset: number; length: number; fill: number },
          ) => {
            const bytes = heap.bytes(b.offset, b.length);
            for (let j = 0; j < bytes.length; j++) {
              bytes[j] = (b.fill + j * 7) & 0xff;
            }
          };
          const check = () => {
            heap.checkIntegrity();
            for (const b of live) {
              const bytes = heap.bytes(b.offset, b.length);
              for (let j = 0; j < bytes.length; j++) {
                if (bytes[j] !== ((b.fill + j * 7) & 0xff)) {
                  throw new Error(
                    `${placement}: block at ${b.offset} lost byte ${j}`,
                  );
                }
              }
            }
            assert.equal(heap.allocationCount, live.length);
            // the largest free region is the snapshot's largest free block
            let largest = 0, regions = 0;
            for (const blk of heap.snapshot()) {
              if (!blk.free) continue;
              regions++;
              largest = Math.max(largest, blk.byteLength);
            }
            assert.equal(heap.largestFreeBytes, largest);
            assert.equal(heap.freeRegionCount, regions);
            assert.equal(heap.allocatedBytes + heap.freeBytes, heap.byteLength);
          };
          for (const o of ops) {
            if (o.op === "alloc") {
              let offset: number;
              try {
                offset = o.align === 0
                  ? heap.alloc(o.size)
                  : heap.alloc(o.size, o.align);
              } catch (error) {
                assert.ok(error instanceof OutOfMemoryError, String(error));
                continue;
              }
              if (o.align !== 0) assert.equal(offset % o.align, 0);
              const b = { offset, length: o.size, fill: fill++ & 0xff };
              write(b);
              live.push(b);
            } else if (live.length === 0) {
              continue;
            } else if (o.op === "free") {
              const [b] = live.splice(o.i % live.length, 1);
              heap.free(b.offset);
            } else if (o.op === "realloc") {
              const b = live[o.i % live.length];
              let offset: number;
              try {
                offset = heap.realloc(b.offset, o.size);
              } catch (error) {
                assert.ok(error instanceof OutOfMemoryError, String(error));
                continue;
              }
              const kept = heap.bytes(offset, Math.min(b.length, o.size));
              for (let j = 0; j < kept.length; j++) {
                assert.equal(kept[j], (b.fill + j * 7) & 0xff);
              }
              b.offset = offset;
              b.length = o.size;
              write(b);
            } else if (o.op === "resize") {
              const b = live[o.i % live.length];
              if (heap.resizeInPlace(b.offset, o.size)) {
                b.length = o.size;
                write(b);
              }
            } else {
              const b = live[o.i % live.length];
              const before = state(heap);
              assert.throws(() => heap.free(b.offset + o.delta), AllotError);
              assert.equal(state(heap), before);
            }
            check();
          }
          for (const b of live) heap.free(b.offset);
          assert.equal(heap.allocationCount, 0);
          assert.equal(heap.freeRegionCount, 1);
          assert.equal(heap.largestFreeBytes, heap.byteLength);
          heap.checkIntegrity();
        },
      ),
      { numRuns: modelRuns(300) },
    );
  });
});
