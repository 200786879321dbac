/**
 * Benchmark of `@allot/cpu`'s `CpuHeap` against AssemblyScript's runtime
 * TLSF, `@thi.ng/malloc`'s `MemPool`, `typedarray-pool` and
 * `new ArrayBuffer`, on the same deterministic traces in the same process;
 * a native OffsetAllocator-style peer (`native/offset_allocator.cpp`, built
 * with `g++ -O2` when g++ is present); and the same head-to-head under Node
 * (`node_main.ts`, bundled with `deno bundle`) when `node` is present.
 *
 * Warm instances are the headline: each allocator is made once per trace,
 * replays it once untimed, then every timed replay reuses it. Fresh
 * instances (made inside the timing, as a first use pays) are second rows.
 *
 * Run: `deno run -A packages/cpu/bench/run.ts` (add `--quick` for a smoke
 * run).
 *
 * @module
 */

import type {
  BenchOptions,
  Ratio,
  Row,
  Scenario,
} from "../../../scripts/bench/types.ts";
import { CpuHeap } from "../mod.ts";
import { MemPool } from "@thi.ng/malloc";
import pool from "typedarray-pool";
import { asBinary, asModule, asTlsf } from "./peers.ts";
import {
  COMPACT as NODE_COMPACT,
  cpuSeconds,
  type HeadToHeadRow,
  instantiateAs,
} from "./head_to_head.ts";
import { footprintScenario } from "./footprints.ts";
import { restoreConsts } from "./_restore_consts.ts";
import { underNode } from "./under_node.ts";
import { printScenarios } from "./report.ts";
import { runRealTraces } from "./real_traces.ts";
import { benchTraces, type Trace } from "./trace.ts";

type AsExports = ReturnType<typeof instantiateAs>;

/** What a replay measured besides time. */
export interface Measured {
  /** Highest byte used, relative to the allocator's first byte. */
  footprint?: number;
}

const MiB = 1 << 20;
/** Row names, shared with `real_traces.ts`. */
export const HEAP = "allot CpuHeap";
const GROWABLE = "allot CpuHeap, growable (resizable ArrayBuffer)";
const COMPACT = 'allot CpuHeap, placement "compact"';
/** The first-fit heap's row. */
export const FIRST_FIT = 'allot CpuHeap, placement "first-fit"';
/** AssemblyScript's row. */
export const AS = "AssemblyScript TLSF (wasm)";
/** The suffix of fresh rows. */
export const FRESH = ", fresh instance";

// --- replays: one loop per allocator so no call site goes megamorphic ---
//
// replayHeapIn and replayAsIn restate head_to_head.ts's replayHeap and
// replayAs (the Node side's loops) on purpose: calling those instead
// (2026-11-25, six interleaved process pairs of the 200k log-uniform trace)
// kept the warm rows (after/before medians 0.98 to 1.04) but put the fresh
// AssemblyScript row without views at a median 0.88 (0.78 to 1.08), so the
// copies stay until a steadier measurement says otherwise.

function newHeapGrowable(): CpuHeap {
  // Growable, like the wasm memory of AssemblyScript: a resizable
  // ArrayBuffer of 16 MiB that may grow to 1 GiB.
  return new CpuHeap(16 * MiB, { maxByteLength: 1024 * MiB });
}

function newHeapFixed(): CpuHeap {
  // The default heap: a plain (not resizable) ArrayBuffer of 1 GiB (pages
  // the heap never hands out are never touched).
  return new CpuHeap(1024 * MiB);
}

function newHeapCompact(): CpuHeap {
  // The default heap with the compact placement of small requests instead
  // of TLSF's good fit for every request.
  return new CpuHeap(1024 * MiB, { placement: "compact" });
}

function newHeapFirstFit(): CpuHeap {
  // The default heap with exact first fit for small requests.
  return new CpuHeap(1024 * MiB, { placement: "first-fit" });
}

