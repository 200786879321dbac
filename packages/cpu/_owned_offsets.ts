/**
 * The byte offsets of a heap's blocks that a {@linkcode CpuAllocator} owns
 * (through a `DataPtr` or a raw context): the heap's own `free`, `realloc`
 * and `resizeInPlace` refuse them, so only the allocator frees them. Set by
 * `CpuHeap`'s static block (it reads a private field).
 *
 * @module
 */

import type { CpuHeap } from "./heap.ts";

/** Internal access to a heap's owned-offset set. */
export const ownedOffsets: {
  /** The heap's set, made on first use. */
  of: (heap: CpuHeap) => Set<number>;
} = {
  of: () => {
    throw new Error("CpuHeap not loaded");
  },
};
