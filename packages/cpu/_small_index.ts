/**
 * The small-block index of `CpuHeap`'s first-fit placement: in that placement
 * the free blocks shorter than 1024 units (64 KiB at 64-byte
 * granules) live here instead of in the size-class lists, so that a small
 * request takes the lowest-addressed free block that fits (exact first fit;
 * README, "Footprint").
 *
 * The region is cut into chunks of 2^CHUNK_LOG2 units, and a small free block
 * is listed in the chunk its last unit lies in, so carving its front off (what
 * a small request does) keeps its entry. Per chunk: a doubly linked list of
 * its small free blocks through the records' free-list slots (unused by them
 * otherwise), and the length of the longest (its bound), kept exact. A
 * complete binary tree of bounds (each node the largest of its two children)
 * finds the lowest chunk whose bound is at least a request in O(log chunks),
 * starting from the leftmost node that covers the chunks below the search
 * limit.
 *
 * About 8 bytes per chunk (16 KiB of region at 64-byte granules): 512 KiB
 * for 1 GiB. A chunk lists at most 128 blocks (free blocks do not touch), a
 * few on log-uniform traces.
 *
 * @module
 */

// The records' layout, as in heap.ts. Copies on purpose, not imports: V8
// does not fold constants imported from another module into the code (each
// use would be a load). _small_index_test.ts checks they equal heap.ts's
// values, and heap.ts's checkIntegrity() checks this index, so a mismatch
// also fails the model tests. A record is named by the index of its first
// slot.
const R_START = 0;
const R_SIZE = 1;
const R_FPREV = 4;
const R_FNEXT = 5;
// Chunks of 256 units, as the chunk index's: as fast as 64 or 128 (measured)
// with a quarter of the memory of 64. At most heap.ts's FIRST_FIT_UNITS:
// heap.ts's #firstFit relies on a small block above the lowest large block
// lying in a later chunk than the large block's start.
const CHUNK_LOG2 = 8;
// Small blocks are shorter than 1024 units (heap.ts's FIRST_FIT_UNITS), so a
// bound fits a Uint16Array.

/** Address-ordered first fit over the free blocks shorter than 1024 units. */
export class SmallIndex {
  /** First record of each chunk's list, -1 when empty. */
  heads: Int32Array = new Int32Array(0);
  // A complete binary tree over the chunks: leaf #leaves + c holds the upper
  // bound of chunk c's sizes (0 when empty), every other node the largest of
  // its two children; node 1 is the root.
  #tree = new Uint16Array(2);
  #leaves = 1;

