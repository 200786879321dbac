/**
 * Internal: the allocator's record of one buffer (MPS `BufferBlock`). The
 * record lives as long as the buffer exists in a heap; the user-facing handle
 * is made afresh on each allocation so a stale handle cannot free a recycled
 * buffer.
 *
 * @module
 */

import type { Fence } from "@allot/core";
import type { _Heap } from "./_heap.ts";

let nextBlockId = 1;

/** Where a buffer is in its life. */
export type _BlockState = "active" | "pending-free" | "cached" | "released";

/** One buffer inside a heap. */
export class _Block<M = unknown> {
  readonly id: number = nextBlockId++;
  readonly heap: _Heap<M>;
  /** Byte offset inside the heap. */
  readonly offset: number;
  /** Size after alignment. */
  readonly byteLength: number;
  /** Size the last user asked for (before alignment). */
  requestedByteLength: number;
  shape: number[] = [];
  state: _BlockState = "active";
  /** Fences of work that uses the buffer; pruned when they complete. */
  fences: Fence[] = [];
  /** Queue keys of `fences` (stream ids; a bare fence has a key of its own). */
  fenceKeys: number[] = [];
  /** Fences a pending-free buffer still waits for (see DeferredFrees). */
  waitingFences = 0;
  /**
   * The pool's epoch when the buffer became cached; its age (MPS's
   * `gc_count`) is the pool's epoch minus this.
   */
  cachedEpoch = 0;
  /** Index in its pool's bucket of cached buffers, -1 when not cached. */
  availableIndex = -1;
  /** How many times the buffer was handed out. */
  useCount = 0;
  /** The live handle while the buffer is in use. */
  handle: object | undefined;

  constructor(
    heap: _Heap<M>,
    offset: number,
    byteLength: number,
    requestedByteLength: number,
  ) {
    this.heap = heap;
    this.offset = offset;
    this.byteLength = byteLength;
    this.requestedByteLength = requestedByteLength;
  }

  /** Whether all recorded work on the buffer has completed; prunes the rest. */
  idle(): boolean {
    const fences = this.fences;
    if (fences.length === 0) return true;
    const keys = this.fenceKeys;
    let live = 0;
    for (let i = 0; i < fences.length; i++) {
      if (!completed(fences[i])) {
        fences[live] = fences[i];
        keys[live++] = keys[i];
      }
    }
    fences.length = keys.length = live;
    return live === 0;
  }
}

/** A fence that throws counts as not complete: DeferredFrees reports it. */
function completed(fence: Fence): boolean {
  try {
    return fence.completed === true;
  } catch {
    return false;
  }
}
