/**
 * Internal: a buffer pool (MPS `BufferPool`): its heaps and its cached
 * buffers in a size-ordered array for best-fit reuse.
 *
 * @module
 */

import type { _Block } from "./_block.ts";
import type { _Heap } from "./_heap.ts";
import type { PoolKind } from "./watermark_buffer.ts";

function before(a: _Block, byteLength: number, id: number): boolean {
  return a.byteLength < byteLength ||
    (a.byteLength === byteLength && a.id < id);
}

/** One pool: a kind (private, shared, scalar) and a size class. */
export class _Pool<M = unknown> {
  readonly kind: PoolKind;
  /** Small pools pack buffers in small heaps. */
  readonly small: boolean;
  readonly hostVisible: boolean;
  readonly name: string;
  readonly heaps: Set<_Heap<M>> = new Set();
  /** Cached (idle, not in use) buffers ordered by (byteLength, id). */
  readonly available: _Block<M>[] = [];
  /** Freed buffers whose recorded work has not completed yet. */
  readonly pendingFree: Set<_Block<M>> = new Set();
  /** Bytes of all buffers in this pool. */
  allocatedBytes = 0;
  /** Bytes of cached buffers. */
  availableBytes = 0;
  /** Requests that looked for a cached buffer (large pools): the clock of buffer ages. */
  epoch = 0;

  constructor(kind: PoolKind, small: boolean) {
    this.kind = kind;
    this.small = small;
    this.hostVisible = kind !== "private";
    this.name = `${small ? "small" : "large"} ${kind}`;
  }

  /** Index of the first cached buffer of at least `byteLength` bytes. */
  lowerBound(byteLength: number): number {
    const a = this.available;
    let lo = 0, hi = a.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (a[mid].byteLength < byteLength) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  addAvailable(block: _Block<M>): void {
    const a = this.available;
    let lo = 0, hi = a.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (before(a[mid], block.byteLength, block.id)) lo = mid + 1;
      else hi = mid;
    }
    a.splice(lo, 0, block);
    this.availableBytes += block.byteLength;
  }

  removeAvailable(block: _Block<M>): void {
    const a = this.available;
    let lo = 0, hi = a.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (before(a[mid], block.byteLength, block.id)) lo = mid + 1;
      else hi = mid;
    }
    if (a[lo] !== block) throw new Error("internal: block not cached");
    a.splice(lo, 1);
    this.availableBytes -= block.byteLength;
  }

  /** The heap with the smallest free range that still fits, if any. */
  findHeap(byteLength: number): _Heap<M> | undefined {
    let best: _Heap<M> | undefined;
    for (const heap of this.heaps) {
      const free = heap.largestFree;
      if (free >= byteLength && (!best || free < best.largestFree)) best = heap;
    }
    return best;
  }
}
