/**
 * The replay that `inlining.ts` bundles and runs under
 * `--trace-turbo-inlining`: one warm `CpuHeap` per trace replaying it 20
 * times, offsets only or with a view per allocation, on the benchmark's
 * log-uniform trace or on the slot traces of a JSON file. Runtime-neutral
 * (Deno and, bundled, Node).
 *
 * Run (after `deno bundle`): `node <bundle> offsets|view [traces.json]`.
 *
 * @module
 */

import { readFileSync } from "node:fs";
import process from "node:process";
import { CpuHeap } from "../mod.ts";
import { replayHeap } from "./head_to_head.ts";
import { logUniformTrace, type Trace } from "./trace.ts";

const [mode, tracesPath] = process.argv.slice(2);
const traces: Trace[] = tracesPath === undefined
  ? [logUniformTrace(200_000)]
  : (JSON.parse(readFileSync(tracesPath, "utf8")) as Trace[]).map((t) => ({
    ...t,
    kind: Uint8Array.from(t.kind),
    slot: Int32Array.from(t.slot),
    byteLength: Int32Array.from(t.byteLength),
  }));
for (const trace of traces) {
  const heap = new CpuHeap(1024 * 2 ** 20);
  for (let i = 0; i < 20; i++) replayHeap(heap, trace, mode === "view");
}
