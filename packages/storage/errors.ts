/**
 * {@linkcode ShapeError}: the typed error for shapes, strides, indices and
 * broadcasts that do not fit.
 *
 * @module
 */

import { describeValue, InvalidArgumentError } from "@allot/core";

/** Details of a {@linkcode ShapeError}. */
export interface ShapeErrorDetails {
  /** Name of the offending argument, such as `shape` or `dim`. */
  name: string;
  /** The value that was received. */
  value: unknown;
  /** The limit or rule the value broke, when there is one. */
  limit?: unknown;
  /** The shape of the view involved. */
  shape: readonly number[];
  /** The strides of the view involved, when there is a view. */
  strides?: readonly number[];
}

/**
 * A shape, stride, index, permutation, slice or broadcast does not fit the
 * view or storage it was applied to. The message names the shape and strides;
 * the same facts are fields on the error. It is an
 * {@linkcode InvalidArgumentError}, so one `instanceof` check catches both.
 *
 * @example Read the shape and strides from the error
 * ```ts
 * import { BufferView, ShapeError } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * const view = BufferView.contiguous([2, 3]).transpose();
 * try {
 *   view.reshape([6]);
 * } catch (error) {
 *   assert.ok(error instanceof ShapeError);
 *   assert.deepEqual(error.shape, [3, 2]);
 *   assert.deepEqual(error.strides, [1, 3]);
 * }
 * ```
 */
export class ShapeError extends InvalidArgumentError {
  /** The shape of the view involved. */
  readonly shape: readonly number[];
  /** The strides of the view involved, or `undefined` when there is none. */
  readonly strides: readonly number[] | undefined;

  /**
   * Creates a shape error.
   *
   * @param message Message naming the shape, strides and the broken rule.
   * @param details The argument, value, limit, shape and strides.
   */
  constructor(message: string, details: ShapeErrorDetails) {
    super(message, details);
    this.shape = Object.freeze([...details.shape]);
    this.strides = details.strides === undefined
      ? undefined
      : Object.freeze([...details.strides]);
  }
}

/** Formats a shape or strides list as `[2, 3]`. */
export function _fmt(list: readonly number[]): string {
  if (!Array.isArray(list)) return describeValue(list);
  let out = "";
  for (let i = 0; i < list.length; i++) {
    const x = list[i];
    out += (i === 0 ? "" : ", ") +
      (typeof x === "number" ? String(x) : describeValue(x));
  }
  return `[${out}]`;
}
