/**
 * `@allot/threads`: one heap that several Workers allocate from at once, and
 * storage handed between Workers without a copy.
 *
 * - {@linkcode SharedHeap}: a heap whose whole state lives in a
 *   `SharedArrayBuffer` or shared `WebAssembly.Memory`; per-Worker arenas of
 *   slabs in front of a locked page core, lock-free frees from any thread
 *   (mimalloc's remote free lists), dead-Worker reports and reclaim.
 * - {@linkcode SharedHeapAllocator}: the core `Allocator` over it, with a
 *   reference count in shared memory per allocation: `share(buffer)` gives a
 *   small descriptor to post, `receive(descriptor)` rebuilds the `Buffer`
 *   over the same bytes in the other Worker; the last release frees once.
 *
 * Cross-origin isolation is needed in browsers (`SharedArrayBuffer` exists
 * only on pages served with `Cross-Origin-Opener-Policy: same-origin` and
 * `Cross-Origin-Embedder-Policy: require-corp`).
 *
 * @example Two handles, one heap
 * ```ts
 * import { SharedHeap } from "@allot/threads";
 * import assert from "node:assert/strict";
 *
 * using heap = SharedHeap.create(4 << 20);
 * // In a Worker: SharedHeap.attach(descriptor) with the posted descriptor.
 * using worker = SharedHeap.attach(heap.descriptor());
 * const block = worker.alloc(256);
 * new Float32Array(heap.buffer, block, 64).fill(1);
 * heap.free(block);
 * assert.equal(heap.stats().allocations.current, 0);
 * ```
 *
 * @module
 */

export * from "./errors.ts";
export * from "./shared_heap.ts";
export * from "./shared_heap_allocator.ts";
