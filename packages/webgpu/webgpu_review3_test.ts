/**
 * Third outside-in review of `@allot/webgpu` outside the pools: strided
 * copies into destinations whose elements alias through strides that are
 * not 0, a `mapAsync` that rejects under a download, and the temporary
 * buffers a download or an unaligned transfer makes beside the staging
 * pool.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { AllotError, InvalidArgumentError } from "@allot/core";
import { GpuKernelError, GpuKernels } from "./gpu_kernels.ts";
import { Buffer } from "@allot/storage";
import { bindingOf, gpuBufferOf, GpuStaging, GpuStagingError } from "./mod.ts";
import { newDevice, sharedDevice, skip } from "./_test_device.ts";

const USAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
  GPUBufferUsage.COPY_DST;

/**
 * A device that forwards to `real` but whose mappable buffers reject
 * `mapAsync` with `error` (a driver that fails the map).
 */
function failingMaps(real: GPUDevice, error: unknown): GPUDevice {
  return {
    label: "failing-maps",
    limits: real.limits,
    queue: real.queue,
    lost: real.lost,
    features: real.features,
    pushErrorScope: (f: GPUErrorFilter) => real.pushErrorScope(f),
    popErrorScope: () => real.popErrorScope(),
    createCommandEncoder: (d?: GPUCommandEncoderDescriptor) =>
      real.createCommandEncoder(d),
    createBuffer(d: GPUBufferDescriptor): GPUBuffer {
      const buffer = real.createBuffer(d);
      if ((d.usage & GPUBufferUsage.MAP_READ) !== 0) {
        Object.defineProperty(buffer, "mapAsync", {
          value: () => Promise.reject(error),
        });
      }
      return buffer;
    },
    destroy: () => {},
  } as unknown as GPUDevice;
}

describe("webgpu third review", { skip }, () => {
  it("GpuKernels.copyStrided() refuses a destination whose elements alias through strides [1, 1], dispatching nothing", async () => {
    const device = await sharedDevice();
    const kernels = new GpuKernels(device);
    const a = device.createBuffer({ size: 64, usage: USAGE });
    const b = device.createBuffer({ size: 64, usage: USAGE });
    const src = { buffer: a, offset: 0, size: 64 };
    const dst = { buffer: b, offset: 0, size: 64 };
    const layout = { shape: [2, 2], strides: [2, 1], offset: 0 };
    for (const strides of [[1, 1], [2, 2]]) {
      assert.throws(
        () =>
          kernels.copyStrided(src, layout, dst, {
            shape: [2, 2],
            strides,
            offset: 0,
          }, "f32"),
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          /indices \[0, 1\] and \[1, 0\] both reach element/.test(e.message),
      );
    }
    // a rank above MAX_RANK (one dispatch per leading index) checks the
    // whole destination, not each slice
    const shape = [...new Array(16).fill(1), 2, 2];
    assert.throws(
      () =>
        kernels.copyStrided(
          src,
          { shape, strides: [...new Array(16).fill(4), 2, 1], offset: 0 },
          dst,
          { shape, strides: [...new Array(16).fill(4), 1, 1], offset: 0 },
          "f32",
        ),
      InvalidArgumentError,
    );
    // distinct elements in an unusual order still copy
    kernels.copyStrided(
      src,
      { shape: [2, 3], strides: [3, 1], offset: 0 },
      dst,
      {
        shape: [2, 3],
        strides: [3, 2],
        offset: 0,
      },
      "f32",
    );
    assert.equal(kernels.dispatchCount, 1);
    a.destroy();
    b.destroy();
  });

  it("GpuStaging.download() wraps a mapAsync rejection in GpuStagingError with the cause", async () => {
    const real = await sharedDevice();
    const cause = new DOMException("the map failed", "OperationError");
    const device = failingMaps(real, cause);
    const staging = new GpuStaging(device);
    const buffer = real.createBuffer({ size: 64, usage: USAGE });
    const error = await staging.download({ buffer, offset: 0, size: 64 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof GpuStagingError, String(error));
    assert.ok(error instanceof AllotError);
    assert.equal(error.cause, cause);
    assert.match(error.message, /Cannot download 64 bytes.*the map failed/);
    // the failed staging buffer was not kept: nothing reserved, nothing idle
    assert.equal(staging.stats().reservedBytes, 0);
    assert.equal(staging.stats().downloads, 0);
    staging.release();
    buffer.destroy();
  });

  it("GpuStaging.stats() reports the buffers a download copies aside beyond maxStagingBytes", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device, {
      maxStagingBytes: 4096,
      chunkByteLength: 4096,
    });
    const buffer = device.createBuffer({ size: 16384, usage: USAGE });
    const data = new Uint8Array(16384).map((_, i) => i * 7);
    device.queue.writeBuffer(buffer, 0, data);
    const back = await staging.download({ buffer, offset: 0, size: 16384 });
    assert.deepEqual(back, data);
    const stats = staging.stats();
    assert.equal(stats.peakReservedBytes, 4096);
    // 12 KiB copied aside, outside the bound, reported on their own
    assert.equal(stats.peakTemporaryBytes, 12288);
    assert.equal(stats.temporaryBytes, 0);
    // an unaligned download stages through a temporary buffer too
    const tail = await staging.download({ buffer, offset: 0, size: 16384 }, {
      byteOffset: 1,
      byteLength: 5,
    });
    assert.deepEqual(tail, data.subarray(1, 6));
    assert.equal(staging.stats().temporaryBytes, 0);
    staging.release();
    buffer.destroy();
  });
});

