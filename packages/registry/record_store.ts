/**
 * {@linkcode RecordStore}: where an ownership registry finds its records,
 * keyed by a place in a memory (the memory object and a byte offset).
 *
 * @module
 */

/**
 * A map from places (memory, byte offset) to small integers (the registry's
 * slot numbers). The ownership registry finds its records only through this
 * interface, so a store that keeps them in shared memory (for a registry used
 * by several Workers at once) can replace {@linkcode MapRecordStore} later
 * without changing the registry.
 *
 * Values are non-negative integers, each stored at one place at a time (a
 * value is unique among the live entries); `-1` means "none".
 */
export interface RecordStore {
  /** Number of entries. */
  readonly size: number;
  /**
   * The value at a place.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @returns The value, or `-1` when none is stored there.
   */
  get(memory: object, byteOffset: number): number;
  /**
   * Stores a value at a place, replacing any value there.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @param value A non-negative integer not stored at another place.
   */
  set(memory: object, byteOffset: number, value: number): void;
  /**
   * Removes the value at a place.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @returns `true` when a value was removed.
   */
  delete(memory: object, byteOffset: number): boolean;
  /** Removes every entry. */
  clear(): void;
}

/**
 * The default {@linkcode RecordStore}: a `WeakMap` from memory to either the
 * one value stored in that memory (the common case: an array that owns its
 * buffer) or a `Map` from byte offset to value.
 *
 * Built so that registering and unregistering allocate nothing: a memory
 * with one place costs no inner `Map`, and a memory whose last entry goes
 * keeps its key with an empty mark instead of being deleted (deleting the
 * last key of a `Map` shrinks its table, which allocates, and that was most
 * of a register + unregister pair). The `WeakMap` holds no memory alive: a
 * memory the program drops leaves with its marks at the next collection.
 * One JS thread owns it, so it needs no lock (and no shards: the seed's
 * sharding spreads lock contention between threads, which one JS thread does
 * not have).
 *
 * @example
 * ```ts
 * import { MapRecordStore } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * const store = new MapRecordStore();
 * const memory = new ArrayBuffer(64);
 * store.set(memory, 16, 7);
 * assert.equal(store.get(memory, 16), 7);
 * assert.equal(store.get(memory, 0), -1);
 * assert.ok(store.delete(memory, 16));
 * assert.equal(store.size, 0);
 * ```
 */
export class MapRecordStore implements RecordStore {
  /** Memory to its one value, `EMPTY`, or a map of offsets to values. */
  #byMemory = new WeakMap<object, number | Map<number, number>>();
  /** Byte offset of each value stored alone in its memory, by value. */
  #offsetOf: number[] = [];
  #size = 0;
  /**
   * The memory looked up last and its entry: a register or unregister looks
   * the same memory up twice (check, then change), and a runtime often
   * works on one memory at a time. Holds at most that one memory alive.
   * Its entry is written back to `#byMemory` when another memory is looked
   * up (`#dirty`): registering and unregistering in one memory over and
   * over touches no WeakMap.
   */
  #lastMemory: object | undefined = undefined;
  #lastEntry: number | Map<number, number> | undefined = undefined;
  #dirty = false;

  #entry(memory: object): number | Map<number, number> | undefined {
    if (memory === this.#lastMemory) return this.#lastEntry;
    if (this.#dirty) this.#writeBack();
    const e = this.#byMemory.get(memory);
    this.#lastMemory = memory;
    this.#lastEntry = e;
    return e;
  }

  #writeBack(): void {
    this.#byMemory.set(this.#lastMemory!, this.#lastEntry!);
    this.#dirty = false;
  }

  #put(memory: object, e: number | Map<number, number>): void {
    if (
      memory !== this.#lastMemory || typeof memory !== "object" ||
      memory === null
    ) {
      // Off the cache (or not an object: the WeakMap's TypeError now, not
      // at a later write-back): written through.
      if (this.#dirty) this.#writeBack();
      this.#byMemory.set(memory, e);
    } else this.#dirty = true;
    this.#lastMemory = memory;
    this.#lastEntry = e;
  }

  /** Number of entries. */
  get size(): number {
    return this.#size;
  }

  /**
   * The value at a place.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @returns The value, or `-1`.
   */
  get(memory: object, byteOffset: number): number {
    const e = this.#entry(memory);
    if (e === undefined) return -1;
    if (typeof e === "number") {
      return e >= 0 && this.#offsetOf[e] === byteOffset ? e : -1;
    }
    const v = e.get(byteOffset);
    return v === undefined ? -1 : v;
  }

  /**
   * Stores a value at a place.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @param value A non-negative integer not stored at another place.
   */
  set(memory: object, byteOffset: number, value: number): void {
    const e = this.#entry(memory);
    if (e === undefined || e === EMPTY) {
      this.#put(memory, value);
      this.#offsetOf[value] = byteOffset;
      this.#size++;
    } else if (typeof e === "number") {
      const offset = this.#offsetOf[e];
      if (offset === byteOffset) {
        this.#put(memory, value);
        this.#offsetOf[value] = byteOffset;
      } else {
        this.#put(memory, new Map([[offset, e], [byteOffset, value]]));
        this.#size++;
      }
    } else {
      const before = e.size;
      e.set(byteOffset, value);
      this.#size += e.size - before;
    }
  }

  /**
   * Removes the value at a place.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @returns `true` when a value was removed.
   */
  delete(memory: object, byteOffset: number): boolean {
    const e = this.#entry(memory);
    if (e === undefined) return false;
    if (typeof e === "number") {
      if (e < 0 || this.#offsetOf[e] !== byteOffset) return false;
      this.#put(memory, EMPTY); // a mark, not a delete: no shrink
    } else if (!e.delete(byteOffset)) return false;
    this.#size--;
    return true;
  }

  /** Removes every entry. */
  clear(): void {
    this.#byMemory = new WeakMap();
    this.#lastMemory = this.#lastEntry = undefined;
    this.#dirty = false;
    this.#offsetOf.length = 0;
    this.#size = 0;
  }
}

/** The mark of a memory that holds no entry now. */
const EMPTY = -1;
