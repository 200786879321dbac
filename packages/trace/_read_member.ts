/**
 * `_read`: a collaborator's member, read once, for the recorders.
 *
 * @module
 */

import { InvalidArgumentError } from "@allot/core";

/**
 * `obj[key]`, read once; a read that throws (a proxy that traps) is refused
 * with a typed error naming `what` (`a device`) and `key`.
 */
export function _read(obj: object, key: string, what: string): unknown {
  try {
    return (obj as Record<string, unknown>)[key];
  } catch (error) {
    throw new InvalidArgumentError(
      `Cannot record ${what}: its ${key} cannot be read (${
        error instanceof Error ? error.message : "a non-error was thrown"
      })`,
      { name: key, value: obj },
      { cause: error },
    );
  }
}
