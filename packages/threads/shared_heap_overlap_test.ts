// SharedHeap.create() refuses bytes an open heap already manages
// (HeapOverlapError, nothing written), wherever that heap starts; places that
// do not meet an open heap, or meet only closed or abandoned ones, are taken.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError } from "@allot/core";
import { HeapOverlapError, SharedHeap } from "./mod.ts";

const KiB = 1024, MiB = 1024 * KiB;

/** What create() may not disturb: stats, integrity, and bytes of a block. */
function state(heap: SharedHeap, block: number) {
  heap.checkIntegrity();
  return { stats: heap.stats(), bytes: [...heap.bytes(block, 64)] };
}

describe("@allot/threads: overlapping heaps in one memory", () => {
  it("refuses a heap that starts inside, ends inside or covers an open heap; nothing changes", () => {
    const memory = new SharedArrayBuffer(8 * MiB);
    using heap = SharedHeap.create(memory, {
      byteOffset: 2 * MiB,
      byteLength: 2 * MiB,
    });
    const block = heap.alloc(64);
    heap.bytes(block, 64).fill(0x5a);
    const before = state(heap, block);
    for (
      const options of [
        { byteOffset: 3 * MiB }, // starts inside, runs past its end
        { byteOffset: 0, byteLength: 2 * MiB + 64 }, // ends inside
        { byteOffset: 0 }, // covers it
        { byteOffset: 2 * MiB + 8, byteLength: MiB }, // inside
        { byteOffset: 4 * MiB - 64 * KiB * 2, byteLength: MiB }, // its tail
      ]
    ) {
      assert.throws(
        () => SharedHeap.create(memory, options),
        (error: unknown) =>
          error instanceof HeapOverlapError &&
          error instanceof InvalidArgumentError &&
          /open at bytes \[2097152, 4194304\)/.test(error.message),
        JSON.stringify(options),
      );
      assert.deepEqual(state(heap, block), before, JSON.stringify(options));
    }
    // Next to it on either side is fine.
    using below = SharedHeap.create(memory, { byteLength: 2 * MiB });
    using above = SharedHeap.create(memory, { byteOffset: 4 * MiB });
    below.free(below.alloc(1000));
    above.free(above.alloc(100_000));
    assert.deepEqual(state(heap, block), before);
    heap.free(block);
  });

  it("a closed heap's bytes may be taken again", () => {
    const memory = new SharedArrayBuffer(4 * MiB);
    const heap = SharedHeap.create(memory, { byteLength: 2 * MiB });
    heap.close();
    using again = SharedHeap.create(memory, { byteOffset: MiB });
    again.free(again.alloc(100));
  });

  it("model: create() succeeds exactly when the range meets no open heap", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            offset: fc.integer({ min: 0, max: 63 }), // in 64 KiB units
            length: fc.integer({ min: 2, max: 16 }),
            close: fc.boolean(),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        (steps) => {
          const memory = new SharedArrayBuffer(5 * MiB);
          const open: { heap: SharedHeap; start: number; end: number }[] = [];
          try {
            for (const step of steps) {
              const start = step.offset * 64 * KiB;
              const end = Math.min(start + step.length * 64 * KiB, 5 * MiB);
              const meets = open.some((o) => o.start < end && start < o.end);
              let heap: SharedHeap | undefined;
              try {
                heap = SharedHeap.create(memory, {
                  byteOffset: start,
                  byteLength: end - start,
                });
              } catch (error) {
                if (error instanceof HeapOverlapError) {
                  assert.ok(meets, `refused [${start}, ${end}) meeting none`);
                  continue;
                }
                // too small for a heap: a plain InvalidArgumentError
                assert.ok(!(error instanceof HeapOverlapError));
                continue;
              }
              assert.ok(!meets, `placed [${start}, ${end}) over an open heap`);
              heap.free(heap.alloc(100));
              if (step.close) heap.close();
              else open.push({ heap, start, end });
            }
            for (const o of open) o.heap.checkIntegrity();
          } finally {
            for (const o of open) o.heap.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
