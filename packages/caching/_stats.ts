/**
 * Internal: the caching allocator's live stats, in `@allot/core`'s
 * vocabulary (`memoryStats()` copies them into a `MemoryStats` record).
 *
 * Only what cannot be derived is written on the hot path, and it is written
 * into a few flat records of named numbers (one {@linkcode _Figures} per
 * pool and quantity: current, peak, freed), not into an object per figure
 * and pool: a hit (allocate + free of a cached block) moves five figures,
 * and chasing a record per figure cost about twice as much.
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
 *   for fences), so an {@linkcode _ActiveFigure} keeps only the pending part
 *   per pool, the active peak as last stored (written while blocks are
 *   pending, and by `resetPeak()`; the reported peak is the larger of it and
 *   the allocation peak, since active equals allocation when nothing is
 *   pending), and the active current at the last `resetAccumulated()`.
 *   Active allocated equals allocation allocated (both grow only on
 *   allocate), and active freed = base + allocated - current.
 *
 * @module
 */

import type { StatArray, StatValues } from "@allot/core";

/** One number per plain figure, by name. */
export class _Figures {
  allocation = 0;
  segment = 0;
  inactiveSplit = 0;
  allocatedBytes = 0;
  reservedBytes = 0;
  inactiveSplitBytes = 0;
  requestedBytes = 0;
}

/** Name of a plain figure (kept per pool, with peak and totals). */
export type _FigureName = keyof _Figures;

const FIGURE_NAMES: readonly _FigureName[] = Object.keys(
  new _Figures(),
) as _FigureName[];

/** Name of a figure derived from a plain one plus pending frees. */
export type _ActiveName = "active" | "activeBytes";

/** What an active figure stores for one pool. */
export interface _ActivePart {
  /** Pending-free part of the current value. */
  pending: number;
  /** Active peak as last stored. */
  peak: number;
  /** Active current at the last `resetAccumulated()`. */
  base: number;
}

/**
 * An active figure: plain figure `source` plus the pending part.
 */
export class _ActiveFigure {
  readonly smallPool: _ActivePart = { pending: 0, peak: 0, base: 0 };
  readonly largePool: _ActivePart = { pending: 0, peak: 0, base: 0 };
  /** Active peak of both pools as last stored. */
  allPeak = 0;
  constructor(
    readonly stats: _CachingStats,
    readonly source: "allocation" | "allocatedBytes",
  ) {}

  /** Raises the stored peaks of `small`'s pool and of all pools to now. */
  storePeak(small: boolean): void {
    // Named loads: a keyed load of a number beyond the small-integer range
    // boxes it (garbage on every allocation while frees are pending).
    const s = this.stats;
    const part = small ? this.smallPool : this.largePool;
    const cur = small ? s.smallCurrent : s.largeCurrent;
    const bytes = this.source === "allocatedBytes";
    const c = (bytes ? cur.allocatedBytes : cur.allocation) + part.pending;
    if (c > part.peak) part.peak = c;
    const all =
      (bytes ? s.allCurrent.allocatedBytes : s.allCurrent.allocation) +
      this.smallPool.pending + this.largePool.pending;
    if (all > this.allPeak) this.allPeak = all;
  }

  /** Sets the stored peaks to the current values. */
  resetPeak(): void {
    const s = this.stats, name = this.source;
    this.smallPool.peak = s.smallCurrent[name] + this.smallPool.pending;
    this.largePool.peak = s.largeCurrent[name] + this.largePool.pending;
    this.allPeak = this.smallPool.peak + this.largePool.peak;
  }

  /** Sets the bases to the current values (allocated and freed restart). */
  resetAccumulated(): void {
    const s = this.stats, name = this.source;
    this.smallPool.base = s.smallCurrent[name] + this.smallPool.pending;
    this.largePool.base = s.largeCurrent[name] + this.largePool.pending;
  }

  #with(a: StatValues, part: { pending: number; base: number }, peak: number) {
    const c = a.current + part.pending;
    return {
      current: c,
      peak: Math.max(peak, a.peak),
      allocated: a.allocated,
      freed: part.base + a.allocated - c,
    };
  }

  /** A plain copy, as `@allot/core`'s `StatArray`. */
  values(): StatArray {
    const a = this.stats.values(this.source);
    const s = this.smallPool, l = this.largePool;
    return {
      all: this.#with(a.all, {
        pending: s.pending + l.pending,
        base: s.base + l.base,
      }, this.allPeak),
      smallPool: this.#with(a.smallPool, s, s.peak),
      largePool: this.#with(a.largePool, l, l.peak),
    };
  }
}

/**
 * The nine figures of `MemoryStats` that are kept per pool, by name (active
 * figures derived from the allocation figures, see the module note).
 */
