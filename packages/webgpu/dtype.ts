/**
 * Element types the WebGPU kernels move, named as in WGSL (the same names as
 * `@allot/storage`'s `Dtype`). Kernels move bits, so `f16`, `f64` and `bool`
 * need no shader feature.
 *
 * @module
 */

import { describeValue, InvalidArgumentError } from "@allot/core";
import type { Dtype } from "@allot/storage";

/**
 * An element type, named as in WGSL: `@allot/storage`'s `Dtype`. The byte
 * sizes below are kept here because kernels move bits and must not depend on
 * the runtime having `Float16Array`.
 */
export type GpuDtype = Dtype;

const SIZES: Readonly<Record<GpuDtype, 1 | 2 | 4 | 8>> = Object.freeze({
  f32: 4,
  f16: 2,
  f64: 8,
  i32: 4,
  u32: 4,
  i16: 2,
  u16: 2,
  i8: 1,
  u8: 1,
  bool: 1,
});

/**
 * Bytes per element of `dtype`.
 *
 * @param dtype The element type.
 * @returns 1, 2, 4 or 8.
 * @throws {InvalidArgumentError} For an unknown dtype.
 *
 * @example
 * ```ts
 * import { dtypeByteSize } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * assert.equal(dtypeByteSize("f16"), 2);
 * ```
 */
export function dtypeByteSize(dtype: GpuDtype): 1 | 2 | 4 | 8 {
  // (a name only: a key is never made of an object, whose toString may lie
  // or be missing)
  const size = typeof dtype === "string" && Object.hasOwn(SIZES, dtype)
    ? SIZES[dtype]
    : undefined;
  if (size === undefined) {
    throw new InvalidArgumentError(
      `Invalid dtype: must be one of ${
        Object.keys(SIZES).join(", ")
      }, received ${describeValue(dtype)}`,
      { name: "dtype", value: dtype, limit: Object.keys(SIZES) },
    );
  }
  return size;
}

interface _Float16View {
  setFloat16(byteOffset: number, value: number, littleEndian?: boolean): void;
}

function _f16Bits(value: number): number {
  const view = new DataView(new ArrayBuffer(4));
  const withF16 = view as unknown as Partial<_Float16View>;
  if (typeof withF16.setFloat16 === "function") {
    withF16.setFloat16(0, value, true);
    return view.getUint16(0, true);
  }
  // Round to nearest even by hand where the runtime lacks setFloat16.
  view.setFloat32(0, value, true);
  const x = view.getUint32(0, true);
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let m = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    if (rest > half || (rest === half && (m & 1))) m++;
    return sign | m;
  }
  let m = mant >>> 13;
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (m & 1))) m++;
  if (m === 0x400) {
    m = 0;
    e++;
    if (e >= 0x1f) return sign | 0x7c00;
  }
  return sign | (e << 10) | m;
}

/**
 * The little-endian bytes of `value` as one element of `dtype`.
 *
 * @param dtype The element type.
 * @param value The value; a `bigint` is not accepted.
 * @returns A new array of `dtypeByteSize(dtype)` bytes.
 * @throws {InvalidArgumentError} For an unknown dtype or a non-number value.
 *
 * @example
 * ```ts
 * import { encodeElement } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual([...encodeElement("u16", 0x1234)], [0x34, 0x12]);
 * ```
 */
export function encodeElement(dtype: GpuDtype, value: number): Uint8Array {
  const size = dtypeByteSize(dtype);
  if (typeof value !== "number") {
    throw new InvalidArgumentError(
      `Invalid value: must be a number, received ${typeof value}`,
      { name: "value", value, limit: "number" },
    );
  }
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  switch (dtype) {
    case "f32":
      view.setFloat32(0, value, true);
      break;
    case "f64":
      view.setFloat64(0, value, true);
      break;
    case "f16":
      view.setUint16(0, _f16Bits(value), true);
      break;
    case "i32":
    case "u32":
      view.setUint32(0, value >>> 0, true);
      break;
    case "i16":
    case "u16":
      view.setUint16(0, value & 0xffff, true);
      break;
    case "i8":
    case "u8":
      view.setUint8(0, value & 0xff);
      break;
    case "bool":
      view.setUint8(0, value ? 1 : 0);
      break;
  }
  return bytes;
}
