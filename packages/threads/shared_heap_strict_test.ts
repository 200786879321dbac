import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AllotError,
  DoubleFreeError,
  InvalidArgumentError,
  JUNK_BYTE,
} from "@allot/core";
import { SharedHeap, SharedHeapAllocator } from "./mod.ts";

const MiB = 1 << 20;

function counting(heap: SharedHeap): { calls: number } {
  const counter = { calls: 0 };
  const check = heap.checkIntegrity.bind(heap);
  Object.defineProperty(heap, "checkIntegrity", {
    value: () => {
      counter.calls++;
      check();
    },
  });
  return counter;
}

describe("SharedHeap strict mode", () => {
  it("SharedHeap in strict mode junk-fills a block before its free and checks integrity after each change; off by default", () => {
    for (const strict of [true, false]) {
      using heap = SharedHeap.create(4 * MiB, { strict });
      assert.equal(heap.strict, strict);
      const counter = counting(heap);
      const small = heap.alloc(64); // 1
      const large = heap.alloc(100_000); // 1
      const staleSmall = heap.bytes(small, 64).fill(1);
      const staleLarge = heap.bytes(large, 100_000).fill(1);
      heap.free(small); // 1
      heap.free(large); // 1
      assert.equal(staleSmall.every((x) => x === JUNK_BYTE), strict);
      assert.equal(staleLarge.every((x) => x === JUNK_BYTE), strict);
      assert.equal(counter.calls, strict ? 4 : 0);
      // a refused free fills nothing
      const live = heap.alloc(64);
      heap.bytes(live, 64).fill(2);
      // inside a block: an offset of no block this heap holds
      assert.throws(() => heap.free(live + 8), DoubleFreeError);
      assert.equal(heap.bytes(live, 64)[0], 2);
      heap.free(live);
    }
  });

  it("SharedHeap in strict mode checks integrity after allocations that alloc()'s fast path would serve", () => {
    using heap = SharedHeap.create(4 * MiB, { strict: true });
    const warm = [heap.alloc(64), heap.alloc(100_000)];
    heap.free(warm[1]); // cached: the next alloc of that size is a hit
    const counter = counting(heap);
    const small = heap.alloc(64); // from the current slab
    const large = heap.alloc(100_000); // from the span cache
    assert.equal(large, warm[1]);
    assert.equal(counter.calls, 2);
    heap.free(small);
    heap.free(large);
    heap.free(warm[0]);
    assert.equal(counter.calls, 5);
  });

  it("SharedHeap in strict mode stops at a slab header overwritten by a wild write; off, it goes on", () => {
    for (const strict of [true, false]) {
      using heap = SharedHeap.create(4 * MiB, { strict });
      const a = heap.alloc(64);
      const b = heap.alloc(200_000);
      // the slab's header sits in front of its first block
      new Int32Array(heap.buffer, a - 3328, 2)[1] = 12345;
      if (strict) {
        assert.throws(
          () => heap.free(b),
          (error: unknown) =>
            error instanceof AllotError &&
            /^SharedHeap is inconsistent: Slab at page \d+: class and size disagree$/
              .test(error.message),
        );
      } else heap.free(b);
    }
  });

  it("SharedHeap strict mode reaches attached handles and SharedHeapAllocator; strict must be a boolean", () => {
    using heap = SharedHeap.create(4 * MiB, { strict: true });
    using other = SharedHeap.attach(heap.descriptor());
    assert.equal(other.strict, true);
    const counter = counting(other);
    const allocator = new SharedHeapAllocator(other);
    const ptr = allocator.allocate(100);
    const stale = new Uint8Array(ptr.memory, ptr.byteOffset, 100).fill(1);
    ptr.release();
    assert.ok(stale.every((x) => x === JUNK_BYTE));
    assert.equal(counter.calls, 2);
    for (const strict of [1, "yes", null, {}]) {
      assert.throws(
        () => SharedHeap.create(4 * MiB, { strict: strict as boolean }),
        InvalidArgumentError,
      );
    }
  });
});
