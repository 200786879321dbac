/**
 * Internal: {@linkcode _CachingPolicy}, PyTorch's caching policy over the
 * pooling core: where a request is served from (best fit in the pool of its
 * size class and stream), how a block is split and merged back, when a new
 * segment is taken (of which size, and what is given back first when the
 * device is full), and age-based garbage collection. The facade,
 * {@linkcode CachingAllocator}, checks arguments and makes handles; this
 * file is the policy, read top-down: free, find, take, merge, grow, give
 * back.
 *
 * The shared machinery comes from `@allot/core`: fence-grouped pending
 * frees ({@linkcode DeferredFrees}), segment acquisition and its errors
 * ({@linkcode acquireSegment}, {@linkcode releaseSegment}), the stats
 * ({@linkcode PoolStats}), age-based collection ({@linkcode collectByAge})
 * and history ({@linkcode TraceRecorder}). Expandable segments live in
 * `_expandable_segments.ts`, the invariant check in `_caching_validate.ts`.
 *
 * @module
 */

import {
  acquireSegment,
  AllotError,
  collectByAge,
  DeferredFrees,
  type Fence,
  junkFill,
  PoolStats,
  releaseSegment,
  type Segment,
  type SegmentSource,
  type Stream,
  type TraceAction,
  type TraceRecorder,
} from "@allot/core";
import {
  _Block,
  type _BlockPool,
  _Segment,
  ALLOCATED,
  FREE,
  PENDING,
} from "./_block_pool.ts";
import { _BlockPool as BlockPool } from "./_block_pool.ts";
import type { _BlockIds } from "./_block_ids.ts";
import type { _CachingConfig } from "./_caching_config.ts";
import { _validateCaching } from "./_caching_validate.ts";
import { _growBlock, _shrinkSegment } from "./_expandable_segments.ts";
import { captureStack } from "./snapshot.ts";

/** The caching policy's state and steps (fields are read by the facade). */
export class _CachingPolicy<M> {
  readonly source: SegmentSource<M>;
  readonly label: string;
  readonly minBlockByteLength: number;
  readonly smallRequestMaxByteLength: number;
  readonly smallSegmentByteLength: number;
  readonly largeSegmentByteLength: number;
  readonly ownSegmentMinByteLength: number;
  readonly largeRoundByteLength: number;
  readonly maxSplitByteLength: number;
  readonly maxNonSplitRoundingByteLength: number;
  readonly maxBlockByteLength: number;
  readonly gcThreshold: number;
  readonly expandable: boolean;
  readonly strict: boolean;
  fraction: number;
  readonly small: _BlockPool<M> = new BlockPool<M>(true);
  readonly large: _BlockPool<M> = new BlockPool<M>(false);
  // Expandable segments: the own segments' blocks, kept apart from the
  // large pool's expandable segment (same stats pool: large).
  readonly own: _BlockPool<M> = new BlockPool<M>(false);
  readonly segments: Set<_Segment<M>> = new Set();
  // _Block<unknown>: a callback parameter of M would make M invariant.
  readonly deferred: DeferredFrees<_Block<unknown>> = new DeferredFrees<
    _Block<unknown>
  >((b) => this.freeBlock(b as _Block<M>));
  readonly stats: PoolStats = new PoolStats();
  readonly ids: _BlockIds<M>;
  // Recycled block records, a stack that never shrinks: pop() to empty and
  // push() again would reallocate the array's store on every hit.
  spare: _Block<M>[] = [];
  spareCount = 0;
  nextSegmentId = 1;
  nextAddress = 0;
  /** Allocation requests so far: the age of a cached block is counted in them. */
  clock = 0;
  history: TraceRecorder | null = null;
  /** Tag of the enclosing `withTag()` scope (segment labels name it). */
  tag: string | undefined = undefined;
  // Whether history or strict mode watch the hot path (one test there).
  watched = false;
  segmentOptions: { label: string; resizable?: boolean };
  // Whether the device refused a segment (expandable segments only).
  pressured = false;
  // The expandable segment of each stream, per pool (small, large).
  readonly growing: [Map<number, _Segment<M>>, Map<number, _Segment<M>>] = [
    new Map(),
    new Map(),
  ];

