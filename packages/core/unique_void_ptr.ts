/**
 * {@linkcode UniqueVoidPtr}: an owning pointer with a context and a deleter
 * that runs exactly once.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { describeValue } from "./validate.ts";

/**
 * Frees what a context stands for. Called at most once per context. Declared
 * bivariant in `C` (method syntax) so a `DataPtr<M, number>` can be passed
 * where a `DataPtr<M>` is expected.
 */
export type Deleter<C = unknown> = {
  delete(context: C): void;
}["delete"];

/**
 * An owning smart pointer in the manner of PyTorch's `UniqueVoidPtr`: `data`
 * is what users read, `context` is what the deleter needs to free it. The
 * deleter runs exactly once, when the pointer is cleared or disposed while the
 * context is not `null`. {@linkcode UniqueVoidPtr.releaseContext} gives
 * ownership up without running it.
 *
 * @typeParam T Type of the data.
 * @typeParam C Type of the context passed to the deleter.
 *
 * @example The deleter runs once, at scope exit
 * ```ts
 * import { UniqueVoidPtr } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const freed: number[] = [];
 * {
 *   using ptr = new UniqueVoidPtr("data", 7, (ctx: number) => freed.push(ctx));
 *   assert.equal(ptr.get(), "data");
 * }
 * assert.deepEqual(freed, [7]);
 * ```
 */
export class UniqueVoidPtr<T = unknown, C = unknown> {
  #data: T | null;
  #context: C | null;
  #deleter: Deleter<C> | null;

  /**
   * Creates an owning pointer.
   *
   * @param data What the pointer points to, or `null`.
   * @param context What the deleter frees; `null` means nothing is owned.
   * @param deleter Called once with the context when the pointer is cleared.
   * @throws {InvalidArgumentError} When `deleter` is neither a function nor
   * `null` (it would fail only when the pointer is freed).
   */
  constructor(
    data: T | null,
    context: C | null = null,
    deleter: Deleter<C> | null = null,
  ) {
    if (deleter !== null && typeof deleter !== "function") {
      throw _notDeleter(deleter);
    }
    this.#data = data;
    this.#context = context;
    this.#deleter = deleter;
  }

  /**
   * The data, or `null` after clear or release.
   *
   * @returns The data.
   */
  get(): T | null {
    return this.#data;
  }

  /**
   * The context, or `null` when nothing is owned.
   *
   * @returns The context.
   */
  getContext(): C | null {
    return this.#context;
  }

  /**
   * The current deleter.
   *
   * @returns The deleter, or `null`.
   */
  getDeleter(): Deleter<C> | null {
    return this.#deleter;
  }

  /** Whether the pointer still owns a context. */
  get owns(): boolean {
    return this.#context !== null;
  }

  /**
   * Drops the data and runs the deleter if a context is owned. Clearing an
   * empty pointer does nothing. The pointer is empty before the deleter runs,
   * so a deleter that throws cannot make it run twice.
   */
  clear(): void {
    const context = this.#context;
    const deleter = this.#deleter;
    this.#data = null;
    this.#context = null;
    if (context !== null && deleter !== null) deleter(context);
  }

  /**
   * Gives up ownership: returns the context and leaves the pointer empty
   * without running the deleter. The caller now frees the context.
   *
   * @returns The context that was owned, or `null`.
   *
   * @example
   * ```ts
   * import { UniqueVoidPtr } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * let calls = 0;
   * const ptr = new UniqueVoidPtr("data", "ctx", () => calls++);
   * assert.equal(ptr.releaseContext(), "ctx");
   * ptr.clear();
   * assert.equal(calls, 0);
   * ```
   */
  releaseContext(): C | null {
    const context = this.#context;
    this.#data = null;
    this.#context = null;
    return context;
  }

  /**
   * Replaces the deleter with `next` only if the current one is `expected`.
   *
   * @param expected The deleter the caller believes is installed.
   * @param next The deleter to install.
   * @throws {InvalidArgumentError} When `next` is not a function; nothing
   * changes.
   * @returns `true` when the swap happened.
   *
   * @example
   * ```ts
   * import { UniqueVoidPtr } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const a = () => {};
   * const b = () => {};
   * const ptr = new UniqueVoidPtr(null, 1, a);
   * assert.equal(ptr.compareExchangeDeleter(b, a), false);
   * assert.equal(ptr.compareExchangeDeleter(a, b), true);
   * assert.equal(ptr.getDeleter(), b);
   * ```
   */
  compareExchangeDeleter(
    expected: Deleter<C> | null,
    next: Deleter<C>,
  ): boolean {
    if (typeof next !== "function") throw _notDeleter(next);
    if (this.#deleter !== expected) return false;
    this.#deleter = next;
    return true;
  }

  /** Same as {@linkcode UniqueVoidPtr.clear}, for `using`. */
  [Symbol.dispose](): void {
    this.clear();
  }
}

function _notDeleter(deleter: unknown): InvalidArgumentError {
  return new InvalidArgumentError(
    `Invalid deleter: must be a function or null, received ${
      describeValue(deleter)
    }`,
    { name: "deleter", value: deleter, limit: "a function" },
  );
}
