/**
 * {@linkcode DynBuffer}: a type-erased buffer for heterogeneous collections.
 *
 * @module
 */

import {
  describeValue,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import { _isBuffer, type Buffer } from "./buffer.ts";
import type { BufferView } from "./buffer_view.ts";
import type { Dtype } from "./dtype.ts";
import type { Storage } from "./storage.ts";
import { _adopt } from "./tidy.ts";

/**
 * A buffer whose dtype is known only at run time, like CubeCL's
 * `DynBuffer`: it owns one {@linkcode Buffer} handle and exposes what does
 * not depend on the element type. {@linkcode DynBuffer.downcast} gives a
 * typed buffer back after checking the dtype.
 *
 * @example Keep buffers of different dtypes in one list
 * ```ts
 * import { Buffer, DynBuffer } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * const list = [
 *   new DynBuffer(Buffer.zeros("f32", [2, 2])),
 *   new DynBuffer(Buffer.filled("u8", [3], { value: 7 })),
 * ];
 * assert.deepEqual(list.map((b) => b.dtype), ["f32", "u8"]);
 * using bytes = list[1].downcast("u8");
 * assert.deepEqual([...bytes.toData()], [7, 7, 7]);
 * assert.throws(() => list[0].downcast("i32"), /dtype is f32/);
 * assert.equal(list[0].tryDowncast("i32"), undefined);
 * for (const b of list) b.release();
 * ```
 */
export class DynBuffer {
  #buffer: Buffer;

  /**
   * Wraps a buffer, taking over its handle (release the `DynBuffer`).
   *
   * @param buffer Any typed buffer.
   * @throws {InvalidArgumentError} When `buffer` is not a `Buffer`.
   * @throws {UseAfterFreeError} When it was released.
   */
  constructor(buffer: Buffer) {
    if (!_isBuffer(buffer)) {
      throw new InvalidArgumentError(
        `Cannot make a DynBuffer: expected a Buffer, received ${
          describeValue(buffer)
        }`,
        { name: "buffer", value: buffer, limit: "Buffer" },
      );
    }
    if (buffer.released) {
      // it would answer for its dtype and shape, then fail on first use
      throw new UseAfterFreeError(
        `Cannot make a DynBuffer of ${buffer}: the buffer was released`,
      );
    }
    this.#buffer = buffer;
    _adopt(buffer, this);
  }

  /** The element type. */
  get dtype(): Dtype {
    return this.#buffer.dtype;
  }

  /** The layout. */
  get view(): BufferView {
    return this.#buffer.view;
  }

  /** The shape (a fresh copy). */
  get shape(): number[] {
    return this.#buffer.shape;
  }

  /** The strides (a fresh copy). */
  get strides(): number[] {
    return this.#buffer.strides;
  }

  /** Number of logical elements. */
  get length(): number {
    return this.#buffer.length;
  }

  /** Bytes of the logical elements. */
  get byteLength(): number {
    return this.#buffer.byteLength;
  }

  /** Whether the view is row-major contiguous. */
  get isContiguous(): boolean {
    return this.#buffer.isContiguous;
  }

  /** The shared storage. */
  get storage(): Storage {
    return this.#buffer.storage;
  }

  /** The storage id. */
  get storageId(): number {
    return this.#buffer.storageId;
  }

  /** Whether this handle was released. */
  get released(): boolean {
    return this.#buffer.released;
  }

  /**
   * Whether the dtype is `dtype`.
   *
   * @param dtype A dtype name.
   * @returns `true` when it matches.
   */
  is(dtype: Dtype): boolean {
    return this.#buffer.dtype === dtype;
  }

  /**
   * A new typed handle to the same storage and view, when the dtype is
   * `dtype`.
   *
   * @param dtype The expected dtype.
   * @returns A typed buffer (release it separately), or `undefined` when the
   * dtype differs.
   */
  tryDowncast<D extends Dtype>(dtype: D): Buffer<D> | undefined {
    if (this.#buffer.dtype !== dtype) return undefined;
    return (this.#buffer as Buffer<D>).clone();
  }

  /**
   * A new typed handle to the same storage and view.
   *
   * @param dtype The expected dtype.
   * @returns A typed buffer; release it separately.
   * @throws {InvalidArgumentError} When the dtype differs.
   */
  downcast<D extends Dtype>(dtype: D): Buffer<D> {
    const typed = this.tryDowncast(dtype);
    if (typed === undefined) {
      throw new InvalidArgumentError(
        `Cannot downcast a dynamic buffer to ${
          describeValue(dtype)
        }: its dtype is ${this.#buffer.dtype}`,
        { name: "dtype", value: dtype, limit: this.#buffer.dtype },
      );
    }
    return typed;
  }

  /**
   * Drops the handle; the last one frees the storage.
   *
   * @throws {DoubleFreeError} When already released.
   */
  release(): void {
    this.#buffer.release();
  }

  /** Releases the handle if it was not released yet. */
  [Symbol.dispose](): void {
    if (!this.#buffer.released) this.#buffer.release();
  }

  /**
   * Description of the wrapped buffer.
   *
   * @returns The description.
   */
  toString(): string {
    return `Dyn${this.#buffer}`;
  }
}
