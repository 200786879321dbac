/**
 * Pass by pass, what a default `CachingAllocator` holds on a growing KV
 * cache (the trace of `growth_room.ts`: `caches` caches side by side, each
 * token's blocks `step` bytes larger than the token before, `window` tokens
 * live at once, temporaries of base/2, base/8 and 1000 bytes between;
 * everything freed at a pass's end): each pass's peak held, held at its
 * end, device buffers made in it and segments held; `--at=N` lists the
 * segments held at pass N's peak (`#` a live block, `.` a free one, KiB).
 * What it showed (README, "Warm passes of a growing KV cache"): on step
 * 4 KiB, 64 KiB base, before giving back at a low was measured against the
 * last cycle's peak, 75 buffers in pass 1 and none after, one segment per
 * size seen, 16,908,288 bytes (4.06x peak live) from pass 1 to pass 32; now
 * 4,587,520 (1.1024x) every pass, 75 buffers made in each.
 *
 * `--random=N[,seed]`: instead, N random growing caches (1-6 caches, base
 * 16 KiB-1 MiB in 4 KiB, step 256 B-16 KiB in 256 B, 16-80 tokens, 1-3
 * live), 8 passes each: how many hold more than 1.5x the first pass's peak
 * and more than 1.5x, 4x, 6x, 8x peak live over the 8 passes, the worst
 * (and its cache), the median and the 90th percentile, and the buffers made
 * after the first pass.
 *
 * Run: `deno run -A packages/caching/bench/growth_warm_passes.ts
 * [--kv=step,base,tokens,caches,window] [--passes=32] [--at=1]
 * [--random=300,1]`
 *
 * @module
 */
import { CachingAllocator } from "../caching_allocator.ts";
import { MockSegmentSource } from "@allot/core";

const arg = (name: string) =>
  Deno.args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const [step, base, tokens, caches, window] = (arg("kv") ?? "4096,65536,64,4,2")
  .split(",").map(Number);
const passes = Number(arg("passes") ?? 32);
const at = arg("at") === undefined ? -1 : Number(arg("at"));
const KiB = (n: number) => (n / 1024).toFixed(0);

const random = arg("random");
if (random !== undefined) {
  const [n, seed] = random.split(",").map(Number);
  randomCaches(n, seed ?? 1);
  Deno.exit(0);
}

const source = new MockSegmentSource({ capacityBytes: 2 ** 42 });
const a = new CachingAllocator(source);
type Block = ReturnType<typeof a.allocate>;
let live = 0, peakLive = 0;
const take = (n: number): Block => {
  live += n;
  if (live > peakLive) peakLive = live;
  return a.allocate(n);
};
const give = (b: Block) => {
  live -= b.byteLength;
  a.free(b);
};
console.log("| pass | peak held | held at end | made | segments |");
console.log("|---:|---:|---:|---:|---:|");
for (let pass = 0; pass < passes; pass++) {
  let peak = 0, lines: string[] = [];
  const made = source.allocationCount;
  const steps: Block[][] = [];
  const watch = () => {
    if (a.reservedBytes <= peak) return;
    peak = a.reservedBytes;
    if (pass !== at) return;
    lines = a.snapshot().segments.map((s) =>
      `  ${s.pool} ${KiB(s.byteLength)}: ${
        s.blocks.map((b) =>
          (b.state === "inactive" ? "." : "#") + KiB(b.byteLength)
        ).join(" ")
      }`
    );
  };
  for (let t = 0; t < tokens; t++) {
    const now: Block[] = [];
    for (let k = 0; k < caches; k++) {
      now.push(take(base * (1 + k / 4) + step * t));
      watch();
    }
    for (const n of [base / 2, base / 8, 1000]) {
      const b = take(n);
      watch();
      give(b);
    }
    steps.push(now);
    if (steps.length > window) { for (const b of steps.shift()!) give(b); }
  }
  for (const s of steps) for (const b of s) give(b);
  console.log(
    `| ${pass} | ${peak} (${
      (peak / peakLive).toFixed(4)
    }) | ${a.reservedBytes} | ${
      source.allocationCount - made
    } | ${a.snapshot().segments.length} |`,
  );
  for (const l of lines) console.log(l);
}

/** Peak held after each of `count` passes, buffers made in each, peak live. */
function passesOf(
  kv: {
    caches: number;
    base: number;
    step: number;
    tokens: number;
    window: number;
  },
  count: number,
): { held: number[]; made: number[]; live: number } {
  const source = new MockSegmentSource({ capacityBytes: 2 ** 42 });
  const a = new CachingAllocator(source);
  type Block = ReturnType<typeof a.allocate>;
  const held: number[] = [], made: number[] = [];
  let peak = 0, live = 0, peakLive = 0;
  const take = (n: number): Block => {
    const b = a.allocate(n);
    live += n;
    if (live > peakLive) peakLive = live;
    if (a.reservedBytes > peak) peak = a.reservedBytes;
    return b;
  };
  const give = (b: Block) => {
    live -= b.byteLength;
    a.free(b);
  };
  for (let pass = 0; pass < count; pass++) {
    const before = source.allocationCount;
    const steps: Block[][] = [];
    for (let t = 0; t < kv.tokens; t++) {
      const now: Block[] = [];
      for (let k = 0; k < kv.caches; k++) {
        now.push(take(kv.base * (1 + k / 4) + kv.step * t));
      }
      for (const n of [kv.base / 2, kv.base / 8, 1000]) give(take(n));
      steps.push(now);
      if (steps.length > kv.window) { for (const b of steps.shift()!) give(b); }
    }
    for (const s of steps) for (const b of s) give(b);
    held.push(peak);
    made.push(source.allocationCount - before);
  }
  return { held, made, live: peakLive };
}

/** `--random=N,seed`: the distribution over N random growing caches. */
function randomCaches(n: number, seed: number): void {
  let x = seed >>> 0;
  const next = () => (x = (x * 1664525 + 1013904223) >>> 0) / 2 ** 32;
  const int = (lo: number, hi: number) =>
    lo + Math.floor(next() * (hi - lo + 1));
  const overLive = [1.5, 4, 6, 8].map(() => 0);
  let overFirst = 0, worst = 0, worstFirst = 0, worstKv = "", after = 0;
  const ratios: number[] = [];
  for (let i = 0; i < n; i++) {
    const kv = {
      caches: int(1, 6),
      base: int(4, 256) * 4096,
      step: int(1, 64) * 256,
      tokens: int(16, 80),
      window: int(1, 3),
    };
    const { held, made, live } = passesOf(kv, 8);
    const r = held[7] / live, f = held[7] / held[0];
    ratios.push(r);
    [1.5, 4, 6, 8].forEach((b, j) => r > b && overLive[j]++);
    if (f > 1.5) overFirst++;
    if (f > worstFirst) worstFirst = f;
    if (r > worst) [worst, worstKv] = [r, JSON.stringify(kv)];
    after += made.slice(1).reduce((s, m) => s + m, 0);
  }
  ratios.sort((p, q) => p - q);
  console.log(
    `${n} random growing caches (seed ${seed}), 8 passes: over 1.5x the first pass ${overFirst} (worst ${
      worstFirst.toFixed(3)
    }); peak held / live over 1.5, 4, 6, 8: ${overLive.join(", ")}; worst ${
      worst.toFixed(3)
    } ${worstKv}; median ${ratios[n >> 1].toFixed(3)}, 90th percentile ${
      ratios[Math.floor(n * 0.9)].toFixed(3)
    }; buffers made after the first pass ${after}`,
  );
}
