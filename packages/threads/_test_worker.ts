/**
 * The Worker side of the stress and dead-Worker tests: random allocate /
 * write-pattern / verify / free / hand-off on a shared heap, in slices that
 * yield to the event loop so hand-offs and commands arrive.
 *
 * @module
 */

import {
  SharedHeap,
  SharedHeapAllocator,
  type SharedHeapDescriptor,
} from "./mod.ts";
import type { SharedBufferDescriptor } from "./mod.ts";
import { Buffer } from "@allot/storage";
import { OutOfMemoryError } from "@allot/core";

/** A block handed to another Worker: where, how long, which pattern. */
export interface HandOff {
  byteOffset: number;
  byteLength: number;
  tag: number;
}

/** Commands from the test. */
export type Command =
  | {
    type: "start";
    heap: SharedHeapDescriptor;
    seed: number;
    maxBytes: number;
    handOffRate: number;
  }
  | { type: "take"; block: HandOff }
  | { type: "take-buffer"; descriptor: SharedBufferDescriptor; tag: number }
  | { type: "pause" }
  | { type: "finish" }
  | { type: "hold"; count: number }
  | {
    type: "free-all";
    heap: SharedHeapDescriptor;
    offsets: Int32Array;
    sync: SharedArrayBuffer;
  };

/** What a Worker reports. */
export type Report =
  | { type: "started"; arena: number }
  | { type: "hand-off"; block: HandOff }
  | { type: "hand-off-buffer"; descriptor: SharedBufferDescriptor; tag: number }
  | {
    type: "paused";
    live: number;
    ops: number;
    allocs: number;
    frees: number;
  }
  | { type: "finished"; ops: number }
  | { type: "holding"; blocks: HandOff[] }
  | { type: "freed"; count: number }
  | { type: "error"; message: string };

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

const scope = globalThis as unknown as {
  postMessage(message: unknown): void;
  onmessage: ((event: MessageEvent<Command>) => void) | null;
};
const post = (report: Report) => scope.postMessage(report);
let heap: SharedHeap;
let allocator: SharedHeapAllocator;
let u8: Uint8Array;
let random: () => number;
let maxBytes = 1 << 16;
let handOffRate = 0.05;
let running = false;
const live: HandOff[] = [];
let ops = 0, allocs = 0, frees = 0, tags = 0;

function verify(b: HandOff): void {
  const view = u8.subarray(b.byteOffset, b.byteOffset + b.byteLength);
  for (let i = 0; i < view.length; i += 61) {
    if (view[i] !== b.tag) {
      throw new Error(
        `Block ${b.byteOffset} (${b.byteLength} B) lost its pattern ${b.tag} at byte ${i}: ${
          view[i]
        } (overlap)`,
      );
    }
  }
  if (view.length && view[view.length - 1] !== b.tag) {
    throw new Error(`Block ${b.byteOffset} lost its last byte (overlap)`);
  }
}

function step(): void {
  const r = random();
  if (r < 0.5 || live.length === 0) {
    const n = Math.floor(16 * 2 ** (Math.log2(maxBytes / 16) * random()));
    // Half through alloc() (its owner fast path), half through tryAlloc().
    let at: number | undefined;
    if (random() < 0.5) at = heap.tryAlloc(n);
    else {
      try {
        at = heap.alloc(n);
      } catch (e) {
        if (!(e instanceof OutOfMemoryError)) throw e;
      }
    }
    if (at === undefined) return;
    tags = (tags % 250) + 1;
    const b = { byteOffset: at, byteLength: n, tag: tags };
    u8.fill(b.tag, at, at + n);
    live.push(b);
    allocs++;
    return;
  }
  const i = Math.floor(random() * live.length);
  const b = live[i];
  live[i] = live[live.length - 1];
  live.pop();
  verify(b);
  if (r < 0.5 + handOffRate) {
    if (random() < 0.5) post({ type: "hand-off", block: b });
    else {
      // The same bytes as a Buffer with a shared refcount: the sender lets
      // go first, the receiver's release frees the block.
      heap.free(b.byteOffset);
      frees++;
      // The live set drifts up (hand-offs move blocks, they do not free
      // them): a full heap skips this hand-off, as alloc() does above.
      let buffer;
      try {
        buffer = Buffer.filled("u8", [b.byteLength], {
          value: b.tag,
          allocator,
        });
      } catch (e) {
        if (e instanceof OutOfMemoryError) return;
        throw e;
      }
      const descriptor = allocator.share(buffer);
      buffer.release();
      post({ type: "hand-off-buffer", descriptor, tag: b.tag });
    }
    return;
  }
  heap.free(b.byteOffset);
  frees++;
}

async function loop(): Promise<void> {
  while (running) {
    const until = performance.now() + 4;
    while (running && performance.now() < until) {
      for (let k = 0; k < 64; k++) step();
      ops += 64;
    }
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

scope.onmessage = (event: MessageEvent<Command>) => {
  try {
    const command = event.data;
    switch (command.type) {
      case "start":
        heap = SharedHeap.attach(command.heap);
        allocator = new SharedHeapAllocator(heap);
        u8 = new Uint8Array(heap.buffer);
        random = prng(command.seed);
        maxBytes = command.maxBytes;
        handOffRate = command.handOffRate;
        running = true;
        post({ type: "started", arena: heap.arena });
        loop().catch((e) =>
          post({ type: "error", message: String(e?.stack ?? e) })
        );
        break;
      case "take":
        verify(command.block);
        live.push(command.block);
        break;
      case "take-buffer": {
        using b = allocator.receive(command.descriptor);
        const data = b.toData();
        if (data.some((x) => x !== command.tag)) {
          throw new Error(`A handed-off buffer lost its pattern`);
        }
        break;
      }
      case "pause":
        running = false;
        post({ type: "paused", live: live.length, ops, allocs, frees });
        break;
      case "finish":
        running = false;
        for (const b of live) {
          verify(b);
          heap.free(b.byteOffset);
          frees++;
        }
        live.length = 0;
        heap.detach();
        post({ type: "finished", ops });
        break;
      case "free-all": {
        // Remote frees only, all at once with the other Workers.
        const h = heap ?? SharedHeap.attach(command.heap);
        const sync = new Int32Array(command.sync);
        Atomics.add(sync, 1, 1);
        while (Atomics.load(sync, 0) === 0) Atomics.wait(sync, 0, 0, 20);
        for (const at of command.offsets) h.free(at);
        post({ type: "freed", count: command.offsets.length });
        break;
      }
      case "hold": {
        const blocks: HandOff[] = [];
        for (let i = 0; i < command.count; i++) {
          const n = 16 << (i % 14);
          const at = heap.alloc(n);
          u8.fill(0xab, at, at + n);
          blocks.push({ byteOffset: at, byteLength: n, tag: 0xab });
        }
        post({ type: "holding", blocks });
        break;
      }
    }
  } catch (e) {
    post({ type: "error", message: String((e as Error)?.stack ?? e) });
  }
};
