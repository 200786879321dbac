import { InvalidArgumentError } from "@allot/core";

/**
 * Checks that an options argument is an object (`null`, numbers and strings
 * are refused with a typed error rather than a `TypeError` on first read).
 *
 * @returns The options, unchanged.
 * @throws {InvalidArgumentError} When it is not an object.
 */
export function validateOptions<T>(options: T, name = "options"): T {
  if (typeof options !== "object" || options === null) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be an object, received ${
        typeof options === "string" ? JSON.stringify(options) : String(options)
      }`,
      { name, value: options },
    );
  }
  return options;
}
