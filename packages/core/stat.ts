/**
 * {@linkcode Stat}: the one stats vocabulary every allot allocator shares.
 *
 * @module
 */

/** A plain snapshot of a {@linkcode Stat}. */
export interface StatValues {
  /** Value now. */
  current: number;
  /** Highest value since creation or the last `resetPeak()`. */
  peak: number;
  /** Sum of all increases. */
  allocated: number;
  /** Sum of all decreases. */
  freed: number;
}

/**
 * A counter with PyTorch's four figures: current, peak, allocated (sum of all
 * increases) and freed (sum of all decreases). `current` always equals
 * `allocated - freed` until `resetAccumulated()`.
 *
 * @example
 * ```ts
 * import { Stat } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const bytes = new Stat();
 * bytes.increase(512);
 * bytes.increase(256);
 * bytes.decrease(512);
 * assert.deepEqual(bytes.values(), { current: 256, peak: 768, allocated: 768, freed: 512 });
 * ```
 */
export class Stat implements StatValues {
  /** Value now. */
  current = 0;
  /** Highest value since creation or the last `resetPeak()`. */
  peak = 0;
  /** Sum of all increases. */
  allocated = 0;
  /** Sum of all decreases. */
  freed = 0;

  /**
   * Adds `amount` to the current value.
   *
   * @param amount A non-negative amount.
   */
  increase(amount: number): void {
    this.current += amount;
    this.allocated += amount;
    if (this.current > this.peak) this.peak = this.current;
  }

  /**
   * Subtracts `amount` from the current value.
   *
   * @param amount A non-negative amount.
   */
  decrease(amount: number): void {
    this.current -= amount;
    this.freed += amount;
  }

  /** Sets the peak to the current value. */
  resetPeak(): void {
    this.peak = this.current;
  }

  /** Sets allocated and freed to zero. */
  resetAccumulated(): void {
    this.allocated = 0;
    this.freed = 0;
  }

  /**
   * A plain copy of the four figures.
   *
   * @returns The values.
   */
  values(): StatValues {
    return {
      current: this.current,
      peak: this.peak,
      allocated: this.allocated,
      freed: this.freed,
    };
  }
}
