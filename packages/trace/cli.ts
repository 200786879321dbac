/**
 * The `mem` command: validate, replay and draw allot traces.
 *
 * ```sh
 * deno task mem report trace.jsonl[.gz] -o report.html [--svg timeline.svg] [--usage storage] [--no-replay]
 * deno task mem replay trace.jsonl[.gz] [--usage storage] [--json]
 * deno task mem validate trace.jsonl[.gz]
 * ```
 *
 * On Node (from the npm package, its bin): `npx allot-trace report ...`.
 * Importing this module does not run the command (only starting it does).
 *
 * @module
 */
import { realpathSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import process from "node:process";
import { memoryTimeline } from "./memory_timeline.ts";
import { parseTrace } from "./parse_trace.ts";
import { TraceFormatError } from "./trace_error.ts";
import { describeValue, InvalidArgumentError } from "@allot/core";
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

/**
 * Reads a trace file (gzip detected by its magic bytes) and validates it.
 *
 * @throws {InvalidArgumentError} When `path` is not a string or a URL (a
 * number would be read as a file descriptor).
 * @throws {TraceFormatError} When the file is not a valid trace (a gzip
 * stream that does not inflate included).
 *
 * @example
 * ```ts
 * import { readTraceFile } from "@allot/trace/cli";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile({ suffix: ".jsonl" });
 * await Deno.writeTextFile(path, [
 *   `{"format":"allot-trace","version":1}`,
 *   `{"t":0,"op":"create","id":0,"size":256,"usage":128}`,
 * ].join("\n"));
 * const trace = await readTraceFile(path);
 * assert.equal(trace.events.length, 1);
 * await Deno.remove(path);
 * ```
 */
export async function readTraceFile(path: string | URL): Promise<Trace> {
  if (typeof path !== "string" && !(path instanceof URL)) {
    throw new InvalidArgumentError(
      `Cannot read a trace file: path must be a string or a URL, received ${
        describeValue(path)
      }`,
      { name: "path", value: path, limit: "a string or a URL" },
    );
  }
  let bytes: Uint8Array = await readFile(path);
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
    try {
      bytes = gunzipSync(bytes);
    } catch (err) {
      throw new TraceFormatError(
        0,
        `a gzip stream that does not inflate (${
          (err as Error)?.message
        }); a truncated download?`,
      );
    }
  }
  return parseTrace(new TextDecoder().decode(bytes));
}

/** The options each command takes (`-o` is `--out`). */
const OPTIONS: Readonly<Record<string, readonly string[]>> = {
  report: ["--out", "--svg", "--usage", "--no-replay"],
  replay: ["--usage", "--json"],
  validate: [],
};
const VALUED = new Set(["--out", "--svg", "--usage"]);

/**
 * Runs the command with `args`; returns the exit code: 0 done, 1 the trace
 * or an output file failed, 2 a usage error (unknown command or option, a
 * missing value). Never throws.
 *
 * @example
 * ```ts
 * import { main } from "@allot/trace/cli";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile({ suffix: ".jsonl" });
 * await Deno.writeTextFile(path, `{"format":"allot-trace","version":1}\n`);
 * assert.equal(await main(["validate", path]), 0);
 * assert.equal(await main(["frobnicate"]), 2); // a usage error, never a throw
 * await Deno.remove(path);
 * ```
 */
export async function main(args: readonly string[]): Promise<number> {
  if (!Array.isArray(args) || args.some((a) => typeof a !== "string")) {
    console.error(USAGE);
    return 2;
  }
  const [cmd, ...rest] = args;
  if (cmd === "--help" || cmd === "-h" || cmd === "help") {
    console.log(USAGE);
    return 0;
  }
  const allowed = Object.hasOwn(OPTIONS, cmd ?? "") ? OPTIONS[cmd] : undefined;
  if (allowed === undefined) {
    console.error(
      `${
        cmd === undefined ? "no command" : `unknown command ${cmd}`
      }\n${USAGE}`,
    );
    return 2;
  }
  const pos: string[] = [];
  const opt: Record<string, string | boolean> = {};
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    const name = a === "-o" ? "--out" : a;
    if (name.startsWith("-") && name !== "-") {
      if (!allowed.includes(name)) {
        console.error(`${cmd} does not take the option ${a}\n${USAGE}`);
        return 2;
      }
      if (VALUED.has(name)) {
        if (i + 1 >= rest.length) {
          console.error(`${a} needs a value\n${USAGE}`);
          return 2;
        }
        opt[name] = rest[++i];
      } else opt[name] = true;
    } else pos.push(a);
  }
  const usage = (opt["--usage"] ?? "all") as string;
  if (pos.length !== 1 || (usage !== "all" && usage !== "storage")) {
    console.error(USAGE);
    return 2;
  }
  const out = opt["--out"];
  if (cmd === "report" && typeof out !== "string") {
    console.error(`report needs -o OUT.html\n${USAGE}`);
    return 2;
  }
  let trace: Trace;
  try {
    trace = await readTraceFile(pos[0]);
  } catch (err) {
    console.error(`${pos[0]}: ${(err as Error)?.message ?? err}`);
    return 1;
  }
  try {
    return await run(cmd, trace, pos[0], opt, usage);
  } catch (err) {
    console.error(`${cmd} ${pos[0]}: ${(err as Error)?.message ?? err}`);
    return 1;
  }
}

async function run(
  cmd: string,
  trace: Trace,
  path: string,
  opt: Record<string, string | boolean>,
  usage: "all" | "storage",
): Promise<number> {
  if (cmd === "validate") {
    console.log(
      `${path}: valid, version ${trace.header.version}, ${trace.events.length} events`,
    );
    return 0;
  }
  if (cmd === "replay") {
    const r = replayTrace(trace, { usage });
    console.log(opt["--json"] ? JSON.stringify(r, null, 2) : formatReplay(r));
    return 0;
  }
  const out = opt["--out"] as string;
  const t0 = performance.now();
  const tl = memoryTimeline(trace);
  const whatIf = opt["--no-replay"] ? undefined : replayTrace(trace, { usage });
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

/**
 * Whether this module is the program: Deno's `import.meta.main`, or on Node
 * the script Node was started with is this very file (through any symlink,
 * as `npx` and `node_modules/.bin` start it). Not any script whose name ends
 * in `cli.js`: a user's own `cli.js` that imports {@linkcode main} must not
 * start the command with its own arguments. On Deno `import.meta.main` alone
 * decides: under `deno test --doc` of this file `argv[1]` names it although
 * the test runner is the program.
 */
function _isMain(): boolean {
  if (import.meta.main) return true;
  if ("Deno" in globalThis) return false;
  const entry = process.argv[1];
  if (typeof entry !== "string" || !import.meta.url.startsWith("file:")) {
    return false;
  }
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (_isMain()) {
  process.exitCode = await main(process.argv.slice(2));
}
