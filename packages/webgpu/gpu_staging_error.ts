/**
 * {@linkcode GpuStagingError}: a transfer through `GpuStaging`
 * failed on the device for a reason other than device loss.
 *
 * @module
 */

import { AllotError } from "@allot/core";

/** Details of a {@linkcode GpuStagingError}. */
export interface GpuStagingErrorDetails {
  /** The transfer that failed. */
  operation: "upload" | "download";
  /** Bytes the transfer was asked to move. */
  byteLength: number;
  /** What the device threw or rejected with (a `DOMException`, say). */
  cause: unknown;
}

/**
 * A transfer through `GpuStaging` failed on the device: a
 * staging buffer's `mapAsync` rejected, or its mapped range was refused,
 * while the device was not lost (a lost device gives `DeviceLostError`).
 * The device's own error is the `cause`. The failed staging buffer is
 * destroyed, not pooled again.
 *
 * @example Read the cause
 * ```ts
 * import { GpuStagingError } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const cause = new Error("OperationError");
 * const error = new GpuStagingError("Cannot download 64 bytes: mapping a staging buffer failed: OperationError", { operation: "download", byteLength: 64, cause });
 * assert.equal(error.cause, cause);
 * assert.equal(error.operation, "download");
 * ```
 */
export class GpuStagingError extends AllotError {
  /** The transfer that failed. */
  readonly operation: "upload" | "download";
  /** Bytes the transfer was asked to move. */
  readonly byteLength: number;

  /**
   * Creates the error.
   *
   * @param message What failed, with the device's message.
   * @param details The operation, its byte length and the cause.
   */
  constructor(message: string, details: GpuStagingErrorDetails) {
    super(message, { cause: details.cause });
    this.operation = details.operation;
    this.byteLength = details.byteLength;
  }
}