export class _CachingStats {
  /** Value now, per figure, of the small pool. */
  readonly smallCurrent: _Figures = new _Figures();
  /** Value now, per figure, of the large pool. */
  readonly largeCurrent: _Figures = new _Figures();
  /** Value now, per figure, of both pools together. */
  readonly allCurrent: _Figures = new _Figures();
  /** Highest value since the last reset of peaks, small pool. */
  readonly smallPeak: _Figures = new _Figures();
  /** Highest value since the last reset of peaks, large pool. */
  readonly largePeak: _Figures = new _Figures();
  /** Highest value of both pools together since the last reset of peaks. */
  readonly allPeak: _Figures = new _Figures();
  /** Sum of all decreases since the last reset of totals, small pool. */
  readonly smallFreed: _Figures = new _Figures();
  /** Sum of all decreases since the last reset of totals, large pool. */
  readonly largeFreed: _Figures = new _Figures();
  /** Value at the last reset of totals, small pool. */
  readonly smallBase: _Figures = new _Figures();
  /** Value at the last reset of totals, large pool. */
  readonly largeBase: _Figures = new _Figures();
  readonly active: _ActiveFigure = new _ActiveFigure(this, "allocation");
  readonly activeBytes: _ActiveFigure = new _ActiveFigure(
    this,
    "allocatedBytes",
  );

  /** Value now of a figure over both pools. */
  current(name: _FigureName): number {
    return this.allCurrent[name];
  }

  // Every update below names its fields: a keyed store (`record[name]`)
  // of a number beyond the small-integer range boxed a new heap number per
  // store (garbage on every hit once a total passed 2^30).

  /** A segment (`segments` 1) or a segment's growth (0) of `bytes`. */
  reserved(small: boolean, segments: 0 | 1, bytes: number): void {
    const cur = small ? this.smallCurrent : this.largeCurrent;
    const peak = small ? this.smallPeak : this.largePeak;
    const all = this.allCurrent, allPeak = this.allPeak;
    let c: number;
    if (segments !== 0) {
      c = cur.segment + 1;
      cur.segment = c;
      if (c > peak.segment) peak.segment = c;
      c = all.segment + 1;
      all.segment = c;
      if (c > allPeak.segment) allPeak.segment = c;
    }
    c = cur.reservedBytes + bytes;
    cur.reservedBytes = c;
    if (c > peak.reservedBytes) peak.reservedBytes = c;
    c = all.reservedBytes + bytes;
    all.reservedBytes = c;
    if (c > allPeak.reservedBytes) allPeak.reservedBytes = c;
  }

  /** A segment (`segments` 1) or a segment's tail (0) of `bytes` gone. */
  unreserved(small: boolean, segments: 0 | 1, bytes: number): void {
    const cur = small ? this.smallCurrent : this.largeCurrent;
    const freed = small ? this.smallFreed : this.largeFreed;
    const all = this.allCurrent;
    if (segments !== 0) {
      cur.segment--;
      freed.segment++;
      all.segment--;
    }
    cur.reservedBytes -= bytes;
    freed.reservedBytes += bytes;
    all.reservedBytes -= bytes;
  }

  // The hot path: each method moves its figures with named fields (no
  // keyed access), one pool record of each kind fetched once.

  /** A block handed out: allocation, allocated and requested bytes. */
  allocated(
    small: boolean,
    bytes: number,
    requested: number,
    pending: boolean,
  ): void {
    const cur = small ? this.smallCurrent : this.largeCurrent;
    const peak = small ? this.smallPeak : this.largePeak;
    const all = this.allCurrent, allPeak = this.allPeak;
    let c = cur.allocation + 1;
    cur.allocation = c;
    if (c > peak.allocation) peak.allocation = c;
    c = all.allocation + 1;
    all.allocation = c;
    if (c > allPeak.allocation) allPeak.allocation = c;
    c = cur.allocatedBytes + bytes;
    cur.allocatedBytes = c;
    if (c > peak.allocatedBytes) peak.allocatedBytes = c;
    c = all.allocatedBytes + bytes;
    all.allocatedBytes = c;
    if (c > allPeak.allocatedBytes) allPeak.allocatedBytes = c;
    c = cur.requestedBytes + requested;
    cur.requestedBytes = c;
    if (c > peak.requestedBytes) peak.requestedBytes = c;
    c = all.requestedBytes + requested;
    all.requestedBytes = c;
    if (c > allPeak.requestedBytes) allPeak.requestedBytes = c;
    if (pending) {
      this.active.storePeak(small);
      this.activeBytes.storePeak(small);
    }
  }

  /**
   * `bytes` more in free split blocks, and `blocks` (0 or more) more such
   * blocks: a free block split in two for the first time (1 block, its
   * rest's bytes), a segment's free tail grown, a block freed between
   * allocated neighbours.
   */
  split(small: boolean, blocks: number, bytes: number): void {
    const cur = small ? this.smallCurrent : this.largeCurrent;
    const peak = small ? this.smallPeak : this.largePeak;
    const all = this.allCurrent, allPeak = this.allPeak;
    let c: number;
    if (blocks !== 0) {
      c = cur.inactiveSplit + blocks;
      cur.inactiveSplit = c;
      if (c > peak.inactiveSplit) peak.inactiveSplit = c;
      c = all.inactiveSplit + blocks;
      all.inactiveSplit = c;
      if (c > allPeak.inactiveSplit) allPeak.inactiveSplit = c;
    }
    if (bytes !== 0) {
      c = cur.inactiveSplitBytes + bytes;
      cur.inactiveSplitBytes = c;
      if (c > peak.inactiveSplitBytes) peak.inactiveSplitBytes = c;
      c = all.inactiveSplitBytes + bytes;
      all.inactiveSplitBytes = c;
      if (c > allPeak.inactiveSplitBytes) allPeak.inactiveSplitBytes = c;
    }
  }

