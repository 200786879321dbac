/**
 * Pass by pass, what a default `CachingAllocator` holds on a growing KV
 * cache (the trace of `growth_room.ts`: `caches` caches side by side, each
 * token's blocks `step` bytes larger than the token before, `window` tokens
 * live at once, temporaries of base/2, base/8 and 1000 bytes between;
 * everything freed at a pass's end): each pass's peak held, held at its
 * end, device buffers made in it and segments held; `--at=N` lists the
 * segments held at pass N's peak (`#` a live block, `.` a free one, KiB).
 * What it showed (README, "Warm passes of a growing KV cache"): on step
 * 4 KiB, 64 KiB base, 75 buffers in pass 1 and none after, one segment per
 * size seen, 16,908,288 bytes (4.06x peak live) from pass 1 to pass 32.
 *
 * Run: `deno run -A packages/caching/bench/growth_warm_passes.ts
 * [--kv=step,base,tokens,caches,window] [--passes=32] [--at=1]`
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
