/**
 * Where the default pool's held bytes go on the recorded real traces: at the
 * first pass's peak held, peak held / peak live split into what is live, the
 * rounding inside live blocks (granule padding), free blocks inside segments
 * that also hold live ones (tails and holes), and whole free segments; with
 * the floor that any pool rounding blocks to 512 or 256 bytes reaches (the
 * most rounded live bytes at any time over peak live; an exact-size pool
 * reaches 1.000). `CachingAllocator` with its defaults, one per usage, as
 * `GpuCachingAllocator` keeps them, on mock devices; exact.
 *
 * `--pools` adds the holes and whole free segments of the large pool alone
 * (the small pool's are the rest): a held peak set by tails of large
 * segments pinned by blocks of a later phase's smaller sizes, or by idle
 * small segments the peak rule keeps (see the caching README, "The sixth
 * hold-out set").
 *
 *   deno run -A packages/caching/bench/held_breakdown.ts [--usage=storage|all] [--only=<part of a trace path>] [--pools]
 *
 * @module
 */

import { type CachedBlock, CachingAllocator } from "../mod.ts";
import { type MockMemory, MockSegmentSource } from "@allot/core";
import { type ReplayOps, traceOps } from "@allot/trace";
import { readTraceFile } from "@allot/trace/cli";
import {
  recordedTraceNames,
  TRACES_DIR,
} from "../../../scripts/bench/recorded_traces.ts";
import { fileURLToPath } from "node:url";

/** Held bytes at one moment, by where they go. */
interface Breakdown {
  held: number;
  live: number;
  padding: number;
  holes: number;
  wholeFree: number;
  /** Of `holes` and `wholeFree`, the large pool's. */
  largeHoles: number;
  largeWholeFree: number;
  segments: number;
}

/** A live block of {@linkcode replayToHeldPeaks}: its pool and op index. */
export interface PeakReplayBlock {
  a: CachingAllocator<MockMemory>;
  b: CachedBlock<MockMemory>;
  /** Index of the op that allocated it. */
  i: number;
}

/**
 * One pass of `ops` through one default `CachingAllocator` per usage (mock
 * devices, requests of at least 1 byte), calling `onPeak` after every
 * allocation that raises the bytes held by all pools together; everything
 * is freed and emptied at the end.
 *
 * @param ops The trace's request stream.
 * @param onPeak Called with the pools, the held and live bytes, the op
 * index, the allocating pool and the live blocks by trace id.
 * @returns The peak live bytes.
 */
export function replayToHeldPeaks(
  ops: ReplayOps,
  onPeak: (peak: {
    pools: CachingAllocator<MockMemory>[];
    held: number;
    liveBytes: number;
    i: number;
    pool: CachingAllocator<MockMemory>;
    live: ReadonlyMap<number, PeakReplayBlock>;
  }) => void,
): number {
  const pools = new Map<
    number,
    { a: CachingAllocator<MockMemory>; source: MockSegmentSource }
  >();
  const live = new Map<number, PeakReplayBlock>();
  let liveBytes = 0, peakLive = 0, peak = -1;
  const held = () => {
    let n = 0;
    for (const p of pools.values()) n += p.source.reservedBytes;
    return n;
  };
  for (let i = 0; i < ops.length; i++) {
    const c = ops.code[i];
    if (c === 0) {
      let p = pools.get(ops.usage[i]);
      if (p === undefined) {
        const source = new MockSegmentSource({ capacityBytes: 2 ** 40 });
        p = { a: new CachingAllocator(source), source };
        pools.set(ops.usage[i], p);
      }
      const n = Math.max(1, ops.size[i]);
      live.set(ops.id[i], { a: p.a, b: p.a.allocate(n), i });
      liveBytes += n;
      if (liveBytes > peakLive) peakLive = liveBytes;
      const h = held();
      if (h > peak) {
        peak = h;
        onPeak({
          pools: [...pools.values()].map((x) => x.a),
          held: h,
          liveBytes,
          i,
          pool: p.a,
          live,
        });
      }
    } else if (c === 1) {
      const x = live.get(ops.id[i])!;
      x.a.free(x.b);
      live.delete(ops.id[i]);
      liveBytes -= Math.max(1, ops.size[x.i]);
    }
  }
  for (const x of live.values()) x.a.free(x.b);
  for (const p of pools.values()) p.a.emptyCache();
  return peakLive;
}

