import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { _Heap } from "./_heap.ts";
import { _Pool } from "./_pool.ts";
import { modelRuns } from "../core/_test_faults.ts";

function makeHeap(byteLength: number): _Heap {
  return new _Heap(
    { memory: {}, byteOffset: 0, byteLength },
    new _Pool("private", true),
    true,
    0,
  );
}

describe("_Heap", () => {
  it("_Heap.give() merges a range with its free neighbours", () => {
    const heap = makeHeap(1024);
    const a = heap.take(256), b = heap.take(256), c = heap.take(256);
    assert.deepEqual([a, b, c], [0, 256, 512]);
    assert.equal(heap.largestFree, 256);
    heap.give(a, 256);
    heap.give(c, 256);
    assert.equal(heap.freeRanges().length, 2);
    heap.give(b, 256);
    assert.deepEqual(heap.freeRanges(), [{ offset: 0, byteLength: 1024 }]);
    assert.equal(heap.largestFree, 1024);
  });

  it("_Heap.take() picks the smallest range that fits", () => {
    const heap = makeHeap(1024);
    const offsets = [0, 1, 2, 3].map(() => heap.take(256));
    heap.give(offsets[0], 256);
    heap.give(offsets[2], 256);
    heap.give(offsets[3], 256); // merges with [512, 768)
    assert.equal(heap.take(256), 0);
    assert.equal(heap.take(1024), -1);
  });

  it("_Heap keeps taken ranges disjoint and free bytes exact under random use", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 1, max: 16 })), {
          maxLength: 60,
        }),
        (ops) => {
          const unit = 64;
          const heap = makeHeap(64 * unit);
          const taken: { offset: number; byteLength: number }[] = [];
          for (const [alloc, n] of ops) {
            if (alloc || taken.length === 0) {
              const offset = heap.take(n * unit);
              if (offset >= 0) taken.push({ offset, byteLength: n * unit });
              else assert.ok(heap.largestFree < n * unit);
            } else {
              const r = taken.splice(n % taken.length, 1)[0];
              heap.give(r.offset, r.byteLength);
            }
            const sorted = [...taken].sort((a, b) => a.offset - b.offset);
            for (let i = 1; i < sorted.length; i++) {
              assert.ok(
                sorted[i - 1].offset + sorted[i - 1].byteLength <=
                  sorted[i].offset,
              );
            }
            const used = taken.reduce((s, r) => s + r.byteLength, 0);
            assert.equal(heap.freeBytes + used, heap.byteLength);
          }
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});
