/**
 * Size rounding of the caching allocator, after PyTorch's `round_size` and
 * `roundup_power2_next_division`.
 *
 * @module
 */

import {
  describeValue,
  InvalidArgumentError,
  validateAlignment,
  validateByteLength,
} from "@allot/core";

/**
 * PyTorch's `kMinBlockSize`, {@linkcode roundSize}'s default granule. A
 * `CachingAllocator`'s default granule is 256 bytes (WebGPU's storage offset
 * alignment; see `CachingAllocatorOptions.minBlockByteLength`).
 */
export const MIN_BLOCK_BYTE_LENGTH = 512;

/** Number of power-of-two intervals that `roundupPower2Divisions` arrays cover: 1 MiB to 64 GiB. */
export const POWER2_DIVISION_INTERVALS = 17;

/**
 * How sizes are split into power-of-two divisions: one number for every size,
 * or one per interval. Index 0 applies to sizes below 2 MiB, index `i` to
 * sizes in `[2^(20+i), 2^(21+i))`, the last index (16) to 64 GiB and up; a
 * shorter array repeats its last entry. 0 or 1 turns rounding to divisions off
 * in that interval. Each non-zero entry is a power of two.
 */
export type RoundupPower2Divisions = number | readonly number[];

/**
 * Checks a {@linkcode RoundupPower2Divisions} and expands it to one entry per
 * interval.
 *
 * @param divisions The setting.
 * @returns 17 entries.
 * @throws {InvalidArgumentError} When an entry is not 0 or a power of two up to 2^20.
 *
 * @example
 * ```ts
 * import { expandRoundupPower2Divisions } from "@allot/caching";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(expandRoundupPower2Divisions([1, 4]).slice(0, 3), [1, 4, 4]);
 * ```
 */
export function expandRoundupPower2Divisions(
  divisions: RoundupPower2Divisions,
): number[] {
  if (typeof divisions !== "number" && !Array.isArray(divisions)) {
    throw new InvalidArgumentError(
      `Invalid roundupPower2Divisions: must be a number or an array, received ${
        describeValue(divisions)
      }`,
      { name: "roundupPower2Divisions", value: divisions, limit: "array" },
    );
  }
  // (the length checked before copying: a huge array is refused as is)
  const length = typeof divisions === "number" ? 1 : divisions.length;
  if (length === 0 || length > POWER2_DIVISION_INTERVALS) {
    throw new InvalidArgumentError(
      `Invalid roundupPower2Divisions: must hold 1 to ${POWER2_DIVISION_INTERVALS} entries, received ${length}`,
      {
        name: "roundupPower2Divisions",
        value: divisions,
        limit: POWER2_DIVISION_INTERVALS,
      },
    );
  }
  const list = typeof divisions === "number" ? [divisions] : [...divisions];
  for (const d of list) {
    if (
      !Number.isSafeInteger(d) || d < 0 || d > 2 ** 20 ||
      (d > 1 && (d & (d - 1)) !== 0)
    ) {
      throw new InvalidArgumentError(
        `Invalid roundupPower2Divisions: each entry must be 0 or a power of two up to ${
          2 ** 20
        }, received ${describeValue(d)}`,
        { name: "roundupPower2Divisions", value: d, limit: 2 ** 20 },
      );
    }
  }
  while (list.length < POWER2_DIVISION_INTERVALS) {
    list.push(list[list.length - 1]);
  }
  return list;
}

function floorLog2(n: number): number {
  return Math.floor(Math.log2(n));
}

/**
 * Rounds a size up to the next of `divisions` equal steps between two
 * powers of two (PyTorch's `roundup_power2_next_division`). Powers of two stay.
 *
 * @param byteLength A size: a non-negative safe integer (0 stays 0).
 * @param divisions A power of two up to 2^30 (1 rounds to the next power of
 * two).
 * @returns The rounded size.
 * @throws {InvalidArgumentError} For a size that is not one, or divisions
 * that are not a power of two.
 *
 * @example
 * ```ts
 * import { roundupPower2NextDivision } from "@allot/caching";
 * import assert from "node:assert/strict";
 *
 * // Between 1 MiB and 2 MiB in 4 steps of 256 KiB: 1.1 MiB rounds to 1.25 MiB.
 * assert.equal(roundupPower2NextDivision(1153434, 4), 1310720);
 * assert.equal(roundupPower2NextDivision(2 ** 20, 4), 2 ** 20);
 * ```
 */
export function roundupPower2NextDivision(
  byteLength: number,
  divisions: number,
): number {
  validateByteLength(byteLength, Number.MAX_SAFE_INTEGER, "byteLength");
  validateAlignment(divisions, 2 ** 30, "divisions");
  return _roundupDivision(byteLength, divisions);
}

/** roundupPower2NextDivision() without the checks (roundSize's). */
function _roundupDivision(byteLength: number, divisions: number): number {
  const log = floorLog2(byteLength);
  let floor = 2 ** log;
  // Math.log2 can be off by one near powers of two for large values.
  if (floor > byteLength) floor /= 2;
  else if (floor * 2 <= byteLength) floor *= 2;
  if (floor === byteLength) return byteLength;
  const step = Math.floor(floor / divisions);
  if (step === 0) return floor * 2;
  const below = byteLength - (byteLength % step);
  return below === byteLength ? byteLength : below + step;
}

/**
 * Rounds a request to a block size (PyTorch's `round_size`): at least
 * `minBlockByteLength`; with power-of-two divisions for the size's interval
 * when that interval has more than one division and the size exceeds
 * `minBlockByteLength * divisions`; otherwise up to a multiple of
 * `minBlockByteLength`.
 *
 * @param byteLength The request.
 * @param minBlockByteLength The block granule (512 by default).
 * @param divisions Expanded divisions per interval (from
 * {@linkcode expandRoundupPower2Divisions}), or `undefined` for none.
 * @returns The block size.
 * @throws {InvalidArgumentError} When `byteLength` is not a non-negative
 * safe integer or `minBlockByteLength` not a power of two up to 2^30.
 *
 * @example
 * ```ts
 * import { roundSize } from "@allot/caching";
 * import assert from "node:assert/strict";
 *
 * assert.equal(roundSize(1), 512);
 * assert.equal(roundSize(1000), 1024);
 * assert.equal(roundSize(1153434, 512, [4]), 1310720);
 * ```
 */
export function roundSize(
  byteLength: number,
  minBlockByteLength: number = MIN_BLOCK_BYTE_LENGTH,
  divisions?: readonly number[],
): number {
  validateByteLength(byteLength, Number.MAX_SAFE_INTEGER, "byteLength");
  validateAlignment(minBlockByteLength, 2 ** 30, "minBlockByteLength");
  if (byteLength < minBlockByteLength) return minBlockByteLength;
  if (divisions !== undefined) {
    const log = floorLog2(byteLength);
    const index = log < 20
      ? 0
      : Math.min(log - 20, POWER2_DIVISION_INTERVALS - 1);
    const d = divisions[Math.min(index, divisions.length - 1)];
    if (d > 1 && byteLength > minBlockByteLength * d) {
      const r = _roundupDivision(byteLength, d);
      const rem = r % minBlockByteLength;
      return rem === 0 ? r : r + minBlockByteLength - rem;
    }
  }
  const rem = byteLength % minBlockByteLength;
  return rem === 0 ? byteLength : byteLength + minBlockByteLength - rem;
}
