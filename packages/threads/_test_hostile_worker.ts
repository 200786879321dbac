/**
 * The Worker side of `threads_hostile_test.ts`: a seeded random model of
 * allocations (hostile sizes and alignments), frees of its own blocks and of
 * blocks other Workers allocated, double frees that must be refused, byte
 * patterns checked before every free, and a tight loop to be terminated in.
 *
 * @module
 */

import { DoubleFreeError, OutOfMemoryError } from "@allot/core";
import {
  type SharedBufferDescriptor,
  SharedHeap,
  SharedHeapAllocator,
  type SharedHeapDescriptor,
} from "./mod.ts";
import { checkPattern, writePattern } from "../core/_test_faults.ts";

/** A live block: where, how long it was asked for, its pattern id. */
export interface LiveBlock {
  byteOffset: number;
  byteLength: number;
  id: number;
}

/** Commands from the test. */
export type HostileCommand =
  | { type: "attach"; heap: SharedHeapDescriptor; worker: number }
  | {
    type: "round";
    seed: number;
    ops: number;
    /** Blocks other Workers allocated: free them here (remote frees). */
    inbox: LiveBlock[];
    /** Offsets freed already: each free must throw DoubleFreeError. */
    poison: number[];
  }
  | { type: "free-all" }
  | { type: "cache"; count: number; byteLength: number }
  | { type: "spin"; seed: number; beat?: SharedArrayBuffer }
  | { type: "receive"; descriptor: SharedBufferDescriptor }
  | { type: "detach" };

/** What a Worker reports. */
export type HostileReport =
  | { type: "attached"; arena: number }
  | {
    type: "round-done";
    live: LiveBlock[];
    /** Blocks this Worker gives to another Worker to free. */
    outbox: LiveBlock[];
    allocs: number;
    frees: number;
    doubleFreesRefused: number;
  }
  | { type: "freed"; count: number }
  | { type: "cached"; live: LiveBlock[] }
  | { type: "spinning" }
  | { type: "received"; data?: number[]; refused?: string }
  | { type: "detached" }
  | { type: "error"; message: string };

const scope = globalThis as unknown as {
  postMessage(message: unknown): void;
  onmessage: ((event: MessageEvent<HostileCommand>) => void) | null;
};
const post = (r: HostileReport) => scope.postMessage(r);

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

// Sizes at the edges of the slab classes and pages, and log-uniform ones.
const EDGES = [0, 1, 63, 64, 65, 255, 256, 8191, 8192, 8193, 4095, 4097];
const ALIGNMENTS = [undefined, 1, 8, 64, 128, 256, 512, 4096];

let heap: SharedHeap;
let worker = 0;
let serial = 0;
const live: LiveBlock[] = [];

function view(b: LiveBlock): Uint8Array {
  return new Uint8Array(heap.buffer, b.byteOffset, b.byteLength);
}

function allocOne(random: () => number): LiveBlock | undefined {
  const n = random() < 0.3
    ? EDGES[Math.floor(random() * EDGES.length)]
    : Math.floor(2 ** (random() * 16));
  const alignment = ALIGNMENTS[Math.floor(random() * ALIGNMENTS.length)];
  let at: number;
  try {
    at = heap.alloc(n, alignment);
  } catch (e) {
    if (e instanceof OutOfMemoryError) return undefined;
    throw e;
  }
  if (at % (alignment ?? 64) !== 0) {
    throw new Error(`alloc(${n}, ${alignment}) gave misaligned ${at}`);
  }
  if (heap.usableByteLength(at) < n) {
    throw new Error(`alloc(${n}) gave a ${heap.usableByteLength(at)}-B block`);
  }
  const b = {
    byteOffset: at,
    byteLength: n,
    id: worker * 1_000_000 + serial++,
  };
  writePattern(view(b), b.id);
  return b;
}

function freeOne(b: LiveBlock): void {
  checkPattern(view(b), b.id, `block at ${b.byteOffset}`);
  heap.free(b.byteOffset);
}

