// GpuPlannedAllocator from the outside (review 7): a device lost from inside
// an allocation (a cached buffer's destroy(), run to make room, loses the
// device) gives the DeviceLostError that allocate() promises, as
// GpuCachingAllocator does.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { mockGpu } from "./_test_mock_device.ts";

const KiB = 1024, MiB = 2 ** 20;

describe("GpuPlannedAllocator (review 7)", () => {
  for (const path of ["allocate", "tryAllocate"] as const) {
    it(`GpuPlannedAllocator.${path}: a device lost from inside (a buffer destroyed to make room) throws DeviceLostError`, () => {
      const gpu = mockGpu();
      const a = new GpuPlannedAllocator(gpu.device, {
        source: { capacityBytes: 4 * MiB },
      });
      const kept = a.allocate(512 * KiB);
      a.allocate(3 * MiB).release(); // cached
      for (const buffer of gpu.live) {
        const destroy = buffer.destroy;
        buffer.destroy = function () {
          destroy.call(this);
          gpu.device.destroy();
        };
      }
      let error: unknown;
      try {
        if (path === "allocate") a.allocate(3.25 * MiB);
        else a.tryAllocate(3.25 * MiB);
      } catch (e) {
        error = e;
      }
      assert.ok(a.lost, "a cached buffer was destroyed for the request");
      assert.ok(
        error instanceof DeviceLostError,
        `${(error as Error)?.constructor?.name}: ${error}`,
      );
      kept.release(); // never throws after loss
    });
  }
});
