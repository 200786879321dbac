/**
 * Test helper: reads one of the repository's recorded traces (`traces/`)
 * with the CLI's reader (gzip detected, the trace validated).
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { readTraceFile } from "./cli.ts";
import type { Trace } from "./trace_format.ts";

const root = new URL("../../traces/", import.meta.url);

/** Reads `traces/<name>` (e.g. `"tfjs-webgpu/kv-decode.jsonl.gz"`). */
export function readRecordedTrace(name: string): Promise<Trace> {
  return readTraceFile(fileURLToPath(new URL(name, root)));
}
