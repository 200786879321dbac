/**
 * Internal: {@linkcode _WatermarkPolicy}, the MPS heap allocator's policy
 * over the pooling core: which pool and heap a request goes to, best-fit
 * reuse with its slack rules, the order of attempts when memory is short
 * (garbage collection under pressure, callbacks, releasing cached buffers),
 * and the low and high watermarks. The facade,
 * {@linkcode WatermarkAllocator}, checks arguments and hands out buffers;
 * this file is the policy, read top-down: free, allocate, find, carve,
 * give back, collect.
 *
 * The shared machinery comes from `@allot/core`: fence-grouped pending
 * frees ({@linkcode DeferredFrees}), segment acquisition and its errors
 * (`acquireSegment`, `releaseSegment`, in `_watermark_heaps.ts`), the stats
 * ({@linkcode PoolStats}), age-based collection ({@linkcode collectByAge})
 * and history ({@linkcode TraceRecorder}).
 *
 * @module
 */

import {
  alignUp,
  collectByAge,
  DeferredFrees,
  describeValue,
  formatBytes,
  InvalidArgumentError,
  junkFill,
  PoolStats,
  type SegmentSource,
  type TraceAction,
  type TraceRecorder,
} from "@allot/core";
import { _Block } from "./_block.ts";
import type { _BufferEvents } from "./_buffer_events.ts";
import { _Handle, type _Owner } from "./_handle.ts";
import type { _Heap } from "./_heap.ts";
import { _Pool } from "./_pool.ts";
import type { _WatermarkConfig } from "./_watermark_config.ts";
import { _createHeap, _releaseHeap } from "./_watermark_heaps.ts";
import { _validateWatermark } from "./_watermark_validate.ts";
import { DebugVerbosity } from "./debug_verbosity.ts";
import type { HostViewFunction } from "./watermark_options.ts";
import type { PoolKind, ReleaseReason } from "./watermark_buffer.ts";

/** One request as the policy's steps see it. */
export interface _Params<M> {
  size: number;
  requested: number;
  pool: _Pool<M>;
  pressure: boolean;
}

/** The watermark policy's state and steps (fields are read by the facade). */
export class _WatermarkPolicy<M> {
  readonly source: SegmentSource<M>;
  readonly alignment: number;
  /** The source's largest segment, read once at construction. */
  readonly maxSegment: number;
  readonly unifiedMemory: boolean;
  readonly recommended: number;
  highRatio = 0;
  lowRatio = 0;
  highLimit = Infinity;
  lowLimit = Infinity;
  readonly maxSmall: number;
  readonly minLarge: number;
  readonly smallHeap: number;
  readonly largeHeap: number;
  readonly xlargeHeap: number;
  readonly minSmallHeap: number;
  readonly minLargeHeap: number;
  readonly minXlargeHeap: number;
  readonly roundLarge: number;
  readonly maxSlack: number;
  readonly maxScalar: number;
  readonly driverFn: (() => number) | undefined;
  readonly hostView: HostViewFunction<M>;
  readonly strict: boolean;
  readonly events: _BufferEvents<M>;
  readonly pools: {
    privateSmall: _Pool<M>;
    privateLarge: _Pool<M>;
    sharedSmall: _Pool<M>;
    sharedLarge: _Pool<M>;
    scalar: _Pool<M>;
  } = {
    privateSmall: new _Pool("private", true),
    privateLarge: new _Pool("private", false),
    sharedSmall: new _Pool("shared", true),
    sharedLarge: new _Pool("shared", false),
    scalar: new _Pool("scalar", true),
  };
  readonly poolList: _Pool<M>[] = Object.values(this.pools);
  readonly live: Map<_Handle<M>, _Block<M>> = new Map();
  pendingCount = 0;
  // _Block<unknown>: a callback parameter of M would make M invariant.
  readonly deferred: DeferredFrees<_Block<unknown>> = new DeferredFrees<
    _Block<unknown>
  >((b) => {
    const block = b as _Block<M>;
    // (a callback may have freed it already)
    if (block.heap.pool.pendingFree.delete(block)) {
      this.pendingCount--;
      this.released++;
      this.makeCached(block, true);
    }
  });
  /** Pending frees returned to their pools so far. */
  released = 0;
  /** What handles ask of the allocator (set by the facade). */
  owner!: _Owner<M>;
  /** The facade's `validate()`, which strict mode runs (set by the facade). */
  validate: () => void = () => _validateWatermark(this);
  // The figures of @allot/core's MemoryStats, per small and large pool
  // (heaps are segments; the scalar pool is small).
  readonly stats: PoolStats = new PoolStats();
  numAllocations = 0;
  numRecycles = 0;
  numReleases = 0;
  numGc = 0;
  numGcReleased = 0;
  history: TraceRecorder | null = null;
  nextAddress = 0;

