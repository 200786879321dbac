/**
 * Adaptive heap sizes against the fixed MPS sizes of the last landing
 * (`trace_figures.ts`'s `VARIANTS`), on the traces of `run.ts`: peak device
 * bytes over peak requested bytes under pressure (capacity 1.5x, 1.25x,
 * 1.1x), out-of-memory failures and heaps made; then replay time without a
 * memory limit, the two option sets interleaved, repeated, each run on a
 * fresh allocator.
 *
 *   deno run -A packages/watermark/bench/heaps_ab.ts [--quick] [--rounds=<n>]
 *
 * @module
 */

import { type MockMemory, MockSegmentSource } from "@allot/core";
import {
  WatermarkAllocator,
  type WatermarkAllocatorOptions,
  type WatermarkBuffer,
} from "@allot/watermark";
import {
  type AllocationTrace,
  summarizeTrace,
  trainingStepTrace,
  transformerInferenceTrace,
} from "@allot/caching/traces";
import { churnTrace } from "./_traces.ts";

const MiB = 2 ** 20, GiB = 2 ** 30;

/**
 * The option sets compared on a device of `capacity` bytes: the fixed heap
 * sizes of the last landing (the smallest heap of each class is its
 * largest, the extra-large one the default for the capacity), the defaults.
 */
function variants(
  capacity: number,
): [string, WatermarkAllocatorOptions<MockMemory>][] {
  const xlarge = !Number.isFinite(capacity) || capacity >= 16 * GiB
    ? GiB
    : Math.max(
      32 * MiB,
      Math.min(GiB, 2 ** Math.floor(Math.log2(capacity / 16))),
    );
  return [
    ["fixed", {
      minSmallHeapByteLength: 8 * MiB,
      minLargeHeapByteLength: 32 * MiB,
      xlargeHeapByteLength: xlarge,
      minXlargeHeapByteLength: xlarge,
    }],
    ["adaptive", {}],
  ];
}
const VARIANTS = variants(Infinity);

function replay(
  trace: AllocationTrace,
  capacityBytes: number,
  options: WatermarkAllocatorOptions<MockMemory>,
): { peak: number; failures: number; heaps: number; ms: number } {
  const device = new MockSegmentSource({ capacityBytes });
  const finite = Number.isFinite(capacityBytes);
  const allocator = new WatermarkAllocator(device, {
    highWatermarkRatio: finite ? 1 : 0,
    lowWatermarkRatio: finite ? 0.6 : 0,
    ...options,
  });
  const live = new Map<number, WatermarkBuffer>();
  let failures = 0;
  const t0 = performance.now();
  for (const e of trace.ops) {
    if (e.kind === "alloc") {
      const b = allocator.tryAllocateBuffer(e.byteLength);
      if (b === undefined) failures++;
      else live.set(e.id, b);
    } else if (e.kind === "free") {
      const b = live.get(e.id);
      if (b !== undefined) {
        live.delete(e.id);
        b.release();
      }
    }
  }
  const ms = performance.now() - t0;
  const made = allocator.memoryStats().segment.all.allocated;
  allocator.emptyCache();
  return { peak: device.peakReservedBytes, failures, heaps: made, ms };
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  const rounds = Number(
    Deno.args.find((a) => a.startsWith("--rounds="))?.slice(9) ??
      (quick ? 2 : 7),
  );
  const traces: [string, AllocationTrace][] = quick
    ? [
      ["inference", transformerInferenceTrace({ layers: 4, rounds: 2 })],
      ["training", trainingStepTrace({ layers: 2, steps: 3 })],
      ["churn", churnTrace(2000)],
    ]
    : [
      ["inference", transformerInferenceTrace()],
      ["training", trainingStepTrace()],
      ["churn", churnTrace(40000)],
    ];
  console.log(
    "| trace | capacity | " + VARIANTS.map(([n]) => n).join(" | ") + " |",
  );
  console.log("|---|---|" + VARIANTS.map(() => "---").join("|") + "|");
  for (const [name, trace] of traces) {
    const peak = summarizeTrace(trace).peakRequestedBytes;
    for (const headroom of [1.5, 1.25, 1.1, Infinity]) {
      const capacity = Number.isFinite(headroom)
        ? Math.ceil(peak * headroom / 4096) * 4096
        : Infinity;
      const cells = variants(capacity).map(([, o]) => {
        const r = replay(trace, capacity, o);
        return `${
          (r.peak / peak).toFixed(3)
        }, ${r.failures} OOM, ${r.heaps} heaps`;
      });
      console.log(`| ${name} | ${headroom}x | ${cells.join(" | ")} |`);
    }
  }
  console.log(
    `\nReplay ms without a limit, ${rounds} interleaved rounds (min-max; median)`,
  );
  for (const [name, trace] of traces) {
    const times = VARIANTS.map(() => [] as number[]);
    for (let r = 0; r < rounds; r++) {
      for (let v = 0; v < VARIANTS.length; v++) {
        const k = (v + r) % VARIANTS.length;
        times[k].push(replay(trace, Infinity, VARIANTS[k][1]).ms);
      }
    }
    const cells = times.map((t) => {
      t.sort((a, b) => a - b);
      return `${t[0].toFixed(0)}-${t[t.length - 1].toFixed(0)}; ${
        t[t.length >> 1].toFixed(0)
      }`;
    });
    console.log(
      `${name}: ` +
        VARIANTS.map(([n], i) => `${n} ${cells[i]}`).join(", "),
    );
  }
}