function replayHeapIn(heap: CpuHeap, trace: Trace, view: boolean): Measured {
  const { kind, slot, byteLength } = trace;
  const offsets = new Float64Array(trace.slots);
  const views: (Uint8Array | undefined)[] = new Array(trace.slots);
  const n = kind.length;
  if (view) {
    for (let i = 0; i < n; i++) {
      const s = slot[i];
      if (kind[i] === 1) {
        const len = byteLength[i];
        const off = heap.alloc(len);
        offsets[s] = off;
        views[s] = heap.bytes(off, len);
      } else {
        heap.free(offsets[s]);
        views[s] = undefined;
      }
    }
  } else {
    for (let i = 0; i < n; i++) {
      const s = slot[i];
      if (kind[i] === 1) offsets[s] = heap.alloc(byteLength[i]);
      else heap.free(offsets[s]);
    }
  }
  if (heap.allocationCount !== 0) throw new Error("CpuHeap replay leaked");
  return { footprint: heap.highWaterBytes };
}

function replayAsIn(as: AsExports, trace: Trace, view: boolean): Measured {
  const { alloc, free, memory } = as;
  const { kind, slot, byteLength } = trace;
  const offsets = new Float64Array(trace.slots);
  const views: (Uint8Array | undefined)[] = new Array(trace.slots);
  const n = kind.length;
  if (view) {
    // The buffer is read once and again only after growth (as a careful
    // user would): the memory.buffer getter per allocation cost
    // AssemblyScript's rows about 10% (both runtimes).
    let buffer = memory.buffer;
    for (let i = 0; i < n; i++) {
      const s = slot[i];
      if (kind[i] === 1) {
        const len = byteLength[i];
        const off = alloc(len);
        offsets[s] = off;
        // Growth detaches the old buffer (length 0): fetch the new one.
        if (buffer.byteLength === 0) buffer = memory.buffer;
        views[s] = new Uint8Array(buffer, off, len);
      } else {
        free(offsets[s]);
        views[s] = undefined;
      }
    }
  } else {
    for (let i = 0; i < n; i++) {
      const s = slot[i];
      if (kind[i] === 1) offsets[s] = alloc(byteLength[i]);
      else free(offsets[s]);
    }
  }
  return {};
}

/**
 * Highest byte AssemblyScript's TLSF uses replaying `trace`, from its heap
 * base.
 *
 * @param trace The trace.
 * @returns Bytes.
 */
export async function footprintAs(trace: Trace): Promise<number> {
  const as = await asTlsf();
  const { kind, slot, byteLength } = trace;
  const offsets = new Float64Array(trace.slots);
  let high = 0;
  for (let i = 0; i < kind.length; i++) {
    const s = slot[i];
    if (kind[i] === 1) {
      const off = as.alloc(byteLength[i]);
      offsets[s] = off;
      if (off + byteLength[i] > high) high = off + byteLength[i];
    } else as.free(offsets[s]);
  }
  return high - as.heapBase;
}

function makePool(trace: Trace): MemPool {
  // First-fit over one ArrayBuffer: give it room for its fragmentation.
  return new MemPool({
    size: Math.min(2048 * MiB, Math.ceil(trace.peakLiveBytes * 4 / MiB) * MiB),
    align: 64,
  });
}

function replayMemPool(mem: MemPool, trace: Trace, view: boolean): Measured {
  const { kind, slot, byteLength } = trace;
  const offsets = new Float64Array(trace.slots);
  const views: (Uint8Array | undefined)[] = new Array(trace.slots);
  const n = kind.length;
  const buf = mem.buf;
  if (view) {
    for (let i = 0; i < n; i++) {
      const s = slot[i];
      if (kind[i] === 1) {
        const len = byteLength[i];
        const off = mem.malloc(len);
        if (off === 0) throw new Error("MemPool out of memory");
        offsets[s] = off;
        views[s] = new Uint8Array(buf, off, len);
      } else {
        mem.free(offsets[s]);
        views[s] = undefined;
      }
    }
  } else {
    for (let i = 0; i < n; i++) {
      const s = slot[i];
      if (kind[i] === 1) {
        const off = mem.malloc(byteLength[i]);
        if (off === 0) throw new Error("MemPool out of memory");
        offsets[s] = off;
      } else mem.free(offsets[s]);
    }
  }
  return {};
}

