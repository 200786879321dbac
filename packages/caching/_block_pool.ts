// Internal block and pool structures of the caching allocator.

import type { Fence, Segment, Stream } from "@allot/core";

/** Block states. */
export const FREE = 0;
export const ALLOCATED = 1;
export const PENDING = 2;

/** One device segment as the allocator sees it. */
export class _Segment<M> {
  head: _Block<M>;
  constructor(
    readonly id: number,
    readonly address: number,
    readonly raw: Segment<M>,
    readonly byteLength: number,
    readonly small: boolean,
    readonly stream: Stream,
  ) {
    this.head = undefined as unknown as _Block<M>;
  }
}

/** A range of a segment: free (in a pool), allocated, or pending free. */
export class _Block<M> {
  segment: _Segment<M>;
  offset = 0;
  size = 0;
  address = 0;
  requested = 0;
  state = FREE;
  streamId = 0;
  prev: _Block<M> | null = null;
  next: _Block<M> | null = null;
  streamUses: Stream[] | null = null;
  fences: Fence[] | null = null;
  /** Allocation counter when the block last entered a pool (GC age). */
  stamp = 0;
  stack: string | undefined = undefined;
  handle: object | null = null;
  constructor(segment: _Segment<M>) {
    this.segment = segment;
  }
}

/** Whether `x` sorts before `y` by (stream id, size, address). */
function precedes<M>(x: _Block<M>, y: _Block<M>): boolean {
  return x.streamId < y.streamId ||
    (x.streamId === y.streamId &&
      (x.size < y.size || (x.size === y.size && x.address < y.address)));
}

/**
 * Free blocks of one pool, sorted by (stream id, size, address): best fit is
 * a lower-bound binary search. A sorted array: a pool of a few blocks costs
 * one small array; short moves are manual shifts, long ones `splice`'s
 * memmove. (A list of sorted chunks of at most 64 blocks was measured too:
 * 2.2x faster on the churn benchmark with about 370 free blocks, but 10-20 %
 * slower on the hit path and on trace replay, where pools hold few blocks.)
 */
export class _BlockPool<M> {
  readonly #blocks: _Block<M>[] = [];
  constructor(readonly small: boolean) {}

  /** Number of free blocks. */
  get count(): number {
    return this.#blocks.length;
  }

  /** First index whose block is not before the key (stream, size, address). */
  #position(s: number, z: number, a: number): number {
    const blocks = this.#blocks;
    let lo = 0, hi = blocks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const b = blocks[mid];
      if (
        b.streamId < s ||
        (b.streamId === s && (b.size < z || (b.size === z && b.address < a)))
      ) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * The smallest block of stream `streamId` at least `size` large (lowest
   * address first), else the next block in order, else `undefined`.
   */
  lowerBound(streamId: number, size: number): _Block<M> | undefined {
    const i = this.#position(streamId, size, -1);
    return i < this.#blocks.length ? this.#blocks[i] : undefined;
  }

  insert(block: _Block<M>): void {
    const blocks = this.#blocks;
    const i = this.#position(block.streamId, block.size, block.address);
    let j = blocks.length;
    if (i === j) {
      blocks.push(block);
    } else if (j - i > 32) {
      blocks.splice(i, 0, block);
    } else {
      blocks.push(blocks[j - 1]);
      for (j--; j > i; j--) blocks[j] = blocks[j - 1];
      blocks[i] = block;
    }
  }

  /** Whether the block is in the pool. */
  has(block: _Block<M>): boolean {
    const i = this.#position(block.streamId, block.size, block.address);
    return i < this.#blocks.length && this.#blocks[i] === block;
  }

  remove(block: _Block<M>): void {
    const blocks = this.#blocks;
    const i = this.#position(block.streamId, block.size, block.address);
    if (i >= blocks.length || blocks[i] !== block) {
      throw new Error("Internal error: block not in its pool");
    }
    const last = blocks.length - 1;
    if (last - i > 32) {
      blocks.splice(i, 1);
      return;
    }
    for (let j = i; j < last; j++) blocks[j] = blocks[j + 1];
    blocks.pop();
  }

  /**
   * Index of a block in the pool, for {@linkcode _BlockPool.rekeyAt}: take it
   * before changing the block's size or address.
   */
  indexOf(block: _Block<M>): number {
    const i = this.#position(block.streamId, block.size, block.address);
    if (i >= this.#blocks.length || this.#blocks[i] !== block) {
      throw new Error("Internal error: block not in its pool");
    }
    return i;
  }

  /**
   * Puts the block at index `i`, whose size or address changed, back in
   * order. When it still sorts between its neighbours nothing moves: the
   * common case of a split remainder or a merge survivor.
   */
  rekeyAt(i: number): void {
    const blocks = this.#blocks;
    const block = blocks[i];
    const last = blocks.length - 1;
    // (No reads outside the array: they are slow in V8.)
    if (
      (i === 0 || precedes(blocks[i - 1], block)) &&
      (i === last || precedes(block, blocks[i + 1]))
    ) return;
    if (last - i > 32) blocks.splice(i, 1);
    else {
      for (let j = i; j < last; j++) blocks[j] = blocks[j + 1];
      blocks.pop();
    }
    this.insert(block);
  }

  /** Every free block in order (a copy). */
  all(): _Block<M>[] {
    return this.#blocks.slice();
  }
}
