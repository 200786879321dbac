/**
 * {@linkcode RegistryGuard} and {@linkcode ArrayOwner}: scoped and handed-off
 * ownership of registered arrays.
 *
 * @module
 */

import {
  DoubleFreeError,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import type { Dtype, TypedArrayOf } from "@allot/storage";
import {
  type NewArrayOptions,
  OwnershipRegistry,
} from "./ownership_registry.ts";
import { checkInstance, describeValue, typeName } from "./_describe.ts";

/**
 * The owner a consumer receives with a zero-copy hand-off: the array itself
 * (no copy) and `release()`, which unregisters it from the registry that owns
 * it, exactly once. This is the JS form of SCL's capsule deleter.
 *
 * @typeParam T Type of the array.
 *
 * @example Hand an array to a consumer without copying
 * ```ts
 * import { ArrayOwner, OwnershipRegistry } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * using registry = new OwnershipRegistry();
 * const data = registry.newArray("f32", 4);
 * data.set([1, 2, 3, 4]);
 * const owner = new ArrayOwner(registry, data);
 * // ... the consumer reads owner.array, then:
 * owner.release();
 * assert.ok(!registry.isRegistered(data));
 * ```
 */
export class ArrayOwner<T extends ArrayBufferView> {
  #registry: OwnershipRegistry;
  #array: T;
  #released = false;

  /**
   * Takes over the reference `array` holds in `registry`.
   *
   * @param registry The registry where `array` is registered.
   * @param array A registered array (real pointer or alias).
   * @throws {InvalidArgumentError} When `registry` is not an
   *   `OwnershipRegistry` or `array` not an `ArrayBufferView`.
   * @throws {DoubleFreeError} When `array` is not registered there.
   */
  constructor(registry: OwnershipRegistry, array: T) {
    checkInstance(registry, OwnershipRegistry, "registry");
    if (!ArrayBuffer.isView(array)) {
      throw new InvalidArgumentError(
        `Invalid array: must be a typed array or DataView, received ${
          describeValue(array)
        }`,
        { name: "array", value: array, limit: "ArrayBufferView" },
      );
    }
    if (!registry.isRegistered(array)) {
      throw new DoubleFreeError(
        `Cannot own a ${typeName(array)}: it is not registered`,
      );
    }
    this.#registry = registry;
    this.#array = array;
  }

  /**
   * The array.
   *
   * @throws {UseAfterFreeError} After `release()`.
   */
  get array(): T {
    if (this.#released) {
      throw new UseAfterFreeError(
        "Cannot read the array of an ArrayOwner: it was released",
      );
    }
    return this.#array;
  }

  /** Whether `release()` has run. */
  get released(): boolean {
    return this.#released;
  }

  /**
   * Unregisters the array (freeing it when it held the last reference).
   *
   * @throws {DoubleFreeError} When called twice.
   */
  release(): void {
    if (this.#released) {
      throw new DoubleFreeError(
        "Cannot release an ArrayOwner: it was already released",
      );
    }
    this.#released = true;
    try {
      this.#registry.unregister(this.#array);
    } catch (error) {
      // A refusal that changed nothing (strict mode reporting a stale write
      // first) leaves the array owned here, to release again.
      if (_stillOwned(this.#registry, this.#array)) this.#released = false;
      throw error;
    }
  }

  /** Releases unless already released, for `using`. */
  [Symbol.dispose](): void {
    if (!this.#released) this.release();
  }
}

/**
 * A scope guard for `using` (SCL's `RegistryGuard`): allocates and registers
 * an array, and unregisters it when the scope exits, also when an exception
 * is thrown. Move semantics: `release()` hands ownership out and the guard
 * no longer frees; `handOff()` hands it out as an {@linkcode ArrayOwner}.
 *
 * @typeParam D The dtype.
 *
 * @example Free at scope exit, even on an exception
 * ```ts
 * import { OwnershipRegistry, RegistryGuard } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * using registry = new OwnershipRegistry();
 * assert.throws(() => {
 *   using scratch = new RegistryGuard(registry, "f32", 1000);
 *   scratch.array.fill(1);
 *   throw new Error("boom");
 * }, /boom/);
 * assert.equal(registry.requestedBytes, 0);
 *
 * function make(): Float32Array {
 *   using guard = new RegistryGuard(registry, "f32", 8);
 *   guard.array.fill(2);
 *   return guard.release(); // moved out: still registered
 * }
 * const kept = make();
 * assert.ok(registry.isRegistered(kept));
 * registry.unregister(kept);
 * ```
 */
export class RegistryGuard<D extends Dtype> {
  #registry: OwnershipRegistry;
  #array: TypedArrayOf<D> | undefined;

  /**
   * Allocates `length` elements of `dtype` in `registry`.
   *
   * @param registry The registry to allocate in.
   * @param dtype Element type.
   * @param length Number of elements.
   * @param options Options passed to `newArray`.
   * @throws {InvalidArgumentError} For a registry that is not an
   *   `OwnershipRegistry`, a bad dtype, length or option.
   */
  constructor(
    registry: OwnershipRegistry,
    dtype: D,
    length: number,
    options?: NewArrayOptions,
  ) {
    checkInstance(registry, OwnershipRegistry, "registry");
    this.#registry = registry;
    this.#array = registry.newArray(dtype, length, options);
  }

  /** Whether the guard still owns its array. */
  get owns(): boolean {
    return this.#array !== undefined;
  }

  /**
   * The array.
   *
   * @throws {UseAfterFreeError} After `release()`, `handOff()` or disposal.
   */
  get array(): TypedArrayOf<D> {
    if (this.#array === undefined) {
      throw new UseAfterFreeError(
        "Cannot read the array of a RegistryGuard: ownership was released or moved out",
      );
    }
    return this.#array;
  }

  /**
   * Hands ownership out: returns the array, still registered; the caller
   * must unregister it.
   *
   * @returns The array.
   * @throws {UseAfterFreeError} When the guard no longer owns it.
   */
  release(): TypedArrayOf<D> {
    const array = this.array;
    this.#array = undefined;
    return array;
  }

  /**
   * Hands ownership out as an {@linkcode ArrayOwner}, whose `release()`
   * unregisters the array.
   *
   * @returns The owner.
   * @throws {UseAfterFreeError} When the guard no longer owns it.
   */
  handOff(): ArrayOwner<TypedArrayOf<D>> {
    const owner = new ArrayOwner(this.#registry, this.array);
    this.#array = undefined;
    return owner;
  }

  /** Unregisters the array if the guard still owns it. */
  [Symbol.dispose](): void {
    const array = this.#array;
    if (array === undefined) return;
    this.#array = undefined;
    try {
      this.#registry.unregister(array);
    } catch (error) {
      // As ArrayOwner.release: a refusal that changed nothing keeps it.
      if (_stillOwned(this.#registry, array)) this.#array = array;
      throw error;
    }
  }
}

// Whether `array` is still registered after an unregister that threw: a
// refusal that changed nothing, so its owner still owns it.
function _stillOwned(
  registry: OwnershipRegistry,
  array: ArrayBufferView,
): boolean {
  try {
    return !registry.disposed && registry.isRegistered(array);
  } catch {
    return false;
  }
}
