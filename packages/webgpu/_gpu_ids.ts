/**
 * Internal: the table behind {@linkcode GpuCachingAllocator}'s id path
 * (`allocateId` / `bufferOf` / `offsetOf` / `sizeOf` / `freeById`).
 *
 * An id is `generation * ID_SLOTS + slot`, below 2^30 so that it stays a
 * small integer (no heap number per id). Each slot is one record, made once
 * and reused for every id the slot ever holds: the id it holds now (-1 when
 * free), and what a runtime reads to bind it (the buffer and the byte offset
 * in it) next to the pool's block, so a look-up is one array load, one
 * record, one comparison. A free bumps the slot's generation; freed slots
 * wait in a FIFO and are reused only while {@linkcode FREE_SLOT_RESERVE}
 * others wait, so a freed id matches again only after its slot was reused
 * 2^12 times, 16 other frees apart each time. Each table starts its
 * generations elsewhere, so another allocator's ids are refused too.
 *
 * The reserve is small on purpose: a slot record is touched on every
 * operation, and a ring of 256 (as `@allot/caching`'s id table keeps)
 * cycles through 256 records, each cold when its turn comes; that cost
 * 10-20 % per operation in the runtime-like replay (`bench/trace_ab.ts`),
 * against a handle, which V8 bump-allocates in cache-warm memory.
 *
 * @module
 */

// (`1 << n`, not `2 ** n`: V8 computes `**` as a heap number, and ids made
// from it made the slots' `id` field a boxed double.)
/** log2 of the slots: live ids one allocator can hold at once. */
const ID_SLOT_BITS = 18;
/** Slots of a table. */
export const ID_SLOTS: number = 1 << ID_SLOT_BITS;
/** The slot of an id: `id & ID_SLOT_MASK`. */
export const ID_SLOT_MASK: number = ID_SLOTS - 1;
/** Every id is `id & ID_MASK` (a non-negative integer below 2^30). */
export const ID_MASK: number = (1 << 30) - 1;
/** Free slots kept waiting before one is reused (see above). */
const FREE_SLOT_RESERVE = 16;

// Each table starts at another generation, far from the last table's (an
// odd stride near 0.618 of the 2^12 generations), so that the ids of two
// allocators made one after the other meet only after 1,565 reuses of a
// slot. Tables made further apart can start closer: 971 tables apart, one
// generation (numbers, not handles: the refusal of another allocator's id
// is best effort, as the README says).
const BASE_STRIDE = 2531;
let nextBase = 0;

/** One slot: the live id it holds (or -1) and where that id's memory is. */
export class _IdSlot<B> {
  /** The live id of this slot, -1 when free. */
  id = -1;
  /** The buffer of the live id (`null` when free). */
  buffer: GPUBuffer | null = null;
  /** Byte offset in `buffer`. */
  offset = 0;
  /** Bytes asked for. */
  size = 0;
  /** The pool's block (`null` when free). */
  block: B | null = null;
  /** While free: the id this slot gives next (its generation bumped). */
  next = 0;
  /** While free: the slot freed after this one, -1 for none (the FIFO). */
  link = -1;
}

/**
 * Slots by id. The free slots form a FIFO through their records (`link`),
 * so taking one touches only the record about to be used, and freeing one
 * the record freed last (no ring array to load).
 */
export class _GpuIds<B> {
  /** The records, indexed by slot (never replaced: callers may keep it). */
  readonly slots: _IdSlot<B>[] = [];
  /** Live ids. */
  count = 0;
  #base = ((nextBase++ * BASE_STRIDE) & (ID_MASK >>> ID_SLOT_BITS)) *
    ID_SLOTS;
  /** The oldest free slot and the newest (-1 when none). */
  #head = -1;
  #tail = -1;
  #free = 0;

  /** Whether no slot can be given now. */
  get full(): boolean {
    return this.#free <= FREE_SLOT_RESERVE && this.slots.length >= ID_SLOTS;
  }

  /**
   * A free slot with its new id set (the caller fills the rest); check
   * {@linkcode _GpuIds.full} first.
   */
  add(): _IdSlot<B> {
    let r: _IdSlot<B>;
    if (this.#free > FREE_SLOT_RESERVE) {
      r = this.slots[this.#head];
      this.#head = r.link;
      this.#free--;
      r.id = r.next;
    } else {
      r = new _IdSlot<B>();
      r.id = this.slots.length + this.#base;
      this.slots.push(r);
    }
    this.count++;
    return r;
  }

  /** Frees live slot `r`: it joins the FIFO under its next generation. */
  remove(r: _IdSlot<B>): void {
    const id = r.id;
    const slot = id & ID_SLOT_MASK;
    // Generation + 1 (mod 2^12) in the high bits, the slot kept.
    r.next = (id + ID_SLOTS) & ID_MASK;
    r.id = -1;
    r.buffer = null;
    r.block = null;
    r.link = -1;
    this.count--;
    if (this.#free === 0) this.#head = slot;
    else this.slots[this.#tail].link = slot;
    this.#tail = slot;
    this.#free++;
  }
}
