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
 * (`acquireSegment`, `releaseSegment`), the stats
 * ({@linkcode PoolStats}), age-based collection ({@linkcode collectByAge})
 * and history ({@linkcode TraceRecorder}). Segments (taking one, giving one
 * back, expandable segments growing and shrinking) live in
 * `_caching_segments.ts`, the invariant check in `_caching_validate.ts`.
 *
 * @module
 */

import {
  AllotError,
  collectByAge,
  DeferredFrees,
  describeValue,
  DoubleFreeError,
  type Fence,
  InvalidArgumentError,
  junkFill,
  PoolStats,
  type SegmentSource,
  type Stream,
  type TraceAction,
  type TraceRecorder,
} from "@allot/core";
import {
  _Block,
  _BlockPool,
  type _Segment,
  ALLOCATED,
  FREE,
  PENDING,
} from "./_block_pool.ts";
import type { _BlockIds } from "./_block_ids.ts";
import type { _CachingConfig } from "./_caching_config.ts";
import { _validateCaching } from "./_caching_validate.ts";
import {
  _allocSegmentBlock,
  _movedSegmentBlock,
  _releaseSegment,
  _segmentSizeFor,
  _shrinkSegment,
} from "./_caching_segments.ts";
import { _GrowthRoom } from "./_growth_room.ts";
import type { _GroupCore } from "./_caching_group.ts";
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
  readonly segmentGrowth: number;
  readonly minSegmentByteLength: number;
  readonly releaseRatio: number;
  readonly maxSplitByteLength: number;
  readonly maxNonSplitRoundingByteLength: number;
  readonly maxBlockByteLength: number;
  readonly gcThreshold: number;
  readonly expandable: boolean;
  readonly strict: boolean;
  fraction: number;
  readonly small: _BlockPool<M> = new _BlockPool<M>(true);
  readonly large: _BlockPool<M> = new _BlockPool<M>(false);
  // Expandable segments: the own segments' blocks, kept apart from the
  // large pool's expandable segment (same stats pool: large).
  readonly own: _BlockPool<M> = new _BlockPool<M>(false);
  readonly segments: Set<_Segment<M>> = new Set();
  /** Segments moved out of the pool they were made for (see `_movedSegmentBlock`). */
  readonly foreign: Set<_Segment<M>> = new Set();
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
  /** The clock at the last miss that looked for segments to give back. */
  lastMiss = 0;
  /**
   * The ratio giving back uses now: `releaseRatio`, widened while giving
   * back is regretted (see {@linkcode releaseAboveRatio}).
   */
  releaseBound: number;
  /**
   * The ratio a miss whose new segment would raise the held peak gives
   * back to, the new segment counted: `releaseRatio`, doubled in slack each
   * time a segment given back at such a miss is wanted again (see
   * {@linkcode releaseAboveRatio}), halved again once what the widened
   * slack kept has raised the held peak by that slack's worth (see
   * {@linkcode narrowPeakBound}).
   */
  peakBound: number;
  /**
   * Bytes of idle whole free segments that the peak rule, at the configured
   * ratio, would have given back at the current miss but its widened slack
   * kept, and the slack at which it would have begun giving back there (see
   * {@linkcode narrowPeakBound}).
   */
  heldBack = 0;
  heldBackSlack = 0;
  /**
   * The held peak's rises that `heldBack` accounted for since the peak
   * rule's slack last changed.
   */
  peakCost = 0;
  /**
   * Ghosts: segments given back by that rule, remembered as (pool, bytes)
   * after they are gone, oldest first, at most `MAX_GHOSTS` of them and
   * their bytes at most the most bytes reserved at a give-back (ARC's
   * ghost lists, which hold a cache's worth): a later miss that one of
   * them would have served shows that giving it back was regretted. `keep`
   * is the ratio that would have kept it (reserved bytes when it went over
   * the active bytes plus the request); `peak`, whether it went at a miss
   * where the peak rule set the bound (see {@linkcode releaseAboveRatio}).
   */
  ghosts: { small: boolean; size: number; keep: number; peak: boolean }[] = [];
  ghostBytes = 0;
  /** Most bytes the ghosts may hold: the most reserved at a give-back. */
  ghostLimit = 0;
  /** Bytes of ghosts hit since the slack last widened. */
  regretBytes = 0;
  /**
   * Cycles of misses ({@linkcode needAtMiss}): the most bytes active at a
   * miss of this cycle and of the last, the most bytes a miss of this
   * cycle and of the last needed (active plus the request), and whether
   * the current miss is at a low.
   */
  cycleActive = 0;
  lastActive = 0;
  cycleNeed = 0;
  lastNeed = 0;
  atLow = false;
  /**
   * The most bytes reserved after a miss. A miss at a low, or with nothing
   * active, that would raise it gives whole free segments back first (see
   * {@linkcode releaseAboveRatio}).
   */
  heldPeak = 0;
  /** Bytes of ghosts forgotten (dropped unhit) since one was last hit. */
  forgotten = 0;
  history: TraceRecorder | null = null;
  /** The group whose held bound this allocator shares, if any. */
  group: _GroupCore | null = null;
  /** Blocks whose streams' fences are being taken (re-entry is refused). */
  releasing: _Block<M>[] = [];
  /** The facade's `validate()`, which strict mode runs (set by the facade). */
  validate: () => void = () => _validateCaching(this);
  /** Tag of the enclosing `withTag()` scope (segment labels name it). */
  tag: string | undefined = undefined;
  // Whether history or strict mode watch the hot path (one test there).
  watched = false;
  segmentOptions: { label: string; resizable?: boolean };
  // Whether the device refused a segment (expandable segments only).
  pressured = false;
  /** Recent misses per pool (small, large): room for steady growth. */
  readonly growth: [_GrowthRoom, _GrowthRoom] = [
    new _GrowthRoom(),
    new _GrowthRoom(),
  ];
  /** Room beyond the request that the current miss's segment gets. */
  room = 0;
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
    this.segmentGrowth = config.segmentGrowth;
    this.minSegmentByteLength = config.minSegment;
    this.releaseRatio = config.releaseRatio;
    this.releaseBound = config.releaseRatio;
    this.peakBound = config.releaseRatio;
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
    if (b.streamUses === null && !this.watched) {
      // The common case: no other stream used it, nothing watches.
      this.stats.freed(b.segment.small, b.size);
      if (b.size >= this.maxSplitByteLength) {
        this.stats.oversizeAllocation(-1);
      }
      this.freeBlock(b);
    } else {
      this.releaseWatched(b);
    }
  }

  /** release() of a block used on other streams, or with history or strict mode on. */
  releaseWatched(b: _Block<M>): void {
    let fences: Fence[] | null = null;
    let streamIds: number[] | null = null;
    if (b.streamUses !== null) {
      // Take fences before changing anything: a stream may throw, or
      // release this block again from inside fence() (refused).
      if (this.releasing.includes(b)) throwReleasing(b);
      this.releasing.push(b);
      try {
        for (const stream of b.streamUses) {
          const fence = checkFence(stream.fence(), stream);
          if (!completedOrThrew(fence)) {
            (fences ??= []).push(fence);
            (streamIds ??= []).push(stream.id);
          }
        }
      } finally {
        this.releasing.pop();
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
    const b = pool.lowerBound(streamId, size);
    // (Short, so that it inlines into allocate: the limits are apart.)
    return b === undefined || this.fits(pool, size, b) ? b : undefined;
  }

  /**
   * Whether best fit `b` of `pool` may serve `size` bytes: an oversize
   * block only a request of about its size, an own segment (expandable
   * segments) likewise.
   */
  fits(pool: _BlockPool<M>, size: number, b: _Block<M>): boolean {
    const maxSplit = this.maxSplitByteLength;
    if (size < maxSplit && b.size >= maxSplit) return false;
    if (
      size >= maxSplit && b.size >= size + this.maxNonSplitRoundingByteLength
    ) {
      return false;
    }
    // Expandable segments: an own segment serves only a request of about
    // its size (split, it would pin its rest).
    return pool !== this.own || b.size - size < this.largeRoundByteLength;
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
      const restSize = rest.size - size, restAddress = rest.address + size;
      if (!pool.resizeAlone(rest, restSize, restAddress)) {
        pool.resize(rest, restSize, restAddress);
      }
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
    this.stats.allocated(small, bytes, requested);
    if (bytes >= this.maxSplitByteLength) this.stats.oversizeAllocation(1);
    if (this.watched) this.watchTake(b);
    return b;
  }

  /** History and strict mode after take() (kept apart: the hit is short). */
  watchTake(b: _Block<M>): void {
    if (this.history !== null) {
      this.record("alloc", b.address, b.size, b.requested, b.streamId, b.tag);
      if (this.history.captureStack) b.stack = captureStack();
    }
    if (this.strict) this.strictCheck(b);
  }

  /** Strict mode: validates; `b`, if given, must be an allocated block. */
  strictCheck(b?: _Block<M>): void {
    this.validate();
    if (b !== undefined && b.state !== ALLOCATED) {
      throw new AllotError(
        `${this.label} is inconsistent: block not allocated`,
      );
    }
  }

  /**
   * A block back in its pool (its fences done): merged with free
   * neighbours; the survivor is re-keyed in place or inserted.
   */
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
      if (!pool.resizeAlone(prev, size, prev.address)) {
        pool.resize(prev, size, prev.address);
      }
    } else if (nextFree) {
      survivor = next;
      splitBlocks--;
      splitBytes -= next.size;
      const size = next.size + b.size;
      if (!pool.resizeAlone(next, size, b.address)) {
        pool.resize(next, size, b.address);
      }
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

  /** Strict mode and history when freeBlock() frees `b`. */
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

  /**
   * No cached block fits: collect old segments (GC), take a new segment;
   * when the device is full, free cached oversize blocks, then the whole
   * cache, and retry.
   */
  allocSlow(
    pool: _BlockPool<M>,
    size: number,
    stream: Stream,
  ): _Block<M> | undefined {
    // Beyond the allowed bytes even with the cache freed: refused as is.
    if (size > this.allowedBytes) return undefined;
    if (this.gcThreshold > 0) this.garbageCollect();
    if (this.releaseRatio !== Infinity) {
      const need = this.needAtMiss(size);
      if (
        this.lastNeed > 0 &&
        this.stats.reservedBytes + _segmentSizeFor(this, pool, size) >
          this.heldPeak
      ) {
        // Once misses cycle, a new segment would raise the held peak: a
        // whole free segment of the other pool serves the miss instead; at
        // a low (or with nothing active), where the held peak gives back,
        // only one that was moved out of this pool, coming home.
        const low = this.atLow || this.stats.activeBytes === 0;
        const moved = _movedSegmentBlock(this, pool, size, stream, low);
        if (moved !== undefined) return moved;
      }
      if (this.ghosts.length !== 0) this.regret(pool.small, size);
      // Room for steady growth, at most the give-back ratio's share (before
      // giving back, which keeps segments just short of the request only
      // where requests do not grow).
      this.room = this.growth[pool.small ? 0 : 1].miss(
        size,
        this.minBlockByteLength,
        (this.releaseRatio - 1) * size,
      );
      this.releaseAboveRatio(pool, size, need);
    }
    const group = this.group;
    if (group !== null) {
      // A new segment stays under the group's bound where the other members
      // have whole free segments to give back (see `CachingGroup`): once
      // this allocator's misses cycle (see `needAtMiss`), any member's;
      // before, only those of members that made no request during the
      // group's last `GROUP_IDLE_MISSES` misses (weights uploaded at load,
      // then idle while storage grows). From the first misses on with no
      // such rule, a program still growing gave back segments that its other
      // pools wanted again at once (one pass, all buffers: CNN training
      // 1.183 -> 1.158 but U-Net 1.104 -> 1.128, ResNet 1.166 -> 1.183).
      group.regret(this, pool.small, size);
      group.observe();
      group.makeRoom(
        this,
        _segmentSizeFor(this, pool, size),
        this.lastNeed > 0 ? 0 : GROUP_IDLE_MISSES,
      );
    }
    let b = _allocSegmentBlock(this, pool, size, stream, false);
    if (this.stats.reservedBytes > this.heldPeak) {
      if (this.heldBack > 0) this.narrowPeakBound();
      this.heldPeak = this.stats.reservedBytes;
    }
    if (
      b === undefined &&
      this.releaseAvailableCachedBlocks(pool, size, stream.id)
    ) {
      b = _allocSegmentBlock(this, pool, size, stream, false);
    }
    if (b === undefined) {
      // Expandable segments: the device is full, so from now on large
      // requests that the expandable segment cannot serve from its holes get
      // segments of their own, which a full device gets back whole (grown,
      // the segment would pin them in place).
      if (this.expandable) this.pressured = true;
      this.releaseCachedBlocks();
      b = _allocSegmentBlock(this, pool, size, stream, true);
    }
    if (group !== null) group.afterMiss();
    return b;
  }

  /**
   * On a miss: while reserved bytes exceed `releaseRatio` times `need`
   * (the active bytes plus `size`, or at a low the last cycle's peak: see
   * {@linkcode needAtMiss}), gives whole free segments back, least recently
   * used first: those of the request's pool (all smaller than the request, or
   * best fit would have taken one), and those of the other pool unused since
   * the previous such miss (one used since may be needed again at once: a
   * loop that alternates between the pools would otherwise give back and
   * take a segment on every request). One pass over the segments (not the
   * blocks) and one sort of the candidates: the miss that follows asks the
   * device for a buffer anyway. Expandable segments stay (they shrink at
   * `emptyCache()`).
   *
   * The ratio used is `releaseBound`, which backs off: a later miss that a
   * segment given back would have served widens it ({@linkcode regret});
   * a cache's worth of ghosts forgotten with none hit narrows it back
   * toward `releaseRatio`
   * ({@linkcode ghost}). A workload whose steps alternate phases (forward
   * and backward, prefill and decode) would otherwise give back one
   * phase's segments at the next phase's miss and make them again every
   * step.
   *
   * Within a cycle (not at a low), once giving back has been regretted
   * (the back-off has widened the ratio), segments of the request's pool
   * just short of it (at least (`NEAR_SHARES` - 1) / `NEAR_SHARES` of it)
   * whose size another candidate shares are kept, up to `NEAR_KEEP_SHARES`
   * times the request, and others go in their place: a request just past a
   * size the cache holds several of (a batch grown by one) says the step
   * uses sizes like it, and its next requests ask for them again (ResNet
   * with a changing batch: 30 -> 26 buffers remade after the first pass,
   * warm 1.071 -> 1.067). Not where requests grow by a steady step
   * (`room`): there the segment just short is the one outgrown (KV decode
   * 1.050 -> 1.056 kept so); nor at a low, where a step starts again (one
   * block grown 4 KiB at a time, freed between, 1.004 -> 2.953); the regret
   * and the shared size keep random sizes out (log-uniform churn, one pass,
   * up to 1.752 -> 1.898 without them; random growing caches, first pass
   * worst 1.665 -> 1.994).
   *
   * A miss whose new segment would raise the held peak (the peak rule)
   * counts that segment: the bound is `peakBound` times what it needs, less
   * the segment, but no lower than the held peak less the segment. Past the
   * bounds the rules above set, it gives back only segments unused since
   * the previous miss above the bound: a phase's own segments, just used,
   * are what its next requests carve (without this guard, a CNN whose image
   * size changes by phase split its new 20 MiB segments with 12.5 MiB
   * requests whose segment it had given back: 1.281 -> 1.584). A ghost of a
   * miss where it set the bound doubles `peakBound`'s slack when regretted;
   * the held peak raised while the widened slack kept idle segments that the
   * configured ratio would have given back halves it again
   * ({@linkcode narrowPeakBound}).
   * On the 29 recorded traces: storage geomean 1.0615 -> 1.0501 one pass,
   * 1.0773 -> 1.0733 warm (CNN training 1.160 -> 1.138, super-resolution
   * 1.324 -> 1.047 one pass), but 83 -> 108 buffers made after the first
   * pass (the package README lists every row).
   */
  releaseAboveRatio(pool: _BlockPool<M>, size: number, need: number): void {
    const ratioBound = this.releaseBound * need;
    let bound = ratioBound;
    const low = this.atLow || this.stats.activeBytes === 0;
    if (low) {
      // Not above the held peak (see `heldPeak`).
      const peak = Math.max(this.heldPeak, this.releaseRatio * need) - size;
      if (peak < bound) bound = peak;
    }
    const segment = _segmentSizeFor(this, pool, size);
    if (
      this.lastNeed > 0 && this.stats.reservedBytes + segment > this.heldPeak
    ) {
      // Once misses cycle, a new segment that would raise the held peak:
      // half the slack, but no lower than what keeps the peak where it is.
      const halved = Math.max(
        (1 + (this.releaseBound - 1) / PEAK_SLACK_SHARES) * need,
        this.heldPeak - segment,
      );
      if (halved < bound) bound = halved;
    }
    // A new segment that would raise the held peak, counted: give back to
    // `peakBound` times what the miss needs, less that segment, but no lower
    // than what keeps the peak where it is. What only this rule gives back
    // must have gone unused since the previous miss above the bound.
    const older = bound;
    let peak = false;
    // Where the slack has widened, the bound the configured ratio would set
    // (see `heldBack`).
    let narrow = Infinity;
    this.heldBack = 0;
    const reserved = this.stats.reservedBytes;
    if (reserved + segment > this.heldPeak) {
      const floor = this.heldPeak - segment;
      const counted = Math.max(this.peakBound * need - segment, floor);
      if (counted < bound) {
        bound = counted;
        peak = true;
      }
      if (this.peakBound > this.releaseRatio) {
        narrow = Math.max(this.releaseRatio * need - segment, floor);
        if (narrow >= bound || narrow >= reserved) narrow = Infinity;
        else this.heldBackSlack = (reserved + segment) / need - 1;
      }
    }
    const above = reserved > bound;
    if (!above && narrow === Infinity) return;
    let whole: _Block<M>[] | null = null;
    for (const seg of this.segments) {
      const b = seg.head;
      if (
        b.state === FREE && b.next === null && !seg.expandable &&
        (seg.small === pool.small || b.stamp < this.lastMiss)
      ) {
        (whole ??= []).push(b);
      }
    }
    const previousMiss = this.lastMiss;
    if (above) this.lastMiss = this.clock;
    if (whole === null) return;
    // Least recently used first, but a segment under a quarter of the
    // request last: it does little toward the bound, and the small
    // requests that come back find it (transformer var-len: peak held /
    // live 1.0407 -> 1.0362).
    whole.sort((a, b) =>
      (a.size * TINY_SHARES < size ? 1 : 0) -
        (b.size * TINY_SHARES < size ? 1 : 0) || a.stamp - b.stamp
    );
    if (this.stats.reservedBytes > this.ghostLimit) {
      this.ghostLimit = this.stats.reservedBytes;
    }
    // The ratio that would have kept a segment: reserved bytes then over
    // the most bytes needed lately (this cycle's peak or the last's): a
    // segment kept through a dip in what is live costs nothing at the
    // peak. (Over the bytes needed now, a give-back at a low measured a
    // keep of 64.6 on a growing KV cache, and one regret jumped there.)
    const recent = Math.max(need, this.cycleNeed, this.lastNeed);
    // Bytes of segments just short of the request still to keep: within a
    // cycle, once giving back has been regretted, where requests do not grow.
    let near = this.room === 0 && !low && this.releaseBound > this.releaseRatio
      ? NEAR_KEEP_SHARES * size
      : 0;
    for (const b of above ? whole : []) {
      const reserved = this.stats.reservedBytes;
      if (reserved <= bound) break;
      // Under the ratio, the held peak alone gives back no segment under
      // a quarter of the request (a tiny request would take and pin the
      // next larger one: U-Net's staging buffers, 1.1035 -> 1.1142).
      if (reserved <= ratioBound && b.size * TINY_SHARES < size) break;
      // Past the older bounds, the peak rule takes only idle segments.
      if (peak && reserved <= older && b.stamp >= previousMiss) continue;
      const keep = reserved / recent;
      const small = b.segment.small, bytes = b.size;
      if (
        bytes <= near && small === pool.small &&
        bytes * NEAR_SHARES >= size * (NEAR_SHARES - 1) &&
        whole.some((w) =>
          w !== b && w.size === bytes && w.segment.small === small
        )
      ) {
        near -= bytes;
        continue;
      }
      if (_releaseSegment(this, b)) this.ghost(small, bytes, keep, peak);
    }
    if (narrow !== Infinity) {
      // The idle segments still held that the configured ratio would have
      // given back: what the widened slack keeps at this miss.
      let kept = 0;
      for (const b of whole) {
        if (
          this.segments.has(b.segment) && b.stamp < previousMiss &&
          b.size * TINY_SHARES >= size
        ) kept += b.size;
      }
      this.heldBack = Math.min(kept, this.stats.reservedBytes - narrow);
    }
  }

  /**
   * The bytes a miss of `size` bytes is measured against when giving back:
   * the active bytes plus `size` (what it needs), except at a low, where it
   * is the most that a miss of the last cycle needed. Misses fall into
   * cycles: a miss that needs at most 1/`LOW_SHARE` of the most bytes
   * active at a miss of the current cycle is at a low and begins the next
   * (a pass's end, where what a pass made is freed and the next starts
   * again from little: a KV cache grown token by token, pass after pass;
   * a step's end); misses are at a low while they need at most
   * 1/`LOW_SHARE` of the last cycle's active peak. The next cycle is likely
   * to need the last one's peak again, and holding up to it raises no peak
   * held. Measured against what they need (little), misses at a low gave
   * back all but their own request and the next misses made it all again:
   * 4.06x peak live over 8 warm passes of `bench/growth_room.ts`'s step
   * 4 KiB, 64 KiB base (1.10 in one), the back-off having regretted that
   * give-back against almost nothing live and widened to keep every size.
   * Lows are found on active bytes, without the request: a single large
   * request among few live bytes makes no cycle's peak (found on the bytes
   * needed, log-uniform churn saw lows in its first requests and held up
   * to 9 % more). A program that does something large once and small
   * things after keeps up to that peak until its small cycles have a low
   * of their own (not trusting a program's first low, so that it gave such
   * a peak back at once, held more on random growing caches: over 1.5x the
   * first pass 245 -> 280 of 2,000, worst 6.3x -> 7.1x live; the recorded
   * traces are the same to the byte either way). Outside lows nothing
   * changes: giving back as what is live dips within a cycle lets later
   * segments take the sizes its peak needs (the recorded transformer trace
   * holds 1.036 x live so, 1.042 measured against the most the last two
   * misses needed). Misses at a low do not widen the ratio
   * ({@linkcode regret}).
   */
  needAtMiss(size: number): number {
    const active = this.stats.activeBytes, need = active + size;
    if (need * LOW_SHARE <= this.cycleActive) {
      this.lastActive = this.cycleActive;
      this.lastNeed = this.cycleNeed;
      this.cycleActive = active;
      this.cycleNeed = need;
    } else {
      if (active > this.cycleActive) this.cycleActive = active;
      if (need > this.cycleNeed) this.cycleNeed = need;
    }
    this.atLow = need * LOW_SHARE <= this.lastActive;
    return this.atLow ? this.lastNeed : need;
  }

  /**
   * Remembers a segment given back; the oldest ghosts are dropped past
   * `MAX_GHOSTS` or past `ghostLimit` bytes.
   */
  ghost(small: boolean, size: number, keep: number, peak: boolean): void {
    const ghosts = this.ghosts;
    ghosts.push({ small, size, keep, peak });
    this.ghostBytes += size;
    let drop = 0;
    while (
      ghosts.length - drop > MAX_GHOSTS ||
      this.ghostBytes > this.ghostLimit && drop < ghosts.length - 1
    ) {
      this.forgotten += ghosts[drop].size;
      this.ghostBytes -= ghosts[drop++].size;
    }
    if (drop === 0) return;
    ghosts.splice(0, drop);
    // A cache's worth of ghosts forgotten with none hit: giving back is not
    // regretted, the slack halves, down to the configured ratio.
    if (this.forgotten >= this.ghostLimit) {
      this.forgotten = 0;
      this.releaseBound = Math.max(
        this.releaseRatio,
        1 + (this.releaseBound - 1) / 2,
      );
    }
  }

  /**
   * A miss of `size` bytes in the small or large pool: when a segment given
   * back would have served it (the smallest such ghost, which is then
   * forgotten), giving it back was regretted (a device buffer destroyed and
   * made again). Once the regretted bytes since the slack last widened
   * reach the slack itself (slack x reserved bytes: holding twice the slack
   * costs no more bytes than were remade), the slack above 1 doubles, or
   * the ratio becomes the ghost's `keep` when that is wider (one step to a
   * ratio that would have kept it, where doubling would take many). A miss
   * at a low ({@linkcode needAtMiss}) forgets the ghost without regret: a
   * cycle starting again from little says nothing about the ratio within
   * cycles.
   */
  regret(small: boolean, size: number): void {
    const ghosts = this.ghosts;
    let best = -1;
    for (let i = 0; i < ghosts.length; i++) {
      const g = ghosts[i];
      if (
        g.small === small && g.size >= size &&
        (best < 0 || g.size < ghosts[best].size)
      ) best = i;
    }
    if (best < 0) return;
    const g = ghosts[best];
    ghosts.splice(best, 1);
    this.ghostBytes -= g.size;
    if (this.atLow) return;
    // Given back where a new segment would have raised the held peak: that
    // rule's slack doubles at once (a segment remade costs the bytes the
    // rule saved, and a device buffer).
    if (g.peak) {
      this.peakBound = 1 + Math.max(2 * (this.peakBound - 1), MIN_SLACK);
      this.peakCost = 0;
    }
    this.forgotten = 0;
    this.regretBytes += g.size;
    const slack = this.releaseBound - 1;
    if (this.regretBytes >= slack * this.stats.reservedBytes) {
      this.regretBytes = 0;
      this.releaseBound = Math.max(1 + Math.max(2 * slack, MIN_SLACK), g.keep);
    }
  }

  /**
   * The held peak rose at a miss where the peak rule, its slack widened by
   * regrets, kept idle segments that the configured ratio would have given
   * back (`heldBack` bytes): the part of the rise they account for is what
   * the widened slack cost. Once those costs reach the slack in use times
   * the held peak (the bytes the slack lets it hold over the ratio, as a
   * regret's widening is measured in the bytes remade), the slack halves,
   * from the slack that was in use at that miss, down to the configured
   * ratio. Without this, a few regrets early in a long-running program
   * leave the rule off for good (a slack doubled ten times is never
   * reached again).
   */
  narrowPeakBound(): void {
    const rise = this.stats.reservedBytes - this.heldPeak;
    this.peakCost += Math.min(rise, this.heldBack);
    this.heldBack = 0;
    const slack = Math.min(this.peakBound - 1, this.heldBackSlack);
    if (this.peakCost >= slack * this.heldPeak) {
      this.peakCost = 0;
      this.peakBound = Math.max(this.releaseRatio, 1 + slack / 2);
    }
  }

  /**
   * Frees cached oversize blocks of the stream that cover `size`
   * (PyTorch's `release_available_cached_blocks`); whether enough went.
   */
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
        const bytes = b.size;
        if (_releaseSegment(this, b)) released += bytes;
      }
      return released >= key;
    }
    const b = blocks[i];
    return _releaseSegment(this, b);
  }

  /**
   * Returns every whole free segment, and every free tail of an
   * expandable segment, to the device (`emptyCache()`, a full device).
   */
  releaseCachedBlocks(): void {
    if (this.deferred.count > 0) this.deferred.poll();
    for (const pool of this.pools()) {
      const blocks = pool.all();
      for (let i = blocks.length - 1; i >= 0; i--) {
        const b = blocks[i];
        if (b.prev === null && b.next === null) _releaseSegment(this, b);
      }
      pool.prune(); // streams that hold nothing more keep no bins
    }
    for (const growing of this.growing) {
      for (const seg of growing.values()) _shrinkSegment(this, seg);
    }
  }

  /**
   * Above `gcThreshold` of the allowed bytes, frees whole cached
   * segments older than the average until reserved bytes fall below it.
   */
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
    collectByAge(
      candidates,
      ages,
      sizes,
      reserved - threshold,
      (b) => _releaseSegment(this, b),
    );
  }

  /** The pool that holds the free blocks of `seg`. */
  poolOf(seg: _Segment<M>): _BlockPool<M> {
    return seg.small
      ? this.small
      : this.expandable && !seg.expandable
      ? this.own
      : this.large;
  }

  /** Every pool (the own-segment pool only with expandable segments). */
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

  /** Records one history event (history is on). */
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

  /** A block record for `segment`, recycled when one is spare. */
  newBlock(segment: _Segment<M>): _Block<M> {
    if (this.spareCount === 0) return new _Block(segment);
    const b = this.spare[--this.spareCount];
    b.segment = segment;
    return b;
  }

  /** Keeps a block record that left its segment for reuse. */
  recycle(b: _Block<M>): void {
    b.prev = b.next = null;
    b.streamUses = null;
    b.waitingFences = 0;
    b.stack = undefined;
    b.tag = undefined;
    if (b.id >= 0) this.ids.remove(b);
    if (this.spareCount < 1024) {
      if (this.spareCount === this.spare.length) this.spare.push(b);
      else this.spare[this.spareCount] = b;
      this.spareCount++;
    }
  }
}

