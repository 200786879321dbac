/**
 * {@linkcode BufferBackend}: the seam through which a device package (such
 * as `@allot/webgpu`) makes {@linkcode Buffer}s work on memory the host
 * cannot read.
 *
 * @module
 */

import type { BufferView } from "./buffer_view.ts";
import type { AnyTypedArray, Dtype } from "./dtype.ts";
import type { Storage } from "./storage.ts";

/**
 * What a kernel needs to address a view: the storage, the layout and the
 * dtype. It holds no reference count; it is valid while the buffer that made
 * it is alive.
 */
export interface StridedBinding {
  /** The storage holding the bytes. */
  readonly storage: Storage;
  /** The layout, in elements of `dtype`. */
  readonly view: BufferView;
  /** The element type. */
  readonly dtype: Dtype;
}

/**
 * Moves elements of buffers whose storage is not host memory (for example a
 * `GPUBuffer`). A {@linkcode Buffer} on host memory never calls it; a buffer
 * on other memory calls it for every operation that touches elements and
 * throws `UnsupportedOperationError` when none was given.
 *
 * All views passed in were validated against their storage. `dst` and `src`
 * always have the same dtype and shape.
 *
 * @example A backend that records what it was asked to do
 * ```ts
 * import type { BufferBackend, StridedBinding } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * const calls: string[] = [];
 * const backend: BufferBackend = {
 *   name: "log",
 *   copy: (dst: StridedBinding, src: StridedBinding) => { calls.push(`copy ${src.view} -> ${dst.view}`); },
 *   fill: (dst: StridedBinding, value: number) => { calls.push(`fill ${value}`); },
 *   write: (dst: StridedBinding) => { calls.push(`write ${dst.view.length}`); },
 *   read: (src: StridedBinding) => Promise.resolve(new Float32Array(src.view.length)),
 * };
 * backend.fill({} as StridedBinding, 0);
 * assert.deepEqual(calls, ["fill 0"]);
 * ```
 */
export interface BufferBackend {
  /** A name for messages, such as `webgpu`. */
  readonly name: string;
  /**
   * Copies the elements of `src` into `dst`, element for element in
   * row-major logical order (a strided-to-strided copy; `contiguous()` passes
   * a contiguous `dst` at offset 0). Enqueue the work; it need not be done
   * when this returns, but later `read`s must see it.
   *
   * @param dst Destination; never a broadcast view.
   * @param src Source, any view.
   */
  copy(dst: StridedBinding, src: StridedBinding): void;
  /**
   * Sets every element of `dst` to `value`.
   *
   * @param dst Destination; never a broadcast view.
   * @param value The value, already converted for the dtype (0 or 1 for bool).
   */
  fill(dst: StridedBinding, value: number): void;
  /**
   * Uploads `data` (row-major, `dst.view.length` elements) into `dst`.
   *
   * @param dst Destination, contiguous.
   * @param data Host elements of `dst.dtype`'s typed array type.
   */
  write(dst: StridedBinding, data: AnyTypedArray): void;
  /**
   * Downloads the logical elements of `src` in row-major order.
   *
   * @param src Source, any view.
   * @returns A fresh typed array of `src.dtype`.
   */
  read(src: StridedBinding): Promise<AnyTypedArray>;
}
