/**
 * Internal: the watermark allocator's requests: the check of a buffer
 * request ({@linkcode _checkBufferRequest}) and the out-of-memory error
 * when every attempt failed ({@linkcode _throwWatermarkOom}, MPS's
 * message).
 *
 * @module
 */

import {
  alignUp,
  describeValue,
  formatBytes,
  InvalidArgumentError,
  validateByteLength,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import type { _WatermarkPolicy } from "./_watermark_policy.ts";
import type { AllocateBufferOptions } from "./watermark_options.ts";
import { WatermarkOutOfMemoryError } from "./watermark_out_of_memory_error.ts";

/**
 * Checks a request: a size of at least 1 byte that fits a segment after
 * alignment, and a pool of `private` or `shared`.
 *
 * @returns The pool.
 * @throws {InvalidArgumentError} Naming the value and the limit.
 */
export function _checkBufferRequest<M>(
  p: _WatermarkPolicy<M>,
  byteLength: number,
  options: AllocateBufferOptions,
  keys: readonly string[] = SYNC_KEYS,
): "private" | "shared" {
  validateObject(options, "options");
  // a misspelt key (`pol` for `pool`) did nothing, silently; a for-in
  // first: no array on the common path
  let known = true;
  try {
    for (const key in options) {
      if (!keys.includes(key)) {
        known = false;
        break;
      }
    }
  } catch {
    known = false; // keys that cannot be read: refused (typed) just below
  }
  if (!known) {
    validateOptionKeys(options, keys, "WatermarkAllocator.allocateBuffer()");
  }
  const max = p.maxSegment;
  validateByteLength(byteLength, max);
  if (alignUp(byteLength, p.alignment) > max) {
    throw new InvalidArgumentError(
      `Cannot allocate ${byteLength} bytes: after alignment to ${p.alignment} it exceeds the largest segment of ${max} bytes`,
      { name: "byteLength", value: byteLength, limit: max },
    );
  }
  const kind = options.pool ?? "private";
  if (kind !== "private" && kind !== "shared") {
    throw new InvalidArgumentError(
      `Cannot allocate ${byteLength} bytes: pool must be "private" or "shared", received ${
        describeValue(kind)
      }`,
      { name: "pool", value: kind, limit: ["private", "shared"] },
    );
  }
  return kind;
}

/** The keys of `AllocateBufferOptions` and `AllocateBufferAsyncOptions`. */
const SYNC_KEYS: readonly string[] = ["pool"];
/** The keys {@linkcode _checkBufferRequest} accepts for the async verb. */
export const _ASYNC_BUFFER_KEYS: readonly string[] = ["pool", "signal"];

/**
 * Throws the out-of-memory error of a request that every attempt failed.
 *
 * @throws {WatermarkOutOfMemoryError} Always.
 */
export function _throwWatermarkOom<M>(
  p: _WatermarkPolicy<M>,
  byteLength: number,
  options: AllocateBufferOptions,
): never {
  const size = alignUp(byteLength, p.alignment);
  const allocated = p.stats.reservedBytes;
  const other = Math.max(0, p.driverAllocatedBytes - allocated);
  const max = p.highLimit;
  const pool = options.pool ?? "private";
  const limit = max === Infinity ? "" : `, max allowed: ${formatBytes(max)}`;
  throw new WatermarkOutOfMemoryError(
    `Cannot allocate ${
      formatBytes(size)
    } on the ${pool} pool: out of memory (allocated: ${
      formatBytes(allocated)
    }, other allocations: ${formatBytes(other)}${limit}, requested: ${
      formatBytes(byteLength)
    })`,
    {
      requestedBytes: size,
      allocatedBytes: allocated,
      otherBytes: other,
      maxAllowedBytes: max,
    },
  );
}
