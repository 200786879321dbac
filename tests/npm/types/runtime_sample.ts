// A runtime-style sample for the strict-types check of the npm build: what a
// tensor runtime writes against allot's packed types under `tsc --strict`
// (a tensor class over `Buffer`, a CPU kernel, `tidy`, and `using` of every
// handle class a runtime touches). Compiled only, never run.
import { CpuAllocator } from "@allot/cpu";
import { type DataPtr, type Device, MockSegmentSource } from "@allot/core";
import { CachingAllocator } from "@allot/caching";
import {
  Buffer,
  DynBuffer,
  keep,
  ManagedBufferPool,
  tidy,
} from "@allot/storage";
import type { Dtype, TypedArrayOf } from "@allot/storage";

/** A tensor that owns one `Buffer`. */
export class Tensor<D extends Dtype = "f32"> {
  constructor(readonly buffer: Buffer<D>) {}

  get shape(): number[] {
    return this.buffer.shape;
  }

  data(): TypedArrayOf<D> {
    return this.buffer.toData();
  }

  [Symbol.dispose](): void {
    this.buffer.release();
  }
}

/** A CPU kernel: `out = a + b` over dense f32 buffers. */
export function add(a: Tensor, b: Tensor): Tensor {
  const x = a.data();
  const y = b.data();
  const out = new Float32Array(x.length);
  for (let i = 0; i < out.length; i++) out[i] = x[i] + y[i];
  return new Tensor(Buffer.fromData("f32", out, { shape: a.shape }));
}

using a = new Tensor(Buffer.fromData("f32", [1, 2, 3, 4], { shape: [2, 2] }));
using b = new Tensor(Buffer.filled("f32", [2, 2], { value: 1 }));
using c = add(a, b);
const sum: number = c.data().reduce((s, v) => s + v, 0);

// `tidy` keeps what it returns; `keep` marks survivors.
using kept = tidy(() => {
  const t = a.buffer.transpose();
  keep(t);
  return t.contiguous();
});
kept.release();

// Every disposable handle class works with `using`.
const allocator = new CpuAllocator();
using ptr: DataPtr = allocator.allocate(64);
const caching = new CachingAllocator(new MockSegmentSource());
using cached = caching.allocate(128);
using pool = new ManagedBufferPool(allocator);
using dyn = new DynBuffer(Buffer.zeros("i32", [3]));
const device: Device = ptr.device;
console.log(sum, device.toString(), cached.byteLength, pool.closed, dyn.dtype);
