/**
 * Internal: {@linkcode _BlockIds}, the table behind the caching allocator's
 * id API (`allocateId` / `freeById`): a block's id is its slot plus its
 * slot's generation times {@linkcode ID_SLOTS}; a free bumps the
 * generation, so a stale id never matches a later block.
 *
 * @module
 */

import { type _Block, ALLOCATED } from "./_block_pool.ts";

// An id is `generation * ID_SLOTS + slot`, below 2^30 so that it stays a
// small integer (no heap number per id): 2^20 slots, 2^10 generations.
const ID_SLOT_BITS = 20;
/** Slots of the table: blocks that can hold an id at once. */
export const ID_SLOTS: number = 2 ** ID_SLOT_BITS;
const ID_GENERATIONS = 2 ** 10;
// A free slot is reused only while this many others wait, so a stale id
// matches again only after many allocations.
const FREE_SLOT_RESERVE = 256;

/** Live blocks by id. */
export class _BlockIds<M> {
  #byId: (_Block<M> | undefined)[] = [];
  #slotGeneration: number[] = [];
  // Free slots, a FIFO ring (an array that shrinks and grows would
  // reallocate its store: garbage on every hit).
  #freeSlots = new Int32Array(1024);
  #freeHead = 0;
  #freeCount = 0;

  /**
   * Gives allocated block `b` an id.
   *
   * @returns The id, or -1 when every slot is taken.
   */
  add(b: _Block<M>): number {
    let slot: number;
    if (this.#freeCount > FREE_SLOT_RESERVE) {
      const ring = this.#freeSlots;
      slot = ring[this.#freeHead];
      this.#freeHead = (this.#freeHead + 1) & (ring.length - 1);
      this.#freeCount--;
    } else {
      slot = this.#byId.length;
      if (slot >= ID_SLOTS) return -1;
      this.#byId.push(undefined);
      this.#slotGeneration.push(0);
    }
    this.#byId[slot] = b;
    b.slot = slot;
    b.byId = true;
    return (this.#slotGeneration[slot] << ID_SLOT_BITS) | slot;
  }

  /** Whether a slot is free now (without reserving one). */
  get full(): boolean {
    return this.#freeCount <= FREE_SLOT_RESERVE &&
      this.#byId.length >= ID_SLOTS;
  }

  /** The live block of `id`, or `undefined`. */
  lookUp(id: number): _Block<M> | undefined {
    // ids are below 2^30: integer tests and bit operations suffice
    if (typeof id !== "number" || (id | 0) !== id || id < 0) return undefined;
    const slot = id & (ID_SLOTS - 1);
    const b = this.#byId[slot];
    if (
      b === undefined || !b.byId || b.state !== ALLOCATED ||
      id >>> ID_SLOT_BITS !== this.#slotGeneration[slot]
    ) return undefined;
    return b;
  }

  /** Takes the id of block `b` (which has one): its slot is free again. */
  remove(b: _Block<M>): void {
    const slot = b.slot;
    this.#byId[slot] = undefined;
    this.#slotGeneration[slot] = (this.#slotGeneration[slot] + 1) &
      (ID_GENERATIONS - 1);
    let ring = this.#freeSlots;
    if (this.#freeCount === ring.length) {
      const grown = new Int32Array(ring.length * 2);
      for (let i = 0; i < this.#freeCount; i++) {
        grown[i] = ring[(this.#freeHead + i) & (ring.length - 1)];
      }
      this.#freeSlots = ring = grown;
      this.#freeHead = 0;
    }
    ring[(this.#freeHead + this.#freeCount) & (ring.length - 1)] = slot;
    this.#freeCount++;
    b.slot = -1;
    b.byId = false;
  }
}
