/**
 * Element types with WGSL-style names, and the typed arrays that hold them.
 *
 * @module
 */

import {
  describeValue,
  InvalidArgumentError,
  UnsupportedOperationError,
} from "@allot/core";

/**
 * An element type, named as in WGSL. `bool` is stored as one byte (0 or 1) and
 * read through a `Uint8Array`; viewing `f16` elements on the host needs a
 * runtime with `Float16Array` (without it, f16 buffers still live on a GPU).
 */
export type Dtype =
  | "f32"
  | "f16"
  | "f64"
  | "i32"
  | "u32"
  | "i16"
  | "u16"
  | "i8"
  | "u8"
  | "bool";

/**
 * `Float16Array` where the compiler's lib declares it (ES2025 and later),
 * else `Uint16Array`: written without naming the global, so that the types
 * compile under any `lib` setting (`tsc --strict` with `lib: ["ES2022"]`
 * included).
 */
export type Float16ArrayType = typeof globalThis extends
  { Float16Array: { prototype: infer P } } ? P : Uint16Array;

/** The typed array that holds each {@linkcode Dtype}. */
export interface DtypeArrayMap {
  /** 32-bit floats. */
  f32: Float32Array;
  /** 16-bit floats (runtimes with `Float16Array`). */
  f16: Float16ArrayType;
  /** 64-bit floats. */
  f64: Float64Array;
  /** 32-bit signed integers. */
  i32: Int32Array;
  /** 32-bit unsigned integers. */
  u32: Uint32Array;
  /** 16-bit signed integers. */
  i16: Int16Array;
  /** 16-bit unsigned integers. */
  u16: Uint16Array;
  /** 8-bit signed integers. */
  i8: Int8Array;
  /** 8-bit unsigned integers. */
  u8: Uint8Array;
  /** Booleans stored as one byte each. */
  bool: Uint8Array;
}

/** The typed array type of dtype `D`, such as `Float32Array` for `"f32"`. */
export type TypedArrayOf<D extends Dtype> = DtypeArrayMap[D];

/** Any typed array a {@linkcode Dtype} maps to. */
export type AnyTypedArray = DtypeArrayMap[Dtype];

/** Constructor of a typed array over a buffer. */
export interface TypedArrayConstructorOf<D extends Dtype> {
  /** Bytes per element. */
  readonly BYTES_PER_ELEMENT: number;
  /** Creates an array of `length` zeros. */
  new (length: number): TypedArrayOf<D>;
  /** Views `length` elements of a buffer from `byteOffset`. */
  new (
    buffer: ArrayBufferLike,
    byteOffset: number,
    length: number,
  ): TypedArrayOf<D>;
}

/** What allot knows about a dtype. */
export interface DtypeInfo<D extends Dtype = Dtype> {
  /** The dtype name. */
  readonly dtype: D;
  /** Bytes per element: 1, 2, 4 or 8. */
  readonly bytesPerElement: number;
  /** The typed array constructor that holds it. */
  readonly arrayType: TypedArrayConstructorOf<D>;
}

const F16 = (globalThis as { Float16Array?: unknown }).Float16Array as
  | TypedArrayConstructorOf<"f16">
  | undefined;

function info<D extends Dtype>(
  dtype: D,
  arrayType: TypedArrayConstructorOf<D>,
): DtypeInfo<D> {
  return Object.freeze({
    dtype,
    bytesPerElement: arrayType.BYTES_PER_ELEMENT,
    arrayType,
  });
}

/**
 * Stands in for `Float16Array` where the runtime lacks it (Node 20): f16
 * buffers can then be allocated, copied, packed and moved to and from a GPU
 * (all of which go by bits), and only a host view of their elements throws.
 */
class _NoFloat16Array {
  static readonly BYTES_PER_ELEMENT = 2;
  constructor() {
    throw new UnsupportedOperationError(
      "Cannot view f16 elements on the host: this runtime has no Float16Array (Node 20, older browsers). f16 buffers still allocate, copy and live on the GPU; read their bits through a u16 buffer over the same storage, or use a runtime with Float16Array",
    );
  }
}

