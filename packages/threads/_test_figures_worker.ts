/**
 * The Worker side of `shared_heap_figures_test.ts`: allocates, frees and
 * churns on a shared heap on command, and reports what it did, so the test
 * can check the heap's figures against the Workers' own counts.
 *
 * @module
 */

import { SharedHeap, type SharedHeapDescriptor } from "./mod.ts";

/** Commands from the test. */
export type FiguresCommand =
  | { type: "attach"; heap: SharedHeapDescriptor }
  | { type: "alloc"; sizes: number[] }
  | { type: "free"; offsets: number[] }
  | {
    type: "churn";
    ops: number;
    seed: number;
    /** Word 0: go flag; words 1..: a ring of offsets handed between Workers. */
    ring: SharedArrayBuffer;
  }
  | { type: "detach" };

/** What the Worker did (block sizes, as the heap counts them). */
export interface FiguresReport {
  offsets: number[];
  allocations: number;
  allocatedBytes: number;
  frees: number;
  freedBytes: number;
  error?: string;
}

const scope = globalThis as unknown as {
  postMessage(message: unknown): void;
  onmessage: ((event: MessageEvent<FiguresCommand>) => void) | null;
};
let heap: SharedHeap;

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Hand-off slots after the go flag and the two cursors (never reused). */
export const RING = 4093;

function churn(
  ops: number,
  seed: number,
  ring: SharedArrayBuffer,
): FiguresReport {
  const r = new Int32Array(ring);
  const random = prng(seed);
  const live: number[] = [];
  const out: FiguresReport = {
    offsets: [],
    allocations: 0,
    allocatedBytes: 0,
    frees: 0,
    freedBytes: 0,
  };
  const freeOne = (offset: number) => {
    out.freedBytes += heap.usableByteLength(offset);
    heap.free(offset);
    out.frees++;
  };
  while (Atomics.load(r, 0) === 0) Atomics.wait(r, 0, 0, 5);
  for (let i = 0; i < ops; i++) {
    const x = random();
    if (x < 0.5 || live.length === 0) {
      const size = random() < 0.8
        ? 1 + Math.floor(random() * 4096)
        : 8193 + Math.floor(random() * 100_000);
      const offset = heap.tryAlloc(size);
      if (offset === undefined) continue;
      out.allocations++;
      out.allocatedBytes += heap.usableByteLength(offset);
      live.push(offset);
    } else if (x < 0.85) {
      const k = Math.floor(random() * live.length);
      freeOne(live[k]);
      live[k] = live[live.length - 1];
      live.pop();
    } else if (x < 0.93) {
      // hand a block to whichever Worker takes it next (a remote free)
      const k = Math.floor(random() * live.length);
      const slot = Atomics.add(r, 1, 1);
      if (slot >= RING) throw new Error("the hand-off ring is full");
      Atomics.store(r, 3 + slot, live[k] + 1);
      live[k] = live[live.length - 1];
      live.pop();
    } else {
      // take a handed block and free it here
      for (let tries = 0; tries < 4; tries++) {
        const head = Atomics.load(r, 2);
        if (head >= Atomics.load(r, 1)) break;
        const v = Atomics.load(r, 3 + head);
        if (v === 0) break; // not written yet
        if (Atomics.compareExchange(r, 2, head, head + 1) !== head) continue;
        Atomics.store(r, 3 + head, 0);
        freeOne(v - 1);
        break;
      }
    }
  }
  out.offsets = live;
  return out;
}

scope.onmessage = (e: MessageEvent<FiguresCommand>) => {
  const c = e.data;
  const out: FiguresReport = {
    offsets: [],
    allocations: 0,
    allocatedBytes: 0,
    frees: 0,
    freedBytes: 0,
  };
  try {
    switch (c.type) {
      case "attach":
        heap = SharedHeap.attach(c.heap);
        break;
      case "alloc":
        for (const n of c.sizes) {
          const offset = heap.alloc(n);
          out.offsets.push(offset);
          out.allocations++;
          out.allocatedBytes += heap.usableByteLength(offset);
        }
        break;
      case "free":
        for (const offset of c.offsets) {
          out.freedBytes += heap.usableByteLength(offset);
          heap.free(offset);
          out.frees++;
        }
        break;
      case "churn":
        scope.postMessage(churn(c.ops, c.seed, c.ring));
        return;
      case "detach":
        heap.detach();
        break;
    }
  } catch (error) {
    out.error = String(error);
  }
  scope.postMessage(out);
};
