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
  /**
   * Every value with its place.
   *
   * @returns An iterator of `[memory, byteOffset, value]`.
   */
  entries(): IterableIterator<[object, number, number]>;
  /** Removes every entry. */
  clear(): void;
}

/**
 * The default {@linkcode RecordStore}: a `Map` from memory to either the one
 * value stored in that memory (the common case: an array that owns its
 * buffer) or a `Map` from byte offset to value. A memory with one place costs
 * no inner `Map`, so registering and unregistering such a pointer allocates
 * nothing. One JS thread owns it, so it needs no lock (and no shards: the
 * seed's sharding spreads lock contention between threads, which one JS
 * thread does not have).
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
  #byMemory = new Map<object, number | Map<number, number>>();
  /** Byte offset of each value stored alone in its memory, by value. */
  #offsetOf: number[] = [];
  #size = 0;

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
    const e = this.#byMemory.get(memory);
    if (e === undefined) return -1;
    if (typeof e === "number") {
      return this.#offsetOf[e] === byteOffset ? e : -1;
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
    const e = this.#byMemory.get(memory);
    if (e === undefined) {
      this.#byMemory.set(memory, value);
      this.#offsetOf[value] = byteOffset;
      this.#size++;
    } else if (typeof e === "number") {
      const offset = this.#offsetOf[e];
      if (offset === byteOffset) {
        this.#byMemory.set(memory, value);
        this.#offsetOf[value] = byteOffset;
      } else {
        this.#byMemory.set(
          memory,
          new Map([[offset, e], [byteOffset, value]]),
        );
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
    const e = this.#byMemory.get(memory);
    if (e === undefined) return false;
    if (typeof e === "number") {
      if (this.#offsetOf[e] !== byteOffset) return false;
      this.#byMemory.delete(memory);
    } else {
      if (!e.delete(byteOffset)) return false;
      if (e.size === 0) this.#byMemory.delete(memory);
    }
    this.#size--;
    return true;
  }

  /**
   * Every value with its place.
   *
   * @returns An iterator of `[memory, byteOffset, value]`.
   */
  *entries(): IterableIterator<[object, number, number]> {
    for (const [memory, e] of this.#byMemory) {
      if (typeof e === "number") yield [memory, this.#offsetOf[e], e];
      else { for (const [byteOffset, v] of e) yield [memory, byteOffset, v]; }
    }
  }

  /** Removes every entry. */
  clear(): void {
    this.#byMemory.clear();
    this.#offsetOf.length = 0;
    this.#size = 0;
  }
}
