/**
 * {@linkcode collectByAge}: age-based garbage collection of cached blocks,
 * written once for every pooling allocator (PyTorch's
 * `garbage_collect_cached_blocks` and MPS's `garbage_collect_cached_buffers`).
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { validateOptionKeys } from "./option_keys.ts";
import {
  describeValue,
  MAX_BYTE_LENGTH,
  validateByteLength,
  validateFlag,
  validateObject,
} from "./validate.ts";

/** Options of {@linkcode collectByAge}. */
export interface CollectByAgeOptions {
  /**
   * Stop as soon as the target is reached (MPS) instead of finishing the
   * pass, so that collection is triggered less often (PyTorch).
   *
   * @default {false}
   */
  stopAtTarget?: boolean;
}

/** What {@linkcode collectByAge} released. */
export interface CollectByAgeResult {
  /** Bytes released. */
  releasedBytes: number;
  /** Candidates released. */
  releasedCount: number;
}

/**
 * Releases the oldest of `candidates` until `targetBytes` are released: in
 * passes, each releasing every remaining candidate at least as old as the
 * average age of the remaining candidates, until the target is reached or a
 * pass releases nothing.
 *
 * @typeParam T A cached block.
 * @param candidates The blocks that may be released (whole free segments,
 * cached buffers); not changed.
 * @param ages Age of each candidate (allocation requests or passes since it
 * was cached), same order.
 * @param byteLengths Bytes each candidate frees, same order.
 * @param targetBytes Bytes to release.
 * @param release Releases one candidate; returns `false` when it could not
 * (taken meanwhile by a callback): it then counts as gone, with no bytes.
 * @param options When to stop.
 * @returns Bytes and candidates released.
 * @throws {InvalidArgumentError} When the three arrays differ in length, an
 * age is not a finite non-negative number, a byte length is not a
 * non-negative safe integer, `targetBytes` is negative or NaN, or `release`
 * is not a function; nothing is released.
 *
 * @example
 * ```ts
 * import { collectByAge } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const released: string[] = [];
 * const result = collectByAge(["a", "b", "c"], [10, 1, 7], [100, 100, 100], 150, (c) => {
 *   released.push(c);
 *   return true;
 * });
 * assert.deepEqual(released, ["a", "c"]); // older than the average 6
 * assert.equal(result.releasedBytes, 200);
 * ```
 */
export function collectByAge<T>(
  candidates: readonly T[],
  ages: readonly number[],
  byteLengths: readonly number[],
  targetBytes: number,
  release: (candidate: T) => boolean,
  options: CollectByAgeOptions = {},
): CollectByAgeResult {
  _checkArgs(candidates, ages, byteLengths, targetBytes, release);
  validateObject(options, "options");
  validateOptionKeys(options, ["stopAtTarget"], "collectByAge()");
  const stopAtTarget = validateFlag(
    options.stopAtTarget,
    "stopAtTarget",
    false,
  );
  const n = candidates.length;
  const gone = new Uint8Array(n);
  let totalAge = 0;
  for (let i = 0; i < n; i++) totalAge += ages[i];
  let remaining = n;
  let releasedBytes = 0, releasedCount = 0;
  let progress = true;
  while (releasedBytes < targetBytes && progress && remaining > 0) {
    const threshold = totalAge / remaining;
    progress = false;
    for (let i = 0; i < n; i++) {
      if (stopAtTarget && releasedBytes >= targetBytes) break;
      if (gone[i] !== 0 || ages[i] < threshold) continue;
      gone[i] = 1;
      progress = true;
      totalAge -= ages[i];
      remaining--;
      if (release(candidates[i])) {
        releasedBytes += byteLengths[i];
        releasedCount++;
      }
    }
  }
  return { releasedBytes, releasedCount };
}

function _checkArgs(
  candidates: unknown,
  ages: unknown,
  byteLengths: unknown,
  targetBytes: number,
  release: unknown,
): void {
  for (
    const [name, a] of [["candidates", candidates], ["ages", ages], [
      "byteLengths",
      byteLengths,
    ]] as const
  ) {
    if (!Array.isArray(a)) {
      throw new InvalidArgumentError(
        `Cannot collect by age: ${name} must be an array, received ${
          describeValue(a)
        }`,
        { name, value: a, limit: "an array" },
      );
    }
  }
  const n = (candidates as unknown[]).length;
  for (
    const [name, a] of [["ages", ages], ["byteLengths", byteLengths]] as const
  ) {
    const length = (a as unknown[]).length;
    if (length !== n) {
      throw new InvalidArgumentError(
        `Cannot collect by age: ${name} has ${length} entries, candidates ${n}`,
        { name, value: length, limit: n },
      );
    }
  }
  for (let i = 0; i < n; i++) {
    const age = (ages as unknown[])[i];
    if (typeof age !== "number" || !Number.isFinite(age) || age < 0) {
      throw new InvalidArgumentError(
        `Cannot collect by age: ages[${i}] must be a finite non-negative number, received ${
          describeValue(age)
        }`,
        { name: `ages[${i}]`, value: age, limit: [0, Number.MAX_VALUE] },
      );
    }
    validateByteLength(
      (byteLengths as number[])[i],
      MAX_BYTE_LENGTH,
      `byteLengths[${i}]`,
    );
  }
  if (typeof targetBytes !== "number" || !(targetBytes >= 0)) {
    throw new InvalidArgumentError(
      `Cannot collect by age: targetBytes must be a non-negative number, received ${
        describeValue(targetBytes)
      }`,
      { name: "targetBytes", value: targetBytes, limit: [0, Infinity] },
    );
  }
  if (typeof release !== "function") {
    throw new InvalidArgumentError(
      `Cannot collect by age: release must be a function, received ${
        describeValue(release)
      }`,
      { name: "release", value: release, limit: "a function" },
    );
  }
}
