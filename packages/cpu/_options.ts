import { validateFlag, validateObject } from "@allot/core";

/**
 * Checks that an options argument is an object (`null`, numbers and strings
 * are refused with a typed error rather than a `TypeError` on first read).
 *
 * @returns The options, unchanged.
 * @throws {InvalidArgumentError} When it is not an object.
 */
export function validateOptions<T>(options: T, name = "options"): T {
  validateObject(options, name);
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
  for (const name of names) validateFlag(options[name], name, false);
}
