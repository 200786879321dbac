/**
 * `@allot/storage`: storage, strided views and typed buffers.
 *
 * - {@linkcode Storage}: the reference-counted owner of one allocation
 *   (PyTorch's `StorageImpl`).
 * - {@linkcode BufferView}: a layout (shape, strides, offset, length) with
 *   zero-copy reshape, transpose, permute, slice, squeeze, unsqueeze and
 *   broadcast.
 * - {@linkcode Buffer}: a typed view over shared storage, with fast
 *   `contiguous()`, `toData()` and `copyFrom()`; {@linkcode DynBuffer} erases
 *   its dtype.
 * - {@linkcode tidy} and {@linkcode keep}: scopes that release the buffers
 *   made inside them (chains of view operations without a handle each).
 * - {@linkcode BufferPool} and {@linkcode ManagedBufferPool}: reuse of
 *   allocations with the `exact`, `padded` and `pooled` strategies.
 *
 * @example Transpose without copying, then pack
 * ```ts
 * import { Buffer } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * using m = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
 * using t = m.transpose();
 * assert.deepEqual(t.shape, [3, 2]);
 * assert.equal(t.storageId, m.storageId);
 * using packed = t.contiguous();
 * assert.deepEqual([...packed.toData()], [1, 4, 2, 5, 3, 6]);
 * ```
 *
 * @module
 */

export { AllocationStrategy } from "./allocation_strategy.ts";
export type { PooledStrategyOptions } from "./allocation_strategy.ts";
export { Buffer } from "./buffer.ts";
/**
 * `Buffer` under a name that does not shadow Node's global `Buffer`: the
 * same class (`TensorBuffer === Buffer`).
 */
export { Buffer as TensorBuffer } from "./buffer.ts";
export { ArrayBufferAllocator } from "./_default_allocator.ts";
export type {
  BufferFromStorageOptions,
  BufferOptions,
  FromDataOptions,
} from "./buffer.ts";
export type { BufferBackend, StridedBinding } from "./buffer_backend.ts";
export {
  alignedStorageLength,
  alignedStrides,
  broadcastShapes,
  BufferView,
  columnMajorStrides,
  MAX_RANK,
  rowMajorStrides,
} from "./buffer_view.ts";
export type { BufferViewOptions, Shape, SliceOptions } from "./buffer_view.ts";
export { dtypeInfo, dtypeOf, supportedDtypes } from "./dtype.ts";
export type {
  AnyTypedArray,
  Dtype,
  DtypeArrayMap,
  DtypeInfo,
  Float16ArrayType,
  TypedArrayConstructorOf,
  TypedArrayOf,
} from "./dtype.ts";
export { isBufferOwner, keep, ownedBuffers, tidy } from "./tidy.ts";
export type { BufferOwner, TidyHandle } from "./tidy.ts";
export { BufferPool } from "./buffer_pool.ts";
export type { BufferPoolOptions, PoolStats } from "./buffer_pool.ts";
export { DynBuffer } from "./dyn_buffer.ts";
export { ShapeError } from "./errors.ts";
export { ManagedBufferPool } from "./managed_buffer_pool.ts";
export type { ManagedBufferPoolOptions } from "./managed_buffer_pool.ts";
export type { ShapeErrorDetails } from "./errors.ts";
export { Storage } from "./storage.ts";
/**
 * `Storage` under a name that does not shadow the DOM's `Storage`
 * (`localStorage`'s type): the same class (`TensorStorage === Storage`).
 */
export { Storage as TensorStorage } from "./storage.ts";
export type { StorageOptions } from "./storage.ts";
