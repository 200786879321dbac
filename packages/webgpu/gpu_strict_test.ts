import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DoubleFreeError, UseAfterFreeError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";
import { GpuWatermarkAllocator } from "./gpu_watermark_allocator.ts";
import { sharedDevice, skip } from "./_test_device.ts";

/** Counts calls of `target.validate()` from now on. */
function counting(target: { validate(): void }): { calls: number } {
  const counter = { calls: 0 };
  const validate = target.validate.bind(target);
  Object.defineProperty(target, "validate", {
    value: () => {
      counter.calls++;
      validate();
    },
  });
  return counter;
}

describe("GPU allocators in strict mode", { skip }, () => {
  it("GpuWatermarkAllocator, GpuCachingAllocator and GpuPlannedAllocator pass strict to their policy: validate on every call, stale handles refused; off by default", async () => {
    const device = await sharedDevice();
    for (const strict of [true, false]) {
      const allocators = [
        (() => {
          const a = new GpuWatermarkAllocator(device, { strict });
          return { a, policy: a.watermark };
        })(),
        (() => {
          const a = new GpuCachingAllocator(device, { strict });
          return { a, policy: a.caching };
        })(),
        (() => {
          const a = new GpuPlannedAllocator(device, { strict });
          return { a, policy: a.pool };
        })(),
      ];
      for (const { a, policy } of allocators) {
        const counter = counting(policy);
        const x = a.allocate(1000);
        x.release();
        assert.throws(() => x.buffer, UseAfterFreeError);
        assert.throws(() => x.release(), DoubleFreeError);
        a.emptyCache();
        const name = a.constructor.name;
        if (strict) assert.ok(counter.calls >= 2, `${name}: ${counter.calls}`);
        else assert.equal(counter.calls, 0, name);
      }
    }
  });
});
