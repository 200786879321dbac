import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { StepPoolGroup } from "@allot/caching";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";
import { mockGpu } from "./_test_mock_device.ts";

describe("GpuPlannedAllocator group", () => {
  it("bounds its per-usage pools together", () => {
    const gpu = mockGpu();
    const group = new StepPoolGroup();
    const upload = new GpuPlannedAllocator(gpu.device, { group });
    const storage = new GpuPlannedAllocator(gpu.device, { group });
    assert.equal(group.poolCount, 2);
    // a large upload at load, then weights pile up in storage
    upload.allocate(4 << 20).release();
    group.endStep();
    const weights = [];
    for (let step = 0; step < 8; step++) {
      upload.allocate(8192).release();
      weights.push(storage.allocate(1 << 20));
      group.endStep();
      assert.ok(
        group.reservedBytes <= 1.1 * group.peakRequestedBytes,
        `step ${step}: held ${group.reservedBytes}, peak ${group.peakRequestedBytes}`,
      );
    }
    assert.equal(
      group.reservedBytes,
      upload.source.reservedBytes + storage.source.reservedBytes,
    );
    assert.ok(upload.pool.reservedBytes < 1 << 20);
    for (const w of weights) w.release();
    // alone, the upload pool keeps its arena
    const alone = new GpuPlannedAllocator(gpu.device);
    alone.allocate(4 << 20).release();
    alone.endStep();
    for (let step = 0; step < 8; step++) {
      alone.allocate(8192).release();
      alone.endStep();
    }
    assert.ok(alone.pool.reservedBytes >= 4 << 20);
  });

  it("refuses a look-alike group, making nothing", () => {
    const gpu = mockGpu();
    const group = new StepPoolGroup();
    for (
      const fake of [
        { ...group, poolCount: 0, endStep() {} },
        Object.create(StepPoolGroup.prototype),
        null,
        42,
      ]
    ) {
      assert.throws(
        () =>
          new GpuPlannedAllocator(gpu.device, {
            group: fake as unknown as StepPoolGroup,
          }),
        InvalidArgumentError,
      );
    }
    assert.equal(gpu.live.size, 0);
    assert.equal(group.poolCount, 0);
  });
});
