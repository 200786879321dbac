import { describeValue, InvalidArgumentError } from "@allot/core";

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
