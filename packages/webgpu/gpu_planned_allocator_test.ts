import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DoubleFreeError, InvalidArgumentError } from "@allot/core";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";

const adapter = await navigator.gpu?.requestAdapter();

describe("GpuPlannedAllocator", { skip: !adapter }, () => {
  it("serves aligned ranges of storage buffers, repeats a step with no new buffer, and trims", async () => {
    const device = await adapter!.requestDevice();
    const allocator = new GpuPlannedAllocator(device);
    const align = device.limits.minStorageBufferOffsetAlignment;
    let made = 0;
    for (let step = 0; step < 5; step++) {
      const a = allocator.allocate(1000);
      const b = allocator.allocate(70000);
      assert.equal(a.offset % align, 0);
      assert.equal(b.offset % align, 0);
      assert.ok(a.buffer.usage & GPUBufferUsage.STORAGE);
      a.release();
      const c = allocator.allocate(3000);
      b.release();
      c.release();
      allocator.endStep();
      if (step === 1) made = allocator.source.allocationCount;
    }
    assert.equal(allocator.source.allocationCount, made);
    assert.equal(allocator.pool.requestedBytes, 0);
    // 0 bytes: an ordinary (empty) allocation, as every allocator gives
    const zero = allocator.allocate(0);
    assert.equal(zero.byteLength, 0);
    zero.release();
    assert.throws(() => allocator.allocate(-1), InvalidArgumentError);
    const d = allocator.allocate(16);
    d.release();
    assert.throws(() => d.release(), DoubleFreeError);
    allocator.emptyCache();
    assert.equal(allocator.source.reservedBytes, 0);
    device.destroy();
  });

  it("writes and reads back through the adapter's storage", async () => {
    const device = await adapter!.requestDevice();
    const allocator = new GpuPlannedAllocator(device);
    const a = allocator.allocate(256);
    const b = allocator.allocate(256);
    device.queue.writeBuffer(a.buffer, a.offset, new Uint32Array(64).fill(7));
    device.queue.writeBuffer(b.buffer, b.offset, new Uint32Array(64).fill(9));
    const read = device.createBuffer({
      size: 512,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(a.buffer, a.offset, read, 0, 256);
    enc.copyBufferToBuffer(b.buffer, b.offset, read, 256, 256);
    device.queue.submit([enc.finish()]);
    await read.mapAsync(GPUMapMode.READ);
    const words = new Uint32Array(read.getMappedRange());
    assert.equal(words[0], 7);
    assert.equal(words[64], 9);
    read.unmap();
    a.release();
    b.release();
    device.destroy();
  });
});