  constructor(
    source: SegmentSource<M>,
    config: _CachingConfig,
    ids: _BlockIds<M>,
  ) {
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
    this.fraction = config.fraction;
    this.gcThreshold = config.gcThreshold;
    this.expandable = config.expandable;
    this.strict = config.strict;
    this.watched = config.strict;
    this.ids = ids;
    this.segmentOptions = { label: config.label };
  }

  /** Bytes the allocator may reserve: fraction times capacity. */
  get allowedBytes(): number {
    return this.fraction * this.source.capacityBytes;
  }

  /**
   * A block freed by the caller: it waits for the fences of the streams
   * that used it (pending), or goes back to the pool now.
   */
  release(b: _Block<M>): void {
    let fences: Fence[] | null = null;
    let streamIds: number[] | null = null;
    if (b.streamUses !== null) {
      // Take fences before changing anything: a stream may throw.
      for (const stream of b.streamUses) {
        const fence = stream.fence();
        if (!completedOrThrew(fence)) {
          (fences ??= []).push(fence);
          (streamIds ??= []).push(stream.id);
        }
      }
    }
    b.streamUses = null;
    const small = b.segment.small;
    this.stats.freed(small, b.size);
    if (b.size >= this.maxSplitByteLength) {
      this.stats.oversizeAllocation(-1);
    }
    if (this.history !== null) {
      this.record(
        "free_requested",
        b.address,
        b.size,
        b.requested,
        b.streamId,
        b.tag,
      );
    }
    if (fences !== null) {
      b.state = PENDING;
      this.deferred.defer(b, streamIds!, fences);
      // Still active: allocation moved to pending free.
      this.stats.pending(small, b.size);
    } else {
      this.freeBlock(b);
    }
    if (this.watched && this.strict) this.strictCheck();
  }

  /**
   * The best-fitting free block of `pool` for `size` bytes on stream
   * `streamId` (still in the pool: `take()` carves it), or `undefined`.
   */
  getFreeBlock(
    pool: _BlockPool<M>,
    streamId: number,
    size: number,
  ): _Block<M> | undefined {
    this.clock++;
    if (pool.count === 0) return undefined;
    const b = pool.lowerBound(streamId, size);
    if (b === undefined) return undefined;
    const maxSplit = this.maxSplitByteLength;
    if (size < maxSplit && b.size >= maxSplit) return undefined;
    if (
      size >= maxSplit && b.size >= size + this.maxNonSplitRoundingByteLength
    ) {
      return undefined;
    }
    if (pool === this.own && b.size - size >= this.largeRoundByteLength) {
      // Expandable segments: an own segment serves only a request of about
      // its size (split, it would pin its rest).
      return undefined;
    }
    return b; // still in the pool: take() re-keys or removes it
  }

  /** Carves `size` bytes from free block `b`: the allocated block. */
  take(
    b: _Block<M>,
    pool: _BlockPool<M>,
    size: number,
    requested: number,
    tag: string | undefined,
  ): _Block<M> {
    // (Under pressure a large request may be served from an own segment.)
    if (this.expandable) pool = this.poolOf(b.segment);
    const small = pool.small;
    const alreadySplit = b.prev !== null || b.next !== null;
    const remaining = b.size - size;
    const split = pool.small
      ? remaining >= this.minBlockByteLength
      : size < this.maxSplitByteLength &&
        remaining > this.smallRequestMaxByteLength &&
        (b.segment.expandable || !this.expandable);
    if (split) {
      const rest = b;
      const seg = rest.segment;
      b = this.newBlock(seg);
      b.offset = rest.offset;
      b.address = rest.address;
      b.size = size;
      b.streamId = rest.streamId;
      b.prev = rest.prev;
      if (b.prev !== null) b.prev.next = b;
      else seg.head = b;
      b.next = rest;
      rest.prev = b;
      pool.resize(rest, rest.size - size, rest.address + size);
      rest.offset += size;
      rest.stamp = this.clock;
      if (alreadySplit) this.stats.splitTaken(small, size, 0);
      else this.stats.split(small, 1, rest.size);
    } else {
      pool.remove(b);
      if (alreadySplit) this.stats.splitTaken(small, b.size, 1);
    }
    b.state = ALLOCATED;
    b.requested = requested;
    b.tag = tag;
    const bytes = b.size;
    this.stats.allocated(
      small,
      bytes,
      requested,
      this.deferred.count !== 0,
    );
    if (bytes >= this.maxSplitByteLength) this.stats.oversizeAllocation(1);
    if (this.watched) this.watchTake(b);
    return b;
  }

