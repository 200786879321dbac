/**
 * Scopes that release the buffers made inside them: {@linkcode tidy} and
 * {@linkcode keep}, after TensorFlow.js's `tf.tidy` and `tf.keep`. Every
 * `Buffer` is an owning handle, so a chain such as
 * `b.transpose().contiguous()` leaves the intermediate view to release; in a
 * `tidy()` the scope releases it when the function returns, deterministically
 * (nothing here waits for the garbage collector).
 *
 * @module
 */

import { AllotError, InvalidArgumentError } from "@allot/core";

/**
 * What a {@linkcode tidy} scope tracks and {@linkcode keep} takes: an owning
 * handle (a `Buffer` or a `DynBuffer`).
 */
export interface TidyHandle {
  /** Whether the handle was released. */
  readonly released: boolean;
  /** Drops the handle's reference. */
  release(): void;
}

/**
 * The protocol by which a runtime's own classes (a `Tensor` wrapping a
 * `Buffer`, a parameter list, a model) tell {@linkcode tidy} and
 * {@linkcode keep} which buffers they own: a method under this symbol that
 * returns them. A `tidy()` that returns such an object keeps those buffers
 * (and what they in turn own); `keep(wrapper)` keeps them all.
 *
 * It is `Symbol.for("allot.ownedBuffers")`, so two copies of this package in
 * one program agree on it.
 *
 * @example A tensor class that tidy() understands
 * ```ts
 * import { Buffer, type BufferOwner, ownedBuffers, tidy } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * class Tensor implements BufferOwner {
 *   constructor(readonly buffer: Buffer<"f32">) {}
 *   [ownedBuffers]() {
 *     return [this.buffer];
 *   }
 *   dispose(): void {
 *     this.buffer.release();
 *   }
 * }
 *
 * using a = Buffer.fromData("f32", [1, 2, 3, 4], { shape: [2, 2] });
 * const t = tidy(() => new Tensor(a.transpose().contiguous()));
 * assert.equal(t.buffer.released, false); // kept: the Tensor owns it
 * assert.ok(a.isStorageUnique); // the transposed view was released
 * t.dispose();
 * ```
 */
export const ownedBuffers: unique symbol = Symbol.for("allot.ownedBuffers");

/**
 * An object that owns buffers: see {@linkcode ownedBuffers}.
 */
export interface BufferOwner {
  /**
   * The buffers (or other owners) this object owns.
   *
   * @returns Them, in any iterable.
   */
  [ownedBuffers](): Iterable<unknown>;
}

/**
 * Whether `value` implements the {@linkcode BufferOwner} protocol.
 *
 * @example
 * ```ts
 * import { Buffer, isBufferOwner, ownedBuffers } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * using b = Buffer.zeros("f32", [2]);
 * const tensor = { [ownedBuffers]: () => [b] };
 * assert.equal(isBufferOwner(tensor), true);
 * assert.equal(isBufferOwner({ buffer: b }), false);
 * ```
 */
export function isBufferOwner(value: unknown): value is BufferOwner {
  if (
    (typeof value !== "object" && typeof value !== "function") ||
    value === null
  ) return false;
  try {
    return typeof (value as Partial<BufferOwner>)[ownedBuffers] === "function";
  } catch {
    return false; // a value that traps when read (a proxy) owns nothing
  }
}

/** The open scopes, innermost last; each holds the handles made in it. */
const scopes: Set<TidyHandle>[] = [];

/**
 * Records a handle made now in the innermost open scope, if any. Called by
 * every `Buffer` constructor.
 *
 * @param handle The new handle.
 */
export function _track(handle: TidyHandle): void {
  if (scopes.length > 0) scopes[scopes.length - 1].add(handle);
}

/**
 * Moves the scope membership of `inner` to `outer`, which took `inner`'s
 * handle over (a `DynBuffer` wrapping a `Buffer`).
 *
 * @param inner The wrapped handle.
 * @param outer The wrapper, now the owner.
 */
