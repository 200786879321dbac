/**
 * `@allot/caching`: PyTorch's CUDA caching allocator for any device. A
 * {@linkcode CachingAllocator} takes whole segments from a `SegmentSource`
 * (GPU buffers, a CPU heap, a mock device), carves rounded blocks out of them
 * with best fit, splits and merges, reuses blocks across streams only after
 * their fences complete, explains out-of-memory errors, and reports PyTorch's
 * stats ({@linkcode MemoryStats}), a text summary and JSON snapshots
 * ({@linkcode MemorySnapshot}).
 *
 * The trace generators for replay live in the second entry point,
 * `@allot/caching/traces`.
 *
 * @example Allocate, reuse, inspect
 * ```ts
 * import { CachingAllocator } from "@allot/caching";
 * import { ManualStream, MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource({ capacityBytes: 64 * 2 ** 20 });
 * const allocator = new CachingAllocator(device, { recordHistory: true });
 * const compute = new ManualStream();
 *
 * const a = allocator.allocate(3000, { stream: compute }); // rounds to 3072
 * const b = allocator.allocate(5 * 2 ** 20, { stream: compute }); // large pool
 * a.release();
 * using c = allocator.allocate(3000, { stream: compute }); // cache hit
 * assert.equal(device.allocationCount, 2);
 * b.release();
 *
 * const stats = allocator.memoryStats();
 * assert.equal(stats.allocatedBytes.all.current, 3072);
 * // Nothing held was free at either miss: a segment of just the request
 * // each, 3072 bytes for a and 5 MiB for b (PyTorch's 2 MiB and 20 MiB
 * // segments with PYTORCH_SEGMENTS).
 * assert.equal(stats.reservedBytes.all.current, 5 * 2 ** 20 + 3072);
 * assert.equal(allocator.snapshot().segments.length, 2);
 * allocator.validate();
 * ```
 *
 * @module
 */

export * from "./caching_allocator.ts";
export * from "./caching_allocator_adapter.ts";
export * from "./caching_group.ts";
export * from "./errors.ts";
export * from "./round_size.ts";
export * from "./snapshot.ts";
export * from "./stats.ts";
export * from "./step_planned_pool.ts";
export * from "./step_pool_group.ts";
