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
 * its small free blocks, in address order, through the records' free-list
 * slots (unused by them otherwise), and an upper bound of their lengths; per
 * group of 32 chunks, an upper bound of its chunks' bounds, and per run of 32
 * groups one of its groups'.
 *
 * A search reads the run bounds from the lowest, the group bounds of a run
 * whose bound fits, the chunk bounds of a group whose bound fits, and takes
 * the first fitting block of the first chunk that holds one: O(region / 16
 * MiB + 64) bounds at worst (64 + 64 for 1 GiB), a few on log-uniform traces. Bounds are raised at once
 * and lowered lazily: a chunk whose list holds no fit gets its exact bound
 * (the search read all of it), a group or run read whole the largest of its
 * chunks' or groups' bounds. Where it costs nothing a bound is made exact at once: 0 for a chunk
 * left empty, the length of a chunk's only block when it shrinks. Otherwise a
 * block that shrinks or leaves costs no upkeep: the tree of exact bounds this
 * replaced spent about as long keeping them exact as searching (README, "Why
 * the default is not first fit"). On the headline trace a search reads 3.4
 * group and 13 chunk bounds (a few cache lines) and meets 0.25 chunks whose
 * bound was stale.
 *
 * About 6 bytes per chunk (16 KiB of region at 64-byte granules): 384 KiB
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
// Chunks per group of the second level of bounds.
const GROUP_LOG2 = 5;
const GROUP_MASK = (1 << GROUP_LOG2) - 1;

/** Address-ordered first fit over the free blocks shorter than 1024 units. */
export class SmallIndex {
  /** First record of each chunk's list, -1 when empty. */
  heads: Int32Array = new Int32Array(0);
  // Per chunk, an upper bound of its blocks' lengths (0 when it never held
  // one); per group of 2^GROUP_LOG2 chunks, an upper bound of their bounds.
  // Raised at once, lowered only when a search reads the chunk's list anyway
  // (lazily): no upkeep when a block shrinks or leaves.
  #bounds = new Uint16Array(0);
  #groups = new Uint16Array(0);
  // Per run of 2^GROUP_LOG2 groups, an upper bound of their bounds: a search
  // below a far limit (few small blocks low) reads a few of these, not every
  // group.
  #supers = new Uint16Array(0);

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
    const bounds = new Uint16Array(chunks);
    bounds.set(this.#bounds);
    this.#bounds = bounds;
    const groups = new Uint16Array((chunks >>> GROUP_LOG2) + 1);
    groups.set(this.#groups);
    this.#groups = groups;
    const supers = new Uint16Array((groups.length >>> GROUP_LOG2) + 1);
    supers.set(this.#supers);
    this.#supers = supers;
  }

  /** Forgets every entry. */
  clear(): void {
    this.heads.fill(-1);
    this.#bounds.fill(0);
    this.#groups.fill(0);
    this.#supers.fill(0);
  }

  /**
   * An upper bound of the sizes listed in `chunk`.
   *
   * @param chunk A chunk.
   * @returns Units.
   */
  bound(chunk: number): number {
    return this.#bounds[chunk];
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
    // In address order: a search takes the first fitting block of a list.
    const start = rec[b + R_START];
    let prev = -1;
    let next = this.heads[chunk];
    while (next >= 0 && rec[next + R_START] < start) {
      prev = next;
      next = rec[next + R_FNEXT];
    }
    rec[b + R_FPREV] = prev;
    rec[b + R_FNEXT] = next;
    if (next >= 0) rec[next + R_FPREV] = b;
    if (prev >= 0) rec[prev + R_FNEXT] = b;
    else this.heads[chunk] = b;
    if (size > this.#bounds[chunk]) {
      this.#bounds[chunk] = size;
      const g = chunk >>> GROUP_LOG2;
      if (size > this.#groups[g]) {
        this.#groups[g] = size;
        const u = g >>> GROUP_LOG2;
        if (size > this.#supers[u]) this.#supers[u] = size;
      }
    }
  }

  /**
   * Takes listed block `b` off its list.
   *
   * @param rec The records.
   * @param b The block's record.
   * @param last Its last unit when it was listed, from the region start.
   * @param _size Its length when it was listed.
   */
  unlink(rec: Int32Array, b: number, last: number, _size: number): void {
    const prev = rec[b + R_FPREV];
    const next = rec[b + R_FNEXT];
    if (next >= 0) rec[next + R_FPREV] = prev;
    if (prev >= 0) rec[prev + R_FNEXT] = next;
    else {
      const chunk = last >>> CHUNK_LOG2;
      this.heads[chunk] = next;
      if (next < 0) this.#bounds[chunk] = 0; // empty: exact at no cost
    }
  }

  /**
   * Notes that the listed block ending at `last` is now `size` units long
   * (it kept its end).
   *
   * @param rec The records.
   * @param last Its last unit, from the region start.
   * @param _oldSize Its length before, below 1024.
   * @param size Its length now, below 1024.
   */
  resized(rec: Int32Array, last: number, _oldSize: number, size: number): void {
    const chunk = last >>> CHUNK_LOG2;
    const bound = this.#bounds[chunk];
    if (size < bound) {
      // The chunk's only block: its bound is exact at no cost.
      if (rec[this.heads[chunk] + R_FNEXT] < 0) this.#bounds[chunk] = size;
    } else if (size > bound) {
      this.#bounds[chunk] = size;
      const g = chunk >>> GROUP_LOG2;
      if (size > this.#groups[g]) {
        this.#groups[g] = size;
        const u = g >>> GROUP_LOG2;
        if (size > this.#supers[u]) this.#supers[u] = size;
      }
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
    const bounds = this.#bounds;
    const groups = this.#groups;
    const supers = this.#supers;
    let last = limit >>> CHUNK_LOG2;
    if (last >= bounds.length) last = bounds.length - 1;
    const lastGroup = last >>> GROUP_LOG2;
    const lastSuper = lastGroup >>> GROUP_LOG2;
    for (let u = 0; u <= lastSuper; u++) {
      if (supers[u] < need) continue;
      const first = u << GROUP_LOG2;
      const end = u === lastSuper ? lastGroup : first + GROUP_MASK;
      for (let g = first; g <= end; g++) {
        if (groups[g] < need) continue;
        const from = g << GROUP_LOG2;
        const to = g === lastGroup ? last : from + GROUP_MASK;
        for (let c = from; c <= to; c++) {
          if (bounds[c] >= need) {
            // The first fitting block of the list is the lowest; none: the
            // chunk's bound was stale, and the list was read whole.
            let longest = 0;
            for (let b = this.heads[c]; b >= 0; b = rec[b + R_FNEXT]) {
              const size = rec[b + R_SIZE];
              if (size >= need) return b;
              if (size > longest) longest = size;
            }
            bounds[c] = longest;
          }
        }
        if (to === from + GROUP_MASK) {
          // No chunk of the group fits (its bound was stale): exact again.
          let max = 0;
          for (let c = from; c <= to; c++) {
            if (bounds[c] > max) max = bounds[c];
          }
          groups[g] = max;
        }
      }
      if (end === first + GROUP_MASK) {
        // Likewise for the run of groups.
        let max = 0;
        for (let g = first; g <= end; g++) if (groups[g] > max) max = groups[g];
        supers[u] = max;
      }
    }
    return -1;
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
        if (prev >= 0 && rec[prev + R_START] >= rec[b + R_START]) {
          fail(`chunk ${c}'s list is not in address order at ${b}`);
        }
        max = Math.max(max, rec[b + R_SIZE]);
        if (listed.size > blocks.length / 2) fail(`chunk ${c}'s list is long`);
        prev = b;
      }
      if (max > this.bound(c)) {
        fail(
          `chunk ${c}'s bound is ${this.bound(c)}, its longest block ${max}`,
        );
      }
      if (this.bound(c) > this.#groups[c >>> GROUP_LOG2]) {
        fail(`chunk ${c}'s bound is above its group's`);
      }
      const g = c >>> GROUP_LOG2;
      if (this.#groups[g] > this.#supers[g >>> GROUP_LOG2]) {
        fail(`group ${g}'s bound is above its run's`);
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
