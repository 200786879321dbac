/**
 * Reading a caller's options without running code that throws halfway
 * through a refused call; values are described with `@allot/core`'s
 * `describeValue` (re-exported here), which runs none of their code.
 *
 * @module
 */

import {
  describeValue,
  InvalidArgumentError,
  validateOptionKeys,
} from "@allot/core";

export { describeValue };

/**
 * Reads an options object's fields into a plain record, turning a throwing
 * getter or proxy into `undefined` plus the error, so callers can refuse
 * with a typed error before changing anything.
 *
 * @param options The caller's options (an object, `undefined`, or junk).
 * @param keys The fields to read.
 * @param where Given: what reads them; an own key that is not one of
 * `keys` is refused (`InvalidArgumentError` naming it) before any is read.
 * @returns The values, or the reason they could not be read.
 */
export function readOptions<K extends string>(
  options: unknown,
  keys: readonly K[],
  where?: string,
): { values: Partial<Record<K, unknown>>; problem?: string } {
  const values: Partial<Record<K, unknown>> = {};
  if (options === undefined) return { values };
  if (options === null || typeof options !== "object") {
    return {
      values,
      problem: `options must be an object, received ${describeValue(options)}`,
    };
  }
  try {
    if (where !== undefined) validateOptionKeys(options, keys, where);
    for (const key of keys) values[key] = (options as Record<K, unknown>)[key];
  } catch (error) {
    if (error instanceof InvalidArgumentError) throw error;
    return {
      values,
      problem: `reading its options threw ${describeValue(error)}: ${
        (error as Error)?.message
      }`,
    };
  }
  return { values };
}

/**
 * A boolean option: `undefined` gives `fallback`; anything but a boolean
 * is refused with a typed error (no truthiness: `"false"` is not false).
 *
 * @param value The option's value, read once by the caller.
 * @param name The option's name, used in the message.
 * @param fallback The value when the option is absent.
 * @returns The flag.
 * @throws {InvalidArgumentError} For a value that is not a boolean.
 */
export function checkFlag(
  value: unknown,
  name: string,
  fallback: boolean,
): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be true or false, received ${
        describeValue(value)
      }`,
      { name, value, limit: "boolean" },
    );
  }
  return value;
}

/**
 * Refuses `value` unless it is an instance of `type`, with a typed error
 * naming what was received (runs none of its code: `instanceof` on a proxy
 * reads its prototype, which may throw; that is caught).
 *
 * @param value The argument.
 * @param type The class it must be an instance of.
 * @param name The argument's name, used in the message.
 * @throws {InvalidArgumentError} When it is not one.
 */
export function checkInstance(
  value: unknown,
  // deno-lint-ignore no-explicit-any
  type: abstract new (...args: any[]) => unknown,
  name: string,
): void {
  let ok = false;
  try {
    ok = value instanceof type;
  } catch {
    ok = false;
  }
  if (!ok) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a ${type.name}, received ${
        describeValue(value)
      }`,
      { name, value, limit: type.name },
    );
  }
}

/** The constructor name of `value`, or "memory" (never throws). */
export function typeName(value: unknown): string {
  try {
    const name = (value as { constructor?: { name?: unknown } })?.constructor
      ?.name;
    return typeof name === "string" && name !== "" ? name : "memory";
  } catch {
    return "memory";
  }
}
