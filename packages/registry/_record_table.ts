/**
 * The ownership registry's records as a struct of arrays: one slot per live
 * allocation, numbers in typed arrays, objects in plain arrays, and a free
 * list of slots, so registering and unregistering make no JS object.
 *
 * @module
 */

/** How a record's memory is freed. */
export const FREE_NONE = 0;
/** Detach the record's `ArrayBuffer` (`transfer(0)`). */
export const FREE_DETACH = 1;
/** Call `release()` on the record's target (a `DataPtr`). */
export const FREE_RELEASE = 2;
/** Call the record's target (a deleter) with the record's pointer. */
export const FREE_DELETER = 3;

/** Slots a new table holds before its first growth. */
const INITIAL_SLOTS = 64;

function grown<T extends Float64Array | Uint8Array | Int32Array>(
  old: T,
  length: number,
): T {
  const next = new (old.constructor as new (n: number) => T)(length);
  next.set(old);
  return next;
}

/** Records of live allocations, by slot. Internal to the registry. */
export class _RecordTable {
  /** Allocation id (unique within a registry, never reused). */
  id: Float64Array = new Float64Array(INITIAL_SLOTS);
  /** Index into the kind names: heap, system, aligned, custom. */
  kind: Uint8Array = new Uint8Array(INITIAL_SLOTS);
  /** One of the `FREE_*` codes. */
  free: Uint8Array = new Uint8Array(INITIAL_SLOTS);
  /** 1 for a reference-counted buffer. */
  buffer: Uint8Array = new Uint8Array(INITIAL_SLOTS);
  /** Byte offset of the real pointer. */
  offset: Float64Array = new Float64Array(INITIAL_SLOTS);
  /** Bytes asked for. */
  length: Float64Array = new Float64Array(INITIAL_SLOTS);
  /** Bytes held, with padding. */
  reserved: Float64Array = new Float64Array(INITIAL_SLOTS);
  /** References held (real pointer and aliases). */
  refs: Float64Array = new Float64Array(INITIAL_SLOTS);
  /** References held at the real pointer's own place. */
  placeCount: Float64Array = new Float64Array(INITIAL_SLOTS);
  /** The memory; `undefined` for a free slot. */
  memory: (object | undefined)[] = [];
  /** The pointer given at registration. */
  pointer: unknown[] = [];
  /** What frees it: a `DataPtr` or a deleter, by `free` code. */
  target: unknown[] = [];
  /** Tracking record. */
  info: unknown[] = [];
  /** Live records. */
  live = 0;
  #freeSlots: Int32Array = new Int32Array(INITIAL_SLOTS);
  #freeTop = 0;
  #used = 0;

  /**
   * A free slot, growing the table when full.
   *
   * @returns The slot.
   */
  take(): number {
    this.live++;
    if (this.#freeTop > 0) return this.#freeSlots[--this.#freeTop];
    if (this.#used === this.id.length) this.#grow();
    return this.#used++;
  }

  /**
   * Gives a slot back and drops its object references.
   *
   * @param slot A slot from `take()`.
   */
  put(slot: number): void {
    this.live--;
    this.memory[slot] = undefined;
    this.pointer[slot] = undefined;
    this.target[slot] = undefined;
    this.info[slot] = undefined;
    this.#freeSlots[this.#freeTop++] = slot;
  }

  /**
   * Live slots, oldest allocation first.
   *
   * @returns The slots.
   */
  liveSlots(): number[] {
    const slots: number[] = [];
    for (let s = 0; s < this.#used; s++) {
      if (this.memory[s] !== undefined) slots.push(s);
    }
    return slots.sort((a, b) => this.id[a] - this.id[b]);
  }

  #grow(): void {
    const n = this.id.length * 2;
    this.id = grown(this.id, n);
    this.kind = grown(this.kind, n);
    this.free = grown(this.free, n);
    this.buffer = grown(this.buffer, n);
    this.offset = grown(this.offset, n);
    this.length = grown(this.length, n);
    this.reserved = grown(this.reserved, n);
    this.refs = grown(this.refs, n);
    this.placeCount = grown(this.placeCount, n);
    this.#freeSlots = grown(this.#freeSlots, n);
  }
}

/** Alias places: which record each belongs to and its reference count. */
export class _AliasTable {
  /** Record slot of each alias place. */
  record: Int32Array = new Int32Array(INITIAL_SLOTS);
  /** References held at the place. */
  count: Float64Array = new Float64Array(INITIAL_SLOTS);
  /** Memory of each alias place. */
  memory: (object | undefined)[] = [];
  /** Byte offset of each alias place. */
  offset: Float64Array = new Float64Array(INITIAL_SLOTS);
  #freeSlots: Int32Array = new Int32Array(INITIAL_SLOTS);
  #freeTop = 0;
  #used = 0;

  /**
   * A free slot.
   *
   * @returns The slot.
   */
  take(): number {
    if (this.#freeTop > 0) return this.#freeSlots[--this.#freeTop];
    if (this.#used === this.record.length) {
      const n = this.record.length * 2;
      this.record = grown(this.record, n);
      this.count = grown(this.count, n);
      this.offset = grown(this.offset, n);
      this.#freeSlots = grown(this.#freeSlots, n);
    }
    return this.#used++;
  }

  /**
   * Gives a slot back.
   *
   * @param slot A slot from `take()`.
   */
  put(slot: number): void {
    this.#freeSlots[this.#freeTop++] = slot;
  }

  /** Slots handed out so far (live ones have a count above 0). */
  get used(): number {
    return this.#used;
  }

  /** Forgets every slot. */
  clear(): void {
    this.memory.length = 0;
    this.#freeTop = 0;
    this.#used = 0;
  }
}
