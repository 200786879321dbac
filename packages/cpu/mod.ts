/**
 * `@allot/cpu`: aligned allocation inside one linear memory.
 *
 * - {@linkcode CpuHeap}: an O(1) TLSF allocator inside one `ArrayBuffer`,
 *   `SharedArrayBuffer` (plain or growable), resizable `ArrayBuffer` or
 *   `WebAssembly.Memory`; 64-byte alignment by default, metadata outside the
 *   managed bytes, exact largest-free-region, opt-in growth.
 * - {@linkcode CpuAllocator}: the core `Allocator` over a heap, with
 *   zero-fill, junk-fill and a {@linkcode MemoryReporter}.
 * - {@linkcode SystemAllocator}: one `ArrayBuffer` per allocation, the
 *   fallback pools take chunks from; {@linkcode HostSegmentSource}: the same
 *   as a core `SegmentSource`.
 *
 * @example Sub-allocate tensors in one WebAssembly memory
 * ```ts
 * import { CpuAllocator, CpuHeap } from "@allot/cpu";
 * import assert from "node:assert/strict";
 *
 * const memory = new WebAssembly.Memory({ initial: 16, maximum: 64 });
 * const heap = new CpuHeap(memory, { maxByteLength: 64 * 65536 });
 * const allocator = new CpuAllocator({ heap });
 * using a = allocator.allocate(4 * 1024);
 * using b = allocator.allocate(4 * 1024);
 * allocator.view(a, Float32Array).fill(1);
 * allocator.copyData(b, a, 4 * 1024);
 * assert.equal(allocator.view(b, Float32Array)[1023], 1);
 * assert.equal(heap.allocatedBytes, 8 * 1024);
 * ```
 *
 * @module
 */

export * from "./heap.ts";
export * from "./cpu_allocator.ts";
export * from "./system_allocator.ts";
export * from "./host_segment_source.ts";
export * from "./memory_reporter.ts";
