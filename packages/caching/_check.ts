import { describeValue, InvalidArgumentError, type Stream } from "@allot/core";

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
