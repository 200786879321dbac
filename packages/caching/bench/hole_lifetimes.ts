/**
 * Why the default pool's segments have holes at its held peak, on the
 * recorded real traces: at the first pass's peak held (storage, one pass,
 * `CachingAllocator` with its defaults, as `held_breakdown.ts`), each
 * segment that holds both live blocks and free bytes is classed by what
 * pins it: the live block in it that is freed last (ops from the peak to its
 * free; "end" if never freed), and the free bytes it holds. Prints, per
 * trace, the hole bytes (share of peak live) by the pinning block's
 * remaining life, and the pool (small / large).
 *
 *   deno run -A packages/caching/bench/hole_lifetimes.ts [--only=<part of a trace path>] [--usage=storage|all]
 *
 * @module
 */

import { type ReplayOps, traceOps } from "@allot/trace";
import { readTraceFile } from "@allot/trace/cli";
import {
  recordedTraceNames,
  TRACES_DIR,
} from "../../../scripts/bench/recorded_traces.ts";
import { fileURLToPath } from "node:url";
import { replayToHeldPeaks } from "./held_breakdown.ts";

/** Hole bytes at the peak, by the pinning block's remaining life (ops). */
function holesAtPeak(ops: ReplayOps) {
  const freeAt = new Map<number, number>(); // op index of alloc -> of free
  const openAt = new Map<number, number>();
  for (let i = 0; i < ops.length; i++) {
    if (ops.code[i] === 0) openAt.set(ops.id[i], i);
    else if (ops.code[i] === 1) {
      freeAt.set(openAt.get(ops.id[i])!, i);
      openAt.delete(ops.id[i]);
    }
  }
  let peakRequest = 0, largestHole = 0, smallMax = 0;
  let rows: {
    pool: string;
    holes: number;
    rest: number;
    seg: number;
    liveIn: number;
  }[] = [];
  const peakLive = replayToHeldPeaks(ops, ({ pools, i, pool, live }) => {
    const byAddress = new Map<number, number>();
    for (const x of live.values()) byAddress.set(x.b.address, x.i);
    rows = [];
    peakRequest = Math.max(1, ops.size[i]);
    largestHole = 0;
    smallMax = pool.smallRequestMaxByteLength;
    for (const a of pools) {
      for (const s of a.snapshot().segments) {
        let holes = 0, last = 0, liveIn = 0, biggest = 0;
        for (const b of s.blocks) {
          if (b.state === "inactive") {
            holes += b.byteLength;
            if (b.byteLength > biggest) biggest = b.byteLength;
          } else {
            liveIn += b.byteLength;
            const at = byAddress.get(b.address)!;
            const f = freeAt.get(at) ?? Infinity;
            if (f - i > last) last = f - i;
          }
        }
        if (holes > 0 && liveIn > 0) {
          if (biggest > largestHole) largestHole = biggest;
          rows.push({
            pool: s.pool,
            holes,
            rest: last,
            seg: s.byteLength,
            liveIn,
          });
        }
      }
    }
  });
  return {
    peakLive,
    rows,
    length: ops.length,
    peakRequest,
    largestHole,
    smallMax,
  };
}

if (import.meta.main) {
  const arg = (name: string) =>
    Deno.args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const usage = arg("usage") === "all" ? "all" : "storage";
  const only = arg("only") ?? "";
  console.log(
    `Default CachingAllocator, ${usage} buffers, one pass: free bytes in segments that also hold live blocks at peak held (shares of peak live), by the pool and by how long the last live block in the segment stays live after the peak (ops of the trace)\n`,
  );
  console.log(
    "| trace | holes | small pool | large pool | pinned to the end | pinned > 1/4 of the trace | pinned < 1,000 ops | segments with holes | request at the peak | largest hole | small pool up to |",
  );
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const name of recordedTraceNames(only)) {
    const trace = await readTraceFile(fileURLToPath(new URL(name, TRACES_DIR)));
    const ops = traceOps(trace, usage);
    const { peakLive, rows, length, peakRequest, largestHole, smallMax } =
      holesAtPeak(ops);
    const sum = (f: (r: typeof rows[0]) => boolean) =>
      (rows.filter(f).reduce((n, r) => n + r.holes, 0) / peakLive).toFixed(4);
    console.log(
      `| ${name.replace(".jsonl.gz", "")} | ${sum(() => true)} | ${
        sum((r) => r.pool === "small")
      } | ${sum((r) => r.pool === "large")} | ${
        sum((r) => r.rest === Infinity)
      } | ${sum((r) => r.rest > length / 4)} | ${
        sum((r) => r.rest < 1000)
      } | ${rows.length} | ${peakRequest} | ${largestHole} | ${smallMax} |`,
    );
    if (Deno.args.includes("--segments")) {
      for (const r of rows.sort((x, y) => y.holes - x.holes).slice(0, 12)) {
        console.log(
          `   ${r.pool} segment ${r.seg}: live ${r.liveIn}, free ${r.holes}, pinned for ${r.rest} ops`,
        );
      }
    }
  }
}
