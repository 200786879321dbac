/**
 * Internal: the records behind {@linkcode PoolStats}: {@linkcode _Figures}
 * (one number per plain figure, by name) and {@linkcode _ActiveFigure} (an
 * active figure derived from its plain one plus the pending part). See
 * `pool_stats.ts` for why the figures are kept this way.
 *
 * @module
 */

import type { StatArray } from "./memory_stats.ts";
import type { StatValues } from "./stat.ts";
// deno-lint-ignore no-unused-vars
import type { PoolStats } from "./pool_stats.ts";

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

/** What an active figure stores for one pool. */
export interface _ActivePart {
  /** Pending-free part of the current value. */
  pending: number;
  /** Active peak as last stored. */
  peak: number;
  /** Active current at the last `resetAccumulated()`. */
  base: number;
}

/** An active figure: plain figure `source` plus the pending part. */
export class _ActiveFigure {
  readonly smallPool: _ActivePart = { pending: 0, peak: 0, base: 0 };
  readonly largePool: _ActivePart = { pending: 0, peak: 0, base: 0 };
  /** Active peak of both pools as last stored. */
  allPeak = 0;
  constructor(
    readonly small: _Figures,
    readonly large: _Figures,
    readonly bytes: boolean,
  ) {}

  #current(f: _Figures): number {
    return this.bytes ? f.allocatedBytes : f.allocation;
  }

  /** Sets the stored peaks to the current values. */
  resetPeak(): void {
    this.smallPool.peak = this.#current(this.small) + this.smallPool.pending;
    this.largePool.peak = this.#current(this.large) + this.largePool.pending;
    this.allPeak = this.smallPool.peak + this.largePool.peak;
  }

  /** Sets the bases to the current values (allocated and freed restart). */
  resetAccumulated(): void {
    this.smallPool.base = this.#current(this.small) + this.smallPool.pending;
    this.largePool.base = this.#current(this.large) + this.largePool.pending;
  }

  #with(
    a: StatValues,
    part: { pending: number; base: number },
    peak: number,
    interval: number,
  ): StatValues {
    const c = a.current + part.pending;
    return {
      current: c,
      peak: Math.max(peak, a.peak, interval + part.pending),
      allocated: a.allocated,
      freed: part.base + a.allocated - c,
    };
  }

  /**
   * A plain copy, given the plain copy `a` of the source figure and the
   * source's peaks in the current interval of constant pending parts (all
   * pools, small, large).
   */
  values(a: StatArray, all: number, small: number, large: number): StatArray {
    const s = this.smallPool, l = this.largePool;
    return {
      all: this.#with(
        a.all,
        {
          pending: s.pending + l.pending,
          base: s.base + l.base,
        },
        this.allPeak,
        all,
      ),
      smallPool: this.#with(a.smallPool, s, s.peak, small),
      largePool: this.#with(a.largePool, l, l.peak, large),
    };
  }
}
