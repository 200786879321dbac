/**
 * For tests only: frees a block of a good-fit {@linkcode CpuHeap} through the
 * general path (`#release` and its helpers) instead of `free()`'s written-out
 * good-fit path, so that a differential test can check the two agree block
 * for block. Set by `CpuHeap`'s static block (it reads a private field).
 *
 * @module
 */

import type { CpuHeap } from "./heap.ts";

/** Internal access to a heap's general free path. */
export const generalFree: {
  /** Frees the block at `byteOffset` as `free()` does, through `#release`. */
  free: (heap: CpuHeap, byteOffset: number) => void;
} = {
  free: _notLoaded,
};

function _notLoaded(): never {
  throw new Error("CpuHeap not loaded");
}