  /**
   * Makes room for a region of `units` units, keeping the entries.
   *
   * @param units Length of the region.
   */
  resize(units: number): void {
    const chunks = (units >>> CHUNK_LOG2) + 1;
    if (chunks <= this.heads.length) return;
    const heads = new Int32Array(chunks).fill(-1);
    heads.set(this.heads);
    this.heads = heads;
    if (chunks <= this.#leaves) return;
    let leaves = this.#leaves;
    while (leaves < chunks) leaves *= 2;
    // The old tree becomes the leftmost subtree of the new one, rooted at
    // node `root`: row d of the old tree (nodes 2^d .. 2^(d+1) - 1) moves to
    // root * 2^d onwards; the nodes above `root` take its length (their
    // right subtrees are empty). O(old chunks), none for a new index.
    const tree = new Uint16Array(2 * leaves);
    const old = this.#tree;
    const root = leaves / this.#leaves;
    if (old[1] !== 0) {
      for (let row = 1; row <= this.#leaves; row *= 2) {
        tree.set(old.subarray(row, 2 * row), root * row);
      }
      for (let n = root >>> 1; n >= 1; n >>>= 1) tree[n] = old[1];
    }
    this.#tree = tree;
    this.#leaves = leaves;
  }

  /** Forgets every entry. */
  clear(): void {
    this.heads.fill(-1);
    this.#tree.fill(0);
  }

  /**
   * The upper bound of the sizes listed in `chunk`.
   *
   * @param chunk A chunk.
   * @returns Units.
   */
  bound(chunk: number): number {
    return this.#tree[this.#leaves + chunk];
  }

  /**
   * Lists free block `b`.
   *
   * @param rec The records.
   * @param b The block's record.
   * @param last Its last unit, from the region start.
   * @param size Its length in units, below 1024.
   */
  link(rec: Int32Array, b: number, last: number, size: number): void {
    const chunk = last >>> CHUNK_LOG2;
    const head = this.heads[chunk];
    rec[b + R_FPREV] = -1;
    rec[b + R_FNEXT] = head;
    if (head >= 0) rec[head + R_FPREV] = b;
    this.heads[chunk] = b;
    this.#raise(chunk, size);
  }

  /**
   * Takes listed block `b` off its list.
   *
   * @param rec The records.
   * @param b The block's record.
   * @param last Its last unit when it was listed, from the region start.
   * @param size Its length when it was listed.
   */
  unlink(rec: Int32Array, b: number, last: number, size: number): void {
    const prev = rec[b + R_FPREV];
    const next = rec[b + R_FNEXT];
    if (next >= 0) rec[next + R_FPREV] = prev;
    if (prev >= 0) rec[prev + R_FNEXT] = next;
    else this.heads[last >>> CHUNK_LOG2] = next;
    const chunk = last >>> CHUNK_LOG2;
    if (size === this.#tree[this.#leaves + chunk]) this.#refresh(rec, chunk);
  }

  /**
   * Notes that the listed block ending at `last` is now `size` units long
   * (it kept its end).
   *
   * @param rec The records.
   * @param last Its last unit, from the region start.
   * @param oldSize Its length before, below 1024.
   * @param size Its length now, below 1024.
   */
  resized(rec: Int32Array, last: number, oldSize: number, size: number): void {
    const chunk = last >>> CHUNK_LOG2;
    const bound = this.#tree[this.#leaves + chunk];
    if (size > bound) this.#raise(chunk, size);
    else if (oldSize === bound && size < oldSize) this.#refresh(rec, chunk);
  }

  // Lowers the bound of `chunk` to the longest block it lists, if above.
  #refresh(rec: Int32Array, chunk: number): void {
    let max = 0;
    for (let b = this.heads[chunk]; b >= 0; b = rec[b + R_FNEXT]) {
      const size = rec[b + R_SIZE];
      if (size > max) max = size;
    }
    if (max < this.#tree[this.#leaves + chunk]) this.#lower(chunk, max);
  }

  // Raises the bound of `chunk` to `size` if below.
  #raise(chunk: number, size: number): void {
    const tree = this.#tree;
    for (let n = this.#leaves + chunk; n >= 1 && tree[n] < size; n >>>= 1) {
      tree[n] = size;
    }
  }

  // Sets the bound of `chunk` to `size` (0: empty), at most the old one.
  #lower(chunk: number, size: number): void {
    const tree = this.#tree;
    let n = this.#leaves + chunk;
    tree[n] = size;
    for (n >>>= 1; n >= 1; n >>>= 1) {
      const l = tree[2 * n], r = tree[2 * n + 1];
      const max = l > r ? l : r;
      if (tree[n] === max) break;
      tree[n] = max;
    }
  }

  /**
   * The lowest-addressed listed block of at least `need` units, or -1;
   * blocks wholly above unit `limit` may be left out.
   *
   * @param rec The records.
   * @param need Units wanted, in [1, 1024).
   * @param limit A unit from the region start where the search may stop.
   * @returns The record, or -1.
   */
  find(rec: Int32Array, need: number, limit: number): number {
    const tree = this.#tree;
    const leaves = this.#leaves;
    const last = limit >>> CHUNK_LOG2;
    // Descend from the leftmost node that covers chunks 0 .. last to the
    // lowest leaf whose bound is at least `need`.
    let n = last >= leaves - 1 ? 1 : leaves >>> (32 - Math.clz32(last));
    if (tree[n] < need) return -1;
    while (n < leaves) {
      n <<= 1;
      if (tree[n] < need) n++;
    }
    const chunk = n - leaves;
    return chunk > last ? -1 : this.#lowestIn(rec, chunk, need);
  }

