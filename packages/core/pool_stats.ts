/**
 * {@linkcode PoolStats}: the live {@linkcode MemoryStats} figures of a
 * pooling allocator (PyTorch's `memory_stats()`), kept once for every
 * policy (the caching and the watermark allocators), and
 * its check against a {@linkcode StatRecount} (`stat_recount.ts`).
 *
 * Only what cannot be derived is written on the hot path, and it is written
 * into a few flat records of named numbers (one record per pool and
 * quantity: current, peak, freed), not into an object per figure and pool:
 * a hit (allocate + free of a cached block) moves five figures, and chasing
 * a record per figure cost about twice as much.
 *
 * - each of the seven plain figures (allocation, segment, inactiveSplit and
 *   the bytes figures) has, per pool, its current value, its peak and its
 *   freed total; the all-pools current and peak are kept too (so a peak of
 *   the sum needs no read of the other pool); allocated is derived (current
 *   + freed - current at the last reset of totals), so an increase writes no
 *   running total; the all-pools allocated and freed are sums, made when
 *   read;
 * - active figures are not written when a block is handed out or returned:
 *   active = allocation + pending free (blocks freed by the caller that wait
 *   for fences), so an active figure keeps only the pending part per pool,
 *   the active peak as last stored, and the active current at the last
 *   `resetAccumulated()`. The allocation hot path writes no active figure:
 *   while the pending parts stay the same, the active peak is the
 *   allocation peak of that interval plus the pending parts. So the
 *   allocation and allocatedBytes peaks are kept per interval (restarted
 *   whenever a pending part changes, the peak of the intervals before kept
 *   apart), and the active peaks are stored when an interval ends; the
 *   reported active peak is the largest of the stored one, the allocation
 *   peak (active equals allocation when nothing is pending) and the current
 *   interval's allocation peak plus the pending parts. Active allocated equals
 *   allocation allocated (both grow only on allocate), and active freed =
 *   base + allocated - current.
 *
 * @module
 */

import { AllotError, InvalidArgumentError } from "./errors.ts";
import { describeValue } from "./validate.ts";
import {
  type MemoryStats,
  STAT_ARRAY_NAMES,
  type StatArray,
} from "./memory_stats.ts";
import { Stat, type StatValues } from "./stat.ts";
import { _ActiveFigure, _Figures } from "./_pool_figures.ts";
import type { StatRecount } from "./stat_recount.ts";

/**
 * Name of a figure of {@linkcode MemoryStats} kept per pool
 * ({@linkcode STAT_ARRAY_NAMES}).
 */
export type PoolFigureName = typeof STAT_ARRAY_NAMES[number];

type _PlainName = keyof _Figures;

const PLAIN_NAMES: readonly _PlainName[] = Object.keys(
  new _Figures(),
) as _PlainName[];

/**
 * The figures of {@linkcode MemoryStats} as a pooling allocator moves them:
 * per small and large pool and for both, with current, peak, allocated and
 * freed; the oversize counts; the retry, out-of-memory, synchronize and
 * device counters. The allocator calls one method per event (a block handed
 * out, freed, pending, back in the pool; a segment made, grown, shrunk,
 * returned); `memoryStats()` copies everything into plain data, and
 * {@linkcode PoolStats.verify} compares it with a {@linkcode StatRecount}.
 *
 * Active figures are derived: active = allocation + blocks freed by the
 * caller that still wait for fences ({@linkcode PoolStats.pending}).
 *
 * @example
 * ```ts
 * import { PoolStats } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const stats = new PoolStats();
 * stats.reserved(true, 1, 2048); // a small segment of 2 KiB
 * stats.allocated(true, 512, 500, false); // a block of 512 B handed out
 * stats.freed(true, 512); // freed by the caller...
 * stats.pending(true, 512); // ...but waiting for a fence: still active
 * assert.equal(stats.memoryStats(Infinity).active.all.current, 1);
 * stats.inactive(true, 512, 500, true, 0, 0); // back in the pool
 * assert.equal(stats.memoryStats(Infinity).active.all.current, 0);
 * assert.equal(stats.reservedBytes, 2048);
 * ```
 */
