import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError } from "@allot/core";
import { GpuStaging } from "./gpu_staging.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { newDevice, sharedDevice, skip } from "./_test_device.ts";

const USAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
  GPUBufferUsage.COPY_DST;

function pattern(n: number, seed: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed * 7 + (i >> 8)) & 0xff;
  return out;
}

describe("GpuStaging", { skip }, () => {
  it("GpuStaging round-trips random ranges through writeBuffer and mapped staging", async () => {
    const device = await sharedDevice();
    using staging = new GpuStaging(device, {
      maxStagingBytes: 64 << 10,
      chunkByteLength: 16 << 10,
      writeBufferMaxByteLength: 1024,
    });
    const buffer = device.createBuffer({ size: 256 << 10, usage: USAGE });
    const binding = { buffer, offset: 1024, size: 200 << 10 };
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 100 << 10 }),
        fc.integer({ min: 1, max: 90 << 10 }),
        fc.integer({ min: 0, max: 255 }),
        async (byteOffset, byteLength, seed) => {
          const data = pattern(byteLength, seed);
          await staging.upload(binding, data, { byteOffset });
          const back = await staging.download(binding, {
            byteOffset,
            byteLength,
          });
          assert.deepEqual(back, data);
          const stats = staging.stats();
          assert.ok(stats.reservedBytes <= staging.maxStagingBytes);
          assert.ok(stats.peakReservedBytes <= staging.maxStagingBytes);
        },
      ),
      { numRuns: 20 },
    );
    const stats = staging.stats();
    assert.ok(stats.stagedUploads > 0);
    assert.ok(stats.writeBufferUploads > 0);
    buffer.destroy();
  });

  it("GpuStaging keeps many downloads in flight within its bound", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device, {
      maxStagingBytes: 32 << 10,
      chunkByteLength: 8 << 10,
    });
    const buffer = device.createBuffer({ size: 1 << 20, usage: USAGE });
    const data = pattern(1 << 20, 3);
    device.queue.writeBuffer(buffer, 0, data);
    const reads = Array.from(
      { length: 12 },
      (_, i) =>
        staging.download({ buffer, offset: i * 65536, size: 20000 + i }),
    );
    const results = await Promise.all(reads);
    results.forEach((bytes, i) =>
      assert.deepEqual(bytes, data.subarray(i * 65536, i * 65536 + 20000 + i))
    );
    const stats = staging.stats();
    assert.ok(
      stats.peakReservedBytes <= 32 << 10,
      `peak ${stats.peakReservedBytes}`,
    );
    // 36 chunks of two sizes went through at most a few buffers at a time.
    assert.ok(stats.createdCount < 36, `created ${stats.createdCount}`);
    assert.equal(stats.idleCount, stats.liveCount);
    staging.release();
    assert.equal(staging.stats().reservedBytes, 0);
    buffer.destroy();
  });

  it("GpuStaging refuses ranges outside the binding without changing the pool", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device);
    const buffer = device.createBuffer({ size: 1024, usage: USAGE });
    const binding = { buffer, offset: 0, size: 512 };
    const before = staging.stats();
    await assert.rejects(
      staging.upload(binding, new Uint8Array(600)),
      InvalidArgumentError,
    );
    await assert.rejects(
      staging.upload({ buffer, offset: 768, size: 512 }, new Uint8Array(4)),
      InvalidArgumentError,
    );
    await assert.rejects(
      staging.download(binding, { byteOffset: 500, byteLength: 20 }),
      InvalidArgumentError,
    );
    assert.deepEqual(staging.stats(), before);
    buffer.destroy();
  });

  it("GpuStaging rejects with DeviceLostError after device loss and drops its pool", async () => {
    const device = await newDevice("lost-staging");
    const staging = new GpuStaging(device, { writeBufferMaxByteLength: 0 });
    const buffer = device.createBuffer({ size: 65536, usage: USAGE });
    const binding = { buffer, offset: 0, size: 65536 };
    await staging.upload(binding, new Uint8Array(65536));
    await staging.download(binding);
    const pending = staging.download(binding);
    device.destroy();
    await device.lost;
    await Promise.resolve();
    await pending.then(() => {}, (error) => {
      assert.ok(error instanceof DeviceLostError, String(error));
    });
    await assert.rejects(staging.download(binding), DeviceLostError);
    await assert.rejects(
      staging.upload(binding, new Uint8Array(4)),
      DeviceLostError,
    );
    assert.equal(staging.stats().idleCount, 0);
  });
});