  /**
   * `bytes` fewer in free split blocks, and `blocks` fewer such blocks: a
   * block carved from the front of a free split block (0 blocks), a whole
   * free split block taken or given back (1), merges.
   */
  splitTaken(small: boolean, bytes: number, blocks: number): void {
    const cur = small ? this.smallCurrent : this.largeCurrent;
    const freed = small ? this.smallFreed : this.largeFreed;
    const all = this.allCurrent;
    cur.inactiveSplitBytes -= bytes;
    freed.inactiveSplitBytes += bytes;
    all.inactiveSplitBytes -= bytes;
    if (blocks !== 0) {
      cur.inactiveSplit -= blocks;
      freed.inactiveSplit += blocks;
      all.inactiveSplit -= blocks;
    }
  }

  /** A block freed by the caller: it leaves the allocation figures. */
  freed(small: boolean, bytes: number): void {
    const cur = small ? this.smallCurrent : this.largeCurrent;
    const freed = small ? this.smallFreed : this.largeFreed;
    const all = this.allCurrent;
    cur.allocation--;
    freed.allocation++;
    all.allocation--;
    cur.allocatedBytes -= bytes;
    freed.allocatedBytes += bytes;
    all.allocatedBytes -= bytes;
  }

  /** A freed block that waits for fences: still active. */
  pending(small: boolean, bytes: number): void {
    (small ? this.active.smallPool : this.active.largePool).pending += 1;
    (small ? this.activeBytes.smallPool : this.activeBytes.largePool)
      .pending += bytes;
  }

  /**
   * A block back in the pool: requested bytes, pending when it waited, and
   * the change in split fragments.
   */
  inactive(
    small: boolean,
    bytes: number,
    requested: number,
    wasPending: boolean,
    splitBlocks: number,
    splitBytes: number,
  ): void {
    const cur = small ? this.smallCurrent : this.largeCurrent;
    const freed = small ? this.smallFreed : this.largeFreed;
    const all = this.allCurrent;
    cur.requestedBytes -= requested;
    freed.requestedBytes += requested;
    all.requestedBytes -= requested;
    if (wasPending) {
      (small ? this.active.smallPool : this.active.largePool).pending -= 1;
      (small ? this.activeBytes.smallPool : this.activeBytes.largePool)
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

  /** A plain copy of one figure, as `@allot/core`'s `StatArray`. */
  values(name: _FigureName): StatArray {
    const small = this.#pool(name, true), large = this.#pool(name, false);
    return {
      all: {
        current: this.allCurrent[name],
        peak: this.allPeak[name],
        allocated: small.allocated + large.allocated,
        freed: small.freed + large.freed,
      },
      smallPool: small,
      largePool: large,
    };
  }

  #pool(name: _FigureName, small: boolean): StatValues {
    const current = (small ? this.smallCurrent : this.largeCurrent)[name];
    const freed = (small ? this.smallFreed : this.largeFreed)[name];
    return {
      current,
      peak: (small ? this.smallPeak : this.largePeak)[name],
      allocated: current + freed -
        (small ? this.smallBase : this.largeBase)[name],
      freed,
    };
  }

  /** Every figure by name, in `STAT_ARRAY_NAMES` order of `MemoryStats`. */
  figures(): Record<_FigureName | _ActiveName, { values(): StatArray }> {
    const plain = (name: _FigureName) => ({ values: () => this.values(name) });
    return {
      allocation: plain("allocation"),
      segment: plain("segment"),
      active: this.active,
      inactiveSplit: plain("inactiveSplit"),
      allocatedBytes: plain("allocatedBytes"),
      reservedBytes: plain("reservedBytes"),
      activeBytes: this.activeBytes,
      inactiveSplitBytes: plain("inactiveSplitBytes"),
      requestedBytes: plain("requestedBytes"),
    };
  }

  /** Sets every peak to its current value. */
  resetPeak(): void {
    this.active.resetPeak();
    this.activeBytes.resetPeak();
    for (const name of FIGURE_NAMES) {
      this.smallPeak[name] = this.smallCurrent[name];
      this.largePeak[name] = this.largeCurrent[name];
      this.allPeak[name] = this.allCurrent[name];
    }
  }

  /** Sets every allocated and freed total to zero. */
  resetAccumulated(): void {
    this.active.resetAccumulated();
    this.activeBytes.resetAccumulated();
    for (const name of FIGURE_NAMES) {
      this.smallBase[name] = this.smallCurrent[name];
      this.largeBase[name] = this.largeCurrent[name];
      this.smallFreed[name] = 0;
      this.largeFreed[name] = 0;
    }
  }
}
