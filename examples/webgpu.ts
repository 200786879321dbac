/**
 * `@allot/webgpu` in one small program: GPU tensors from a caching allocator,
 * zero-copy views packed by a WGSL kernel, a freed block waiting for the
 * queue, staging downloads, and device loss turning every handle into a
 * clear error.
 *
 * Run: `deno run -A examples/webgpu.ts`
 *
 * @module
 */

import { Buffer } from "@allot/storage";
import {
  DeviceLostError,
  GpuBufferBackend,
  GpuCachingAllocator,
  GpuKernels,
  GpuStaging,
} from "@allot/webgpu";

const adapter = await navigator.gpu?.requestAdapter();
if (!adapter) {
  console.log("No WebGPU adapter in this runtime: nothing to show");
  Deno.exit(0);
}
const device = await adapter.requestDevice({ label: "example" });
console.log(`adapter: ${adapter.info.description || adapter.info.vendor}`);

// 1. Memory: one caching allocator over GPUBuffers, the queue as its stream.
const memory = new GpuCachingAllocator(device);
const gpu = {
  allocator: memory.asAllocator(),
  backend: new GpuBufferBackend(device),
};

// 2. A 3x4 matrix on the GPU; its transpose is a view (no copy, no kernel).
using matrix = Buffer.fromData(
  "f32",
  Array.from({ length: 12 }, (_, i) => i),
  { shape: [3, 4], ...gpu },
);
using transposed = matrix.transpose();
console.log(
  `transpose: shape [${transposed.shape}], strides [${transposed.strides}], ` +
    `shares storage: ${transposed.sharesStorageWith(matrix)}`,
);

// 3. contiguous() runs the strided-to-contiguous kernel on the GPU.
using packed = transposed.contiguous();
console.log(`packed on the GPU: [${[...await packed.read()]}]`);

// 4. Byte copies at offsets copyBufferToBuffer refuses, and fills.
const kernels = GpuKernels.of(device);
const a = memory.allocate(64);
const b = memory.allocate(64);
const staging = new GpuStaging(device);
await staging.upload(
  a,
  new TextEncoder().encode("allot moves bytes on the GPU"),
);
kernels.fill(b, 0x2e, { dtype: "u8" }); // "."
kernels.copyBytes(a, b, { srcByteOffset: 6, dstByteOffset: 3, byteLength: 11 });
const text = new TextDecoder().decode(
  await staging.download(b, { byteLength: 20 }),
);
console.log(`byte copy at odd offsets: "${text}"`);

// 5. A freed block comes back only after the queue finished the work before.
const where = a.offset;
a.release();
using c = memory.allocate(64);
console.log(
  `reused before the fence: ${c.buffer === b.buffer && c.offset === where}`,
);
await memory.synchronize();
using d = memory.allocate(64);
console.log(`reused after the fence:  ${d.offset === where}`);
b.release();

const stats = memory.memoryStats();
console.log(
  `GPUBuffers created: ${memory.source.allocationCount}, reserved: ${stats.reservedBytes.all.current} bytes, allocated: ${stats.allocatedBytes.all.current} bytes`,
);

// 6. Device loss: handles throw a typed error, releases stay quiet.
device.destroy();
await device.lost;
await Promise.resolve();
try {
  await packed.read();
} catch (error) {
  console.log(
    `after loss: ${error instanceof DeviceLostError}: ${
      (error as Error).message
    }`,
  );
}
