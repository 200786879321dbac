/**
 * Internal: the caching allocator's live stats, in `@allot/core`'s
 * vocabulary (each figure a `Stat` per pool; `memoryStats()` copies them into
 * a `MemoryStats` record).
 *
 * Only what cannot be derived is written on the hot path:
 *
 * - a {@linkcode _Figure} keeps a {@linkcode _Counter} for the small pool and
 *   one for the large pool, plus the peak of their sum; the all-pools
 *   current, allocated and freed figures are sums, made when read; a counter
 *   writes current, peak and freed, and derives allocated (current + freed -
 *   current at the last reset), so an increase writes no running total;
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

/** `@allot/core`'s `Stat` figures for one pool, allocated derived. */
export class _Counter {
  /** Value now. */
  current = 0;
  /** Highest value since creation or the last reset of peaks. */
  peak = 0;
  /** Sum of all decreases since the last reset of totals. */
  freed = 0;
  /** `current` at the last reset of totals. */
  base = 0;

  /** Sum of all increases since the last reset of totals. */
  get allocated(): number {
    return this.current + this.freed - this.base;
  }

  /** Sets the peak to the current value. */
  resetPeak(): void {
    this.peak = this.current;
  }

  /** Sets allocated and freed to zero. */
  resetAccumulated(): void {
    this.base = this.current;
    this.freed = 0;
  }

  /** A plain copy, as `@allot/core`'s `StatValues`. */
  values(): StatValues {
    return {
      current: this.current,
      peak: this.peak,
      allocated: this.allocated,
      freed: this.freed,
    };
  }
}

/** One figure: a counter per pool and the peak of the two together. */
export class _Figure {
  readonly smallPool: _Counter = new _Counter();
  readonly largePool: _Counter = new _Counter();
  /** Highest value of the two pools together. */
  allPeak = 0;

  /** Current value over both pools. */
  get current(): number {
    return this.smallPool.current + this.largePool.current;
  }

  /** Sets the peaks to the current values. */
  resetPeak(): void {
    this.smallPool.resetPeak();
    this.largePool.resetPeak();
    this.allPeak = this.current;
  }

  /** Sets allocated and freed to zero. */
  resetAccumulated(): void {
    this.smallPool.resetAccumulated();
    this.largePool.resetAccumulated();
  }

  /** The all-pools values. */
  all(): StatValues {
    const s = this.smallPool, l = this.largePool;
    return {
      current: s.current + l.current,
      peak: this.allPeak,
      allocated: s.allocated + l.allocated,
      freed: s.freed + l.freed,
    };
  }

  /** A plain copy, as `@allot/core`'s `StatArray`. */
  values(): StatArray {
    return {
      all: this.all(),
      smallPool: this.smallPool.values(),
      largePool: this.largePool.values(),
    };
  }
}

/** Adds `d` (> 0) to the figure of one pool (amounts are trusted). */
export function _up(f: _Figure, small: boolean, d: number): void {
  const p = small ? f.smallPool : f.largePool;
  const c = p.current + d;
  p.current = c;
  if (c > p.peak) p.peak = c;
  const all = f.smallPool.current + f.largePool.current;
  if (all > f.allPeak) f.allPeak = all;
}

/** Subtracts `d` (> 0) from the figure of one pool. */
export function _down(f: _Figure, small: boolean, d: number): void {
  const p = small ? f.smallPool : f.largePool;
  p.current -= d;
  p.freed += d;
}

/** Adds `d` (of either sign) to the figure of one pool. */
export function _change(f: _Figure, small: boolean, d: number): void {
  if (d > 0) _up(f, small, d);
  else if (d < 0) _down(f, small, -d);
}

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
 * An active figure: its allocation figure (`source`) plus the pending part.
 */
export class _ActiveFigure {
  readonly smallPool: _ActivePart = { pending: 0, peak: 0, base: 0 };
  readonly largePool: _ActivePart = { pending: 0, peak: 0, base: 0 };
  /** Active peak of both pools as last stored. */
  allPeak = 0;
  constructor(readonly source: _Figure) {}

  /** Raises the stored peaks of `small`'s pool and of all pools to now. */
  storePeak(small: boolean): void {
    const part = small ? this.smallPool : this.largePool;
    const c = (small ? this.source.smallPool : this.source.largePool).current +
      part.pending;
    if (c > part.peak) part.peak = c;
    const all = this.source.current + this.smallPool.pending +
      this.largePool.pending;
    if (all > this.allPeak) this.allPeak = all;
  }

