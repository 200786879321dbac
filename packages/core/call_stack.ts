/**
 * Call stacks that show the caller's code first: captured with a raised
 * `Error.stackTraceLimit` (V8 keeps 10 frames by default, and an
 * allocator's own frames fill them), with allot's frames marked.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { validateOptionKeys } from "./option_keys.ts";
import {
  describeValue,
  optionOr,
  validateInteger,
  validateObject,
} from "./validate.ts";

/** One frame of a captured stack. */
export interface StackFrame {
  /** The frame as the runtime prints it, without the leading `at `. */
  text: string;
  /** Whether the frame is allot's own code (a file of an `@allot/` package). */
  allot: boolean;
}

/** Options of {@linkcode captureCallStack}. */
export interface CaptureCallStackOptions {
  /**
   * Frames to capture at most (the stack limit is raised to this, and
   * restored, for the capture).
   *
   * @default {64}
   */
  maxFrames?: number;
  /**
   * Frames to drop from the top, beyond `captureCallStack`'s own.
   *
   * @default {0}
   */
  skipFrames?: number;
}

// The folder holding allot's packages when run from source
// (`.../packages/`), and the package scope when installed.
const PACKAGES_ROOT = new URL("../", import.meta.url).href;

/**
 * Whether a stack frame's text points into allot's own code.
 *
 * @param frame A frame, such as `allocate (file:///x/packages/caching/caching_allocator.ts:10:5)`.
 * @returns `true` for a frame of an `@allot/` package.
 *
 * @example
 * ```ts
 * import { isAllotFrame } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(isAllotFrame("f (file:///app/main.ts:1:1)"), false);
 * assert.equal(isAllotFrame("f (file:///app/node_modules/@allot/core/x.js:1:1)"), true);
 * ```
 */
export function isAllotFrame(frame: string): boolean {
  if (typeof frame !== "string") {
    throw new InvalidArgumentError(
      `Invalid frame: must be a string, received ${describeValue(frame)}`,
      { name: "frame", value: frame, limit: "a string" },
    );
  }
  return frame.includes(PACKAGES_ROOT) || frame.includes("/@allot/") ||
    frame.includes("jsr:@allot/") || frame.includes("/@allot+");
}

/**
 * Captures the current call stack (without this function's frame), with
 * allot's frames marked.
 *
 * @param options How many frames to keep and skip.
 * @returns The frames, innermost first.
 * @throws {InvalidArgumentError} When `maxFrames` or `skipFrames` is not an
 * integer in [0, 10000].
 *
 * @example
 * ```ts
 * import { captureCallStack } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * function userCode() {
 *   return captureCallStack();
 * }
 * const frames = userCode();
 * assert.match(frames[0].text, /userCode/);
 * assert.ok(frames.length > 1); // the callers of userCode too
 * ```
 */
export function captureCallStack(
  options: CaptureCallStackOptions = {},
): StackFrame[] {
  validateObject(options, "options");
  validateOptionKeys(
    options,
    ["maxFrames", "skipFrames"],
    "captureCallStack()",
  );
  const max = validateInteger(
    optionOr(options.maxFrames, 64),
    0,
    10_000,
    "maxFrames",
  );
  const skip = validateInteger(
    optionOr(options.skipFrames, 0),
    0,
    10_000,
    "skipFrames",
  );
  if (max === 0) return [];
  const ErrorCtor = Error as { stackTraceLimit?: number };
  const limit = ErrorCtor.stackTraceLimit;
  let stack: string;
  try {
    ErrorCtor.stackTraceLimit = max + skip + 1;
    stack = new Error().stack ?? "";
  } finally {
    ErrorCtor.stackTraceLimit = limit;
  }
  const frames: StackFrame[] = [];
  const lines = stack.split("\n");
  let seen = 0;
  for (const line of lines) {
    const trimmed = line.trim();
    // V8 frames start with "at "; SpiderMonkey and JSC give "fn@url:l:c".
    let text: string;
    if (trimmed.startsWith("at ")) text = trimmed.slice(3);
    else if (trimmed.includes("@") && !trimmed.startsWith("Error")) {
      text = trimmed;
    } else continue;
    if (seen++ < skip + 1) continue; // this function's frame, then `skip`
    frames.push({ text, allot: isAllotFrame(text) });
    if (frames.length >= max) break;
  }
  return frames;
}

/**
 * Prints frames with the caller's first: every frame outside allot in
 * order, then allot's own frames marked `[allot]`.
 *
 * @param frames Frames from {@linkcode captureCallStack}.
 * @returns One frame per line.
 *
 * @example
 * ```ts
 * import { formatCallStack } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const text = formatCallStack([
 *   { text: "alloc (file:///x/node_modules/@allot/caching/a.js:1:1)", allot: true },
 *   { text: "main (file:///app/main.ts:3:1)", allot: false },
 * ]);
 * assert.equal(text.split("\n")[0], "main (file:///app/main.ts:3:1)");
 * assert.match(text.split("\n")[1], /^\[allot\] alloc/);
 * ```
 */
export function formatCallStack(frames: readonly StackFrame[]): string {
  if (!Array.isArray(frames)) {
    throw new InvalidArgumentError(
      `Cannot format a call stack: frames must be an array, received ${
        describeValue(frames)
      }`,
      { name: "frames", value: frames, limit: "an array" },
    );
  }
  for (let i = 0; i < frames.length; i++) {
    const f = frames[i] as unknown as Record<string, unknown> | null;
    if (
      f === null || typeof f !== "object" || typeof f.text !== "string" ||
      typeof f.allot !== "boolean"
    ) {
      throw new InvalidArgumentError(
        `Cannot format a call stack: frames[${i}] must be { text: string, allot: boolean }, received ${
          describeValue(f)
        }`,
        { name: `frames[${i}]`, value: f, limit: "StackFrame" },
      );
    }
  }
  const lines: string[] = [];
  for (const f of frames) if (!f.allot) lines.push(f.text);
  for (const f of frames) if (f.allot) lines.push(`[allot] ${f.text}`);
  return lines.join("\n");
}