  constructor(
    source: SegmentSource<M>,
    config: _WatermarkConfig<M>,
    events: _BufferEvents<M>,
  ) {
    this.source = source;
    this.alignment = config.alignment;
    this.maxSegment = config.maxSegment;
    this.unifiedMemory = config.unifiedMemory;
    this.recommended = config.recommended;
    this.maxSmall = config.maxSmall;
    this.minLarge = config.minLarge;
    this.smallHeap = config.smallHeap;
    this.largeHeap = config.largeHeap;
    this.xlargeHeap = config.xlargeHeap;
    this.minSmallHeap = config.minSmallHeap;
    this.minLargeHeap = config.minLargeHeap;
    this.minXlargeHeap = config.minXlargeHeap;
    this.roundLarge = config.roundLarge;
    this.maxSlack = config.maxSlack;
    this.maxScalar = config.maxScalar;
    this.driverFn = config.driverFn;
    this.hostView = config.hostView;
    this.strict = config.strict;
    this.events = events;
    this.setRatios(config.highRatio, config.lowRatio);
  }

  /** Bytes the device reports for this process. */
  get driverAllocatedBytes(): number {
    const own = this.stats.reservedBytes;
    if (this.driverFn === undefined) return own;
    // Read mid-operation: a function that throws or returns no byte count
    // (NaN would pass every limit check) counts this allocator's heaps.
    let bytes: unknown;
    try {
      bytes = this.driverFn();
    } catch {
      return own;
    }
    return typeof bytes === "number" && bytes >= 0 &&
        bytes <= Number.MAX_SAFE_INTEGER
      ? Math.max(bytes, own)
      : own;
  }

  /** Bytes left below the low watermark limit (0: memory pressure). */
  get lowWatermarkValue(): number {
    if (this.lowRatio === 0) return Infinity;
    return Math.max(0, this.lowLimit - this.driverAllocatedBytes);
  }

  /** Frees live `block` of `handle`: cached now, or pending its fences. */
  free(handle: _Handle<M>, block: _Block<M>): void {
    this.check();
    this.live.delete(handle);
    this.stats.freed(block.heap.pool.small, block.byteLength);
    if (!block.heap.isSplit) this.stats.oversizeAllocation(-1);
    if (this.history !== null) {
      this.record(
        "free_requested",
        block.heap.address + block.offset,
        block.byteLength,
        block.requestedByteLength,
      );
    }
    block.handle = undefined;
    block.shape = [];
    if (block.idle()) this.makeCached(block, false);
    else {
      this.stats.pending(block.heap.pool.small, block.byteLength);
      block.state = "pending-free";
      block.heap.pool.pendingFree.add(block);
      this.pendingCount++;
      this.deferred.defer(block, block.fenceKeys, block.fences);
    }
    this.check();
  }

  /**
   * A buffer of `requested` bytes from a pool of `kind`, or `undefined`;
   * strict mode validates before and after.
   */
  tryAllocate(requested: number, kind: PoolKind): _Block<M> | undefined {
    this.check();
    const block = this.tryAllocateChecked(requested, kind);
    this.check();
    return block;
  }

