/**
 * Describing a value a caller passed, for error messages, without running
 * any of its code (no `toString`, no getters, no proxy traps).
 *
 * @module
 */

/**
 * A short description of any value: numbers and strings as written, a
 * bigint with its `n`, symbols by description, objects by constructor name
 * when that can be read safely.
 *
 * @param value Any value, possibly hostile.
 * @returns The description.
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case "bigint":
      return `${value}n (a bigint)`;
    case "string":
      return JSON.stringify(value);
    case "symbol":
      return value.toString();
    case "object":
    case "function": {
      if (value === null) return "null";
      try {
        const name = (value as object).constructor?.name;
        return typeof name === "string" && name !== ""
          ? `a ${name}`
          : "an object";
      } catch {
        return "an object whose reads throw";
      }
    }
    default:
      return String(value);
  }
}

/**
 * Reads an options object's fields into a plain record, turning a throwing
 * getter or proxy into `undefined` plus the error, so callers can refuse
 * with a typed error before changing anything.
 *
 * @param options The caller's options (an object, `undefined`, or junk).
 * @param keys The fields to read.
 * @returns The values, or the reason they could not be read.
 */
export function readOptions<K extends string>(
  options: unknown,
  keys: readonly K[],
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
    for (const key of keys) values[key] = (options as Record<K, unknown>)[key];
  } catch (error) {
    return {
      values,
      problem: `reading its options threw ${describeValue(error)}: ${
        (error as Error)?.message
      }`,
    };
  }
  return { values };
}
