/**
 * Benchmark of `@allot/buddy`'s `BuddyAllocator` against the `alloc` npm
 * package (a buddy allocator over one Node `Buffer`), on the cpu package's
 * deterministic traces, in the same process, and under Node (the same code
 * bundled with `deno bundle`) when `node` is present. Warm instances are the
 * headline; fresh instances (made inside the timing) are second rows.
 *
 * Run: `deno run -A packages/buddy/bench/run.ts` (add `--quick` for a smoke
 * run).
 *
 * @module
 */

import type {
  BenchOptions,
  Ratio,
  Row,
  Scenario,
} from "../../../scripts/bench/types.ts";
import { measure } from "./head_to_head.ts";
import { printScenarios } from "../../cpu/bench/report.ts";
import { cpuTraceNames, loadCpuTrace } from "../../cpu/bench/cpu_traces.ts";
import { tracesToJson } from "../../cpu/bench/trace_json.ts";
import { underNode } from "../../cpu/bench/under_node.ts";
import { benchTraces, type Trace } from "../../cpu/bench/trace.ts";

// Runs the head-to-head of every trace under Node (bundled with `deno
// bundle`).
function nodeRows(
  quick: boolean,
  real: Trace[],
): Promise<
  | {
    version: string;
    traces: { name: string; ops: number; seconds: Record<string, number> }[];
  }
  | string
> {
  return underNode({
    entry: new URL("./node_main.ts", import.meta.url),
    prefix: "allot-buddy-node-",
    async args(dir) {
      // The real traces go to Node as JSON (Node has no reader of them).
      const json = `${dir}/traces.json`;
      await Deno.writeTextFile(json, tracesToJson(real));
      return [quick ? "quick" : "full", json];
    },
  });
}

// The target (issue #18) holds on every trace and both runtimes.
function ratios(t: Map<string, number>, runtime: string): Ratio[] {
  const target = (value: number) => ({ target: ">= 2", met: value >= 2 });
  const warmView = t.get("peerWarm")! / t.get("oursViewWarm")!;
  const freshView = t.get("peer")! / t.get("oursView")!;
  return [
    {
      label: `${runtime}warm: BuddyAllocator + view / alloc`,
      value: warmView,
      ...target(warmView),
    },
    {
      label: `${runtime}warm: BuddyAllocator (no view) / alloc`,
      value: t.get("peerWarm")! / t.get("oursWarm")!,
    },
    {
      label: `${runtime}fresh: BuddyAllocator + view / alloc`,
      value: freshView,
    },
    {
      label: `${runtime}fresh: BuddyAllocator (no view) / alloc`,
      value: t.get("peer")! / t.get("ours")!,
    },
  ];
}

function rowsOf(t: Map<string, number>, ops: number): Row[] {
  return [
    {
      name: "allot BuddyAllocator + Uint8Array view, warm",
      value: ops / t.get("oursViewWarm")!,
      ours: true,
    },
    { name: "allot BuddyAllocator, warm", value: ops / t.get("oursWarm")! },
    {
      name: "alloc (npm) BuddyAllocator, warm",
      value: ops / t.get("peerWarm")!,
      note: "returns a Buffer view per block",
    },
    {
      name: "allot BuddyAllocator + Uint8Array view, fresh instance",
      value: ops / t.get("oursView")!,
    },
    {
      name: "allot BuddyAllocator, fresh instance",
      value: ops / t.get("ours")!,
    },
    {
      name: "alloc (npm) BuddyAllocator, fresh instance",
      value: ops / t.get("peer")!,
    },
  ];
}

const NOTES = [
  "Warm rows are the headline: one allocator per trace, replayed once untimed, then reused by every timed replay. Fresh rows make the allocator inside the timing (our pools and their metadata arrays, its one Buffer).",
  "ops per CPU second (process.cpuUsage), best of 9 replays per row, run round-robin across the rows; one op is one alloc or one free.",
  "allot: 64 MiB pools from the SystemAllocator on demand, up to 2 GiB, 256-byte minimum block (the default). alloc: one Buffer of the next power of two above 4x the peak live bytes (at most 1 GiB), 256-byte minimum block.",
  "alloc returns a Buffer (a view) per block, so the ratio with a target compares it with allot making a Uint8Array view too (BuddyAllocator.bytes(), which checks the length against the block).",
];

/**
 * Runs the buddy benchmark.
 *
 * @param options `quick` for a smoke run; `progress` for messages.
 * @returns One scenario per trace.
 */
export async function run(options: BenchOptions): Promise<Scenario[]> {
  const quick = options.quick;
  // The synthetic traces, then the traces recorded from TF.js on the CPU
  // (traces/cpu/, passes concatenated to 200 000 operations).
  const real: Trace[] = [];
  for (const name of cpuTraceNames()) {
    const t = await loadCpuTrace(name, quick ? 20_000 : 200_000);
    real.push({
      ...t,
      name: `real trace ${t.name} (${t.repeat} passes, peak live ${
        (t.peakLiveBytes / (1 << 20)).toFixed(2)
      } MiB)`,
    });
  }
  const traces = [...benchTraces(quick), ...real];
  const reps = quick ? 1 : 9;
  const scenarios: Scenario[] = [];
  for (const trace of traces) {
    const ops = trace.kind.length;
    options.progress?.(`buddy: ${trace.name}`);
    const t = measure(trace, reps);
    scenarios.push({
      package: "buddy",
      scenario: `${trace.name}, ${ops} ops`,
      unit: "ops/s",
      higherIsBetter: true,
      rows: rowsOf(t, ops),
      ratios: ratios(t, ""),
      notes: NOTES,
    });
  }
  options.progress?.("buddy: the traces under Node");
  const node = await nodeRows(quick, real);
  if (typeof node === "string") {
    scenarios.push({
      package: "buddy",
      scenario: "Node: skipped",
      unit: "ops/s",
      higherIsBetter: true,
      rows: [],
      notes: [node],
    });
  } else {
    for (const trace of node.traces) {
      const t = new Map(Object.entries(trace.seconds));
      scenarios.push({
        package: "buddy",
        scenario: `Node ${node.version}: ${trace.name}, ${trace.ops} ops`,
        unit: "ops/s",
        higherIsBetter: true,
        rows: rowsOf(t, trace.ops),
        ratios: ratios(t, "Node, "),
        notes: [
          "The same code (head_to_head.ts), bundled with deno bundle and run by node in a separate process.",
          ...NOTES,
        ],
      });
    }
  }
  return scenarios;
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  const scenarios = await run({ quick, progress: (m) => console.error(m) });
  printScenarios(scenarios);
}
