/**
 * `_ChunkIndex`: the lowest-addressed large free block of a `CpuHeap` in
 * (amortized) constant time. The region is cut into chunks of
 * `2^chunkLog2` units; a free block at least one chunk long is the only such
 * block that starts in its chunk (two would overlap), so one record slot per
 * chunk and a hierarchical bitmap over the chunks (one bit per chunk, one per
 * 32 bits of the level below, ...) find the lowest with `Math.clz32`.
 *
 * @module
 */

/** Record slot of an empty chunk. */
const NONE = -1;
/** `#low` when it must be searched again. */
const UNKNOWN = -2;

/** Lowest-addressed record among chunks that each hold at most one. */
export class _ChunkIndex {
  /** Record of each chunk, `NONE` when empty. */
  #recs: Int32Array;
  /** Bitmap levels: `#levels[0]` has one bit per chunk. */
  #levels: Int32Array[] = [];
  /** Lowest occupied chunk, `NONE` when empty, `UNKNOWN` after a removal. */
  #low = NONE;

  /** @param chunks Number of chunks. */
  constructor(chunks: number) {
    this.#recs = new Int32Array(0);
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
    if (chunks <= this.#recs.length && this.#levels.length > 0) return;
    const recs = new Int32Array(Math.max(1, chunks)).fill(NONE);
    recs.set(this.#recs);
    this.#recs = recs;
    // Rebuild the bitmap levels from the records (growth is rare).
    const levels: Int32Array[] = [];
    let n = recs.length;
    do {
      n = (n + 31) >>> 5;
      levels.push(new Int32Array(n));
    } while (n > 1);
    this.#levels = levels;
    for (let chunk = 0; chunk < recs.length; chunk++) {
      if (recs[chunk] !== NONE) this.#setBits(chunk);
    }
  }

  /**
   * Records `rec` as the block that starts in `chunk`.
   *
   * @param chunk Chunk index.
   * @param rec Record of the block.
   */
  put(chunk: number, rec: number): void {
    this.#recs[chunk] = rec;
    this.#setBits(chunk);
    const low = this.#low;
    if (low === NONE || (low >= 0 && chunk < low)) this.#low = chunk;
  }

  /**
   * Forgets the block that starts in `chunk`.
   *
   * @param chunk Chunk index.
   */
  remove(chunk: number): void {
    this.#recs[chunk] = NONE;
    const levels = this.#levels;
    let i = chunk;
    for (let l = 0; l < levels.length; l++) {
      const word = i >>> 5;
      const bits = levels[l][word] & ~(1 << (i & 31));
      levels[l][word] = bits;
      if (bits !== 0) break;
      i = word;
    }
    if (chunk === this.#low) this.#low = UNKNOWN;
  }

  /**
   * The record of the block that starts in `chunk`.
   *
   * @param chunk Chunk index.
   * @returns The record, or -1 when the chunk is empty.
   */
  at(chunk: number): number {
    return this.#recs[chunk];
  }

  /**
   * Occupied chunks, counted in O(chunks) after checking that each level of
   * the bitmap agrees with the records (for integrity checks).
   *
   * @returns The count, or -1 when a bitmap bit disagrees with the records.
   */
  countChecked(): number {
    const recs = this.#recs;
    let count = 0;
    let below: ArrayLike<number> = Array.from(recs, (r) => (r !== NONE ? 1 : 0));
    for (const level of this.#levels) {
      for (let i = 0; i < level.length * 32; i++) {
        const bit = (level[i >>> 5] >>> (i & 31)) & 1;
        if (bit !== (i < below.length && below[i] !== 0 ? 1 : 0)) return -1;
      }
      below = level;
    }
    for (let i = 0; i < recs.length; i++) if (recs[i] !== NONE) count++;
    return count;
  }

  /**
   * The record of the lowest occupied chunk.
   *
   * @returns The record, or -1 when no chunk is occupied.
   */
  lowest(): number {
    let low = this.#low;
    if (low === UNKNOWN) low = this.#low = this.#search();
    return low === NONE ? NONE : this.#recs[low];
  }

  #setBits(chunk: number): void {
    const levels = this.#levels;
    let i = chunk;
    for (let l = 0; l < levels.length; l++) {
      const word = i >>> 5;
      const had = levels[l][word];
      levels[l][word] = had | (1 << (i & 31));
      if (had !== 0) break;
      i = word;
    }
  }

  #search(): number {
    const levels = this.#levels;
    let i = 0;
    for (let l = levels.length - 1; l >= 0; l--) {
      const bits = levels[l][i];
      if (bits === 0) return NONE;
      i = (i << 5) | (31 - Math.clz32(bits & -bits));
    }
    return i;
  }
}
