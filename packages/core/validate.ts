/**
 * Validation helpers shared by every package's public edge. Each throws an
 * {@linkcode InvalidArgumentError} whose message states the value and the
 * limit, and returns the validated value so calls can be inlined.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";

/** The largest byte length any allot allocator accepts: 2^53 - 1. */
export const MAX_BYTE_LENGTH: number = Number.MAX_SAFE_INTEGER;

/**
 * Describes any value for an error message without running user code: no
 * `valueOf`, `toString`, getter or proxy trap is called, so describing a
 * hostile object cannot throw. Strings are quoted (and cut at 40
 * characters), BigInts end in `n`, objects and functions are named by kind.
 *
 * @param value The value to describe.
 * @returns A short description.
 *
 * @example
 * ```ts
 * import { describeValue } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(describeValue(8n), "8n");
 * assert.equal(describeValue("8"), '"8"');
 * assert.equal(describeValue([1, 2]), "an array of length 2");
 * assert.equal(describeValue({ valueOf: () => 8 }), "an object");
 * ```
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(
        value.length > 40 ? `${value.slice(0, 40)}…` : value,
      );
    case "bigint":
      return `${value}n`;
    case "symbol":
      return "a symbol";
    case "function":
      return "a function";
    case "object":
      if (value === null) return "null";
      try {
        if (Array.isArray(value)) {
          return `an array of length ${(value as unknown[]).length}`;
        }
      } catch {
        // A revoked proxy or a throwing length getter.
      }
      return "an object";
    default:
      return Object.is(value, -0) ? "-0" : String(value);
  }
}

const describe = describeValue;

/**
 * Checks that `value` is an object (not `null`), such as an options bag or a
 * collaborator, without reading any of its properties.
 *
 * @param value The value to check.
 * @param name Name of the argument, used in the message.
 * @throws {InvalidArgumentError} When the value is not an object.
 *
 * @example
 * ```ts
 * import { InvalidArgumentError, validateObject } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * validateObject({}, "options");
 * assert.throws(() => validateObject(null, "options"), InvalidArgumentError);
 * ```
 */
export function validateObject(value: unknown, name: string): void {
  if (typeof value !== "object" || value === null) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be an object, received ${describe(value)}`,
      { name, value, limit: "object" },
    );
  }
}

/**
 * The value of an optional option, by allot's one rule for options: an
 * option that is absent or `undefined` takes its default; every other value,
 * `null` included, is the caller's and goes on to be validated (so `null`
 * for a number is refused with the value named, never read as "not given"
 * as `??` would). Read the option once and pass it here.
 *
 * @param value The option's value, read once.
 * @param fallback The default.
 * @returns `fallback` for `undefined`, else `value` unchanged.
 *
 * @example
 * ```ts
 * import { InvalidArgumentError, optionOr, validateByteLength } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const read = (o: { byteLength?: number }) =>
 *   validateByteLength(optionOr(o.byteLength, 64));
 * assert.equal(read({}), 64);
 * assert.throws(() => read({ byteLength: null as never }), InvalidArgumentError);
 * ```
 */
export function optionOr<T>(value: T | undefined, fallback: T): T {
  return value === undefined ? fallback : value;
}

/**
 * Checks an optional boolean option (such as `strict`): `undefined` gives
 * `fallback`, and anything but `true` or `false` (`1`, `"yes"`, a boxed
 * `Boolean`) is refused rather than read as truthy.
 *
 * @param value The option's value.
 * @param name Name of the option, used in the message.
 * @param fallback The value for `undefined`.
 * @returns The boolean.
 * @throws {InvalidArgumentError} When the value is neither `undefined` nor a boolean.
 *
 * @example
 * ```ts
 * import { InvalidArgumentError, validateFlag } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(validateFlag(undefined, "strict", false), false);
 * assert.equal(validateFlag(true, "strict", false), true);
 * assert.throws(() => validateFlag(1, "strict", false), InvalidArgumentError);
 * ```
 */
export function validateFlag(
  value: unknown,
  name: string,
  fallback: boolean,
): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a boolean, received ${describe(value)}`,
      { name, value, limit: "boolean" },
    );
  }
  return value;
}

/**
 * Checks that `value` is a non-negative safe integer no larger than `max`.
 *
 * @param value The byte length to check.
 * @param max The largest accepted value.
 * @param name Name of the argument, used in the message.
 * @returns The value (`-0` as `0`).
 * @throws {InvalidArgumentError} When the value is not an integer in `[0, max]`.
 *
 * @example
 * ```ts
 * import { validateByteLength } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(validateByteLength(64), 64);
 * assert.throws(() => validateByteLength(-1));
 * assert.throws(() => validateByteLength(2048, 1024));
 * ```
 */
export function validateByteLength(
  value: number,
  max: number = MAX_BYTE_LENGTH,
  name = "byteLength",
): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a non-negative integer, received ${
        describe(value)
      }`,
      { name, value, limit: max },
    );
  }
  if (value > max) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be at most ${max}, received ${value}`,
      { name, value, limit: max },
    );
  }
  return value + 0; // -0 is 0
}

