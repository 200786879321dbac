/**
 * The Node side of the cpu benchmark: `run.ts` bundles this file with
 * `deno bundle` and runs it with `node <bundle> <wasm file> <quick>`; it
 * prints the head-to-head rows (see `head_to_head.ts`) as JSON on stdout.
 * With a third argument, a JSON file of slot traces (`real_traces.ts` writes
 * it), it replays those instead (offsets only) and prints their rows.
 *
 * @module
 */

import { readFileSync } from "node:fs";
import process from "node:process";
import { headToHead } from "./head_to_head.ts";
import { logUniformTrace } from "./trace.ts";
import { tracesFromJson } from "./trace_json.ts";

const [wasmPath, quickFlag, tracesPath] = process.argv.slice(2);
const quick = quickFlag === "quick";
const module = new WebAssembly.Module(readFileSync(wasmPath));
if (tracesPath !== undefined) {
  const traces = tracesFromJson(readFileSync(tracesPath, "utf8"));
  const out = traces.map((trace) => ({
    name: trace.name,
    ops: trace.kind.length,
    rows: headToHead(trace, module, false, quick ? 1 : 15),
  }));
  process.stdout.write(JSON.stringify({ version: process.version, out }));
} else {
  const trace = quick ? logUniformTrace(20_000, 300) : logUniformTrace(200_000);
  const out = [false, true].map((view) => ({
    view,
    rows: headToHead(trace, module, view, quick ? 1 : 15),
  }));
  process.stdout.write(JSON.stringify({ version: process.version, out }));
}
