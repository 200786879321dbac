/**
 * {@linkcode CachingAllocator}: PyTorch's CUDA caching allocator, made
 * device-agnostic over a {@linkcode SegmentSource}. This file is the public
 * facade (arguments, handles, ids, tags, stats, snapshots); the policy it
 * drives is `_caching_policy.ts`, its handle `cached_block.ts`, its options
 * `caching_options.ts`.
 *
 * @module
 */

import {
  describeValue,
  type Device,
  DoubleFreeError,
  finishSnapshot,
  InvalidArgumentError,
  type LeakDetector,
  OutOfMemoryError,
  type SegmentSource,
  segmentTotals,
  type Stream,
  type SynchronizeOptions,
  TraceRecorder,
  type TraceRecorderOptions,
  UseAfterFreeError,
  validateAbortSignal,
  validateFlag,
  validateObject,
  validateOptionKeys,
  validateSynchronizeOptions,
} from "@allot/core";
import { _Block, type _BlockPool, ALLOCATED, FREE } from "./_block_pool.ts";
import { _BlockIds, ID_SLOTS } from "./_block_ids.ts";
import { _checkFraction, _resolveCachingOptions } from "./_caching_config.ts";
import { _throwCachingOom } from "./_caching_oom.ts";
import { _CachingPolicy } from "./_caching_policy.ts";
import { _validateCaching } from "./_caching_validate.ts";
import { checkOptionalString, checkStream } from "./_check.ts";
import { _anchorShapes } from "./_shape_anchors.ts";
import {
  _blockOf,
  _detach,
  _setReleaseHandle,
  CachedBlock,
} from "./cached_block.ts";
import {
  type AllocateAsyncOptions,
  type AllocateOptions,
  type CachingAllocatorOptions,
  DEFAULT_STREAM,
} from "./caching_options.ts";
import { roundSize } from "./round_size.ts";
import type {
  BlockSnapshot,
  MemorySnapshot,
  SegmentSnapshot,
} from "./snapshot.ts";
import {
  formatMemorySummary,
  type MemoryStats,
  type MemorySummaryOptions,
} from "./stats.ts";

/** The keys `allocate()`'s options may have. */
const ALLOCATE_KEYS: readonly string[] = ["stream", "tag"];
/** The keys `allocateAsync()`'s options may have. */
const ALLOCATE_ASYNC_KEYS: readonly string[] = ["stream", "tag", "signal"];

export { CachedBlock } from "./cached_block.ts";

/**
 * Internal to allot: what `@allot/webgpu` reads of a block from
 * `_BlockHooks.take` (its place: the segment's memory and the offsets).
 */
export interface _BlockPlace<M> {
  /** Byte offset of the block in its segment. */
  readonly offset: number;
  /** Bytes the block holds. */
  readonly size: number;
  /** The segment. */
  readonly segment: {
    /** The device segment. */
    readonly raw: {
      /** The segment's memory. */
      readonly memory: M;
      /** Byte offset of the segment in its memory. */
      readonly byteOffset: number;
    };
  };
}

/**
 * Internal to allot: what `@allot/webgpu`'s caching allocator (whose handle
 * holds the block itself) reads from `CachingAllocator` under the key
 * `Symbol.for("allot.caching.blockHooks")`. Not for direct use; it is kept
 * off the package's exports (no internal names in a public entry point).
 */
export interface _BlockHooks {
  /**
   * Allocates like `allocate(byteLength)` on the default stream and returns
   * the block without a `CachedBlock`; `undefined` (nothing done) when a
   * leak detector watches the handles. Free the block once with `give`.
   */
  take<M>(
    allocator: CachingAllocator<M>,
    byteLength: number,
  ): _BlockPlace<M> | undefined;
  /**
   * Frees a block from `take`, once (the caller keeps that promise: a block
   * record is recycled after its free). Refuses with `DoubleFreeError` what
   * is no block, a block not allocated, and a block allocated by id.
   */
  give<M>(allocator: CachingAllocator<M>, block: _BlockPlace<M>): void;
  /**
   * `take` whether or not a leak detector watches the handles (for callers
   * that hand out no objects to watch: `@allot/webgpu`'s id path). Free the
   * block once with `give`.
   */
  takeUnwatched<M>(
    allocator: CachingAllocator<M>,
    byteLength: number,
  ): _BlockPlace<M>;
  /**
   * `take` from the cache alone: `undefined` (nothing done: no miss, no new
   * segment) when no cached block serves it or a leak detector watches the
   * handles. With `whole`, only a whole free segment of exactly the
   * request's rounded size, and not under the allocator's smallest segment
   * (a block lent to another pool: the segment comes back as it was).
   * Free the block once with `give`.
   */
  takeCached<M>(
    allocator: CachingAllocator<M>,
    byteLength: number,
    whole: boolean,
  ): _BlockPlace<M> | undefined;
}

export {
  type AllocateAsyncOptions,
  type AllocateOptions,
  type CachingAllocatorOptions,
  DEFAULT_STREAM,
  PYTORCH_SEGMENTS,
} from "./caching_options.ts";