/**
 * Checks that `value` is an integer in `[min, max]`.
 *
 * @param value The value to check.
 * @param min The smallest accepted value.
 * @param max The largest accepted value.
 * @param name Name of the argument, used in the message.
 * @returns The value (`-0` as `0`).
 * @throws {InvalidArgumentError} When the value is not an integer in range.
 *
 * @example
 * ```ts
 * import { validateInteger } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(validateInteger(3, 0, 7, "index"), 3);
 * assert.throws(() => validateInteger(8, 0, 7, "index"), /index/);
 * ```
 */
export function validateInteger(
  value: number,
  min: number,
  max: number,
  name: string,
): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be an integer in [${min}, ${max}], received ${
        describe(value)
      }`,
      { name, value, limit: [min, max] },
    );
  }
  return value + 0; // -0 is 0
}

/**
 * Returns whether `value` is a positive integer power of two.
 *
 * @param value The value to test.
 * @returns `true` for 1, 2, 4, 8, ...
 *
 * @example
 * ```ts
 * import { isPowerOfTwo } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(isPowerOfTwo(64), true);
 * assert.equal(isPowerOfTwo(48), false);
 * ```
 */
export function isPowerOfTwo(value: number): boolean {
  return Number.isSafeInteger(value) && value > 0 &&
    (value > 0x40000000
      ? Number.isInteger(Math.log2(value))
      : (value & (value - 1)) === 0);
}

/**
 * Checks that `value` is a power of two no larger than `max`.
 *
 * @param value The alignment in bytes.
 * @param max The largest accepted alignment.
 * @param name Name of the argument, used in the message.
 * @returns The value, unchanged.
 * @throws {InvalidArgumentError} When the value is not a power of two in `[1, max]`.
 *
 * @example
 * ```ts
 * import { validateAlignment } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(validateAlignment(64), 64);
 * assert.throws(() => validateAlignment(48), /power of two, received 48/);
 * ```
 */
export function validateAlignment(
  value: number,
  max: number = 65536,
  name = "alignment",
): number {
  if (!isPowerOfTwo(value)) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a power of two, received ${describe(value)}`,
      { name, value, limit: max },
    );
  }
  if (value > max) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be at most ${max}, received ${value}`,
      { name, value, limit: max },
    );
  }
  return value;
}

/**
 * Rounds `value` up to a multiple of `alignment` (a power of two). Works for
 * every safe integer, not only 32-bit ones.
 *
 * @param value A non-negative integer.
 * @param alignment A power of two.
 * @returns The smallest multiple of `alignment` that is `>= value`.
 * @throws {InvalidArgumentError} When `value` is not a non-negative safe
 * integer or `alignment` not a power of two.
 *
 * @example
 * ```ts
 * import { alignUp } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(alignUp(100, 64), 128);
 * assert.equal(alignUp(128, 64), 128);
 * ```
 */
export function alignUp(value: number, alignment: number): number {
  if (!Number.isSafeInteger(value) || value < 0 || !isPowerOfTwo(alignment)) {
    throw new InvalidArgumentError(
      `Cannot align ${describe(value)} up to ${
        describe(alignment)
      }: the value must be a non-negative safe integer and the alignment a power of two`,
      { name: "value", value: [value, alignment], limit: MAX_BYTE_LENGTH },
    );
  }
  const rem = value % alignment;
  return rem === 0 ? value + 0 : value + alignment - rem; // + 0: -0 is 0
}

/**
 * Checks a capacity in bytes: a whole number of bytes (a non-negative safe
 * integer, at most {@linkcode MAX_BYTE_LENGTH}), or `Infinity`, meaning no
 * limit (the default of every segment source).
 *
 * @param value The capacity; `undefined` gives `Infinity`.
 * @param name Name of the argument, used in the message.
 * @returns The capacity, `Infinity` when `value` is `undefined`.
 * @throws {InvalidArgumentError} For NaN, negative numbers, fractions,
 * finite numbers past 2^53 - 1 and non-numbers.
 *
 * @example
 * ```ts
 * import { validateCapacity } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(validateCapacity(undefined), Infinity);
 * assert.equal(validateCapacity(1024), 1024);
 * assert.equal(validateCapacity(Infinity), Infinity);
 * assert.throws(() => validateCapacity(-1), /non-negative integer .*received -1/);
 * assert.throws(() => validateCapacity(0.5), /received 0\.5/);
 * ```
 */
export function validateCapacity(
  value: number | undefined,
  name = "capacityBytes",
): number {
  if (value === undefined) return Infinity;
  if (
    value !== Infinity && !(Number.isSafeInteger(value) && value >= 0)
  ) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a non-negative integer of at most ${MAX_BYTE_LENGTH}, or Infinity for no limit, received ${
        describe(value)
      }`,
      { name, value, limit: MAX_BYTE_LENGTH },
    );
  }
  return value + 0; // -0 is 0
}
