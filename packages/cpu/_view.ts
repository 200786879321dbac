import { InvalidArgumentError } from "@allot/core";

/**
 * Bytes per element of a view constructor: its `BYTES_PER_ELEMENT`, or 1 for
 * `DataView` (whose length argument counts bytes).
 *
 * @throws {InvalidArgumentError} When `type` is not a constructor.
 */
export function elementBytes(type: unknown): number {
  if (typeof type !== "function") {
    throw new InvalidArgumentError(
      `Invalid view type: must be a typed-array constructor or DataView, received ${
        String(type)
      }`,
      { name: "type", value: type },
    );
  }
  const size = (type as { BYTES_PER_ELEMENT?: unknown }).BYTES_PER_ELEMENT;
  return typeof size === "number" && size >= 1 ? size : 1;
}