/**
 * A device-agnostic caching allocator with PyTorch's CUDA caching allocator
 * rules. It takes whole segments from a {@linkcode SegmentSource} and carves
 * blocks out of them:
 *
 * - sizes round up to 512 bytes (optionally to power-of-two divisions);
 * - requests up to 256 KiB come from the small pool, requests below 10 MiB
 *   from large-pool segments, larger ones from own segments rounded to
 *   2 MiB;
 * - a new segment is 1/128 of the bytes already reserved (at least 4 KiB
 *   and the request, at most PyTorch's 2 MiB small and 20 MiB large
 *   segments), so a small workload holds small segments; a miss while
 *   reserved bytes exceed 1.05 times the active ones first gives whole free
 *   segments back, least recently used first ({@linkcode PYTORCH_SEGMENTS}
 *   restores PyTorch's fixed sizes and keeps the cache);
 * - best fit among free blocks of the same stream; a block is split when the
 *   rest is worth keeping, and merged with free neighbours when freed; only
 *   whole free segments go back to the device;
 * - a block used on other streams ({@linkcode CachedBlock.recordStream})
 *   returns to the pool only when those streams' fences, taken when it was
 *   freed, are complete;
 * - when the device is full: free cached unsplit blocks and retry, then free
 *   the whole cache and retry ({@linkcode CachingAllocator.allocateAsync}
 *   first waits for pending fences), then throw
 *   {@linkcode CachingOutOfMemoryError}.
 *
 * @typeParam M Type of the segment memory.
 *
 * @example Reuse without device allocations
 * ```ts
 * import { CachingAllocator } from "@allot/caching";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource();
 * const allocator = new CachingAllocator(device);
 * for (let i = 0; i < 100; i++) {
 *   using block = allocator.allocate(64 * 1024);
 * }
 * assert.equal(device.allocationCount, 1); // one 2 MiB segment, reused
 * allocator.emptyCache();
 * assert.equal(device.reservedBytes, 0);
 * ```
 */
export class CachingAllocator<M = unknown> {
  /** The segment source. */
  readonly source: SegmentSource<M>;
  /** Label for segments and reports. */
  readonly label: string;
  /** Block granule in bytes. */
  readonly minBlockByteLength: number;
  /** Requests up to this size use the small pool. */
  readonly smallRequestMaxByteLength: number;
  /** Segment size of the small pool. */
  readonly smallSegmentByteLength: number;
  /** Segment size of the large pool. */
  readonly largeSegmentByteLength: number;
  /** Requests at least this large get their own segment. */
  readonly ownSegmentMinByteLength: number;
  /** Rounding of own segments. */
  readonly largeRoundByteLength: number;
  /** Blocks at least this large are never split. */
  readonly maxSplitByteLength: number;
  /** Slack an unsplittable block may have over a request. */
  readonly maxNonSplitRoundingByteLength: number;
  /** Largest block or segment: the source's limit, in whole granules. */
  readonly maxBlockByteLength: number;
  // The policy: pools, segments, pending frees, stats, history.
  #p: _CachingPolicy<M>;
  // The id API's table (shared with the policy, which recycles blocks).
  #ids: _BlockIds<M> = new _BlockIds<M>();
  #divisions: number[] | undefined;
  // Sizes in (0, #intRoundMax] round up with integer operations (0 when
  // power-of-two divisions are set: those round otherwise).
  #intRoundMax = 0;
  #granuleMask = 0;
  #leaks: LeakDetector | undefined;

