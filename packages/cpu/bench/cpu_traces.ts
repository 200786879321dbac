/**
 * The recorded CPU traces (`traces/cpu/<runtime>/<name>.jsonl.gz`, written by
 * `traces/record_cpu.ts`): one reader for every bench that replays them
 * (`real_traces.ts`, `heap_ab.ts`, `inlining.ts`, the buddy benches) and for
 * the test that checks them. Deno only (it reads files); `real_trace.ts`
 * turns the text into a slot trace on any runtime.
 *
 * @module
 */

import { passesFor, type RealTrace, slotTraceFromText } from "./real_trace.ts";

/** Operations per timed replay, unless a bench asks for another count. */
export const CPU_TRACE_OPS = 200_000;

/** The recorded CPU traces: `traces/cpu/<runtime>/<name>.jsonl.gz`. */
export const CPU_TRACES_DIR: URL = new URL(
  "../../../traces/cpu/",
  import.meta.url,
);

/**
 * Paths of the recorded CPU traces whose path contains one of `only`.
 *
 * @param only Substrings (none: all).
 * @returns Paths relative to {@linkcode CPU_TRACES_DIR}, sorted.
 */
export function cpuTraceNames(only: string[] = []): string[] {
  return [...Deno.readDirSync(CPU_TRACES_DIR)].filter((d) => d.isDirectory)
    .flatMap((d) =>
      [...Deno.readDirSync(new URL(`${d.name}/`, CPU_TRACES_DIR))].map((e) =>
        `${d.name}/${e.name}`
      )
    ).filter((n) =>
      n.endsWith(".jsonl.gz") &&
      (only.length === 0 || only.some((o) => n.includes(o)))
    ).sort();
}

/**
 * The text of a recorded CPU trace (gunzipped JSON Lines).
 *
 * @param path Relative to {@linkcode CPU_TRACES_DIR}.
 * @returns The text.
 */
export async function readCpuTraceText(path: string): Promise<string> {
  const gz = await Deno.readFile(new URL(path, CPU_TRACES_DIR));
  return await new Response(
    new Blob([gz]).stream().pipeThrough(new DecompressionStream("gzip")),
  ).text();
}

/**
 * Loads a recorded CPU trace as a slot trace of at least `ops` operations.
 *
 * @param path Relative to {@linkcode CPU_TRACES_DIR}.
 * @param ops Operations wanted (passes are concatenated).
 * @returns The slot trace, named after the file.
 */
export async function loadCpuTrace(
  path: string,
  ops: number = CPU_TRACE_OPS,
): Promise<RealTrace> {
  const text = await readCpuTraceText(path);
  const name = path.replace(/\.jsonl\.gz$/, "");
  const one = slotTraceFromText(text, name, 1);
  return slotTraceFromText(text, name, passesFor(one, ops));
}
