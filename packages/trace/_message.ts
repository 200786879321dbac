/**
 * Internal: the text of whatever a wrapped call threw (an `Error`, a string,
 * `null`, an object whose `message` getter throws), for error events and
 * replay rows; never throws itself.
 *
 * @module
 */

import { describeValue } from "@allot/core";

/** The message of `err`, or a description of it. */
export function _messageOf(err: unknown): string {
  try {
    const message = (err as Error)?.message;
    return typeof message === "string" ? message : describeValue(err);
  } catch {
    return describeValue(err);
  }
}
