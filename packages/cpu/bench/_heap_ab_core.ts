/**
 * The runtime-neutral core of `heap_ab.ts`: two `CpuHeap` classes (the
 * working tree's and a git ref's) replay the same trace on warm instances,
 * interleaved (the order alternates each round), and each round gives one
 * paired ratio, new speed over old. It imports nothing Deno-specific, so the
 * same code runs under Deno and, bundled, under Node.
 *
 * @module
 */

import process from "node:process";
import type { Trace } from "./trace.ts";
import { type ReplayedHeap, replayHeap as replay } from "./head_to_head.ts";

/** The `CpuHeap` surface the replay needs. */
export type AbHeap = ReplayedHeap;

/** Paired ratios of one A/B: new speed over old, one per round. */
export interface AbResult {
  /** What was replayed. */
  name: string;
  /** Median of the paired ratios. */
  median: number;
  /** First and third quartiles. */
  q1: number;
  /** Third quartile. */
  q3: number;
}

function cpuSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

// The old side's replay: a copy of head_to_head.ts's replayHeap (which the
// new side runs), not a call to it, so that each loop's alloc/free call sites
// see one heap class only (monomorphic), as there.
function replayOld(heap: AbHeap, trace: Trace, view: boolean): void {
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
  if (heap.allocationCount !== 0) throw new Error("replay leaked");
}

/**
 * AssemblyScript's TLSF (an instance of the benchmark's module) behind the
 * {@linkcode AbHeap} surface, for pairing `CpuHeap` against it: its views read
 * the memory's buffer once and again only after growth detaches it, as
 * `head_to_head.ts` does.
 *
 * @param module The compiled AssemblyScript module (`peers.ts`).
 * @returns The adapter.
 */
export function asHeap(module: WebAssembly.Module): AbHeap {
  const instance = new WebAssembly.Instance(module, {
    env: {
      abort() {
        throw new Error("AssemblyScript abort (out of memory?)");
      },
    },
  });
  const { alloc, free, memory } = instance.exports as unknown as {
    alloc(size: number): number;
    free(ptr: number): void;
    memory: WebAssembly.Memory;
  };
  let buffer = memory.buffer;
  return {
    alloc,
    free,
    bytes(byteOffset, byteLength) {
      if (buffer.byteLength === 0) buffer = memory.buffer;
      return new Uint8Array(buffer, byteOffset, byteLength);
    },
    allocationCount: 0,
  };
}

function quantile(sorted: number[], q: number): number {
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at), hi = Math.ceil(at);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
}

/**
 * Replays `trace` on a warm heap of each class, interleaved.
 *
 * @param name Label of the result.
 * @param makeNew Makes the new heap.
 * @param makeOld Makes the old heap.
 * @param trace The trace.
 * @param view Make a `Uint8Array` per allocation.
 * @param rounds Paired replays.
 * @returns The paired ratios' median and quartiles.
 */
export function abRounds(
  name: string,
  makeNew: () => AbHeap,
  makeOld: () => AbHeap,
  trace: Trace,
  view: boolean,
  rounds: number,
): AbResult {
  const a = makeNew(), b = makeOld();
  replay(a, trace, view);
  replayOld(b, trace, view);
  const ratios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let tNew = 0, tOld = 0;
    if (r % 2 === 0) {
      let t0 = cpuSeconds();
      replay(a, trace, view);
      tNew = cpuSeconds() - t0;
      t0 = cpuSeconds();
      replayOld(b, trace, view);
      tOld = cpuSeconds() - t0;
    } else {
      let t0 = cpuSeconds();
      replayOld(b, trace, view);
      tOld = cpuSeconds() - t0;
      t0 = cpuSeconds();
      replay(a, trace, view);
      tNew = cpuSeconds() - t0;
    }
    ratios.push(tOld / tNew);
  }
  ratios.sort((x, y) => x - y);
  return {
    name,
    median: quantile(ratios, 0.5),
    q1: quantile(ratios, 0.25),
    q3: quantile(ratios, 0.75),
  };
}
