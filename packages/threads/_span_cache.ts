/**
 * The owner-side index of an arena's cached large spans: spans the arena
 * freed itself and keeps (marked `K_CACHED` in the shared page records) to
 * reuse without the core lock. This index lives in the handle, not in the
 * shared memory: the page records stay the truth (reclaim walks them).
 *
 * Reuse is LIFO within a bin (the warmest span first); when the cache is
 * over its limit the **oldest** spans go back to the core first, whatever
 * their size, so a bin that is still in use keeps its spans and a size that
 * stopped being asked for drains.
 *
 * @module
 */

/** Cached spans of one arena, binned by length, with their ages. */
export class SpanCache {
  /** Pages held by the cached spans. */
  pages = 0;
  /** Spans held. */
  spans = 0;
  #page: number[][];
  #len: number[][];
  #age: number[][];
  #clock = 0;

  /** @param bins Number of bins. */
  constructor(bins: number) {
    this.#page = Array.from({ length: bins }, () => []);
    this.#len = Array.from({ length: bins }, () => []);
    this.#age = Array.from({ length: bins }, () => []);
  }

  /** Keeps the span at `page` (`len` pages) in `bin`. */
  put(page: number, len: number, bin: number): void {
    this.#page[bin].push(page);
    this.#len[bin].push(len);
    this.#age[bin].push(this.#clock++);
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
    for (let b = from; b < to; b++) {
      const pages = this.#page[b];
      if (pages.length === 0) continue;
      this.pages -= this.#len[b].pop()!;
      this.#age[b].pop();
      this.spans--;
      return pages.pop()!;
    }
    return -1;
  }

  /**
   * Takes the oldest span of all bins.
   *
   * @returns Its first page, or -1 when empty.
   */
  takeOldest(): number {
    let best = -1, age = Infinity;
    const ages = this.#age;
    for (let b = 0; b < ages.length; b++) {
      if (ages[b].length !== 0 && ages[b][0] < age) {
        age = ages[b][0];
        best = b;
      }
    }
    if (best < 0) return -1;
    this.#age[best].shift();
    this.pages -= this.#len[best].shift()!;
    this.spans--;
    return this.#page[best].shift()!;
  }
}
