import type { FrameKind, StackFrame } from "./trace_format.ts";

/** Options of {@linkcode captureCallStack}. */
export interface CaptureOptions {
  /** How many frames V8 keeps while capturing (default 64; V8's own default is 10). */
  readonly depth?: number;
  /** Frames to drop from the top (the recorder's own), after capture. */
  readonly skip?: number;
  /** Classifies a frame; the default marks allot's and the runtime's frames. */
  readonly classify?: (at: string) => FrameKind;
}

const RUNTIME =
  /(node_modules|registry\.npmjs\.org|\/npm\/|ext:|node:|deno:|native|<anonymous>|chrome-extension:)/;
const ALLOT =
  /(\/packages\/(?:core|caching|watermark|webgpu|storage|registry|cpu|buddy|sparse|trace)\/|@allot\/)/;

/** The default classification: allot's packages, then runtimes and libraries, then the user. */
export function classifyFrame(at: string): FrameKind {
  if (ALLOT.test(at)) return "allot";
  if (RUNTIME.test(at)) return "runtime";
  return "user";
}

/**
 * Captures the caller's stack with up to `depth` frames (raising
 * `Error.stackTraceLimit` for the capture and restoring it), marks each frame
 * `user`, `allot` or `runtime`, and orders them user-first (each group in
 * call order, innermost first).
 */
export function captureCallStack(options: CaptureOptions = {}): StackFrame[] {
  const depth = options.depth ?? 64;
  const skip = (options.skip ?? 0) + 1;
  const classify = options.classify ?? classifyFrame;
  const E = Error as { stackTraceLimit?: number };
  const saved = E.stackTraceLimit;
  E.stackTraceLimit = depth + skip;
  let stack: string | undefined;
  try {
    stack = new Error().stack;
  } finally {
    E.stackTraceLimit = saved;
  }
  return orderFrames(parseStackText(stack ?? "").slice(skip), classify);
}

/** Splits V8's `Error.stack` text into frame strings (without `at `). */
export function parseStackText(stack: string): string[] {
  const out: string[] = [];
  for (const line of stack.split("\n")) {
    const m = /^\s*at (.*)$/.exec(line);
    if (m) out.push(m[1]);
  }
  return out;
}

function orderFrames(
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
