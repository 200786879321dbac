/**
 * Options of {@linkcode CachingAllocator} and of one allocation, and
 * {@linkcode DEFAULT_STREAM}, the stream an allocation uses when it names
 * none.
 *
 * @module
 */

import {
  COMPLETED_FENCE,
  type Fence,
  type LeakDetector,
  type Stream,
  type TraceRecorderOptions,
} from "@allot/core";
import type { RoundupPower2Divisions } from "./round_size.ts";
import type { CachingGroup } from "./caching_group.ts";

/**
 * The default stream (id 0): work on it is ordered with the allocator's own
 * calls, so its fences are always complete.
 */
export const DEFAULT_STREAM: Stream = Object.freeze({
  id: 0,
  fence: (): Fence => COMPLETED_FENCE,
});

/** Options of {@linkcode CachingAllocator}. Sizes are bytes. */
export interface CachingAllocatorOptions {
  /**
   * A {@linkcode CachingGroup} of allocators on the same device whose held
   * bytes share one bound (see there). Refused when it holds allocators of
   * another device.
   *
   * @default {undefined}
   */
  group?: CachingGroup;
  /**
   * Block granule: every block size is a multiple of it. Raised to the
   * source's alignment when that is larger. The default is WebGPU's storage
   * offset alignment (`minStorageBufferOffsetAlignment`, 256), the finest
   * granule a block carved from a shared GPU buffer can have; PyTorch's
   * `kMinBlockSize` (`MIN_BLOCK_BYTE_LENGTH`, 512, this default
   * until 0.2) rounds a 100-byte tensor up to five times its size, which is
   * most of what a decode loop of small tensors holds above its live bytes
   * (onnxruntime GRU decode: 1.034 -> 1.004 x peak live, the floor any
   * 256-byte granule reaches).
   *
   * @default {256}
   */
  minBlockByteLength?: number;
  /**
   * Requests of at most this many bytes use the small pool. PyTorch's
   * `kSmallSize` (and this default until 0.x's adaptive segments) is 1 MiB
   * (`1048576`); with adaptive segments 256 KiB held fewer bytes on every
   * real trace measured: blocks of 256 KiB to 1 MiB go to the large pool,
   * where a rest of more than this size is split off.
   *
   * @default {262144}
   */
  smallRequestMaxByteLength?: number;
  /**
   * Segment size of the small pool (`kSmallBuffer`).
   *
   * @default {2097152}
   */
  smallSegmentByteLength?: number;
  /**
   * Segment size of the large pool for requests below
   * `ownSegmentMinByteLength` (`kLargeBuffer`).
   *
   * @default {20971520}
   */
  largeSegmentByteLength?: number;
  /**
   * Requests of at least this size get a segment of their own, rounded up to
   * `largeRoundByteLength` (`kMinLargeAlloc`).
   *
   * @default {10485760}
   */
  ownSegmentMinByteLength?: number;
  /**
   * Rounding of own segments (`kRoundLarge`).
   *
   * @default {2097152}
   */
  largeRoundByteLength?: number;
  /**
   * Adaptive segment sizes: a new segment of the small or the large pool is
   * this share of the bytes already reserved (at least
   * `minSegmentByteLength`, at most `smallSegmentByteLength` or
   * `largeSegmentByteLength`, and never below the request), so a small
   * workload holds small segments and a large one grows to PyTorch's sizes
   * (as onnxruntime's and CubeCL's pools do). While the share is below the
   * pool's fixed size, a request takes a segment of its own size where the
   * share would leave a tail that is seldom used: a large-pool request of
   * more than a third of the share (PyTorch gives requests of half a large
   * segment their own), a small-pool request that would leave under an
   * eighth of it. A miss while every byte held is active (no free block
   * anywhere: the program is still growing into new memory) takes a segment
   * of the request's own size, as an exact-size pool would; the share applies
   * once something held is free. `0` takes PyTorch's fixed
   * sizes (`kSmallBuffer`, `kLargeBuffer`) from the first segment. In [0, 1].
   *
   * @default {0.0078125}
   */
  segmentGrowthFraction?: number;
  /**
   * Smallest segment that adaptive segment sizes take (rounded up to the
   * block granule); ignored when `segmentGrowthFraction` is 0.
   *
   * @default {4096}
   */
  minSegmentByteLength?: number;
  /**
   * When a request misses the cache while reserved bytes exceed this many
   * times the active bytes (allocated or waiting for a fence, plus the
   * request), whole free segments are given back to the device first, least
   * recently used first (those under a quarter of the request last), until
   * reserved bytes fall to that bound or none is left: held bytes stay near
   * live bytes when the workload's sizes drift.
   * Segments of the other pool (small or large) are given back only when
   * unused since the previous such miss, so a loop that alternates between
   * the pools does not give back and take a segment on every request.
   * `Infinity` turns it off (PyTorch keeps every segment until
   * `emptyCache()` or a full device), as do expandable segments. At least
   * 1. The default's 5% of slack
   * keeps a step that repeats from giving back a segment it takes again
   * next step (1 held fewer bytes on the real traces but made buffers in
   * every step).
   *
   * The ratio is where the rule starts: it backs off when giving back is
   * regretted. The allocator remembers the segments it gave back (their
   * pool and size, up to the most bytes it had reserved, at most 256): a
   * later miss that one of them would have served means a device buffer
   * was destroyed and then made again. Once such misses add up to the
   * slack (ratio - 1 times the reserved bytes), the slack doubles, or the
   * ratio jumps to the one that would have kept that segment when that is
   * wider; once a whole cache's worth of remembered segments is forgotten
   * with none of them missed, the slack halves, down to this ratio. A
   * workload whose steps alternate phases (forward and backward, prefill
   * and decode) would otherwise give back one phase's segments at the next
   * phase's miss and make them again every step; with the back-off it
   * stops making segments after a few steps, holding about what the
   * largest phase needs on top of the others' cache.
   *
   * A miss at a low (needing at most a quarter of the bytes active at the
   * last cycle's misses: a pass's or a step's end), or with nothing active,
   * also does not raise the most bytes reserved after any earlier miss
   * above this ratio times what it is measured against: it first gives
   * whole free segments back (the same ones, in the same order, whatever
   * the back-off has widened the ratio to; within the ratio, none under a
   * quarter of the request) until its request fits under it.
   *
   * The ratio also bounds the room for growth: a miss whose size follows
   * three earlier misses of its pool by the same step (a KV cache grown
   * one token at a time) gets a segment that step larger than its own
   * size, at most (ratio - 1) times the request; `Infinity` gives none.
   *
   * @default {1.05}
   */
  releaseCachedAboveRatio?: number;
  /**
   * Power-of-two divisions for size rounding (see
   * {@linkcode RoundupPower2Divisions}); `0` rounds to the block granule only.
   *
   * @default {0}
   */
  roundupPower2Divisions?: RoundupPower2Divisions;
  /**
   * Blocks at least this large are never split, and serve only requests
   * within `maxNonSplitRoundingByteLength` of their size (`max_split_size`). At
   * least `largeSegmentByteLength`.
   *
   * @default {Infinity}
   */
  maxSplitByteLength?: number;
  /**
   * How much larger than a request an unsplittable block may be and still
   * serve it (`max_non_split_rounding_size`).
   *
   * @default {20971520}
   */
  maxNonSplitRoundingByteLength?: number;
  /**
   * Same as `maxSplitByteLength`.
   *
   * @deprecated Use `maxSplitByteLength`; removed in the next minor version.
   */
  maxSplitSize?: number;
  /**
   * Same as `maxNonSplitRoundingByteLength`.
   *
   * @deprecated Use `maxNonSplitRoundingByteLength`; removed in the next
   * minor version.
   */
  maxNonSplitRoundingSize?: number;
  /**
   * Share of the device's capacity this allocator may reserve, in (0, 1].
   *
   * @default {1}
   */
  memoryFraction?: number;
  /**
   * When reserved bytes pass this share of the allowed bytes (fraction times
   * capacity), a device allocation first frees the oldest unused cached
   * segments; 0 turns it off. In [0, 1).
   *
   * @default {0}
   */
  garbageCollectionThreshold?: number;
  /**
   * Record history from the start (`true` or recorder options).
   *
   * @default {false}
   */
  recordHistory?: boolean | TraceRecorderOptions;
  /**
   * Label for segments and reports.
   *
   * @default {"CachingAllocator"}
   */
  label?: string;
  /**
   * Reports blocks whose handle was garbage-collected without `release()`
   * (the block stays allocated: the detector only reports).
   *
   * @default {undefined}
   */
  leakDetector?: LeakDetector;
  /**
   * Expandable segments (PyTorch's `expandable_segments`, in spirit): where
   * the source can resize segments in place
   * (`SegmentSource.tryResizeSegment`: resizable `ArrayBuffer`s,
   * the mock device), each pool keeps one segment per stream that grows at
   * its end instead of taking new segments, so a request that fits nowhere
   * extends the segment's free tail; `emptyCache()` and a full device shrink
   * free tails back. Requests of at least `ownSegmentMinByteLength` still get
   * segments of their own, never split, which a full device gets back whole;
   * once the device has been full (until `emptyCache()`), so do large
   * requests that no hole of the expandable segment holds. Ignored for a
   * source without `tryResizeSegment` (GPU buffers).
   *
   * @default {false}
   */
  expandableSegments?: boolean;
  /**
   * Debug mode for hunting a bug: freed blocks are filled with `JUNK_BYTE`
   * where the host can write the memory, and the allocator validates its
   * invariants after every allocation, free and cache operation (slow).
   *
   * @default {false}
   */
  strict?: boolean;
}

