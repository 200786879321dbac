/**
 * The owner-side index of an arena's cached large spans: spans the arena
 * freed (or took back from its return list) and keeps, marked `K_CACHED` in
 * the shared page records, to reuse without the core lock. The page records
 * stay the truth (reclaim walks them); this index lives in the handle.
 *
 * Reuse is LIFO within a bin (the warmest span first); when the cache is
 * over its limit the **oldest** spans go back to the core first, whatever
 * their size, so a size still in use keeps its spans and a size no longer
 * asked for drains. Each bin is a stack of pages, oldest at the bottom; a
 * span's age stamp sits in the `M_PREV` word of its first page record (the
 * line put and take touch anyway; the word is free while a span is cached,
 * and only its owner touches a cached span's record), and each bin's
 * bottom stamp is mirrored here, so finding the oldest span compares the
 * non-empty bins' bottoms without touching shared memory.
 *
 * @module
 */

import { binOf, BINS, M_LEN, M_PREV } from "./_layout.ts";

/** Cached spans of one arena, binned by length, with their ages. */
export class SpanCache {
  /** Pages held by the cached spans. */
  pages = 0;
  /** Spans held. */
  spans = 0;
  #i32: Int32Array;
  #meta: number;
  #bins: number[][] = Array.from({ length: BINS }, () => []);
  /** Index of each bin's oldest page in its stack. */
  #bottom: Int32Array = new Int32Array(BINS);
  /** Age stamp of each non-empty bin's oldest page. */
  #bottomStamp: Int32Array = new Int32Array(BINS);
  /** Bit b set when bin b is not empty. */
  #full: Int32Array = new Int32Array((BINS + 31) >> 5);
  #clock = 0;

  /**
   * @param i32 The shared memory's words.
   * @param meta Word index of the page records (8 words a page).
   */
  constructor(i32: Int32Array, meta: number) {
    this.#i32 = i32;
    this.#meta = meta;
  }

  /** Keeps the span at `page` (its length read from its page record). */
  put(page: number): void {
    const i32 = this.#i32, w = this.#meta + (page << 3);
    const len = i32[w + M_LEN];
    const bin = binOf(len), stack = this.#bins[bin];
    const stamp = this.#clock++ | 0;
    i32[w + M_PREV] = stamp;
    if (stack.length === this.#bottom[bin]) {
      this.#bottomStamp[bin] = stamp;
      this.#full[bin >> 5] |= 1 << (bin & 31);
    }
    stack.push(page);
    this.pages += len;
    this.spans++;
  }

  /**
   * Takes the most recently cached span of the first non-empty bin in
   * `[from, to)`.
   *
   * @returns Its first page, or -1.
   */
  take(from: number, to: number): number {
    const bins = this.#bins, bottom = this.#bottom;
    for (let b = from; b < to; b++) {
      const stack = bins[b];
      if (stack.length === bottom[b]) continue;
      const page = stack.pop()!;
      if (stack.length === bottom[b]) this.#emptied(b, stack);
      this.pages -= this.#i32[this.#meta + (page << 3) + M_LEN];
      this.spans--;
      return page;
    }
    return -1;
  }

  /**
   * Takes the oldest span of all bins.
   *
   * @returns Its first page, or -1 when empty.
   */
  takeOldest(): number {
    let best = -1, age = 0;
    const full = this.#full, stamps = this.#bottomStamp;
    for (let word = 0; word < full.length; word++) {
      for (let mask = full[word]; mask !== 0; mask &= mask - 1) {
        const b = (word << 5) + (31 - Math.clz32(mask & -mask));
        // Stamps wrap at 2^31: compare by difference.
        if (best < 0 || ((stamps[b] - age) | 0) < 0) {
          age = stamps[b];
          best = b;
        }
      }
    }
    if (best < 0) return -1;
    const stack = this.#bins[best], bottom = this.#bottom;
    const page = stack[bottom[best]++];
    if (stack.length === bottom[best]) this.#emptied(best, stack);
    else {
      this.#bottomStamp[best] =
        this.#i32[this.#meta + (stack[bottom[best]] << 3) + M_PREV];
      if (bottom[best] >= 16 && bottom[best] * 2 >= stack.length) {
        // Drop the taken bottom once it is half the stack (amortised O(1)).
        stack.splice(0, bottom[best]);
        bottom[best] = 0;
      }
    }
    this.pages -= this.#i32[this.#meta + (page << 3) + M_LEN];
    this.spans--;
    return page;
  }

  #emptied(b: number, stack: number[]): void {
    if (this.#bottom[b] !== 0) {
      // Only after evictions: a stack emptied by pops keeps its capacity.
      stack.length = 0;
      this.#bottom[b] = 0;
    }
    this.#full[b >> 5] &= ~(1 << (b & 31));
  }
}
