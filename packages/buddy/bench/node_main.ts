/**
 * The Node side of the buddy benchmark: `run.ts` bundles this file with
 * `deno bundle` and runs it with `node <bundle> <quick|full>`; it prints,
 * as JSON on stdout, the best seconds per row (see `head_to_head.ts`) of
 * each trace the Deno side runs: the log-uniform and the tensor-shaped one.
 *
 * @module
 */

import process from "node:process";
import { measure } from "./head_to_head.ts";
import { benchTraces } from "./traces.ts";

const quick = process.argv[2] === "quick";
const traces = benchTraces(quick).map((trace) => ({
  name: trace.name,
  ops: trace.kind.length,
  seconds: Object.fromEntries(measure(trace, quick ? 1 : 9)),
}));
process.stdout.write(JSON.stringify({ version: process.version, traces }));
