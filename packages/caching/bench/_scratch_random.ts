import { CachingAllocator } from "../caching_allocator.ts";
import { MockSegmentSource } from "@allot/core";
interface Kv { caches: number; base: number; step: number; tokens: number; window: number }
function passes(kv: Kv, count: number) {
  const src = new MockSegmentSource({ capacityBytes: 2 ** 42 });
  const a = new CachingAllocator(src);
  const held: number[] = []; let peak = 0, live = 0, peakLive = 0; const made: number[] = [];
  const take = (n: number) => { const b = a.allocate(n); live += n; if (live > peakLive) peakLive = live; if (a.reservedBytes > peak) peak = a.reservedBytes; return b; };
  const give = (b: ReturnType<typeof take>) => { live -= b.byteLength; a.free(b); };
  for (let pass = 0; pass < count; pass++) {
    const m0 = src.allocationCount;
    const steps: ReturnType<typeof take>[][] = [];
    for (let t = 0; t < kv.tokens; t++) {
      const now = [];
      for (let k = 0; k < kv.caches; k++) now.push(take(kv.base * (1 + k / 4) + kv.step * t));
      for (const n of [kv.base / 2, kv.base / 8, 1000]) give(take(n));
      steps.push(now);
      if (steps.length > kv.window) for (const b of steps.shift()!) give(b);
    }
    for (const s of steps) for (const b of s) give(b);
    held.push(peak); made.push(src.allocationCount - m0);
  }
  return { held, live: peakLive, made };
}
let seed = Number(Deno.args[0] ?? 1);
const rnd = () => { seed = (seed * 1664525 + 1013904223) >>> 0; return seed / 2 ** 32; };
const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
const N = Number(Deno.args[1] ?? 300);
let over = 0, overLive = 0, worst = 0, worstLive = 0, worstKv = "", madeAfter = 0, withMade = 0, worstOne = 0;
const rs: number[] = [];
for (let i = 0; i < N; i++) {
  const kv = { caches: int(1, 6), base: int(4, 256) * 4096, step: int(1, 64) * 256, tokens: int(16, 80), window: int(1, 3) };
  const { held, live, made } = passes(kv, 8);
  const r = held[7] / held[0], rl = held[7] / live;
  rs.push(rl);
  if (r > 1.5) { over++; if (Deno.env.get("LIST")) console.log(r.toFixed(2), (held[0]/live).toFixed(2), JSON.stringify(kv), made.join(",")); }
  if (rl > 1.5) overLive++;
  if (r > worst) { worst = r; worstKv = JSON.stringify(kv); }
  if (rl > worstLive) worstLive = rl;
  if (held[0] / live > worstOne) worstOne = held[0] / live;
  const late = made.slice(1).reduce((x, y) => x + y, 0);
  madeAfter += late; if (late > 0) withMade++;
}
rs.sort((a, b) => a - b);
console.log(`N=${N} warm/first>1.5: ${over}, worst ${worst.toFixed(3)} ${worstKv}; warm/live>1.5: ${overLive}, worst ${worstLive.toFixed(3)}, median ${rs[N>>1].toFixed(3)} p90 ${rs[Math.floor(N*0.9)].toFixed(3)}; one-pass worst ${worstOne.toFixed(3)}; made after pass1 total ${madeAfter} in ${withMade} caches`);
