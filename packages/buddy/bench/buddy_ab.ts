/**
 * In-process A/B of `BuddyAllocator` + one byte view per block: the working
 * tree's allocator against the allocator at a git ref and against the
 * `alloc` package (the benchmark's peer), warm instances, interleaved round
 * by round, process CPU time, paired ratios per round (median and range), on the benchmark's
 * traces. Steadier on a loaded machine than `run.ts`'s best of 9.
 *
 * Each side replays through a function compiled on its own (so no replay
 * loop sees two allocator classes, which would make it polymorphic).
 *
 * Run: `deno run -A packages/buddy/bench/buddy_ab.ts [--ref=main]
 * [--rounds=15] [--view=true] [--traces=synthetic]`. `--traces` is
 * `synthetic` (the log-uniform and tensor-shaped traces), `real` (the nine
 * recorded CPU traces of `traces/cpu/`, as `run.ts` replays them), `all`,
 * or a comma-separated list of substrings of real trace paths
 * (`--traces=mlp,cnn`).
 *
 * @module
 */

import { flag, importAtRef } from "../../../scripts/bench/import_at_ref.ts";
import type { BuddyAllocator } from "../mod.ts";
import { cpuSeconds, makeOurs, makePeer } from "./head_to_head.ts";
import { benchTraces } from "../../cpu/bench/trace.ts";
import { cpuTraceNames, loadCpuTrace } from "../../cpu/bench/cpu_traces.ts";
import type { Trace } from "../../cpu/bench/trace.ts";

const ref = flag("ref", "main");
const rounds = Number(flag("rounds", "15"));
const view = flag("view", "true") === "true";
const which = flag("traces", "synthetic");

async function tracesOf(which: string): Promise<Trace[]> {
  const traces: Trace[] = [];
  if (which === "synthetic" || which === "all") {
    traces.push(...benchTraces(false));
  }
  if (which !== "synthetic") {
    const only = which === "real" || which === "all" ? [] : which.split(",");
    for (const name of cpuTraceNames(only)) {
      traces.push(await loadCpuTrace(name, 200_000));
    }
  }
  return traces;
}

type Replay = (allocator: unknown, trace: Trace) => number;

// A replay loop compiled on its own: its own feedback, one allocator class.
function compile(body: string): Replay {
  return new Function(
    "cpuSeconds",
    "allocator",
    "trace",
    `"use strict";
    const { kind, slot, byteLength } = trace;
    const n = kind.length;
    ${body}`,
  ).bind(undefined, cpuSeconds) as Replay;
}

const oursBody = `
  const addresses = new Float64Array(trace.slots);
  const views = new Array(trace.slots);
  const t0 = cpuSeconds();
  for (let i = 0; i < n; i++) {
    const s = slot[i];
    if (kind[i] === 1) {
      const len = byteLength[i];
      const address = allocator.alloc(len);
      addresses[s] = address;
      ${view ? "views[s] = allocator.bytes(address, len);" : ""}
    } else {
      allocator.free(addresses[s]);
      ${view ? "views[s] = undefined;" : ""}
    }
  }
  const t = cpuSeconds() - t0;
  if (allocator.allocatedBytes !== 0) throw new Error("leak");
  return t;`;

const peerBody = `
  const blocks = new Array(trace.slots);
  const t0 = cpuSeconds();
  for (let i = 0; i < n; i++) {
    const s = slot[i];
    if (kind[i] === 1) {
      const block = allocator.alloc(byteLength[i]);
      if (block === null) throw new Error("alloc: out of memory");
      blocks[s] = block;
    } else {
      allocator.free(blocks[s]);
      blocks[s] = null;
    }
  }
  return cpuSeconds() - t0;`;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

function summary(xs: number[]): string {
  return `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}-${
    Math.max(...xs).toFixed(2)
  })`;
}

const old = await importAtRef<{ BuddyAllocator: typeof BuddyAllocator }>(
  ref,
  "buddy/mod.ts",
);
const MiB = 1 << 20;
for (const trace of await tracesOf(which)) {
  const ours = makeOurs();
  const theirs = new old.BuddyAllocator({
    initialPoolByteLength: 64 * MiB,
    maxPoolByteLength: 2048 * MiB,
  });
  const peer = makePeer(trace);
  const sides: [string, unknown, Replay][] = [
    ["new", ours, compile(oursBody)],
    ["old", theirs, compile(oursBody)],
    ["peer", peer, compile(peerBody)],
  ];
  const times = new Map<string, number[]>(sides.map(([n]) => [n, []]));
  for (let r = -2; r < rounds; r++) {
    // Every other round in reverse order: no side always goes first.
    for (
      const [name, allocator, replay] of r & 1 ? [...sides].reverse() : sides
    ) {
      const t = replay(allocator, trace);
      if (r >= 0) times.get(name)!.push(t);
    }
  }
  const tNew = times.get("new")!, tOld = times.get("old")!;
  const tPeer = times.get("peer")!;
  const ns = (xs: number[]) =>
    summary(xs.map((t) => t * 1e9 / trace.kind.length));
  console.log(
    `${trace.name} (${
      view ? "with" : "without"
    } a view; ns of CPU time per op, median (range) of ${rounds} rounds)`,
  );
  console.log(`  new ${ns(tNew)}  old(${ref}) ${ns(tOld)}  alloc ${ns(tPeer)}`);
  console.log(`  alloc / new: ${summary(tPeer.map((p, i) => p / tNew[i]))}`);
  console.log(`  alloc / old: ${summary(tPeer.map((p, i) => p / tOld[i]))}`);
  console.log(`  old / new:   ${summary(tOld.map((o, i) => o / tNew[i]))}`);
  const best = (xs: number[]) => Math.min(...xs);
  console.log(
    `  best of each: alloc / new ${
      (best(tPeer) / best(tNew)).toFixed(2)
    }, alloc / old ${(best(tPeer) / best(tOld)).toFixed(2)}, old / new ${
      (best(tOld) / best(tNew)).toFixed(2)
    }`,
  );
}
