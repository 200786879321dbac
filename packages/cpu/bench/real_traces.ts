/**
 * The cpu benchmark on real traces: the allocations TF.js 4.22 made on the
 * CPU (`traces/cpu/tfjs-wasm/`: every `_malloc`/`_free` of the wasm
 * backend; `traces/cpu/tfjs-cpu/`: every tensor's data in the JavaScript
 * backend's store), recorded by `traces/record_cpu.ts`, replayed on
 * `CpuHeap` (default and `placement: "first-fit"`) and the peers of
 * `run.ts` (AssemblyScript's TLSF, `@thi.ng/malloc`, `typedarray-pool`,
 * `new ArrayBuffer`, the native OffsetAllocator-style build when g++ is
 * present), warm (the headline) and fresh, in one process, round-robin; then
 * the head-to-head under Node (`node_main.ts`).
 *
 * Each recorded trace is one pass of a small model; passes are concatenated
 * (`real_trace.ts`) so that one timed replay is at least 200 000 operations.
 *
 * Run: `deno run -A packages/cpu/bench/real_traces.ts [--quick]
 * [--summary] [--control] [substring...]`; `run.ts` (so `deno task bench`)
 * includes it. `--construct` prints what making each allocator costs.
 * `--control` adds two synthetic rows: a 2 000-operation
 * log-uniform segment repeated, and the same trace not repeated.
 *
 * @module
 */

import type {
  BenchOptions,
  Ratio,
  Scenario,
} from "../../../scripts/bench/types.ts";
import {
  AS,
  FIRST_FIT,
  footprintAs,
  footprintMemPool,
  FRESH,
  HEAP,
  measureAll,
  native,
  speedRows,
} from "./run.ts";
import { asBinary } from "./peers.ts";
import type { HeadToHeadRow } from "./head_to_head.ts";
import { restoreConsts } from "./_restore_consts.ts";
import { printScenarios } from "./report.ts";
import { passesFor, type RealTrace } from "./real_trace.ts";
import { CPU_TRACE_OPS, cpuTraceNames, loadCpuTrace } from "./cpu_traces.ts";
import { tracesToJson } from "./trace_json.ts";
import { underNode } from "./under_node.ts";
import { logUniformTrace } from "./trace.ts";

const MiB = 1 << 20;
const MEMPOOL = "@thi.ng/malloc MemPool";
const NATIVE = "native OffsetAllocator-style (C++ -O2), warm";
/** Operations per timed replay. */
const OPS = CPU_TRACE_OPS;

/**
 * The control of `--control`: the log-uniform trace's first 2 000
 * operations (about 100 live, all freed) replayed as passes, as a step of a
 * model repeats its allocations. Against `logUniformTrace(200_000, 100)` it
 * shows what repetition alone does to each allocator.
 *
 * @param ops Operations wanted.
 * @returns The repeated trace.
 */
export function repeatedLogUniform(ops = OPS): RealTrace {
  const one = logUniformTrace(2000, 100);
  const repeat = passesFor(one, ops);
  const n = one.kind.length;
  const trace: RealTrace = {
    ...one,
    name: "control/log-uniform, 2000 ops (~100 live) repeated",
    kind: new Uint8Array(n * repeat),
    slot: new Int32Array(n * repeat),
    byteLength: new Int32Array(n * repeat),
    allocations: one.allocations * repeat,
    recordedOps: n,
    repeat,
    zeroSized: 0,
    leaked: 0,
  };
  for (let r = 0; r < repeat; r++) {
    trace.kind.set(one.kind, r * n);
    trace.slot.set(one.slot, r * n);
    trace.byteLength.set(one.byteLength, r * n);
  }
  return trace;
}

function nodeRows(
  traces: RealTrace[],
  quick: boolean,
): Promise<
  | { version: string; out: { name: string; rows: HeadToHeadRow[] }[] }
  | string
