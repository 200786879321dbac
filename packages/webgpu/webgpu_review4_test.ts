/**
 * Fourth outside-in review of `@allot/webgpu`: option bags of the kernels,
 * the staging pool and the helpers. A misspelt key did nothing, silently:
 * `fill(dst, 1, { dtype: "f32", count: 2 })` filled the whole binding,
 * `copyBytes(src, dst, { length: 4 })` copied every byte that fits,
 * `contiguous(..., { dtype, dstoffset: 1 })` wrote at element 0. Each is
 * refused now, naming the key and the accepted ones, dispatching nothing
 * and writing nothing.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import {
  bindBuffers,
  deviceBudget,
  GpuBufferBackend,
  GpuKernels,
  GpuStaging,
  GpuWatermarkAllocator,
} from "./mod.ts";
import { dtypeByteSize, type GpuDtype } from "./dtype.ts";
import { sharedDevice, skip } from "./_test_device.ts";

const USAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
  GPUBufferUsage.COPY_DST;

function isKeyError(key: string): (e: unknown) => boolean {
  return (e: unknown) =>
    e instanceof InvalidArgumentError && e.message.includes(`"${key}"`) &&
    Array.isArray(e.limit);
}

describe("webgpu fourth review", { skip }, () => {
  it("GpuKernels.fill(), copyBytes(), contiguous() and copyStrided() refuse unknown option keys, writing nothing", async () => {
    const device = await sharedDevice();
    const kernels = new GpuKernels(device);
    const staging = new GpuStaging(device);
    const buffer = device.createBuffer({ size: 64, usage: USAGE });
    const initial = new Uint8Array(64).map((_, i) => i + 1);
    device.queue.writeBuffer(buffer, 0, initial);
    const lo = { buffer, offset: 0, size: 32 };
    const hi = { buffer, offset: 32, size: 32 };
    const before = kernels.dispatchCount;
    assert.throws(
      () => kernels.fill(lo, 1, { dtype: "f32", count: 2 } as never),
      isKeyError("count"),
    );
    assert.throws(
      () => kernels.copyBytes(lo, hi, { length: 4 } as never),
      isKeyError("length"),
    );
    assert.throws(
      () =>
        kernels.contiguous(lo, { shape: [2], strides: [2], offset: 0 }, hi, {
          dtype: "f32",
          dstoffset: 1,
        } as never),
      isKeyError("dstoffset"),
    );
    assert.equal(kernels.dispatchCount, before);
    await kernels.flush();
    assert.deepEqual(
      await staging.download({ buffer, offset: 0, size: 64 }),
      initial,
    );
    // the accepted keys still work
    kernels.fill(lo, 0, { dtype: "u8", offset: 4, length: 4 });
    const got = await staging.download({ buffer, offset: 0, size: 64 });
    assert.deepEqual([...got.subarray(0, 9)], [1, 2, 3, 4, 0, 0, 0, 0, 9]);
    staging.release();
    buffer.destroy();
  });

  it("GpuStaging.upload() and download() refuse unknown option keys, moving nothing", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device);
    const buffer = device.createBuffer({ size: 16, usage: USAGE });
    const binding = { buffer, offset: 0, size: 16 };
    await assert.rejects(
      staging.upload(binding, new Uint8Array([9, 9]), { offset: 8 } as never),
      isKeyError("offset"),
    );
    await assert.rejects(
      staging.download(binding, { length: 4 } as never),
      isKeyError("length"),
    );
    assert.deepEqual(
      [...await staging.download(binding)],
      new Array(16).fill(0),
    );
    staging.release();
    buffer.destroy();
  });

  it("constructors and helpers refuse unknown option keys: GpuKernels, GpuStaging, GpuBufferBackend, deviceBudget, bindBuffers, GpuWatermarkAllocator.allocate()", async () => {
    const device = await sharedDevice();
    assert.throws(
      () => new GpuKernels(device, { maxBindingBytes: 8 } as never),
      isKeyError("maxBindingBytes"),
    );
    assert.throws(
      () => new GpuStaging(device, { maxStaging: 1 } as never),
      isKeyError("maxStaging"),
    );
    assert.throws(
      () => new GpuBufferBackend(device, { kernel: undefined } as never),
      isKeyError("kernel"),
    );
    assert.throws(
      () =>
        deviceBudget(device, {
          hostMemoryBytes: 1 << 30,
          hostshare: 0.2,
        } as never),
      isKeyError("hostshare"),
    );
    const buffer = device.createBuffer({ size: 16, usage: USAGE });
    assert.throws(
      () =>
        bindBuffers(device, [{
          name: "a",
          buffer: { buffer, offset: 0, size: 16 },
          access: "read",
        }], { alias: "refuse" } as never),
      isKeyError("alias"),
    );
    buffer.destroy();
    const watermark = new GpuWatermarkAllocator(device);
    assert.throws(
      () => watermark.allocate(64, { pol: "shared" } as never),
      isKeyError("pol"),
    );
    assert.equal(watermark.stats().allocatedBytes.current, 0);
    watermark.allocate(64, { pool: "shared" }).release();
  });

  it("views whose bound range is the binding limit, one element under or over it, at odd binding offsets, copy byte for byte (split or not)", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device);
    const limit = 1024;
    const kernels = new GpuKernels(device, { maxBindingByteLength: limit });
    const dtypes: GpuDtype[] = ["f32", "u8", "f16", "f64"];
    let split = 0;
    for (const dtype of dtypes) {
      const size = dtypeByteSize(dtype);
      for (const srcAt of [0, 8, 256 + 8, 512 - size]) {
        for (const delta of [-1, 0, 1]) {
          // a transposed [rows, cols] view spanning limit + delta elements' bytes
          const elements = limit / size + delta;
          const cols = 4, rows = Math.floor(elements / cols);
          const used = rows * cols * size;
          const srcBytes = Math.ceil((srcAt + used) / 4) * 4 + 16;
          const a = device.createBuffer({ size: srcBytes, usage: USAGE });
          const b = device.createBuffer({
            size: used + 256 + 32,
            usage: USAGE,
          });
          const init = new Uint8Array(srcBytes).map((_, i) =>
            (i * 7 + 3) & 0xff
          );
          device.queue.writeBuffer(a, 0, init);
          const before = kernels.dispatchCount;
          kernels.contiguous(
            { buffer: a, offset: srcAt, size: used },
            { shape: [cols, rows], strides: [1, cols], offset: 0 },
            { buffer: b, offset: 256 + size * 2, size: used },
            { dtype },
          );
          if (kernels.dispatchCount - before > 1) split++;
          const got = await staging.download({
            buffer: b,
            offset: 256 + size * 2,
            size: used,
          });
          const want = new Uint8Array(used);
          let k = 0;
          for (let c = 0; c < cols; c++) {
            for (let r = 0; r < rows; r++) {
              const from = srcAt + (r * cols + c) * size;
              want.set(init.subarray(from, from + size), k * size);
              k++;
            }
          }
          assert.deepEqual(got, want, `${dtype} at ${srcAt}, delta ${delta}`);
          a.destroy();
          b.destroy();
        }
      }
    }
    await kernels.flush();
    staging.release();
    assert.ok(split > 0, "some views were split");
  });
});
