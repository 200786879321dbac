/**
 * Benchmark of `@allot/threads`, same process, interleaved, repeated:
 *
 * 1. Uncontended: one thread replays the log-uniform trace (16 B to 1 MiB,
 *    ~1,000 live) on `SharedHeap` and on `@allot/cpu`'s `CpuHeap`, warm
 *    (reused instances, the headline) and fresh (a new heap per replay).
 * 2. Contended: 1 to 4 Workers replay the trace at once on one shared heap;
 *    throughput against one Worker.
 * 3. Hand-off of a 64 MiB buffer to a Worker and back: a shared descriptor
 *    against `postMessage` with a structured clone and with a transfer.
 *
 * The uncontended scenario runs twice: on the log-uniform trace and on the
 * tensor-shaped trace of `@allot/cpu`'s benchmark (most bytes in spans over
 * 8 KiB, which the span cache serves).
 *
 * Run: `deno run -A packages/threads/bench/run.ts` (add `--quick`; add
 * `--uncontended` for the first scenario alone).
 *
 * @module
 */

import type {
  BenchOptions,
  Ratio,
  Scenario,
} from "../../../scripts/bench/types.ts";
import { CpuHeap } from "../../cpu/mod.ts";
import {
  logUniformTrace,
  tensorTrace,
  type Trace,
} from "../../cpu/bench/trace.ts";
import { renderScenario } from "../../../scripts/bench/report.ts";
import { SharedHeap, SharedHeapAllocator } from "../mod.ts";
import { Buffer } from "../../storage/mod.ts";
import type { ArenaCounters } from "../_counters.ts";
import process from "node:process";

/**
 * On-CPU and run-queue nanoseconds of each thread of this process (Linux
 * `/proc/self/task/<tid>/schedstat`); empty elsewhere.
 */
export function threadTimes(): Map<string, [number, number]> {
  const out = new Map<string, [number, number]>();
  try {
    for (const e of Deno.readDirSync("/proc/self/task")) {
      const text = Deno.readTextFileSync(`/proc/self/task/${e.name}/schedstat`);
      const [run, wait] = text.split(" ").map(Number);
      out.set(e.name, [run, wait]);
    }
  } catch {
    // Not Linux, or no permission: CPU figures are left out.
  }
  return out;
}

/**
 * CPU and run-queue ns of the threads that ran more than `minNs` (20 ms
 * unless given) between two reads of {@linkcode threadTimes}.
 */
export function busyThreads(
  before: Map<string, [number, number]>,
  after: Map<string, [number, number]>,
  minNs = 20e6,
): { cpuNs: number; waitNs: number } {
  let cpuNs = 0, waitNs = 0;
  for (const [tid, [run, wait]] of after) {
    const b = before.get(tid);
    if (b === undefined || run - b[0] < minNs) continue;
    cpuNs += run - b[0];
    waitNs += wait - b[1];
  }
  return { cpuNs, waitNs };
}

const MiB = 1 << 20;

interface Alloc {
  alloc(n: number): number;
  free(at: number): void;
}

// The same loop three times: a call site of its own for each heap (as in a
// program that uses one heap: monomorphic, the headline), and one site that
// both heaps go through (polymorphic: how the benchmark measured before,
// kept as a second figure; V8 compiles such a site differently).
function replayCpu(heap: CpuHeap, trace: Trace, slots: Int32Array): void {
  const { kind, slot, byteLength } = trace;
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === 1) slots[slot[i]] = heap.alloc(byteLength[i]);
    else heap.free(slots[slot[i]]);
  }
}

function replayShared(
  heap: SharedHeap,
  trace: Trace,
  slots: Int32Array,
): void {
  const { kind, slot, byteLength } = trace;
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === 1) slots[slot[i]] = heap.alloc(byteLength[i]);
    else heap.free(slots[slot[i]]);
  }
}

