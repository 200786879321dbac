/**
 * {@linkcode SegmentSourceError}: the segment source itself failed.
 *
 * @module
 */

import { AllotError } from "@allot/core";

/**
 * The segment source threw while the allocator asked it for a segment or gave
 * one back. The allocator's state is as it was before the failing call; the
 * source's error is the `cause`.
 *
 * @example
 * ```ts
 * import { SegmentSourceError, WatermarkAllocator } from "@allot/watermark";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource({ capacityBytes: 2 ** 30 });
 * const allocator = new WatermarkAllocator(device);
 * device.throwNext();
 * assert.throws(() => allocator.allocateBuffer(64), SegmentSourceError);
 * allocator.allocateBuffer(64).release(); // usable afterwards
 * ```
 */
export class SegmentSourceError extends AllotError {}
