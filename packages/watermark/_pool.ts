/**
 * Internal: a buffer pool (MPS `BufferPool`): its heaps and its cached
 * buffers in a size-ordered array for best-fit reuse.
 *
 * @module
 */

import type { _Block } from "./_block.ts";
import type { _Heap } from "./_heap.ts";
import type { PoolKind } from "./watermark_buffer.ts";

/** One pool: a kind (private, shared, scalar) and a size class. */
export class _Pool<M = unknown> {
  readonly kind: PoolKind;
  /** Small pools pack buffers in small heaps. */
  readonly small: boolean;
  readonly hostVisible: boolean;
  readonly name: string;
  readonly heaps: Set<_Heap<M>> = new Set();
  /** Cached buffers by byte length: one stack per size. */
  readonly #buckets: Map<number, _Block<M>[]> = new Map();
  /** The sizes with cached buffers, ascending. */
  readonly #sizes: number[] = [];
  /** Number of cached buffers. */
  availableCount = 0;
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

  #sizeIndex(byteLength: number): number {
    const a = this.#sizes;
    let lo = 0, hi = a.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (a[mid] < byteLength) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The most recently cached buffer of the smallest size `>= byteLength`. */
  bestFit(byteLength: number): _Block<M> | undefined {
    const i = this.#sizeIndex(byteLength);
    if (i >= this.#sizes.length) return undefined;
    const bucket = this.#buckets.get(this.#sizes[i])!;
    return bucket[bucket.length - 1];
  }

  /** A cached buffer of the largest size. */
  largest(): _Block<M> | undefined {
    const sizes = this.#sizes;
    if (sizes.length === 0) return undefined;
    const bucket = this.#buckets.get(sizes[sizes.length - 1])!;
    return bucket[bucket.length - 1];
  }

  /** The cached buffers in ascending size (a copy). */
  availableList(): _Block<M>[] {
    const out: _Block<M>[] = [];
    for (const size of this.#sizes) out.push(...this.#buckets.get(size)!);
    return out;
  }

  addAvailable(block: _Block<M>): void {
    const n = block.byteLength;
    let bucket = this.#buckets.get(n);
    if (bucket === undefined) {
      bucket = [];
      this.#buckets.set(n, bucket);
      this.#sizes.splice(this.#sizeIndex(n), 0, n);
    }
    block.availableIndex = bucket.length;
    bucket.push(block);
    this.availableCount++;
    this.availableBytes += n;
  }

  removeAvailable(block: _Block<M>): void {
    const n = block.byteLength;
    const bucket = this.#buckets.get(n);
    const i = block.availableIndex;
    if (bucket === undefined || bucket[i] !== block) {
      throw new Error("internal: block not cached");
    }
    const last = bucket.pop()!;
    if (last !== block) {
      bucket[i] = last;
      last.availableIndex = i;
    }
    if (bucket.length === 0) {
      this.#buckets.delete(n);
      this.#sizes.splice(this.#sizeIndex(n), 1);
    }
    block.availableIndex = -1;
    this.availableCount--;
    this.availableBytes -= n;
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
