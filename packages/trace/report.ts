import { validateFlag, validateObject, validateOptionKeys } from "@allot/core";
import { memoryTimeline } from "./memory_timeline.ts";
import { parseTrace } from "./parse_trace.ts";
import { type ReplayOptions, replayTrace } from "./replay.ts";
import { reportHtml } from "./report_html.ts";
import type { Trace } from "./trace_format.ts";

/** Options of {@linkcode memoryReport}. */
export interface MemoryReportOptions extends ReplayOptions {
  /** Replay the trace through the policies for the what-if table (default true). */
  readonly replay?: boolean;
  /** Page title. */
  readonly title?: string;
}

/**
 * The whole HTML report of a trace (text or parsed): validates it, replays
 * it for the what-if table, and draws it.
 *
 * @example
 * ```ts
 * import { memoryReport } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const html = memoryReport([
 *   `{"format":"allot-trace","version":1,"source":"demo"}`,
 *   `{"t":0,"op":"create","id":0,"size":4096,"usage":128,"tag":"w"}`,
 *   `{"t":1,"op":"destroy","id":0}`,
 * ].join("\n"), { repeat: 1 });
 * assert.ok(html.startsWith("<!doctype html>"));
 * assert.ok(html.includes(`id="alloc-count">1<`));
 * ```
 */
export function memoryReport(
  trace: Trace | string,
  options: MemoryReportOptions = {},
): string {
  validateObject(options, "options");
  validateOptionKeys(options, [
    "replay",
    "title",
    "policies",
    "usage",
    "repeat",
  ], "memoryReport()");
  const t = typeof trace === "string" ? parseTrace(trace) : trace;
  const replay = validateFlag(options.replay, "replay", true);
  const whatIf = replay
    ? replayTrace(t, {
      policies: options.policies,
      usage: options.usage,
      repeat: options.repeat,
    })
    : undefined;
  return reportHtml(memoryTimeline(t), { whatIf, title: options.title });
}