/**
 * At a miss above the ratio, whole free segments under this share of the
 * request are given back after the others.
 */
const TINY_SHARES = 4;
/**
 * At a miss above the ratio, whole free segments of the request's pool
 * within 1/`NEAR_SHARES` below the request are kept (see
 * `releaseAboveRatio`), up to `NEAR_KEEP_SHARES` times the request.
 * Measured on the recorded traces (ResNet var-batch, storage, warm; remade
 * after the first pass; before the regret and shared-size conditions, which
 * change none of these traces): keeping within 1/8 up to 2x, 1.071 -> 1.067 (30
 * -> 26); within 1/4 up to 2x, the same but after the fence 1.091 ->
 * 1.172; within 1/8 without a limit, 1.073 (12 remade) but after the fence
 * 1.091 -> 1.208; within 1/16 without a limit, ResNet unchanged and KV
 * decode 1.050 -> 1.055.
 */
const NEAR_SHARES = 8;
/** See {@linkcode NEAR_SHARES}. */
const NEAR_KEEP_SHARES = 2;
/**
 * Before an allocator's misses cycle, its group gives back only the segments
 * of members idle for this many of the group's misses. Measured on the
 * recorded traces' all buffers (one pass, warm; buffers made after the first
 * pass): from 16 to 64, ResNet var-batch 1.138 -> 1.078 one pass (warm
 * 1.210 -> 1.217, what it holds alone); 16 also U-Net after the fence 1.392
 * -> 1.368 with 2 buffers made after the first pass; 128 changed nothing; a
 * load phase of uploads followed by storage growing in a few tens of misses
 * (`caching_group_test.ts`) kept its idle uploads at 64 and 128.
 */
