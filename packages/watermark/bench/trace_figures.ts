/**
 * The watermark column of `traces/figures.ts`, for several option sets side
 * by side: peak held / peak live for one pass and over 8 warm passes of one
 * instance, heaps made in the first pass, heaps made after it (remakes),
 * for storage buffers and for all buffers. One `WatermarkAllocator` per
 * usage on a mock device, as the `allot-watermark` replay policy keeps them.
 *
 *   deno run -A packages/watermark/bench/trace_figures.ts [--only=<part of a path>[,...]]
 *
 * @module
 */

import { type MockMemory, MockSegmentSource } from "@allot/core";
import {
  WatermarkAllocator,
  type WatermarkAllocatorOptions,
  type WatermarkBuffer,
} from "@allot/watermark";
import { type ReplayOps, traceOps } from "../../trace/mod.ts";
import { readTraceFile } from "../../trace/cli.ts";
import {
  recordedTraceNames,
  TRACES_DIR,
} from "../../../scripts/bench/recorded_traces.ts";
import { fileURLToPath } from "node:url";

const MiB = 2 ** 20;
const PASSES = 8;

/** The option sets compared: the heap sizes of the last landing, the defaults. */
export const VARIANTS: readonly [
  string,
  WatermarkAllocatorOptions<MockMemory>,
][] = [
  ["fixed", {
    minSmallHeapByteLength: 8 * MiB,
    minLargeHeapByteLength: 32 * MiB,
    minXlargeHeapByteLength: 2 ** 30,
  }],
  ["adaptive", {}],
];

class CountingSource extends MockSegmentSource {
  created = 0;
  override tryAllocateSegment(
    ...args: Parameters<MockSegmentSource["tryAllocateSegment"]>
  ): ReturnType<MockSegmentSource["tryAllocateSegment"]> {
    const s = super.tryAllocateSegment(...args);
    if (s) this.created++;
    return s;
  }
}

/** Figures of one option set on one trace. */
export interface Figures {
  peakLive: number;
  onePass: number;
  warm: number;
  madeFirst: number;
  madeAfterFirst: number;
}

/** Replays `ops` `PASSES` times through one allocator per usage. */
export function measureWatermark(
  ops: ReplayOps,
  options: WatermarkAllocatorOptions<MockMemory>,
): Figures {
  const pools = new Map<
    number,
    { a: WatermarkAllocator<MockMemory>; s: CountingSource }
  >();
  const live = new Map<number, WatermarkBuffer>();
  const size = new Map<number, number>();
  const held = () => {
    let n = 0;
    for (const p of pools.values()) n += p.s.reservedBytes;
    return n;
  };
  const made = () => {
    let n = 0;
    for (const p of pools.values()) n += p.s.created;
    return n;
  };
  let liveBytes = 0, peakLive = 0, peak = 0, onePass = 0, madeFirst = 0;
  for (let pass = 0; pass < PASSES; pass++) {
    for (let i = 0; i < ops.length; i++) {
      const c = ops.code[i];
      if (c === 0) {
        const n = Math.max(1, ops.size[i]);
        let p = pools.get(ops.usage[i]);
        if (p === undefined) {
          const s = new CountingSource({ capacityBytes: 2 ** 40 });
          p = { a: new WatermarkAllocator(s, options), s };
          pools.set(ops.usage[i], p);
        }
        live.set(ops.id[i], p.a.allocateBuffer(n));
        size.set(ops.id[i], n);
        liveBytes += n;
        if (liveBytes > peakLive) peakLive = liveBytes;
        const h = held();
        if (h > peak) peak = h;
      } else if (c === 1) {
        live.get(ops.id[i])!.release();
        live.delete(ops.id[i]);
        liveBytes -= size.get(ops.id[i])!;
        size.delete(ops.id[i]);
      }
    }
    for (const b of live.values()) b.release();
    live.clear();
    size.clear();
    liveBytes = 0;
    if (pass === 0) {
      onePass = peak;
      madeFirst = made();
    }
  }
  return {
    peakLive,
    onePass: onePass / peakLive,
    warm: peak / peakLive,
    madeFirst,
    madeAfterFirst: made() - madeFirst,
  };
}

if (import.meta.main) {
  const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7) ?? "";
  console.log(
    "Peak held / peak live: one pass, warm (8 passes); heaps made in the first pass / after it\n",
  );
  console.log(
    "| trace | usage | peak live MiB | " +
      VARIANTS.map(([n]) => n).join(" | ") + " |",
  );
  console.log("|---|---|---:|" + VARIANTS.map(() => "---:").join("|") + "|");
  const names = [
    ...new Set(only.split(",").flatMap((o) => recordedTraceNames(o))),
  ].sort();
  for (const name of names) {
    const trace = await readTraceFile(
      fileURLToPath(new URL(name, TRACES_DIR)),
    );
    for (const usage of ["storage", "all"] as const) {
      const ops = traceOps(trace, usage);
      const cells = VARIANTS.map(([, o]) => measureWatermark(ops, o));
      console.log(
        `| ${name.replace(".jsonl.gz", "")} | ${usage} | ${
          (cells[0].peakLive / MiB).toFixed(2)
        } | ` +
          cells.map((c) =>
            `${c.onePass.toFixed(3)}, ${
              c.warm.toFixed(3)
            }; ${c.madeFirst}/${c.madeAfterFirst}`
          ).join(" | ") + " |",
      );
    }
  }
}
