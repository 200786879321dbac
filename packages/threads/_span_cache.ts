/**
 * The owner-side index of an arena's cached large spans: spans the arena
 * freed (or took back from its return list) and keeps, marked `K_CACHED` in
 * the shared page records, to reuse without the core lock. The page records
 * stay the truth (reclaim walks them).
 *
 * Reuse is LIFO within a bin (the warmest span first); when the cache is
 * over its limit the **oldest** spans go back to the core first, whatever
 * their size, so a size still in use keeps its spans and a size no longer
 * asked for drains. Each bin is a list threaded through the first page
 * records of its spans, newest at the head: `M_NEXT` points to the next
 * older span, `M_PREV` to the next newer one (kept exact for every span but
 * the head, the only one that needs none), `M_AGE` holds the span's stamp.
 * Only the owner touches a cached span's record, and put and take touch the
 * record's line anyway. Heads, tails and the tails' stamps live here in
 * typed arrays, so every operation is O(1) with plain reads and writes, and
 * finding the oldest span compares the non-empty bins' tails without
 * touching shared memory.
 *
 * @module
 */

import { binOf, BINS, M_AGE, M_LEN, M_NEXT, M_PREV } from "./_layout.ts";

/** Cached spans of one arena, binned by length, with their ages. */
export class SpanCache {
  /** Pages held by the cached spans. */
  pages = 0;
  /** Spans held. */
  spans = 0;
  #i32: Int32Array;
  #meta: number;
  /** Newest span of each bin (its first page), -1 when empty. */
  #head: Int32Array = new Int32Array(BINS).fill(-1);
  /** Oldest span of each bin, -1 when empty. */
  #tail: Int32Array = new Int32Array(BINS).fill(-1);
  /** Age stamp of each non-empty bin's oldest span. */
  #tailStamp: Int32Array = new Int32Array(BINS);
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
    const i32 = this.#i32, meta = this.#meta, w = meta + (page << 3);
    const len = i32[w + M_LEN];
    const bin = binOf(len);
    const stamp = this.#clock;
    this.#clock = (stamp + 1) | 0;
    const head = this.#head[bin];
    i32[w + M_NEXT] = head;
    i32[w + M_AGE] = stamp;
    if (head < 0) {
      this.#tail[bin] = page;
      this.#tailStamp[bin] = stamp;
      this.#full[bin >> 5] |= 1 << (bin & 31);
    } else i32[meta + (head << 3) + M_PREV] = page;
    this.#head[bin] = page;
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
    const heads = this.#head;
    for (let b = from; b < to; b++) {
      const page = heads[b];
      if (page < 0) continue;
      const i32 = this.#i32, w = this.#meta + (page << 3);
      const next = i32[w + M_NEXT];
      heads[b] = next;
      if (next < 0) {
        this.#tail[b] = -1;
        this.#full[b >> 5] &= ~(1 << (b & 31));
      }
      this.pages -= i32[w + M_LEN];
      this.spans--;
      return page;
    }
    return -1;
  }

  /**
   * Takes the most recent of the newest `scan` spans of `bin` that has at
   * least `pages` pages (a bin holds lengths within 25% of each other, so
   * a size freed and asked for again finds its span here).
   *
   * @returns Its first page, or -1.
   */
  takeFit(bin: number, pages: number, scan = 4): number {
    const i32 = this.#i32, meta = this.#meta;
    let page = this.#head[bin], newer = -1;
    for (let n = 0; page >= 0 && n < scan; n++) {
      const w = meta + (page << 3);
      const len = i32[w + M_LEN];
      if (len >= pages) {
        const older = i32[w + M_NEXT];
        if (newer < 0) this.#head[bin] = older;
        else i32[meta + (newer << 3) + M_NEXT] = older;
        if (older >= 0) {
          // `older` keeps an exact link unless it became the head.
          if (newer >= 0) i32[meta + (older << 3) + M_PREV] = newer;
        } else if (newer >= 0) {
          this.#tail[bin] = newer;
          this.#tailStamp[bin] = i32[meta + (newer << 3) + M_AGE];
        } else {
          this.#tail[bin] = -1;
          this.#full[bin >> 5] &= ~(1 << (bin & 31));
        }
        this.pages -= len;
        this.spans--;
        return page;
      }
      newer = page;
      page = i32[w + M_NEXT];
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
    const full = this.#full, stamps = this.#tailStamp;
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
    const i32 = this.#i32, meta = this.#meta;
    const page = this.#tail[best];
    if (page === this.#head[best]) {
      this.#head[best] = -1;
      this.#tail[best] = -1;
      full[best >> 5] &= ~(1 << (best & 31));
    } else {
      const newer = i32[meta + (page << 3) + M_PREV], w = meta + (newer << 3);
      i32[w + M_NEXT] = -1;
      this.#tail[best] = newer;
      stamps[best] = i32[w + M_AGE];
    }
    this.pages -= i32[meta + (page << 3) + M_LEN];
    this.spans--;
    return page;
  }
}
