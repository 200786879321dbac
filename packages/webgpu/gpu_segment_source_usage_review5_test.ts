// GpuSegmentSource's `usage` from the outside (review 5): more hostile values,
// a throwing getter, and every pooled usage's alignment and binding limit on
// the mock device against the device's limits.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { GpuSegmentSource } from "./gpu_segment_source.ts";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuWatermarkAllocator } from "./gpu_watermark_allocator.ts";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";
import { _Usage as U } from "./_flags.ts";
import { type MockGpu, mockGpu } from "./_test_mock_device.ts";

function mock(): MockGpu {
  const gpu = mockGpu();
  Object.assign(gpu.device.limits as unknown as Record<string, number>, {
    minUniformBufferOffsetAlignment: 64,
    maxUniformBufferBindingSize: 64 * 1024,
    minStorageBufferOffsetAlignment: 32,
  });
  return gpu;
}

describe("GpuSegmentSource usage (review 5)", () => {
  it("GpuSegmentSource refuses -0, 2**31, negatives and primitives-in-disguise, making nothing", () => {
    const bad: unknown[] = [
      -0,
      2 ** 31,
      -(2 ** 31),
      2 ** 32 + U.STORAGE,
      0x3ff, // all bits: mapping included
      Number.MIN_VALUE,
      U.STORAGE + 0.5,
      true,
      [U.STORAGE],
      new Number(U.STORAGE),
      { [Symbol.toPrimitive]: () => U.STORAGE },
      Symbol("usage"),
    ];
    for (const usage of bad) {
      const gpu = mock();
      assert.throws(
        () => new GpuSegmentSource(gpu.device, { usage: usage as number }),
        (e: unknown) =>
          e instanceof InvalidArgumentError && /usage/.test(e.message),
        String(typeof usage === "symbol" ? "symbol" : usage),
      );
      assert.equal(gpu.live.size, 0);
    }
  });

  it("GpuSegmentSource: a usage getter that throws propagates and nothing is made", () => {
    for (
      const make of [
        (gpu: MockGpu, o: object) => new GpuSegmentSource(gpu.device, o),
        (gpu: MockGpu, o: object) =>
          new GpuCachingAllocator(gpu.device, { source: o }),
        (gpu: MockGpu, o: object) =>
          new GpuWatermarkAllocator(gpu.device, { source: o }),
        (gpu: MockGpu, o: object) =>
          new GpuPlannedAllocator(gpu.device, { source: o }),
      ]
    ) {
      const gpu = mock();
      const options = {
        get usage(): number {
          throw new RangeError("no usage for you");
        },
      };
      assert.throws(() => make(gpu, options), RangeError);
      assert.equal(gpu.live.size, 0);
    }
  });

  it("every pooled usage: alignment and maxBindingByteLength follow the device's limits", () => {
    const gpu = mock();
    const lim = gpu.device.limits;
    for (let usage = 1; usage <= 0x3ff; usage++) {
      if ((usage & (U.MAP_READ | U.MAP_WRITE)) !== 0) continue;
      const s = new GpuSegmentSource(gpu.device, { usage });
      let align = 4, bind = s.maxSegmentByteLength;
      if (usage & U.STORAGE) {
        align = Math.max(align, lim.minStorageBufferOffsetAlignment);
        bind = Math.min(bind, lim.maxStorageBufferBindingSize);
      }
      if (usage & U.UNIFORM) {
        align = Math.max(align, lim.minUniformBufferOffsetAlignment);
        bind = Math.min(bind, lim.maxUniformBufferBindingSize);
      }
      if (usage & U.QUERY_RESOLVE) align = Math.max(align, 256);
      assert.equal(s.usage, usage);
      assert.equal(s.alignment, align, `usage 0x${usage.toString(16)}`);
      assert.equal(s.maxBindingByteLength, bind);
      assert.ok(s.maxBindingByteLength <= s.maxSegmentByteLength);
      assert.equal(s.maxSegmentByteLength % 4, 0);
    }
    assert.equal(gpu.live.size, 0);
  });
});

describe("GpuWatermarkAllocator smallest heaps (review 5)", () => {
  it("GpuWatermarkAllocator refuses hostile minSmallHeapByteLength and makes nothing; a valid one sizes the first heap", () => {
    for (const v of [0, -1, 0.5, Infinity, NaN, 2 ** 40, "1"]) {
      const gpu = mock();
      assert.throws(
        () =>
          new GpuWatermarkAllocator(gpu.device, {
            minSmallHeapByteLength: v as number,
          }),
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          /minSmallHeapByteLength/.test(e.message),
        String(v),
      );
      assert.equal(gpu.live.size, 0);
    }
    const gpu = mock();
    const a = new GpuWatermarkAllocator(gpu.device, {
      minSmallHeapByteLength: 64 * 1024,
    });
    a.allocate(100).release();
    assert.deepEqual([...gpu.live].map((b) => b.size), [64 * 1024]);
  });
});
