/**
 * The small-block index of `CpuHeap`'s compact placement: finds the
 * lowest-addressed free block of at least `need` units among the free blocks
 * shorter than one chunk, so that small requests take exact address-ordered
 * first fit (README, "Footprint").
 *
 * The region is cut into chunks of 2^CHUNK_LOG2 units. A small free block is
 * listed in the chunk its last unit lies in (carving a block's front, the
 * common case, keeps its entry). Per chunk: a singly linked list of its small
 * free blocks through the records' `R_CNEXT` slot (unused by free blocks
 * otherwise), and an upper bound of their sizes, kept exact when it rises and
 * lowered lazily when a search meets a chunk whose bound is stale. One bitmap
 * level per power of two (bit k of a chunk set while its bound is at least
 * 2^k), each with a summary bit per 32-chunk word, finds the lowest chunk that
 * may hold a fit with `Math.clz32`.
 *
 * About 6 bytes per chunk (16 KiB of region at 64-byte granules).
 *
 * @module
 */

import { R_CNEXT, R_SIZE, R_START, STRIDE } from "./_records.ts";

/** Log2 of the chunk length in units; small blocks are shorter than a chunk. */
export const CHUNK_LOG2 = 8;
// One bitmap level per power of two of a small size: 1 .. 2^(LEVELS - 1).
const LEVELS = CHUNK_LOG2;

function ctz(x: number): number {
  return 31 - Math.clz32(x & -x);
}

/** Address-ordered first fit over the free blocks shorter than a chunk. */
export class SmallIndex {
  /** First record of each chunk's list, -1 when empty. */
  heads = new Int32Array(0);
  /** Upper bound of the sizes in each chunk's list (0 when empty). */
  bound = new Uint8Array(0);
  #bits = new Int32Array(0); // LEVELS rows of #words words
  #sums = new Int32Array(0); // LEVELS rows of #sumWords words
  #words = 0;
  #sumWords = 0;

  /**
   * Makes room for `chunks` chunks, keeping the entries.
   *
   * @param chunks Number of chunks the region has.
   */
  resize(chunks: number): void {
    if (chunks <= this.heads.length) return;
    const heads = new Int32Array(chunks).fill(-1);
    heads.set(this.heads);
    const bound = new Uint8Array(chunks);
    bound.set(this.bound);
    const words = (chunks + 31) >>> 5;
    const sumWords = (words + 31) >>> 5;
    const bits = new Int32Array(LEVELS * words);
    const sums = new Int32Array(LEVELS * sumWords);
    for (let k = 0; k < LEVELS; k++) {
      bits.set(
        this.#bits.subarray(k * this.#words, (k + 1) * this.#words),
        k * words,
      );
      sums.set(
        this.#sums.subarray(k * this.#sumWords, (k + 1) * this.#sumWords),
        k * sumWords,
      );
    }
    this.heads = heads;
    this.bound = bound;
    this.#bits = bits;
    this.#sums = sums;
    this.#words = words;
    this.#sumWords = sumWords;
  }

  /** Forgets every entry. */
  clear(): void {
    this.heads.fill(-1);
    this.bound.fill(0);
    this.#bits.fill(0);
    this.#sums.fill(0);
  }

  /**
   * Lists free block `b` of `size` units in `chunk`.
   *
   * @param rec The records.
   * @param b The block's record.
   * @param chunk The chunk its last unit lies in.
   * @param size Its length in units, below one chunk.
   */
  link(rec: Int32Array, b: number, chunk: number, size: number): void {
    rec[b * STRIDE + R_CNEXT] = this.heads[chunk];
    this.heads[chunk] = b;
    if (size > this.bound[chunk]) this.raise(chunk, size);
  }

  /**
   * Takes free block `b` off the list of `chunk`.
   *
   * @param rec The records.
   * @param b The block's record, listed in `chunk`.
   * @param chunk The chunk it is listed in.
   */
  unlink(rec: Int32Array, b: number, chunk: number): void {
    let at = this.heads[chunk];
    const next = rec[b * STRIDE + R_CNEXT];
    if (at === b) {
      this.heads[chunk] = next;
      if (next < 0) this.#lower(chunk, 0);
      return;
    }
    for (;;) {
      const after = rec[at * STRIDE + R_CNEXT];
      if (after === b) {
        rec[at * STRIDE + R_CNEXT] = next;
        return;
      }
      at = after;
    }
  }

  /**
   * Raises the size bound of `chunk` to `size` (a listed block grew).
   *
   * @param chunk The chunk.
   * @param size The new bound, above the old one and below one chunk.
   */
  raise(chunk: number, size: number): void {
    const from = this.bound[chunk] === 0
      ? 0
      : 32 - Math.clz32(this.bound[chunk]);
    this.bound[chunk] = size;
    const to = 31 - Math.clz32(size);
    const w = chunk >>> 5, bit = 1 << (chunk & 31);
    const sw = w >>> 5, sumBit = 1 << (w & 31);
    for (let k = from; k <= to; k++) {
      const i = k * this.#words + w;
      const had = this.#bits[i];
      this.#bits[i] = had | bit;
      if (had === 0) this.#sums[k * this.#sumWords + sw] |= sumBit;
    }
  }

