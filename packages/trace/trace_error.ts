import { AllotError } from "@allot/core";

/**
 * A trace that does not follow the format: names the line and what is wrong.
 *
 * @example
 * ```ts
 * import { parseTrace, TraceFormatError } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const text = `{"format":"allot-trace","version":1}\nnot json`;
 * assert.throws(
 *   () => parseTrace(text),
 *   (e) => e instanceof TraceFormatError && e.line === 2,
 * );
 * ```
 */
export class TraceFormatError extends AllotError {
  /** The 1-based line number of the offending line (0 when the whole text is at fault). */
  readonly line: number;
  /** Makes the error for 1-based `line` (0: the whole text) and what is wrong with it. */
  constructor(line: number, problem: string) {
    super(line > 0 ? `trace line ${line}: ${problem}` : `trace: ${problem}`);
    this.line = line;
  }
}
