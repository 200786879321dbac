/**
 * Intrusive reference counting with PyTorch's semantics: a strong and a weak
 * count live in the object ({@linkcode IntrusiveTarget}); handles
 * ({@linkcode IntrusivePtr}, {@linkcode WeakIntrusivePtr}) move them.
 *
 * - The weak count includes one extra while any strong reference exists.
 * - When the strong count reaches zero, `releaseResources()` runs exactly once
 *   and the strong count never rises again: retaining then throws.
 * - When the weak count reaches zero the object is finished.
 *
 * Every handle is released at most once: a second `release()` throws
 * {@linkcode DoubleFreeError}, and reading a released handle throws
 * {@linkcode UseAfterFreeError}.
 *
 * @module
 */

import {
  DoubleFreeError,
  InvalidArgumentError,
  UseAfterFreeError,
} from "./errors.ts";
import { describeValue } from "./validate.ts";

let addStrong: (target: IntrusiveTarget, delta: number) => number;
let addWeak: (target: IntrusiveTarget, delta: number) => number;
let runRelease: (target: IntrusiveTarget) => void;
// The counts as this module keeps them: a subclass may override the public
// getters (`useCount`, ...), but the rules read the private fields.
let isTarget: (value: unknown) => boolean;
let strongOf: (target: IntrusiveTarget) => number;
let weakOf: (target: IntrusiveTarget) => number;
let releasedOf: (target: IntrusiveTarget) => boolean;

/**
 * Base class of reference-counted objects. Subclasses override
 * `releaseResources()` to free what they own when the last strong reference
 * goes away.
 *
 * @example A target that frees its memory once
 * ```ts
 * import { IntrusivePtr, IntrusiveTarget } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * class Tensor extends IntrusiveTarget {
 *   freed = 0;
 *   protected override releaseResources(): void {
 *     this.freed++;
 *   }
 * }
 * const tensor = new Tensor();
 * const a = IntrusivePtr.make(tensor);
 * const b = a.clone();
 * const weak = a.weak();
 * a.release();
 * assert.equal(b.useCount, 1);
 * b.release();
 * assert.equal(weak.lock(), undefined);
 * assert.equal(tensor.freed, 1);
 * weak.release();
 * assert.ok(tensor.finished);
 * ```
 */
export class IntrusiveTarget {
  #strong = 0;
  #weak = 0;
  #released = false;

