// GpuCachingAllocators of one device in a CachingGroup: the group's held
// bytes are the device's buffers, a grown allocator destroys a sibling's idle
// buffer first, another GPUDevice's allocator is refused, and a lost device
// leaves the group's allocators refusing work with nothing lost.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CachingGroup } from "@allot/caching";
import { InvalidArgumentError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { mockGpu } from "./_test_mock_device.ts";
import { newDevice, skip } from "./_test_device.ts";

const KiB = 1024, MiB = 2 ** 20;

describe("GpuCachingAllocator in a CachingGroup", () => {
  it("GpuCachingAllocator option group: a grown allocator destroys a sibling's idle buffer first", () => {
    const gpu = mockGpu();
    const group = new CachingGroup();
    const storage = new GpuCachingAllocator(gpu.device, { group });
    const weights = new GpuCachingAllocator(gpu.device, { group });
    assert.equal(group.size, 2);
    // storage's misses cycle: a peak, then a miss at a low
    const x = storage.allocate(MiB), y = storage.allocate(MiB);
    x.release();
    y.release();
    storage.emptyCache();
    using small = storage.allocate(64 * KiB);
    // weights loaded once, then idle
    weights.allocate(4 * MiB).release();
    const held = (): number => {
      let n = 0;
      for (const b of gpu.live) n += b.size;
      return n;
    };
    assert.equal(group.heldBytes, held());
    const destroyedBefore = [...gpu.live].filter((b) => b.size >= 4 * MiB);
    using big = storage.allocate(group.peakHeldBytes);
    assert.equal(group.givenBackSegments, 1);
    assert.ok(destroyedBefore.every((b) => b.destroyed));
    assert.equal(weights.memoryStats().reservedBytes.all.current, 0);
    assert.equal(group.heldBytes, held());
    assert.ok(group.heldBytes <= group.peakHeldBytes);
    storage.validate();
    weights.validate();
    assert.ok(small.byteLength > 0 && big.byteLength > 0);
  });

  it("GpuCachingAllocator refuses a group of another GPUDevice, and makes nothing", () => {
    const a = mockGpu(), b = mockGpu();
    const group = new CachingGroup();
    const first = new GpuCachingAllocator(a.device, { group });
    assert.throws(
      () => new GpuCachingAllocator(b.device, { group }),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        /another GPUDevice/.test(e.message),
    );
    assert.equal(group.size, 1);
    assert.ok(group.has(first.caching));
    assert.equal(b.live.size, 0);
    assert.throws(
      () =>
        new GpuCachingAllocator(a.device, {
          group: {} as unknown as CachingGroup,
        }),
      InvalidArgumentError,
    );
    assert.equal(group.size, 1);
  });

  it(
    "A lost device: the group's allocators refuse work, the group's count stays exact",
    {
      skip,
    },
    async () => {
      const device = await newDevice("group-lost");
      const group = new CachingGroup();
      const storage = new GpuCachingAllocator(device, { group });
      const uploads = new GpuCachingAllocator(device, { group });
      const s = storage.allocate(MiB);
      uploads.allocate(MiB).release();
      device.destroy();
      await device.lost;
      assert.throws(() => storage.allocate(MiB), DeviceLostError);
      assert.throws(() => uploads.allocate(MiB), DeviceLostError);
      s.release(); // a release after loss is quiet
      storage.emptyCache();
      uploads.emptyCache();
      assert.equal(
        group.heldBytes,
        storage.memoryStats().reservedBytes.all.current +
          uploads.memoryStats().reservedBytes.all.current,
      );
      // a lost allocator can leave its group
      assert.equal(group.delete(storage.caching), true);
      assert.equal(group.delete(uploads.caching), true);
      assert.equal(group.heldBytes, 0);
    },
  );
});