  /**
   * The order of attempts: a cached buffer; garbage collection under
   * pressure; a new buffer; `allocation-failed` callbacks, then a cached or
   * new buffer; releasing cached buffers of the pool, then all of them.
   */
  tryAllocateChecked(
    requested: number,
    kind: PoolKind,
  ): _Block<M> | undefined {
    this.freeInactiveBuffers();
    // (a 0-byte request gets an ordinary buffer of one alignment unit)
    const size = alignUp(requested === 0 ? 1 : requested, this.alignment);
    const pool = this.getPool(requested, size, kind);
    const params: _Params<M> = {
      size,
      requested,
      pool,
      pressure: this.lowWatermarkValue <= 0,
    };
    let block = this.getFreeBuffer(params);
    let recycled = block !== undefined;
    if (block === undefined) {
      if (params.pressure && size < pool.availableBytes) {
        this.garbageCollect(params);
      }
      block = this.allocBuffer(params);
      if (block === undefined) {
        this.events.emit("allocation-failed", undefined, pool, requested);
        this.freeInactiveBuffers();
        block = this.getFreeBuffer(params);
        recycled = block !== undefined;
        block ??= this.allocBuffer(params);
      }
      if (block === undefined && this.releaseAvailableCached(params)) {
        block = this.allocBuffer(params);
      }
      if (block === undefined) {
        this.releaseCachedBuffers("release-cached");
        this.stats.numAllocRetries++;
        block = this.allocBuffer(params);
      }
    }
    if (block === undefined) return undefined;
    block.state = "active";
    block.useCount++;
    block.requestedByteLength = requested;
    this.stats.allocated(
      pool.small,
      block.byteLength,
      requested,
      this.pendingCount !== 0,
    );
    if (!block.heap.isSplit) this.stats.oversizeAllocation(1);
    const handle = new _Handle(block, this.owner);
    block.handle = handle;
    this.live.set(handle, block);
    if (this.history !== null) {
      this.record(
        "alloc",
        block.heap.address + block.offset,
        block.byteLength,
        requested,
      );
    }
    if (recycled) {
      this.numRecycles++;
      if (this.events.verbosity !== 0) {
        this.events.log(
          DebugVerbosity.recycles,
          pool,
          () =>
            `Reusing ${pool.kind} buffer #${block.id} of size ${
              formatBytes(block.byteLength)
            } (requested: ${formatBytes(requested)}, use#: ${block.useCount})`,
        );
      }
      this.events.emit("recycled", block, pool, block.byteLength);
    } else {
      this.numAllocations++;
      if (this.events.verbosity !== 0) {
        this.events.log(
          DebugVerbosity.allocations,
          pool,
          () =>
            `Allocated ${pool.kind} buffer #${block.id} of size ${
              formatBytes(block.byteLength)
            } from heap #${block.heap.id} (requested: ${
              formatBytes(requested)
            }, total: ${formatBytes(this.stats.reservedBytes)})`,
        );
      }
      this.events.emit("allocated", block, pool, block.byteLength);
    }
    return block;
  }

  /**
   * The pool of a request: scalar, shared small (tiny requests on
   * unified memory), or private/shared small/large by size.
   */
  getPool(
    requested: number,
    size: number,
    kind: PoolKind,
  ): _Pool<M> {
    const p = this.pools;
    if (kind === "scalar") return p.scalar;
    if (requested <= this.maxScalar && this.unifiedMemory) {
      return p.sharedSmall;
    }
    if (size <= this.maxSmall) {
      return kind === "shared" ? p.sharedSmall : p.privateSmall;
    }
    return kind === "shared" ? p.sharedLarge : p.privateLarge;
  }

  /**
   * The best-fitting cached buffer within the slack rules, taken
   * from the pool; an idle oversize buffer may be released to make room.
   */
  getFreeBuffer(params: _Params<M>): _Block<M> | undefined {
    const pool = params.pool;
    if (this.lowRatio > 0) {
      pool.epoch++; // ages every cached buffer of the pool by one
    }
    const block = pool.bestFit(params.size);
    if (block === undefined) return undefined;
    // At most the request again (MPS allows a whole large heap), and at most
    // `largeRoundByteLength` under pressure: carving an exact buffer costs nothing.
    const slack = Math.min(
      this.maxSlack,
      params.size,
      params.pressure ? this.roundLarge : Infinity,
    );
    if (block.byteLength > params.size + slack) {
      // Keep using heap capacity: a heap with room gets a new buffer;
      // otherwise the idle oversize buffer is released to make room in its
      // heap for the smaller one. A heap of its own is released with it
      // under pressure, or when the request belongs in a shared heap, so
      // that small buffers do not pin a big heap.
      if (pool.findHeap(params.size) === undefined) {
        const own = !block.heap.isSplit;
        this.releaseBlock(
          block,
          own && (params.pressure || params.size < this.minLarge),
          "oversize",
        );
        params.pressure = false;
      }
      return undefined;
    }
    pool.removeAvailable(block);
    this.inactiveSplit(block, -1);
    return block;
  }