  static {
    addStrong = (target, delta) => (target.#strong += delta);
    addWeak = (target, delta) => (target.#weak += delta);
    isTarget = (value) =>
      typeof value === "object" && value !== null && #strong in value;
    strongOf = (target) => target.#strong;
    weakOf = (target) => target.#weak;
    releasedOf = (target) => target.#released;
    runRelease = (target) => {
      if (target.#released) return;
      target.#released = true;
      target.releaseResources();
    };
  }

  /** Number of strong references. */
  get useCount(): number {
    return this.#strong;
  }

  /** The weak count, including the extra one held while `useCount > 0`. */
  get weakUseCount(): number {
    return this.#weak;
  }

  /** Whether `releaseResources()` has run (the strong count reached zero). */
  get resourcesReleased(): boolean {
    return this.#released;
  }

  /** Whether both counts reached zero after the object was first owned. */
  get finished(): boolean {
    return this.#released && this.#weak === 0;
  }

  /**
   * Frees what the object owns. Runs exactly once, when the strong count
   * reaches zero. The default does nothing.
   */
  protected releaseResources(): void {}
}

function requireTarget(target: unknown, what: string): void {
  if (!isTarget(target)) {
    throw new InvalidArgumentError(
      `Cannot ${what}: the target must be an IntrusiveTarget, received ${
        describeValue(target)
      }`,
      { name: "target", value: target, limit: "IntrusiveTarget" },
    );
  }
}

function retainStrong(target: IntrusiveTarget): void {
  requireTarget(target, "retain a reference");
  if (strongOf(target) === 0) {
    throw new UseAfterFreeError(
      "Cannot retain a reference-counted object: its strong count already reached 0",
    );
  }
  addStrong(target, 1);
}

function releaseStrong(target: IntrusiveTarget): void {
  if (addStrong(target, -1) === 0) {
    try {
      runRelease(target);
    } finally {
      addWeak(target, -1);
    }
  }
}

/**
 * A strong reference to an {@linkcode IntrusiveTarget}.
 *
 * @typeParam T The target type.
 *
 * @example Share and release
 * ```ts
 * import { IntrusivePtr, IntrusiveTarget } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const a = IntrusivePtr.make(new IntrusiveTarget());
 * assert.ok(a.isUnique);
 * {
 *   using b = a.clone();
 *   assert.equal(b.useCount, 2);
 * }
 * assert.ok(a.isUnique);
 * a.release();
 * ```
 */
export class IntrusivePtr<T extends IntrusiveTarget> {
  #target: T;
  #released = false;

  private constructor(target: T) {
    this.#target = target;
  }

  /**
   * Takes first ownership of a fresh target: strong count 1, weak count 1.
   *
   * @param target An object that was never owned before.
   * @returns The first strong reference.
   * @throws {InvalidArgumentError} When the target was owned before.
   */
  static make<T extends IntrusiveTarget>(target: T): IntrusivePtr<T> {
    requireTarget(target, "make an owning reference");
    if (
      strongOf(target) !== 0 || weakOf(target) !== 0 || releasedOf(target)
    ) {
      throw new InvalidArgumentError(
        `Cannot make an owning reference: the target is already owned (useCount ${
          strongOf(target)
        }, weakUseCount ${weakOf(target)})`,
        { name: "target", value: strongOf(target), limit: 0 },
      );
    }
    addStrong(target, 1);
    addWeak(target, 1);
    return new IntrusivePtr(target);
  }

  /**
   * Makes a new strong reference to a target that is known to be alive, like
   * PyTorch's `reclaim_copy`.
   *
   * @param target A target whose strong count is above zero.
   * @returns A new strong reference.
   * @throws {UseAfterFreeError} When the strong count already reached zero.
   */
  static retain<T extends IntrusiveTarget>(target: T): IntrusivePtr<T> {
    retainStrong(target);
    return new IntrusivePtr(target);
  }

  /**
   * The target.
   *
   * @throws {UseAfterFreeError} After this handle was released.
   */
  get target(): T {
    if (this.#released) throw this.#useAfterRelease();
    return this.#target;
  }

  /** Number of strong references to the target. */
  get useCount(): number {
    return strongOf(this.#target);
  }

  /** The target's weak count, including the extra one for strong owners. */
  get weakUseCount(): number {
    return weakOf(this.#target);
  }

  /** Whether this is the only strong reference. */
  get isUnique(): boolean {
    return !this.#released && strongOf(this.#target) === 1;
  }

  /** Whether this handle was released. */
  get released(): boolean {
    return this.#released;
  }

  /**
   * Makes another strong reference.
   *
   * @returns A new handle; release it separately.
   * @throws {UseAfterFreeError} After this handle was released.
   */
  clone(): IntrusivePtr<T> {
    return IntrusivePtr.retain(this.target);
  }

  /**
   * Makes a weak reference.
   *
   * @returns A weak handle; release it separately.
   * @throws {UseAfterFreeError} After this handle was released.
   */
  weak(): WeakIntrusivePtr<T> {
    return WeakIntrusivePtr.of(this.target);
  }

  /**
   * Drops this strong reference. The last one runs `releaseResources()`.
   *
   * @throws {DoubleFreeError} When this handle was already released.
   */
  release(): void {
    if (this.#released) {
      throw new DoubleFreeError(
        "Cannot release a strong reference: it was already released",
      );
    }
    this.#released = true;
    releaseStrong(this.#target);
  }

  /** Releases this handle if it was not released yet. */
  [Symbol.dispose](): void {
    if (!this.#released) this.release();
  }

  #useAfterRelease(): UseAfterFreeError {
    return new UseAfterFreeError(
      "Cannot use a strong reference: it was already released",
    );
  }
}

/**
 * A weak reference: keeps the object's bookkeeping alive but not its
 * resources. {@linkcode WeakIntrusivePtr.lock} upgrades it while a strong
 * reference still exists.
 *
 * @typeParam T The target type.
 *
 * @example
 * ```ts
 * import { IntrusivePtr, IntrusiveTarget } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const strong = IntrusivePtr.make(new IntrusiveTarget());
 * using weak = strong.weak();
 * const again = weak.lock();
 * assert.equal(again?.useCount, 2);
 * again?.release();
 * strong.release();
 * assert.equal(weak.lock(), undefined);
 * assert.ok(weak.expired);
 * ```
 */
export class WeakIntrusivePtr<T extends IntrusiveTarget> {
  #target: T;
  #released = false;

  private constructor(target: T) {
    this.#target = target;
  }

  /**
   * Makes a weak reference to a target that has strong or weak owners.
   *
   * @param target The target.
   * @returns A weak handle.
   * @throws {UseAfterFreeError} When the target is finished or never owned.
   */
  static of<T extends IntrusiveTarget>(target: T): WeakIntrusivePtr<T> {
    requireTarget(target, "make a weak reference");
    if (weakOf(target) === 0) {
      throw new UseAfterFreeError(
        "Cannot make a weak reference: the target has no owners (weakUseCount 0)",
      );
    }
    addWeak(target, 1);
    return new WeakIntrusivePtr(target);
  }

  /**
   * The target, usable only for bookkeeping once expired.
   *
   * @throws {UseAfterFreeError} After this handle was released.
   */
  get target(): T {
    if (this.#released) {
      throw new UseAfterFreeError(
        "Cannot use a weak reference: it was already released",
      );
    }
    return this.#target;
  }

  /** Number of strong references to the target. */
  get useCount(): number {
    return strongOf(this.#target);
  }

  /** The target's weak count, including the extra one for strong owners. */
  get weakUseCount(): number {
    return weakOf(this.#target);
  }

  /** Whether this weak reference was released (as {@linkcode IntrusivePtr.released}). */
  get released(): boolean {
    return this.#released;
  }

  /** Whether the strong count reached zero. */
  get expired(): boolean {
    return strongOf(this.#target) === 0;
  }

  /**
   * Upgrades to a strong reference if the target is still alive.
   *
   * @returns A new strong handle, or `undefined` once expired.
   * @throws {UseAfterFreeError} After this handle was released.
   */
  lock(): IntrusivePtr<T> | undefined {
    const target = this.target;
    return strongOf(target) === 0 ? undefined : IntrusivePtr.retain(target);
  }

  /**
   * Makes another weak reference.
   *
   * @returns A new weak handle.
   * @throws {UseAfterFreeError} After this handle was released.
   */
  clone(): WeakIntrusivePtr<T> {
    return WeakIntrusivePtr.of(this.target);
  }

  /**
   * Drops this weak reference.
   *
   * @throws {DoubleFreeError} When this handle was already released.
   */
  release(): void {
    if (this.#released) {
      throw new DoubleFreeError(
        "Cannot release a weak reference: it was already released",
      );
    }
    this.#released = true;
    addWeak(this.#target, -1);
  }

  /** Releases this handle if it was not released yet. */
  [Symbol.dispose](): void {
    if (!this.#released) this.release();
  }
}
