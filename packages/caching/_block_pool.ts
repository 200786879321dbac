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

/**
 * Free blocks of one pool, sorted by (stream id, size, address): best fit is
 * a lower-bound binary search. A sorted array: inserts and removals shift
 * elements, which is fast at the few hundred free blocks pools hold.
 */
export class _BlockPool<M> {
  readonly blocks: _Block<M>[] = [];
  constructor(readonly small: boolean) {}

  /** First index whose (stream, size) is at least (streamId, size). */
  lowerBound(streamId: number, size: number): number {
    const blocks = this.blocks;
    let lo = 0, hi = blocks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const b = blocks[mid];
      if (b.streamId < streamId || (b.streamId === streamId && b.size < size)) {
        lo = mid + 1;
      } else hi = mid;
    }
    return lo;
  }

  #position(block: _Block<M>): number {
    const blocks = this.blocks;
    const s = block.streamId, z = block.size, a = block.address;
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

  insert(block: _Block<M>): void {
    const i = this.#position(block);
    const blocks = this.blocks;
    let j = blocks.length;
    if (i === j) {
      blocks.push(block);
      return;
    }
    // Manual shifts: several times faster than splice on short arrays.
    blocks.push(blocks[j - 1]);
    for (j--; j > i; j--) blocks[j] = blocks[j - 1];
    blocks[i] = block;
  }

  indexOf(block: _Block<M>): number {
    const i = this.#position(block);
    return this.blocks[i] === block ? i : -1;
  }

  remove(block: _Block<M>): void {
    const i = this.indexOf(block);
    if (i < 0) throw new Error("Internal error: block not in its pool");
    this.removeAt(i);
  }

  removeAt(i: number): void {
    const blocks = this.blocks;
    const last = blocks.length - 1;
    for (let j = i; j < last; j++) blocks[j] = blocks[j + 1];
    blocks.pop();
  }
}