  // Lowers the bound of `chunk` to `size` (0: empty), clearing the levels
  // above it.
  #lower(chunk: number, size: number): void {
    const old = this.bound[chunk];
    this.bound[chunk] = size;
    const from = size === 0 ? 0 : 32 - Math.clz32(size);
    const to = 31 - Math.clz32(old);
    const w = chunk >>> 5, bit = ~(1 << (chunk & 31));
    const sw = w >>> 5, sumBit = ~(1 << (w & 31));
    for (let k = from; k <= to; k++) {
      const i = k * this.#words + w;
      const bits = this.#bits[i] & bit;
      this.#bits[i] = bits;
      if (bits === 0) this.#sums[k * this.#sumWords + sw] &= sumBit;
    }
  }

  /**
   * The lowest-addressed listed block of at least `need` units whose chunk is
   * at most `limit`, or -1.
   *
   * @param rec The records.
   * @param need Units wanted, in [1, chunk length).
   * @param limit The highest chunk to search.
   * @returns The record, or -1.
   */
  find(rec: Int32Array, need: number, limit: number): number {
    const k = 31 - Math.clz32(need);
    const bitsRow = k * this.#words;
    const sumsRow = k * this.#sumWords;
    const lastSum = Math.min(this.#sumWords - 1, limit >>> 10);
    for (let sw = 0; sw <= lastSum; sw++) {
      let sum = this.#sums[sumsRow + sw];
      while (sum !== 0) {
        const w = (sw << 5) | ctz(sum);
        sum &= sum - 1;
        let bits = this.#bits[bitsRow + w];
        while (bits !== 0) {
          const chunk = (w << 5) | ctz(bits);
          if (chunk > limit) return -1;
          bits &= bits - 1;
          if (this.bound[chunk] < need) continue;
          // Lowest fitting block of the chunk; its true bound on the way.
          let best = -1, bestStart = 0, max = 0;
          for (
            let b = this.heads[chunk];
            b >= 0;
            b = rec[b * STRIDE + R_CNEXT]
          ) {
            const r = b * STRIDE;
            const size = rec[r + R_SIZE];
            if (size > max) max = size;
            if (size >= need && (best < 0 || rec[r + R_START] < bestStart)) {
              best = b;
              bestStart = rec[r + R_START];
            }
          }
          if (max < this.bound[chunk]) this.#lower(chunk, max);
          if (best >= 0) return best;
        }
      }
    }
    return -1;
  }

  /**
   * Checks the index against the small free blocks (O(chunks + blocks)).
   *
   * @param rec The records.
   * @param blocks Every small free block: record and chunk, in pairs.
   * @param fail Reports a broken invariant.
   */
  check(
    rec: Int32Array,
    blocks: number[],
    fail: (why: string) => never,
  ): void {
    const listed = new Map<number, number>();
    for (let c = 0; c < this.heads.length; c++) {
      let n = 0;
      for (let b = this.heads[c]; b >= 0; b = rec[b * STRIDE + R_CNEXT]) {
        if (listed.has(b)) fail(`small block ${b} is listed twice`);
        listed.set(b, c);
        if (rec[b * STRIDE + R_SIZE] > this.bound[c]) {
          fail(`small block ${b} is above its chunk's bound`);
        }
        if (++n > blocks.length / 2) fail(`chunk ${c}'s list has a cycle`);
      }
      if (n === 0 && this.bound[c] !== 0) fail(`empty chunk ${c} has a bound`);
      for (let k = 0; k < LEVELS; k++) {
        const set = (this.#bits[k * this.#words + (c >>> 5)] >>> (c & 31)) & 1;
        if (set !== (this.bound[c] >= 1 << k ? 1 : 0)) {
          fail(`small index level ${k} bit of chunk ${c} is wrong`);
        }
      }
    }
    for (let k = 0; k < LEVELS; k++) {
      for (let w = 0; w < this.#words; w++) {
        const set = (this.#sums[k * this.#sumWords + (w >>> 5)] >>> (w & 31)) &
          1;
        if (set !== (this.#bits[k * this.#words + w] !== 0 ? 1 : 0)) {
          fail(`small index level ${k} summary bit ${w} is wrong`);
        }
      }
    }
    for (let i = 0; i < blocks.length; i += 2) {
      if (listed.get(blocks[i]) !== blocks[i + 1]) {
        fail(`small free block ${blocks[i]} is not listed in its chunk`);
      }
    }
    if (listed.size !== blocks.length / 2) {
      fail(`${listed.size} listed small blocks, ${blocks.length / 2} free`);
    }
  }
}
