/**
 * The default `CachingAllocator` on growing and drifting workloads, warm
 * (one instance, 8 passes) and one pass: per workload, peak held / peak
 * live in pass 1 and over the 8 passes, and device buffers made in the last
 * pass (a GPU runtime pays for each). Workloads: the growing KV cache of
 * `growth_room.ts` (step 4 KiB, base 64 KiB, 64 tokens, 4 caches, 2 live),
 * one block growing 4 KiB a step from 4 KiB to 1 MiB (freed before the
 * next), the same to 16 MiB in 64 KiB steps, and, with `--random=N,seed`,
 * N random growing caches as `growth_warm_passes.ts --random` draws them.
 * The recorded traces: `packages/webgpu/bench/real_traces.ts`.
 *
 * Run: `deno run -A packages/caching/bench/growth_segments.ts [--random=2000,1]`
 *
 * @module
 */
import { CachingAllocator } from "../caching_allocator.ts";
import { MockSegmentSource } from "@allot/core";

const PASSES = 8;

type Pass = (take: (n: number) => number, give: (h: number) => void) => void;

/** One pass per call of `pass` on one allocator: the figures. */
export function measure(pass: Pass, passes = PASSES): {
  first: number;
  warm: number;
  lastMade: number;
  afterFirst: number;
} {
  const source = new MockSegmentSource({ capacityBytes: 2 ** 42 });
  const a = new CachingAllocator(source);
  const sizes = new Map<number, number>();
  let live = 0, peakLive = 0, peak = 0, first = 0, afterFirst = 0, lastMade = 0;
  const take = (n: number) => {
    const id = a.allocateId(n);
    sizes.set(id, n);
    live += n;
    if (live > peakLive) peakLive = live;
    if (a.reservedBytes > peak) peak = a.reservedBytes;
    return id;
  };
  const give = (id: number) => {
    live -= sizes.get(id)!;
    sizes.delete(id);
    a.freeById(id);
  };
  for (let p = 0; p < passes; p++) {
    const before = source.allocationCount;
    pass(take, give);
    lastMade = source.allocationCount - before;
    if (p === 0) first = peak / peakLive;
    else afterFirst += lastMade;
  }
  return { first, warm: peak / peakLive, lastMade, afterFirst };
}

/** The growing KV cache of `growth_room.ts`. */
export function kvPass(
  kv: {
    step: number;
    base: number;
    tokens: number;
    caches: number;
    window: number;
  },
): Pass {
  return (take, give) => {
    const steps: number[][] = [];
    for (let t = 0; t < kv.tokens; t++) {
      const now: number[] = [];
      for (let k = 0; k < kv.caches; k++) {
        now.push(take(kv.base * (1 + k / 4) + kv.step * t));
      }
      for (const n of [kv.base / 2, kv.base / 8, 1000]) give(take(n));
      steps.push(now);
      if (steps.length > kv.window) { for (const b of steps.shift()!) give(b); }
    }
    for (const s of steps) for (const b of s) give(b);
  };
}

/** One block growing by `step` from `from` to `to`, freed before the next. */
export function onePass(from: number, to: number, step: number): Pass {
  return (take, give) => {
    for (let n = from; n <= to; n += step) give(take(n));
  };
}

/** Two blocks growing side by side (the old one freed after the new is made). */
export function concatPass(from: number, to: number, step: number): Pass {
  return (take, give) => {
    let old = -1;
    for (let n = from; n <= to; n += step) {
      const b = take(n);
      if (old >= 0) give(old);
      old = b;
    }
    give(old);
  };
}

const row = (name: string, pass: Pass) => {
  const m = measure(pass);
  console.log(
    `| ${name} | ${m.first.toFixed(3)} | ${
      m.warm.toFixed(3)
    } | ${m.lastMade} | ${m.afterFirst} |`,
  );
};

if (import.meta.main) {
  console.log(
    "| workload | held/live pass 1 | warm (8 passes) | made in pass 8 | made after pass 1 |",
  );
  console.log("|---|---:|---:|---:|---:|");
  row(
    "KV 4 KiB step, 64 KiB base, 4 caches",
    kvPass({ step: 4096, base: 65536, tokens: 64, caches: 4, window: 2 }),
  );
  row(
    "KV 16 KiB step, 256 KiB base, 2 caches",
    kvPass({ step: 16384, base: 262144, tokens: 64, caches: 2, window: 1 }),
  );
  row("one block 4 KiB -> 1 MiB by 4 KiB", onePass(4096, 2 ** 20, 4096));
  row("one block 64 KiB -> 16 MiB by 64 KiB", onePass(65536, 2 ** 24, 65536));
  row("concat 4 KiB -> 1 MiB by 4 KiB", concatPass(4096, 2 ** 20, 4096));
  row(
    "concat 1 MiB -> 32 MiB by 256 KiB",
    concatPass(2 ** 20, 2 ** 25, 262144),
  );
  const random = Deno.args.find((a) => a.startsWith("--random="))?.slice(9);
  if (random !== undefined) {
    const [n, seed] = random.split(",").map(Number);
    let x = seed >>> 0;
    const next = () => (x = (x * 1664525 + 1013904223) >>> 0) / 2 ** 32;
    const int = (lo: number, hi: number) =>
      lo + Math.floor(next() * (hi - lo + 1));
    const warm: number[] = [], first: number[] = [];
    let after = 0, last = 0;
    for (let i = 0; i < n; i++) {
      const kv = {
        caches: int(1, 6),
        base: int(4, 256) * 4096,
        step: int(1, 64) * 256,
        tokens: int(16, 80),
        window: int(1, 3),
      };
      const m = measure(kvPass(kv));
      warm.push(m.warm);
      first.push(m.first);
      after += m.afterFirst;
      last += m.lastMade;
    }
    warm.sort((p, q) => p - q);
    first.sort((p, q) => p - q);
    const q = (v: number[], f: number) =>
      v[Math.min(v.length - 1, Math.floor(v.length * f))].toFixed(3);
    console.log(
      `\n${n} random caches (seed ${seed}): warm worst ${q(warm, 1)}, over 4x ${
        warm.filter((r) => r > 4).length
      }, p90 ${q(warm, 0.9)}, median ${q(warm, 0.5)}; pass 1 worst ${
        q(first, 1)
      }, p90 ${q(first, 0.9)}; made after pass 1 ${after}, in pass 8 ${last}`,
    );
  }
}