> {
  return underNode({
    entry: new URL("./node_main.ts", import.meta.url),
    prefix: "allot-cpu-real-node-",
    rewrite: restoreConsts,
    async args(dir) {
      const wasm = `${dir}/as_tlsf.wasm`;
      await Deno.writeFile(wasm, await asBinary());
      const json = `${dir}/traces.json`;
      await Deno.writeTextFile(json, tracesToJson(traces));
      return [wasm, quick ? "quick" : "full", json];
    },
  });
}

/** One trace's figures, for the summary table. */
export interface TraceSummary {
  name: string;
  ops: number;
  passes: number;
  peakLiveMiB: number;
  /** ops/s per row name (Deno). */
  rate: Map<string, number>;
  /** footprint / peak live per allocator. */
  footprint: Map<string, number>;
  /** Node: CpuHeap warm / AssemblyScript warm, and fresh. */
  node?: { warm: number; fresh: number };
}

const r = (label: string, value: number): Ratio => ({ label, value });

/**
 * Runs the real-trace benchmark.
 *
 * @param options `quick` for a smoke run; `progress` for messages.
 * @param only Substrings of trace paths (none: all).
 * @param summaries Filled with one summary per trace, when given.
 * @param control Add the two synthetic control traces (`--control`).
 * @returns Scenarios: per trace, speed (Deno), footprint; then Node.
 */
