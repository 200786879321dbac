/**
 * {@linkcode AllocationStrategy}: how many bytes a pool reserves for a
 * request, which decides which blocks can serve which requests.
 *
 * @module
 */

import {
  alignUp,
  MAX_BYTE_LENGTH,
  optionOr,
  validateAlignment,
  validateByteLength,
} from "@allot/core";

/** The largest request a pooled strategy rounds up to a safe power of two. */
const MAX_POOLED = 2 ** 52;

/**
 * Rounds a requested byte length to the size of the block a pool reserves.
 * Blocks are reused only for requests that round to the same size.
 */
export interface AllocationStrategy {
  /** `exact`, `padded` or `pooled`. */
  readonly kind: "exact" | "padded" | "pooled";
  /** Alignment of `padded`, smallest bucket of `pooled`, 1 for `exact`. */
  readonly granule: number;
  /**
   * Bytes reserved for a request of `byteLength` bytes.
   *
   * @param byteLength The requested bytes, a non-negative integer.
   * @returns A byte length `>= byteLength`.
   * @throws {InvalidArgumentError} When `byteLength` is not a non-negative
   * safe integer, or its rounded size would pass 2^53 - 1 (for `pooled`,
   * requests above 2^52).
   */
  reserve(byteLength: number): number;
}

/** Options of {@linkcode AllocationStrategy.pooled}. */
export interface PooledStrategyOptions {
  /**
   * The smallest bucket, a power of two: requests below it share it.
   *
   * @default {256}
   */
  minByteLength?: number;
}

/**
 * The three strategies of CubeCL's `AllocationStrategy`.
 *
 * @example How each strategy rounds a request
 * ```ts
 * import { AllocationStrategy } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * assert.equal(AllocationStrategy.exact().reserve(100), 100);
 * assert.equal(AllocationStrategy.padded(64).reserve(100), 128);
 * assert.equal(AllocationStrategy.pooled().reserve(100), 256);
 * assert.equal(AllocationStrategy.pooled().reserve(1000), 1024);
 * ```
 */
export const AllocationStrategy: {
  /**
   * Reserves exactly the requested bytes; blocks serve equal requests only.
   *
   * @returns The strategy.
   */
  exact(): AllocationStrategy;
  /**
   * Rounds up to a multiple of `alignment` bytes.
   *
   * @param alignment A power of two, at most 2^30.
   * @returns The strategy.
   * @throws {InvalidArgumentError} When `alignment` is not a power of two.
   */
  padded(alignment: number): AllocationStrategy;
  /**
   * Rounds up to a power of two (at least `minByteLength`), so few bucket
   * sizes serve many requests; up to half the block may be padding.
   *
   * @param options The smallest bucket.
   * @returns The strategy.
   * @throws {InvalidArgumentError} When `minByteLength` is not a power of two.
   */
  pooled(options?: PooledStrategyOptions): AllocationStrategy;
} = {
  exact(): AllocationStrategy {
    return Object.freeze({
      kind: "exact" as const,
      granule: 1,
      reserve: (byteLength: number) => validateByteLength(byteLength),
    });
  },
  padded(alignment: number): AllocationStrategy {
    validateAlignment(alignment, 2 ** 30);
    return Object.freeze({
      kind: "padded" as const,
      granule: alignment,
      reserve: (byteLength: number) =>
        alignUp(
          validateByteLength(
            byteLength,
            MAX_BYTE_LENGTH - (MAX_BYTE_LENGTH % alignment),
          ),
          alignment,
        ),
    });
  },
  pooled(options: PooledStrategyOptions = {}): AllocationStrategy {
    const min = validateAlignment(
      optionOr(options.minByteLength, 256),
      2 ** 30,
      "minByteLength",
    );
    return Object.freeze({
      kind: "pooled" as const,
      granule: min,
      reserve: (byteLength: number) => {
        validateByteLength(byteLength, MAX_POOLED, "byteLength");
        if (byteLength <= min) return min;
        // Math.log2 rounds: log2(2^50 + 1) is exactly 50 in floating point.
        const bucket = 2 ** Math.ceil(Math.log2(byteLength));
        return bucket < byteLength ? bucket * 2 : bucket;
      },
    });
  },
};
