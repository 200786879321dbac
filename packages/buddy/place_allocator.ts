/**
 * {@linkcode PlaceAllocator}: Paddle's place-based `Alloc`, `Free` and `Used`,
 * with one {@linkcode BuddyAllocator} per place made on first use.
 *
 * @module
 */

import {
  type Allocator,
  ContractViolationError,
  DataPtr,
  Device,
  DoubleFreeError,
  InvalidArgumentError,
  type SegmentSource,
  UnsupportedOperationError,
} from "@allot/core";
import { SystemAllocator } from "@allot/cpu";
import {
  BuddyAllocator,
  type BuddyAllocatorOptions,
} from "./buddy_allocator.ts";

/** A place: a {@linkcode Device} or its string form (`"cpu"`, `"webgpu:1"`). */
export type Place = Device | string;

/** Options of {@linkcode PlaceAllocator}. */
export interface PlaceAllocatorOptions
  extends Omit<BuddyAllocatorOptions, "backing"> {
  /**
   * Makes the backing allocator (or segment source, such as a WebGPU one) of
   * a place the first time it is used. Return `undefined` for places this
   * process has no memory for.
   *
   * @default {a SystemAllocator for cpu places, none for others}
   */
  backing?: (device: Device) => Allocator | SegmentSource | undefined;
}

/**
 * The place-based memory API of Paddle's design: `alloc(place, byteLength)`,
 * `free(place, ptr)` and `used(place)`, with one {@linkcode BuddyAllocator}
 * per place, made on first use over that place's system allocator. CPU places
 * work out of the box; pass `backing` for GPU places (for example a WebGPU
 * allocator).
 *
 * @example Allocate on a place and watch its use
 * ```ts
 * import { PlaceAllocator } from "@allot/buddy";
 * import assert from "node:assert/strict";
 *
 * const memory = new PlaceAllocator({ initialPoolByteLength: 1 << 16 });
 * const p = memory.alloc("cpu", 4 * 1024);
 * assert.equal(memory.used("cpu"), 4 * 1024);
 * memory.free("cpu", p);
 * assert.equal(memory.used("cpu:0"), 0);
 * assert.throws(() => memory.alloc("webgpu:0", 16)); // no backing for GPU here
 * ```
 */
export class PlaceAllocator {
  #options: Omit<BuddyAllocatorOptions, "backing">;
  #backing: (device: Device) => Allocator | SegmentSource | undefined;
  #allocators = new Map<string, BuddyAllocator>();
  // Places whose backing factory is running (to refuse re-entry).
  #making = new Set<string>();

  /**
   * Creates a place allocator; no buddy allocator exists until a place is
   * used.
   *
   * @param options Buddy options for every place and the backing factory.
   * @throws {InvalidArgumentError} For bad buddy options, or a `backing`
   * that is not a function.
   */
  constructor(options: PlaceAllocatorOptions = {}) {
    if (typeof options !== "object" || options === null) {
      throw new InvalidArgumentError(
        `Invalid options: must be an object, received ${describe(options)}`,
        { name: "options", value: options },
      );
    }
    const { backing, ...rest } = options;
    if (backing !== undefined && typeof backing !== "function") {
      throw new InvalidArgumentError(
        `Invalid backing: must be a function from a Device to an Allocator or SegmentSource, received ${
          describe(backing)
        }`,
        { name: "backing", value: backing, limit: "function" },
      );
    }
    this.#options = rest;
    this.#backing = backing ??
      ((device) =>
        device.type === "cpu" ? new SystemAllocator({ device }) : undefined);
    // Validate the buddy options once, now, rather than on first use.
    new BuddyAllocator({ ...rest, backing: new SystemAllocator() });
  }