export async function runRealTraces(
  options: BenchOptions,
  only: string[] = [],
  summaries: TraceSummary[] = [],
  control = false,
): Promise<Scenario[]> {
  const quick = options.quick;
  const names = cpuTraceNames(only);
  const ops = quick ? 20_000 : OPS;
  const traces: RealTrace[] = [];
  for (const n of names) traces.push(await loadCpuTrace(n, ops));
  if (control) {
    traces.push(repeatedLogUniform(ops));
    const plain = logUniformTrace(ops, 100);
    traces.push({
      ...plain,
      name: "control/log-uniform, ~100 live, not repeated",
      recordedOps: plain.kind.length,
      repeat: 1,
      zeroSized: 0,
      leaked: 0,
    });
  }
  const scenarios: Scenario[] = [];
  for (const trace of traces) {
    const ops = trace.kind.length;
    options.progress?.(`cpu real traces: ${trace.name}`);
    const measured = await measureAll(trace, false, quick);
    const nativePeer = await native(trace, quick);
    const { rows, rate } = speedRows(measured, ops);
    if (typeof nativePeer === "object") {
      rate.set(NATIVE, nativePeer.opsPerSecond);
      rows.push({
        name: NATIVE,
        value: nativePeer.opsPerSecond,
        note: "same trace, 64-byte units",
      });
    }
    const ours = rate.get(HEAP)!;
    const ratios: Ratio[] = [
      r("warm: CpuHeap / AssemblyScript TLSF", ours / rate.get(AS)!),
      r(
        'warm: CpuHeap placement "first-fit" / AssemblyScript TLSF',
        rate.get(FIRST_FIT)! / rate.get(AS)!,
      ),
      r("warm: CpuHeap / MemPool", ours / rate.get(MEMPOOL)!),
      r("warm: CpuHeap / typedarray-pool", ours / rate.get("typedarray-pool")!),
      r("warm: CpuHeap / new ArrayBuffer", ours / rate.get("new ArrayBuffer")!),
      r(
        "fresh: CpuHeap / AssemblyScript TLSF",
        rate.get(HEAP + FRESH)! / rate.get(AS + FRESH)!,
      ),
    ];
    if (typeof nativePeer === "object") {
      ratios.push(
        r(
          "warm: CpuHeap / native OffsetAllocator-style",
          ours / nativePeer.opsPerSecond,
        ),
      );
    }
    scenarios.push({
      package: "cpu",
      scenario:
        `real trace ${trace.name} (${trace.repeat} passes), ${ops} ops, offsets only`,
      unit: "ops/s",
      higherIsBetter: true,
      rows,
      ratios,
      notes: [
        `Recorded by traces/record_cpu.ts: ${trace.recordedOps} alloc/free events a pass, ${
          trace.allocations / trace.repeat
        } allocations, peak live ${
          (trace.peakLiveBytes / MiB).toFixed(2)
        } MiB; ${trace.zeroSized} allocations of 0 bytes left out, ${trace.leaked} never freed by the model (freed at the end of each pass).`,
        "The rows and the timing are run.ts's (warm: made and replayed once untimed; best of up to 15 round-robin replays, ops per CPU second).",
        ...(typeof nativePeer === "string"
          ? [`native peer skipped: ${nativePeer}`]
          : []),
      ],
    });
    // Footprints: highest byte used / peak live bytes.
    const footprint = new Map<string, number>();
    for (const name of [HEAP, FIRST_FIT]) {
      const f = measured.get(name)?.footprint;
      if (f !== undefined) footprint.set(name, f / trace.peakLiveBytes);
    }
    footprint.set(AS, (await footprintAs(trace)) / trace.peakLiveBytes);
    footprint.set(MEMPOOL, footprintMemPool(trace) / trace.peakLiveBytes);
    if (typeof nativePeer === "object") {
      footprint.set(
        "native OffsetAllocator-style (C++)",
        nativePeer.footprint / trace.peakLiveBytes,
      );
    }
    if (trace.recordedFootprint !== undefined) {
      footprint.set(
        "the runtime's own malloc (recorded offsets, one pass)",
        trace.recordedFootprint / trace.peakLiveBytes,
      );
    }
    scenarios.push({
      package: "cpu",
      scenario:
        `real trace ${trace.name}: footprint (highest byte used / peak live ${
          (trace.peakLiveBytes / MiB).toFixed(2)
        } MiB)`,
      unit: "x peak live",
      higherIsBetter: false,
      rows: [...footprint].map(([name, x]) => ({
        name,
        value: x,
        ours: name === HEAP ? true : undefined,
      })),
      ratios: [
        r(
          "AssemblyScript TLSF footprint / CpuHeap footprint",
          footprint.get(AS)! / footprint.get(HEAP)!,
        ),
      ],
      notes: [
        `Over all ${trace.repeat} passes of the replay (the warm instance's high water for CpuHeap).`,
      ],
    });
    summaries.push({
      name: trace.name,
      ops,
      passes: trace.repeat,
      peakLiveMiB: trace.peakLiveBytes / MiB,
      rate,
      footprint,
    });
  }
  options.progress?.("cpu real traces: under Node");
  const node = await nodeRows(traces, quick);
  if (typeof node === "string") {
    scenarios.push({
      package: "cpu",
      scenario: "Node, real traces: skipped",
      unit: "ops/s",
      higherIsBetter: true,
      rows: [],
      notes: [node],
    });
  } else {
    for (
      const { name, ops, rows } of node.out as {
        name: string;
        ops: number;
        rows: HeadToHeadRow[];
      }[]
    ) {
      const get = (n: string) => rows.find((x) => x.name === n)!.opsPerSecond;
      const warm = get("CpuHeap, warm") /
        get("AssemblyScript TLSF (wasm), warm");
      const fresh = get("CpuHeap, fresh") /
        get("AssemblyScript TLSF (wasm), fresh");
      const s = summaries.find((x) => x.name === name);
      if (s) s.node = { warm, fresh };
      scenarios.push({
        package: "cpu",
        scenario: `Node ${node.version}: real trace ${name}, ${ops} ops`,
        unit: "ops/s",
        higherIsBetter: true,
        rows: rows.map((x) => ({
          name: x.name,
          value: x.opsPerSecond,
          ours: x.name === "CpuHeap, warm" ? true : undefined,
        })),
        ratios: [
          r("Node, warm: CpuHeap / AssemblyScript TLSF", warm),
          r("Node, fresh: CpuHeap / AssemblyScript TLSF", fresh),
        ],
        notes: ["head_to_head.ts under node, best of 15 round-robin replays."],
      });
    }
  }
  return scenarios;
}

/**
 * The summary table (Markdown) of a run, for the README.
 *
 * @param summaries From {@linkcode runRealTraces}.
 * @returns The table.
 */
