/**
 * {@linkcode DeviceLostError}: thrown by every handle and operation of a
 * `GPUDevice` that was lost or destroyed.
 *
 * @module
 */

import { AllotError } from "@allot/core";

/**
 * The `GPUDevice` behind a handle or an operation was lost (destroyed, or
 * lost by the driver). Nothing was submitted; every later use throws the same
 * error.
 *
 * @example Catch a lost device
 * ```ts
 * import { DeviceLostError } from "@allot/webgpu";
 * import { AllotError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const error = new DeviceLostError("Cannot upload 16 bytes: device \"gpu\" was lost (destroyed)", { reason: "destroyed" });
 * assert.ok(error instanceof AllotError);
 * assert.equal(error.reason, "destroyed");
 * ```
 */
export class DeviceLostError extends AllotError {
  /** Why the device was lost: `"destroyed"` or `"unknown"`. */
  readonly reason: string;

  /**
   * Creates a device-lost error.
   *
   * @param message Message that names the refused operation and the device.
   * @param details The loss reason reported by `device.lost`.
   */
  constructor(message: string, details: { reason: string }) {
    super(message);
    this.reason = details.reason;
  }
}