export class PoolStats {
  #smallCurrent = new _Figures();
  #largeCurrent = new _Figures();
  #smallPeak = new _Figures();
  #largePeak = new _Figures();
  #allPeak = new _Figures();
  // Peaks of the intervals before the current one (allocation and
  // allocatedBytes only; the other figures' peaks never restart).
  #smallClosed = new _Figures();
  #largeClosed = new _Figures();
  #allClosed = new _Figures();
  #smallFreed = new _Figures();
  #largeFreed = new _Figures();
  #smallBase = new _Figures();
  #largeBase = new _Figures();
  #active = new _ActiveFigure(this.#smallCurrent, this.#largeCurrent, false);
  #activeBytes = new _ActiveFigure(
    this.#smallCurrent,
    this.#largeCurrent,
    true,
  );
  #oversizeAllocations = new Stat();
  #oversizeSegments = new Stat();
  /** Allocations retried after the cache was freed. */
  numAllocRetries = 0;
  /** Requests that ran out of memory. */
  numOoms = 0;
  /** Calls that waited for every pending fence. */
  numSyncAllStreams = 0;
  /** Segments taken from the device. */
  numDeviceAlloc = 0;
  /** Segments given back to the device. */
  numDeviceFree = 0;

  /** Bytes of blocks handed out now (both pools). */
  get allocatedBytes(): number {
    return this.#smallCurrent.allocatedBytes +
      this.#largeCurrent.allocatedBytes;
  }

  /**
   * Bytes of active blocks now (both pools): handed out, or freed but
   * waiting for fences.
   */
  get activeBytes(): number {
    return this.#smallCurrent.allocatedBytes +
      this.#largeCurrent.allocatedBytes +
      this.#activeBytes.smallPool.pending +
      this.#activeBytes.largePool.pending;
  }

  /** Bytes of segments held now (both pools). */
  get reservedBytes(): number {
    return this.#smallCurrent.reservedBytes + this.#largeCurrent.reservedBytes;
  }

  /** Bytes asked for by the blocks handed out or pending now. */
  get requestedBytes(): number {
    return this.#smallCurrent.requestedBytes +
      this.#largeCurrent.requestedBytes;
  }

  // Every update below names its fields: a keyed store (`record[name]`)
  // of a number beyond the small-integer range boxed a new heap number per
  // store (garbage on every hit once a total passed 2^30).

  /**
   * A segment (`segments` 1) or a segment's growth (0) of `bytes`.
   *
   * @param small Whether the segment is in the small pool.
   * @param segments 1 for a new segment, 0 for growth of one.
   * @param bytes Bytes added.
   */
  reserved(small: boolean, segments: 0 | 1, bytes: number): void {
    const cur = small ? this.#smallCurrent : this.#largeCurrent;
    const peak = small ? this.#smallPeak : this.#largePeak;
    const other = small ? this.#largeCurrent : this.#smallCurrent;
    const allPeak = this.#allPeak;
    let c: number;
    if (segments !== 0) {
      c = cur.segment + 1;
      cur.segment = c;
      if (c > peak.segment) peak.segment = c;
      c += other.segment;
      if (c > allPeak.segment) allPeak.segment = c;
    }
    c = cur.reservedBytes + bytes;
    cur.reservedBytes = c;
    if (c > peak.reservedBytes) peak.reservedBytes = c;
    c += other.reservedBytes;
    if (c > allPeak.reservedBytes) allPeak.reservedBytes = c;
  }

  /**
   * A segment (`segments` 1) or a segment's tail (0) of `bytes` gone.
   *
   * @param small Whether the segment is in the small pool.
   * @param segments 1 for a whole segment, 0 for a tail.
   * @param bytes Bytes removed.
   */
  unreserved(small: boolean, segments: 0 | 1, bytes: number): void {
    const cur = small ? this.#smallCurrent : this.#largeCurrent;
    const freed = small ? this.#smallFreed : this.#largeFreed;
    if (segments !== 0) {
      cur.segment--;
      freed.segment++;
    }
    cur.reservedBytes -= bytes;
    freed.reservedBytes += bytes;
  }

  // The hot path: each method moves its figures with named fields (no
  // keyed access), one pool record of each kind fetched once.

  /**
   * A block handed out: allocation, allocated and requested bytes.
   *
   * @param small Whether the block is in the small pool.
   * @param bytes Bytes of the block.
   * @param requested Bytes asked for.
   * @param _pending Unused (once whether blocks waited for fences: active
   * peaks are now stored when the pending parts change).
   */
  allocated(
    small: boolean,
    bytes: number,
    requested: number,
    _pending?: boolean,
  ): void {
    const cur = small ? this.#smallCurrent : this.#largeCurrent;
    const peak = small ? this.#smallPeak : this.#largePeak;
    const other = small ? this.#largeCurrent : this.#smallCurrent;
    const allPeak = this.#allPeak;
    let c = cur.allocation + 1;
    cur.allocation = c;
    if (c > peak.allocation) peak.allocation = c;
    c += other.allocation;
    if (c > allPeak.allocation) allPeak.allocation = c;
    c = cur.allocatedBytes + bytes;
    cur.allocatedBytes = c;
    if (c > peak.allocatedBytes) peak.allocatedBytes = c;
    c += other.allocatedBytes;
    if (c > allPeak.allocatedBytes) allPeak.allocatedBytes = c;
    c = cur.requestedBytes + requested;
    cur.requestedBytes = c;
    if (c > peak.requestedBytes) peak.requestedBytes = c;
    c += other.requestedBytes;
    if (c > allPeak.requestedBytes) allPeak.requestedBytes = c;
  }

  /**
   * `bytes` more in free split blocks, and `blocks` (0 or more) more such
   * blocks: a free block split in two for the first time (1 block, its
   * rest's bytes), a segment's free tail grown, a block freed between
   * allocated neighbours.
   *
   * @param small Whether the blocks are in the small pool.
   * @param blocks Blocks added.
   * @param bytes Bytes added.
   */
  split(small: boolean, blocks: number, bytes: number): void {
    const cur = small ? this.#smallCurrent : this.#largeCurrent;
    const peak = small ? this.#smallPeak : this.#largePeak;
    const other = small ? this.#largeCurrent : this.#smallCurrent;
    const allPeak = this.#allPeak;
    let c: number;
    if (blocks !== 0) {
      c = cur.inactiveSplit + blocks;
      cur.inactiveSplit = c;
      if (c > peak.inactiveSplit) peak.inactiveSplit = c;
      c += other.inactiveSplit;
      if (c > allPeak.inactiveSplit) allPeak.inactiveSplit = c;
    }
    if (bytes !== 0) {
      c = cur.inactiveSplitBytes + bytes;
      cur.inactiveSplitBytes = c;
      if (c > peak.inactiveSplitBytes) peak.inactiveSplitBytes = c;
      c += other.inactiveSplitBytes;
      if (c > allPeak.inactiveSplitBytes) allPeak.inactiveSplitBytes = c;
    }
  }

  /**
   * `bytes` fewer in free split blocks, and `blocks` fewer such blocks: a
   * block carved from the front of a free split block (0 blocks), a whole
   * free split block taken or given back (1), merges.
   *
   * @param small Whether the blocks are in the small pool.
   * @param bytes Bytes removed.
   * @param blocks Blocks removed.
   */
  splitTaken(small: boolean, bytes: number, blocks: number): void {
    const cur = small ? this.#smallCurrent : this.#largeCurrent;
    const freed = small ? this.#smallFreed : this.#largeFreed;
    cur.inactiveSplitBytes -= bytes;
    freed.inactiveSplitBytes += bytes;
    if (blocks !== 0) {
      cur.inactiveSplit -= blocks;
      freed.inactiveSplit += blocks;
    }
  }

  /**
   * A block freed by the caller: it leaves the allocation figures.
   *
   * @param small Whether the block is in the small pool.
   * @param bytes Bytes of the block.
   */
  freed(small: boolean, bytes: number): void {
    const cur = small ? this.#smallCurrent : this.#largeCurrent;
    const freed = small ? this.#smallFreed : this.#largeFreed;
    cur.allocation--;
    freed.allocation++;
    cur.allocatedBytes -= bytes;
    freed.allocatedBytes += bytes;
  }

  /**
   * A freed block that waits for fences: still active.
   *
   * @param small Whether the block is in the small pool.
   * @param bytes Bytes of the block.
   */
  pending(small: boolean, bytes: number): void {
    this.#closeInterval();
    (small ? this.#active.smallPool : this.#active.largePool).pending += 1;
    (small ? this.#activeBytes.smallPool : this.#activeBytes.largePool)
      .pending += bytes;
  }

  /**
   * A block back in the pool: requested bytes, pending when it waited, and
   * the change in split fragments.
   *
   * @param small Whether the block is in the small pool.
   * @param bytes Bytes of the block.
   * @param requested Bytes it was asked for.
   * @param wasPending Whether it waited for fences.
   * @param splitBlocks Change in free split blocks (merges lower it).
   * @param splitBytes Change in bytes of free split blocks.
   */
  inactive(
    small: boolean,
    bytes: number,
    requested: number,
    wasPending: boolean,
    splitBlocks: number,
    splitBytes: number,
  ): void {
    const cur = small ? this.#smallCurrent : this.#largeCurrent;
    const freed = small ? this.#smallFreed : this.#largeFreed;
    cur.requestedBytes -= requested;
    freed.requestedBytes += requested;
    if (wasPending) {
      this.#closeInterval();
      (small ? this.#active.smallPool : this.#active.largePool).pending -= 1;
      (small ? this.#activeBytes.smallPool : this.#activeBytes.largePool)
        .pending -= bytes;
    }
    // A merge lowers the split figures, unless the block comes back
    // between two allocated neighbours; blocks and bytes may move apart.
    const blocksDown = splitBlocks < 0 ? -splitBlocks : 0;
    const bytesDown = splitBytes < 0 ? -splitBytes : 0;
    if (blocksDown !== 0 || bytesDown !== 0) {
      this.splitTaken(small, bytesDown, blocksDown);
    }
    if (splitBlocks > 0 || splitBytes > 0) {
      this.split(small, splitBlocks - -blocksDown, splitBytes + bytesDown);
    }
  }

  /**
   * A pending part is about to change: the interval of constant pending
   * parts ends. Its active peaks (its allocation peaks plus the pending
   * parts) are stored, its allocation peaks join the closed ones, and the
   * next interval's start from the current values.
   */
  #closeInterval(): void {
    const n = this.#active, b = this.#activeBytes;
    const ns = n.smallPool, nl = n.largePool;
    const bs = b.smallPool, bl = b.largePool;
    const sp = this.#smallPeak, lp = this.#largePeak, ap = this.#allPeak;
    const sc = this.#smallClosed, lc = this.#largeClosed;
    const ac = this.#allClosed;
    const scur = this.#smallCurrent, lcur = this.#largeCurrent;
    ns.peak = Math.max(ns.peak, sp.allocation + ns.pending);
    nl.peak = Math.max(nl.peak, lp.allocation + nl.pending);
    n.allPeak = Math.max(n.allPeak, ap.allocation + ns.pending + nl.pending);
    bs.peak = Math.max(bs.peak, sp.allocatedBytes + bs.pending);
    bl.peak = Math.max(bl.peak, lp.allocatedBytes + bl.pending);
    b.allPeak = Math.max(
      b.allPeak,
      ap.allocatedBytes + bs.pending + bl.pending,
    );
    sc.allocation = Math.max(sc.allocation, sp.allocation);
    lc.allocation = Math.max(lc.allocation, lp.allocation);
    ac.allocation = Math.max(ac.allocation, ap.allocation);
    sc.allocatedBytes = Math.max(sc.allocatedBytes, sp.allocatedBytes);
    lc.allocatedBytes = Math.max(lc.allocatedBytes, lp.allocatedBytes);
    ac.allocatedBytes = Math.max(ac.allocatedBytes, ap.allocatedBytes);
    sp.allocation = scur.allocation;
    lp.allocation = lcur.allocation;
    ap.allocation = scur.allocation + lcur.allocation;
    sp.allocatedBytes = scur.allocatedBytes;
    lp.allocatedBytes = lcur.allocatedBytes;
    ap.allocatedBytes = scur.allocatedBytes + lcur.allocatedBytes;
  }

  /**
   * Counts an oversize block handed out (`+1`) or freed (`-1`).
   *
   * @param delta `1` or `-1`.
   */
  oversizeAllocation(delta: 1 | -1): void {
    if (delta > 0) this.#oversizeAllocations.increase(1);
    else this.#oversizeAllocations.decrease(1);
  }

  /**
   * Counts an oversize segment made (`+1`) or returned (`-1`).
   *
   * @param delta `1` or `-1`.
   */
  oversizeSegment(delta: 1 | -1): void {
    if (delta > 0) this.#oversizeSegments.increase(1);
    else this.#oversizeSegments.decrease(1);
  }

  /**
   * A plain copy of one figure.
   *
   * @param name The figure.
   * @returns Its values for all pools, the small pool and the large pool.
   * @throws {InvalidArgumentError} When `name` is not one of
   * {@linkcode STAT_ARRAY_NAMES}.
   */
  figure(name: PoolFigureName): StatArray {
    if (!STAT_ARRAY_NAMES.includes(name)) {
      throw new InvalidArgumentError(
        `Invalid figure name: must be one of ${
          STAT_ARRAY_NAMES.join(", ")
        }, received ${describeValue(name)}`,
        { name: "name", value: name, limit: STAT_ARRAY_NAMES },
      );
    }
    if (name === "active") {
      return this.#active.values(
        this.#plain("allocation"),
        this.#allPeak.allocation,
        this.#smallPeak.allocation,
        this.#largePeak.allocation,
      );
    }
    if (name === "activeBytes") {
      return this.#activeBytes.values(
        this.#plain("allocatedBytes"),
        this.#allPeak.allocatedBytes,
        this.#smallPeak.allocatedBytes,
        this.#largePeak.allocatedBytes,
      );
    }
    return this.#plain(name);
  }

  #plain(name: _PlainName): StatArray {
    const small = this.#pool(name, true), large = this.#pool(name, false);
    return {
      all: {
        current: small.current + large.current,
        peak: Math.max(this.#allPeak[name], this.#allClosed[name]),
        allocated: small.allocated + large.allocated,
        freed: small.freed + large.freed,
      },
      smallPool: small,
      largePool: large,
    };
  }

  #pool(name: _PlainName, small: boolean): StatValues {
    const current = (small ? this.#smallCurrent : this.#largeCurrent)[name];
    const freed = (small ? this.#smallFreed : this.#largeFreed)[name];
    return {
      current,
      peak: Math.max(
        (small ? this.#smallPeak : this.#largePeak)[name],
        (small ? this.#smallClosed : this.#largeClosed)[name],
      ),
      allocated: current + freed -
        (small ? this.#smallBase : this.#largeBase)[name],
      freed,
    };
  }

  /**
   * Every figure and counter as plain data.
   *
   * @param maxSplitByteLength The allocator's `maxSplitByteLength` (the size
   * from which blocks count as oversize).
   * @returns A copy; it does not change afterwards.
   */
  memoryStats(maxSplitByteLength: number): MemoryStats {
    return {
      allocation: this.figure("allocation"),
      segment: this.figure("segment"),
      active: this.figure("active"),
      inactiveSplit: this.figure("inactiveSplit"),
      allocatedBytes: this.figure("allocatedBytes"),
      reservedBytes: this.figure("reservedBytes"),
      activeBytes: this.figure("activeBytes"),
      inactiveSplitBytes: this.figure("inactiveSplitBytes"),
      requestedBytes: this.figure("requestedBytes"),
      numAllocRetries: this.numAllocRetries,
      numOoms: this.numOoms,
      numSyncAllStreams: this.numSyncAllStreams,
      numDeviceAlloc: this.numDeviceAlloc,
      numDeviceFree: this.numDeviceFree,
      oversizeAllocations: this.#oversizeAllocations.values(),
      oversizeSegments: this.#oversizeSegments.values(),
      maxSplitByteLength,
    };
  }

  /** Sets every peak to its current value. */
  resetPeak(): void {
    this.#active.resetPeak();
    this.#activeBytes.resetPeak();
    for (const name of PLAIN_NAMES) {
      this.#smallPeak[name] = this.#smallCurrent[name];
      this.#largePeak[name] = this.#largeCurrent[name];
      this.#allPeak[name] = this.#smallCurrent[name] +
        this.#largeCurrent[name];
      this.#smallClosed[name] = 0;
      this.#largeClosed[name] = 0;
      this.#allClosed[name] = 0;
    }
    this.#oversizeAllocations.resetPeak();
    this.#oversizeSegments.resetPeak();
  }

  /** Sets every allocated and freed total, and the counters, to zero. */
  resetAccumulated(): void {
    this.#active.resetAccumulated();
    this.#activeBytes.resetAccumulated();
    for (const name of PLAIN_NAMES) {
      this.#smallBase[name] = this.#smallCurrent[name];
      this.#largeBase[name] = this.#largeCurrent[name];
      this.#smallFreed[name] = 0;
      this.#largeFreed[name] = 0;
    }
    this.#oversizeAllocations.resetAccumulated();
    this.#oversizeSegments.resetAccumulated();
    this.numAllocRetries = 0;
    this.numOoms = 0;
    this.numSyncAllStreams = 0;
    this.numDeviceAlloc = 0;
    this.numDeviceFree = 0;
  }

  /**
   * Compares every figure with a recount made from the allocator's blocks
   * and segments: current values equal, peaks at least the current values,
   * totals not negative.
   *
   * @param recount What the blocks and segments add up to.
   * @param label The allocator, for the message.
   * @throws {AllotError} Naming the first figure that differs.
   */
  verify(recount: StatRecount, label: string): void {
    const fail = (what: string): never => {
      throw new AllotError(`${label} is inconsistent: ${what}`);
    };
    const pools = ["all", "smallPool", "largePool"] as const;
    for (const name of STAT_ARRAY_NAMES) {
      const values = this.figure(name);
      const counted = recount.counts[name];
      pools.forEach((pool, p) => {
        const s = values[pool];
        const c = p === 0 ? counted[0] + counted[1] : counted[p - 1];
        if (s.current !== c) {
          fail(`stat ${name}.${pool} is ${s.current}, recount ${c}`);
        }
        if (s.peak < s.current) fail(`stat ${name}.${pool} peak below current`);
        if (s.allocated < 0 || s.freed < 0) {
          fail(`stat ${name}.${pool} allocated or freed negative`);
        }
      });
    }
    if (this.#oversizeAllocations.current !== recount.oversizeAllocations) {
      fail(
        `oversize allocations are ${this.#oversizeAllocations.current}, recount ${recount.oversizeAllocations}`,
      );
    }
    if (this.#oversizeSegments.current !== recount.oversizeSegments) {
      fail(
        `oversize segments are ${this.#oversizeSegments.current}, recount ${recount.oversizeSegments}`,
      );
    }
  }
}
