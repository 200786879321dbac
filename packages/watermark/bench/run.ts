/**
 * Benchmark of `@allot/watermark`: replays `@allot/caching/traces`'
 * transformer-inference and training-step traces (and a local churn stress
 * trace) through the watermark allocator and `@allot/caching`'s caching
 * allocator on the same mock device, with a capacity that forces memory
 * pressure, and reports peak device bytes over peak requested bytes,
 * garbage-collection passes and out-of-memory failures; plus replay speed
 * without pressure.
 *
 * Run: `deno run -A packages/watermark/bench/run.ts [--quick]`
 *
 * @module
 */

import { MockSegmentSource } from "@allot/core";
import { type CachedBlock, CachingAllocator } from "@allot/caching";
import { WatermarkAllocator, type WatermarkBuffer } from "@allot/watermark";
import type {
  BenchOptions,
  Ratio,
  Scenario,
} from "../../../scripts/bench/types.ts";
import {
  type AllocationTrace,
  summarizeTrace,
  trainingStepTrace,
  transformerInferenceTrace,
} from "@allot/caching/traces";
import { churnTrace } from "./_traces.ts";

/** A trace with its peak of live requested bytes. */
interface Trace {
  name: string;
  ops: AllocationTrace["ops"];
  peakRequestedBytes: number;
}

function withPeak(trace: AllocationTrace, name: string): Trace {
  return {
    name,
    ops: trace.ops,
    peakRequestedBytes: summarizeTrace(trace).peakRequestedBytes,
  };
}

/** What one replay measured. */
interface Replay {
  peakDeviceBytes: number;
  failures: number;
  allocations: number;
  gcPasses: number;
  ms: number;
}

/** Low watermark as a share of capacity in the pressure scenarios. */
const LOW_RATIO = 0.6;

