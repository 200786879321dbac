import { describeValue, InvalidArgumentError, viewSpan } from "@allot/core";

/**
 * Bytes per element of a view constructor: its `BYTES_PER_ELEMENT`, or 1 for
 * `DataView` (whose length argument counts bytes).
 *
 * @throws {InvalidArgumentError} When `type` is not a constructor (not a
 * function, or a function without a `prototype`, such as an arrow).
 */
export function elementBytes(type: unknown): number {
  // An arrow or method function has no prototype: not a constructor.
  if (
    typeof type !== "function" ||
    typeof (type as { prototype?: unknown }).prototype !== "object"
  ) {
    throw new InvalidArgumentError(
      `Invalid view type: must be a typed-array constructor or DataView, received ${
        describeValue(type)
      }`,
      { name: "type", value: type },
    );
  }
  const size = (type as { BYTES_PER_ELEMENT?: unknown }).BYTES_PER_ELEMENT;
  return typeof size === "number" && size >= 1 ? size : 1;
}

const FLOAT16: unknown = (globalThis as { Float16Array?: unknown })
  .Float16Array;

/**
 * Whether `type` is one of the engine's own typed-array constructors or
 * `DataView` (not a subclass, not a proxy): what they make is exactly what
 * they were asked for, so their views need no check. Compared by identity,
 * the common types first (no hashing on the hot path).
 */
export function isBuiltInView(type: unknown): boolean {
  return type === Float32Array || type === Uint8Array ||
    type === Float64Array || type === Int32Array || type === Uint32Array ||
    type === Int8Array || type === Int16Array || type === Uint16Array ||
    type === Uint8ClampedArray || type === DataView ||
    type === BigInt64Array || type === BigUint64Array ||
    (type === FLOAT16 && type !== undefined);
}

/**
 * Checks what a caller's view constructor made, through the built-in
 * getters (which a subclass cannot override): it must cover bytes of
 * `buffer` from `byteOffset` and at most `limit` of them. A subclass that
 * lies about its element size or ignores its arguments would otherwise hand
 * out a view over a neighbour's bytes.
 *
 * @throws {InvalidArgumentError} When it does not.
 */
export function checkViewSpan(
  view: unknown,
  type: unknown,
  buffer: ArrayBufferLike,
  byteOffset: number,
  limit: number,
): void {
  const span = viewSpan(view);
  if (
    span !== undefined && span.buffer === buffer &&
    span.byteOffset === byteOffset && span.byteLength <= limit
  ) {
    return;
  }
  throw new InvalidArgumentError(
    `Invalid view type: it must make a view of at most ${limit} bytes at byte offset ${byteOffset}, made ${
      span === undefined
        ? describeValue(view)
        : `one of ${span.byteLength} bytes at byte offset ${span.byteOffset}${
          span.buffer === buffer ? "" : " of another buffer"
        }`
    }`,
    { name: "type", value: type, limit },
  );
}
