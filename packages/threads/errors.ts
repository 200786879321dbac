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
