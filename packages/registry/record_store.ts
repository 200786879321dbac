/**
 * {@linkcode RecordStore}: where an ownership registry keeps its records,
 * keyed by a place in a memory (the memory object and a byte offset).
 *
 * @module
 */

/**
 * A map from places (memory, byte offset) to entries. The ownership registry
 * talks to its records only through this interface, so a store that keeps
 * records in shared memory (for a registry used by several Workers at once)
 * can replace {@linkcode MapRecordStore} later without changing the registry.
 *
 * @typeParam E Type of an entry.
 */
export interface RecordStore<E> {
  /** Number of entries. */
  readonly size: number;
  /**
   * The entry at a place.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @returns The entry, or `undefined` when none is stored there.
   */
  get(memory: object, byteOffset: number): E | undefined;
  /**
   * Stores an entry at a place, replacing any entry there.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @param entry The entry.
   */
  set(memory: object, byteOffset: number, entry: E): void;
  /**
   * Removes the entry at a place.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @returns `true` when an entry was removed.
   */
  delete(memory: object, byteOffset: number): boolean;
  /**
   * Every entry with its place, in insertion order per memory.
   *
   * @returns An iterator of `[memory, byteOffset, entry]`.
   */
  entries(): IterableIterator<[object, number, E]>;
  /** Removes every entry. */
  clear(): void;
}

/**
 * The default {@linkcode RecordStore}: a `Map` from memory to a `Map` from
 * byte offset to entry. One JS thread owns it, so it needs no lock (and no
 * shards: the seed's sharding exists to spread lock contention between
 * threads, which one JS thread does not have).
 *
 * @typeParam E Type of an entry.
 *
 * @example
 * ```ts
 * import { MapRecordStore } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * const store = new MapRecordStore<string>();
 * const memory = new ArrayBuffer(64);
 * store.set(memory, 16, "a");
 * assert.equal(store.get(memory, 16), "a");
 * assert.equal(store.get(memory, 0), undefined);
 * assert.ok(store.delete(memory, 16));
 * assert.equal(store.size, 0);
 * ```
 */
export class MapRecordStore<E> implements RecordStore<E> {
  #byMemory = new Map<object, Map<number, E>>();
  #size = 0;

  /** Number of entries. */
  get size(): number {
    return this.#size;
  }

  /**
   * The entry at a place.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @returns The entry, or `undefined`.
   */
  get(memory: object, byteOffset: number): E | undefined {
    return this.#byMemory.get(memory)?.get(byteOffset);
  }

  /**
   * Stores an entry at a place.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @param entry The entry.
   */
  set(memory: object, byteOffset: number, entry: E): void {
    let offsets = this.#byMemory.get(memory);
    if (offsets === undefined) {
      offsets = new Map();
      this.#byMemory.set(memory, offsets);
    }
    const before = offsets.size;
    offsets.set(byteOffset, entry);
    this.#size += offsets.size - before;
  }

  /**
   * Removes the entry at a place.
   *
   * @param memory The memory.
   * @param byteOffset Byte offset in the memory.
   * @returns `true` when an entry was removed.
   */
  delete(memory: object, byteOffset: number): boolean {
    const offsets = this.#byMemory.get(memory);
    if (offsets === undefined || !offsets.delete(byteOffset)) return false;
    if (offsets.size === 0) this.#byMemory.delete(memory);
    this.#size--;
    return true;
  }

  /**
   * Every entry with its place.
   *
   * @returns An iterator of `[memory, byteOffset, entry]`.
   */
  *entries(): IterableIterator<[object, number, E]> {
    for (const [memory, offsets] of this.#byMemory) {
      for (const [byteOffset, entry] of offsets) {
        yield [memory, byteOffset, entry];
      }
    }
  }

  /** Removes every entry. */
  clear(): void {
    this.#byMemory.clear();
    this.#size = 0;
  }
}
