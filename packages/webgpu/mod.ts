/**
 * `@allot/webgpu`: GPU memory for allot.
 *
 * @module
 */

export * from "./device_lost_error.ts";
export * from "./gpu_binding.ts";
export * from "./gpu_segment_source.ts";
export * from "./queue_stream.ts";
