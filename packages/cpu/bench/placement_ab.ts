/**
 * The price of a placement, paired: `CpuHeap` with `placement: "compact"`
 * and `"first-fit"` against the default `"good-fit"` and against
 * AssemblyScript's TLSF, warm instances, interleaved (the order alternating
 * each round), one paired ratio per round (speed of the first over the
 * second), on the log-uniform and the tensor-shaped trace, offsets only,
 * under Deno and under Node (a `deno bundle` with its constants restored, as
 * `run.ts` does), one process per group (placements; against
 * AssemblyScript) so that each replay loop sees one class. How the README's
 * "/ default" and placement "/ AssemblyScript" rows are measured.
 *
 * Run: `deno run -A packages/cpu/bench/placement_ab.ts [--rounds=15]
 * [--runtime=both|deno|node]`.
 *
 * @module
 */

import { flag } from "../../../scripts/bench/import_at_ref.ts";
import { restoreConsts } from "./_restore_consts.ts";
import { asBinary } from "./peers.ts";

const here = new URL(".", import.meta.url).pathname;

// Runs under Deno and, bundled, under Node: nothing Deno-specific.
// One process per group: the old side's replay loop sees one class only.
const MAIN = (rounds: number, group: "placements" | "as") => `
import process from "node:process";
import { readFileSync } from "node:fs";
import { CpuHeap } from "${here}../mod.ts";
import { logUniformTrace, tensorTrace } from "${here}trace.ts";
import { abRounds, asHeap } from "${here}_heap_ab_core.ts";
const wasm = new WebAssembly.Module(
  readFileSync(new URL("./as_tlsf.wasm", import.meta.url)),
);
const MiB = 1 << 20;
const heap = (placement) => () => new CpuHeap(1024 * MiB, { placement });
const out = [];
for (const trace of [logUniformTrace(200_000), tensorTrace(300)]) {
  const name = trace.name.split(" ")[0];
  for (const [label, a, b] of "${group}" === "placements" ? [
    ["compact / good-fit", heap("compact"), heap("good-fit")],
    ["first-fit / good-fit", heap("first-fit"), heap("good-fit")],
  ] : [
    ["good-fit / AssemblyScript", heap("good-fit"), () => asHeap(wasm)],
    ["compact / AssemblyScript", heap("compact"), () => asHeap(wasm)],
    ["first-fit / AssemblyScript", heap("first-fit"), () => asHeap(wasm)],
  ]) {
    out.push(abRounds(name + " " + label, a, b, trace, false, ${rounds}));
  }
}
process.stdout.write(JSON.stringify(out) + "\\n");
`;

async function run(cmd: string, args: string[], cwd: string): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped" })
    .output();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} failed`);
  return new TextDecoder().decode(out.stdout);
}

if (import.meta.main) {
  const runtime = flag("runtime", "both");
  const dir = await Deno.makeTempDir({ prefix: "allot-placement-ab-" });
  try {
    await Deno.writeFile(`${dir}/as_tlsf.wasm`, await asBinary());
    const rounds = Number(flag("rounds", "15"));
    const show = (who: string, json: string) => {
      for (const r of JSON.parse(json)) {
        console.log(
          `${who} ${r.name}: ${r.median.toFixed(3)} (${r.q1.toFixed(3)} - ${
            r.q3.toFixed(3)
          })`,
        );
      }
    };
    const config = new URL("../../../deno.json", import.meta.url).pathname;
    for (const group of ["placements", "as"] as const) {
      await Deno.writeTextFile(`${dir}/main.ts`, MAIN(rounds, group));
      if (runtime !== "node") {
        show(
          "deno",
          await run(Deno.execPath(), [
            "run",
            "-A",
            `--config=${config}`,
            `${dir}/main.ts`,
          ], dir),
        );
      }
      if (runtime !== "deno") {
        await run(Deno.execPath(), [
          "bundle",
          "--quiet",
          `--config=${config}`,
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
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