/**
 * Highest byte `@thi.ng/malloc`'s MemPool uses replaying `trace`.
 *
 * @param trace The trace.
 * @returns Bytes.
 */
export function footprintMemPool(trace: Trace): number {
  const mem = makePool(trace);
  const { kind, slot, byteLength } = trace;
  const offsets = new Float64Array(trace.slots);
  let high = 0;
  const start = mem.malloc(16);
  mem.free(start);
  for (let i = 0; i < kind.length; i++) {
    const s = slot[i];
    if (kind[i] === 1) {
      const off = mem.malloc(byteLength[i]);
      offsets[s] = off;
      if (off + byteLength[i] > high) high = off + byteLength[i];
    } else mem.free(offsets[s]);
  }
  return high - start;
}

function resetTypedArrayPool(): number {
  // typedarray-pool keeps its cache on a global; empty it for a fresh run.
  const data = (globalThis as unknown as {
    __TYPEDARRAY_POOL: { DATA: ArrayBuffer[][] };
  }).__TYPEDARRAY_POOL.DATA;
  let cached = 0;
  for (const list of data) {
    for (const b of list) cached += b.byteLength;
    list.length = 0;
  }
  return cached;
}

function cachedTypedArrayPool(): number {
  const data = (globalThis as unknown as {
    __TYPEDARRAY_POOL: { DATA: ArrayBuffer[][] };
  }).__TYPEDARRAY_POOL.DATA;
  let cached = 0;
  for (const list of data) for (const b of list) cached += b.byteLength;
  return cached;
}

function replayTypedArrayPool(
  _: unknown,
  trace: Trace,
  view: boolean,
): Measured {
  const { kind, slot, byteLength } = trace;
  const buffers: (ArrayBuffer | undefined)[] = new Array(trace.slots);
  const views: (Uint8Array | undefined)[] = new Array(trace.slots);
  const n = kind.length;
  if (view) {
    for (let i = 0; i < n; i++) {
      const s = slot[i];
      if (kind[i] === 1) {
        const len = byteLength[i];
        const b = pool.mallocArrayBuffer(len);
        buffers[s] = b;
        views[s] = new Uint8Array(b, 0, len);
      } else {
        pool.freeArrayBuffer(buffers[s]);
        buffers[s] = undefined;
        views[s] = undefined;
      }
    }
  } else {
    for (let i = 0; i < n; i++) {
      const s = slot[i];
      if (kind[i] === 1) buffers[s] = pool.mallocArrayBuffer(byteLength[i]);
      else {
        pool.freeArrayBuffer(buffers[s]);
        buffers[s] = undefined;
      }
    }
  }
  // Everything is back in the pool now: the pool holds every byte it made.
  return { footprint: cachedTypedArrayPool() };
}

function replayArrayBuffer(
  _: unknown,
  trace: Trace,
  view: boolean,
): Measured {
  const { kind, slot, byteLength } = trace;
  const buffers: (ArrayBuffer | undefined)[] = new Array(trace.slots);
  const views: (Uint8Array | undefined)[] = new Array(trace.slots);
  const n = kind.length;
  if (view) {
    for (let i = 0; i < n; i++) {
      const s = slot[i];
      if (kind[i] === 1) views[s] = new Uint8Array(byteLength[i]);
      else views[s] = undefined;
    }
  } else {
    for (let i = 0; i < n; i++) {
      const s = slot[i];
      if (kind[i] === 1) buffers[s] = new ArrayBuffer(byteLength[i]);
      else buffers[s] = undefined;
    }
  }
  return {};
}

interface Contender {
  name: string;
  /** Makes an instance; `undefined` for peers without one (new ArrayBuffer). */
  make?: (trace: Trace) => unknown;
  replay: (instance: unknown, trace: Trace, view: boolean) => Measured;
  ours?: boolean;
  /** Upper bound on repetitions (slow peers run fewer times). */
  maxReps: number;
}

let asModuleCache: WebAssembly.Module | undefined;

