/**
 * In-process A/B of `StepPlannedPool` against itself at a git ref (default
 * `main`), on the recorded real traces (storage requests, mock segment
 * sources: the pool's own CPU work): per round a fresh pool of each side
 * runs one pass untimed, then `--passes` timed passes (the warm rounds of
 * `packages/webgpu/bench/real_traces.ts` measure passes 2 to 8 of one
 * instance; a pool's planning work falls in the first few), `endStep()`
 * included. Sides alternate within a round; `gc()` runs before each.
 * Prints ns per alloc or free (median; and the fastest round, which a loaded
 * machine disturbs least) and the ratios ref / now (median of the rounds'
 * ratios with their range, and of the fastest rounds).
 *
 * Run: `deno run -A --v8-flags=--expose-gc packages/caching/bench/step_planned_ab.ts [--ref=main] [--only=<part of a trace path>] [--rounds=9] [--passes=3]`
 *
 * @module
 */
import { MockSegmentSource } from "@allot/core";
import { readRecordedTrace } from "../../trace/_test_traces.ts";
import { type ReplayOps, traceOps } from "../../trace/mod.ts";
import * as now from "../mod.ts";
import { flag, importAtRef } from "../../../scripts/bench/import_at_ref.ts";
import { recordedTraceNames } from "../../../scripts/bench/recorded_traces.ts";

type Caching = typeof now;
const ref = flag("ref", "main");
const only = flag("only", "");
const rounds = Number(flag("rounds", "9"));
const passes = Number(flag("passes", "3"));
const before = await importAtRef<Caching>(ref, "caching/mod.ts");
const gc = (globalThis as { gc?: () => void }).gc;

interface Pool {
  allocate(n: number): unknown;
  free(b: unknown): void;
  endStep(): void;
}

/** One pass; returns ms spent in the pool (timed) and the ops. */
function pass(ops: ReplayOps, pool: Pool): [number, number] {
  const live = new Map<number, unknown>();
  let n = 0;
  const t = performance.now();
  for (let i = 0; i < ops.length; i++) {
    const c = ops.code[i];
    if (c === 0) {
      live.set(ops.id[i], pool.allocate(Math.max(1, ops.size[i])));
      n++;
    } else if (c === 1) {
      pool.free(live.get(ops.id[i]));
      live.delete(ops.id[i]);
      n++;
    } else if (c === 3) pool.endStep();
  }
  for (const b of live.values()) pool.free(b);
  pool.endStep();
  return [performance.now() - t, n];
}

const names = recordedTraceNames(only);

const sides = [
  { name: ref, lib: before as unknown as Caching },
  { name: "now", lib: now },
];
const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
console.log(
  `| trace | ${ref} ns/op (fastest) | now ns/op (fastest) | ${ref} / now, median of rounds (range) | ${ref} / now, fastest rounds |\n|---|---:|---:|---:|---:|`,
);
for (const name of names) {
  const ops = traceOps(await readRecordedTrace(name), "storage");
  const times: number[][] = [[], []];
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < 2; j++) {
      const k = (j + r) % 2;
      const pool = new sides[k].lib.StepPlannedPool(
        new MockSegmentSource({ alignment: 256 }),
      ) as unknown as Pool;
      pass(ops, pool);
      gc?.();
      let ms = 0, n = 0;
      for (let p = 0; p < passes; p++) {
        const [m, c] = pass(ops, pool);
        ms += m;
        n += c;
      }
      times[k].push(ms * 1e6 / n);
    }
  }
  const ratios = times[0].map((t, i) => t / times[1][i]);
  const best = times.map((t) => Math.min(...t));
  console.log(
    `| ${name} | ${median(times[0]).toFixed(0)} (${best[0].toFixed(0)}) | ${
      median(times[1]).toFixed(0)
    } (${best[1].toFixed(0)}) | ${median(ratios).toFixed(2)}× (${
      Math.min(...ratios).toFixed(2)
    }–${Math.max(...ratios).toFixed(2)}) | ${
      (best[0] / best[1]).toFixed(2)
    }× |`,
  );
}
