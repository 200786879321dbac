/**
 * {@linkcode WatermarkOutOfMemoryError}: a request the watermark allocator
 * could not serve.
 *
 * @module
 */

import { OutOfMemoryError } from "@allot/core";

/** Figures of a {@linkcode WatermarkOutOfMemoryError}. */
export interface WatermarkOutOfMemoryDetails {
  /** Bytes asked for, after alignment. */
  requestedBytes: number;
  /** Bytes of this allocator's heaps. */
  allocatedBytes: number;
  /** Driver bytes not in this allocator's heaps. */
  otherBytes: number;
  /** The high watermark limit (`Infinity` when disabled). */
  maxAllowedBytes: number;
}

/**
 * A request could not be served. Like MPS's message, it states the
 * allocator's heap bytes, other driver bytes, the maximum allowed and the
 * request.
 *
 * @example
 * ```ts
 * import { WatermarkAllocator, WatermarkOutOfMemoryError } from "@allot/watermark";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 64 << 20 }), { highWatermarkRatio: 1 });
 * assert.throws(() => allocator.allocateBuffer(100 << 20), WatermarkOutOfMemoryError);
 * ```
 */
export class WatermarkOutOfMemoryError extends OutOfMemoryError {
  /** Driver bytes not in this allocator's heaps. */
  readonly otherBytes: number;
  /** The high watermark limit (`Infinity` when disabled). */
  readonly maxAllowedBytes: number;

  /**
   * Creates the error.
   *
   * @param message Message with the figures.
   * @param details The figures.
   */
  constructor(message: string, details: WatermarkOutOfMemoryDetails) {
    super(message, {
      requestedBytes: details.requestedBytes,
      reservedBytes: details.allocatedBytes,
      capacityBytes: details.maxAllowedBytes,
    });
    this.otherBytes = details.otherBytes;
    this.maxAllowedBytes = details.maxAllowedBytes;
  }
}
