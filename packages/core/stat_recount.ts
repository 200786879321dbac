/**
 * {@linkcode StatRecount}: a recount of the {@linkcode PoolStats} figures
 * from an allocator's blocks and segments, what `validate()` compares the
 * live figures with ({@linkcode PoolStats.verify}).
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import type { PoolFigureName } from "./pool_stats.ts";
import { describeValue } from "./validate.ts";
// deno-lint-ignore no-unused-vars
import type { PoolStats } from "./pool_stats.ts";

/**
 * A recount of the {@linkcode PoolStats} figures from an allocator's blocks
 * and segments, for {@linkcode PoolStats.verify}.
 *
 * @example
 * ```ts
 * import { PoolStats, StatRecount } from "@allot/core";
 *
 * const stats = new PoolStats();
 * stats.reserved(false, 1, 4096);
 * const recount = new StatRecount();
 * recount.add("segment", false, 1);
 * recount.add("reservedBytes", false, 4096);
 * stats.verify(recount, "example"); // passes
 * ```
 */
export class StatRecount {
  /** Counted values per figure: `[small pool, large pool]`. */
  readonly counts: Record<PoolFigureName, [number, number]> = {
    allocation: [0, 0],
    segment: [0, 0],
    active: [0, 0],
    inactiveSplit: [0, 0],
    allocatedBytes: [0, 0],
    reservedBytes: [0, 0],
    activeBytes: [0, 0],
    inactiveSplitBytes: [0, 0],
    requestedBytes: [0, 0],
  };
  /** Blocks handed out of at least `maxSplitByteLength` bytes. */
  oversizeAllocations = 0;
  /** Segments of at least `maxSplitByteLength` bytes. */
  oversizeSegments = 0;

  /**
   * Adds `value` to a figure of one pool.
   *
   * @param name The figure.
   * @param small Whether it is the small pool.
   * @param value The amount.
   * @throws {InvalidArgumentError} When `name` is not a figure of
   * {@linkcode StatRecount.counts} or `value` is not a finite number.
   */
  add(name: PoolFigureName, small: boolean, value: number): void {
    // an own key only: "__proto__" or "constructor" wrote into
    // Object.prototype / Object
    if (!Object.hasOwn(this.counts, name)) {
      throw new InvalidArgumentError(
        `Invalid figure name: must be one of ${
          Object.keys(this.counts).join(", ")
        }, received ${describeValue(name)}`,
        { name: "name", value: name, limit: Object.keys(this.counts) },
      );
    }
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw new InvalidArgumentError(
        `Invalid recount value: must be a finite number, received ${
          describeValue(value)
        }`,
        { name: "value", value, limit: "a finite number" },
      );
    }
    this.counts[name][small ? 0 : 1] += value;
  }

  /**
   * Counts a segment: `segment` and `reservedBytes`.
   *
   * @param small Whether it is in the small pool.
   * @param byteLength Its bytes.
   */
  segment(small: boolean, byteLength: number): void {
    this.add("segment", small, 1);
    this.add("reservedBytes", small, byteLength);
  }

  /**
   * Counts a block handed out: `allocation`, `allocatedBytes` and the
   * active figures.
   *
   * @param small Whether it is in the small pool.
   * @param byteLength Its bytes.
   * @param requested Bytes asked for.
   */
  allocatedBlock(small: boolean, byteLength: number, requested: number): void {
    this.add("allocation", small, 1);
    this.add("allocatedBytes", small, byteLength);
    this.activeBlock(small, byteLength, requested);
  }

  /**
   * Counts a block freed by the caller that waits for fences: the active
   * figures only.
   *
   * @param small Whether it is in the small pool.
   * @param byteLength Its bytes.
   * @param requested Bytes asked for.
   */
  activeBlock(small: boolean, byteLength: number, requested: number): void {
    this.add("active", small, 1);
    this.add("activeBytes", small, byteLength);
    this.add("requestedBytes", small, requested);
  }

  /**
   * Counts a free block that shares its segment with others.
   *
   * @param small Whether it is in the small pool.
   * @param byteLength Its bytes.
   */
  inactiveSplitBlock(small: boolean, byteLength: number): void {
    this.add("inactiveSplit", small, 1);
    this.add("inactiveSplitBytes", small, byteLength);
  }
}
