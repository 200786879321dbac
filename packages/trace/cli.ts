/**
 * The `mem` command: validate, replay and draw allot traces.
 *
 * ```sh
 * deno task mem report trace.jsonl[.gz] -o report.html [--svg timeline.svg] [--usage storage] [--no-replay]
 * deno task mem replay trace.jsonl[.gz] [--usage storage] [--json]
 * deno task mem validate trace.jsonl[.gz]
 * ```
 *
 * On Node (from the npm package): `node node_modules/@allot/trace/cli.js report ...`.
 *
 * @module
 */
import { readFile, writeFile } from "node:fs/promises";
import { gunzipSync } from "node:zlib";
import process from "node:process";
import { memoryTimeline } from "./memory_timeline.ts";
import { parseTrace } from "./parse_trace.ts";
import { replayTrace } from "./replay.ts";
import { formatReplay } from "./replay_table.ts";
import { reportHtml } from "./report_html.ts";
import { timelineSvg } from "./timeline_svg.ts";
import type { Trace } from "./trace_format.ts";

const USAGE = `usage:
  mem report TRACE -o OUT.html [--svg OUT.svg] [--usage all|storage] [--no-replay]
  mem replay TRACE [--usage all|storage] [--json]
  mem validate TRACE
TRACE is an allot trace (JSON Lines, optionally gzip-compressed).`;

/** Reads a trace file (gzip detected by its magic bytes) and validates it. */
export async function readTraceFile(path: string): Promise<Trace> {
  let bytes: Uint8Array = await readFile(path);
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = gunzipSync(bytes);
  return parseTrace(new TextDecoder().decode(bytes));
}

/** Runs the command with `args`; returns the exit code. */
export async function main(args: readonly string[]): Promise<number> {
  const [cmd, ...rest] = args;
  const pos: string[] = [];
  const opt: Record<string, string | boolean> = {};
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    if (a === "-o" || a === "--out" || a === "--svg" || a === "--usage") {
      if (i + 1 >= rest.length) {
        console.error(`${a} needs a value\n${USAGE}`);
        return 2;
      }
      opt[a === "-o" ? "--out" : a] = rest[++i];
    } else if (a.startsWith("--")) opt[a] = true;
    else pos.push(a);
  }
  const usage = (opt["--usage"] ?? "all") as string;
  if (!cmd || pos.length !== 1 || (usage !== "all" && usage !== "storage")) {
    console.error(USAGE);
    return 2;
  }
  let trace: Trace;
  try {
    trace = await readTraceFile(pos[0]);
  } catch (err) {
    console.error(`${pos[0]}: ${(err as Error).message}`);
    return 1;
  }
  if (cmd === "validate") {
    console.log(
      `${
        pos[0]
      }: valid, version ${trace.header.version}, ${trace.events.length} events`,
    );
    return 0;
  }
  if (cmd === "replay") {
    const r = replayTrace(trace, { usage });
    console.log(opt["--json"] ? JSON.stringify(r, null, 2) : formatReplay(r));
    return 0;
  }
  if (cmd === "report") {
    const out = opt["--out"];
    if (typeof out !== "string") {
      console.error(`report needs -o OUT.html\n${USAGE}`);
      return 2;
    }
    const t0 = performance.now();
    const tl = memoryTimeline(trace);
    const whatIf = opt["--no-replay"]
      ? undefined
      : replayTrace(trace, { usage });
    const html = reportHtml(tl, { whatIf });
    await writeFile(out, html);
    if (typeof opt["--svg"] === "string") {
      await writeFile(opt["--svg"], timelineSvg(tl));
    }
    console.log(
      `${out}: ${
        (html.length / 1024).toFixed(0)
      } KiB, ${trace.events.length} events, ${
        ((performance.now() - t0) / 1000).toFixed(2)
      } s`,
    );
    if (whatIf) console.log(formatReplay(whatIf));
    return 0;
  }
  console.error(USAGE);
  return 2;
}

if (
  import.meta.main ||
  (globalThis as { process?: { argv?: string[] } }).process?.argv?.[1]
    ?.endsWith("cli.js")
) {
  process.exitCode = await main(process.argv.slice(2));
}