function contenders(): Contender[] {
  const as = asModuleCache!;
  return [
    {
      name: HEAP,
      make: newHeapFixed,
      replay: replayHeapIn as Contender["replay"],
      ours: true,
      maxReps: 15,
    },
    {
      name: COMPACT,
      make: newHeapCompact,
      replay: replayHeapIn as Contender["replay"],
      maxReps: 15,
    },
    {
      name: FIRST_FIT,
      make: newHeapFirstFit,
      replay: replayHeapIn as Contender["replay"],
      maxReps: 15,
    },
    {
      name: GROWABLE,
      make: newHeapGrowable,
      replay: replayHeapIn as Contender["replay"],
      maxReps: 15,
    },
    {
      name: AS,
      make: () => instantiateAs(as),
      replay: replayAsIn as Contender["replay"],
      maxReps: 15,
    },
    {
      name: "@thi.ng/malloc MemPool",
      make: makePool,
      replay: replayMemPool as Contender["replay"],
      maxReps: 3,
    },
    {
      name: "typedarray-pool",
      make: () => resetTypedArrayPool(),
      replay: replayTypedArrayPool,
      maxReps: 15,
    },
    { name: "new ArrayBuffer", replay: replayArrayBuffer, maxReps: 2 },
  ];
}

// Round-robin: every row runs once per round, so load that comes and goes
// on a shared machine hits all of them alike. Each row keeps its best run; a
// row stops after maxReps runs or 2 CPU seconds. Warm rows reuse one
// instance per contender (made and run once, untimed, before the rounds);
// fresh rows (`<name>, fresh instance`) make theirs inside the timing.
function bestOfAll(
  trace: Trace,
  view: boolean,
  quick: boolean,
): Map<string, Measured & { seconds: number }> {
  const best = new Map<string, Measured & { seconds: number }>();
  const spent = new Map<string, number>();
  const rows: { name: string; maxReps: number; run: () => Measured }[] = [];
  for (const c of contenders()) {
    const warm = c.make?.(trace);
    c.replay(warm, trace, view);
    rows.push({
      name: c.name,
      maxReps: c.maxReps,
      run: () => c.replay(warm, trace, view),
    });
    const make = c.make;
    if (make !== undefined) {
      rows.push({
        name: `${c.name}${FRESH}`,
        maxReps: c.maxReps,
        run: () => c.replay(make(trace), trace, view),
      });
    }
  }
  const rounds = Math.max(...rows.map((c) => c.maxReps));
  for (let r = 0; r < (quick ? 1 : rounds); r++) {
    for (const row of rows) {
      if (r >= row.maxReps || (r > 0 && (spent.get(row.name) ?? 0) >= 2)) {
        continue;
      }
      const t0 = cpuSeconds();
      const m = row.run();
      const seconds = cpuSeconds() - t0;
      spent.set(row.name, (spent.get(row.name) ?? 0) + seconds);
      const old = best.get(row.name);
      if (old === undefined || seconds < old.seconds) {
        best.set(row.name, {
          seconds,
          footprint: m.footprint ?? old?.footprint,
        });
      }
    }
  }
  return best;
}

/**
 * The speed rows of a {@linkcode measureAll} result, warm rows first (the
 * headline), then the fresh ones, with their notes; for `run.ts` and
 * `real_traces.ts`.
 *
 * @param measured Best CPU seconds per row name.
 * @param ops Operations per replay.
 * @returns The rows, and ops per CPU second by row name.
 */
export function speedRows(
  measured: Map<string, { seconds: number }>,
  ops: number,
): { rows: Row[]; rate: Map<string, number> } {
  const rows: Row[] = [];
  const rate = new Map<string, number>();
  const names = [...measured.keys()].sort((x, y) =>
    Number(x.endsWith(FRESH)) - Number(y.endsWith(FRESH))
  );
  for (const name of names) {
    const opsPerSecond = ops / measured.get(name)!.seconds;
    rate.set(name, opsPerSecond);
    rows.push({
      name,
      value: opsPerSecond,
      ours: name === HEAP ? true : undefined,
      note: name.endsWith(FRESH)
        ? "made inside the timing"
        : name === "new ArrayBuffer"
        ? "no instance"
        : "warm: one instance, reused",
    });
  }
  return { rows, rate };
}