export function summaryTable(summaries: TraceSummary[]): string {
  const f2 = (x: number | undefined) => x === undefined ? "–" : x.toFixed(2);
  const lines = [
    "| trace | ops (passes) | peak live MiB | CpuHeap M ops/s | / AS TLSF | first-fit / AS | / MemPool | / native | Node / AS | fresh / AS | footprint CpuHeap | first-fit | AS TLSF | MemPool | native | runtime's malloc |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const s of summaries) {
    const heap = s.rate.get(HEAP)!;
    const fp = (n: string) => {
      const x = s.footprint.get(n);
      return x === undefined ? "–" : x.toFixed(3);
    };
    lines.push(
      `| ${s.name} | ${s.ops} (${s.passes}) | ${s.peakLiveMiB.toFixed(2)} | ${
        (heap / 1e6).toFixed(1)
      } | ${f2(heap / s.rate.get(AS)!)} | ${
        f2(s.rate.get(FIRST_FIT)! / s.rate.get(AS)!)
      } | ${f2(heap / s.rate.get(MEMPOOL)!)} | ${
        s.rate.has(NATIVE) ? f2(heap / s.rate.get(NATIVE)!) : "–"
      } | ${f2(s.node?.warm)} | ${
        f2(s.rate.get(HEAP + FRESH)! / s.rate.get(AS + FRESH)!)
      } | ${fp(HEAP)} | ${fp(FIRST_FIT)} | ${fp(AS)} | ${fp(MEMPOOL)} | ${
        fp("native OffsetAllocator-style (C++)")
      } | ${fp("the runtime's own malloc (recorded offsets, one pass)")} |`,
    );
  }
  return lines.join("\n");
}

/**
 * CPU milliseconds per construction, best of three rounds of 20: a bare
 * 1 GiB `ArrayBuffer`, `new CpuHeap(1 GiB)`, and that heap's first
 * alloc/free, against AssemblyScript's instantiation (what a fresh row
 * pays before its first operation).
 *
 * @returns Milliseconds per construction, by what was made.
 */
export async function constructionCosts(): Promise<Record<string, number>> {
  const { CpuHeap } = await import("../mod.ts");
  const { cpuSeconds, instantiateAs } = await import("./head_to_head.ts");
  const { asModule } = await import("./peers.ts");
  const module = await asModule();
  const cases: [string, () => void][] = [
    ["new ArrayBuffer(1 GiB)", () => {
      new Uint8Array(new ArrayBuffer(1024 * MiB))[0] = 1;
    }],
    ["new CpuHeap(1 GiB)", () => {
      new CpuHeap(1024 * MiB);
    }],
    ["new CpuHeap(1 GiB) + alloc(100) + free", () => {
      const heap = new CpuHeap(1024 * MiB);
      heap.free(heap.alloc(100));
    }],
    ["AssemblyScript instantiate + alloc(100) + free", () => {
      const as = instantiateAs(module);
      as.free(as.alloc(100));
    }],
  ];
  const best: Record<string, number> = {};
  for (let round = 0; round < 3; round++) {
    for (const [name, make] of cases) {
      const t0 = cpuSeconds();
      for (let i = 0; i < 20; i++) make();
      const ms = (cpuSeconds() - t0) / 20 * 1e3;
      best[name] = Math.min(best[name] ?? Infinity, ms);
    }
  }
  return best;
}

if (import.meta.main && Deno.args.includes("--construct")) {
  for (const [name, ms] of Object.entries(await constructionCosts())) {
    console.log(`${name}: ${ms.toFixed(2)} ms CPU`);
  }
} else if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  const only = Deno.args.filter((a) => !a.startsWith("--"));
  const summaries: TraceSummary[] = [];
  const scenarios = await runRealTraces(
    { quick, progress: (m) => console.error(m) },
    only,
    summaries,
    Deno.args.includes("--control"),
  );
  if (Deno.args.includes("--summary")) console.log(summaryTable(summaries));
  else printScenarios(scenarios);
}