  /**
   * The buddy allocator of a place, made on first use.
   *
   * @param place A device or its string form.
   * @returns The place's buddy allocator.
   * @throws {InvalidArgumentError} For a malformed place.
   * @throws {UnsupportedOperationError} When no backing allocator exists for
   * the place, or the backing factory re-enters this method for the place it
   * is making.
   * @throws {ContractViolationError} When the backing factory returns a
   * backing for another device.
   */
  allocatorFor(place: Place): BuddyAllocator {
    const key = this.#key(place);
    let allocator = this.#allocators.get(key);
    if (allocator === undefined) {
      if (this.#making.has(key)) {
        throw new UnsupportedOperationError(
          `Cannot allocate on ${key}: its backing factory is making its allocator (the factory re-entered the PlaceAllocator for the same place)`,
        );
      }
      const device = Device.parse(key);
      let backing: Allocator | SegmentSource | undefined;
      this.#making.add(key);
      try {
        backing = this.#backing(device);
      } finally {
        this.#making.delete(key);
      }
      if (backing === undefined) {
        throw new UnsupportedOperationError(
          `Cannot allocate on ${key}: no backing allocator for this place`,
        );
      }
      allocator = new BuddyAllocator({ ...this.#options, backing });
      // Pointers name their device: one from another device's backing
      // would be on the wrong place.
      if (!allocator.device.equals(device)) {
        throw new ContractViolationError(
          `Cannot allocate on ${key}: the backing factory returned a backing for ${allocator.device}`,
        );
      }
      this.#allocators.set(key, allocator);
    }
    return allocator;
  }

  /**
   * Allocates `byteLength` bytes on a place.
   *
   * @param place A device or its string form.
   * @param byteLength Number of bytes.
   * @returns An owning pointer; free it with `free(place, ptr)` or `release()`.
   * @throws {InvalidArgumentError} For a bad place or length.
   * @throws {OutOfMemoryError} When the place's pools are exhausted.
   */
  alloc(place: Place, byteLength: number): DataPtr<unknown, number> {
    const key = this.#key(place);
    const fresh = !this.#allocators.has(key);
    const allocator = this.allocatorFor(key);
    try {
      return allocator.allocate(byteLength);
    } catch (error) {
      // A refused call leaves no new place behind.
      if (fresh) this.#allocators.delete(key);
      throw error;
    }
  }

  /**
   * Frees a pointer from `alloc` on the same place.
   *
   * @param place The place it was allocated on.
   * @param ptr The pointer.
   * @throws {InvalidArgumentError} For a bad place, or a `ptr` that is not a
   * `DataPtr`.
   * @throws {DoubleFreeError} When the pointer was released, or belongs to
   * another place; nothing changes.
   */
  free(place: Place, ptr: DataPtr<unknown, number>): void {
    const key = this.#key(place);
    if (!DataPtr.isDataPtr(ptr)) {
      throw new InvalidArgumentError(
        `Cannot free on ${key}: expected a DataPtr from alloc(), received ${
          describe(ptr)
        }`,
        { name: "ptr", value: ptr },
      );
    }
    const allocator = this.#allocators.get(key);
    if (ptr.released) {
      throw new DoubleFreeError(
        `Cannot free ${ptr} on ${key}: it was released already`,
      );
    }
    if (
      allocator === undefined || !allocator.ownsPointer(ptr)
    ) {
      throw new DoubleFreeError(
        `Cannot free ${ptr} on ${key}: it was not allocated on this place`,
      );
    }
    ptr.release();
  }

  /**
   * Bytes used on a place (Paddle's `Used`): the lengths of its live blocks.
   *
   * @param place A device or its string form.
   * @returns Bytes in use; 0 for a place never used.
   * @throws {InvalidArgumentError} For a bad place.
   */
  used(place: Place): number {
    return this.#allocators.get(this.#key(place))?.allocatedBytes ?? 0;
  }

  // The map key of a place: its device's string form.
  #key(place: Place): string {
    const device = typeof place === "string" ? Device.parse(place) : place;
    if (!Device.isDevice(device)) {
      throw new InvalidArgumentError(
        `Invalid place: must be a Device or a device string, received ${
          describe(place)
        }`,
        { name: "place", value: place },
      );
    }
    return device.toString();
  }

  /**
   * The places used so far.
   *
   * @returns Their devices.
   */
  places(): Device[] {
    return [...this.#allocators.keys()].map((key) => Device.parse(key));
  }
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "object" && value !== null) {
    return Object.prototype.toString.call(value);
  }
  return String(value);
}
