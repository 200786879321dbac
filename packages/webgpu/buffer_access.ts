/**
 * Accessors for kernel authors: the `GPUBuffer` behind an allot `Buffer`
 * ({@linkcode gpuBufferOf}, typed, not `unknown`), its byte range as a
 * `GPUBufferBinding` ({@linkcode bindingOf}), and small `UNIFORM` blocks for
 * kernel parameters ({@linkcode createUniformBuffer}).
 *
 * @module
 */

import { _assertAlive } from "./_device_state.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { _bytesOf, _checkDevice, _checkLabel } from "./_validate_gpu.ts";
import {
  describeValue,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import { Buffer, dtypeInfo } from "@allot/storage";
import { _Usage } from "./_flags.ts";
import type { GpuBinding } from "./gpu_binding.ts";

function isGpuBuffer(value: unknown): value is GPUBuffer {
  return value !== null && typeof value === "object" &&
    typeof (value as GPUBuffer).mapAsync === "function";
}

/**
 * The `GPUBuffer` that holds `buffer`'s storage. Many allot buffers share
 * one `GPUBuffer`: bind through {@linkcode bindingOf} or `bindBuffers()`,
 * never the whole `GPUBuffer`.
 *
 * @param buffer A live buffer allocated by a WebGPU allocator.
 * @returns Its `GPUBuffer`.
 * @throws {InvalidArgumentError} When the storage is not in a `GPUBuffer`.
 * @throws {UseAfterFreeError} When the buffer was released.
 *
 * @example
 * ```ts
 * import { GpuBufferBackend, GpuCachingAllocator, gpuBufferOf } from "@allot/webgpu";
 * import { InvalidArgumentError } from "@allot/core";
 * import { Buffer } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * using host = Buffer.zeros("f32", [4]);
 * assert.throws(() => gpuBufferOf(host), InvalidArgumentError); // not on a GPU
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const memory = new GpuCachingAllocator(device);
 *   const gpu = { allocator: memory.asAllocator(), backend: new GpuBufferBackend(device) };
 *   using a = Buffer.zeros("f32", [4], gpu);
 *   assert.ok(gpuBufferOf(a).size >= 16);
 *   device.destroy();
 * }
 * ```
 */
export function gpuBufferOf(buffer: Buffer): GPUBuffer {
  if (!(buffer instanceof Buffer) || !_isRealBuffer(buffer)) {
    throw new InvalidArgumentError(
      `Cannot get the GPUBuffer of ${
        describeValue(buffer)
      }: it is not an @allot/storage Buffer`,
      { name: "buffer", value: buffer, limit: "Buffer" },
    );
  }
  if (buffer.released) {
    throw new UseAfterFreeError(
      "Cannot get the GPUBuffer of a released buffer",
    );
  }
  const memory = buffer.storage.data.memory;
  if (!isGpuBuffer(memory)) {
    throw new InvalidArgumentError(
      `Cannot get the GPUBuffer of storage ${buffer.storageId} on ${buffer.storage.device}: its memory is not a GPUBuffer`,
      { name: "buffer", value: buffer.storageId, limit: "GPUBuffer" },
    );
  }
  return memory;
}

/** A buffer's bind range, with where its first element lies in it. */
export interface BufferBinding extends GpuBinding {
  /**
   * Index of the view's first element in the range, in elements of the
   * dtype (the view's `offset`).
   */
  readonly elementOffset: number;
}

/**
 * The byte range of `buffer`'s storage in its `GPUBuffer`, shaped like a
 * `GPUBufferBinding` (`{ buffer, offset, size }`), and the element offset of
 * its view in that range. The offset is the storage's own, which need not be
 * a multiple of `minStorageBufferOffsetAlignment`: to bind several buffers
 * for one dispatch use `bindBuffers()`, which aligns and checks aliasing.
 *
 * @param buffer A live buffer allocated by a WebGPU allocator.
 * @returns The range and the view's element offset in it.
 * @throws {InvalidArgumentError} When the storage is not in a `GPUBuffer`.
 * @throws {UseAfterFreeError} When the buffer was released.
 *
 * @example
 * ```ts
 * import { bindingOf, GpuBufferBackend, GpuCachingAllocator, gpuBufferOf } from "@allot/webgpu";
 * import { Buffer } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const memory = new GpuCachingAllocator(device);
 *   const gpu = { allocator: memory.asAllocator(), backend: new GpuBufferBackend(device) };
 *   using a = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], gpu);
 *   using tail = a.slice(0, { start: 2 }); // a view: elements 2..5
 *   const binding = bindingOf(tail);
 *   assert.equal(binding.buffer, gpuBufferOf(a));
 *   assert.equal(binding.elementOffset, 2);
 *   device.destroy();
 * }
 * ```
 */
export function bindingOf(buffer: Buffer): BufferBinding {
  const gpu = gpuBufferOf(buffer);
  const data = buffer.storage.data;
  const bytesPerElement = dtypeInfo(buffer.dtype).bytesPerElement;
  // the storage may be larger than its view: bind what the view can reach
  const size = Math.min(data.byteLength, buffer.storage.byteLength);
  return {
    buffer: gpu,
    offset: data.byteOffset,
    size: size - (size % bytesPerElement),
    elementOffset: buffer.offset,
  };
}

/**
 * A `GPUBuffer` with `UNIFORM | COPY_DST` usage holding `data`, for a
 * kernel's parameters (`var<uniform>`): its size is rounded up to 16 bytes
 * as WGSL's uniform layout needs. Update it with `device.queue.writeBuffer`;
 * destroy it when done.
 *
 * @param device The device.
 * @param data The initial bytes (a typed array or `ArrayBuffer`).
 * @param label The buffer's label.
 * @returns The new buffer.
 * @throws {InvalidArgumentError} When `data` is empty or exceeds
 *   `maxUniformBufferBindingSize`, or is not bytes.
 * @throws {DeviceLostError} When the device was lost.
 *
 * @example Parameters of a kernel
 * ```ts
 * import { createUniformBuffer } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const params = createUniformBuffer(device, new Uint32Array([4, 3]), "matmul:params");
 *   assert.equal(params.size, 16);
 *   params.destroy();
 *   device.destroy();
 * }
 * ```
 */
export function createUniformBuffer(
  device: GPUDevice,
  data: ArrayBufferView | ArrayBuffer,
  label = "allot:uniform",
): GPUBuffer {
  _checkDevice(device, "Cannot create a uniform buffer");
  _assertAlive(device, "create a uniform buffer");
  const bytes = _bytesOf(data, "Cannot create a uniform buffer");
  label = _checkLabel(label, "allot:uniform");
  const max = device.limits.maxUniformBufferBindingSize;
  if (bytes.byteLength === 0 || bytes.byteLength > max) {
    throw new InvalidArgumentError(
      `Cannot create a uniform buffer of ${bytes.byteLength} bytes: it must hold 1 to maxUniformBufferBindingSize ${max} bytes`,
      { name: "data", value: bytes.byteLength, limit: max },
    );
  }
  const size = Math.ceil(bytes.byteLength / 16) * 16;
  const buffer = device.createBuffer({
    label,
    size,
    usage: _Usage.UNIFORM | _Usage.COPY_DST,
    mappedAtCreation: true,
  });
  if (buffer.size !== size) {
    // a device that lies about its buffers (was reported as a lost device)
    buffer.destroy();
    throw new InvalidArgumentError(
      `Cannot create a uniform buffer of ${size} bytes: the device made a buffer of ${
        describeValue(buffer.size)
      } bytes`,
      { name: "size", value: buffer.size, limit: size },
    );
  }
  try {
    new Uint8Array(buffer.getMappedRange()).set(bytes);
    buffer.unmap();
  } catch (error) {
    // An invalid buffer: its device is lost (perhaps not yet reported).
    buffer.destroy();
    throw new DeviceLostError(
      `Cannot create a uniform buffer: the device made an invalid buffer (${
        (error as Error)?.message
      }); it is lost or being lost`,
      { reason: "unknown" },
    );
  }
  return buffer;
}

/**
 * Whether `buffer`'s getters work: a look-alike made with
 * `Object.create(Buffer.prototype)`, which `instanceof` accepts, throws a
 * `TypeError` on its private state.
 */
function _isRealBuffer(buffer: Buffer): boolean {
  try {
    return typeof buffer.released === "boolean";
  } catch {
    return false;
  }
}
