/**
 * A load phase, then steps that grow storage, through two `CachingAllocator`s
 * (uploads, storage) alone and in one `CachingGroup` (exact, mock devices):
 * 60 weight uploads of 64 KiB to 1 MiB, each freed once copied into storage
 * (the weights stay live), then 10 steps of the same 300 storage tensors of
 * 4 KiB to 404 KiB, 40 live at a time. Prints peak held / peak live, the
 * buffers made after the first step and the upload bytes held at the end.
 *
 * Run: `deno run -A packages/caching/bench/group_load_phase.ts`
 *
 * @module
 */

import { type CachedBlock, CachingAllocator, CachingGroup } from "../mod.ts";
import { type MockMemory, MockSegmentSource } from "@allot/core";

/** A small deterministic generator (LCG), in [0, 1). */
function lcg(seed: number): () => number {
  return () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
}

/** One run: [peak held / peak live, buffers made after step 1, uploads held]. */
export function loadPhase(grouped: boolean): [number, number, number] {
  const r = lcg(7);
  const group = new CachingGroup();
  const upSource = new MockSegmentSource(), stSource = new MockSegmentSource();
  const options = grouped ? { group } : {};
  const uploads = new CachingAllocator(upSource, options);
  const storage = new CachingAllocator(stSource, options);
  let peak = 0, live = 0, peakLive = 0;
  const note = (n: number): void => {
    live += n;
    if (live > peakLive) peakLive = live;
    const held = upSource.reservedBytes + stSource.reservedBytes;
    if (held > peak) peak = held;
  };
  const weights: CachedBlock<MockMemory>[] = [];
  for (let i = 0; i < 60; i++) {
    const n = Math.floor(64 * 1024 + r() * 960 * 1024);
    const u = uploads.allocate(n);
    note(n);
    weights.push(storage.allocate(n));
    note(n);
    uploads.free(u);
    live -= n;
  }
  const sizes = Array.from(
    { length: 300 },
    () => Math.floor(4096 + r() * 400 * 1024),
  );
  let madeFirst = 0;
  for (let step = 0; step < 10; step++) {
    const t: [CachedBlock<MockMemory>, number][] = [];
    for (const n of sizes) {
      t.push([storage.allocate(n), n]);
      note(n);
      if (t.length > 40) {
        const [b, m] = t.shift()!;
        storage.free(b);
        live -= m;
      }
    }
    for (const [b, m] of t) {
      storage.free(b);
      live -= m;
    }
    if (step === 0) {
      madeFirst = upSource.allocationCount + stSource.allocationCount;
    }
  }
  for (const w of weights) storage.free(w);
  return [
    peak / peakLive,
    upSource.allocationCount + stSource.allocationCount - madeFirst,
    upSource.reservedBytes,
  ];
}

if (import.meta.main) {
  console.log(
    "| allocators | peak held / live | made after step 1 | uploads held |",
  );
  console.log("|---|---:|---:|---:|");
  for (const grouped of [false, true]) {
    const [ratio, made, held] = loadPhase(grouped);
    console.log(
      `| ${grouped ? "one CachingGroup" : "alone"} | ${
        ratio.toFixed(3)
      } | ${made} | ${held} |`,
    );
  }
}
