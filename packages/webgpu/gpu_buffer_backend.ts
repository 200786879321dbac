/**
 * {@linkcode GpuBufferBackend}: makes `@allot/storage` `Buffer`s work on GPU
 * storage. View operations stay zero-copy (they never reach the backend);
 * `contiguous()` and `copyFrom()` run the strided copy kernel, `fill()` the
 * fill kernel, `fromData()` uploads and `read()` downloads.
 *
 * @module
 */

import { _bytesOf, _checkDevice, _checkOptions } from "./_validate_gpu.ts";
import { _Usage } from "./_flags.ts";
import {
  type AnyTypedArray,
  type BufferBackend,
  dtypeInfo,
  rowMajorStrides,
  type StridedBinding,
} from "@allot/storage";
import { describeValue, InvalidArgumentError } from "@allot/core";
import { _assertAlive } from "./_device_state.ts";
import { encodeElement, type GpuDtype } from "./dtype.ts";
import type { GpuBinding } from "./gpu_binding.ts";
import { GpuKernels, type StridedLayout } from "./gpu_kernels.ts";
import { GpuStaging } from "./gpu_staging.ts";

/** Options of {@linkcode GpuBufferBackend}. */
export interface GpuBufferBackendOptions {
  /**
   * The kernels to run.
   *
   * @default {GpuKernels.of(device)}
   */
  kernels?: GpuKernels;
  /**
   * The staging pool for downloads.
   *
   * @default {a new GpuStaging on the device}
   */
  staging?: GpuStaging;
}

const TEMP_USAGE = _Usage.STORAGE | _Usage.COPY_SRC |
  _Usage.COPY_DST;

/**
 * The WebGPU {@linkcode BufferBackend} of `@allot/storage`. It reads each
 * storage's `DataPtr` as (GPUBuffer, byte offset, byte length), which is
 * what {@linkcode GpuAllocatorAdapter} hands out.
 *
 * @example A transposed GPU buffer, packed on the GPU and read back
 * ```ts
 * import { GpuBufferBackend, GpuCachingAllocator } from "@allot/webgpu";
 * import { Buffer } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const options = {
 *     allocator: new GpuCachingAllocator(device).asAllocator(),
 *     backend: new GpuBufferBackend(device),
 *   };
 *   using a = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3], ...options });
 *   using t = a.transpose(); // zero-copy
 *   using packed = t.contiguous(); // the strided copy kernel
 *   assert.deepEqual([...await packed.read()], [1, 4, 2, 5, 3, 6]);
 *   device.destroy();
 * }
 * ```
 */
export class GpuBufferBackend implements BufferBackend {
  /** `"webgpu"`. */
  readonly name = "webgpu";
  /** The device. */
  readonly gpuDevice: GPUDevice;
  /** The kernels it runs. */
  readonly kernels: GpuKernels;
  /** The staging pool it downloads through. */
  readonly staging: GpuStaging;

  /**
   * Creates the backend.
   *
   * @param device The device every storage lives on.
   * @param options Kernels and staging pool.
   */
  constructor(device: GPUDevice, options?: GpuBufferBackendOptions) {
    _checkDevice(device, "Cannot make a GpuBufferBackend");
    options = _checkOptions(
      options,
      "options",
      ["kernels", "staging"],
      "GpuBufferBackend",
    );
    const { kernels, staging } = options;
    if (kernels != null && !(kernels instanceof GpuKernels)) {
      throw new InvalidArgumentError(
        `Invalid kernels: must be GpuKernels, received ${
          describeValue(kernels)
        }`,
        { name: "kernels", value: kernels, limit: "GpuKernels" },
      );
    }
    if (staging != null && !(staging instanceof GpuStaging)) {
      throw new InvalidArgumentError(
        `Invalid staging: must be a GpuStaging, received ${
          describeValue(staging)
        }`,
        { name: "staging", value: staging, limit: "GpuStaging" },
      );
    }
    this.gpuDevice = device;
    this.kernels = options.kernels ?? GpuKernels.of(device);
    this.staging = options.staging ?? new GpuStaging(device);
  }

