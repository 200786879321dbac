/**
 * `@allot/core`: the vocabulary every allot package shares.
 *
 * - {@linkcode Device}: a device type and index (`cpu:0`, `webgpu:1`).
 * - {@linkcode UniqueVoidPtr} and {@linkcode DataPtr}: owning pointers whose
 *   deleter runs exactly once; a data pointer is a place in a memory
 *   (memory, byte offset, byte length) plus its device.
 * - {@linkcode IntrusiveTarget}, {@linkcode IntrusivePtr},
 *   {@linkcode WeakIntrusivePtr}: strong and weak reference counts with
 *   PyTorch's rules.
 * - {@linkcode Allocator} and {@linkcode AllocatorBase}: the allocator
 *   interface.
 * - {@linkcode Stat}, {@linkcode Fence}, {@linkcode Stream}: shared stats and
 *   ordering vocabulary.
 * - {@linkcode AllotError} and its subclasses: typed errors that state the
 *   value and the limit.
 * - {@linkcode LeakDetector}: reports handles dropped without release.
 * - The pooling core the caching and watermark policies share:
 *   {@linkcode DeferredFrees} (pending frees grouped by fence),
 *   {@linkcode acquireSegment} and {@linkcode releaseSegment} (segments and
 *   their errors), {@linkcode PoolStats} (the `MemoryStats` figures),
 *   {@linkcode collectByAge} (age-based collection) and
 *   {@linkcode finishSnapshot} (snapshot assembly).
 *
 * @example Own memory, share an object, free deterministically
 * ```ts
 * import { DataPtr, Device, IntrusivePtr, IntrusiveTarget } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * class Storage extends IntrusiveTarget {
 *   constructor(readonly data: DataPtr<ArrayBuffer>) {
 *     super();
 *   }
 *   protected override releaseResources(): void {
 *     this.data.release();
 *   }
 * }
 *
 * const log: string[] = [];
 * const data = new DataPtr(new ArrayBuffer(16), 0, 16, Device.parse("cpu:0"), {
 *   context: "block-0",
 *   deleter: (ctx) => log.push(`free ${ctx}`),
 * });
 * const a = IntrusivePtr.make(new Storage(data));
 * const b = a.clone();
 * a.release();
 * assert.deepEqual(log, []);
 * b.release();
 * assert.deepEqual(log, ["free block-0"]);
 * ```
 *
 * @module
 */

export * from "./allocator.ts";
export * from "./call_stack.ts";
export * from "./collect_by_age.ts";
export * from "./data_ptr.ts";
export * from "./deferred_frees.ts";
export * from "./device.ts";
export * from "./errors.ts";
export * from "./fence.ts";
export * from "./format_bytes.ts";
export * from "./host_memory.ts";
export * from "./intrusive_ptr.ts";
export * from "./junk_fill.ts";
export * from "./option_keys.ts";
export * from "./leak_detector.ts";
export * from "./memory_snapshot.ts";
export * from "./memory_stats.ts";
export * from "./pool_snapshot.ts";
export * from "./pool_stats.ts";
export * from "./segment_ledger.ts";
export * from "./segment_source.ts";
export * from "./segment_source_error.ts";
export * from "./stat.ts";
export * from "./stat_recount.ts";
export * from "./stats_summary.ts";
export * from "./strided_alias.ts";
export * from "./unique_void_ptr.ts";
export * from "./validate.ts";
export * from "./view_span.ts";