  /** Sets the stored peaks to the current values. */
  resetPeak(): void {
    const s = this.source;
    this.smallPool.peak = s.smallPool.current + this.smallPool.pending;
    this.largePool.peak = s.largePool.current + this.largePool.pending;
    this.allPeak = this.smallPool.peak + this.largePool.peak;
  }

  /** Sets the bases to the current values (allocated and freed restart). */
  resetAccumulated(): void {
    const s = this.source;
    this.smallPool.base = s.smallPool.current + this.smallPool.pending;
    this.largePool.base = s.largePool.current + this.largePool.pending;
  }

  #pool(small: boolean): StatValues {
    const a = small ? this.source.smallPool : this.source.largePool;
    const part = small ? this.smallPool : this.largePool;
    const c = a.current + part.pending;
    return {
      current: c,
      peak: Math.max(part.peak, a.peak),
      allocated: a.allocated,
      freed: part.base + a.allocated - c,
    };
  }

  /** A plain copy, as `@allot/core`'s `StatArray`. */
  values(): StatArray {
    const a = this.source.all();
    const s = this.smallPool, l = this.largePool;
    const c = a.current + s.pending + l.pending;
    return {
      all: {
        current: c,
        peak: Math.max(this.allPeak, a.peak),
        allocated: a.allocated,
        freed: s.base + l.base + a.allocated - c,
      },
      smallPool: this.#pool(true),
      largePool: this.#pool(false),
    };
  }
}

/**
 * The nine figures of `MemoryStats` that are kept per pool, by name (active
 * figures derived from the allocation figures, see the module note).
 */
export class _CachingStats {
  readonly allocation: _Figure = new _Figure();
  readonly segment: _Figure = new _Figure();
  readonly inactiveSplit: _Figure = new _Figure();
  readonly allocatedBytes: _Figure = new _Figure();
  readonly reservedBytes: _Figure = new _Figure();
  readonly inactiveSplitBytes: _Figure = new _Figure();
  readonly requestedBytes: _Figure = new _Figure();
  readonly active: _ActiveFigure = new _ActiveFigure(this.allocation);
  readonly activeBytes: _ActiveFigure = new _ActiveFigure(this.allocatedBytes);

  /** A block handed out: allocation, allocated and requested bytes. */
  allocated(
    small: boolean,
    bytes: number,
    requested: number,
    pending: boolean,
  ): void {
    _up(this.allocation, small, 1);
    _up(this.allocatedBytes, small, bytes);
    _up(this.requestedBytes, small, requested);
    if (pending) {
      this.active.storePeak(small);
      this.activeBytes.storePeak(small);
    }
  }

  /** A block freed by the caller: it leaves the allocation figures. */
  freed(small: boolean, bytes: number): void {
    _down(this.allocation, small, 1);
    _down(this.allocatedBytes, small, bytes);
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
    _down(this.requestedBytes, small, requested);
    if (wasPending) {
      (small ? this.active.smallPool : this.active.largePool).pending -= 1;
      (small ? this.activeBytes.smallPool : this.activeBytes.largePool)
        .pending -= bytes;
    }
    if (splitBlocks !== 0) _change(this.inactiveSplit, small, splitBlocks);
    if (splitBytes !== 0) _change(this.inactiveSplitBytes, small, splitBytes);
  }

  /** Every figure by name, in `STAT_ARRAY_NAMES` order of `MemoryStats`. */
  figures(): Record<
    | "allocation"
    | "segment"
    | "active"
    | "inactiveSplit"
    | "allocatedBytes"
    | "reservedBytes"
    | "activeBytes"
    | "inactiveSplitBytes"
    | "requestedBytes",
    _Figure | _ActiveFigure
  > {
    return {
      allocation: this.allocation,
      segment: this.segment,
      active: this.active,
      inactiveSplit: this.inactiveSplit,
      allocatedBytes: this.allocatedBytes,
      reservedBytes: this.reservedBytes,
      activeBytes: this.activeBytes,
      inactiveSplitBytes: this.inactiveSplitBytes,
      requestedBytes: this.requestedBytes,
    };
  }

  /** Sets every peak to its current value. */
  resetPeak(): void {
    for (const f of Object.values(this.figures())) f.resetPeak();
  }

  /** Sets every allocated and freed total to zero. */
  resetAccumulated(): void {
    // Active bases first: they read the allocation figures' current values.
    this.active.resetAccumulated();
    this.activeBytes.resetAccumulated();
    for (const f of Object.values(this.figures())) {
      if (f instanceof _Figure) f.resetAccumulated();
    }
  }
}
