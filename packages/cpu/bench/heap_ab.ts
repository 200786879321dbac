/**
 * In-process A/B of `CpuHeap`: the working tree's heap against the heap at a
 * git ref, warm instances, interleaved, paired ratios (new speed / old) on
 * the benchmark's log-uniform trace, with and without a view per allocation,
 * under Deno and under Node (a `deno bundle` with its constants restored, as
 * `run.ts` does). How the README's "kept / not kept" figures are measured.
 *
 * Run: `deno run -A packages/cpu/bench/heap_ab.ts [--ref=main]
 * [--rounds=21] [--placement=good-fit] [--trace=log-uniform|tensor]
 * [--runtime=both|deno|node]`; `--trace=<substring>` takes the recorded CPU
 * traces (`traces/cpu/`) whose paths contain it, one after the other in the
 * same processes, e.g. `--trace=cpu/mlp` (one) or `--trace=tfjs` (all nine).
 * With `--against=as` the old side is
 * AssemblyScript's TLSF (the benchmark's peer) instead of a git ref: paired
 * CpuHeap / AssemblyScript ratios, steadier under load than `run.ts`'s best
 * of 15.
 *
 * @module
 */

import { flag } from "../../../scripts/bench/import_at_ref.ts";
import { restoreConsts } from "./_restore_consts.ts";
import { asBinary } from "./peers.ts";
import { cpuTraceNames, loadCpuTrace } from "./cpu_traces.ts";

const root = new URL("../../../", import.meta.url).pathname;

async function run(cmd: string, args: string[], cwd = root): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped" })
    .output();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} failed`);
  return new TextDecoder().decode(out.stdout);
}

// `packages/` of `ref` (or of the working tree) in `dir`, `@allot/<name>`
// imports made relative so that the copy needs no import map.
async function extract(ref: string | undefined, dir: string): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  if (ref === undefined) await run("cp", ["-r", `${root}packages`, dir]);
  else {
    await run("sh", ["-c", `git archive ${ref} packages | tar -x -C ${dir}`]);
  }
  for (const pkg of Deno.readDirSync(`${dir}/packages`)) {
    if (!pkg.isDirectory) continue;
    for (const sub of ["", "/bench"]) {
      const folder = `${dir}/packages/${pkg.name}${sub}`;
      let entries;
      try {
        entries = [...Deno.readDirSync(folder)];
      } catch {
        continue;
      }
      for (const entry of entries) {
        if (!entry.name.endsWith(".ts")) continue;
        const file = `${folder}/${entry.name}`;
        const text = Deno.readTextFileSync(file);
        Deno.writeTextFileSync(
          file,
          text.replace(
            /from "@allot\/([a-z]+)"/g,
            `from "${sub ? "../" : ""}../$1/mod.ts"`,
          ),
        );
      }
    }
  }
}

const MAIN = (args: string) => `
import process from "node:process";
import { CpuHeap as New } from "./new/packages/cpu/mod.ts";
import { CpuHeap as Old } from "./old/packages/cpu/mod.ts";
import { logUniformTrace, tensorTrace } from "./new/packages/cpu/bench/trace.ts";
import { abRounds, asHeap } from "./new/packages/cpu/bench/_heap_ab_core.ts";
import { readFileSync } from "node:fs";
const { rounds, placement, trace: which, against } = ${args};
const wasm = against === "as"
  ? new WebAssembly.Module(readFileSync(new URL("./as_tlsf.wasm", import.meta.url)))
  : undefined;
const traces = which === "tensor"
  ? [{ ...tensorTrace(300), name: "" }]
  : which === "log-uniform"
  ? [{ ...logUniformTrace(200_000), name: "" }]
  : // Real traces, loaded by the driver (Deno) and written as JSON.
    JSON.parse(readFileSync(new URL("./traces.json", import.meta.url), "utf8"))
      .map((t) => ({ ...t, kind: Uint8Array.from(t.kind),
        slot: Int32Array.from(t.slot), byteLength: Int32Array.from(t.byteLength) }));
const MiB = 1 << 20;
const out = traces.flatMap((trace) => [false, true].map((view) =>
  abRounds((trace.name ? trace.name + " " : "") + (view ? "view" : "offsets"),
    () => new New(1024 * MiB, { placement }),
    () => wasm ? asHeap(wasm) : new Old(1024 * MiB, { placement }),
    trace, view, rounds)
));
process.stdout.write(JSON.stringify(out) + "\\n");
`;

if (import.meta.main) {
  const ref = flag("ref", "main");
  const runtime = flag("runtime", "both");
  const args = JSON.stringify({
    rounds: Number(flag("rounds", "21")),
    placement: flag("placement", "good-fit"),
    trace: flag("trace", "log-uniform"),
    against: flag("against", "ref"),
  });
  const dir = await Deno.makeTempDir({ prefix: "allot-heap-ab-" });
  try {
    await extract(undefined, `${dir}/new`);
    await extract(ref, `${dir}/old`);
    await Deno.writeFile(`${dir}/as_tlsf.wasm`, await asBinary());
    const which = flag("trace", "log-uniform");
    if (which !== "log-uniform" && which !== "tensor") {
      // Recorded CPU traces (`--trace=tfjs-cpu/mlp`: a path substring).
      const names = cpuTraceNames([which]);
      if (names.length === 0) throw new Error(`--trace=${which} matches none`);
      const traces = [];
      for (const name of names) {
        const t = await loadCpuTrace(name);
        console.log(
          `trace ${t.name}: ${t.kind.length} ops, ${t.repeat} passes`,
        );
        traces.push({
          ...t,
          kind: [...t.kind],
          slot: [...t.slot],
          byteLength: [...t.byteLength],
        });
      }
      await Deno.writeTextFile(`${dir}/traces.json`, JSON.stringify(traces));
    }
    await Deno.writeTextFile(`${dir}/main.ts`, MAIN(args));
    const show = (who: string, json: string) => {
      for (const r of JSON.parse(json)) {
        console.log(
          `${who} ${r.name}: new/old ${r.median.toFixed(3)} (${
            r.q1.toFixed(3)
          } - ${r.q3.toFixed(3)})`,
        );
      }
    };
    if (runtime !== "node") {
      show(
        "deno",
        await run(Deno.execPath(), ["run", "-A", `${dir}/main.ts`], dir),
      );
    }
    if (runtime !== "deno") {
      await run(Deno.execPath(), [
        "bundle",
        "--quiet",
        `${dir}/main.ts`,
        "-o",
        `${dir}/main.mjs`,
      ], dir);
      await Deno.writeTextFile(
        `${dir}/main.mjs`,
        restoreConsts(await Deno.readTextFile(`${dir}/main.mjs`)),
      );
      show("node", await run("node", [`${dir}/main.mjs`], dir));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
