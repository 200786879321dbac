/**
 * The peers of the stretch benches (`between_stretches.ts`,
 * `stretch_costs.ts`): allot's `GpuCachingAllocator` through handles and
 * through ids, TF.js's own `BufferManager`, and a peer that does nothing
 * (the replay loop's own cost), each behind one surface. `use` reads what a
 * runtime would bind (buffer and offset) into a module-level sink, so no
 * read is optimized away.
 *
 * @module
 */

import { BufferManager } from "@tensorflow/tfjs-backend-webgpu/dist/buffer_manager.js";
import { GpuCachingAllocator } from "../gpu_caching_allocator.ts";

/** One peer: allocate, read what a binding reads, free. */
export interface StretchPeer {
  alloc(size: number, usage: number): unknown;
  use(handle: unknown): number;
  free(handle: unknown): void;
}

/** The peers' names (the `--peer` values) and how tables label them. */
export const STRETCH_PEERS = [
  { name: "allot", label: "allot" },
  { name: "allot-ids", label: "allot ids" },
  { name: "tfjs", label: "TF.js" },
  { name: "no-op", label: "no-op" },
] as const;

interface Handle {
  readonly buffer: GPUBuffer;
  readonly offset: number;
  release(): void;
}

let sink: unknown;

/** What the peers' `use` read last (keeps the reads alive). */
export function stretchSink(): unknown {
  return sink;
}

/**
 * A fresh peer on `device`.
 *
 * @param name One of {@linkcode STRETCH_PEERS}' names.
 * @param device The device its pool serves.
 * @returns The peer.
 * @throws {Error} For an unknown name.
 */
export function makeStretchPeer(name: string, device: GPUDevice): StretchPeer {
  if (name === "allot") {
    const a = new GpuCachingAllocator(device);
    return {
      alloc: (size) => a.allocate(size),
      use: (h) => (sink = (h as Handle).buffer, (h as Handle).offset),
      free: (h) => (h as Handle).release(),
    };
  }
  if (name === "allot-ids") {
    const a = new GpuCachingAllocator(device);
    return {
      alloc: (size) => a.allocateId(size),
      use: (id) => (sink = a.bufferOf(id as number), a.offsetOf(id as number)),
      free: (id) => a.freeById(id as number),
    };
  }
  if (name === "tfjs") {
    const m = new BufferManager(device);
    return {
      alloc: (size, usage) => m.acquireBuffer(size, usage),
      use: (b) => (sink = b, 0),
      free: (b) => m.releaseBuffer(b as GPUBuffer),
    };
  }
  if (name === "no-op") {
    const none = {};
    return { alloc: () => none, use: (h) => (sink = h, 0), free() {} };
  }
  throw new Error(`unknown --peer=${name}`);
}
