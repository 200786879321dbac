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
 * wait in a FIFO ring and are reused only while {@linkcode FREE_SLOT_RESERVE}
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
// allocators made one after the other meet only after thousands of reuses
// of a slot.
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
}

/** Slots by id, with the ring of free slots' next ids. */
export class _GpuIds<B> {
  /** The records, indexed by slot (never replaced: callers may keep it). */
  readonly slots: _IdSlot<B>[] = [];
  /** Live ids. */
  count = 0;
  #base = ((nextBase++ * BASE_STRIDE) & (ID_MASK >>> ID_SLOT_BITS)) *
    ID_SLOTS;
  // The next id of each free slot, a FIFO ring (an array that shrinks and
  // grows would reallocate its store: garbage on every operation).
  #ring = new Int32Array(1024);
  #head = 0;
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
      const ring = this.#ring;
      const id = ring[this.#head];
      this.#head = (this.#head + 1) & (ring.length - 1);
      this.#free--;
      r = this.slots[id & ID_SLOT_MASK];
      r.id = id;
    } else {
      r = new _IdSlot<B>();
      r.id = this.slots.length + this.#base;
      this.slots.push(r);
    }
    this.count++;
    return r;
  }

  /** Frees live slot `r`: its next id waits in the ring. */
  remove(r: _IdSlot<B>): void {
    const id = r.id;
    r.id = -1;
    r.buffer = null;
    r.block = null;
    this.count--;
    let ring = this.#ring;
    if (this.#free === ring.length) {
      const grown = new Int32Array(ring.length * 2);
      for (let i = 0; i < this.#free; i++) {
        grown[i] = ring[(this.#head + i) & (ring.length - 1)];
      }
      this.#ring = ring = grown;
      this.#head = 0;
    }
    // Generation + 1 (mod 2^12) in the high bits, the slot kept.
    ring[(this.#head + this.#free) & (ring.length - 1)] = (id + ID_SLOTS) &
      ID_MASK;
    this.#free++;
  }
}
