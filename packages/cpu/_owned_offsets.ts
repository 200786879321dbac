/**
 * The byte offsets of a heap's blocks that a {@linkcode CpuAllocator} owns
 * (through a `DataPtr` or a raw context): the heap's own `free`, `realloc`
 * and `resizeInPlace` refuse them, so only the allocator frees them. Set by
 * `CpuHeap`'s static block (it reads a private field).
 *
 * @module
 */

import type { CpuHeap } from "./heap.ts";

/** Internal access to a heap's owned-block marks (one bit per granule). */
export const ownedOffsets: {
  /** Marks the block at `byteOffset` (a live block's start) as owned. */
  mark: (heap: CpuHeap, byteOffset: number) => void;
  /** Clears the mark; returns whether it was set. */
  unmark: (heap: CpuHeap, byteOffset: number) => boolean;
} = {
  mark: _notLoaded,
  unmark: _notLoaded,
};

function _notLoaded(): never {
  throw new Error("CpuHeap not loaded");
}