  /**
   * Copies `src`'s elements into `dst` on the GPU. Overlapping views of one
   * buffer are copied through a packed temporary (as `Buffer.copyFrom`
   * does on the host); the same view is left as it is.
   *
   * @param dst Destination view.
   * @param src Source view of the same shape and dtype.
   * @throws {DeviceLostError} When the device was lost.
   */
  copy(dst: StridedBinding, src: StridedBinding): void {
    if (this.#empty(src, "copy") && this.#empty(dst, "copy")) return;
    const s = this.#resolve(src, "copy");
    const d = this.#resolve(dst, "copy");
    if (s.binding.buffer === d.binding.buffer) {
      const size = dtypeInfo(s.dtype).bytesPerElement;
      const sv = src.view, dv = dst.view;
      const sLo = s.binding.offset + sv.minIndex * size;
      const sHi = s.binding.offset + (sv.maxIndex + 1) * size;
      const dLo = d.binding.offset + dv.minIndex * size;
      const dHi = d.binding.offset + (dv.maxIndex + 1) * size;
      if (sLo < dHi && dLo < sHi) {
        // Overlapping views of one buffer (the kernels refuse them): as on
        // the host, the same view is a no-op, any other goes through a
        // packed temporary.
        if (s.binding.offset === d.binding.offset && sv.equals(dv)) return;
        this.#copyThroughTemp(s, d, sv.length * size);
        return;
      }
    }
    this.kernels.copyStrided(s.binding, s.layout, d.binding, d.layout, s.dtype);
  }

  #copyThroughTemp(
    s: { binding: GpuBinding; layout: StridedLayout; dtype: GpuDtype },
    d: { binding: GpuBinding; layout: StridedLayout; dtype: GpuDtype },
    byteLength: number,
  ): void {
    const temp = this.gpuDevice.createBuffer({
      label: "allot:copy-overlap",
      size: Math.ceil(byteLength / 4) * 4,
      usage: TEMP_USAGE,
    });
    try {
      const packed = { buffer: temp, offset: 0, size: byteLength };
      this.kernels.contiguous(s.binding, s.layout, packed, { dtype: s.dtype });
      this.kernels.copyStrided(
        packed,
        {
          shape: s.layout.shape,
          strides: rowMajorStrides(s.layout.shape),
          offset: 0,
        },
        d.binding,
        d.layout,
        d.dtype,
      );
    } finally {
      temp.destroy();
    }
  }

