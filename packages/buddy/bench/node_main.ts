/**
 * The Node side of the buddy benchmark: `run.ts` bundles this file with
 * `deno bundle` and runs it with `node <bundle> <quick|full> [traces.json]`;
 * it prints, as JSON on stdout, the best seconds per row (see
 * `head_to_head.ts`) of each trace the Deno side runs: the log-uniform and
 * the tensor-shaped one, then the real traces of `traces.json` when given
 * (slot traces written by `run.ts`).
 *
 * @module
 */

import { readFileSync } from "node:fs";
import process from "node:process";
import { measure } from "./head_to_head.ts";
import { benchTraces } from "../../cpu/bench/trace.ts";
import { tracesFromJson } from "../../cpu/bench/trace_json.ts";

const quick = process.argv[2] === "quick";
const real = process.argv[3] === undefined
  ? []
  : tracesFromJson(readFileSync(process.argv[3], "utf8"));
const traces = [...benchTraces(quick), ...real].map((trace) => ({
  name: trace.name,
  ops: trace.kind.length,
  seconds: Object.fromEntries(measure(trace, quick ? 1 : 9)),
}));
process.stdout.write(JSON.stringify({ version: process.version, traces }));
