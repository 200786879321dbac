/**
 * The Node side of the buddy benchmark: `run.ts` bundles this file with
 * `deno bundle` and runs it with `node <bundle> <quick|full>`; it prints the
 * best seconds per row of the log-uniform trace (see `head_to_head.ts`) as
 * JSON on stdout.
 *
 * @module
 */

import process from "node:process";
import { measure } from "./head_to_head.ts";
import { logUniformTrace } from "../../cpu/bench/trace.ts";

const quick = process.argv[2] === "quick";
const trace = quick ? logUniformTrace(20_000, 300) : logUniformTrace(200_000);
const seconds = measure(trace, quick ? 1 : 9);
process.stdout.write(
  JSON.stringify({
    version: process.version,
    ops: trace.kind.length,
    seconds: Object.fromEntries(seconds),
  }),
);