  /**
   * Sets every element of `dst` to `value` on the GPU.
   *
   * @param dst Destination view.
   * @param value The value.
   * @throws {DeviceLostError} When the device was lost.
   */
  fill(dst: StridedBinding, value: number): void {
    if (this.#empty(dst, "fill")) return;
    const d = this.#resolve(dst, "fill");
    const length = dst.view.length;
    if (dst.view.isContiguous) {
      this.kernels.fill(d.binding, value, {
        dtype: d.dtype,
        offset: d.layout.offset,
        length,
      });
      return;
    }
    // A strided destination: broadcast one element into it.
    const one = this.gpuDevice.createBuffer({
      label: "allot:fill-value",
      size: 8,
      usage: TEMP_USAGE,
    });
    try {
      const bytes = new Uint8Array(8);
      bytes.set(encodeElement(d.dtype, value));
      this.gpuDevice.queue.writeBuffer(one, 0, bytes);
      this.kernels.copyStrided(
        { buffer: one, offset: 0, size: 8 },
        {
          shape: d.layout.shape,
          strides: d.layout.shape.map(() => 0),
          offset: 0,
        },
        d.binding,
        d.layout,
        d.dtype,
      );
    } finally {
      one.destroy();
    }
  }

  /**
   * Uploads `data` into the contiguous view `dst` (through
   * `queue.writeBuffer`, which copies the data before returning).
   *
   * @param dst Destination view, contiguous.
   * @param data Row-major elements.
   * @throws {DeviceLostError} When the device was lost.
   */
  write(dst: StridedBinding, data: AnyTypedArray): void {
    const bytes = _bytesOf(data, "Cannot write a GPU buffer");
    const size = dtypeInfo(dst.dtype).bytesPerElement;
    const want = dst.view.length * size;
    if (bytes.byteLength !== want || (want > 0 && !dst.view.isContiguous)) {
      // More bytes than the view would land in the neighbouring ranges of
      // the same GPUBuffer (other allocations).
      throw new InvalidArgumentError(
        `Cannot write ${bytes.byteLength} bytes into a ${
          dst.view.isContiguous ? "contiguous" : "strided"
        } view of ${dst.view.length} ${dst.dtype} elements: it takes exactly ${want} bytes, contiguous`,
        { name: "data", value: bytes.byteLength, limit: want },
      );
    }
    if (this.#empty(dst, "write")) return;
    const d = this.#resolve(dst, "write");
    const byteOffset = d.layout.offset * size;
    const at = d.binding.offset + byteOffset;
    if (at % 4 === 0 && bytes.byteLength % 4 === 0) {
      this.gpuDevice.queue.writeBuffer(
        d.binding.buffer,
        at,
        bytes as Uint8Array<ArrayBuffer>,
      );
      return;
    }
    const temp = this.gpuDevice.createBuffer({
      label: "allot:write",
      size: Math.ceil(bytes.byteLength / 4) * 4,
      usage: TEMP_USAGE,
    });
    try {
      const padded = new Uint8Array(temp.size);
      padded.set(bytes);
      this.gpuDevice.queue.writeBuffer(temp, 0, padded);
      this.kernels.copyBytes(
        { buffer: temp, offset: 0, size: temp.size },
        d.binding,
        {
          dstByteOffset: byteOffset,
          byteLength: bytes.byteLength,
        },
      );
    } finally {
      temp.destroy();
    }
  }

  /**
   * Downloads the logical elements of `src` in row-major order: a
   * contiguous view directly, any other first packed on the GPU.
   *
   * @param src Source view.
   * @returns A new typed array of `src.dtype`.
   * @throws {DeviceLostError} When the device was lost.
   */
  async read(src: StridedBinding): Promise<AnyTypedArray> {
    if (this.#empty(src, "read")) {
      return new (dtypeInfo(src.dtype).arrayType)(0);
    }
    const s = this.#resolve(src, "read");
    const info = dtypeInfo(src.dtype);
    const size = info.bytesPerElement;
    const length = src.view.length;
    let bytes: Uint8Array<ArrayBuffer>;
    if (length === 0) {
      bytes = new Uint8Array(0);
    } else if (src.view.isContiguous) {
      bytes = await this.staging.download(s.binding, {
        byteOffset: s.layout.offset * size,
        byteLength: length * size,
      });
    } else {
      const temp = this.gpuDevice.createBuffer({
        label: "allot:read",
        size: Math.ceil((length * size) / 4) * 4,
        usage: TEMP_USAGE,
      });
      try {
        const packed = { buffer: temp, offset: 0, size: length * size };
        this.kernels.contiguous(s.binding, s.layout, packed, {
          dtype: s.dtype,
        });
        bytes = await this.staging.download(packed);
      } finally {
        temp.destroy();
      }
    }
    // A kernel that failed on the device fails the read, not silently.
    await this.kernels.flush();
    return new info.arrayType(bytes.buffer, 0, length);
  }

  /**
   * Whether `sb` has no elements: every operation on it is a no-op, like on
   * the host (a zero-byte storage may have no GPUBuffer at all). The device
   * must still be alive.
   */
  #empty(sb: StridedBinding, what: string): boolean {
    if (sb.view.length !== 0) return false;
    _assertAlive(this.gpuDevice, `${what} a GPU buffer`);
    return true;
  }

  #resolve(
    sb: StridedBinding,
    what: string,
  ): { binding: GpuBinding; layout: StridedLayout; dtype: GpuDtype } {
    _assertAlive(this.gpuDevice, `${what} a GPU buffer`);
    const data = sb.storage.data;
    const memory = data.memory as GPUBuffer | null;
    if (
      memory === null || typeof memory !== "object" ||
      typeof (memory as GPUBuffer).mapAsync !== "function"
    ) {
      throw new InvalidArgumentError(
        `Cannot ${what} storage ${sb.storage.id}: its memory is not a GPUBuffer`,
        { name: "storage", value: sb.storage.id, limit: "GPUBuffer" },
      );
    }
    const view = sb.view;
    return {
      binding: {
        buffer: memory,
        offset: data.byteOffset,
        size: data.byteLength,
      },
      layout: { shape: view.shape, strides: view.strides, offset: view.offset },
      dtype: sb.dtype as GpuDtype,
    };
  }
}
