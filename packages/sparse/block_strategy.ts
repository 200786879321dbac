/**
 * {@linkcode blockElements}: how many non-zeros one block of a discontiguous
 * sparse matrix holds.
 *
 * @module
 */

import {
  InvalidArgumentError,
  validateInteger,
  validateObject,
  validateOptionKeys,
} from "@allot/core";

/** Options of {@linkcode blockElements}, after SCL-Core's `BlockStrategy`. */
export interface BlockStrategy {
  /**
   * Smallest block, in elements (16 KiB of `f32`).
   *
   * @default {4096}
   */
  minElements?: number;
  /**
   * Largest block, in elements (1 MiB of `f32`).
   *
   * @default {262144}
   */
  maxElements?: number;
  /**
   * Target number of primary rows (columns for CSC) per block.
   *
   * @default {8}
   */
  rowsPerBlock?: number;
}

const LIMIT = 0x7fffffff;

/**
 * SCL-Core's block size rule: average non-zeros per primary row times the
 * target rows per block, clamped to `[minElements, maxElements]`.
 *
 * @param nnz Number of non-zeros.
 * @param primaryLength Number of primary rows (columns for CSC).
 * @param strategy The bounds and the target.
 * @returns Elements per block.
 * @throws {InvalidArgumentError} For negative or non-integer counts, or
 * `minElements > maxElements`.
 *
 * @example
 * ```ts
 * import { blockElements } from "@allot/sparse";
 * import assert from "node:assert/strict";
 *
 * assert.equal(blockElements(10_000_000, 100_000), 4096); // 100/row * 8, clamped up
 * assert.equal(blockElements(10_000_000, 1_000), 80_000);
 * assert.equal(blockElements(1e9, 100), 262_144); // clamped down
 * ```
 */
export function blockElements(
  nnz: number,
  primaryLength: number,
  strategy: BlockStrategy = {},
): number {
  validateInteger(nnz, 0, Number.MAX_SAFE_INTEGER, "nnz");
  validateInteger(primaryLength, 0, LIMIT, "primaryLength");
  validateObject(strategy, "strategy");
  validateOptionKeys(
    strategy,
    ["minElements", "maxElements", "rowsPerBlock"],
    "blockStrategy",
  );
  const min = validateInteger(
    strategy.minElements ?? 4096,
    1,
    LIMIT,
    "minElements",
  );
  const max = validateInteger(
    strategy.maxElements ?? 262144,
    1,
    LIMIT,
    "maxElements",
  );
  const rows = validateInteger(
    strategy.rowsPerBlock ?? 8,
    1,
    LIMIT,
    "rowsPerBlock",
  );
  if (min > max) {
    throw new InvalidArgumentError(
      `Invalid block strategy: minElements must be at most maxElements ${max}, received ${min}`,
      { name: "minElements", value: min, limit: max },
    );
  }
  const average = primaryLength === 0 ? 0 : Math.floor(nnz / primaryLength);
  return Math.min(Math.max(average * rows, min), max);
}
