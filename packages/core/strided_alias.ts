/**
 * {@linkcode findStridedAlias}: whether two elements of a strided view
 * address one memory element (a destination that cannot be written
 * element for element).
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { describeValue } from "./validate.ts";

/**
 * The widest view, in elements from its lowest to its highest address, that
 * {@linkcode findStridedAlias} searches exactly when the quick test cannot
 * prove it alias-free (2^28; the search keeps one bit per element).
 */
export const MAX_ALIAS_SEARCH_SPAN: number = 2 ** 28;

/** Two index tuples of one strided view that address the same element. */
export interface StridedAlias {
  /** The first index tuple, in row-major order, that reaches the element. */
  readonly first: readonly number[];
  /** A later index tuple that reaches the same element. */
  readonly second: readonly number[];
  /** The element both reach, counted from the view's offset. */
  readonly offset: number;
}

/**
 * Finds two elements of the strided view (`shape`, `strides`) that address
 * the same memory element, or proves there are none. A stride of 0 over more
 * than one element aliases (a broadcast view), but so do strides such as
 * `[1, 1]` over shape `[2, 2]` (indices `[0, 1]` and `[1, 0]` both reach
 * element 1). Every row-major, column-major, permuted, sliced, stepped or
 * flipped view of a dense layout passes a quick test (each stride, sorted by
 * magnitude, exceeds the reach of all smaller ones) in O(rank²) steps with
 * nothing allocated;
 * other views are searched exactly, with one bit per element of their span.
 *
 * @param shape The extent of each dimension (non-negative integers).
 * @param strides The element step of each dimension (integers, any sign).
 * @returns Two aliasing index tuples, or `undefined` when every element of
 * the view is distinct (always for an empty view).
 * @throws {InvalidArgumentError} When `shape` or `strides` is not an array
 * of safe integers (extents non-negative), when they differ in length, or the view fails the quick test and spans more than
 * {@linkcode MAX_ALIAS_SEARCH_SPAN} elements (too wide to search).
 *
 * @example
 * ```ts
 * import { findStridedAlias } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(findStridedAlias([2, 3], [3, 1]), undefined); // row-major
 * assert.equal(findStridedAlias([2, 3], [1, 2]), undefined); // column-major
 * assert.deepEqual(findStridedAlias([2, 2], [1, 1]), {
 *   first: [0, 1],
 *   second: [1, 0],
 *   offset: 1,
 * });
 * ```
 */
export function findStridedAlias(
  shape: readonly number[],
  strides: readonly number[],
): StridedAlias | undefined {
  _checkIntegers(shape, "shape", 0);
  _checkIntegers(strides, "strides", -Number.MAX_SAFE_INTEGER);
  const rank = shape.length;
  if (strides.length !== rank) {
    throw new InvalidArgumentError(
      `Cannot look for aliasing elements: shape [${shape}] has ${rank} dimensions, strides [${strides}] has ${strides.length}`,
      { name: "strides", value: [...strides], limit: rank },
    );
  }
  for (let d = 0; d < rank; d++) if (shape[d] === 0) return undefined;
  for (let d = 0; d < rank; d++) {
    if (shape[d] > 1 && strides[d] === 0) {
      const second = new Array<number>(rank).fill(0);
      second[d] = 1;
      return { first: new Array<number>(rank).fill(0), second, offset: 0 };
    }
  }
  // The dimensions of extent above 1 by magnitude of stride (ties by
  // index), found by selection: no array, no sort, for the ranks views
  // have. Each stride must pass the reach of all smaller ones.
  let reach = 0;
  let provenDistinct = true;
  let lastStep = -1, lastDim = -1;
  for (;;) {
    let next = -1, nextStep = Infinity;
    for (let d = 0; d < rank; d++) {
      if (shape[d] <= 1) continue;
      const step = Math.abs(strides[d]);
      if (step < lastStep || (step === lastStep && d <= lastDim)) continue;
      if (step < nextStep) next = d, nextStep = step;
    }
    if (next < 0) break;
    if (nextStep <= reach) provenDistinct = false;
    reach += nextStep * (shape[next] - 1);
    lastStep = nextStep, lastDim = next;
  }
  if (provenDistinct) return undefined;
  const span = reach + 1;
  if (!(span <= MAX_ALIAS_SEARCH_SPAN)) {
    throw new InvalidArgumentError(
      `Cannot look for aliasing elements of shape [${shape}] with strides [${strides}]: the view spans ${span} elements, the exact search covers at most ${MAX_ALIAS_SEARCH_SPAN}`,
      { name: "strides", value: [...strides], limit: MAX_ALIAS_SEARCH_SPAN },
    );
  }
  return search(shape, strides, span);
}

/** Walks the view in row-major order, one bit per element of its span. */
function search(
  shape: readonly number[],
  strides: readonly number[],
  span: number,
): StridedAlias | undefined {
  _checkIntegers(shape, "shape", 0);
  _checkIntegers(strides, "strides", -Number.MAX_SAFE_INTEGER);
  const rank = shape.length;
  let low = 0;
  for (let d = 0; d < rank; d++) {
    if (strides[d] < 0) low += strides[d] * (shape[d] - 1);
  }
  const seen = new Uint8Array(Math.ceil(span / 8));
  const index = new Array<number>(rank).fill(0);
  let at = 0;
  for (;;) {
    const bit = at - low;
    const mask = 1 << (bit & 7);
    if ((seen[bit >>> 3] & mask) !== 0) {
      return {
        first: firstReaching(shape, strides, at),
        second: index,
        offset: at,
      };
    }
    seen[bit >>> 3] |= mask;
    let d = rank - 1;
    for (; d >= 0; d--) {
      at += strides[d];
      if (++index[d] < shape[d]) break;
      at -= strides[d] * shape[d];
      index[d] = 0;
    }
    if (d < 0) return undefined;
  }
}

/** The first index tuple, row-major, whose element is `target`. */
function firstReaching(
  shape: readonly number[],
  strides: readonly number[],
  target: number,
): number[] {
  const rank = shape.length;
  const index = new Array<number>(rank).fill(0);
  let at = 0;
  while (at !== target) {
    let d = rank - 1;
    for (; d >= 0; d--) {
      at += strides[d];
      if (++index[d] < shape[d]) break;
      at -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
  return index;
}

/** An array of safe integers of at least `min`, or a refusal naming it. */
function _checkIntegers(
  values: readonly number[],
  name: string,
  min: number,
): void {
  if (!Array.isArray(values)) {
    throw new InvalidArgumentError(
      `Cannot look for aliasing elements: ${name} must be an array of integers, received ${
        describeValue(values)
      }`,
      { name, value: values, limit: "an array of integers" },
    );
  }
  for (let d = 0; d < values.length; d++) {
    const v = values[d];
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) {
      throw new InvalidArgumentError(
        `Cannot look for aliasing elements: ${name}[${d}] must be ${
          min === 0 ? "a non-negative" : "a"
        } safe integer, received ${describeValue(v)}`,
        {
          name: `${name}[${d}]`,
          value: v,
          limit: min === 0 ? "a non-negative safe integer" : "a safe integer",
        },
      );
    }
  }
}