  /**
   * Creates an allocator over a segment source.
   *
   * @param source Where segments come from.
   * @param options Pool sizes, rounding, split limits, memory fraction, GC.
   * @throws {InvalidArgumentError} For an option out of range.
   */
  constructor(source: SegmentSource<M>, options: CachingAllocatorOptions = {}) {
    _anchorShapes("caching");
    validateOptionKeys(options, CACHING_OPTION_KEYS, "CachingAllocator");
    const config = _resolveCachingOptions(source, options);
    this.source = source;
    this.label = config.label;
    this.minBlockByteLength = config.granule;
    this.smallRequestMaxByteLength = config.smallRequestMax;
    this.smallSegmentByteLength = config.smallSegment;
    this.largeSegmentByteLength = config.largeSegment;
    this.ownSegmentMinByteLength = config.ownSegmentMin;
    this.largeRoundByteLength = config.largeRound;
    this.maxSplitByteLength = config.maxSplit;
    this.maxNonSplitRoundingByteLength = config.nonSplitRounding;
    this.maxBlockByteLength = config.maxBlock;
    this.#divisions = config.divisions;
    this.#granuleMask = config.granule - 1;
    this.#intRoundMax = config.divisions !== undefined
      ? 0
      : Math.min(config.maxBlock, 2 ** 30);
    this.#leaks = config.leakDetector;
    this.#p = new _CachingPolicy(source, config, this.#ids);
    this.#p.validate = () => this.validate();
    if (config.recordHistory !== false) {
      this.recordHistory(config.recordHistory);
    }
    // last: an allocator refused above never joins its group
    if (config.group !== undefined) config.group.join(this, this.#p);
  }

  /** The device the segments live on. */
  get device(): Device {
    return this.#p.source.device;
  }

  /**
   * Whether segments grow in place (the `expandableSegments` option, and a
   * source that can resize segments).
   */
  get expandableSegments(): boolean {
    return this.#p.expandable;
  }

  /**
   * Same as `maxSplitByteLength`.
   *
   * @deprecated Use `maxSplitByteLength`; removed in the next minor version.
   */
  get maxSplitSize(): number {
    return this.maxSplitByteLength;
  }

  /**
   * Same as `maxNonSplitRoundingByteLength`.
   *
   * @deprecated Use `maxNonSplitRoundingByteLength`; removed in the next
   * minor version.
   */
  get maxNonSplitRoundingSize(): number {
    return this.maxNonSplitRoundingByteLength;
  }

  /** Share of the device capacity this allocator may reserve. */
  get memoryFraction(): number {
    return this.#p.fraction;
  }

  /** Bytes this allocator may reserve: fraction times capacity. */
  get allowedBytes(): number {
    return this.#p.fraction * this.#p.source.capacityBytes;
  }

  /** Bytes of blocks handed out now (rounded sizes). */
  get allocatedBytes(): number {
    return this.#p.stats.allocatedBytes;
  }

  /** Bytes of segments held now. */
  get reservedBytes(): number {
    return this.#p.stats.reservedBytes;
  }

  /** Blocks freed by callers that still wait for fences. */
  get pendingFreeCount(): number {
    return this.#p.deferred.count;
  }

  /**
   * Sets the share of the device capacity this allocator may reserve. Segments
   * already held are kept.
   *
   * @param fraction A number in (0, 1].
   * @throws {InvalidArgumentError} When out of range.
   */
  setMemoryFraction(fraction: number): void {
    this.#p.fraction = _checkFraction(fraction, "memoryFraction", 1);
  }

  /**
   * The block size a request rounds to.
   *
   * @param byteLength Bytes asked for.
   * @returns The rounded size.
   * @throws {InvalidArgumentError} For a size that is not a non-negative
   * integer or rounds above {@linkcode CachingAllocator.maxBlockByteLength}.
   *
   * @example
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource());
   * assert.equal(allocator.roundSize(1), 256);
   * assert.equal(allocator.roundSize(257), 512);
   * ```
   */
  roundSize(byteLength: number): number {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new InvalidArgumentError(
        `Cannot allocate: byteLength must be a non-negative integer, received ${
          describeValue(byteLength)
        }`,
        {
          name: "byteLength",
          value: byteLength,
          limit: this.maxBlockByteLength,
        },
      );
    }
    const size = roundSize(
      byteLength,
      this.minBlockByteLength,
      this.#divisions,
    );
    if (size > this.maxBlockByteLength) {
      throw new InvalidArgumentError(
        `Cannot allocate ${byteLength} bytes: rounded to ${size}, above the largest segment ${this.maxBlockByteLength} of ${this.device}`,
        {
          name: "byteLength",
          value: byteLength,
          limit: this.maxBlockByteLength,
        },
      );
    }
    return size;
  }

