/**
 * The Node side of the cpu benchmark: `run.ts` bundles this file with
 * `deno bundle` and runs it with `node <bundle> <wasm file> <quick>`; it
 * prints the head-to-head rows (see `head_to_head.ts`) as JSON on stdout.
 *
 * @module
 */

import { readFileSync } from "node:fs";
import process from "node:process";
import { headToHead } from "./head_to_head.ts";
import { logUniformTrace } from "./trace.ts";

const [wasmPath, quickFlag] = process.argv.slice(2);
const quick = quickFlag === "quick";
const module = new WebAssembly.Module(readFileSync(wasmPath));
const trace = quick ? logUniformTrace(20_000, 300) : logUniformTrace(200_000);
const out = [false, true].map((view) => ({
  view,
  rows: headToHead(trace, module, view, quick ? 1 : 15),
}));
process.stdout.write(JSON.stringify({ version: process.version, out }));
