/**
 * `@allot/webgpu`: GPU memory for allot on any WebGPU implementation. It
 * takes a `GPUDevice` from the caller and never looks one up.
 *
 * - {@linkcode GpuSegmentSource}: the raw allocator (one labelled storage
 *   buffer per segment, within the device's limits).
 * - {@linkcode GpuCachingAllocator} and {@linkcode GpuWatermarkAllocator}:
 *   `@allot/caching` and `@allot/watermark` on it, with the queue as the
 *   stream ({@linkcode QueueStream}); they hand out
 *   {@linkcode GpuAllocation}s, which are bind group resources as they are.
 * - {@linkcode GpuStaging}: uploads and downloads through a bounded pool of
 *   mappable staging buffers.
 * - {@linkcode GpuKernels}: WGSL strided-to-contiguous and strided-to-strided
 *   copies, byte copies at any offsets, fill; pipelines cached per device.
 * - {@linkcode GpuBufferBackend}: `@allot/storage` `Buffer`s on GPU memory.
 * - {@linkcode bindBuffers}: bind group entries for a kernel over allot
 *   buffers that WebGPU accepts (aliasing rules checked, typed
 *   {@linkcode BindingAliasError}); {@linkcode gpuBufferOf},
 *   {@linkcode bindingOf}, {@linkcode createUniformBuffer} for kernel authors.
 * - {@linkcode DeviceLostError}: what every handle throws once its device is
 *   lost.
 *
 * Types of sibling packages that appear in signatures here (`Allocator`,
 * `CachedBlock`, `Dtype`, ...) are documented and exported by those packages:
 * import them from `@allot/core`, `@allot/caching`, `@allot/storage` and
 * `@allot/watermark`.
 *
 * @example Tensors on the GPU: zero-copy views, packed by a kernel
 * ```ts
 * import { GpuBufferBackend, GpuCachingAllocator } from "@allot/webgpu";
 * import { Buffer } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const memory = new GpuCachingAllocator(device);
 *   const gpu = { allocator: memory.asAllocator(), backend: new GpuBufferBackend(device) };
 *   using a = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3], ...gpu });
 *   using column = a.slice(1, { start: 1, stop: 2 }); // a view: no copy
 *   using packed = column.contiguous(); // the strided copy kernel
 *   assert.deepEqual([...await packed.read()], [2, 5]);
 *   // two GPUBuffers so far, each of just its tensor's size (nothing held
 *   // was free at either miss); later tensors reuse them or are carved
 *   // from freed ones
 *   assert.equal(memory.source.allocationCount, 2);
 *   device.destroy();
 * }
 * ```
 *
 * @module
 */

export * from "./buffer_access.ts";
export * from "./device_lost_error.ts";
export * from "./dtype.ts";
export * from "./gpu_binding.ts";
export * from "./gpu_kernels.ts";
export * from "./device_budget.ts";
export * from "./gpu_segment_source.ts";
export * from "./gpu_staging.ts";
export * from "./gpu_staging_error.ts";
export * from "./kernel.ts";
export * from "./kernel_bindings.ts";
export * from "./queue_stream.ts";
export * from "./gpu_allocation.ts";
export * from "./gpu_allocator_adapter.ts";
export * from "./gpu_caching_allocator.ts";
export * from "./gpu_planned_allocator.ts";
export * from "./gpu_watermark_allocator.ts";
export * from "./gpu_buffer_backend.ts";
