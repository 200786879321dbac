/**
 * Room for growing requests on synthetic traces: peak held / peak live of a
 * default `CachingAllocator` over one pass and over 8 warm passes (what is
 * left live at a pass's end freed), and the device buffers made after the
 * first pass, on growing KV caches (4 caches side by side, each token's
 * blocks a steady step larger than the token before, two tokens live at once,
 * with fixed-size temporaries between) of several steps, and on traces
 * where nothing grows (log-uniform churn, the transformer and training
 * traces). (An earlier note said `GR_OFF=1` turned the room off: nothing
 * reads it; the figures are the same with it.) "step 4 KiB, 64 KiB base"
 * held 4.06x over 8 warm passes (1.10 in one) before giving back at a low
 * (a pass's start) was measured against the last cycle's peak: the
 * give-back back-off had converged to keeping every size the pass saw. Now
 * 1.1024 warm as in one pass, at 75 buffers made a pass: see
 * `growth_warm_passes.ts` (`--random=300` for random growing caches) and
 * the README's "Warm passes of a growing KV cache".
 *
 * Run: `deno run -A packages/caching/bench/growth_room.ts`
 *
 * @module
 */
import { CachingAllocator } from "../caching_allocator.ts";
import { MockSegmentSource } from "@allot/core";
import {
  type AllocationTrace,
  churnTrace,
  type TraceOp,
  trainingStepTrace,
  transformerInferenceTrace,
} from "../traces.ts";

/** A growing KV cache: `tokens` steps of `step` bytes each. */
function kvTrace(step: number, base: number, tokens: number): AllocationTrace {
  const ops: TraceOp[] = [];
  let id = 1;
  const prev: number[][] = [];
  for (let t = 0; t < tokens; t++) {
    const now: number[] = [];
    for (let k = 0; k < 4; k++) {
      ops.push({
        kind: "alloc",
        id,
        byteLength: base * (1 + k / 4) + step * t,
        tag: `kv${k}`,
      });
      now.push(id++);
    }
    for (const n of [base / 2, base / 8, 1000]) {
      ops.push({ kind: "alloc", id, byteLength: n, tag: "tmp" });
      ops.push({ kind: "free", id: id++ });
    }
    prev.push(now);
    if (prev.length > 2) {
      for (const x of prev.shift()!) ops.push({ kind: "free", id: x });
    }
  }
  for (const p of prev) for (const x of p) ops.push({ kind: "free", id: x });
  return { name: `kv step ${step}`, description: "", ops, warmupOps: 0 };
}

/** [peak held / live one pass, warm, buffers made after the first pass]. */
function run(trace: AllocationTrace, passes: number): string {
  const source = new MockSegmentSource({ capacityBytes: 2 ** 42 });
  const a = new CachingAllocator(source);
  const live = new Map<
    number,
    { b: ReturnType<typeof a.allocate>; n: number }
  >();
  let liveBytes = 0, peakLive = 0, peak = 0, onePass = "", first = 0;
  for (let pass = 0; pass < passes; pass++) {
    for (const op of trace.ops) {
      if (op.kind === "alloc") {
        live.set(op.id, { b: a.allocate(op.byteLength), n: op.byteLength });
        liveBytes += op.byteLength;
        if (liveBytes > peakLive) peakLive = liveBytes;
        if (a.reservedBytes > peak) peak = a.reservedBytes;
      } else if (op.kind === "free") {
        const l = live.get(op.id)!;
        live.delete(op.id);
        a.free(l.b);
        liveBytes -= l.n;
      }
    }
    for (const l of live.values()) a.free(l.b);
    live.clear();
    liveBytes = 0;
    if (pass === 0) {
      onePass = `${peak} / ${peakLive} = ${(peak / peakLive).toFixed(4)}`;
      first = source.allocationCount;
    }
  }
  return `| ${trace.name} | ${onePass} | ${peak} / ${peakLive} = ${
    (peak / peakLive).toFixed(4)
  } | ${source.allocationCount - first} |`;
}

console.log(
  "| trace | one pass: peak held / live | 8 passes | made after pass 1 |",
);
console.log("|---|---|---|---:|");
for (
  const [step, base, tokens] of [
    [64, 8192, 128],
    [512, 4096, 64],
    [4096, 65536, 64],
    [4096, 2 ** 20, 64],
    [2 ** 20, 2 ** 22, 48],
  ]
) console.log(run(kvTrace(step, base, tokens), 8));
for (const seed of [1, 2, 3]) {
  const t = churnTrace({ allocations: 4000, seed });
  t.name += ` seed ${seed}`;
  console.log(run(t, 3));
  const s = churnTrace({
    allocations: 4000,
    seed,
    maxByteLength: 2 ** 20,
    liveByteLength: 2 ** 24,
  });
  s.name += ` to 1 MiB, seed ${seed}`;
  console.log(run(s, 3));
}
console.log(run(transformerInferenceTrace(), 3));
console.log(run(trainingStepTrace(), 3));