/**
 * Every contender's best replay of `trace` (warm and fresh rows), as
 * {@linkcode run} measures them: for `real_traces.ts`.
 *
 * @param trace The trace.
 * @param view Make a `Uint8Array` per allocation.
 * @param quick One round.
 * @returns Best CPU seconds (and footprint) per row name.
 */
export async function measureAll(
  trace: Trace,
  view: boolean,
  quick: boolean,
): Promise<Map<string, Measured & { seconds: number }>> {
  asModuleCache ??= await asModule();
  return bestOfAll(trace, view, quick);
}

/**
 * Builds the native peer with g++ (when present) and replays `trace` on it.
 *
 * @param trace The trace.
 * @param quick One replay instead of 30.
 * @returns Ops per CPU second and footprint, or why it was skipped.
 */
export async function native(
  trace: Trace,
  quick: boolean,
): Promise<{ opsPerSecond: number; footprint: number } | string> {
  const dir = await Deno.makeTempDir({ prefix: "allot-cpu-bench-" });
  try {
    const source = new URL("./native/offset_allocator.cpp", import.meta.url);
    const binary = `${dir}/offset_allocator`;
    let build;
    try {
      build = await new Deno.Command("g++", {
        args: ["-O2", "-std=c++17", "-o", binary, source.pathname],
        stderr: "piped",
      }).output();
    } catch {
      return "g++ not found";
    }
    if (!build.success) {
      return `g++ failed: ${new TextDecoder().decode(build.stderr)}`;
    }
    const n = trace.kind.length;
    const data = new Int32Array(1 + 3 * n);
    data[0] = n;
    for (let i = 0; i < n; i++) {
      data[1 + 3 * i] = trace.kind[i];
      data[2 + 3 * i] = trace.slot[i];
      data[3 + 3 * i] = trace.byteLength[i];
    }
    await Deno.writeFile(`${dir}/trace.bin`, new Uint8Array(data.buffer));
    const out = await new Deno.Command(binary, {
      args: [`${dir}/trace.bin`, quick ? "1" : "30"],
      stdout: "piped",
    }).output();
    if (!out.success) return `native replay failed (exit ${out.code})`;
    const [seconds, footprint] = new TextDecoder().decode(out.stdout).trim()
      .split(" ").map(Number);
    return { opsPerSecond: n / seconds, footprint };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

// Runs the head-to-head rows under Node (bundled with `deno bundle`).
function nodeRows(
  quick: boolean,
): Promise<
  { version: string; out: { view: boolean; rows: HeadToHeadRow[] }[] } | string
> {
  return underNode({
    entry: new URL("./node_main.ts", import.meta.url),
    prefix: "allot-cpu-node-",
    rewrite: restoreConsts,
    async args(dir) {
      const wasm = `${dir}/as_tlsf.wasm`;
      await Deno.writeFile(wasm, await asBinary());
      return [wasm, quick ? "quick" : "full"];
    },
  });
}

function ratio(
  label: string,
  value: number,
  target?: number,
): Ratio {
  return target === undefined ? { label, value } : {
    label,
    value,
    target: `>= ${target}`,
    met: value >= target,
  };
}

/**
 * Runs the cpu benchmark.
 *
 * @param options `quick` for a smoke run; `progress` for messages.
 * @returns One scenario per trace and measure.
 */
export async function run(options: BenchOptions): Promise<Scenario[]> {
  const quick = options.quick;
  asModuleCache = await asModule();
  const traces = benchTraces(quick);
  const scenarios: Scenario[] = [];
  for (const trace of traces) {
    const ops = trace.kind.length;
    const main = trace === traces[0];
    const footprints = new Map<string, number>();
    const nativePeer = main ? await native(trace, quick) : undefined;
    for (const view of [false, true]) {
      options.progress?.(`cpu: ${trace.name}${view ? " + view" : ""}`);
      const measured = bestOfAll(trace, view, quick);
      const { rows, rate } = speedRows(measured, ops);
      for (const [name, m] of measured) {
        if (m.footprint !== undefined && !name.endsWith(FRESH)) {
          footprints.set(name, m.footprint);
        }
      }
      const ours = rate.get(HEAP)!;
      const ratios: Ratio[] = [
        ratio(
          "warm: CpuHeap / AssemblyScript TLSF",
          ours / rate.get(AS)!,
          main ? 2 : undefined,
        ),
      ];
      if (main && !view && typeof nativePeer === "object") {
        rows.push({
          name: "native OffsetAllocator-style (C++ -O2), warm",
          value: nativePeer.opsPerSecond,
          note: "no view; same trace, 64-byte units",
        });
        ratios.push(
          ratio(
            "warm: CpuHeap / native OffsetAllocator-style (target 24/40)",
            ours / nativePeer.opsPerSecond,
            0.6,
          ),
        );
      }
      if (main && view && typeof nativePeer === "object") {
        ratios.push(
          ratio(
            "warm: CpuHeap + view / native OffsetAllocator-style (no view)",
            ours / nativePeer.opsPerSecond,
            0.6,
          ),
        );
      }
      ratios.push(
        ratio(
          "fresh: CpuHeap / AssemblyScript TLSF",
          rate.get(HEAP + FRESH)! / rate.get(AS + FRESH)!,
        ),
        ratio(
          "warm: CpuHeap / new ArrayBuffer",
          ours / rate.get("new ArrayBuffer")!,
        ),
        ratio(
          'warm: CpuHeap placement "compact" / AssemblyScript TLSF',
          rate.get(COMPACT)! / rate.get(AS)!,
        ),
        ratio(
          'warm: CpuHeap placement "compact" / CpuHeap (the price of "compact")',
          rate.get(COMPACT)! / ours,
        ),
        ratio(
          'warm: CpuHeap placement "first-fit" / CpuHeap (the price of "first-fit")',
          rate.get(FIRST_FIT)! / ours,
        ),
        ratio(
          "warm: CpuHeap growable / AssemblyScript TLSF",
          rate.get(GROWABLE)! / rate.get(AS)!,
        ),
        ratio(
          "warm: CpuHeap / MemPool",
          ours / rate.get("@thi.ng/malloc MemPool")!,
        ),
        ratio(
          "warm: CpuHeap / typedarray-pool",
          ours / rate.get("typedarray-pool")!,
        ),
      );
      scenarios.push({
        package: "cpu",
        scenario: `${trace.name}, ${ops} ops, ${
          view ? "with" : "without"
        } a Uint8Array view per allocation`,
        unit: "ops/s",
        higherIsBetter: true,
        rows,
        ratios,
        notes: [
          "Warm instances are the headline: each allocator is made once, replays the trace once untimed, and every timed replay reuses it. Rows ending in ', fresh instance' make a new one inside the timing (a first use: AssemblyScript grows its wasm memory, the heaps make their records).",
          "ops per CPU second (process.cpuUsage, all threads, so GC helper threads count): the machines are shared, and CPU time is steadier than wall time there.",
          "Best of up to 15 replays per row, run round-robin across the rows (2 CPU seconds at most per row, so 2 or 3 replays for MemPool and new ArrayBuffer), in one process; one op is one alloc or one free.",
          `allot CpuHeap is the default heap: one plain ArrayBuffer of 1 GiB, placement "good-fit". The "compact" row is the same heap placing small requests low (less memory). The growable row starts at 16 MiB of a resizable ArrayBuffer and grows to fit (up to 1 GiB), as AssemblyScript's memory grows.`,
          "The native peer (native/offset_allocator.cpp, g++ -O2, best CPU time of 30 warm replays) is written for this benchmark after the OffsetAllocator design; it keeps no stats and checks nothing.",
          ...(main && typeof nativePeer === "string"
            ? [`native peer skipped: ${nativePeer}`]
            : []),
        ],
      });
    }
    options.progress?.(`cpu: ${trace.name}: footprints`);
    footprints.set(AS, await footprintAs(trace));
    footprints.set("@thi.ng/malloc MemPool", footprintMemPool(trace));
    if (typeof nativePeer === "object") {
      footprints.set(
        "native OffsetAllocator-style (C++)",
        nativePeer.footprint,
      );
    }
    const peak = trace.peakLiveBytes;
    const rows: Row[] = [...footprints].map(([name, bytes]) => ({
      name,
      value: bytes / peak,
      ours: name === HEAP ? true : undefined,
      note: `${(bytes / MiB).toFixed(1)} MiB`,
    }));
    // One ratio per placement, oriented so that greater is better:
    // footprint <= 1.12x peak live.
    const placementRatio = (name: string, label: string) => {
      const x = footprints.get(name)! / peak;
      return {
        label: `peak live / ${label} footprint (footprint ${
          x.toFixed(3)
        }x peak live)`,
        value: 1 / x,
        target: main ? ">= 0.893 (footprint <= 1.12x)" : undefined,
        met: main ? x <= 1.12 : undefined,
      };
    };
    scenarios.push({
      package: "cpu",
      scenario: `${trace.name}: footprint (highest byte used / peak live ${
        (peak / MiB).toFixed(1)
      } MiB)`,
      unit: "x peak live",
      higherIsBetter: false,
      rows,
      ratios: [
        placementRatio(HEAP, "CpuHeap"),
        placementRatio(COMPACT, 'CpuHeap placement "compact"'),
        placementRatio(FIRST_FIT, 'CpuHeap placement "first-fit"'),
        ratio(
          "AssemblyScript TLSF footprint / CpuHeap footprint",
          footprints.get(AS)! / footprints.get(HEAP)!,
        ),
      ],
      notes: [
        "typedarray-pool: bytes of every buffer it made (it caches power-of-two buffers and never returns them).",
      ],
    });
  }
  options.progress?.("cpu: footprints over seeds and live counts");
  scenarios.push(footprintScenario(asModuleCache, quick));
  // The traces recorded from TF.js on the CPU (real_traces.ts).
  scenarios.push(...await runRealTraces(options));
  options.progress?.("cpu: the head-to-head under Node");
  const node = await nodeRows(quick);
  if (typeof node === "string") {
    scenarios.push({
      package: "cpu",
      scenario: "Node: skipped",
      unit: "ops/s",
      higherIsBetter: true,
      rows: [],
      notes: [node],
    });
  } else {
    for (const { view, rows } of node.out) {
      const get = (name: string) =>
        rows.find((r) => r.name === name)!.opsPerSecond;
      scenarios.push({
        package: "cpu",
        scenario: `Node ${node.version}: ${traces[0].name}, ${
          view ? "with" : "without"
        } a Uint8Array view per allocation`,
        unit: "ops/s",
        higherIsBetter: true,
        rows: rows.map((r) => ({
          name: r.name,
          value: r.opsPerSecond,
          ours: r.name === "CpuHeap, warm" ? true : undefined,
        })),
        ratios: [
          ratio(
            "Node, warm: CpuHeap / AssemblyScript TLSF",
            get("CpuHeap, warm") / get("AssemblyScript TLSF (wasm), warm"),
            2,
          ),
          ratio(
            'Node, warm: CpuHeap placement "compact" / AssemblyScript TLSF',
            get(`${NODE_COMPACT}, warm`) /
              get("AssemblyScript TLSF (wasm), warm"),
          ),
          ratio(
            "Node, fresh: CpuHeap / AssemblyScript TLSF",
            get("CpuHeap, fresh") / get("AssemblyScript TLSF (wasm), fresh"),
          ),
        ],
        notes: [
          "The same head-to-head code (head_to_head.ts), bundled with deno bundle and run by node in a separate process; best of 15 round-robin replays per row.",
        ],
      });
    }
  }
  return scenarios;
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  const scenarios = await run({
    quick,
    progress: (m) => console.error(m),
  });
  printScenarios(scenarios);
}
