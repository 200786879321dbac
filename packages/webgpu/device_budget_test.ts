import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { deviceBudget } from "./device_budget.ts";
import { GpuSegmentSource } from "./gpu_segment_source.ts";
import { mockGpu } from "./_test_mock_device.ts";
import { sharedDevice, skip } from "./_test_device.ts";

const GiB = 2 ** 30;

/** The mock device with the adapter info given. */
function withInfo(info: Record<string, unknown> | undefined): GPUDevice {
  const device = mockGpu().device as unknown as Record<string, unknown>;
  if (info !== undefined) device.adapterInfo = info;
  return device as unknown as GPUDevice;
}

describe("deviceBudget", () => {
  it("takes half of host memory for adapters whose buffers live there", () => {
    const host = { hostMemoryBytes: 16 * GiB };
    for (
      const info of [
        { isFallbackAdapter: true, description: "" },
        { description: "llvmpipe (LLVM 15.0.6, 256 bits)" },
        { description: "SwiftShader Device (Subzero)" },
        { vendor: "apple", architecture: "metal-3" },
      ]
    ) {
      const budget = deviceBudget(withInfo(info), host);
      assert.deepEqual(budget, {
        capacityBytes: 8 * GiB,
        basis: "host memory",
        hostMemoryBytes: 16 * GiB,
      }, JSON.stringify(info));
    }
    assert.equal(
      deviceBudget(withInfo({ isFallbackAdapter: true }), {
        hostMemoryBytes: 10 * GiB,
        hostShare: 0.25,
      }).capacityBytes,
      2.5 * GiB,
    );
  });

  it("knows nothing of other adapters (WebGPU tells no memory size)", () => {
    for (
      const info of [
        { vendor: "nvidia", architecture: "ampere", description: "" },
        { vendor: "amd", isFallbackAdapter: false },
        {},
        undefined,
      ]
    ) {
      assert.deepEqual(
        deviceBudget(withInfo(info), { hostMemoryBytes: 16 * GiB }),
        { capacityBytes: Infinity, basis: "unknown", hostMemoryBytes: 0 },
      );
    }
    // host memory not known either
    assert.equal(
      deviceBudget(withInfo({ isFallbackAdapter: true }), {
        hostMemoryBytes: 0,
      }).basis,
      "unknown",
    );
  });

  it("refuses a share outside (0, 1] and a negative host memory", () => {
    const device = withInfo({ isFallbackAdapter: true });
    for (const hostShare of [0, -0.5, 1.5, NaN, "half" as unknown as number]) {
      assert.throws(
        () => deviceBudget(device, { hostShare }),
        InvalidArgumentError,
      );
    }
    assert.throws(
      () => deviceBudget(device, { hostMemoryBytes: -1 }),
      InvalidArgumentError,
    );
  });

  it("is GpuSegmentSource's default budget; a number overrides it", () => {
    const fallback = withInfo({ isFallbackAdapter: true });
    const source = new GpuSegmentSource(fallback);
    assert.equal(source.capacityBasis, "host memory");
    assert.equal(
      source.capacityBytes,
      Math.floor(Deno.systemMemoryInfo().total / 2),
    );
    const given = new GpuSegmentSource(fallback, { capacityBytes: 1 << 20 });
    assert.equal(given.capacityBasis, "option");
    assert.equal(given.capacityBytes, 1 << 20);
    const other = new GpuSegmentSource(withInfo({ vendor: "nvidia" }));
    assert.equal(other.capacityBasis, "unknown");
    assert.equal(other.capacityBytes, Infinity);
    assert.throws(
      () =>
        new GpuSegmentSource(fallback, {
          capacityBytes: "all" as unknown as number,
        }),
      InvalidArgumentError,
    );
    // over the budget: refused synchronously
    const small = new GpuSegmentSource(withInfo({ isFallbackAdapter: true }), {
      capacityBytes: 4096,
    });
    assert.equal(small.tryAllocateSegment(8192), undefined);
  });

  it("on this runtime's adapter", { skip }, async () => {
    const device = await sharedDevice();
    const budget = deviceBudget(device);
    const info = (device as { adapterInfo?: { isFallbackAdapter?: boolean } })
      .adapterInfo;
    if (info?.isFallbackAdapter) {
      assert.equal(budget.basis, "host memory");
      assert.ok(budget.capacityBytes > 0 && budget.capacityBytes < Infinity);
    }
    assert.equal(
      new GpuSegmentSource(device).capacityBytes,
      budget.capacityBytes,
    );
  });
});
