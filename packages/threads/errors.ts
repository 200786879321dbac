/**
 * Errors of `@allot/threads`: what cannot work across Workers.
 *
 * @module
 */

import { AllotError, InvalidArgumentError } from "@allot/core";

/**
 * The memory is not shared: a plain `ArrayBuffer`, or a
 * `WebAssembly.Memory` made without `shared: true`. Workers can only copy or
 * transfer such memory, never allocate from it at once.
 *
 * @example
 * ```ts
 * import { NotSharedMemoryError, SharedHeap } from "@allot/threads";
 * import assert from "node:assert/strict";
 *
 * const plain: unknown = new ArrayBuffer(1 << 20);
 * assert.throws(() => SharedHeap.create(plain as SharedArrayBuffer), NotSharedMemoryError);
 * ```
 */
export class NotSharedMemoryError extends InvalidArgumentError {}

/**
 * {@linkcode SharedHeap.create} was asked to place a heap over bytes that an
 * open heap (with handles attached) already manages: the new header and page
 * records would hand the same bytes out twice. Nothing was written.
 *
 * What is detected: every open heap whose header lies in the memory, made in
 * this agent or in any Worker that shares it (create() reads the memory's
 * 64-byte lines for headers). What is not: two `create()` calls racing in two
 * agents over overlapping bytes (neither header exists when the other looks),
 * a heap whose handles have all detached without `close()` (it is
 * abandoned, and its place may be reused), and memory that other code (not a
 * `SharedHeap`) uses.
 *
 * @example
 * ```ts
 * import { HeapOverlapError, SharedHeap } from "@allot/threads";
 * import assert from "node:assert/strict";
 *
 * const memory = new SharedArrayBuffer(4 << 20);
 * using heap = SharedHeap.create(memory, { byteLength: 2 << 20 });
 * assert.throws(
 *   () => SharedHeap.create(memory, { byteOffset: 1 << 20 }),
 *   HeapOverlapError,
 * );
 * using other = SharedHeap.create(memory, { byteOffset: 2 << 20 }); // no overlap
 * ```
 */
export class HeapOverlapError extends InvalidArgumentError {}

/**
 * A descriptor (of a heap or of a shared storage) names another heap than
 * the one it was given to, or the memory holds no heap at that place.
 *
 * @example
 * ```ts
 * import { ForeignHeapError, SharedHeap } from "@allot/threads";
 * import assert from "node:assert/strict";
 *
 * const a = SharedHeap.create(1 << 20);
 * const b = SharedHeap.create(1 << 20);
 * assert.throws(
 *   () => SharedHeap.attach({ ...a.descriptor(), heapId: b.heapId }),
 *   ForeignHeapError,
 * );
 * a.detach();
 * b.detach();
 * ```
 */
export class ForeignHeapError extends AllotError {}

/**
 * The heap was closed by its owner ({@linkcode SharedHeap.close}), or this
 * handle was detached: nothing may be allocated or freed through it.
 *
 * @example
 * ```ts
 * import { HeapClosedError, SharedHeap } from "@allot/threads";
 * import assert from "node:assert/strict";
 *
 * const heap = SharedHeap.create(1 << 20);
 * heap.close();
 * assert.throws(() => heap.alloc(64), HeapClosedError);
 * ```
 */
export class HeapClosedError extends AllotError {}

/**
 * The heap's shared core stayed locked longer than the wait limit, for
 * example because the Worker that held the lock was terminated inside it.
 * The call changed nothing. `holder` is the arena that holds the lock.
 *
 * @example
 * ```ts
 * import { HeapBusyError } from "@allot/threads";
 * import assert from "node:assert/strict";
 *
 * assert.equal(new HeapBusyError("Cannot lock: held by arena 3", 3).holder, 3);
 * ```
 */
export class HeapBusyError extends AllotError {
  /** The arena that held the lock. */
  readonly holder: number;

  /**
   * Creates a busy error.
   *
   * @param message What could not be done and who held the lock.
   * @param holder The arena that held the lock.
   */
  constructor(message: string, holder: number) {
    super(message);
    this.holder = holder;
  }
}
