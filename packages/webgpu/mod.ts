/**
 * `@allot/webgpu`: GPU memory for allot.
 *
 * @module
 */

export * from "./device_lost_error.ts";
export * from "./dtype.ts";
export * from "./gpu_binding.ts";
export * from "./gpu_kernels.ts";
export * from "./gpu_segment_source.ts";
export * from "./gpu_staging.ts";
export * from "./kernel.ts";
export * from "./queue_stream.ts";
export * from "./gpu_allocation.ts";
export * from "./gpu_allocator_adapter.ts";
export * from "./gpu_caching_allocator.ts";
export * from "./gpu_watermark_allocator.ts";
export * from "./gpu_buffer_backend.ts";
