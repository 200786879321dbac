/**
 * In-process A/B of warm `StepPlannedPool`s: this working tree's, the same
 * pool at a git ref (default `main`) and the default `CachingAllocator` (the
 * pool `GpuCachingAllocator` runs), on the recorded real traces (storage
 * requests, mock segment sources: the pools' own CPU work). Each side keeps
 * one instance: two untimed passes, then `--rounds` timed passes each, the
 * sides' order rotated per round, timed by the thread's CPU clock where the
 * platform has one (a loaded machine's other threads cost this one little).
 * Prints ns per alloc (median over rounds) and the medians of the rounds'
 * ratios. The same harness against an identical copy (`--ref=HEAD` on a
 * clean tree) gave 0.89-1.07 on a loaded 2-core machine: only effects
 * beyond that mean anything.
 *
 * Run: `deno run -A packages/caching/bench/step_planned_warm_ab.ts [--ref=main] [--only=<part of a trace path>[,<another>...]] [--rounds=11]`
 *
 * @module
 */
import { MockSegmentSource } from "@allot/core";
import { readRecordedTrace } from "../../trace/_test_traces.ts";
import { type ReplayOps, traceOps } from "../../trace/mod.ts";
import * as now from "../mod.ts";
import { flag, importAtRef } from "../../../scripts/bench/import_at_ref.ts";
import { recordedTraceNames } from "../../../scripts/bench/recorded_traces.ts";
import { threadCpuClock } from "../../webgpu/bench/_replay_pass.ts";

type Caching = typeof now;
const ref = flag("ref", "main");
const only = flag("only", "");
const rounds = Number(flag("rounds", "11"));
const before = await importAtRef<Caching>(ref, "caching/mod.ts");
const clock = threadCpuClock() ?? (() => performance.now());

interface Pool {
  allocate(n: number): unknown;
  free(b: unknown): void;
}

/** One pass; returns ns per allocation (`endStep()` included when `step`). */
function pass(ops: ReplayOps, pool: Pool, step?: () => void): number {
  const live = new Map<number, unknown>();
  let n = 0;
  const t = clock();
  for (let i = 0; i < ops.length; i++) {
    const c = ops.code[i];
    if (c === 0) {
      live.set(ops.id[i], pool.allocate(Math.max(1, ops.size[i])));
      n++;
    } else if (c === 1) {
      pool.free(live.get(ops.id[i]));
      live.delete(ops.id[i]);
    } else if (c === 3) step?.();
  }
  for (const b of live.values()) pool.free(b);
  step?.();
  return (clock() - t) * 1e6 / n;
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
const names = [
  ...new Set(only.split(",").flatMap((o) => recordedTraceNames(o))),
].sort();
console.log(
  `| trace | now ns | ${ref} ns | CachingAllocator ns | ${ref} / now | CachingAllocator / now | CachingAllocator / ${ref} |\n|---|---:|---:|---:|---:|---:|---:|`,
);
for (const name of names) {
  const ops = traceOps(await readRecordedTrace(name), "storage");
  const source = () => new MockSegmentSource({ alignment: 256 });
  const a = new now.StepPlannedPool(source()) as unknown as Pool & {
    endStep(): void;
  };
  const b = new before.StepPlannedPool(source()) as unknown as Pool & {
    endStep(): void;
  };
  const c = new now.CachingAllocator(source()) as unknown as Pool;
  const sides: (() => number)[] = [
    () => pass(ops, a, () => a.endStep()),
    () => pass(ops, b, () => b.endStep()),
    () => pass(ops, c),
  ];
  for (const side of sides) side(), side();
  const t: number[][] = sides.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < sides.length; j++) {
      const k = (j + r) % sides.length;
      t[k].push(sides[k]());
    }
  }
  const ratio = (x: number, y: number) =>
    median(t[x].map((v, i) => t[y][i] / v)).toFixed(2);
  console.log(
    `| ${name.replace(".jsonl.gz", "")} | ${median(t[0]).toFixed(0)} | ${
      median(t[1]).toFixed(0)
    } | ${median(t[2]).toFixed(0)} | ${ratio(0, 1)} | ${ratio(0, 2)} | ${
      ratio(1, 2)
    } |`,
  );
}
