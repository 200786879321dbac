/**
 * Outside-in checks of `@allot/cpu` against look-alikes and shared state:
 * `view()` of `Object.create(DataPtr.prototype)` is refused with a typed
 * error (it used to throw a TypeError while writing its own message), and
 * `heaps` is a copy a caller cannot use to change the allocator.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DataPtr, InvalidArgumentError, OutOfMemoryError } from "@allot/core";
import { CpuAllocator, CpuHeap } from "./mod.ts";

// Buffers and memories whose own properties claim more bytes than they have.
class LongArrayBuffer extends ArrayBuffer {
  override get byteLength(): number {
    return 1 << 20;
  }
}
class LongSharedArrayBuffer extends SharedArrayBuffer {
  override get byteLength(): number {
    return 1 << 20;
  }
}
class LongMemory extends WebAssembly.Memory {}
Object.defineProperty(LongMemory.prototype, "buffer", {
  get: () => new ArrayBuffer(1 << 20),
});
// A resizable buffer whose resize does nothing but whose byteLength says it
// did.
class ClaimedResize extends ArrayBuffer {
  claimed = 0;
  override resize(byteLength: number): void {
    this.claimed = byteLength;
  }
  override get byteLength(): number {
    return Math.max(this.claimed, super.byteLength);
  }
}

describe("@allot/cpu look-alikes", () => {
  it("CpuAllocator.view refuses a look-alike DataPtr with InvalidArgumentError", () => {
    const allocator = new CpuAllocator({ byteLength: 1 << 16 });
    const fake = Object.create(DataPtr.prototype);
    assert.throws(() => allocator.view(fake, Uint8Array), InvalidArgumentError);
    assert.equal(allocator.allocatedBytes, 0);
  });

  it("CpuAllocator.heaps is a copy: a caller's push or splice never reaches the allocator", () => {
    const allocator = new CpuAllocator({ byteLength: 1 << 16 });
    const heaps = allocator.heaps as CpuAllocator["heap"][];
    const first = heaps[0];
    heaps.splice(0, heaps.length);
    assert.equal(allocator.heaps.length, 1);
    assert.equal(allocator.heaps[0], first);
    using ptr = allocator.allocate(64);
    assert.equal(ptr.byteLength, 64);
  });

  it("CpuHeap reads the engine's byte length, not a subclass's byteLength", () => {
    for (
      const memory of [
        new LongArrayBuffer(4096),
        new LongSharedArrayBuffer(4096),
      ]
    ) {
      assert.equal(memory.byteLength, 1 << 20); // the lie
      const heap = new CpuHeap(memory);
      assert.equal(heap.byteLength, 4096);
      assert.throws(() => heap.alloc(8192), OutOfMemoryError);
      const at = heap.alloc(4096);
      assert.equal(heap.bytes(at, 4096).length, 4096);
      assert.throws(
        () => new CpuHeap(new LongArrayBuffer(4096), { byteOffset: 8192 }),
        InvalidArgumentError,
      );
    }
  });

  it("CpuHeap reads a WebAssembly.Memory's own buffer, not a subclass's buffer getter", () => {
    const memory = new LongMemory({ initial: 1, maximum: 2 });
    const heap = new CpuHeap(memory);
    assert.equal(heap.byteLength, 65536);
    assert.throws(() => heap.alloc(65536 + 64), OutOfMemoryError);
    const realBuffer = Object.getOwnPropertyDescriptor(
      WebAssembly.Memory.prototype,
      "buffer",
    )!.get!;
    assert.equal(heap.buffer, realBuffer.call(memory));
    const growing = new LongMemory({ initial: 1, maximum: 2 });
    const grown = new CpuHeap(growing, { maxByteLength: 2 * 65536 });
    const at = grown.alloc(65536 + 64); // grows to two real pages
    assert.equal(grown.byteLength, 2 * 65536);
    assert.equal(grown.generation, 1);
    assert.equal(grown.buffer, realBuffer.call(growing));
    assert.equal(grown.bytes(at, 65536 + 64).buffer, realBuffer.call(growing));
  });

  it("CpuHeap does not grow into bytes a resize only claimed", () => {
    const memory = new ClaimedResize(4096, { maxByteLength: 1 << 16 });
    const heap = new CpuHeap(memory, { maxByteLength: 1 << 16 });
    assert.throws(() => heap.alloc(8192), OutOfMemoryError);
    assert.equal(heap.byteLength, 4096);
    assert.equal(heap.allocationCount, 0);
    heap.checkIntegrity();
  });
});
