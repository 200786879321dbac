/**
 * Internal: {@linkcode _GrowthRoom}, room for requests that grow by a
 * steady step (a KV cache grown by concatenation, one token at a time),
 * given to a new segment only on evidence that they do.
 *
 * @module
 */

/** Misses remembered per pool. */
export const GROWTH_HISTORY = 16;
/** A step is growth only up to this share of the request (1/8). */
export const MAX_STEP_SHARE = 8;

/**
 * The recent misses of one pool (request sizes, rounded, that found no
 * cached block) and the room a new segment gets. Growth is seen when a miss
 * of `size` follows earlier misses of `size - step`, `size - 2 * step` and
 * `size - 3 * step` among the last {@linkcode GROWTH_HISTORY} (the same step
 * three times; caches that grow side by side interleave, so the four need
 * not be adjacent), with a step of at most 1/{@linkcode MAX_STEP_SHARE} of
 * the request. The room is that step, capped by the caller (to the pool's
 * give-back ratio's share of the request) and cut to whole granules: sizes
 * that repeat, or grow by more than the cap, get none. Three terms were not
 * evidence enough: MobileNet's layer sizes 288, 324 and 360 KiB (channels
 * in steps) took room where nothing grows (peak held / live 1.0098 ->
 * 1.0113); a fourth term in step is rare where nothing grows, and the room
 * is at most the cap then.
 */
export class _GrowthRoom {
  readonly #sizes = new Float64Array(GROWTH_HISTORY);
  #count = 0;
  #next = 0;

  /**
   * Records a miss of `size` bytes; returns the room (a multiple of
   * `granule`, at most `cap`) its segment gets beyond `size`.
   */
  miss(size: number, granule: number, cap: number): number {
    const room = this.#room(size, granule, cap);
    this.#sizes[this.#next] = size;
    this.#next = (this.#next + 1) % GROWTH_HISTORY;
    if (this.#count < GROWTH_HISTORY) this.#count++;
    return room;
  }

  /** Whether a miss older than the `after`-th newest was of `size` bytes. */
  #has(size: number, after: number): boolean {
    for (let j = after + 1; j <= this.#count; j++) {
      if (
        this.#sizes[(this.#next - j + GROWTH_HISTORY) % GROWTH_HISTORY] === size
      ) return true;
    }
    return false;
  }

  #room(size: number, granule: number, cap: number): number {
    const sizes = this.#sizes;
    const n = this.#count;
    // Newest first: the latest miss a step below, with two more below it.
    for (let i = 1; i <= n; i++) {
      const prev = sizes[(this.#next - i + GROWTH_HISTORY) % GROWTH_HISTORY];
      const step = size - prev;
      if (step <= 0 || step * MAX_STEP_SHARE > size) continue;
      if (this.#has(prev - step, i) && this.#has(prev - 2 * step, i)) {
        const room = Math.floor(Math.min(step, cap) / granule) * granule;
        return room > 0 ? room : 0;
      }
    }
    return 0;
  }
}