const GROUP_IDLE_MISSES = 32;
/**
 * At a miss whose new segment would raise the held peak, the slack in use
 * (`releaseBound` - 1) is divided by this, down to no lower than the bytes
 * that keep the held peak where it is (see `releaseAboveRatio`).
 */
const PEAK_SLACK_SHARES = 2;
/** The slack a regretted give-back widens a `releaseRatio` of 1 to. */
const MIN_SLACK = 1 / 32;
/** Segments given back that are remembered (see `ghosts`). */
const MAX_GHOSTS = 256;
/**
 * A miss that needs at most 1/`LOW_SHARE` of a cycle's peak is at a low
 * (see `needAtMiss`). The recorded real traces' storage pools never dip
 * below 0.71 of their recent peak at a miss that gives back; a pass
 * boundary of a growing KV cache is at 0.015.
 */
const LOW_SHARE = 4;

/** Refuses a release of `b` from inside one of its streams' `fence()`. */
function throwReleasing(b: _Block<unknown>): never {
  throw new DoubleFreeError(
    `Cannot free the block at address ${b.address}: it is being freed (a stream's fence() released it again)`,
  );
}

/** Refuses what a stream's `fence()` returned unless it is a fence. */
function checkFence(fence: Fence, stream: Stream): Fence {
  if (
    typeof fence !== "object" || fence === null ||
    typeof (fence as { wait?: unknown }).wait !== "function"
  ) {
    throw new InvalidArgumentError(
      `Cannot free a block used on stream ${stream.id}: its fence() returned ${
        describeValue(fence)
      }, not a fence (an object with completed and wait())`,
      { name: "fence", value: fence, limit: "Fence" },
    );
  }
  return fence;
}

/** A fence that throws counts as not complete: DeferredFrees reports it. */
function completedOrThrew(fence: Fence): boolean {
  try {
    return fence.completed === true;
  } catch {
    return false;
  }
}
