/**
 * Which of `CpuHeap`'s helpers the optimizing compiler inlines into the hot
 * functions (`alloc`, `free`, `bytes` and the replay loop), under Node and
 * under Deno: bundles `_inlining_main.ts` as `heap_ab.ts` does (constants
 * restored), runs it with `--trace-turbo-inlining` and prints, per runtime
 * and per row (offsets, a view per allocation), what each hot function
 * inlined and which helpers were considered somewhere and never inlined
 * (candidates for a real call per operation; a helper the compiler never
 * considers was not called often enough to matter). A helper left out of
 * `alloc` or `free` is a call on every operation that takes its path: the
 * check to run after changing a hot path's bytecode (README, "#18, seventh
 * session, Node").
 *
 * Run: `deno run -A packages/cpu/bench/inlining.ts [--trace=log-uniform|<substring>]
 * [--runtime=both|deno|node]`; `--trace=<substring>` takes the recorded CPU
 * traces whose paths contain it (`--trace=cpu/mlp`), one after the other in
 * one process.
 *
 * @module
 */

import { flag } from "../../../scripts/bench/import_at_ref.ts";
import { bundleForNode } from "../../../scripts/bench/node_bundle.ts";
import { restoreConsts } from "./_restore_consts.ts";
import { cpuTraceNames, loadCpuTrace } from "./cpu_traces.ts";

/** The functions whose inlining the report lists. */
export const HOT = ["alloc", "free", "bytes", "replayHeap"];

/** What one `--trace-turbo-inlining` run inlined. */
export interface Inlining {
  /** Per hot function, the functions inlined into it (any compile). */
  into: Map<string, Set<string>>;
  /** Functions considered for inlining somewhere and never inlined. */
  neverInlined: Set<string>;
}

const SFI = /<SharedFunctionInfo ([^>]*)>/g;

/**
 * Reads V8's `--trace-turbo-inlining` output.
 *
 * @param text The output.
 * @returns What was inlined into what.
 */
export function parseInlining(text: string): Inlining {
  const into = new Map<string, Set<string>>();
  const considered = new Set<string>(), inlined = new Set<string>();
  for (const line of text.split("\n")) {
    const names = [...line.matchAll(SFI)].map((m) => m[1]);
    if (line.startsWith("Considering ") && names.length === 1) {
      considered.add(names[0]);
    } else if (line.startsWith("Inlining ") && names.length === 2) {
      const [callee, caller] = names;
      inlined.add(callee);
      if (!into.has(caller)) into.set(caller, new Set());
      into.get(caller)!.add(callee);
    }
  }
  const neverInlined = new Set([...considered].filter((n) => !inlined.has(n)));
  return { into, neverInlined };
}

async function output(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped" }).output();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} failed`);
  return new TextDecoder().decode(out.stdout);
}

if (import.meta.main) {
  const which = flag("trace", "log-uniform");
  const runtime = flag("runtime", "both");
  const dir = await Deno.makeTempDir({ prefix: "allot-inlining-" });
  try {
    const bundle = `${dir}/main.mjs`;
    const failed = await bundleForNode(
      new URL("./_inlining_main.ts", import.meta.url),
      bundle,
    );
    if (failed !== undefined) throw new Error(failed);
    await Deno.writeTextFile(
      bundle,
      restoreConsts(await Deno.readTextFile(bundle)),
    );
    const extra: string[] = [];
    if (which !== "log-uniform") {
      const names = cpuTraceNames([which]);
      if (names.length === 0) throw new Error(`--trace=${which} matches none`);
      const traces = [];
      for (const name of names) {
        const t = await loadCpuTrace(name);
        traces.push({
          ...t,
          kind: [...t.kind],
          slot: [...t.slot],
          byteLength: [...t.byteLength],
        });
      }
      await Deno.writeTextFile(`${dir}/traces.json`, JSON.stringify(traces));
      extra.push(`${dir}/traces.json`);
    }
    const runs: [string, string, string[]][] = [];
    if (runtime !== "deno") {
      runs.push(["node", "node", ["--trace-turbo-inlining", bundle]]);
    }
    if (runtime !== "node") {
      runs.push(["deno", Deno.execPath(), [
        "run",
        "-A",
        "--v8-flags=--trace-turbo-inlining",
        bundle,
      ]]);
    }
    for (const [name, cmd, args] of runs) {
      for (const mode of ["offsets", "view"]) {
        const { into, neverInlined } = parseInlining(
          await output(cmd, [...args, mode, ...extra]),
        );
        console.log(`${name}, ${which}, ${mode}:`);
        for (const hot of HOT) {
          const list = [...(into.get(hot) ?? [])].sort().join(", ");
          console.log(`  ${hot} inlines: ${list || "(nothing)"}`);
        }
        console.log(
          `  considered, never inlined: ${
            [...neverInlined].sort().join(", ") || "(none)"
          }`,
        );
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
