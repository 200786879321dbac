/**
 * {@linkcode StepPoolGroup}: one held-bytes bound for several
 * {@linkcode StepPlannedPool}s that share a device.
 *
 * A WebGPU buffer's usage is fixed when it is made, so a runtime keeps one
 * pool per usage (storage, upload, readback) on one device. Each pool alone
 * keeps its free memory within `maxHeldRatio` times its own recent peak, but
 * the pools peak at different times (uploads at load, storage later), so
 * together they can hold far more than the device's live bytes ever were: a
 * large upload arena kept while storage grows. In a group, the bound is the
 * group's: held bytes of all pools within `maxHeldRatio` times the recent
 * peak of their live bytes together; a pool that grows first gives back
 * other pools' free segments, and each step end trims the group.
 *
 * @module
 */

import {
  ContractViolationError,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import { _heldRatio } from "./_held_ratio.ts";
import { _PeakWindow } from "./_peak_window.ts";

/** @internal The part of a pool a group drives. */
export interface _GroupMember {
  /** Bytes asked for by its live blocks. */
  readonly requestedBytes: number;
  /** Bytes of the segments it holds. */
  readonly reservedBytes: number;
  /** Ends its step. */
  endStep(): void;
  /**
   * Gives free segments back down to a target (only those unused for more
   * than `idleSteps` steps, when given); returns bytes held.
   */
  _giveBack(
    targetByteLength: number,
    idleSteps?: number,
    stepEnd?: boolean,
  ): number;
}

/** Options of {@linkcode StepPoolGroup}. */
export interface StepPoolGroupOptions {
  /**
   * Held bytes of all the group's pools allowed per live byte of the
   * group's recent steps.
   *
   * @default {1.1}
   */
  maxHeldRatio?: number;
}

/** Steps whose peak live bytes bound the group's held bytes. */
const _WINDOW = 64;

/**
 * At a step's end, pools give back the segments no step of the window used,
 * and those used lately only while held bytes are more than `_TRIM_BAND`
 * above the bound (hysteresis: work that repeats finds its segments in its
 * next cycle); `_makeRoom` keeps held bytes within the bound where segments
 * are made.
 */
const _IDLE_STEPS = _WINDOW;
/** See `_IDLE_STEPS`. */
const _TRIM_BAND = 0.05;

/**
 * Pools (one per WebGPU usage, say) whose held bytes are bounded together.
 * Pass it as `group` to each {@linkcode StepPlannedPool} and call
 * {@linkcode StepPoolGroup.endStep} (it ends the step of every pool).
 *
 * @example An upload pool gives its idle arena back when storage grows
 * ```ts
 * import { StepPlannedPool, StepPoolGroup } from "@allot/caching";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const group = new StepPoolGroup();
 * const source = () => new MockSegmentSource({ alignment: 256 });
 * const upload = new StepPlannedPool(source(), { group });
 * const storage = new StepPlannedPool(source(), { group });
 * upload.free(upload.allocate(4 << 20)); // a large upload at load
 * group.endStep();
 * const weights = [];
 * for (let i = 0; i < 8; i++) weights.push(storage.allocate(1 << 20));
 * group.endStep();
 * assert.ok(group.reservedBytes <= 1.1 * group.peakRequestedBytes);
 * ```
 */
export class StepPoolGroup {
  /** Held bytes allowed per live byte of the recent steps. */
  readonly maxHeldRatio: number;
  #pools: _GroupMember[] = [];
  #live = 0;
  #peak = 0;
  #stepPeak = 0;
  #window = new _PeakWindow(_WINDOW);
  /** whether `endStep` is under way (a nested call is refused) */
  #ending = false;

  /**
   * Creates an empty group.
   *
   * @param options The held-bytes ratio.
   * @throws {InvalidArgumentError} For a ratio below 1 or not finite.
   */
  constructor(options: StepPoolGroupOptions = {}) {
    validateObject(options, "options");
    validateOptionKeys(options, ["maxHeldRatio"], "StepPoolGroup");
    const ratio = _heldRatio(options.maxHeldRatio);
    this.maxHeldRatio = ratio;
  }

  /** Bytes asked for by live blocks of all pools. */
  get requestedBytes(): number {
    return this.#live;
  }

  /** Highest `requestedBytes` so far. */
  get peakRequestedBytes(): number {
    return this.#peak;
  }

  /** Bytes of the segments all pools hold now. */
  get reservedBytes(): number {
    let held = 0;
    for (const p of this.#pools) held += p.reservedBytes;
    return held;
  }

  /** Pools in the group (a disposed pool has left it). */
  get poolCount(): number {
    return this.#pools.length;
  }

  /**
   * Ends the step of every pool, then trims the group to its bound.
   *
   * @throws {SegmentSourceError} The first a pool's source threw, once
   * every pool's step and the group's are ended.
   * @throws {ContractViolationError} When called by a pool's segment source
   * while the group ends its step (nothing changed).
   */
  endStep(): void {
    if (this.#ending) {
      // a pool's segment source called back while the group ends its step:
      // refused before any pool's step ends again
      throw new ContractViolationError(
        "Cannot end the group's step: a pool's segment source called back into the group while it ends its step",
      );
    }
    this.#ending = true;
    try {
      this.#endStep();
    } finally {
      this.#ending = false;
    }
  }

  #endStep(): void {
    // every pool ends its step even when one's source throws (the first
    // error is thrown once the group's step is ended too)
    let error: unknown;
    let failed = false;
    // (over a copy: a pool a source disposes meanwhile leaves the list, and
    // the pools after it still end their step; a pool that left is skipped)
    for (const p of [...this.#pools]) {
      if (!this.#pools.includes(p)) continue;
      try {
        p.endStep();
      } catch (e) {
        if (!failed) error = e;
        failed = true;
      }
    }
    const window = this.#window;
    window.push(this.#stepPeak);
    this.#stepPeak = this.#live;
    const limit = this.maxHeldRatio * window.max;
    if (failed) throw error;
    this.#trimTo(limit, undefined, _IDLE_STEPS, true);
    if (this.reservedBytes > limit * (1 + _TRIM_BAND)) {
      this.#trimTo(limit, undefined, -1, true);
    }
  }

  /** @internal Whether `value` is a group (not a look-alike). */
  static _is(value: unknown): value is StepPoolGroup {
    return typeof value === "object" && value !== null && #pools in value;
  }

  /** @internal A pool joins (at its construction). */
  _join(pool: _GroupMember): void {
    this.#pools.push(pool);
  }

  /** @internal A pool leaves (its `dispose`: no live blocks, none held). */
  _leave(pool: _GroupMember): void {
    const i = this.#pools.indexOf(pool);
    if (i >= 0) this.#pools.splice(i, 1);
  }

  /** @internal Live bytes changed by `bytes` (negative for a free). */
  _live(bytes: number): void {
    const live = this.#live += bytes;
    if (live > this.#stepPeak) {
      this.#stepPeak = live;
      if (live > this.#peak) this.#peak = live;
    }
  }

  /**
   * @internal `pool` is about to make a segment of `size` bytes: other
   * pools give free segments back until the group stays within its bound.
   */
  _makeRoom(pool: _GroupMember, size: number): void {
    let recent = Math.max(this.#live + size, this.#stepPeak);
    if (this.#window.max > recent) recent = this.#window.max;
    this.#trimTo(this.maxHeldRatio * recent - size, pool);
  }

  /**
   * @internal Whether a segment of `size` bytes fits within the group's
   * bound with nothing given back.
   */
  _fits(size: number): boolean {
    let recent = Math.max(this.#live + size, this.#stepPeak);
    if (this.#window.max > recent) recent = this.#window.max;
    return this.reservedBytes + size <= this.maxHeldRatio * recent;
  }

  /** Pools with the most free bytes give whole free segments back first. */
  #trimTo(
    limit: number,
    except: _GroupMember | undefined,
    idleSteps = -1,
    stepEnd = false,
  ): void {
    let held = this.reservedBytes;
    if (held <= limit) return;
    const pools = this.#pools.filter((p) => p !== except)
      .sort((a, b) =>
        (b.reservedBytes - b.requestedBytes) -
        (a.reservedBytes - a.requestedBytes)
      );
    for (const p of pools) {
      if (held <= limit) return;
      const before = p.reservedBytes;
      held -= before -
        p._giveBack(before - (held - limit), idleSteps, stepEnd);
    }
  }
}
