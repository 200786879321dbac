import assert from "node:assert/strict";
import { SharedHeap } from "./mod.ts";
import { H_ARENAS, H_FREE_PAGES, H_LOCK, H_STATE } from "./_layout.ts";

const MiB = 1 << 20;

Deno.test("SharedHeap puts its header on a cache line: the hot words of different threads never share one", () => {
  // Distinct 64-byte lines: read-mostly state, the lock, the core, arenas.
  const line = (word: number) => Math.floor(word / 16);
  assert.notEqual(line(H_STATE), line(H_LOCK));
  assert.notEqual(line(H_LOCK), line(H_FREE_PAGES));
  assert.equal(H_ARENAS % 16, 0);
  const memory = new SharedArrayBuffer(4 * MiB);
  for (const byteOffset of [0, 8, 56, 64, 4104]) {
    using heap = SharedHeap.create(memory, { byteOffset, byteLength: 2 * MiB });
    assert.equal(heap.byteOffset % 64, 0, `header of ${byteOffset} aligned`);
    assert.ok(
      heap.byteOffset >= byteOffset && heap.byteOffset < byteOffset + 64,
    );
    assert.equal(heap.byteOffset + heap.byteLength, byteOffset + 2 * MiB);
    using other = SharedHeap.attach(heap.descriptor());
    const a = other.alloc(100);
    assert.ok(a >= byteOffset + 4096 && a < byteOffset + 2 * MiB);
    heap.free(a);
    heap.checkIntegrity();
  }
});