/** One pass, one default allocator per usage: the breakdown at peak held. */
export function breakdownAtPeak(ops: ReplayOps): {
  peakLive: number;
  at: Breakdown;
} {
  let at: Breakdown | undefined;
  const peakLive = replayToHeldPeaks(ops, ({ pools, held, liveBytes }) => {
    at = describe(pools, held, liveBytes);
  });
  return { peakLive, at: at! };
}

function describe(
  pools: readonly CachingAllocator<MockMemory>[],
  held: number,
  live: number,
): Breakdown {
  let allocated = 0, requested = 0, holes = 0, wholeFree = 0, segments = 0;
  let largeHoles = 0, largeWholeFree = 0;
  for (const a of pools) {
    for (const s of a.snapshot().segments) {
      segments++;
      const large = s.pool === "large";
      if (s.blocks.length === 1 && s.blocks[0].state === "inactive") {
        wholeFree += s.byteLength;
        if (large) largeWholeFree += s.byteLength;
        continue;
      }
      for (const b of s.blocks) {
        if (b.state === "inactive") {
          holes += b.byteLength;
          if (large) largeHoles += b.byteLength;
        } else {
          allocated += b.byteLength;
          requested += b.requestedByteLength;
        }
      }
    }
  }
  return {
    held,
    live,
    padding: allocated - requested,
    holes,
    wholeFree,
    largeHoles,
    largeWholeFree,
    segments,
  };
}

/** The most rounded live bytes at any time over peak live bytes. */
export function granuleFloor(ops: ReplayOps, granule: number): number {
  const sizes = new Map<number, number>();
  let live = 0, rounded = 0, peakLive = 0, peakRounded = 0;
  for (let i = 0; i < ops.length; i++) {
    if (ops.code[i] === 0) {
      const n = Math.max(1, ops.size[i]);
      sizes.set(ops.id[i], n);
      live += n;
      rounded += Math.ceil(n / granule) * granule;
      peakLive = Math.max(peakLive, live);
      peakRounded = Math.max(peakRounded, rounded);
    } else if (ops.code[i] === 1) {
      const n = sizes.get(ops.id[i])!;
      sizes.delete(ops.id[i]);
      live -= n;
      rounded -= Math.ceil(n / granule) * granule;
    }
  }
  return peakRounded / peakLive;
}

if (import.meta.main) {
  const arg = (name: string) =>
    Deno.args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const usage = arg("usage") === "all" ? "all" : "storage";
  const only = arg("only") ?? "";
  const byPool = Deno.args.includes("--pools");
  const r = (x: number, live: number) => (x / live).toFixed(4);
  console.log(
    `Default CachingAllocator, ${usage} buffers, one pass: peak held / peak live and its parts (shares of peak live) at peak held; floors of 512- and 256-byte granules\n`,
  );
  console.log(
    "| trace | held | live then | padding | holes in segments | whole free segments | segments | floor 512 | floor 256 |" +
      (byPool ? " large-pool holes | large-pool whole free |" : ""),
  );
  console.log(
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|" +
      (byPool ? "---:|---:|" : ""),
  );
  for (const name of recordedTraceNames(only)) {
    const trace = await readTraceFile(fileURLToPath(new URL(name, TRACES_DIR)));
    const ops = traceOps(trace, usage);
    const { peakLive, at } = breakdownAtPeak(ops);
    console.log(
      `| ${name.replace(".jsonl.gz", "")} | ${r(at.held, peakLive)} | ${
        r(at.live, peakLive)
      } | ${r(at.padding, peakLive)} | ${r(at.holes, peakLive)} | ${
        r(at.wholeFree, peakLive)
      } | ${at.segments} | ${granuleFloor(ops, 512).toFixed(4)} | ${
        granuleFloor(ops, 256).toFixed(4)
      } |` +
        (byPool
          ? ` ${r(at.largeHoles, peakLive)} | ${
            r(at.largeWholeFree, peakLive)
          } |`
          : ""),
    );
  }
}
