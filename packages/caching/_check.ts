import { describeValue, InvalidArgumentError, type Stream } from "@allot/core";

/**
 * Throws {@linkcode InvalidArgumentError} unless `value` is a non-null object
 * (a segment source, an options bag), before any field of it is read.
 *
 * @param value The value to check.
 * @param name Name of the argument, used in the message.
 */
export function checkObject(value: unknown, name: string): void {
  if (typeof value !== "object" || value === null) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be an object, received ${describeValue(value)}`,
      { name, value, limit: "object" },
    );
  }
}

/**
 * Throws {@linkcode InvalidArgumentError} unless `stream` is a stream: an
 * object with a safe-integer `id` and a `fence()` method.
 *
 * @param stream The value to check.
 * @returns The stream.
 */
export function checkStream(stream: unknown): Stream {
  const s = stream as Stream;
  if (
    typeof stream !== "object" || stream === null ||
    !Number.isSafeInteger(s.id) || typeof s.fence !== "function"
  ) {
    throw new InvalidArgumentError(
      `Invalid stream: must have an integer id and a fence() method, received ${
        describeValue(stream)
      }`,
      { name: "stream", value: stream },
    );
  }
  return s;
}
