/**
 * Element types named as in WGSL, and the typed arrays that hold them.
 *
 * @module
 */

import { InvalidArgumentError } from "@allot/core";

/** An element type, named as in WGSL (`f32`, `u8`, ...). */
export type Dtype =
  | "f64"
  | "f32"
  | "f16"
  | "i32"
  | "u32"
  | "i16"
  | "u16"
  | "i8"
  | "u8";

/** The typed array that holds elements of a {@linkcode Dtype}. */
export type TypedArrayFor<D extends Dtype> = {
  f64: Float64Array;
  f32: Float32Array;
  f16: Float16Array;
  i32: Int32Array;
  u32: Uint32Array;
  i16: Int16Array;
  u16: Uint16Array;
  i8: Int8Array;
  u8: Uint8Array;
}[D];

/** Any typed array a {@linkcode Dtype} can name. */
export type NumericArray = TypedArrayFor<Dtype>;

/** A typed-array constructor for one dtype. */
export interface TypedArrayConstructorFor<T> {
  /** Bytes per element. */
  readonly BYTES_PER_ELEMENT: number;
  /** Makes a view of `length` elements at `byteOffset`. */
  new (
    buffer: ArrayBufferLike,
    byteOffset?: number,
    length?: number,
  ): T;
  /** Makes a new array of `length` elements. */
  new (length: number): T;
}

const CONSTRUCTORS: Record<Dtype, TypedArrayConstructorFor<NumericArray>> = {
  f64: Float64Array,
  f32: Float32Array,
  f16: Float16Array,
  i32: Int32Array,
  u32: Uint32Array,
  i16: Int16Array,
  u16: Uint16Array,
  i8: Int8Array,
  u8: Uint8Array,
};

const NAMES = Object.keys(CONSTRUCTORS) as Dtype[];

/**
 * Returns whether `value` names a {@linkcode Dtype}.
 *
 * @param value Any value.
 * @returns `true` for `"f32"`, `"u8"`, ...
 *
 * @example
 * ```ts
 * import { isDtype } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * assert.ok(isDtype("f32"));
 * assert.ok(!isDtype("float"));
 * ```
 */
export function isDtype(value: unknown): value is Dtype {
  return typeof value === "string" && Object.hasOwn(CONSTRUCTORS, value);
}

/**
 * The typed-array constructor of a dtype.
 *
 * @param dtype The element type.
 * @returns Its constructor, such as `Float32Array` for `"f32"`.
 * @throws {InvalidArgumentError} When `dtype` is not a known dtype.
 *
 * @example
 * ```ts
 * import { typedArrayConstructor } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * assert.equal(typedArrayConstructor("f32"), Float32Array);
 * assert.equal(typedArrayConstructor("u16").BYTES_PER_ELEMENT, 2);
 * ```
 */
export function typedArrayConstructor<D extends Dtype>(
  dtype: D,
): TypedArrayConstructorFor<TypedArrayFor<D>> {
  if (!isDtype(dtype)) {
    throw new InvalidArgumentError(
      `Invalid dtype: must be one of ${NAMES.join(", ")}, received ${
        JSON.stringify(dtype)
      }`,
      { name: "dtype", value: dtype, limit: NAMES },
    );
  }
  return CONSTRUCTORS[dtype] as TypedArrayConstructorFor<TypedArrayFor<D>>;
}

/**
 * The dtype of a typed array, or `undefined` for other values.
 *
 * @param array A typed array.
 * @returns Its dtype, such as `"f32"` for a `Float32Array`.
 *
 * @example
 * ```ts
 * import { dtypeOf } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * assert.equal(dtypeOf(new Int32Array(2)), "i32");
 * assert.equal(dtypeOf([1, 2]), undefined);
 * ```
 */
export function dtypeOf(array: unknown): Dtype | undefined {
  for (const name of NAMES) {
    if (array instanceof CONSTRUCTORS[name]) return name;
  }
  return undefined;
}