  // The lowest-addressed block of at least `need` units listed in `chunk`
  // (there is one: the bound is exact).
  #lowestIn(rec: Int32Array, chunk: number, need: number): number {
    let best = -1, bestStart = 0;
    for (let b = this.heads[chunk]; b >= 0; b = rec[b + R_FNEXT]) {
      if (
        rec[b + R_SIZE] >= need && (best < 0 || rec[b + R_START] < bestStart)
      ) {
        best = b;
        bestStart = rec[b + R_START];
      }
    }
    return best;
  }

  /**
   * The lowest-addressed listed block that holds `units` units at a start
   * aligned to `a` units, or -1 (O(listed blocks): the heap's fallback when
   * the alignment slack makes a request too long for {@linkcode find}).
   *
   * @param rec The records.
   * @param units Units wanted.
   * @param a Alignment in units, a power of two.
   * @returns The record, or -1.
   */
  findAligned(rec: Int32Array, units: number, a: number): number {
    for (let chunk = 0; chunk < this.heads.length; chunk++) {
      if (this.bound(chunk) < units) continue;
      let best = -1, bestStart = 0;
      for (let b = this.heads[chunk]; b >= 0; b = rec[b + R_FNEXT]) {
        const start = rec[b + R_START];
        const aligned = Math.ceil(start / a) * a;
        if (
          aligned + units <= start + rec[b + R_SIZE] &&
          (best < 0 || start < bestStart)
        ) {
          best = b;
          bestStart = start;
        }
      }
      if (best >= 0) return best;
    }
    return -1;
  }

  /**
   * The length of the longest listed block, 0 when none (O(listed blocks)).
   *
   * @param rec The records.
   * @returns Units.
   */
  largest(rec: Int32Array): number {
    let max = 0;
    for (let chunk = 0; chunk < this.heads.length; chunk++) {
      if (this.bound(chunk) <= max) continue;
      for (let b = this.heads[chunk]; b >= 0; b = rec[b + R_FNEXT]) {
        const size = rec[b + R_SIZE];
        if (size > max) max = size;
      }
    }
    return max;
  }

  /**
   * Checks the index against the small free blocks (O(chunks + blocks)).
   *
   * @param rec The records.
   * @param blocks Every small free block: its record and its last unit from
   * the region start, in pairs.
   * @param fail Reports a broken invariant.
   */
  check(
    rec: Int32Array,
    blocks: number[],
    fail: (why: string) => never,
  ): void {
    const listed = new Map<number, number>();
    for (let c = 0; c < this.heads.length; c++) {
      let prev = -1, max = 0;
      for (let b = this.heads[c]; b >= 0; b = rec[b + R_FNEXT]) {
        if (listed.has(b)) fail(`small block ${b} is listed twice`);
        listed.set(b, c);
        if (rec[b + R_FPREV] !== prev) {
          fail(`small block ${b} has a wrong previous`);
        }
        max = Math.max(max, rec[b + R_SIZE]);
        if (listed.size > blocks.length / 2) fail(`chunk ${c}'s list is long`);
        prev = b;
      }
      if (max !== this.bound(c)) {
        fail(
          `chunk ${c}'s bound is ${this.bound(c)}, its longest block ${max}`,
        );
      }
    }
    for (let n = this.#leaves - 1; n >= 1; n--) {
      const t = this.#tree;
      if (t[n] !== Math.max(t[2 * n], t[2 * n + 1])) {
        fail(`small index node ${n} is not the largest of its children`);
      }
    }
    for (let i = 0; i < blocks.length; i += 2) {
      if (listed.get(blocks[i]) !== blocks[i + 1] >>> CHUNK_LOG2) {
        fail(`small free block ${blocks[i]} is not listed in its chunk`);
      }
    }
    if (listed.size !== blocks.length / 2) {
      fail(`${listed.size} listed small blocks, ${blocks.length / 2} free`);
    }
  }
}
