/**
 * Footprint of `CpuHeap` (every placement) and AssemblyScript's TLSF over
 * many log-uniform traces (seeds, live counts) and tensor-shaped ones, so
 * that no placement is tuned to the one headline trace: the highest byte
 * used over the peak of live requested bytes, mean and range per family.
 *
 * @module
 */

import { CpuHeap, type CpuHeapPlacement } from "../mod.ts";
import type { Row, Scenario } from "../../../scripts/bench/types.ts";
import { instantiateAs } from "./head_to_head.ts";
import { logUniformTrace, replay, tensorTrace, type Trace } from "./trace.ts";

const MiB = 1 << 20;

function heapFootprint(trace: Trace, placement: CpuHeapPlacement): number {
  const heap = new CpuHeap(2048 * MiB, { placement });
  replay(heap, trace);
  return heap.highWaterBytes / trace.peakLiveBytes;
}

function asFootprint(trace: Trace, module: WebAssembly.Module): number {
  const as = instantiateAs(module);
  const base = as.alloc(16);
  as.free(base);
  const offsets = new Float64Array(trace.slots);
  const { kind, slot, byteLength } = trace;
  let high = 0;
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === 1) {
      const at = as.alloc(byteLength[i]);
      offsets[slot[i]] = at;
      if (at + byteLength[i] > high) high = at + byteLength[i];
    } else as.free(offsets[slot[i]]);
  }
  return (high - base) / trace.peakLiveBytes;
}

/**
 * Measures the footprints.
 *
 * @param module The compiled AssemblyScript TLSF module.
 * @param quick Fewer and shorter traces (a smoke run).
 * @returns One scenario: a row per allocator and trace family.
 */
export function footprintScenario(
  module: WebAssembly.Module,
  quick: boolean,
): Scenario {
  const seeds = quick ? [1, 2] : [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
  const ops = quick ? 20_000 : 200_000;
  const lu = (live: number, n: number, o = ops) =>
    [
      `log-uniform, ~${live.toLocaleString("en-US")} live`,
      seeds.slice(0, n).map((s) => logUniformTrace(o, live, s)),
    ] as [string, Trace[]];
  const families: [string, Trace[]][] = quick
    ? [lu(300, 2), ["tensor-shaped", [tensorTrace(20, 1)]]]
    : [
      lu(1000, 12),
      lu(300, 6, ops / 2),
      lu(3000, 4),
      ["tensor-shaped", [1, 2, 3].map((s) => tensorTrace(300, s))],
    ];
  const rows: Row[] = [];
  const peers: [string, (t: Trace) => number, boolean][] = [
    [
      'CpuHeap, placement "first-fit"',
      (t) => heapFootprint(t, "first-fit"),
      true,
    ],
    ['CpuHeap, placement "compact"', (t) => heapFootprint(t, "compact"), true],
    [
      'CpuHeap, placement "good-fit" (the default)',
      (t) => heapFootprint(t, "good-fit"),
      true,
    ],
    ["AssemblyScript TLSF (wasm)", (t) => asFootprint(t, module), false],
  ];
  for (const [family, traces] of families) {
    for (const [name, measure, ours] of peers) {
      const values = traces.map(measure);
      const mean = values.reduce((a, b) => a + b, 0) / values.length;
      rows.push({
        name: `${name}: ${family}`,
        value: mean,
        ours: ours || undefined,
        note: `mean of ${values.length} seeds; range ${
          Math.min(...values).toFixed(3)
        } – ${Math.max(...values).toFixed(3)}`,
      });
    }
  }
  return {
    package: "cpu",
    scenario: `footprint over seeds (highest byte used / peak live), ${
      ops / 1000
    }k-op log-uniform traces (seeds ${seeds[0]}-${
      seeds[seeds.length - 1]
    }, not the headline's 42) and tensor-shaped ones`,
    unit: "x peak live",
    higherIsBetter: false,
    rows,
    notes: [
      "Deterministic: the same traces give the same figures on any machine. AssemblyScript's footprint is its highest requested byte over its first address.",
      "Heaps of 2 GiB, so that no trace makes them grow.",
    ],
  };
}
