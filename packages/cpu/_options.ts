import { describeValue, InvalidArgumentError } from "@allot/core";

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

/**
 * Checks that the named options are `undefined` or a boolean (a `1` or a
 * `"false"` would otherwise be read as truthy by one option and as off by
 * another).
 *
 * @param options Options, already checked to be an object.
 * @param names The boolean options.
 * @throws {InvalidArgumentError} When one is neither.
 */
export function validateFlags<T extends object>(
  options: T,
  ...names: (keyof T & string)[]
): void {
  for (const name of names) {
    const value = options[name];
    if (value !== undefined && typeof value !== "boolean") {
      throw new InvalidArgumentError(
        `Invalid ${name}: must be a boolean, received ${describeValue(value)}`,
        { name, value },
      );
    }
  }
}
