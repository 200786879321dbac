import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { SharedHeap } from "./shared_heap.ts";
import { SharedHeapAllocator } from "./shared_heap_allocator.ts";
import { DoubleFreeError } from "@allot/core";

// One owner per block: SharedHeapAllocator marks every block it hands out
// in the heap's shared memory, so a raw SharedHeap.free of it, through any
// handle (any Worker), throws DoubleFreeError and changes nothing.
describe("SharedHeapAllocator: stale ownership between DataPtr and heap.free", () => {
  it(
    "a raw heap.free of a DataPtr's block cannot free the next owner's block",
    () => {
      using heap = SharedHeap.create(1 << 20);
      const allocator = new SharedHeapAllocator(heap);
      const p = allocator.allocate(256);
      try {
        heap.free(p.getContext() as number); // the misuse
      } catch {
        // refused (the fix)
      }
      const q = allocator.allocate(256);
      new Uint8Array(q.memory, q.byteOffset, 256).fill(0xab);
      try {
        p.release();
      } catch {
        // refused
      }
      const r = allocator.allocate(256);
      new Uint8Array(r.memory, r.byteOffset, 256).fill(0xcd);
      assert.ok(
        new Uint8Array(q.memory, q.byteOffset, 256).every((b) => b === 0xab),
      );
      q.release();
      r.release();
    },
  );

  for (
    const [label, size, strict] of [
      ["small block", 256, false],
      ["large span", 40_000, false],
      ["small block, strict heap", 256, true],
      ["large span, strict heap", 40_000, true],
    ] as const
  ) {
    it(`raw free of an owned ${label}, through its own or another handle, is refused and changes nothing`, () => {
      using heap = SharedHeap.create(1 << 22, { strict });
      using other = SharedHeap.attach(heap.descriptor());
      const allocator = new SharedHeapAllocator(heap);
      const p = allocator.allocate(size);
      const bytes = new Uint8Array(p.memory, p.byteOffset, size).fill(0x5a);
      const block = p.getContext() as number;
      const before = heap.stats();
      for (const h of [heap, other]) {
        assert.throws(() => h.free(block), DoubleFreeError);
      }
      assert.deepEqual(heap.stats(), before);
      assert.ok(bytes.every((b) => b === 0x5a));
      p.release();
      assert.equal(heap.stats().allocations.current, 0);
      // The mark went with the block: a raw block at that place frees.
      const raw = heap.alloc(size + 64);
      heap.free(raw);
      assert.throws(() => heap.free(raw), DoubleFreeError);
      assert.equal(heap.stats().allocations.current, 0);
    });
  }

  it("double release of one DataPtr frees once", () => {
    using heap = SharedHeap.create(1 << 20);
    const allocator = new SharedHeapAllocator(heap);
    const p = allocator.allocate(256);
    p.release();
    const q = allocator.allocate(256);
    new Uint8Array(q.memory, q.byteOffset, 256).fill(0xab);
    p.release();
    const r = allocator.allocate(256);
    new Uint8Array(r.memory, r.byteOffset, 256).fill(0xcd);
    assert.ok(
      new Uint8Array(q.memory, q.byteOffset, 256).every((b) => b === 0xab),
    );
    q.release();
    r.release();
  });
});
