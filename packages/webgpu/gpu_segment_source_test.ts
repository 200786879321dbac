import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  InvalidArgumentError,
  type Segment,
} from "@allot/core";
import { GpuSegmentSource } from "./gpu_segment_source.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { newDevice, sharedDevice, skip } from "./_test_device.ts";
import { mockGpu } from "./_test_mock_device.ts";
import { modelRuns } from "../core/_test_faults.ts";

describe("GpuSegmentSource", { skip }, () => {
  it("GpuSegmentSource reports the device's limits", async () => {
    const device = await sharedDevice();
    const source = new GpuSegmentSource(device, { index: 2 });
    assert.equal(String(source.device), "webgpu:2");
    assert.equal(
      source.alignment,
      Math.max(4, device.limits.minStorageBufferOffsetAlignment),
    );
    assert.ok(source.maxSegmentByteLength <= device.limits.maxBufferSize);
    assert.equal(
      source.maxBindingByteLength,
      device.limits.maxStorageBufferBindingSize,
    );
  });

  it("GpuSegmentSource.tryAllocateSegment() makes labelled storage buffers", async () => {
    const device = await sharedDevice();
    const source = new GpuSegmentSource(device, { label: "t" });
    const segment = source.tryAllocateSegment(1001)!;
    assert.equal(segment.byteLength, 1001);
    assert.equal(segment.memory.size, 1004);
    assert.match(segment.memory.label, /^t:segment#\d+$/);
    assert.equal(
      segment.memory.usage,
      GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
        GPUBufferUsage.COPY_DST,
    );
    source.freeSegment(segment);
    assert.equal(source.reservedBytes, 0);
  });

  it("GpuSegmentSource.tryAllocateSegment() refuses sizes above maxBufferSize without changing state", async () => {
    const device = await sharedDevice();
    const source = new GpuSegmentSource(device);
    const kept = source.tryAllocateSegment(64)!;
    for (const bad of [0, -1, 1.5, source.maxSegmentByteLength + 4, NaN]) {
      assert.throws(
        () => source.tryAllocateSegment(bad),
        InvalidArgumentError,
      );
    }
    assert.equal(source.reservedBytes, 64);
    assert.equal(source.allocationCount, 1);
    source.freeSegment(kept);
  });

  it("GpuSegmentSource keeps a budget and answers hostVisible honestly", async () => {
    const device = await sharedDevice();
    const source = new GpuSegmentSource(device, { capacityBytes: 4096 });
    const a = source.tryAllocateSegment(3000, { hostVisible: true })!;
    assert.ok(source.isHostVisible(a.memory));
    assert.match(a.memory.label, /\(shared\)/);
    assert.equal(source.tryAllocateSegment(2000), undefined);
    assert.equal(source.refusalCount, 1);
    source.freeSegment(a);
    const refusing = new GpuSegmentSource(device, { hostVisible: "refuse" });
    assert.equal(
      refusing.tryAllocateSegment(64, { hostVisible: true }),
      undefined,
    );
    assert.equal(refusing.reservedBytes, 0);
  });

  it("GpuSegmentSource.freeSegment() throws DoubleFreeError for a segment it does not hold", async () => {
    const device = await sharedDevice();
    const source = new GpuSegmentSource(device);
    const a = source.tryAllocateSegment(256)!;
    source.freeSegment(a);
    assert.throws(() => source.freeSegment(a), DoubleFreeError);
    assert.equal(source.reservedBytes, 0);
    assert.equal(source.freeCount, 1);
  });

  // on the real device a few runs; on a mock device (the same bookkeeping,
  // no GPU) the project's 1,000 model runs in CI
  for (
    const [on, numRuns] of [["a real device", 15], [
      "a mock device",
      modelRuns(),
    ]] as const
  ) {
    it(`GpuSegmentSource matches a model over random allocate/free sequences on ${on}`, async () => {
      const device = on === "a real device"
        ? await sharedDevice()
        : mockGpu().device;
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.oneof(
              fc.record({ alloc: fc.integer({ min: 1, max: 1 << 16 }) }),
              fc.record({ free: fc.nat() }),
            ),
            { maxLength: 40 },
          ),
          async (ops) => {
            const source = new GpuSegmentSource(device, {
              capacityBytes: 1 << 18,
            });
            const live: Segment<GPUBuffer>[] = [];
            let reserved = 0;
            for (const op of ops) {
              if ("alloc" in op) {
                const size = Math.ceil(op.alloc / 4) * 4;
                const segment = source.tryAllocateSegment(op.alloc);
                if (reserved + size > (1 << 18)) {
                  assert.equal(segment, undefined);
                } else {
                  assert.ok(segment);
                  assert.ok(!live.some((s) => s.memory === segment.memory));
                  live.push(segment);
                  reserved += size;
                }
              } else if (live.length > 0) {
                const [segment] = live.splice(op.free % live.length, 1);
                source.freeSegment(segment);
                reserved -= Math.ceil(segment.byteLength / 4) * 4;
              }
              assert.equal(source.reservedBytes, reserved);
              assert.equal(source.liveSegmentCount, live.length);
            }
            for (const segment of live) source.freeSegment(segment);
            assert.equal(source.reservedBytes, 0);
            assert.equal(source.allocationCount, source.freeCount);
            await device.queue.onSubmittedWorkDone();
          },
        ),
        { numRuns },
      );
    });
  }

  it("GpuSegmentSource drops every buffer on device loss and refuses new requests", async () => {
    const device = await newDevice("lost");
    const source = new GpuSegmentSource(device);
    const a = source.tryAllocateSegment(1024)!;
    device.destroy();
    await device.lost;
    await Promise.resolve();
    assert.equal(source.lost, true);
    assert.equal(source.reservedBytes, 0);
    assert.throws(() => source.tryAllocateSegment(64), DeviceLostError);
    source.freeSegment(a); // a no-op, never a loop of throws
    source.freeSegment(a);
  });
});
