/**
 * {@linkcode GpuAllocatorAdapter}: a GPU pooling allocator behind core's
 * `Allocator` interface, so `@allot/storage` can put `Storage` on GPU memory.
 *
 * @module
 */

import {
  AllocatorBase,
  checkCopyArguments,
  ContractViolationError,
  DataPtr,
  type Deleter,
  describeValue,
  type Device,
  InvalidArgumentError,
  validateByteLength,
} from "@allot/core";
import { GpuAllocation } from "./gpu_allocation.ts";
import { GpuKernels } from "./gpu_kernels.ts";

/** What {@linkcode GpuAllocatorAdapter} needs from a GPU allocator. */
export interface GpuAllocationSource {
  /** The allot device. */
  readonly device: Device;
  /** The WebGPU device. */
  readonly gpuDevice: GPUDevice;
  /**
   * Allocates a range.
   *
   * @param byteLength Bytes.
   * @returns The owning handle.
   */
  allocate(byteLength: number): GpuAllocation;
}

const releaseAllocation: Deleter<GpuAllocation | null> = (a) => a?.release();

/**
 * Serves core's `Allocator` from a GPU allocator: each `DataPtr` has the
 * `GPUBuffer` as its memory, the range's offset as its byte offset, and the
 * {@linkcode GpuAllocation} as its context; releasing the pointer releases
 * the range. Zero-byte requests give a pointer with `null` memory that owns
 * nothing. `copyData` runs on the GPU.
 *
 * @example Storage on GPU memory
 * ```ts
 * import { GpuCachingAllocator } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const allocator = new GpuCachingAllocator(device).asAllocator();
 *   using ptr = allocator.allocate(64);
 *   assert.ok(ptr.memory instanceof GPUBuffer);
 *   assert.equal(ptr.byteLength, 64);
 *   device.destroy();
 * }
 * ```
 */
export class GpuAllocatorAdapter
  extends AllocatorBase<GPUBuffer | null, GpuAllocation | null> {
  /** The allocator behind the interface. */
  readonly source: GpuAllocationSource;

  /**
   * Wraps a GPU allocator.
   *
   * @param source The allocator.
   */
  constructor(source: GpuAllocationSource) {
    super();
    if (
      typeof source !== "object" || source === null ||
      typeof source.allocate !== "function"
    ) {
      throw new InvalidArgumentError(
        `Cannot make a GpuAllocatorAdapter: source must be a GPU allocator, received ${
          describeValue(source)
        }`,
        { name: "source", value: source, limit: "GpuAllocationSource" },
      );
    }
    this.source = source;
  }

  /** The device served. */
  get device(): Device {
    return this.source.device;
  }

  /**
   * Allocates `byteLength` bytes of GPU memory.
   *
   * @param byteLength Bytes.
   * @returns The owning pointer.
   * @throws {InvalidArgumentError} For a bad size.
   * @throws {DeviceLostError} When the device was lost.
   */
  allocate(
    byteLength: number,
  ): DataPtr<GPUBuffer | null, GpuAllocation | null> {
    validateByteLength(byteLength);
    if (byteLength === 0) {
      return new DataPtr<GPUBuffer | null, GpuAllocation | null>(
        null,
        0,
        0,
        this.device,
      );
    }
    const allocation = this.source.allocate(byteLength);
    if (
      !(allocation instanceof GpuAllocation) || allocation.released ||
      allocation.size < byteLength
    ) {
      this.#refuse(allocation, byteLength);
    }
    return new DataPtr<GPUBuffer | null, GpuAllocation | null>(
      allocation.buffer,
      allocation.offset,
      byteLength,
      this.device,
      { context: allocation, deleter: releaseAllocation },
    );
  }

  /** A source that returned junk, a released or a short range. */
  #refuse(allocation: unknown, byteLength: number): never {
    const live = allocation instanceof GpuAllocation && !allocation.released;
    if (live) {
      try {
        allocation.release();
      } catch {
        // the contract is already broken; the refusal below says so
      }
    }
    throw new ContractViolationError(
      `Cannot allocate ${byteLength} bytes: the source returned ${
        live
          ? `${allocation.size} bytes`
          : allocation instanceof GpuAllocation
          ? "a released allocation"
          : `${describeValue(allocation)}, not a GpuAllocation`
      }`,
    );
  }

  /**
   * The deleter of `rawAllocate` contexts.
   *
   * @returns A deleter that releases the allocation.
   */
  override rawDeleter(): Deleter<GpuAllocation | null> {
    return releaseAllocation;
  }

  /**
   * Copies `byteLength` bytes on the GPU.
   *
   * @param dest Destination pointer.
   * @param src Source pointer.
   * @param byteLength Bytes.
   * @throws {InvalidArgumentError} For a length beyond either pointer.
   * @throws {UseAfterFreeError} When either pointer was released.
   */
  override copyData(
    dest: DataPtr<GPUBuffer | null, GpuAllocation | null>,
    src: DataPtr<GPUBuffer | null, GpuAllocation | null>,
    byteLength: number,
  ): void {
    // a brand check: `{}` with 0 bytes was accepted
    checkCopyArguments(dest, src, byteLength);
    if (byteLength === 0) return;
    GpuKernels.of(this.source.gpuDevice).copyBytes(
      { buffer: src.memory!, offset: src.byteOffset, size: src.byteLength },
      { buffer: dest.memory!, offset: dest.byteOffset, size: dest.byteLength },
      { byteLength },
    );
  }
}
