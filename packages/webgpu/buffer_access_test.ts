import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { InvalidArgumentError, UseAfterFreeError } from "@allot/core";
import { Buffer } from "@allot/storage";
import {
  bindingOf,
  createUniformBuffer,
  gpuBufferOf,
} from "./buffer_access.ts";
import { GpuBufferBackend } from "./gpu_buffer_backend.ts";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuStaging } from "./gpu_staging.ts";
import { sharedDevice, skip } from "./_test_device.ts";

describe("GPU accessors", { skip }, () => {
  it("gpuBufferOf() and bindingOf() give the typed GPUBuffer and the bytes of the buffer", async () => {
    const device = await sharedDevice();
    const allocator = new GpuCachingAllocator(device).asAllocator();
    const backend = new GpuBufferBackend(device);
    using a = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], {
      shape: [2, 3],
      allocator,
      backend,
    });
    using row = a.slice(0, { start: 1 });
    const gpu: GPUBuffer = gpuBufferOf(row);
    const range = bindingOf(row);
    assert.equal(range.buffer, gpu);
    assert.equal(range.elementOffset, 3);
    assert.ok(range.size >= 24);
    const bytes = await new GpuStaging(device).download(range, {
      byteOffset: range.elementOffset * 4,
      byteLength: 12,
    });
    assert.deepEqual([...new Float32Array(bytes.buffer, 0, 3)], [4, 5, 6]);
    using host = Buffer.zeros("f32", [2]);
    assert.throws(() => gpuBufferOf(host), InvalidArgumentError);
    const gone = a.clone();
    gone.release();
    assert.throws(() => bindingOf(gone), UseAfterFreeError);
  });

  it("createUniformBuffer() rounds to 16 bytes, has UNIFORM usage and refuses empty data", async () => {
    const device = await sharedDevice();
    const params = createUniformBuffer(device, new Uint32Array([7, 8, 9]));
    assert.equal(params.size, 16);
    assert.ok(params.usage & GPUBufferUsage.UNIFORM);
    params.destroy();
    assert.throws(
      () => createUniformBuffer(device, new Uint8Array(0)),
      InvalidArgumentError,
    );
  });
});
