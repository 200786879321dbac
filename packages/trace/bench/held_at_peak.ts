/**
 * Where the default caching pool's held bytes go at their peak, on the
 * recorded real traces: each trace replayed through `CachingAllocator` with
 * its defaults (one per WebGPU usage, on mock devices, as the
 * `allot-caching` replay policy keeps them) up to the op (request or free) at which held
 * bytes first reach their peak, then per usage: bytes held, live (rounded),
 * free in whole free segments (which giving back could return), free inside
 * segments that still hold live blocks (which nothing but placement can
 * return), segments made and given back so far, and each such split
 * segment's blocks (`#` live, `.` free, KiB) with the step and request in
 * which its live blocks were made (op: index in the replayed request stream).
 *
 * Run: `deno run -A packages/trace/bench/held_at_peak.ts [--only=cnn] [--usage=all]`
 *
 * @module
 */
import { CachingAllocator } from "@allot/caching";
import { type MockMemory, MockSegmentSource } from "@allot/core";
import { readRecordedTrace } from "../_test_traces.ts";
import { type ReplayOps, traceOps } from "../mod.ts";
import { recordedTraceNames } from "../../../scripts/bench/recorded_traces.ts";

const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7) ?? "";
const usage = Deno.args.includes("--usage=all") ? "all" : "storage";
const KiB = (n: number) => (n / 1024).toFixed(1);

interface Pool {
  allocator: CachingAllocator<MockMemory>;
  source: MockSegmentSource;
}

/** Replays `ops` up to op `stop` (all of them when -1). */
function replay(ops: ReplayOps, stop: number) {
  const pools = new Map<number, Pool>();
  const live = new Map<number, {
    pool: Pool;
    block: ReturnType<CachingAllocator<MockMemory>["allocate"]>;
    size: number;
    op: number;
    step: number;
  }>();
  let step = 0, liveBytes = 0, peak = 0, peakAt = -1, peakLive = 0;
  for (let i = 0; i < ops.length && (stop < 0 || i <= stop); i++) {
    const code = ops.code[i];
    if (code === 0) {
      let pool = pools.get(ops.usage[i]);
      if (pool === undefined) {
        const source = new MockSegmentSource({ capacityBytes: 2 ** 40 });
        const allocator = new CachingAllocator(source, {
          recordHistory: { maxEntries: 1e7 },
        });
        pools.set(ops.usage[i], pool = { allocator, source });
      }
      const size = Math.max(1, ops.size[i]);
      const block = pool.allocator.allocate(size);
      live.set(ops.id[i], { pool, block, size, op: i, step });
      liveBytes += size;
      if (liveBytes > peakLive) peakLive = liveBytes;
      let held = 0;
      for (const p of pools.values()) held += p.source.reservedBytes;
      if (held > peak) peak = held, peakAt = i;
    } else if (code === 1) {
      const l = live.get(ops.id[i])!;
      live.delete(ops.id[i]);
      liveBytes -= l.size;
      l.block.release();
    } else if (code === 3) step++;
  }
  return { pools, live, step, liveBytes, peak, peakAt, peakLive };
}

const names = recordedTraceNames(only);

for (const name of names) {
  const ops = traceOps(await readRecordedTrace(name), usage);
  const full = replay(ops, -1);
  const at = replay(ops, full.peakAt);
  console.log(
    `\n## ${name} (${usage}): peak held ${KiB(full.peak)} KiB / peak live ${
      KiB(full.peakLive)
    } KiB = ${
      (full.peak / full.peakLive).toFixed(3)
    }; held peaks at op ${full.peakAt} (step ${at.step}), live then ${
      KiB(at.liveBytes)
    } KiB`,
  );
  const bornAt = new Map<number, string>();
  for (const l of at.live.values()) {
    bornAt.set(l.block.address, `step ${l.step} op ${l.op}`);
  }
  for (const [use, pool] of at.pools) {
    const snapshot = pool.allocator.snapshot();
    let active = 0, whole = 0, split = 0, made = 0, gone = 0;
    const lines: string[] = [];
    for (const segment of snapshot.segments) {
      active += segment.activeBytes;
      const free = segment.byteLength - segment.activeBytes;
      if (segment.activeBytes === 0) whole += free;
      else if (free > 0) {
        split += free;
        const map = segment.blocks.map((b) =>
          (b.state === "inactive" ? "." : "#") + KiB(b.byteLength)
        ).join(" ");
        const births = segment.blocks.filter((b) => b.state !== "inactive")
          .map((b) => bornAt.get(b.address) ?? "?").join(", ");
        lines.push(
          `  - ${segment.pool} segment ${
            KiB(segment.byteLength)
          } KiB: ${map} (live made in ${births})`,
        );
      }
    }
    for (const e of snapshot.history) {
      if (e.action === "segment_alloc") made++;
      else if (e.action === "segment_free") gone++;
    }
    console.log(
      `usage 0x${use.toString(16)}: held ${
        KiB(pool.source.reservedBytes)
      } KiB, live ${KiB(active)}, free in whole segments ${
        KiB(whole)
      }, free inside segments with live blocks ${
        KiB(split)
      }; ${made} segments made, ${gone} given back`,
    );
    for (const line of lines) console.log(line);
  }
}
