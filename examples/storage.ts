/**
 * `@allot/storage` at work: a batch of images lives in one WebAssembly
 * memory; views (transpose, slice, broadcast) copy nothing; `contiguous()`
 * packs a view when a kernel needs dense data; a managed pool recycles
 * scratch buffers; a `tidy()` scope releases the views of a chain; a
 * type-erased list holds buffers of mixed dtypes.
 *
 * Run: `deno run -A examples/storage.ts`
 *
 * @module
 */

import { CpuAllocator, CpuHeap } from "@allot/cpu";
import {
  AllocationStrategy,
  Buffer,
  DynBuffer,
  ManagedBufferPool,
  tidy,
} from "@allot/storage";

// One heap over a WebAssembly.Memory: every storage is a block inside it.
const memory = new WebAssembly.Memory({ initial: 64, maximum: 256 });
const allocator = new CpuAllocator({
  heap: new CpuHeap(memory, { maxByteLength: 256 * 65536 }),
});

// 4 images of 32×48 pixels, 3 channels, stored NHWC.
const pixels = Float32Array.from(
  { length: 4 * 32 * 48 * 3 },
  (_, i) => i % 251,
);
using nhwc = Buffer.fromData("f32", pixels, {
  shape: [4, 32, 48, 3],
  allocator,
});

// NHWC → NCHW is a zero-copy permute; only contiguous() moves bytes.
using nchwView = nhwc.permute([0, 3, 1, 2]);
console.log(`view   ${nchwView}`);
console.log(
  `shares storage with the input: ${nchwView.sharesStorageWith(nhwc)}`,
);
using nchw = nchwView.contiguous();
console.log(`packed ${nchw}`);
console.log(
  `pixel (n=1, c=2, y=5, x=7): ${nchw.get([1, 2, 5, 7])} = ${
    nhwc.get([1, 5, 7, 2])
  }`,
);

// Every other row of image 0, mirrored: still no copy.
using image0 = nhwc.slice(0, { start: 0, stop: 1 });
using mirrored = image0.slice(2, { step: -1 });
using everyOtherRow = mirrored.slice(1, { step: 2 });
console.log(`stepped view ${everyOtherRow.view}`);

// The same chain in a tidy() scope: the intermediate views are released when
// it returns; only the packed result lives on.
const before = nhwc.storage.useCount;
using thumbnail = tidy(() =>
  nhwc.slice(0, { start: 0, stop: 1 }).slice(2, { step: -1 })
    .slice(1, { step: 2 }).contiguous()
);
console.log(
  `tidy: packed ${thumbnail.shape}, views of the input left behind: ${
    nhwc.storage.useCount - before
  }`,
);

// Per-channel means, broadcast to the image shape without copying.
using means = Buffer.fromData("f32", [125, 124, 126], { shape: [3] });
using meansFull = means.broadcastTo([4, 32, 48, 3]);
console.log(
  `broadcast strides ${meansFull.strides}, storage bytes ${meansFull.storage.byteLength}`,
);

// Scratch buffers from a managed pool: released buffers come back.
using pool = new ManagedBufferPool(allocator, {
  strategy: AllocationStrategy.pooled(),
});
for (let step = 0; step < 3; step++) {
  using scratch = pool.alloc("f32", [32, 48]);
  scratch.fill(step);
}
const stats = pool.stats();
console.log(
  `pool: allocations=${stats.allocations}, reuses=${stats.reuses}, freeBytes=${stats.freeBytes}`,
);

// A list of buffers of mixed dtypes, downcast with a check.
const outputs = [
  new DynBuffer(nchw.clone()),
  new DynBuffer(Buffer.filled("u8", [4], { value: 1 })),
];
console.log(
  `outputs: ${outputs.map((b) => `${b.dtype}[${b.shape}]`).join(", ")}`,
);
using mask = outputs[1].downcast("u8");
console.log(`mask ${[...mask.toData()]}`);
for (const output of outputs) output.release();
