import {
  captureCallStack,
  describeValue,
  InvalidArgumentError,
  isAllotFrame,
  optionOr,
  validateInteger,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import { isFrameKind } from "./parse_trace.ts";

function checkString(value: unknown, name: string): void {
  if (typeof value !== "string") {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a string, received ${describeValue(value)}`,
      { name, value, limit: "a string" },
    );
  }
}

function checkClassify(
  classify: unknown,
): (at: string) => FrameKind {
  if (typeof classify !== "function") {
    throw new InvalidArgumentError(
      `Invalid classify: must be a function, received ${
        describeValue(classify)
      }`,
      { name: "classify", value: classify, limit: "a function" },
    );
  }
  // a classifier that answers something else than a kind is refused when it
  // does, so no frame with a bad kind reaches a trace
  return (at) => {
    const kind = classify(at);
    if (!isFrameKind(kind)) {
      throw new InvalidArgumentError(
        `Invalid classify: it returned ${
          describeValue(kind)
        } for a frame, not "user", "allot" or "runtime"`,
        { name: "classify", value: kind, limit: "a FrameKind" },
      );
    }
    return kind;
  };
}
import type { FrameKind, StackFrame } from "./trace_format.ts";

/** Options of {@linkcode captureStack}. */
export interface StackCaptureOptions {
  /** Frames kept at most (default 64; V8 keeps 10 unless told). */
  readonly depth?: number;
  /** Classifies a frame; the default is {@linkcode classifyFrame}. */
  readonly classify?: (at: string) => FrameKind;
}

const RUNTIME =
  /(node_modules|registry\.npmjs\.org|\/npm\/|ext:|node:|deno:|native|<anonymous>|chrome-extension:)/;

/**
 * Where a frame comes from: `allot` for allot's packages (`@allot/core`'s
 * `isAllotFrame`), `runtime` for libraries, runtimes and the host (npm
 * packages, `ext:`, `node:`), `user` for the rest.
 *
 * @example
 * ```ts
 * import { classifyFrame } from "@allot/trace";
 * import assert from "node:assert/strict";
 * assert.equal(classifyFrame("main (file:///app/train.ts:3:5)"), "user");
 * assert.equal(classifyFrame("f (node:internal/timers:1:1)"), "runtime");
 * ```
 */
export function classifyFrame(at: string): FrameKind {
  checkString(at, "at");
  if (isAllotFrame(at)) return "allot";
  if (RUNTIME.test(at)) return "runtime";
  return "user";
}

/**
 * Captures the caller's stack with `@allot/core`'s `captureCallStack` (up to
 * `depth` frames, V8's limit raised for the capture and restored), marks
 * each frame and orders them user-first (each group innermost first).
 * `skip` drops that many of the caller's own frames.
 *
 * @example
 * ```ts
 * import { captureStack } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const frames = captureStack({ depth: 8 });
 * assert.ok(frames.length <= 8);
 * for (const f of frames) assert.ok(["user", "allot", "runtime"].includes(f.kind));
 * ```
 */
export function captureStack(
  options: StackCaptureOptions = {},
  skip = 0,
): StackFrame[] {
  validateObject(options, "options");
  validateOptionKeys(options, ["depth", "classify"], "captureStack()");
  const depth = optionOr(options.depth, 64);
  validateInteger(depth, 0, 10_000, "depth");
  validateInteger(skip, 0, 10_000, "skip");
  const classify = checkClassify(options.classify ?? classifyFrame);
  const frames = captureCallStack({ maxFrames: depth, skipFrames: skip + 1 });
  return userFirst(frames.map((f) => f.text), classify);
}

/**
 * Reads stack text into frames, user-first: V8's `Error.stack` lines
 * (`    at f (file:1:2)`) or `@allot/core`'s `formatCallStack` lines (one frame
 * a line, allot's prefixed `[allot] `).
 *
 * @example
 * ```ts
 * import { parseStack } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const frames = parseStack([
 *   "Error",
 *   "    at f (node:internal/timers:1:1)",
 *   "    at main (file:///app/train.ts:3:5)",
 * ].join("\n"));
 * assert.deepEqual(frames.map((f) => f.kind), ["user", "runtime"]);
 * assert.equal(frames[0].at, "main (file:///app/train.ts:3:5)");
 * ```
 */
export function parseStack(
  text: string,
  classify: (at: string) => FrameKind = classifyFrame,
): StackFrame[] {
  checkString(text, "text");
  const kindOf = checkClassify(classify);
  const frames: StackFrame[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line === "Error" || line.startsWith("Error:")) continue;
    if (line.startsWith("[allot] ")) {
      frames.push({ at: line.slice(8), kind: "allot" });
    } else {
      const at = line.startsWith("at ") ? line.slice(3) : line;
      frames.push({ at, kind: kindOf(at) });
    }
  }
  const user = frames.filter((f) => f.kind === "user");
  return user.concat(frames.filter((f) => f.kind !== "user"));
}

function userFirst(
  frames: readonly string[],
  classify: (at: string) => FrameKind,
): StackFrame[] {
  const user: StackFrame[] = [];
  const rest: StackFrame[] = [];
  for (const at of frames) {
    const kind = classify(at);
    (kind === "user" ? user : rest).push({ at, kind });
  }
  return user.concat(rest);
}
