// GpuCachingAllocator's options from the outside (review 7): every numeric
// caching option with hostile values (NaN, infinities, negatives, 2^53,
// strings, objects whose valueOf / Symbol.toPrimitive lie, bigints) is
// refused with InvalidArgumentError, runs none of the caller's code, joins
// no group and makes no buffer; a refused allocator leaves the device's
// group able to take the next one.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { mockGpu } from "./_test_mock_device.ts";

const NUMERIC = [
  "minBlockByteLength",
  "smallRequestMaxByteLength",
  "smallSegmentByteLength",
  "largeSegmentByteLength",
  "ownSegmentMinByteLength",
  "largeRoundByteLength",
  "segmentGrowthFraction",
  "minSegmentByteLength",
  "releaseCachedAboveRatio",
  "maxSplitByteLength",
  "maxNonSplitRoundingByteLength",
  "memoryFraction",
  "garbageCollectionThreshold",
] as const;

describe("GpuCachingAllocator options (review 7)", () => {
  it("GpuCachingAllocator: hostile numeric caching options are refused, run no caller code, join no group, make no buffer", () => {
    const gpu = mockGpu();
    const group = GpuCachingAllocator.deviceGroup(gpu.device);
    let ran = 0;
    const lying = {
      valueOf() {
        ran++;
        return 4096;
      },
      [Symbol.toPrimitive]() {
        ran++;
        return 4096;
      },
      toString() {
        ran++;
        return "4096";
      },
    };
    const bad: unknown[] = [
      NaN,
      -Infinity,
      -1,
      -(2 ** 53),
      "4096",
      "",
      lying,
      [4096],
      10n,
      Symbol("x"),
      true,
      null,
      {},
      () => 4096,
    ];
    let refused = 0;
    for (const key of NUMERIC) {
      for (const value of bad) {
        let made: GpuCachingAllocator | undefined;
        try {
          made = new GpuCachingAllocator(gpu.device, { [key]: value } as never);
        } catch (error) {
          assert.ok(
            error instanceof InvalidArgumentError,
            `${key}: ${String(typeof value)}: ${error}`,
          );
          refused++;
        }
        assert.equal(made, undefined, `${key} took a ${typeof value}`);
        assert.equal(group.size, 0, `${key}: joined`);
        assert.equal(gpu.live.size, 0);
      }
    }
    assert.equal(ran, 0, "no valueOf / toPrimitive / toString ran");
    assert.equal(refused, NUMERIC.length * bad.length);
    // the group still takes the device's allocators
    const a = new GpuCachingAllocator(gpu.device);
    assert.ok(group.has(a));
    a.freeById(a.allocateId(100));
    a.validate();
  });
});