function round(
  c: Extract<HostileCommand, { type: "round" }>,
): HostileReport {
  const random = prng(c.seed);
  let allocs = 0, frees = 0, refused = 0;
  // Remote frees first: blocks of other arenas, checked, then freed here.
  for (const b of c.inbox) {
    freeOne(b);
    frees++;
  }
  for (const at of c.poison) {
    const before = heap.stats().allocations.current;
    try {
      heap.free(at);
      throw new Error(`a second free of ${at} was accepted`);
    } catch (e) {
      if (!(e instanceof DoubleFreeError)) throw e;
    }
    if (heap.stats().allocations.current !== before) {
      throw new Error(`a refused double free of ${at} changed the count`);
    }
    refused++;
  }
  for (let i = 0; i < c.ops; i++) {
    if (random() < 0.55 || live.length === 0) {
      const b = allocOne(random);
      if (b !== undefined) {
        live.push(b);
        allocs++;
      }
    } else {
      const k = Math.floor(random() * live.length);
      const b = live[k];
      live[k] = live[live.length - 1];
      live.pop();
      freeOne(b);
      frees++;
    }
  }
  // About a tenth of the live blocks go to another Worker to free (not in
  // a round of no operations: those only check refused double frees).
  const outbox: LiveBlock[] = [];
  for (let k = c.ops > 0 ? live.length - 1 : -1; k >= 0; k--) {
    if (random() < 0.1) {
      outbox.push(live[k]);
      live[k] = live[live.length - 1];
      live.pop();
    }
  }
  return {
    type: "round-done",
    live: [...live],
    outbox,
    allocs,
    frees,
    doubleFreesRefused: refused,
  };
}

scope.onmessage = (event) => {
  const c = event.data;
  try {
    switch (c.type) {
      case "attach":
        heap = SharedHeap.attach(c.heap);
        worker = c.worker;
        post({ type: "attached", arena: heap.arena });
        return;
      case "round":
        post(round(c));
        return;
      case "free-all": {
        const count = live.length;
        for (const b of live.splice(0)) freeOne(b);
        post({ type: "freed", count });
        return;
      }
      case "cache": {
        // Large blocks allocated and freed by this Worker stay in its span
        // cache; a few stay live.
        const blocks: number[] = [];
        for (let i = 0; i < c.count; i++) {
          blocks.push(heap.alloc(c.byteLength + i * 4096));
        }
        const kept: LiveBlock[] = [];
        blocks.forEach((at, i) => {
          if (i % 4 === 0) {
            const b = { byteOffset: at, byteLength: 100, id: i };
            writePattern(view(b), b.id);
            kept.push(b);
          } else heap.free(at);
        });
        post({ type: "cached", live: kept });
        return;
      }
      case "spin": {
        // Runs until terminated: allocations and frees of every size, so
        // that termination lands inside one.
        post({ type: "spinning" });
        const random = prng(c.seed);
        const mine: number[] = [];
        // beat[0]: a heartbeat; beat[1] set: stop at once, abandoning every
        // live block (Deno's terminate() does not interrupt this loop).
        const beat = c.beat === undefined ? undefined : new Int32Array(c.beat);
        for (;;) {
          if (beat !== undefined) {
            Atomics.add(beat, 0, 1);
            if (Atomics.load(beat, 1) !== 0) return;
          }
          if (random() < 0.5 || mine.length === 0) {
            const at = heap.tryAlloc(Math.floor(2 ** (random() * 18)));
            if (at !== undefined) mine.push(at);
          } else {
            const k = Math.floor(random() * mine.length);
            heap.free(mine[k]);
            mine[k] = mine[mine.length - 1];
            mine.pop();
          }
        }
      }
      case "receive": {
        // Several Workers race to receive one descriptor: one may.
        const allocator = new SharedHeapAllocator(heap);
        let buffer;
        try {
          buffer = allocator.receive(c.descriptor);
        } catch (e) {
          if (!(e instanceof DoubleFreeError)) throw e;
          post({ type: "received", refused: e.name });
          return;
        }
        const data = [...buffer.toData()].map(Number);
        buffer.release();
        post({ type: "received", data });
        return;
      }
      case "detach":
        heap.detach();
        post({ type: "detached" });
        return;
    }
  } catch (e) {
    post({
      type: "error",
      message: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
    });
  }
};