  /** History and strict mode after #take (kept apart: the hit is short). */
  watchTake(b: _Block<M>): void {
    if (this.history !== null) {
      this.record("alloc", b.address, b.size, b.requested, b.streamId, b.tag);
      if (this.history.captureStack) b.stack = captureStack();
    }
    if (this.strict) this.strictCheck(b);
  }

  /** Strict mode: validates; `b`, if given, must be an allocated block. */
  strictCheck(b?: _Block<M>): void {
    _validateCaching(this);
    if (b !== undefined && b.state !== ALLOCATED) {
      throw new AllotError(
        `${this.label} is inconsistent: block not allocated`,
      );
    }
  }

  freeBlock(b: _Block<M>): void {
    const seg = b.segment;
    const pool = this.poolOf(seg);
    const originalSize = b.size, requested = b.requested;
    const wasPending = b.state === PENDING;
    if (this.watched) this.watchFree(b);
    // The merged block lives on in a free neighbour when there is one
    // (already in the pool: re-keyed in place), else in b (inserted).
    let splitBlocks = 0, splitBytes = 0;
    const prev = b.prev, next = b.next;
    const prevFree = prev !== null && prev.state === FREE;
    const nextFree = next !== null && next.state === FREE;
    let survivor: _Block<M>;
    if (prevFree) {
      survivor = prev;
      splitBlocks--;
      splitBytes -= prev.size;
      let size = prev.size + b.size;
      prev.next = next;
      if (next !== null) next.prev = prev;
      if (nextFree) {
        pool.remove(next);
        splitBlocks--;
        splitBytes -= next.size;
        size += next.size;
        prev.next = next.next;
        if (next.next !== null) next.next.prev = prev;
        this.recycle(next);
      }
      this.recycle(b);
      prev.stamp = this.clock;
      pool.resize(prev, size, prev.address);
    } else if (nextFree) {
      survivor = next;
      splitBlocks--;
      splitBytes -= next.size;
      pool.resize(next, next.size + b.size, b.address);
      next.offset = b.offset;
      next.prev = prev;
      if (prev !== null) prev.next = next;
      else seg.head = next;
      this.recycle(b);
      next.stamp = this.clock;
    } else {
      survivor = b;
      b.state = FREE;
      b.requested = 0;
      b.stack = undefined;
      b.tag = undefined;
      b.stamp = this.clock;
      pool.insert(b);
    }
    if (survivor.prev !== null || survivor.next !== null) {
      splitBlocks++;
      splitBytes += survivor.size;
    }
    this.stats.inactive(
      seg.small,
      originalSize,
      requested,
      wasPending,
      splitBlocks,
      splitBytes,
    );
  }

  /** Strict mode and history when #freeBlock frees `b`. */
  watchFree(b: _Block<M>): void {
    const seg = b.segment;
    if (this.strict) {
      junkFill(seg.raw.memory, seg.raw.byteOffset + b.offset, b.size);
    }
    if (this.history !== null) {
      this.record(
        "free_completed",
        b.address,
        b.size,
        b.requested,
        b.streamId,
        b.tag,
      );
    }
  }

  allocSlow(
    pool: _BlockPool<M>,
    size: number,
    stream: Stream,
  ): _Block<M> | undefined {
    if (this.gcThreshold > 0) this.garbageCollect();
    let b = this.allocBlock(pool, size, stream, false);
    if (b !== undefined) return b;
    if (this.releaseAvailableCachedBlocks(pool, size, stream.id)) {
      b = this.allocBlock(pool, size, stream, false);
      if (b !== undefined) return b;
    }
    // Expandable segments: the device is full, so from now on large requests
    // that the expandable segment cannot serve from its holes get segments
    // of their own, which a full device gets back whole (grown, the
    // segment would pin them in place).
    if (this.expandable) this.pressured = true;
    this.releaseCachedBlocks();
    return this.allocBlock(pool, size, stream, true);
  }

  segmentSizeFor(pool: _BlockPool<M>, size: number): number {
    let s = pool.small
      ? this.smallSegmentByteLength
      : size < this.ownSegmentMinByteLength
      ? this.largeSegmentByteLength
      : Math.ceil(size / this.largeRoundByteLength) * this.largeRoundByteLength;
    if (s > this.maxBlockByteLength) s = this.maxBlockByteLength;
    return s < size ? size : s;
  }