/**
 * PyTorch's segment sizes and cache, as this allocator had them by default
 * before adaptive segments: 512-byte blocks, 1 MiB small requests in 2 MiB
 * segments, 20 MiB large segments from the first request, nothing given back until
 * `emptyCache()` or a full device. Spread it under your own options:
 * `new CachingAllocator(source, { ...PYTORCH_SEGMENTS, strict: true })`.
 *
 * @example
 * ```ts
 * import { CachingAllocator, PYTORCH_SEGMENTS } from "@allot/caching";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const source = new MockSegmentSource();
 * const allocator = new CachingAllocator(source, PYTORCH_SEGMENTS);
 * using _block = allocator.allocate(1000);
 * assert.equal(source.reservedBytes, 2 ** 21);
 * ```
 */
export const PYTORCH_SEGMENTS: Readonly<CachingAllocatorOptions> = Object
  .freeze({
    minBlockByteLength: 512,
    smallRequestMaxByteLength: 1048576,
    segmentGrowthFraction: 0,
    releaseCachedAboveRatio: Infinity,
  });

/** Options of one allocation. */
export interface AllocateOptions {
  /**
   * The stream that will use the block first; the block is reused only by
   * allocations on the same stream.
   *
   * @default {DEFAULT_STREAM}
   */
  stream?: Stream;
  /**
   * A tag for the block (a layer or kernel name): kept in its snapshot and
   * history entries. Without one, the tag of the enclosing
   * {@linkcode CachingAllocator.withTag} scope applies.
   *
   * @default {undefined}
   */
  tag?: string;
}

/** Options of {@linkcode CachingAllocator.allocateAsync}. */
export interface AllocateAsyncOptions extends AllocateOptions {
  /**
   * Stops the wait for pending fences: the promise rejects with the
   * signal's reason and the wait changes nothing (the blocks stay pending
   * until their fences complete). Already aborted: rejects before anything
   * is done. Without it, a fence that never completes makes the call wait
   * forever.
   *
   * @default {undefined}
   */
  signal?: AbortSignal;
}