  /** roundSize() for what the integer fast path leaves out. */
  #roundSizeSlow(byteLength: number): number {
    const g = this.minBlockByteLength;
    if (
      this.#divisions === undefined && Number.isSafeInteger(byteLength) &&
      byteLength >= 0 && byteLength <= this.maxBlockByteLength
    ) {
      return byteLength <= g ? g : Math.ceil(byteLength / g) * g;
    }
    return this.roundSize(byteLength);
  }

  /**
   * Allocates a block. Serves it from the cache when it can; otherwise takes a
   * segment from the device, after freeing cached segments if the device is
   * full. Does not wait for fences: see
   * {@linkcode CachingAllocator.allocateAsync}.
   *
   * @param byteLength Bytes; 0 gives a block of the minimum size.
   * @param options The stream that uses the block.
   * @returns The owning handle.
   * @throws {InvalidArgumentError} For a bad size or stream.
   * @throws {CachingOutOfMemoryError} When the device cannot hold the block.
   * @throws {SegmentSourceError} When the device threw.
   */
  allocate(byteLength: number, options?: AllocateOptions): CachedBlock<M> {
    // The common case of roundSize() in integer operations.
    // (typeof first: a comparison would call an object's valueOf.)
    const size = typeof byteLength === "number" && byteLength > 0 &&
        byteLength <= this.#intRoundMax && (byteLength | 0) === byteLength
      ? (byteLength + this.#granuleMask) & ~this.#granuleMask
      : this.#roundSizeSlow(byteLength);
    if (options !== undefined) {
      validateObject(options, "options");
      // plain comparisons: the hot path builds no array
      for (const key in options) {
        if (key !== "stream" && key !== "tag") {
          validateOptionKeys(options, ALLOCATE_KEYS, "allocate()");
        }
      }
    }
    const stream = options === undefined || options.stream === undefined
      ? DEFAULT_STREAM
      : this.#checkStream(options.stream);
    const tag = options === undefined || options.tag === undefined
      ? this.#p.tag
      : checkTag(options.tag);
    if (this.#p.deferred.count > 0) this.#p.deferred.poll();
    const pool = size <= this.smallRequestMaxByteLength
      ? this.#p.small
      : this.#p.expandable
      ? this.#p.poolFor(size)
      : this.#p.large;
    const block = this.#p.getFreeBlock(pool, stream.id, size) ??
      this.#p.allocSlow(pool, size, stream);
    if (block === undefined) {
      _throwCachingOom(this.#p, byteLength, size, stream, tag);
    }
    return this.#allocFound(block, pool, size, byteLength, stream, tag);
  }

  /**
   * Allocates a block like {@linkcode CachingAllocator.allocate}, but before
   * giving up waits for every pending fence, frees the whole cache and retries.
   * A request above {@linkcode CachingAllocator.allowedBytes} is refused at
   * once (no fence can make room for it).
   *
   * Without a signal, a fence that never completes makes it wait forever.
   *
   * @param byteLength Bytes.
   * @param options The stream that uses the block, its tag, and a signal
   * that stops the wait: the promise rejects with the signal's reason, the
   * blocks waiting for fences stay pending, and no out-of-memory error is
   * counted (what the first attempt did before the wait, as
   * {@linkcode CachingAllocator.allocate} does, stays done). Already
   * aborted: rejects before anything is done.
   * @returns The owning handle.
   * @throws {InvalidArgumentError} For a bad size, stream, tag or signal.
   * @throws {CachingOutOfMemoryError} When the device cannot hold the block.
   * @throws {SegmentSourceError} When the device threw.
   *
   * @example Wait for a fence instead of failing
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { ManualStream, MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource({ capacityBytes: 2 ** 21 }));
   * const copy = new ManualStream();
   * const a = allocator.allocate(2 ** 20);
   * a.recordStream(copy);
   * a.release(); // waits for `copy`
   * assert.throws(() => allocator.allocate(2 ** 21));
   * setTimeout(() => copy.completeAll(), 1);
   * using b = await allocator.allocateAsync(2 ** 21);
   * assert.equal(b.blockByteLength, 2 ** 21);
   * ```
   *
   * @example Give up on a fence that never completes
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { ManualStream, MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource({ capacityBytes: 2 ** 21 }));
   * const stuck = new ManualStream();
   * const a = allocator.allocate(2 ** 20);
   * a.recordStream(stuck);
   * a.release(); // waits for `stuck`, which never completes
   * await assert.rejects(
   *   allocator.allocateAsync(2 ** 21, { signal: AbortSignal.timeout(10) }),
   *   { name: "TimeoutError" },
   * );
   * assert.equal(allocator.pendingFreeCount, 1); // still pending
   * ```
   */
  async allocateAsync(
    byteLength: number,
    options?: AllocateAsyncOptions,
  ): Promise<CachedBlock<M>> {
    const size = this.roundSize(byteLength);
    if (options !== undefined) {
      validateObject(options, "options");
      validateOptionKeys(options, ALLOCATE_ASYNC_KEYS, "allocateAsync()");
    }
    // each option read once: a getter cannot hand the wait another value
    const stream = this.#checkStream(options?.stream);
    const tagOption = options?.tag;
    const tag = tagOption === undefined ? this.#p.tag : checkTag(tagOption);
    const signal = validateAbortSignal(
      options?.signal,
      `Cannot allocate ${byteLength} bytes`,
    );
    // already aborted: rejects before anything is done
    signal?.throwIfAborted();
    const waitOptions = signal === undefined ? undefined : { signal };
    if (this.#p.deferred.count > 0) this.#p.deferred.poll();
    const pool = size <= this.smallRequestMaxByteLength
      ? this.#p.small
      : this.#p.expandable
      ? this.#p.poolFor(size)
      : this.#p.large;
    let block = this.#p.getFreeBlock(pool, stream.id, size) ??
      this.#p.allocSlow(pool, size, stream);
    // A request above the allowed bytes is refused as is: no fence can
    // make room for it, so none is waited for.
    while (
      block === undefined && this.#p.deferred.count > 0 &&
      size <= this.#p.allowedBytes
    ) {
      // aborted: rejects with the reason; the blocks stay pending
      await this.synchronize(waitOptions);
      block = this.#p.getFreeBlock(pool, stream.id, size) ??
        this.#p.allocSlow(pool, size, stream);
    }
    if (block === undefined) {
      _throwCachingOom(this.#p, byteLength, size, stream, tag);
    }
    return this.#allocFound(block, pool, size, byteLength, stream, tag);
  }

  /**
   * Allocates a block like {@linkcode CachingAllocator.allocate} but makes no
   * object: returns the block's id, a number, for runtimes that keep
   * offsets themselves. Look the block up with
   * {@linkcode CachingAllocator.blockByteOffset} and
   * {@linkcode CachingAllocator.blockMemory}; free it with
   * {@linkcode CachingAllocator.freeById}. A freed id is refused until its
   * slot has been reused 1,024 times (after 256 other ids each time). Each
   * allocator numbers its ids from another generation, so an id passed to
   * the wrong allocator is refused too (unless that allocator's slot has
   * reached the same generation: ids are numbers, not handles).
   * The block lives on the default stream and is not watched by a leak
   * detector.
   *
   * @param byteLength Bytes; 0 gives a block of the minimum size.
   * @returns The block id, a non-negative safe integer.
   * @throws {InvalidArgumentError} For a bad size.
   * @throws {CachingOutOfMemoryError} When the device cannot hold the block.
   * @throws {SegmentSourceError} When the device threw.
   *
   * @example Offsets without handles
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource());
   * const a = allocator.allocateId(1000);
   * assert.equal(allocator.blockByteLength(a), 1024);
   * const memory = allocator.blockMemory(a);
   * allocator.freeById(a);
   * const b = allocator.allocateId(1000); // from the cache: the same bytes
   * assert.equal(allocator.blockMemory(b), memory);
   * allocator.freeById(b);
   * assert.equal(allocator.allocatedBytes, 0);
   * ```
   */
  allocateId(byteLength: number): number {
    // The common case of roundSize() in integer operations.
    // (typeof first: a comparison would call an object's valueOf.)
    const size = typeof byteLength === "number" && byteLength > 0 &&
        byteLength <= this.#intRoundMax && (byteLength | 0) === byteLength
      ? (byteLength + this.#granuleMask) & ~this.#granuleMask
      : this.#roundSizeSlow(byteLength);
    if (this.#ids.full) this.#throwIdsFull(byteLength); // before any change
    if (this.#p.deferred.count > 0) this.#p.deferred.poll();
    const pool = size <= this.smallRequestMaxByteLength
      ? this.#p.small
      : this.#p.expandable
      ? this.#p.poolFor(size)
      : this.#p.large;
    const found = this.#p.getFreeBlock(pool, 0, size) ??
      this.#p.allocSlow(pool, size, DEFAULT_STREAM);
    if (found === undefined) {
      _throwCachingOom(this.#p, byteLength, size, DEFAULT_STREAM, this.#p.tag);
    }
    // (a source that re-entered at the miss may have taken the last slots:
    // the block found stays free)
    if (this.#ids.full) this.#throwIdsFull(byteLength);
    return this.#ids.add(
      this.#p.take(found, pool, size, byteLength, this.#p.tag),
    );
  }

  /**
   * Byte offset of a block allocated by id, in its segment's memory.
   *
   * @param id An id from {@linkcode CachingAllocator.allocateId}.
   * @returns The byte offset.
   * @throws {UseAfterFreeError} When the id is not of a live block.
   */
  blockByteOffset(id: number): number {
    const b = this.#blockById(id, "read the offset of");
    return b.segment.raw.byteOffset + b.offset;
  }

  /**
   * Byte length of a block allocated by id (the rounded size it holds).
   *
   * @param id An id from {@linkcode CachingAllocator.allocateId}.
   * @returns The block's byte length.
   * @throws {UseAfterFreeError} When the id is not of a live block.
   */
  blockByteLength(id: number): number {
    return this.#blockById(id, "read the length of").size;
  }

  /**
   * Memory of a block allocated by id (its segment's memory).
   *
   * @param id An id from {@linkcode CachingAllocator.allocateId}.
   * @returns The memory.
   * @throws {UseAfterFreeError} When the id is not of a live block.
   */
  blockMemory(id: number): M {
    return this.#blockById(id, "read the memory of").segment.raw.memory;
  }

  /**
   * Frees a block allocated by id.
   *
   * @param id An id from {@linkcode CachingAllocator.allocateId}.
   * @throws {DoubleFreeError} When the id is not of a live block (freed
   * already, never given, or a block of the handle API); nothing changes.
   */
  freeById(id: number): void {
    const b = this.#ids.lookUp(id);
    if (b === undefined) {
      throw new DoubleFreeError(
        `Cannot free block id ${
          describeValue(id)
        }: it is not a live block of this ${this.label} allocated by id`,
      );
    }
    this.#ids.remove(b);
    this.#p.release(b);
  }

  #throwIdsFull(byteLength: number): never {
    throw new InvalidArgumentError(
      `Cannot allocate ${byteLength} bytes by id: ${ID_SLOTS} blocks have ids already`,
      { name: "byteLength", value: byteLength, limit: ID_SLOTS },
    );
  }

  #blockById(id: number, what: string): _Block<M> {
    const b = this.#ids.lookUp(id);
    if (b === undefined) {
      throw new UseAfterFreeError(
        `Cannot ${what} block id ${
          describeValue(id)
        }: it is not a live block of this ${this.label} allocated by id`,
      );
    }
    return b;
  }

  /**
   * Runs `fn` with `tag` as the tag of every allocation inside it that gives
   * none of its own (scopes nest; the previous tag is restored after `fn`,
   * also when it throws).
   *
   * @typeParam T What `fn` returns.
   * @param tag The tag, such as a layer name.
   * @param fn The scope.
   * @returns What `fn` returned.
   * @throws {InvalidArgumentError} When `tag` is not a string.
   *
   * @example
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource(), { recordHistory: true });
   * const block = allocator.withTag("conv1", () => allocator.allocate(4096));
   * const entry = allocator.snapshot().history.find((e) => e.action === "alloc");
   * assert.equal(entry?.tag, "conv1");
   * block.release();
   * ```
   */
  withTag<T>(tag: string, fn: () => T): T {
    checkTag(tag);
    if (typeof fn !== "function") {
      throw new InvalidArgumentError(
        `Cannot run with tag ${
          JSON.stringify(tag)
        }: fn must be a function, received ${describeValue(fn)}`,
        { name: "fn", value: fn, limit: "function" },
      );
    }
    const outer = this.#p.tag;
    this.#p.tag = tag;
    try {
      return fn();
    } finally {
      this.#p.tag = outer;
    }
  }

  /**
   * Frees a block (same as `block.release()`). A block used on other streams
   * waits for their fences before it can be reused.
   *
   * @param block A block of this allocator.
   * @throws {InvalidArgumentError} When `block` is no `CachedBlock` at all.
   * @throws {DoubleFreeError} When the block was freed already or belongs to
   * another allocator.
   */
  free(block: CachedBlock<M>): void {
    const b = _blockOf(block);
    if (b === undefined) _throwNotABlock(block);
    if (block.allocator !== this) {
      throw new DoubleFreeError(
        `Cannot free ${
          b === undefined ? describeValue(block) : block
        }: it is not a block of this ${this.label}`,
      );
    }
    if (b === null) {
      throw new DoubleFreeError(`Cannot free ${block}: it was already freed`);
    }
    this.#release(block, b);
    _detach(block);
  }

  static {
    // (#release inlined: one call less on the handle's release)
    _setReleaseHandle(<M>(h: CachedBlock<M>, b: _Block<M>): void => {
      const a = h.allocator;
      a.#p.release(b); // may throw (a stream's fence()): still live
      if (a.#leaks !== undefined) a.#forget(h);
    });
  }

  static {
    const take = <M>(a: CachingAllocator<M>, byteLength: number) =>
      a.#leaks === undefined ? a.#takeBlock(byteLength) : undefined;
    const give = <M>(a: CachingAllocator<M>, b: _BlockPlace<M>): void => {
      // (A cheap guard: not a block, one freed, or one with an id.)
      if (!(b instanceof _Block) || b.state !== ALLOCATED || b.id !== -1) {
        throw new DoubleFreeError(
          `Cannot free ${
            describeValue(b)
          }: it is not a live block from the caching allocator's take hook`,
        );
      }
      a.#p.release(b as _Block<M>);
    };
    const takeUnwatched = <M>(a: CachingAllocator<M>, byteLength: number) =>
      a.#takeBlock(byteLength);
    const takeCached = <M>(
      a: CachingAllocator<M>,
      byteLength: number,
      whole: boolean,
    ) => a.#leaks === undefined ? a.#takeCached(byteLength, whole) : undefined;
    const hooks: _BlockHooks = { take, give, takeUnwatched, takeCached };
    Object.defineProperty(this, Symbol.for("allot.caching.blockHooks"), {
      value: Object.freeze(hooks),
    });
  }

  /** allocate()'s block for the default stream, with no handle. */
  #takeBlock(byteLength: number): _Block<M> {
    const size = typeof byteLength === "number" && byteLength > 0 &&
        byteLength <= this.#intRoundMax && (byteLength | 0) === byteLength
      ? (byteLength + this.#granuleMask) & ~this.#granuleMask
      : this.#roundSizeSlow(byteLength);
    const p = this.#p;
    if (p.deferred.count > 0) p.deferred.poll();
    const pool = size <= this.smallRequestMaxByteLength
      ? p.small
      : p.expandable
      ? p.poolFor(size)
      : p.large;
    const block = p.getFreeBlock(pool, 0, size) ??
      p.allocSlow(pool, size, DEFAULT_STREAM);
    if (block === undefined) {
      _throwCachingOom(p, byteLength, size, DEFAULT_STREAM, p.tag);
    }
    return p.take(block, pool, size, byteLength, p.tag);
  }

  /** `_BlockHooks.takeCached`. */
  #takeCached(byteLength: number, whole: boolean): _Block<M> | undefined {
    const size = typeof byteLength === "number" && byteLength > 0 &&
        byteLength <= this.#intRoundMax && (byteLength | 0) === byteLength
      ? (byteLength + this.#granuleMask) & ~this.#granuleMask
      : this.#roundSizeSlow(byteLength);
    const p = this.#p;
    if (p.deferred.count > 0) p.deferred.poll();
    const pool = size <= this.smallRequestMaxByteLength
      ? p.small
      : p.expandable
      ? p.poolFor(size)
      : p.large;
    let b: _Block<M> | undefined;
    if (!whole) b = p.getFreeBlock(pool, 0, size);
    else if (size >= p.minSegmentByteLength) {
      b = pool.lowerBound(0, size);
      if (
        b !== undefined && (b.size !== size || b.prev !== null ||
          b.next !== null || b.segment.expandable || !p.fits(pool, size, b))
      ) b = undefined;
      else if (b !== undefined) p.clock++;
    }
    return b === undefined
      ? undefined
      : p.take(b, pool, size, byteLength, p.tag);
  }

  #release(block: CachedBlock<M> | null, b: _Block<M>): void {
    this.#p.release(b); // may throw (a stream's fence()): still live
    if (block !== null && this.#leaks !== undefined) this.#forget(block);
  }

  /** Tells the leak detector; the handle is released first (it may throw). */
  #forget(handle: CachedBlock<M>): void {
    _detach(handle);
    this.#leaks!.forget(handle);
  }

  /**
   * Records that `stream` uses `block` (PyTorch's `recordStream`). When the
   * block is freed, it waits for a fence of every recorded stream.
   *
   * @param block A live block of this allocator.
   * @param stream The stream.
   * @throws {UseAfterFreeError} When the block was freed.
   * @throws {InvalidArgumentError} When `stream` is not a stream.
   *
   * @example
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { ManualStream, MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource());
   * const copy = new ManualStream();
   * const a = allocator.allocate(4096);
   * const address = a.address;
   * allocator.recordStream(a, copy);
   * a.release();
   * using b = allocator.allocate(4096); // a is not reusable yet
   * assert.notEqual(b.address, address);
   * copy.completeAll();
   * using c = allocator.allocate(4096);
   * assert.equal(c.address, address);
   * ```
   */
  recordStream(block: CachedBlock<M>, stream: Stream): void {
    const b = _blockOf(block);
    if (b === undefined || block.allocator !== this) {
      throw new InvalidArgumentError(
        `Cannot record a stream on ${
          b === undefined ? describeValue(block) : block
        }: it is not a block of this ${this.label}`,
        { name: "block", value: block },
      );
    }
    if (b === null) {
      throw new UseAfterFreeError(
        `Cannot record a stream on ${block}: the block was released`,
      );
    }
    const s = this.#checkStream(stream);
    if (s.id === b.streamId) return;
    const uses = b.streamUses;
    if (uses === null) b.streamUses = [s];
    else if (!uses.some((u) => u.id === s.id)) uses.push(s);
  }

  /**
   * Waits for every pending fence, then returns the blocks that waited on them
   * to the pool.
   *
   * Without a signal, a fence that never completes makes it wait forever.
   *
   * @param options A signal that stops the wait: the promise rejects with
   * its reason and nothing changes (the blocks stay pending until their
   * fences complete).
   * @returns Resolves when the blocks pending at the call are back in the pool.
   * @throws {InvalidArgumentError} (as a rejection) For bad options.
   */
  async synchronize(options?: SynchronizeOptions): Promise<void> {
    // refused or already aborted: not counted, nothing changes
    validateSynchronizeOptions(options)?.throwIfAborted();
    this.#p.stats.numSyncAllStreams++;
    // A rejected fence also ends: its work will never run.
    await this.#p.deferred.synchronize(options);
    if (this.#p.strict) this.#p.strictCheck();
  }

  /**
   * Returns every whole free segment to the device (PyTorch's `empty_cache`).
   * Blocks still waiting for fences stay; `await synchronize()` first to
   * include them.
   */
  emptyCache(): void {
    this.#p.pressured = false;
    this.#p.releaseCachedBlocks();
    if (this.#p.strict) this.#p.strictCheck();
  }

  /** Sets every peak to its current value. */
  resetPeakStats(): void {
    this.#p.stats.resetPeak();
  }

  /** Sets every allocated and freed total, and the counters, to zero. */
  resetAccumulatedStats(): void {
    this.#p.stats.resetAccumulated();
  }

  /**
   * The stats now, as plain data (see {@linkcode MemoryStats}).
   *
   * @returns A copy of the stats.
   *
   * @example
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource());
   * const a = allocator.allocate(1000);
   * a.release();
   * const stats = allocator.memoryStats();
   * assert.equal(stats.allocatedBytes.all.peak, 1024);
   * // Nothing held was free: the first segment is the request's own size.
   * assert.equal(stats.reservedBytes.smallPool.current, 1024);
   * assert.equal(stats.numDeviceAlloc, 1);
   * ```
   */
  memoryStats(): MemoryStats {
    return this.#p.stats.memoryStats(this.maxSplitByteLength);
  }

  /**
   * A text table of the stats, like `torch.cuda.memory_summary()`.
   *
   * @param options Title and abbreviation.
   * @returns The table.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    validateObject(options, "options");
    checkOptionalString(options.title, "title");
    validateFlag(options.abbreviated, "abbreviated", false);
    return formatMemorySummary(this.memoryStats(), {
      title: `${this.label} on ${this.device}`,
      ...options,
    });
  }

  /**
   * Starts (or restarts, dropping old events) or stops history recording.
   *
   * @param options Recorder options, or `false` to stop.
   */
  recordHistory(options: TraceRecorderOptions | false = {}): void {
    if (options !== false) validateObject(options, "options");
    this.#p.history = options === false ? null : new TraceRecorder(options);
    this.#p.watched = this.#p.strict || this.#p.history !== null;
  }

  /**
   * Every segment with its blocks, and the recorded history: plain data that
   * `JSON.stringify` can write. See the README for the format.
   *
   * @returns The snapshot.
   *
   * @example
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource(), { recordHistory: true });
   * using a = allocator.allocate(1000);
   * const snapshot = JSON.parse(JSON.stringify(allocator.snapshot()));
   * assert.equal(snapshot.segments.length, 1);
   * assert.deepEqual(snapshot.segments[0].blocks.map((b: { state: string }) => b.state), ["active_allocated"]);
   * assert.deepEqual(snapshot.history.map((e: { action: string }) => e.action), ["segment_alloc", "alloc", "snapshot"]);
   * ```
   */
  snapshot(): MemorySnapshot {
    const segments: SegmentSnapshot[] = [];
    for (const seg of this.#p.segments) {
      const blocks: BlockSnapshot[] = [];
      for (let b: _Block<M> | null = seg.head; b !== null; b = b.next) {
        const entry: BlockSnapshot = {
          address: b.address,
          offset: b.offset,
          byteLength: b.size,
          requestedByteLength: b.state === FREE ? 0 : b.requested,
          state: b.state === FREE
            ? "inactive"
            : b.state === ALLOCATED
            ? "active_allocated"
            : "active_pending_free",
        };
        if (b.stack !== undefined && b.state !== FREE) entry.stack = b.stack;
        if (b.tag !== undefined && b.state !== FREE) entry.tag = b.tag;
        blocks.push(entry);
      }
      segments.push({
        id: seg.id,
        address: seg.address,
        byteLength: seg.byteLength,
        stream: seg.stream.id,
        pool: seg.small ? "small" : "large",
        ...segmentTotals(blocks),
        memoryByteOffset: seg.raw.byteOffset,
        blocks,
      });
    }
    return finishSnapshot(
      String(this.device),
      this.label,
      segments,
      this.#p.history,
    );
  }

  /**
   * Checks every internal invariant: blocks tile their segments, no two free
   * neighbours, the pools hold exactly the free blocks in order, pending
   * blocks wait, and every stat equals a recount. For tests.
   *
   * @throws {AllotError} Naming the first broken invariant.
   */
  validate(): void {
    _validateCaching(this.#p);
  }

  // ---- internals ----

  #checkStream(stream: Stream | undefined): Stream {
    return stream === undefined ? DEFAULT_STREAM : checkStream(stream);
  }

  #allocFound(
    b: _Block<M>,
    pool: _BlockPool<M>,
    size: number,
    requested: number,
    stream: Stream,
    tag: string | undefined,
  ): CachedBlock<M> {
    b = this.#p.take(b, pool, size, requested, tag);
    const raw = b.segment.raw;
    const handle = new CachedBlock<M>(
      this,
      b,
      raw.byteOffset + b.offset,
      requested,
      stream,
    );
    if (this.#leaks !== undefined) this.#watch(handle, b);
    return handle;
  }

  /** Hands `handle` to the leak detector; frees its block if that throws. */
  #watch(handle: CachedBlock<M>, b: _Block<M>): void {
    try {
      this.#leaks!.watch(handle, {
        label:
          `${this.label} block of ${handle.byteLength} bytes on ${this.device}`,
        byteLength: b.size,
      });
    } catch (error) {
      this.#p.release(b); // (no stream recorded yet: straight back)
      _detach(handle);
      // a detector that failed after it took the handle in: never handed
      // out, it must not be reported as leaked once it is collected
      try {
        this.#leaks!.forget(handle);
      } catch {
        // the detector's own failure; the first error is the one thrown
      }
      throw error;
    }
  }

  // ---- the allocator contract's verbs (issue #15) ----

  /**
   * Allocates like {@linkcode CachingAllocator.allocate}, but returns
   * `undefined` where it would throw out of memory (the failure still counts
   * in `numOoms` and runs the out-of-memory observers). A bad request, or a
   * segment source that threw, still throws.
   *
   * @param byteLength Number of bytes; 0 gives an ordinary 0-byte block.
   * @param options The stream that uses the block.
   * @returns The owning handle, or `undefined` when the memory is full.
   * @throws {InvalidArgumentError} For a bad size or stream.
   * @throws {SegmentSourceError} When the device threw.
   */
  tryAllocate(
    byteLength: number,
    options?: AllocateOptions,
  ): CachedBlock<M> | undefined {
    try {
      return this.allocate(byteLength, options);
    } catch (error) {
      if (error instanceof OutOfMemoryError) return undefined;
      throw error;
    }
  }

  /**
   * The stats, with PyTorch's meanings: the contract's name of
   * {@linkcode CachingAllocator.memoryStats} (the same record).
   *
   * @returns A plain copy of the stats.
   */
  stats(): MemoryStats {
    return this.memoryStats();
  }
}

/** `free` of a value that is no `CachedBlock`: not a handle of this verb. */
function _throwNotABlock(value: unknown): never {
  throw new InvalidArgumentError(
    `Cannot free ${describeValue(value)}: it is not a CachedBlock`,
    { name: "block", value, limit: "a CachedBlock" },
  );
}

function checkTag(tag: unknown): string {
  if (typeof tag !== "string") {
    throw new InvalidArgumentError(
      `Invalid tag: must be a string, received ${typeof tag}`,
      { name: "tag", value: tag },
    );
  }
  return tag;
}

/** The keys of `CachingAllocatorOptions` (unknown keys are refused). */
export const CACHING_OPTION_KEYS: readonly string[] = Object.freeze([
  "group",
  "minBlockByteLength",
  "smallRequestMaxByteLength",
  "smallSegmentByteLength",
  "largeSegmentByteLength",
  "ownSegmentMinByteLength",
  "largeRoundByteLength",
  "segmentGrowthFraction",
  "minSegmentByteLength",
  "releaseCachedAboveRatio",
  "roundupPower2Divisions",
  "maxSplitByteLength",
  "maxNonSplitRoundingByteLength",
  "maxSplitSize",
  "maxNonSplitRoundingSize",
  "memoryFraction",
  "garbageCollectionThreshold",
  "recordHistory",
  "label",
  "leakDetector",
  "expandableSegments",
  "strict",
]);
