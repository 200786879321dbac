/**
 * Third outside-in review of `@allot/threads`: memories that lie about
 * themselves (a `SharedArrayBuffer` subclass whose `byteLength` getter
 * lies, an object whose conversion to a string throws, a look-alike of the
 * prototype) and a descriptor whose `memory` getter answers one memory to
 * the check and another afterwards.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { NotSharedMemoryError, SharedHeap } from "./mod.ts";

class LyingLength extends SharedArrayBuffer {
  override get byteLength(): number {
    return 1 << 30;
  }
}

describe("threads third review", () => {
  it("SharedHeap.create() and attach() size the heap from the memory's true length, not an overridden byteLength", () => {
    using heap = SharedHeap.create(new LyingLength(1 << 20));
    assert.ok(heap.byteLength <= 1 << 20);
    const offset = heap.alloc(4096);
    heap.bytes(offset, 4096).fill(7);
    heap.free(offset);
    using other = SharedHeap.attach({
      ...heap.descriptor(),
      memory: heap.memory,
    });
    assert.equal(other.heapId, heap.heapId);
  });

  it("SharedHeap.create() refuses memories that cannot be printed or only look shared with NotSharedMemoryError", () => {
    const lookalike = Object.create(SharedArrayBuffer.prototype);
    const revoked = Proxy.revocable(new SharedArrayBuffer(1 << 20), {});
    revoked.revoke();
    for (
      const memory of [
        Object.create(null),
        {
          toString: () => {
            throw new Error("no");
          },
        },
        lookalike,
        revoked.proxy,
        new Proxy(new SharedArrayBuffer(1 << 20), {}),
      ]
    ) {
      assert.throws(
        () => SharedHeap.create(memory as SharedArrayBuffer),
        NotSharedMemoryError,
      );
    }
  });

  it("SharedHeap.attach() reads the descriptor's memory once: a getter answering another memory later cannot move the handle", () => {
    using heap = SharedHeap.create(1 << 20);
    const descriptor = heap.descriptor();
    const elsewhere = new SharedArrayBuffer(1 << 20);
    let reads = 0;
    const sly = {
      ...descriptor,
      get memory() {
        return reads++ === 0 ? descriptor.memory : elsewhere;
      },
    };
    using attached = SharedHeap.attach(sly);
    assert.equal(attached.buffer, heap.buffer);
    assert.equal(reads, 1);
    // nothing was written into the other memory
    assert.ok(new Int32Array(elsewhere).every((w) => w === 0));
  });
});
