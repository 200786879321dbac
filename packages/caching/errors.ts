/**
 * Errors of the caching allocator: an out-of-memory error that explains
 * itself like PyTorch's, and an error for a segment source that threw.
 *
 * @module
 */

import { type OutOfMemoryDetails, OutOfMemoryError } from "@allot/core";

/** Figures of a {@linkcode CachingOutOfMemoryError}, in bytes. */
export interface CachingOutOfMemoryDetails extends OutOfMemoryDetails {
  /** Bytes the caller asked for, before rounding. */
  requestedByteLength: number;
  /** Bytes the allocator may reserve (memory fraction times capacity). */
  allowedBytes: number;
  /** Bytes freed by callers but still waiting for fences. */
  pendingFreeBytes: number;
}

/**
 * A caching allocator could not serve a request, after freeing its cache and
 * retrying. The message follows PyTorch's: what was asked, the device's
 * capacity and free bytes, what this allocator holds allocated and reserved
 * but unallocated, and a hint when fragmentation is the likely cause.
 *
 * @example
 * ```ts
 * import { CachingAllocator, CachingOutOfMemoryError } from "@allot/caching";
 * import { MockSegmentSource, OutOfMemoryError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const allocator = new CachingAllocator(new MockSegmentSource({ capacityBytes: 2 ** 21 }));
 * assert.throws(() => allocator.allocate(2 ** 22), (error: unknown) => {
 *   assert.ok(error instanceof CachingOutOfMemoryError);
 *   assert.ok(error instanceof OutOfMemoryError);
 *   assert.match(error.message, /tried to allocate 4\.00 MiB/);
 *   return true;
 * });
 * ```
 */
export class CachingOutOfMemoryError extends OutOfMemoryError {
  /** Bytes the caller asked for, before rounding. */
  readonly requestedByteLength: number;
  /** Bytes the allocator may reserve. */
  readonly allowedBytes: number;
  /** Bytes freed by callers but still waiting for fences. */
  readonly pendingFreeBytes: number;

  /**
   * Creates the error.
   *
   * @param message The explanation.
   * @param details The figures.
   */
  constructor(message: string, details: CachingOutOfMemoryDetails) {
    super(message, details);
    this.requestedByteLength = details.requestedByteLength;
    this.allowedBytes = details.allowedBytes;
    this.pendingFreeBytes = details.pendingFreeBytes;
  }
}

/**
 * Re-exported from `@allot/core`, where every pooling allocator takes its
 * segments through {@linkcode acquireSegment}.
 */
export { SegmentSourceError } from "@allot/core";
