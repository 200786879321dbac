/**
 * {@linkcode validateOptionKeys}: allot's rule for option names. An options
 * object may hold only the keys its constructor reads: a misspelt key (such
 * as `maxSplitSize` for `maxSplitByteLength` in an older release, or
 * `capacity` for `capacityBytes`) would otherwise do nothing, silently.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";

/**
 * Refuses an options object that holds a key the caller does not read. Only
 * own enumerable string keys are looked at (`Object.keys`): no getter runs,
 * and `undefined` values count (`{ typo: undefined }` is refused too).
 *
 * @param options The options object (anything else is left to the caller's
 * own check).
 * @param accepted The keys the caller reads.
 * @param where What takes the options, for the message (`"CachingAllocator"`).
 * @param hints For keys a caller is likely to guess wrongly, where the
 * setting goes instead; added to the refusal's message.
 * @throws {InvalidArgumentError} Naming the first unknown key and the
 * accepted ones (its `limit`), or when the keys cannot be read (a proxy
 * whose `ownKeys` throws; its error is the `cause`).
 *
 * @example
 * ```ts
 * import { InvalidArgumentError, validateOptionKeys } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const keys = ["capacityBytes", "strict"] as const;
 * validateOptionKeys({ capacityBytes: 64 }, keys, "Pool");
 * assert.throws(
 *   () => validateOptionKeys({ capacity: 64 }, keys, "Pool"),
 *   InvalidArgumentError,
 * );
 * assert.throws(
 *   () => validateOptionKeys({ size: 64 }, keys, "Pool", {
 *     size: "the capacity is capacityBytes",
 *   }),
 *   /capacityBytes/,
 * );
 * ```
 */
export function validateOptionKeys(
  options: object,
  accepted: readonly string[],
  where: string,
  hints?: Readonly<Record<string, string>>,
): void {
  // (not an object: the caller's own check refuses it)
  if (typeof options !== "object" || options === null) return;
  let unknown: string | undefined;
  try {
    // a for-in, not Object.keys: no array on the common path (per-call
    // option bags); an inherited key is not the caller's, so it is skipped
    for (const key in options) {
      if (!accepted.includes(key) && Object.hasOwn(options, key)) {
        unknown = key;
        break;
      }
    }
  } catch (error) {
    // a proxy whose ownKeys trap throws, a revoked proxy: its raw error
    // escaped every option bag of every package
    throw new InvalidArgumentError(
      `Invalid options of ${where}: its keys cannot be read (${
        error instanceof Error ? error.message : "a non-error was thrown"
      })`,
      { name: "options", value: options, limit: [...accepted] },
      { cause: error },
    );
  }
  if (unknown !== undefined) {
    throw new InvalidArgumentError(
      `Unknown option ${JSON.stringify(unknown)} of ${where}${
        hints !== undefined && Object.hasOwn(hints, unknown)
          ? ` (${hints[unknown]})`
          : ""
      }: the options it reads are ${accepted.join(", ")}`,
      { name: unknown, value: unknown, limit: [...accepted] },
    );
  }
}