export function _adopt(inner: TidyHandle, outer: TidyHandle): void {
  for (const scope of scopes) {
    if (scope.delete(inner)) scope.add(outer);
  }
}

/**
 * Runs `fn` and releases every buffer made while it ran (views, copies,
 * pooled buffers, `DynBuffer`s), except those it returns and those passed to
 * {@linkcode keep}. Returned buffers (alone, or inside arrays, plain
 * objects, `Map`s, `Set`s and objects that implement the
 * {@linkcode BufferOwner} protocol, such as a runtime's `Tensor` class, at
 * any depth) move to the enclosing scope, so an outer `tidy()`
 * still releases them. Buffers released inside are skipped. When `fn` throws,
 * everything made in it is released and the error goes on.
 *
 * `fn` must be synchronous: a buffer made after an `await` would belong to
 * whatever scope is open then. A returned promise (or any thenable) is
 * refused after the scope is released.
 *
 * @typeParam T The result.
 * @param fn The function to run.
 * @returns What `fn` returned.
 * @throws {InvalidArgumentError} When `fn` is not a function or returns a
 * promise.
 *
 * @example Chain view operations without releasing each handle
 * ```ts
 * import { Buffer, tidy } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * using m = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
 * using packed = tidy(() => m.transpose().slice(0, { stop: 2 }).contiguous());
 * assert.deepEqual([...packed.toData()], [1, 4, 2, 5]);
 * assert.ok(m.isStorageUnique); // the transposed and sliced views are gone
 * ```
 */
export function tidy<T>(fn: () => T): T {
  if (typeof fn !== "function") {
    throw new InvalidArgumentError(
      `tidy() takes a function; got ${describe(fn)}`,
      { name: "fn", value: describe(fn) },
    );
  }
  const scope = new Set<TidyHandle>();
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (error) {
    close(scope, new Set());
    throw error;
  }
  let thenable: boolean;
  try {
    thenable = isThenable(result);
  } catch (error) {
    // a result that traps when read: the scope was left open for good
    close(scope, new Set());
    throw new InvalidArgumentError(
      `tidy() could not read its result (all made in the scope were released): ${
        error instanceof Error ? error.message : String(error)
      }`,
      { name: "result", value: describe(result) },
    );
  }
  if (thenable) {
    close(scope, new Set());
    throw new InvalidArgumentError(
      "tidy() takes a synchronous function; it returned a promise (buffers made after an await would escape the scope)",
      { name: "fn", value: "a promise" },
    );
  }
  const kept = new Set<TidyHandle>();
  try {
    collect(result, scope, kept, new Set());
  } catch (error) {
    // An owner whose [ownedBuffers]() throws or is not iterable: close the
    // scope anyway (an open one would track every later buffer forever).
    close(scope, new Set());
    if (error instanceof AllotError) throw error;
    throw new InvalidArgumentError(
      `tidy() could not find the buffers its result owns (all made in the scope were released): ${
        error instanceof Error ? error.message : String(error)
      }`,
      { name: "result", value: describe(result) },
    );
  }
  // hand the returned buffers to the enclosing scope first, so that they
  // stay tracked even if a release below throws
  const at = scopes.lastIndexOf(scope);
  if (at > 0) { for (const handle of kept) scopes[at - 1].add(handle); }
  close(scope, kept);
  return result;
}

/**
 * Exempts `buffer` from every open {@linkcode tidy} scope: it stays live
 * when they end, and releasing it is again the caller's job.
 *
 * @typeParam B The buffer type.
 * @param buffer A buffer (or `DynBuffer`) made in a scope.
 * @returns `buffer`.
 * @throws {InvalidArgumentError} When `buffer` is not an owning handle.
 *
 * @example Keep one of the buffers a scope makes
 * ```ts
 * import { Buffer, keep, tidy } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * using m = Buffer.zeros("f32", [4]);
 * const views: Buffer<"f32">[] = [];
 * tidy(() => {
 *   views.push(keep(m.reshape([2, 2])));
 *   m.reshape([4, 1]); // released when the scope ends
 * });
 * assert.equal(m.storage.useCount, 2); // m and the kept view
 * views[0].release();
 * ```
 */
