/**
 * A local stress trace for the benchmark, in `@allot/caching/traces`'
 * `AllocationTrace` format: log-uniform churn, where single requests reach a
 * fifth of the peak. The workload traces come from `@allot/caching/traces`.
 *
 * @module
 */

import type { AllocationTrace, TraceOp } from "@allot/caching/traces";

const MiB = 1024 * 1024;

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Random churn: log-uniform sizes from 256 bytes to 64 MiB, live bytes kept
 * below 256 MiB by freeing random buffers (and at random).
 *
 * @param allocations Allocations.
 * @param seed PRNG seed.
 * @returns The trace (no warm-up).
 */
export function churnTrace(allocations: number, seed = 3): AllocationTrace {
  const r = rng(seed);
  const ops: TraceOp[] = [];
  const live: { id: number; bytes: number }[] = [];
  let liveBytes = 0;
  const target = 256 * MiB;
  const lo = Math.log(256), hi = Math.log(64 * MiB);
  for (let id = 1; id <= allocations; id++) {
    const byteLength = Math.round(Math.exp(lo + r() * (hi - lo)));
    ops.push({ kind: "alloc", id, byteLength, tag: "churn" });
    live.push({ id, bytes: byteLength });
    liveBytes += byteLength;
    while (liveBytes > target || (live.length > 0 && r() < 0.3)) {
      const [x] = live.splice((r() * live.length) | 0, 1);
      ops.push({ kind: "free", id: x.id });
      liveBytes -= x.bytes;
    }
  }
  for (const x of live) ops.push({ kind: "free", id: x.id });
  return {
    name: "log-uniform-churn",
    description:
      `${allocations} allocations, 256 B to 64 MiB log-uniform, live bytes below 256 MiB`,
    ops,
    warmupOps: 0,
  };
}
