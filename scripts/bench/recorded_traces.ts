/**
 * The recorded real traces (`traces/<runtime>/<name>.jsonl.gz`) that the trace
 * benches replay: one listing for every bench.
 *
 * @module
 */

import { parseTrace, type Trace } from "@allot/trace";

/** The repository's `traces/` folder. */
export const TRACES_DIR: URL = new URL("../../traces/", import.meta.url);

/**
 * The recorded traces whose path contains `only`, sorted.
 *
 * @param only A substring of the path (`""` for all).
 * @returns Paths relative to {@linkcode TRACES_DIR} (`tfjs-webgpu/cnn-training.jsonl.gz`).
 */
export function recordedTraceNames(only = ""): string[] {
  return [...Deno.readDirSync(TRACES_DIR)].filter((d) => d.isDirectory)
    .flatMap((d) =>
      [...Deno.readDirSync(new URL(`${d.name}/`, TRACES_DIR))].map((e) =>
        `${d.name}/${e.name}`
      )
    ).filter((n) => n.endsWith(".jsonl.gz") && n.includes(only)).sort();
}

/**
 * Reads and parses one recorded trace (gzip-compressed JSON lines).
 *
 * @param name A path relative to {@linkcode TRACES_DIR}, as
 * {@linkcode recordedTraceNames} gives it.
 * @returns The parsed trace.
 */
export async function loadRecordedTrace(name: string): Promise<Trace> {
  const data = await Deno.readFile(new URL(name, TRACES_DIR));
  const text = await new Response(
    new Blob([data]).stream().pipeThrough(new DecompressionStream("gzip")),
  ).text();
  return parseTrace(text);
}
