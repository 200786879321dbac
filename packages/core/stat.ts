/**
 * {@linkcode Stat}: the one stats vocabulary every allot allocator shares.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { describeValue } from "./validate.ts";

function invalidAmount(
  what: string,
  amount: unknown,
  limit: number,
): InvalidArgumentError {
  return new InvalidArgumentError(
    `Cannot ${what} a stat by ${
      describeValue(amount)
    }: must be an integer in [0, ${limit}]`,
    { name: "amount", value: amount, limit },
  );
}

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
   * @throws {InvalidArgumentError} When the amount is not a non-negative safe
   * integer, or would take `current` or `allocated` past 2^53 - 1 (then
   * `resetAccumulated()`); the stat is unchanged.
   */
  increase(amount: number): void {
    // current and allocated stay exact: both at most 2^53 - 1
    const limit = Number.MAX_SAFE_INTEGER -
      Math.max(this.current, this.allocated);
    if (!Number.isSafeInteger(amount) || amount < 0 || amount > limit) {
      throw invalidAmount("increase", amount, limit);
    }
    this.current += amount;
    this.allocated += amount;
    if (this.current > this.peak) this.peak = this.current;
  }

  /**
   * Subtracts `amount` from the current value.
   *
   * @param amount A non-negative amount, at most the current value.
   * @throws {InvalidArgumentError} When the amount is not an integer in
   * `[0, current]`; the stat is unchanged.
   */
  decrease(amount: number): void {
    if (
      !Number.isSafeInteger(amount) || amount < 0 || amount > this.current ||
      this.freed + amount > Number.MAX_SAFE_INTEGER
    ) {
      throw invalidAmount(
        "decrease",
        amount,
        Math.min(this.current, Number.MAX_SAFE_INTEGER - this.freed),
      );
    }
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
