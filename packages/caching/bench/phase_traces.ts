/**
 * The default caching pool (`allot-caching`, and optionally its after-fence
 * and group variants) on the 24 recorded traces and on synthetic traces of
 * phase changes (`_phase_traces.ts`): peak held / peak live one pass and
 * warm (8 passes of one instance), device buffers made after pass 1, and a
 * summary (worst, geomean, rows <= 1.10, rows with no remakes after pass 1).
 *
 *   deno run -A packages/caching/bench/phase_traces.ts [--only=a,b]
 *     [--policies=allot-caching,allot-caching-fence] [--synthetic-only]
 *     [--json=out.json]
 *
 * @module
 */
import {
  allotCachingAfterFencePolicy,
  allotCachingGroupAfterFencePolicy,
  allotCachingGroupPolicy,
  allotCachingQueueOrderPolicy,
  type PolicyFactory,
  type ReplayOps,
  traceOps,
} from "../../trace/mod.ts";
import { measure } from "../../../traces/figures.ts";
import { readTraceFile } from "../../trace/cli.ts";
import {
  recordedTraceNames,
  TRACES_DIR,
} from "../../../scripts/bench/recorded_traces.ts";
import { fileURLToPath } from "node:url";
import { syntheticPhaseTraces } from "./_phase_traces.ts";

const ALL: PolicyFactory[] = [
  allotCachingQueueOrderPolicy,
  allotCachingAfterFencePolicy,
  allotCachingGroupPolicy,
  allotCachingGroupAfterFencePolicy,
];

const arg = (k: string) =>
  Deno.args.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3);
const only = arg("only") ?? "";
const want = (arg("policies") ?? "allot-caching").split(",");
const policies = ALL.filter((p) => want.includes(p.name));
const syntheticOnly = Deno.args.includes("--synthetic-only");
const recordedOnly = Deno.args.includes("--recorded-only");

type Row = {
  trace: string;
  usage: string;
  policy: string;
  onePass: number;
  warm: number;
  made: number;
};
const rows: Row[] = [];

function run(name: string, usage: string, ops: ReplayOps): void {
  const cells = policies.map((p) => ({ p, m: measure(ops, p) }));
  console.log(
    `| ${name} | ${usage} | ` +
      cells.map(({ m }) =>
        `${m.onePass.toFixed(3)}, ${m.warm.toFixed(3)}; ${m.madeAfterFirst}`
      ).join(" | ") + " |",
  );
  for (const { p, m } of cells) {
    rows.push({
      trace: name,
      usage,
      policy: p.name,
      onePass: m.onePass,
      warm: m.warm,
      made: m.madeAfterFirst,
    });
  }
}

console.log(`| trace | usage | ${policies.map((p) => p.name).join(" | ")} |`);
console.log(`|---|---|${policies.map(() => "---:").join("|")}|`);
if (!syntheticOnly) {
  const names = [
    ...new Set(only.split(",").flatMap((o) => recordedTraceNames(o))),
  ].sort();
  for (const name of names) {
    const trace = await readTraceFile(
      fileURLToPath(new URL(name, TRACES_DIR)),
    );
    for (const usage of ["storage", "all"] as const) {
      run(name.replace(".jsonl.gz", ""), usage, traceOps(trace, usage));
    }
  }
}
if (!recordedOnly) {
  for (const [name, ops] of syntheticPhaseTraces()) {
    if (only === "" || only.split(",").some((o) => name.includes(o))) {
      run(name, "synthetic", ops);
    }
  }
}

function summary(label: string, rs: Row[]): void {
  if (rs.length === 0) return;
  const worst = (f: (r: Row) => number) => Math.max(...rs.map(f));
  const geo = (f: (r: Row) => number) =>
    Math.exp(rs.reduce((s, r) => s + Math.log(f(r)), 0) / rs.length);
  const ok = (f: (r: Row) => number) => rs.filter((r) => f(r) <= 1.10).length;
  console.log(
    `${label}: ${rs.length} rows; one pass worst ${
      worst((r) => r.onePass).toFixed(3)
    } geomean ${geo((r) => r.onePass).toFixed(4)} <=1.10 ${
      ok((r) => r.onePass)
    }; warm worst ${worst((r) => r.warm).toFixed(3)} geomean ${
      geo((r) => r.warm).toFixed(4)
    } <=1.10 ${ok((r) => r.warm)}; no remakes ${
      rs.filter((r) => r.made === 0).length
    }, remade total ${rs.reduce((s, r) => s + r.made, 0)}`,
  );
}
console.log("");
for (const p of policies) {
  for (const usage of ["storage", "all", "synthetic"]) {
    summary(
      `${p.name} ${usage}`,
      rows.filter((r) => r.policy === p.name && r.usage === usage),
    );
  }
}
const json = arg("json");
if (json !== undefined) Deno.writeTextFileSync(json, JSON.stringify(rows));