  /** A cached buffer of a shared heap: one more (1) or fewer (-1). */
  inactiveSplit(block: _Block<M>, sign: 1 | -1): void {
    if (!block.heap.isSplit) return;
    const small = block.heap.pool.small;
    if (sign > 0) this.stats.split(small, 1, block.byteLength);
    else this.stats.splitTaken(small, block.byteLength, 1);
  }

  /** A new buffer carved from a heap with room, or from a new heap. */
  allocBuffer(params: _Params<M>): _Block<M> | undefined {
    const pool = params.pool;
    const heap = pool.findHeap(params.size) ?? _createHeap(this, params);
    if (heap === undefined) return undefined;
    const offset = heap.take(params.size);
    if (offset < 0) throw new Error("internal: heap has no room");
    const block = new _Block(heap, offset, params.size, params.requested);
    heap.blocks.add(block);
    pool.allocatedBytes += params.size;
    return block;
  }

  /** Counts a failed request and records it in the history. */
  failed(byteLength: number): void {
    this.stats.numOoms++;
    if (this.history !== null) {
      const free = Math.max(
        0,
        Math.min(this.highLimit, this.source.capacityBytes) -
          this.driverAllocatedBytes,
      );
      this.record(
        "oom",
        Number.isFinite(free) ? free : 0,
        alignUp(byteLength, this.alignment),
        byteLength,
      );
    }
  }

  /** A freed buffer back in its pool (its work done): cached, reusable. */
  makeCached(block: _Block<M>, wasPending: boolean): void {
    const pool = block.heap.pool;
    if (this.strict) {
      const segment = block.heap.segment;
      junkFill(
        segment.memory,
        segment.byteOffset + block.offset,
        block.byteLength,
      );
    }
    block.state = "cached";
    block.cachedEpoch = pool.epoch;
    block.fences = [];
    block.fenceKeys = [];
    pool.addAvailable(block);
    this.stats.inactive(
      pool.small,
      block.byteLength,
      block.requestedByteLength,
      wasPending,
      0,
      0,
    );
    this.inactiveSplit(block, 1);
    if (this.history !== null) {
      this.record(
        "free_completed",
        block.heap.address + block.offset,
        block.byteLength,
        block.requestedByteLength,
      );
    }
    this.events.emit("freed", block, pool, block.byteLength);
  }

  /**
   * Gives a cached buffer's range back to its heap, and the heap to
   * the device when it is empty and `removeEmptyHeap` is set.
   */
  releaseBlock(
    block: _Block<M>,
    removeEmptyHeap: boolean,
    reason: ReleaseReason,
  ): void {
    const heap = block.heap;
    const pool = heap.pool;
    pool.removeAvailable(block);
    this.inactiveSplit(block, -1);
    block.state = "released";
    heap.blocks.delete(block);
    heap.give(block.offset, block.byteLength);
    pool.allocatedBytes -= block.byteLength;
    this.numReleases++;
    if (this.events.verbosity !== 0) {
      this.events.log(
        DebugVerbosity.releases,
        pool,
        () =>
          `Released buffer #${block.id} of size ${
            formatBytes(block.byteLength)
          } from heap #${heap.id} (${reason}, use#: ${block.useCount}, gc#: ${
            pool.epoch - block.cachedEpoch
          })`,
      );
    }
    try {
      if (removeEmptyHeap && heap.blocks.size === 0) _releaseHeap(this, heap);
    } finally {
      this.events.emit("released", block, pool, block.byteLength, reason);
    }
  }

  /**
   * Releases cached buffers of the request's pool until `size` bytes
   * went (the best fit alone when one covers it); whether enough went.
   */
  releaseAvailableCached(params: _Params<M>): boolean {
    const pool = params.pool;
    if (pool.availableCount === 0) return false;
    const fit = pool.bestFit(params.size);
    if (fit !== undefined) {
      this.releaseBlock(fit, true, "release-cached");
      return true;
    }
    let released = 0;
    while (released < params.size && pool.availableCount > 0) {
      const block = pool.largest()!;
      released += block.byteLength;
      this.releaseBlock(block, true, "release-cached");
    }
    return released >= params.size;
  }

