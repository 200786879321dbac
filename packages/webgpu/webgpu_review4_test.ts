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
});
