/**
 * The `maxHeldRatio` option of `StepPlannedPool` and `StepPoolGroup`,
 * checked in one place.
 *
 * @module
 */

import { describeValue, InvalidArgumentError, optionOr } from "@allot/core";

/** Default bound on held bytes over the recent peak of planned bytes. */
export const DEFAULT_MAX_HELD_RATIO = 1.1;

/**
 * Returns `value` (or the default when it is `undefined`) after checking it
 * is a finite number of at least 1.
 *
 * @throws {InvalidArgumentError} Stating the value and the limit 1.
 */
export function _heldRatio(value: unknown): number {
  const ratio = optionOr(value, DEFAULT_MAX_HELD_RATIO);
  if (typeof ratio !== "number" || !(ratio >= 1) || !Number.isFinite(ratio)) {
    throw new InvalidArgumentError(
      `Invalid maxHeldRatio: must be a finite number >= 1, received ${
        describeValue(ratio)
      }`,
      { name: "maxHeldRatio", value: ratio, limit: 1 },
    );
  }
  return ratio;
}
