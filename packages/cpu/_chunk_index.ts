/**
 * `_ChunkIndex`: the lowest-addressed large free block of a `CpuHeap`, found
 * in amortized constant time. The region is cut into chunks of
 * `2^chunkLog2` units, and a free block at least one chunk long is keyed by
 * the chunk its last unit lies in: no other such block ends in that chunk
 * (the two would overlap), so one record slot per chunk suffices. Keyed by
 * its end, a block keeps its entry when allocations carve its front off.
 *
 * Two bitmap levels (one bit per chunk; one bit per 32-chunk word) find the
 * lowest chunk; after the lowest is removed, the next search starts at the
 * old lowest's word, so searches cost amortized constant time.
 *
 * @module
 */

/** Record slot of an empty chunk. */
const NONE = -1;
/** `#low` when it must be searched again from `#from`. */
const UNKNOWN = -2;

/** Lowest-addressed record among chunks that each hold at most one. */
export class _ChunkIndex {
  /** Record of each chunk, `NONE` when empty. */
  #recs: Int32Array;
  /** One bit per chunk. */
  #bits: Int32Array;
  /** One bit per non-zero word of `#bits`. */
  #words: Int32Array;
  /** Lowest occupied chunk, `NONE` when none, `UNKNOWN` after a removal. */
  #low = NONE;
  /** Word of `#words` where a search for the lowest starts. */
  #from = 0;

  /** @param chunks Number of chunks. */
  constructor(chunks: number) {
    this.#recs = new Int32Array(0);
    this.#bits = new Int32Array(0);
    this.#words = new Int32Array(0);
    this.resize(chunks);
  }

  /** Number of chunks. */
  get length(): number {
    return this.#recs.length;
  }

  /**
   * Makes room for `chunks` chunks (never fewer than now), keeping every entry.
   *
   * @param chunks Number of chunks.
   */
  resize(chunks: number): void {
    if (chunks <= this.#recs.length && this.#recs.length > 0) return;
    const recs = new Int32Array(Math.max(1, chunks)).fill(NONE);
    recs.set(this.#recs);
    const bits = new Int32Array((recs.length + 31) >>> 5);
    bits.set(this.#bits);
    const words = new Int32Array((bits.length + 31) >>> 5);
    words.set(this.#words);
    this.#recs = recs;
    this.#bits = bits;
    this.#words = words;
  }

  /**
   * Records `rec` as the block whose last unit lies in `chunk`.
   *
   * @param chunk Chunk index.
   * @param rec Record of the block.
   */
  put(chunk: number, rec: number): void {
    this.#recs[chunk] = rec;
    const w = chunk >>> 5;
    const had = this.#bits[w];
    this.#bits[w] = had | (1 << (chunk & 31));
    if (had === 0) this.#words[w >>> 5] |= 1 << (w & 31);
    const low = this.#low;
    if (low === NONE || (low >= 0 && chunk < low)) this.#low = chunk;
    else if (low === UNKNOWN && w >>> 5 < this.#from) this.#from = w >>> 5;
  }

  /**
   * Forgets the block whose last unit lies in `chunk`.
   *
   * @param chunk Chunk index.
   */
  remove(chunk: number): void {
    this.#recs[chunk] = NONE;
    const w = chunk >>> 5;
    const bits = this.#bits[w] & ~(1 << (chunk & 31));
    this.#bits[w] = bits;
    if (bits === 0) this.#words[w >>> 5] &= ~(1 << (w & 31));
    if (chunk === this.#low) {
      this.#low = UNKNOWN;
      this.#from = w >>> 5;
    }
  }

  /**
   * The record of the block whose last unit lies in `chunk`.
   *
   * @param chunk Chunk index.
   * @returns The record, or -1 when the chunk is empty.
   */
  at(chunk: number): number {
    return this.#recs[chunk];
  }

  /**
   * Occupied chunks, counted in O(chunks) after checking that both bitmap
   * levels agree with the records (for integrity checks).
   *
   * @returns The count, or -1 when a bit disagrees with the records.
   */
  countChecked(): number {
    let count = 0;
    for (let c = 0; c < this.#bits.length * 32; c++) {
      const used = c < this.#recs.length && this.#recs[c] !== NONE;
      if (((this.#bits[c >>> 5] >>> (c & 31)) & 1) !== (used ? 1 : 0)) {
        return -1;
      }
      if (used) count++;
    }
    for (let w = 0; w < this.#words.length * 32; w++) {
      const set = w < this.#bits.length && this.#bits[w] !== 0;
      if (((this.#words[w >>> 5] >>> (w & 31)) & 1) !== (set ? 1 : 0)) {
        return -1;
      }
    }
    return count;
  }

  /**
   * The lowest occupied chunk.
   *
   * @returns The chunk, or -1 when no chunk is occupied.
   */
  lowestChunk(): number {
    const low = this.#low;
    return low !== UNKNOWN ? low : (this.#low = this.#search());
  }

  /**
   * The record of the lowest occupied chunk.
   *
   * @returns The record, or -1 when no chunk is occupied.
   */
  lowest(): number {
    const low = this.lowestChunk();
    return low === NONE ? NONE : this.#recs[low];
  }

  #search(): number {
    const words = this.#words;
    for (let i = this.#from; i < words.length; i++) {
      const top = words[i];
      if (top !== 0) {
        const w = (i << 5) | (31 - Math.clz32(top & -top));
        const bits = this.#bits[w];
        return (w << 5) | (31 - Math.clz32(bits & -bits));
      }
    }
    return NONE;
  }
}