const INFOS: { [D in Dtype]?: DtypeInfo<D> } = {
  f32: info("f32", Float32Array),
  f64: info("f64", Float64Array),
  i32: info("i32", Int32Array),
  u32: info("u32", Uint32Array),
  i16: info("i16", Int16Array),
  u16: info("u16", Uint16Array),
  i8: info("i8", Int8Array),
  u8: info("u8", Uint8Array),
  bool: info("bool", Uint8Array),
  f16: info(
    "f16",
    F16 ?? (_NoFloat16Array as unknown as TypedArrayConstructorOf<"f16">),
  ),
};

const ALL: readonly Dtype[] = Object.freeze([
  "f32",
  "f16",
  "f64",
  "i32",
  "u32",
  "i16",
  "u16",
  "i8",
  "u8",
  "bool",
]);

/**
 * The dtypes whose elements this runtime can view on the host: every
 * {@linkcode Dtype}, less `f16` where `Float16Array` is missing (there, f16
 * buffers still allocate, copy and live on a GPU; only element access on the
 * host throws).
 *
 * @returns A frozen list of dtype names.
 *
 * @example List the dtypes
 * ```ts
 * import { supportedDtypes } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * assert.ok(supportedDtypes().includes("f32"));
 * ```
 */
export function supportedDtypes(): readonly Dtype[] {
  return SUPPORTED;
}

const SUPPORTED: readonly Dtype[] = Object.freeze(
  ALL.filter((d) => d !== "f16" || F16 !== undefined),
);

/**
 * Facts about a dtype: bytes per element and its typed array.
 *
 * @param dtype A dtype name.
 * @returns The frozen facts.
 * @throws {InvalidArgumentError} When `dtype` is not a dtype name.
 * Where `Float16Array` is missing, `f16`'s `arrayType` is a stand-in that
 * throws {@linkcode UnsupportedOperationError} when constructed: the facts
 * are there, only host views of the elements are refused.
 *
 * @example Look up a dtype
 * ```ts
 * import { dtypeInfo } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * assert.equal(dtypeInfo("f64").bytesPerElement, 8);
 * assert.equal(dtypeInfo("bool").arrayType, Uint8Array);
 * assert.throws(() => dtypeInfo("f128" as "f32"), /Unknown dtype/);
 * ```
 */
export function dtypeInfo<D extends Dtype>(dtype: D): DtypeInfo<D> {
  // Own keys only: "toString" or "__proto__" must not find Object.prototype's.
  if (typeof dtype === "string" && Object.hasOwn(INFOS, dtype)) {
    return INFOS[dtype] as DtypeInfo<D>;
  }
  throw new InvalidArgumentError(
    `Unknown dtype: expected one of ${ALL.join(", ")}, received ${
      describeValue(dtype)
    }`,
    { name: "dtype", value: dtype, limit: ALL },
  );
}

/**
 * The dtype a typed array holds, or `undefined` for other values. A
 * `Uint8Array` maps to `u8` (use `dtype: "bool"` explicitly for booleans).
 *
 * @param array Any value.
 * @returns The dtype name, or `undefined`.
 *
 * @example Name the dtype of a typed array
 * ```ts
 * import { dtypeOf } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * assert.equal(dtypeOf(new Int16Array(2)), "i16");
 * assert.equal(dtypeOf([1, 2]), undefined);
 * ```
 */
export function dtypeOf(array: unknown): Dtype | undefined {
  // A brand check (the intrinsic %TypedArray%.prototype[@@toStringTag]
  // getter): neither an object made from a typed array's prototype, a
  // proxy, nor a subclass's overridden getters can pass for another kind.
  return BY_TAG[typedArrayTag.call(array) as string];
}

const typedArrayTag = Object.getOwnPropertyDescriptor(
  Object.getPrototypeOf(Uint8Array.prototype),
  Symbol.toStringTag,
)!.get as (this: unknown) => string | undefined;

const BY_TAG: Readonly<Record<string, Dtype | undefined>> = Object.freeze(
  Object.assign(Object.create(null), {
    Float32Array: "f32",
    Float64Array: "f64",
    Int32Array: "i32",
    Uint32Array: "u32",
    Int16Array: "i16",
    Uint16Array: "u16",
    Int8Array: "i8",
    Uint8Array: "u8",
    Float16Array: F16 === undefined ? undefined : "f16",
  }),
);