  /** Releases every cached buffer and every empty heap. */
  releaseCachedBuffers(reason: ReleaseReason): void {
    if (this.events.verbosity !== 0) {
      this.events.log(
        DebugVerbosity.profiling,
        undefined,
        () =>
          `Releasing cached buffers (allocated: ${
            formatBytes(this.stats.reservedBytes)
          }, driver allocated: ${formatBytes(this.driverAllocatedBytes)})`,
      );
    }
    for (const pool of this.poolList) {
      while (pool.availableCount > 0) {
        this.releaseBlock(
          pool.largest()!,
          true,
          reason,
        );
      }
      for (const heap of [...pool.heaps]) {
        if (heap.blocks.size === 0) _releaseHeap(this, heap);
      }
    }
  }

  /**
   * Under memory pressure, releases cached buffers of the pool older
   * than the average until driver bytes fall below the low watermark.
   */
  garbageCollect(params: _Params<M>): void {
    const driver = this.driverAllocatedBytes;
    if (driver < this.lowLimit) return;
    const pool = params.pool;
    if (pool.availableCount === 0) return;
    const epoch = pool.epoch;
    const candidates = pool.availableList();
    this.numGc++;
    const { releasedBytes: reclaimed, releasedCount: freedCount } =
      collectByAge(
        candidates,
        candidates.map((b) => epoch - b.cachedEpoch),
        candidates.map((b) => b.byteLength),
        driver - this.lowLimit,
        (block) => {
          if (block.state !== "cached") return false; // taken by a callback
          this.releaseBlock(block, true, "garbage-collection");
          return true;
        },
        { stopAtTarget: true },
      );
    this.numGcReleased += freedCount;
    if (this.events.verbosity !== 0) {
      this.events.log(
        DebugVerbosity.releases,
        pool,
        () =>
          `Garbage collected ${freedCount} buffers from the ${pool.name} pool (reclaimed: ${
            formatBytes(reclaimed)
          }, #cached: ${pool.availableCount})`,
      );
    }
  }

  /** Sets both ratios (checked by the caller) and the limits. */
  setRatios(high: number, low: number): void {
    // + 0 turns -0 into 0, so the getters never report -0.
    this.highRatio = high + 0;
    this.lowRatio = low + 0;
    this.highLimit = high === 0 ? Infinity : Math.floor(
      high * this.recommended,
    );
    this.lowLimit = low === 0 ? Infinity : Math.floor(low * this.recommended);
    if (Number.isNaN(this.highLimit)) this.highLimit = Infinity;
    this.events.log(
      DebugVerbosity.profiling,
      undefined,
      () =>
        `High watermark memory allocation limit: ${
          formatBytes(this.highLimit)
        }, low watermark limit: ${formatBytes(this.lowLimit)}`,
    );
  }

  /** Records one history event (history is on; stream 0). */
  record(
    action: TraceAction,
    address: number,
    byteLength: number,
    requested: number,
  ): void {
    this.history!.record(action, address, byteLength, requested, 0);
  }

  /** Host bytes of a buffer's requested range, when the memory has them. */
  viewOf(block: _Block<M>): Uint8Array | undefined {
    const segment = block.heap.segment;
    const byteLength = block.requestedByteLength;
    const view = this.hostView(segment.memory, {
      byteOffset: segment.byteOffset + block.offset,
      byteLength,
    });
    if (
      view !== undefined &&
      (!(view instanceof Uint8Array) || view.byteLength !== byteLength)
    ) {
      throw new InvalidArgumentError(
        `Cannot view buffer #${block.id}: the hostView option must return a Uint8Array of ${byteLength} bytes or undefined, returned ${
          describeValue(view)
        }`,
        { name: "hostView()", value: view, limit: byteLength },
      );
    }
    return view;
  }

  /** Strict mode: validates (before and after each call that changes state). */
  check(): void {
    if (this.strict) this.validate();
  }

  /** Returns finished pending frees to their pools; how many returned. */
  freeInactiveBuffers(): number {
    if (this.pendingCount === 0) return 0;
    const before = this.released;
    this.deferred.poll();
    this.check();
    return this.released - before;
  }
}