  allocBlock(
    pool: _BlockPool<M>,
    size: number,
    stream: Stream,
    isRetry: boolean,
  ): _Block<M> | undefined {
    if (isRetry) this.stats.numAllocRetries++;
    if (
      this.expandable && (pool.small || size < this.ownSegmentMinByteLength)
    ) {
      if (pool.small || !this.pressured) {
        return _growBlock(this, pool, size, stream);
      }
      const own = this.getFreeBlock(this.own, stream.id, size);
      if (own !== undefined) return own;
      pool = this.own;
    }
    const full = this.expandable
      ? Math.ceil(size / this.minBlockByteLength) * this.minBlockByteLength
      : this.segmentSizeFor(pool, size);
    const allowed = this.allowedBytes;
    const reserved = this.stats.reservedBytes;
    let raw = undefined;
    let segSize = full;
    if (reserved + full <= allowed) raw = this.trySegment(full, size, pool);
    if (raw === undefined && full > size) {
      // A device too small or too full for a whole segment: take just enough.
      // (PyTorch fails here; on small devices this keeps large requests
      // possible.)
      const granule = pool.small
        ? this.minBlockByteLength
        : this.largeRoundByteLength;
      let tight = Math.ceil(size / granule) * granule;
      if (tight > full) tight = full;
      if (tight < full && reserved + tight <= allowed) {
        segSize = tight;
        raw = this.trySegment(tight, size, pool);
      }
      if (raw === undefined && tight !== size && reserved + size <= allowed) {
        segSize = size;
        raw = this.trySegment(size, size, pool);
      }
    }
    if (raw === undefined) return undefined;
    return this.addSegment(raw, segSize, pool, stream, false);
  }

  /** A new segment's one free block, in the pool; stats and history. */
  addSegment(
    raw: Segment<M>,
    segSize: number,
    pool: _BlockPool<M>,
    stream: Stream,
    expandable: boolean,
  ): _Block<M> {
    const seg = new _Segment<M>(
      this.nextSegmentId++,
      this.nextAddress,
      raw,
      segSize,
      pool.small,
      stream,
      expandable,
    );
    // An expandable segment keeps the address range it may grow into.
    this.nextAddress += expandable ? this.maxBlockByteLength : segSize;
    this.segments.add(seg);
    const b = this.newBlock(seg);
    b.offset = 0;
    b.address = seg.address;
    b.size = segSize;
    b.streamId = stream.id;
    b.state = FREE;
    b.requested = 0;
    b.prev = b.next = null;
    b.stamp = this.clock;
    seg.head = b;
    pool.insert(b); // #allocFound takes it from the pool like a cached one
    this.stats.reserved(pool.small, 1, segSize);
    if (segSize >= this.maxSplitByteLength) this.stats.oversizeSegment(1);
    this.stats.numDeviceAlloc++;
    if (this.history !== null) {
      this.record("segment_alloc", seg.address, segSize, 0, stream.id);
    }
    return b;
  }

  trySegment(
    segSize: number,
    size: number,
    pool: _BlockPool<M>,
  ): ReturnType<SegmentSource<M>["tryAllocateSegment"]> {
    const where = pool.small ? "small pool" : "large pool";
    const tag = this.tag === undefined ? "" : `, tag ${this.tag}`;
    this.segmentOptions.label = `${this.label} ${where}${tag}`;
    return acquireSegment(this.source, segSize, size, this.segmentOptions);
  }

  /** Returns a whole free segment (in its pool) to the device. */
  releaseBlock(b: _Block<M>): void {
    const seg = b.segment;
    const pool = this.poolOf(seg);
    pool.remove(b);
    this.segments.delete(seg);
    if (seg.expandable) {
      const growing = this.growing[seg.small ? 0 : 1];
      if (growing.get(seg.stream.id) === seg) growing.delete(seg.stream.id);
    }
    this.stats.unreserved(seg.small, 1, seg.byteLength);
    if (seg.byteLength >= this.maxSplitByteLength) {
      this.stats.oversizeSegment(-1);
    }
    this.stats.numDeviceFree++;
    if (this.history !== null) {
      this.record(
        "segment_free",
        seg.address,
        seg.byteLength,
        0,
        seg.stream.id,
      );
    }
    this.recycle(b);
    releaseSegment(
      this.source,
      seg.raw,
      `segment ${seg.id} of ${seg.byteLength} bytes`,
    );
  }

