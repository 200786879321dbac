/**
 * Internal: {@linkcode _BlockIds}, the table behind the caching allocator's
 * id API (`allocateId` / `freeById`): a block's id is its slot plus its
 * slot's generation times {@linkcode ID_SLOTS}; a free bumps the
 * generation, so a stale id never matches a later block.
 *
 * The block keeps its own id (`_Block.id`), so a look-up is one table load
 * and one comparison, and the free-slot ring holds each free slot's next id
 * (slot and bumped generation together): no generation table to read or
 * write on the hit path.
 *
 * @module
 */

import type { _Block } from "./_block_pool.ts";

// An id is `generation * ID_SLOTS + slot`, below 2^30 so that it stays a
// small integer (no heap number per id): 2^20 slots, 2^10 generations.
// (`1 << n`, not `2 ** n`: V8 computes `**` as a heap number, so ids made
// from it came out as heap numbers, and every block's `id` field became a
// boxed double, read through one more pointer on every free.)
const ID_SLOT_BITS = 20;
/** Slots of the table: blocks that can hold an id at once. */
export const ID_SLOTS: number = 1 << ID_SLOT_BITS;
const SLOT_MASK = ID_SLOTS - 1;
const ID_MASK = (1 << 30) - 1;
// A free slot is reused only while this many others wait, so a stale id
// matches again only after many allocations.
const FREE_SLOT_RESERVE = 256;

// Each table starts its slots at another generation, so that the ids of two
// allocators differ (an id passed to the wrong allocator is refused rather
// than freeing that allocator's block of the same slot).
let nextBase = 0;

/** Live blocks by id. */
export class _BlockIds<M> {
  #byId: (_Block<M> | undefined)[] = [];
  #base = (nextBase++ & (ID_MASK >>> ID_SLOT_BITS)) * ID_SLOTS;
  // The next id of each free slot, a FIFO ring (an array that shrinks and
  // grows would reallocate its store: garbage on every hit).
  #freeIds = new Int32Array(1024);
  #freeHead = 0;
  #freeCount = 0;

  /**
   * Gives allocated block `b` an id.
   *
   * @returns The id, or -1 when every slot is taken.
   */
  add(b: _Block<M>): number {
    let id: number;
    if (this.#freeCount > FREE_SLOT_RESERVE) {
      const ring = this.#freeIds;
      id = ring[this.#freeHead];
      this.#freeHead = (this.#freeHead + 1) & (ring.length - 1);
      this.#freeCount--;
      this.#byId[id & SLOT_MASK] = b;
    } else {
      const slot = this.#byId.length;
      if (slot >= ID_SLOTS) return -1;
      this.#byId.push(b);
      id = slot + this.#base;
    }
    b.id = id;
    return id;
  }

  /** Whether a slot is free now (without reserving one). */
  get full(): boolean {
    return this.#freeCount <= FREE_SLOT_RESERVE &&
      this.#byId.length >= ID_SLOTS;
  }

  /** The live block of `id`, or `undefined`. */
  lookUp(id: number): _Block<M> | undefined {
    // ids are below 2^30: integer tests and bit operations suffice
    if (typeof id !== "number" || (id & ID_MASK) !== id) return undefined;
    const b = this.#byId[id & SLOT_MASK];
    return b !== undefined && b.id === id ? b : undefined;
  }

  /**
   * Takes the id of block `b` (which has one): its slot is free again, under
   * the next generation.
   */
  remove(b: _Block<M>): void {
    const id = b.id;
    this.#byId[id & SLOT_MASK] = undefined;
    let ring = this.#freeIds;
    if (this.#freeCount === ring.length) {
      const grown = new Int32Array(ring.length * 2);
      for (let i = 0; i < this.#freeCount; i++) {
        grown[i] = ring[(this.#freeHead + i) & (ring.length - 1)];
      }
      this.#freeIds = ring = grown;
      this.#freeHead = 0;
    }
    // Generation + 1 (mod 2^10) in the high bits, the slot kept.
    ring[(this.#freeHead + this.#freeCount) & (ring.length - 1)] =
      (id + ID_SLOTS) & ID_MASK;
    this.#freeCount++;
    b.id = -1;
  }
}
