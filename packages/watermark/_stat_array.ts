/**
 * Internal: one figure kept for all pools together and for the small and
 * large pools apart, as `@allot/core`'s `StatArray`.
 *
 * @module
 */

import { Stat } from "@allot/core";
import type { StatArray } from "@allot/core";

/** Three {@linkcode Stat}s: all, small pools, large pools. */
export class _StatArray {
  readonly all: Stat = new Stat();
  readonly small: Stat = new Stat();
  readonly large: Stat = new Stat();

  add(small: boolean, amount: number): void {
    if (amount >= 0) {
      this.all.increase(amount);
      (small ? this.small : this.large).increase(amount);
    } else {
      this.all.decrease(-amount);
      (small ? this.small : this.large).decrease(-amount);
    }
  }

  resetPeak(): void {
    this.all.resetPeak();
    this.small.resetPeak();
    this.large.resetPeak();
  }

  values(): StatArray {
    return {
      all: this.all.values(),
      smallPool: this.small.values(),
      largePool: this.large.values(),
    };
  }
}
