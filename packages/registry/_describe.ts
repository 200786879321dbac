/**
 * Reading a caller's options without running code that throws halfway
 * through a refused call; values are described with `@allot/core`'s
 * `describeValue` (re-exported here), which runs none of their code.
 *
 * @module
 */

import { describeValue } from "@allot/core";

export { describeValue };

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
