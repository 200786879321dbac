/**
 * `@allot/watermark`: PyTorch's MPS allocator, made for unified-memory-style
 * devices behind any `SegmentSource` from `@allot/core`.
 *
 * - {@linkcode WatermarkAllocator}: heaps by request size; private, shared
 *   and scalar pools with best-fit reuse; a hard high watermark and a soft low
 *   watermark over a recommended working-set size; garbage collection of old
 *   cached buffers under memory pressure; lifecycle callbacks; buffer
 *   metadata; fence-ordered frees.
 * - {@linkcode WatermarkBuffer}: a live buffer with its id, sizes, shape and
 *   shared view.
 * - {@linkcode DebugVerbosity}: the debug log mask.
 *
 * @example Pressure, garbage collection and a hard limit
 * ```ts
 * import { WatermarkAllocator, WatermarkOutOfMemoryError } from "@allot/watermark";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const MiB = 1 << 20;
 * const device = new MockSegmentSource({ capacityBytes: 256 * MiB });
 * const allocator = new WatermarkAllocator(device, {
 *   highWatermarkRatio: 1.0, // at most 256 MiB of heaps
 *   lowWatermarkRatio: 0.5,  // under pressure from 128 MiB
 * });
 * const events: string[] = [];
 * allocator.addCallback((e) => events.push(e.type));
 * const big = [1, 2, 3].map(() => allocator.allocateBuffer(60 * MiB));
 * for (const b of big) b.release(); // cached: 180 MiB of heaps, over the low limit
 * allocator.allocateBuffer(100 * MiB).release(); // collects old cached buffers first
 * assert.ok(allocator.stats().numGarbageCollections >= 1);
 * assert.ok(allocator.driverAllocatedBytes <= allocator.highWatermarkLimit);
 * assert.throws(() => allocator.allocateBuffer(300 * MiB), WatermarkOutOfMemoryError);
 * assert.ok(events.includes("allocation-failed"));
 * ```
 *
 * @module
 */

export * from "./debug_verbosity.ts";
export * from "./watermark_allocator.ts";
export * from "./watermark_buffer.ts";
export * from "./watermark_out_of_memory_error.ts";
export * from "./watermark_snapshot.ts";
export * from "./watermark_stats.ts";
// Core types that appear in this package's signatures, so its documentation
// is complete; import them from `@allot/core` in your code.
export type {
  Allocator,
  AllocatorBase,
  AllotError,
  DataPtr,
  Deleter,
  Device,
  DeviceType,
  Fence,
  OutOfMemoryError,
  StatValues,
  Stream,
  UniqueVoidPtr,
} from "@allot/core";
// The error of a failing segment source, shared with `@allot/caching`: the
// same class, so one `instanceof` check serves both allocators.
export { SegmentSourceError } from "@allot/core";
// The snapshot vocabulary of every pooling allocator, defined in `@allot/core`.
export type {
  BlockSnapshot,
  BlockState,
  MemorySnapshot,
  SegmentSnapshot,
  TraceAction,
  TraceEntry,
  TraceRecorderOptions,
} from "@allot/core";
// The stats vocabulary of every pooling allocator, defined in `@allot/core`.
export type { MemoryStats, MemorySummaryOptions, StatArray } from "@allot/core";