describe("webgpu third review: stale buffers", { skip }, () => {
  it("GpuStaging.download() of a destroyed buffer rejects with GpuStagingError instead of handing back stale bytes", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device, {
      maxStagingBytes: 4096,
      chunkByteLength: 4096,
    });
    for (const size of [64, 16384]) {
      const buffer = device.createBuffer({ size, usage: USAGE });
      buffer.destroy();
      await assert.rejects(
        staging.download({ buffer, offset: 0, size }),
        (e: unknown) =>
          e instanceof GpuStagingError && e.operation === "download" &&
          /refused the copy/.test(e.message),
      );
      assert.equal(staging.stats().temporaryBytes, 0);
    }
    // the pool still works
    const live = device.createBuffer({ size: 64, usage: USAGE });
    device.queue.writeBuffer(live, 0, new Uint8Array(64).fill(9));
    assert.deepEqual(
      await staging.download({ buffer: live, offset: 0, size: 64 }),
      new Uint8Array(64).fill(9),
    );
    assert.equal(staging.stats().downloads, 1);
    live.destroy();
    staging.release();
  });

  it("gpuBufferOf() and bindingOf() refuse a Buffer look-alike with InvalidArgumentError", () => {
    const fake = Object.create(Buffer.prototype);
    assert.throws(() => gpuBufferOf(fake), InvalidArgumentError);
    assert.throws(() => bindingOf(fake), InvalidArgumentError);
  });
});

describe(
  "webgpu third review: copy commands on stale buffers",
  { skip },
  () => {
    it("GpuKernels.copyBytes() and fill() through copyBufferToBuffer / clearBuffer report a destroyed buffer as GpuKernelError, like a dispatch", async () => {
      const device = await newDevice("review3-copy-commands");
      const kernels = new GpuKernels(device);
      const live = device.createBuffer({ size: 64, usage: USAGE });
      const gone = device.createBuffer({ size: 64, usage: USAGE });
      gone.destroy();
      kernels.copyBytes({ buffer: gone, offset: 0, size: 64 }, {
        buffer: live,
        offset: 0,
        size: 64,
      });
      await assert.rejects(kernels.flush(), GpuKernelError);
      const again = new GpuKernels(device);
      again.fill({ buffer: gone, offset: 0, size: 64 }, 0, { dtype: "u32" });
      await assert.rejects(again.flush(), GpuKernelError);
      device.destroy();
    });
  },
);

describe("webgpu third review: uploads to stale buffers", { skip }, () => {
  it("GpuStaging.upload() into a destroyed buffer rejects with GpuStagingError, through writeBuffer and through staging", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device, { writeBufferMaxByteLength: 1024 });
    for (const size of [256, 64 << 10]) {
      const buffer = device.createBuffer({ size, usage: USAGE });
      buffer.destroy();
      const before = staging.stats();
      await assert.rejects(
        staging.upload({ buffer, offset: 0, size }, new Uint8Array(size)),
        (e: unknown) =>
          e instanceof GpuStagingError && e.operation === "upload" &&
          /refused the copy into/.test(e.message),
      );
      const after = staging.stats();
      assert.equal(after.writeBufferUploads, before.writeBufferUploads);
      assert.equal(after.stagedUploads, before.stagedUploads);
    }
    // a live destination still works, both ways
    const live = device.createBuffer({ size: 64 << 10, usage: USAGE });
    for (const size of [256, 64 << 10]) {
      const data = new Uint8Array(size).map((_, i) => i * 3);
      await staging.upload({ buffer: live, offset: 0, size }, data);
      assert.deepEqual(
        await staging.download({ buffer: live, offset: 0, size }),
        data,
      );
    }
    live.destroy();
    staging.release();
  });
});