export function keep<B extends TidyHandle | BufferOwner>(buffer: B): B {
  const owner = isBufferOwner(buffer);
  let handle = false;
  try {
    handle = typeof buffer === "object" && buffer !== null &&
      typeof (buffer as Partial<TidyHandle>).release === "function";
  } catch {
    // a value that traps when read (a proxy): refused just below
  }
  if (!owner && !handle) {
    throw new InvalidArgumentError(
      `keep() takes a buffer or a BufferOwner; got ${describe(buffer)}`,
      { name: "buffer", value: describe(buffer) },
    );
  }
  const handles = new Set<TidyHandle>();
  if (owner) {
    // everything the owner reaches, whatever scope tracks it
    const all = new Set<TidyHandle>();
    for (const scope of scopes) for (const h of scope) all.add(h);
    try {
      collect(buffer, all, handles, new Set());
    } catch (error) {
      // Nothing changed yet: report an owner that lies with a typed error.
      if (error instanceof AllotError) throw error;
      throw new InvalidArgumentError(
        `keep() could not find the buffers ${describe(buffer)} owns: ${
          error instanceof Error ? error.message : String(error)
        }`,
        { name: "buffer", value: describe(buffer) },
      );
    }
  }
  if (!owner || isTidyHandle(buffer)) handles.add(buffer as TidyHandle);
  for (const scope of scopes) {
    for (const handle of handles) scope.delete(handle);
  }
  return buffer;
}

function isTidyHandle(value: unknown): value is TidyHandle {
  return typeof value === "object" && value !== null &&
    typeof (value as Partial<TidyHandle>).release === "function" &&
    "released" in value;
}

/** Closes the innermost scope: releases what it tracked but `kept`. */
function close(scope: Set<TidyHandle>, kept: Set<TidyHandle>): void {
  const at = scopes.lastIndexOf(scope);
  if (at >= 0) scopes.splice(at, 1);
  let first: unknown;
  let failed = false;
  for (const handle of scope) {
    if (kept.has(handle) || handle.released) continue;
    try {
      handle.release();
    } catch (error) {
      // release the rest, then report the first failure
      if (!failed) [first, failed] = [error, true];
    }
  }
  if (failed) throw first;
}

/** Adds the tracked handles reachable from `value` to `kept`. */
function collect(
  value: unknown,
  scope: Set<TidyHandle>,
  kept: Set<TidyHandle>,
  seen: Set<object>,
): void {
  if (typeof value !== "object" || value === null || seen.has(value)) return;
  seen.add(value);
  if (scope.has(value as TidyHandle)) {
    kept.add(value as TidyHandle);
    if (!isBufferOwner(value)) return;
  }
  if (isBufferOwner(value)) {
    for (const item of value[ownedBuffers]()) {
      collect(item, scope, kept, seen);
    }
    return;
  }
  if (value instanceof Map) {
    for (const item of value.values()) collect(item, scope, kept, seen);
    return;
  }
  if (value instanceof Set) {
    for (const item of value) collect(item, scope, kept, seen);
    return;
  }
  if (Array.isArray(value)) {
    for (const item of value) collect(item, scope, kept, seen);
    return;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) {
    for (const item of Object.values(value)) {
      collect(item, scope, kept, seen);
    }
  }
}

function isThenable(value: unknown): boolean {
  return (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function";
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") {
    try {
      const name = (value as object).constructor?.name;
      return typeof name === "string" ? name : "an object";
    } catch {
      return "an object"; // a proxy that traps when read
    }
  }
  return typeof value;
}
