/**
 * Internal: {@linkcode _usageCachingDefaults}, the caching options a
 * `GpuCachingAllocator` takes by default for its source's usage.
 *
 * @module
 */

import { _Usage } from "./_flags.ts";

/** Block granule of a pool that is not storage. */
export const _SMALL_POOL_GRANULE = 256;
/** Smallest segment of a pool that is not storage. */
export const _SMALL_POOL_MIN_SEGMENT = 1024;

/**
 * The caching options that a `GpuCachingAllocator` of `usage` takes where
 * the caller sets none: none for a usage with `STORAGE` (the caching
 * allocator's own defaults: a 512-byte granule, 4 KiB first segments); for
 * any other usage (uniforms, vertex, index and indirect buffers, copies) a
 * 256-byte granule and 256-byte smallest segment. Such a pool holds few
 * bytes in small blocks: a uniform block needs 256-byte offsets
 * (`minUniformBufferOffsetAlignment`, 256 on most devices; a larger source
 * alignment still raises the granule), so the 512-byte granule doubled a
 * 64-byte uniform, and a first segment of 4 KiB was most of what the pool
 * held. On the recorded traces, all buffers, one pass: LSTM text generation
 * 1.111 -> 1.081, conv + GRU 1.115 -> 1.089, seq2seq 1.039 -> 1.025 (see
 * `BENCHMARKS.md`).
 *
 * @param usage The source's `GPUBufferUsage`.
 * @returns Options to spread under the caller's.
 */
export function _usageCachingDefaults(
  usage: number,
): { minBlockByteLength?: number; minSegmentByteLength?: number } {
  if ((usage & _Usage.STORAGE) !== 0) return {};
  return {
    minBlockByteLength: _SMALL_POOL_GRANULE,
    minSegmentByteLength: _SMALL_POOL_MIN_SEGMENT,
  };
}
