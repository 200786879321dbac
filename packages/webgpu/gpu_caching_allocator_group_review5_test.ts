// GpuCachingAllocator in a CachingGroup from the outside (review 5): the
// group answers for the GPU allocator itself, and a group left empty takes
// another GPUDevice's allocators.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CachingGroup } from "@allot/caching";
import { InvalidArgumentError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { mockGpu } from "./_test_mock_device.ts";

const MiB = 2 ** 20;

describe("GpuCachingAllocator in a CachingGroup (review 5)", () => {
  it("CachingGroup.has() and delete() take the GpuCachingAllocator itself", () => {
    const gpu = mockGpu();
    const group = new CachingGroup();
    const storage = new GpuCachingAllocator(gpu.device, { group });
    const uploads = new GpuCachingAllocator(gpu.device, { group });
    assert.equal(group.size, 2);
    assert.ok(group.has(storage));
    assert.ok(group.has(storage.caching));
    using a = storage.allocate(MiB);
    uploads.allocate(MiB).release();
    assert.equal(
      group.heldBytes,
      storage.memoryStats().reservedBytes.all.current +
        uploads.memoryStats().reservedBytes.all.current,
    );
    assert.equal(group.delete(storage), true);
    assert.equal(group.has(storage), false);
    assert.equal(group.has(storage.caching), false);
    assert.equal(group.delete(storage.caching), false);
    assert.equal(group.size, 1);
    assert.equal(
      group.heldBytes,
      uploads.memoryStats().reservedBytes.all.current,
    );
    assert.ok(a.byteLength >= MiB);
  });

  it("A CachingGroup left empty takes another GPUDevice's allocators", () => {
    const a = mockGpu(), b = mockGpu();
    const group = new CachingGroup();
    const first = new GpuCachingAllocator(a.device, { group });
    assert.throws(
      () => new GpuCachingAllocator(b.device, { group }),
      InvalidArgumentError,
    );
    assert.equal(group.delete(first), true);
    const second = new GpuCachingAllocator(b.device, { group });
    assert.ok(group.has(second));
    // and now the first device's is refused
    assert.throws(
      () => new GpuCachingAllocator(a.device, { group }),
      InvalidArgumentError,
    );
    assert.equal(group.size, 1);
    assert.equal(a.live.size, 0);
  });
});
