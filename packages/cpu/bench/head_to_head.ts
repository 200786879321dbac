/**
 * The runtime-neutral core of the cpu benchmark's head-to-head rows:
 * `CpuHeap` (the default placement "good-fit", and "compact" warm) against
 * AssemblyScript's runtime TLSF (given as compiled wasm bytes), warm (one instance reused by every replay: the headline) and fresh
 * (a new instance per replay, made inside the timing), with and without a
 * `Uint8Array` view per allocation. It imports nothing Deno-specific, so the
 * same code runs under Deno (from `run.ts`) and under Node (bundled from
 * `node_main.ts`).
 *
 * @module
 */

import process from "node:process";
import { CpuHeap, type CpuHeapPlacement } from "../mod.ts";
import type { Trace } from "./trace.ts";

const MiB = 1 << 20;

/** Exports of the tiny AssemblyScript module (see `peers.ts`). */
interface AsExports {
  memory: WebAssembly.Memory;
  alloc(size: number): number;
  free(ptr: number): void;
}

/** One measured row: best ops per CPU second over the replays. */
export interface HeadToHeadRow {
  /** Allocator and instance kind, such as `CpuHeap, warm`. */
  name: string;
  /** Best ops per CPU second. */
  opsPerSecond: number;
  /** Whether the instance was reused (warm) or made per replay (fresh). */
  warm: boolean;
}

/** CPU seconds of this process (user + system, all threads). */
export function cpuSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

/** Name of the rows of a heap with placement `"compact"`. */
export const COMPACT = 'CpuHeap placement "compact"';

function newHeap(placement: CpuHeapPlacement = "good-fit"): CpuHeap {
  // The default heap: one plain ArrayBuffer of 1 GiB (pages never handed out
  // are never touched).
  return new CpuHeap(1024 * MiB, { placement });
}

/** The `CpuHeap` calls a replay makes (any version of the class). */
export type ReplayedHeap = Pick<
  CpuHeap,
  "alloc" | "free" | "bytes" | "allocationCount"
>;

/**
 * Replays `trace` on `heap` (warm: the heap is reused), with or without a
 * `Uint8Array` per allocation; throws when a block is left live.
 *
 * @param heap The heap.
 * @param trace The trace.
 * @param view Make a `Uint8Array` per allocation.
 */
export function replayHeap(
  heap: ReplayedHeap,
  trace: Trace,
  view: boolean,
): void {
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
}

function replayAs(as: AsExports, trace: Trace, view: boolean): void {
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
}

/**
 * Instantiates the AssemblyScript TLSF module (synchronously, so that a fresh
 * instance can be made inside the timing).
 *
 * @param module The compiled module.
 * @returns Its exports.
 */
export function instantiateAs(module: WebAssembly.Module): AsExports {
  const instance = new WebAssembly.Instance(module, {
    env: {
      abort() {
        throw new Error("AssemblyScript abort (out of memory?)");
      },
    },
  });
  return instance.exports as unknown as AsExports;
}

/**
 * Replays `trace` on CpuHeap and AssemblyScript's TLSF, warm and fresh,
 * round-robin (every row once per round, so passing load hits all alike),
 * and keeps each row's best.
 *
 * @param trace The trace.
 * @param asModule The compiled AssemblyScript TLSF module.
 * @param view Make a `Uint8Array` per allocation.
 * @param rounds Replays per row.
 * @returns The rows: warm first.
 */
export function headToHead(
  trace: Trace,
  asModule: WebAssembly.Module,
  view: boolean,
  rounds: number,
): HeadToHeadRow[] {
  const warmHeap = newHeap();
  const warmCompact = newHeap("compact");
  const warmAs = instantiateAs(asModule);
  // One untimed replay each, so that the warm rows start warm.
  replayHeap(warmHeap, trace, view);
  replayHeap(warmCompact, trace, view);
  replayAs(warmAs, trace, view);
  const rows: [string, boolean, () => void][] = [
    ["CpuHeap", true, () => replayHeap(warmHeap, trace, view)],
    [COMPACT, true, () => replayHeap(warmCompact, trace, view)],
    ["AssemblyScript TLSF (wasm)", true, () => replayAs(warmAs, trace, view)],
    ["CpuHeap", false, () => replayHeap(newHeap(), trace, view)],
    [
      "AssemblyScript TLSF (wasm)",
      false,
      () => replayAs(instantiateAs(asModule), trace, view),
    ],
  ];
  const best = rows.map(() => Infinity);
  for (let r = 0; r < rounds; r++) {
    rows.forEach(([, , replay], i) => {
      const t0 = cpuSeconds();
      replay();
      const seconds = cpuSeconds() - t0;
      if (seconds < best[i]) best[i] = seconds;
    });
  }
  const ops = trace.kind.length;
  return rows.map(([name, warm], i) => ({
    name: `${name}, ${warm ? "warm" : "fresh"}`,
    opsPerSecond: ops / best[i],
    warm,
  }));
}