function replayWatermark(trace: Trace, capacityBytes: number): Replay {
  const device = new MockSegmentSource({ capacityBytes });
  const finite = Number.isFinite(capacityBytes);
  const allocator = new WatermarkAllocator(device, {
    highWatermarkRatio: finite ? 1 : 0,
    lowWatermarkRatio: finite ? LOW_RATIO : 0,
  });
  const live = new Map<number, WatermarkBuffer>();
  let failures = 0, allocations = 0;
  const t0 = performance.now();
  for (const e of trace.ops) {
    if (e.kind === "alloc") {
      allocations++;
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
  allocator.emptyCache();
  if (device.reservedBytes !== 0) throw new Error("watermark replay leaked");
  return {
    peakDeviceBytes: device.peakReservedBytes,
    failures,
    allocations,
    gcPasses: allocator.stats().numGarbageCollections,
    ms,
  };
}

function replayCaching(trace: Trace, capacityBytes: number): Replay {
  const device = new MockSegmentSource({ capacityBytes });
  const allocator = new CachingAllocator(device);
  const live = new Map<number, CachedBlock>();
  let failures = 0, allocations = 0;
  const t0 = performance.now();
  for (const e of trace.ops) {
    if (e.kind === "alloc") {
      allocations++;
      try {
        live.set(e.id, allocator.allocate(e.byteLength));
      } catch (error) {
        if (!(error instanceof Error) || !/memory/i.test(error.name)) {
          throw error;
        }
        failures++;
      }
    } else if (e.kind === "free") {
      const b = live.get(e.id);
      if (b !== undefined) {
        live.delete(e.id);
        b.release();
      }
    }
  }
  const ms = performance.now() - t0;
  allocator.emptyCache();
  if (device.reservedBytes !== 0) throw new Error("caching replay leaked");
  return {
    peakDeviceBytes: device.peakReservedBytes,
    failures,
    allocations,
    gcPasses: 0,
    ms,
  };
}

function best(runs: number, f: () => Replay): Replay {
  let result = f();
  for (let i = 1; i < runs; i++) {
    const r = f();
    if (r.ms < result.ms) result = r;
  }
  return result;
}

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(0)} MiB`;
}

/**
 * Runs the benchmark.
 *
 * @param options Quick mode and progress.
 * @returns The scenarios.
 */
export async function run(options: BenchOptions): Promise<Scenario[]> {
  const quick = options.quick;
  // The caching package's traces, with the parameters its benchmark uses.
  const traces = quick
    ? [
      withPeak(
        transformerInferenceTrace({ layers: 4, rounds: 2, decodeSteps: 4 }),
        "transformer inference (4 layers, 2 rounds)",
      ),
      withPeak(
        trainingStepTrace({ layers: 2, steps: 3 }),
        "training steps (2 layers, 3 steps)",
      ),
      withPeak(churnTrace(2000), "log-uniform churn (2000 allocations)"),
    ]
    : [
      withPeak(
        transformerInferenceTrace(),
        "transformer inference (GPT-2 small, 3 rounds)",
      ),
      withPeak(trainingStepTrace(), "training steps (6 layers, 5 steps)"),
      withPeak(churnTrace(40000), "log-uniform churn (40000 allocations)"),
    ];
  const scenarios: Scenario[] = [];
  const runs = quick ? 1 : 3;
  for (const trace of traces) {
    for (const headroom of [1.5, 1.25, 1.1]) {
      options.progress?.(`watermark: ${trace.name}, capacity ${headroom}x`);
      const capacity = Math.ceil(trace.peakRequestedBytes * headroom / 4096) *
        4096;
      const w = replayWatermark(trace, capacity);
      const c = replayCaching(trace, capacity);
      const peak = trace.peakRequestedBytes;
      const wRatio = w.peakDeviceBytes / peak;
      const cRatio = c.peakDeviceBytes / peak;
      const ratios: Ratio[] = [
        {
          label:
            "WatermarkAllocator requests served, peak requested under the high watermark",
          value: (w.allocations - w.failures) / w.allocations,
          target: "= 1 (no OOM)",
          met: w.failures === 0,
        },
        {
          label: "CachingAllocator / WatermarkAllocator (peak device bytes)",
          value: cRatio / wRatio,
        },
      ];
      scenarios.push({
        package: "watermark",
        scenario: `${trace.name}: capacity ${headroom}x peak requested (${
          mib(capacity)
        }), pressure from ${LOW_RATIO}x`,
        unit: "x peak requested",
        higherIsBetter: false,
        rows: [
          {
            name: "allot WatermarkAllocator",
            value: wRatio,
            ours: true,
            note:
              `${w.failures} OOM of ${w.allocations}, ${w.gcPasses} GC passes`,
          },
          {
            name: "allot CachingAllocator",
            value: cRatio,
            note: `${c.failures} OOM of ${c.allocations}`,
          },
        ],
        ratios,
        notes: [
          `peak requested ${
            mib(peak)
          }; high watermark = capacity (ratio 1.0), low watermark ${LOW_RATIO}x capacity`,
          "peak device bytes count only while requests succeed: an allocator that refuses requests can show a lower peak",
        ],
      });
      await Promise.resolve();
    }
  }
  // Replay speed without pressure.
  for (const trace of traces) {
    options.progress?.(`watermark: ${trace.name}, speed`);
    const w = best(runs, () => replayWatermark(trace, Infinity));
    const c = best(runs, () => replayCaching(trace, Infinity));
    const n = trace.ops.length;
    const wOps = n / (w.ms / 1000), cOps = n / (c.ms / 1000);
    scenarios.push({
      package: "watermark",
      scenario: `${trace.name}: replay speed, no memory limit (${n} events)`,
      unit: "events/s",
      higherIsBetter: true,
      rows: [
        { name: "allot WatermarkAllocator", value: wOps, ours: true },
        { name: "allot CachingAllocator", value: cOps },
      ],
      ratios: [{
        label: "WatermarkAllocator / CachingAllocator",
        value: wOps / cOps,
      }],
      notes: [`best of ${runs} in one process; mock device, no real memory`],
    });
    await Promise.resolve();
  }
  return scenarios;
}

function format(value: number): string {
  if (value >= 1000) return Math.round(value).toLocaleString("en-US");
  return value.toFixed(3);
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  const scenarios = await run({
    quick,
    progress: (m) => console.error(m),
  });
  for (const s of scenarios) {
    console.log(`\n${s.scenario} [${s.unit}]`);
    for (const r of s.rows) {
      console.log(
        `  ${r.name.padEnd(28)} ${format(r.value).padStart(14)}${
          r.note ? `  (${r.note})` : ""
        }`,
      );
    }
    for (const r of s.ratios ?? []) {
      const met = r.met === undefined ? "" : r.met ? "  met" : "  NOT met";
      console.log(
        `  ratio ${r.label}: ${r.value.toFixed(4)}${
          r.target ? ` (target ${r.target})` : ""
        }${met}`,
      );
    }
    for (const n of s.notes ?? []) console.log(`  note: ${n}`);
  }
}