  releaseAvailableCachedBlocks(
    pool: _BlockPool<M>,
    size: number,
    streamId: number,
  ): boolean {
    const maxSplit = this.maxSplitByteLength;
    if (maxSplit === Infinity) return false;
    const key = size < maxSplit ? maxSplit : size;
    // The slow path: work on a flat copy of the pool.
    const blocks = pool.all();
    let i = 0;
    while (
      i < blocks.length &&
      (blocks[i].streamId < streamId ||
        (blocks[i].streamId === streamId && blocks[i].size < key))
    ) i++;
    if (i === blocks.length || blocks[i].streamId !== streamId) {
      if (i === 0) return false;
      let released = 0;
      i--;
      while (
        released < key && i >= 0 && blocks[i].size >= maxSplit &&
        blocks[i].streamId === streamId
      ) {
        const b = blocks[i--];
        if (b.prev === null && b.next === null) {
          released += b.size;
          this.releaseBlock(b);
        }
      }
      return released >= key;
    }
    const b = blocks[i];
    if (b.prev !== null || b.next !== null) return false;
    this.releaseBlock(b);
    return true;
  }

  releaseCachedBlocks(): void {
    if (this.deferred.count > 0) this.deferred.poll();
    for (const pool of this.pools()) {
      const blocks = pool.all();
      for (let i = blocks.length - 1; i >= 0; i--) {
        const b = blocks[i];
        if (b.prev === null && b.next === null) this.releaseBlock(b);
      }
      pool.prune(); // streams that hold nothing more keep no bins
    }
    for (const growing of this.growing) {
      for (const seg of growing.values()) _shrinkSegment(this, seg);
    }
  }

  garbageCollect(): void {
    const allowed = this.allowedBytes;
    if (!Number.isFinite(allowed)) return;
    const threshold = this.gcThreshold * allowed;
    const reserved = this.stats.reservedBytes;
    if (reserved <= threshold) return;
    const candidates: _Block<M>[] = [], ages: number[] = [];
    const sizes: number[] = [];
    for (const pool of this.pools().reverse()) {
      for (const b of pool.all()) {
        if (b.prev === null && b.next === null) {
          candidates.push(b);
          ages.push(this.clock - b.stamp);
          sizes.push(b.size);
        }
      }
    }
    collectByAge(candidates, ages, sizes, reserved - threshold, (b) => {
      this.releaseBlock(b);
      return true;
    });
  }

  poolOf(seg: _Segment<M>): _BlockPool<M> {
    return seg.small
      ? this.small
      : this.expandable && !seg.expandable
      ? this.own
      : this.large;
  }

  pools(): _BlockPool<M>[] {
    return this.expandable
      ? [this.small, this.large, this.own]
      : [this.small, this.large];
  }

  /** The pool a request of `size` rounded bytes is served from. */
  poolFor(size: number): _BlockPool<M> {
    return size <= this.smallRequestMaxByteLength
      ? this.small
      : this.expandable && size >= this.ownSegmentMinByteLength
      ? this.own
      : this.large;
  }

  record(
    action: TraceAction,
    address: number,
    size: number,
    requested: number,
    stream: number,
    tag?: string,
  ): void {
    this.history!.record(action, address, size, requested, stream, tag);
  }

  newBlock(segment: _Segment<M>): _Block<M> {
    if (this.spareCount === 0) return new _Block(segment);
    const b = this.spare[--this.spareCount];
    b.segment = segment;
    return b;
  }

  recycle(b: _Block<M>): void {
    b.prev = b.next = null;
    b.streamUses = null;
    b.waitingFences = 0;
    b.stack = undefined;
    b.tag = undefined;
    if (b.slot >= 0) this.ids.remove(b);
    if (this.spareCount < 1024) {
      if (this.spareCount === this.spare.length) this.spare.push(b);
      else this.spare[this.spareCount] = b;
      this.spareCount++;
    }
  }
}

/** A fence that throws counts as not complete: DeferredFrees reports it. */
function completedOrThrew(fence: Fence): boolean {
  try {
    return fence.completed === true;
  } catch {
    return false;
  }
}
