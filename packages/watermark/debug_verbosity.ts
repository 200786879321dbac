/**
 * {@linkcode DebugVerbosity}: the bits of the allocator's debug log mask.
 *
 * @module
 */

/**
 * Bits of {@linkcode WatermarkAllocatorOptions.debugVerbosity}, as in
 * PyTorch's `PYTORCH_DEBUG_MPS_ALLOCATOR`. Combine them with `|`.
 *
 * @example Log only releases of large buffers
 * ```ts
 * import { DebugVerbosity, WatermarkAllocator } from "@allot/watermark";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const lines: string[] = [];
 * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 2 ** 30 }), {
 *   debugVerbosity: DebugVerbosity.releases | DebugVerbosity.largeOnly,
 *   logger: (line) => lines.push(line),
 * });
 * allocator.allocateBuffer(64).release();
 * allocator.emptyCache();
 * assert.ok(lines.every((line) => !line.includes("small")));
 * ```
 */
export const DebugVerbosity: Readonly<{
  /** Log nothing. */
  silent: 0;
  /** Log watermark settings and cache-wide releases. */
  profiling: 1;
  /** Log buffer and heap allocations. */
  allocations: 2;
  /** Log buffer reuse. */
  recycles: 4;
  /** Log buffer and heap releases, and garbage collection. */
  releases: 8;
  /** Log only transactions of the large pools. */
  largeOnly: 16;
}> = Object.freeze(
  {
    silent: 0,
    profiling: 1,
    allocations: 2,
    recycles: 4,
    releases: 8,
    largeOnly: 16,
  } as const,
);

/** One bit or a combination of {@linkcode DebugVerbosity} bits. */
export type DebugVerbosity = number;