function replayEither(heap: Alloc, trace: Trace, slots: Int32Array): void {
  const { kind, slot, byteLength } = trace;
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === 1) slots[slot[i]] = heap.alloc(byteLength[i]);
    else heap.free(slots[slot[i]]);
  }
}

/** Wall and process CPU (user + system) milliseconds of `fn`. */
function timed(fn: () => void): { wall: number; cpu: number } {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  fn();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { wall, cpu: (c.user + c.system) / 1e3 };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function range(xs: number[]): string {
  return `${Math.min(...xs).toFixed(2)}..${Math.max(...xs).toFixed(2)}`;
}

function uncontended(quick: boolean): Scenario[] {
  return [
    logUniformTrace(quick ? 20_000 : 200_000, 1000, 42),
    // Tensor-shaped: most bytes in spans over 8 KiB, ~100 MiB live.
    tensorTrace(quick ? 20 : 200),
  ].flatMap((trace) => uncontendedOn(trace, quick));
}

function uncontendedOn(trace: Trace, quick: boolean): Scenario[] {
  const ops = trace.kind.length;
  const slots = new Int32Array(trace.slots);
  const heapBytes = 512 * MiB;
  const cpu = new CpuHeap(heapBytes);
  const shared = SharedHeap.create(heapBytes);
  // Each sample replays the trace `inner` times on the same warm heap: a
  // sample of ~50 ms rides out a timer tick or a short preemption better
  // than one replay of ~15 ms.
  const reps = quick ? 3 : 15;
  const inner = quick ? 1 : Math.max(1, Math.round(600_000 / ops));
  const warmCpu = () => {
    for (let k = 0; k < inner; k++) replayCpu(cpu, trace, slots);
  };
  const warmShared = () => {
    for (let k = 0; k < inner; k++) replayShared(shared, trace, slots);
  };
  const eitherCpu = () => {
    for (let k = 0; k < inner; k++) replayEither(cpu, trace, slots);
  };
  const eitherShared = () => {
    for (let k = 0; k < inner; k++) replayEither(shared, trace, slots);
  };
  const freshCpu = () => replayCpu(new CpuHeap(heapBytes), trace, slots);
  const freshShared = () => {
    const h = SharedHeap.create(heapBytes);
    replayShared(h, trace, slots);
    h.detach();
  };
  // Warm-up: every loop compiled (600,000 operations each), both heaps at
  // their steady state.
  for (let k = 0; k * ops * inner < 600_000; k++) {
    for (const f of [warmCpu, warmShared, eitherCpu, eitherShared]) f();
  }
  type Pair = [() => void, () => void];
  const pairs: Record<string, Pair> = {
    warm: [warmCpu, warmShared],
    either: [eitherCpu, eitherShared],
    fresh: [freshCpu, freshShared],
  };
  const t: Record<string, { wall: number; cpu: number }[][]> = {
    warm: [[], []],
    either: [[], []],
    fresh: [[], []],
  };
  for (let r = 0; r < reps; r++) {
    // Interleaved, alternating which goes first.
    for (const [key, pair] of Object.entries(pairs)) {
      for (const who of r % 2 === 0 ? [0, 1] : [1, 0]) {
        t[key][who].push(timed(pair[who]));
      }
    }
  }
  shared.detach();
  const n = trace.kind.length;
  // Per-sample ratios, SharedHeap throughput / CpuHeap throughput.
  const ratios = (key: string, by: "wall" | "cpu") =>
    t[key][1].map((x, i) => t[key][0][i][by] / x[by]);
  const mops = (key: string, who: number, times = inner) =>
    n * times / median(t[key][who].map((x) => x.wall)) / 1e3;
  const mk = (label: string, xs: number[], target?: number): Ratio => ({
    label: `${label} (range ${range(xs)})`,
    value: median(xs),
    target: target === undefined ? undefined : `>= ${target.toFixed(3)}`,
    met: target === undefined ? undefined : median(xs) >= target,
  });
  return [{
    package: "threads",
    scenario: `uncontended, one thread: ${trace.name}, ${n} ops`,
    unit: "Mops/s",
    higherIsBetter: true,
    rows: [
      { name: "allot SharedHeap, warm", value: mops("warm", 1), ours: true },
      { name: "allot CpuHeap, warm", value: mops("warm", 0) },
      {
        name: "allot SharedHeap, fresh 512 MiB",
        value: mops("fresh", 1, 1),
        ours: true,
      },
      { name: "allot CpuHeap, fresh 512 MiB", value: mops("fresh", 0, 1) },
    ],
    ratios: [
      mk(
        "SharedHeap / CpuHeap, warm (target: at most 20% slower)",
        ratios("warm", "wall"),
        1 / 1.2,
      ),
      mk(
        "SharedHeap / CpuHeap, warm, by process CPU time (user + system; less moved by other jobs' load than wall time)",
        ratios("warm", "cpu"),
      ),
      mk(
        "SharedHeap / CpuHeap, warm, both through one call site (polymorphic; the previous benchmark's way)",
        ratios("either", "wall"),
      ),
      mk("SharedHeap / CpuHeap, fresh", ratios("fresh", "wall")),
    ],
    notes: [
      `median of ${reps} interleaved samples (each ${inner} replay${
        inner > 1 ? "s" : ""
      } of the same trace on the same warm heaps; fresh: a new heap per sample); the machine was shared with other engineers' jobs`,
    ],
  }];
}

function spawn(): Worker {
  return new Worker(new URL("./_worker.ts", import.meta.url), {
    type: "module",
  });
}

interface Reply {
  type: string;
  ms?: number;
  ops?: number;
  counters?: ArenaCounters;
}

function ask(w: Worker, message: unknown, transfer: Transferable[] = []) {
  return new Promise<Reply>(
    (resolve) => {
      w.onmessage = (e) => resolve(e.data);
      w.postMessage(message, transfer);
    },
  );
}

async function contended(quick: boolean): Promise<Scenario[]> {
  const operations = quick ? 20_000 : 100_000;
  const live = 500;
  const repeats = quick ? 2 : 5;
  const counts = [1, 2, 3, 4];
  const workers = counts.map(() => spawn());
  const rounds = quick ? 1 : 3;
  const throughput = new Map<number, number[]>(counts.map((n) => [n, []]));
  // Per N: CPU ns per op of the busy threads, run-queue wait / CPU time,
  // and the Workers' counters summed over rounds.
  const cpuPerOp = new Map<number, number[]>(counts.map((n) => [n, []]));
  const waitPerCpu = new Map<number, number[]>(counts.map((n) => [n, []]));
  const counted = new Map<number, { ops: number; c: ArenaCounters }>();
  for (let round = 0; round < rounds; round++) {
    for (const n of round % 2 ? [...counts].reverse() : counts) {
      const heap = SharedHeap.create(1024 * MiB);
      const sync = new SharedArrayBuffer(8);
      const s = new Int32Array(sync);
      const done = workers.slice(0, n).map((w, i) =>
        ask(w, {
          type: "replay",
          heap: heap.descriptor(),
          operations,
          live,
          seed: 42 + i,
          repeats,
          sync,
        })
      );
      while (Atomics.load(s, 1) < n) {
        await new Promise((r) => setTimeout(r, 1));
      }
      const times0 = threadTimes();
      const t0 = performance.now();
      Atomics.store(s, 0, 1);
      Atomics.notify(s, 0);
      const results = await Promise.all(done);
      const wall = performance.now() - t0;
      const { cpuNs, waitNs } = busyThreads(times0, threadTimes());
      const ops = results.reduce((a, r) => a + (r.ops ?? 0), 0);
      throughput.get(n)!.push(ops / wall / 1e3);
      if (cpuNs > 0) {
        cpuPerOp.get(n)!.push(cpuNs / ops);
        waitPerCpu.get(n)!.push(waitNs / cpuNs);
      }
      const sum = counted.get(n) ?? { ops: 0, c: {} as ArenaCounters };
      sum.ops += ops;
      for (const r of results) {
        for (const [k, v] of Object.entries(r.counters ?? {})) {
          const key = k as keyof ArenaCounters;
          sum.c[key] = (sum.c[key] ?? 0) + v;
        }
      }
      counted.set(n, sum);
      for (const w of workers.slice(0, n)) await ask(w, { type: "detach" });
      heap.detach();
    }
  }
  for (const w of workers) w.terminate();
  const one = throughput.get(1)!;
  const ratios: Ratio[] = counts.slice(1).map((n) => {
    const xs = throughput.get(n)!.map((x, i) => x / one[i]);
    return {
      label: `${n} Workers / 1 Worker (range ${range(xs)})`,
      value: median(xs),
      target: n === 2 ? ">= 1.5" : undefined,
      met: n === 2 ? median(xs) >= 1.5 : undefined,
    };
  });
  const oneCpu = cpuPerOp.get(1)!;
  if (oneCpu.length === rounds) {
    for (const n of counts.slice(1)) {
      // What N Workers would reach if each had a core of its own: N times
      // the ratio of CPU time per op (1 Worker / N Workers), per round.
      const xs = cpuPerOp.get(n)!.map((x, i) => n * oneCpu[i] / x);
      ratios.push({
        label:
          `${n} Workers / 1 Worker by CPU time per op, i.e. with a free core per Worker (range ${
            range(xs)
          })`,
        value: median(xs),
      });
    }
  }
  const per1k = (n: number) => {
    const { ops, c } = counted.get(n)!;
    const k = (x: number) => (x / ops * 1000).toFixed(2);
    const hit = c.largeHits / Math.max(1, c.largeHits + c.largeMisses);
    return `${n} Worker${n > 1 ? "s" : ""}: ${k(c.locks)} core locks, ${
      k(c.lockWaits)
    } waits, ${k(c.lockSleeps)} sleeps, ${
      k(c.pagesTaken)
    } pages taken from the core, ${k(c.slabsTaken)} slabs, ${
      k(c.remoteFrees)
    } remote frees; large-span cache hit rate ${hit.toFixed(3)}`;
  };
  return [{
    package: "threads",
    scenario:
      `contended: N Workers replay a log-uniform trace (${operations} ops, ~${live} live each) on one SharedHeap`,
    unit: "Mops/s (all Workers)",
    higherIsBetter: true,
    rows: counts.map((n, i) => ({
      name: `SharedHeap, ${n} Worker${n > 1 ? "s" : ""}`,
      value: median(throughput.get(n)!),
      ours: i === 0 ? true : undefined,
    })),
    ratios,
    notes: [
      `${navigator.hardwareConcurrency} cores; medians of ${rounds} rounds; the machine was shared with other engineers' jobs, so contention figures are noisy`,
      "per 1,000 ops (deterministic counters of the Workers' arenas, summed over rounds):",
      ...counts.map(per1k),
      ...(oneCpu.length === rounds
        ? counts.map((n) =>
          `${n} Worker${n > 1 ? "s" : ""}: CPU ${
            median(cpuPerOp.get(n)!).toFixed(1)
          } ns/op, run-queue wait / CPU time ${
            median(waitPerCpu.get(n)!).toFixed(2)
          } (above 0: the Workers waited for a core)`
        )
        : []),
    ],
  }];
}

async function handOff(quick: boolean): Promise<Scenario[]> {
  const reps = quick ? 3 : 9;
  const heap = SharedHeap.create(256 * MiB);
  const allocator = new SharedHeapAllocator(heap);
  const w = spawn();
  await ask(w, { type: "attach", heap: heap.descriptor() });
  const sizes = [MiB, 64 * MiB];
  const t: Record<string, number[]> = {};
  const sync = (key: string, t0: number) =>
    (t[key] ??= []).push(performance.now() - t0);
  const time = async (key: string, fn: () => Promise<unknown>) => {
    const t0 = performance.now();
    await fn();
    (t[key] ??= []).push(performance.now() - t0);
  };
  for (let r = 0; r < reps; r++) {
    for (const size of sizes) {
      const mb = size / MiB;
      const b = Buffer.filled("f32", [size / 4], { value: 1, allocator });
      // Sender-side cost: the synchronous part of each hand-off (the
      // structured clone is serialised inside postMessage), no scheduling.
      await time(`shared descriptor, ${mb} MiB`, () => {
        const t0 = performance.now();
        const done = ask(w, {
          type: "descriptor",
          descriptor: allocator.share(b),
        });
        sync(`sender: shared descriptor, ${mb} MiB`, t0);
        return done;
      });
      b.release();
      const clone = new Float32Array(size / 4).fill(1);
      await time(`postMessage structured clone, ${mb} MiB`, () => {
        const t0 = performance.now();
        const done = ask(w, { type: "bytes", data: clone });
        sync(`sender: postMessage structured clone, ${mb} MiB`, t0);
        return done;
      });
      const moved = new Float32Array(size / 4).fill(1);
      await time(`postMessage transfer, ${mb} MiB`, () => {
        const t0 = performance.now();
        const done = ask(w, { type: "bytes", data: moved }, [moved.buffer]);
        sync(`sender: postMessage transfer, ${mb} MiB`, t0);
        return done;
      });
    }
  }
  await ask(w, { type: "detach" });
  w.terminate();
  heap.detach();
  const key64 = (k: string) => `${k}, 64 MiB`;
  const ratio = (peer: string): Ratio => {
    const xs = t[key64(peer)].map((x, i) =>
      x / t[key64("shared descriptor")][i]
    );
    return {
      label: `${peer} / shared descriptor, 64 MiB (range ${range(xs)})`,
      value: median(xs),
    };
  };
  const xs1 = t["sender: shared descriptor, 64 MiB"].map((x, i) =>
    x / t["sender: shared descriptor, 1 MiB"][i]
  );
  const sender = (peer: string): Ratio => {
    const xs = t[`sender: ${peer}, 64 MiB`].map((x, i) =>
      x / t["sender: shared descriptor, 64 MiB"][i]
    );
    return {
      label: `sender cost: ${peer} / shared descriptor, 64 MiB (range ${
        range(xs)
      })`,
      value: median(xs),
    };
  };
  return [{
    package: "threads",
    scenario:
      "hand-off of a buffer to a Worker: round trip with an ack, and the sender's synchronous cost",
    unit: "ms",
    higherIsBetter: false,
    rows: Object.keys(t).map((k) => ({
      name: k,
      value: median(t[k]),
      ours: k.includes("shared descriptor") ? true : undefined,
    })),
    ratios: [
      ratio("postMessage structured clone"),
      ratio("postMessage transfer"),
      sender("postMessage structured clone"),
      sender("postMessage transfer"),
      {
        label:
          `sender cost, shared descriptor 64 MiB / 1 MiB (constant time: ~1; range ${
            range(xs1)
          })`,
        value: median(xs1),
      },
    ],
    notes: [
      "transfer detaches the sender's buffer; the shared descriptor leaves both sides holding the same bytes",
      `median of ${reps}; machine shared with other jobs`,
    ],
  }];
}

/**
 * Runs every scenario.
 *
 * @param options `quick` for a smoke run.
 * @returns The scenarios.
 */
export async function run(options: BenchOptions): Promise<Scenario[]> {
  options.progress?.("threads: uncontended");
  const a = uncontended(options.quick);
  if (Deno.args.includes("--uncontended")) return a;
  options.progress?.("threads: contended");
  const b = await contended(options.quick);
  options.progress?.("threads: hand-off");
  const c = await handOff(options.quick);
  return [...a, ...b, ...c];
}

if (import.meta.main) {
  for (const s of await run({ quick: Deno.args.includes("--quick") })) {
    console.log(`\n${renderScenario(s)}`);
  }
}
