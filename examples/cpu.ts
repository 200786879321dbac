/**
 * `@allot/cpu` in a few lines: tensors inside one WebAssembly memory, an
 * allocator with a memory reporter, and what the heap looks like afterwards.
 *
 * Run: `deno run -A examples/cpu.ts`
 *
 * @module
 */

import { CpuAllocator, CpuHeap, ProfiledMemoryReporter } from "@allot/cpu";

// 1. A heap inside a WebAssembly.Memory, so WASM kernels work in place.
const memory = new WebAssembly.Memory({ initial: 16, maximum: 256 });
const heap = new CpuHeap(memory, { maxByteLength: 256 * 65536 });
const a = heap.alloc(4 * 256 * 256); // a 256x256 f32 matrix
const b = heap.alloc(4 * 256 * 256);
heap.view(a, Float32Array).fill(1);
heap.view(b, Float32Array).fill(2);
console.log(
  `matrices at byte offsets ${a} and ${b} (64-byte aligned: ${
    a % 64 === 0 && b % 64 === 0
  })`,
);

// Growth replaces a WebAssembly.Memory's buffer: views are made again.
const before = heap.generation;
const big = heap.alloc(2 * 1024 * 1024);
console.log(
  `grew to ${heap.byteLength} bytes, generation ${before} -> ${heap.generation}; a[0] = ${
    heap.view(a, Float32Array)[0]
  }`,
);
heap.free(big);
heap.free(a);
heap.free(b);
console.log(
  `all freed: ${heap.freeRegionCount} free region of ${heap.largestFreeBytes} bytes`,
);

// 2. The core Allocator interface, with PyTorch's profiled reporter.
const reporter = new ProfiledMemoryReporter({
  log: (line) => console.log(`  reporter: ${line}`),
});
const allocator = new CpuAllocator({ byteLength: 1 << 20, reporter });
{
  using weights = allocator.allocate(64 * 1024);
  using activations = allocator.allocate(256 * 1024);
  allocator.view(weights, Float32Array).fill(0.5);
  console.log(
    `in use: ${allocator.allocatedBytes} bytes; ${activations.device} pointer at ${activations.byteOffset}`,
  );
}
console.log(`peak ${reporter.bytes.peak} bytes, now ${reporter.bytes.current}`);
