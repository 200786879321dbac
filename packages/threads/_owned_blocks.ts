/**
 * Blocks of a shared heap that a live `DataPtr` owns (one owner per block):
 * {@linkcode SharedHeapAllocator} marks each block it hands out, and a raw
 * `SharedHeap.free` of a marked block throws `DoubleFreeError` and changes
 * nothing. The marks live in the heap's shared memory (a small block's state
 * byte, a large span's page record), so every handle in every Worker sees
 * them. Set by `shared_heap.ts` (it alone reads the heap's private state).
 *
 * @module
 */

import type { SharedHeap } from "./shared_heap.ts";

/** A small block's state byte while a DataPtr owns it (1: live, 0: free). */
export const OWNED_BLOCK = 2;
/** A live large span's `M_AGE` word while a DataPtr owns it (else 0). */
export const OWNED_SPAN = 0x6f776e64; // "ownd"

/** The owned-block operations, filled in by `SharedHeap`'s static block. */
export const ownedBlocks: {
  /** Marks a live block owned; throws when it is not live or owned already. */
  mark: (heap: SharedHeap, byteOffset: number) => void;
  /** Clears an owned block's mark and frees it; throws when not owned. */
  free: (heap: SharedHeap, byteOffset: number) => void;
} = {
  mark: () => {
    throw new Error("unreachable: shared_heap.ts not loaded");
  },
  free: () => {
    throw new Error("unreachable: shared_heap.ts not loaded");
  },
};
