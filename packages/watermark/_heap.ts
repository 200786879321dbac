/**
 * Internal: a heap is one segment from the segment source; buffers are
 * sub-allocated in it by best fit over a list of free ranges sorted by offset,
 * and ranges merge with their free neighbours when buffers are released.
 *
 * @module
 */

import type { Segment } from "@allot/core";
import type { _Block } from "./_block.ts";
import type { _Pool } from "./_pool.ts";

/** A free range inside a heap. */
interface _Range {
  offset: number;
  byteLength: number;
}

let nextHeapId = 1;

/** One heap: a segment and the free ranges inside it. */
export class _Heap<M = unknown> {
  readonly id: number = nextHeapId++;
  readonly segment: Segment<M>;
  readonly pool: _Pool<M>;
  /** Whether the heap was made to hold several buffers (otherwise one). */
  readonly isSplit: boolean;
  /** Virtual address of the first byte, for snapshots. */
  readonly address: number;
  /** Buffers (in use, cached or pending) that live in this heap. */
  readonly blocks: Set<_Block<M>> = new Set();
  #free: _Range[];
  #largestFree: number;

  constructor(
    segment: Segment<M>,
    pool: _Pool<M>,
    isSplit: boolean,
    address: number,
  ) {
    this.address = address;
    this.segment = segment;
    this.pool = pool;
    this.isSplit = isSplit;
    this.#free = [{ offset: 0, byteLength: segment.byteLength }];
    this.#largestFree = segment.byteLength;
  }

  get byteLength(): number {
    return this.segment.byteLength;
  }

  /** Largest contiguous free range (what a new buffer can get). */
  get largestFree(): number {
    return this.#largestFree;
  }

  /** Free bytes in all ranges. */
  get freeBytes(): number {
    let sum = 0;
    for (const r of this.#free) sum += r.byteLength;
    return sum;
  }

  /** The free ranges, for snapshots. */
  freeRanges(): readonly Readonly<_Range>[] {
    return this.#free;
  }

  /**
   * Takes `byteLength` bytes by best fit.
   *
   * @returns The offset, or -1 when no range is large enough.
   */
  take(byteLength: number): number {
    let best = -1;
    for (let i = 0; i < this.#free.length; i++) {
      const r = this.#free[i];
      if (
        r.byteLength >= byteLength &&
        (best < 0 || r.byteLength < this.#free[best].byteLength)
      ) {
        best = i;
        if (r.byteLength === byteLength) break;
      }
    }
    if (best < 0) return -1;
    const range = this.#free[best];
    const offset = range.offset;
    const wasLargest = range.byteLength === this.#largestFree;
    if (range.byteLength === byteLength) this.#free.splice(best, 1);
    else {
      range.offset += byteLength;
      range.byteLength -= byteLength;
    }
    if (wasLargest) this.#updateLargest();
    return offset;
  }

  /** Returns a range taken with `take`, merging it with free neighbours. */
  give(offset: number, byteLength: number): void {
    const free = this.#free;
    let lo = 0, hi = free.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (free[mid].offset < offset) lo = mid + 1;
      else hi = mid;
    }
    const prev = lo > 0 ? free[lo - 1] : undefined;
    const next = lo < free.length ? free[lo] : undefined;
    let merged: _Range;
    if (prev && prev.offset + prev.byteLength === offset) {
      prev.byteLength += byteLength;
      if (next && offset + byteLength === next.offset) {
        prev.byteLength += next.byteLength;
        free.splice(lo, 1);
      }
      merged = prev;
    } else if (next && offset + byteLength === next.offset) {
      next.offset = offset;
      next.byteLength += byteLength;
      merged = next;
    } else {
      merged = { offset, byteLength };
      free.splice(lo, 0, merged);
    }
    if (merged.byteLength > this.#largestFree) {
      this.#largestFree = merged.byteLength;
    }
  }

  #updateLargest(): void {
    let largest = 0;
    for (const r of this.#free) {
      if (r.byteLength > largest) largest = r.byteLength;
    }
    this.#largestFree = largest;
  }
}
