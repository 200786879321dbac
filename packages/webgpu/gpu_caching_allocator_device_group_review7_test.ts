// A device's group from the outside (review 7): a plain CachingAllocator
// over another GPUDevice's GpuSegmentSource (the allot device of both is
// `webgpu:0`) must not get into a device's own group, nor make a caller's
// group take a GpuCachingAllocator of another GPUDevice; a refusal changes
// nothing, and the device's own allocators still join after it.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CachingAllocator, CachingGroup } from "@allot/caching";
import { InvalidArgumentError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuSegmentSource } from "./gpu_segment_source.ts";
import { mockGpu } from "./_test_mock_device.ts";

describe("GpuCachingAllocator device group across GPUDevices (review 7)", () => {
  it("CachingGroup: a device's own group refuses a CachingAllocator over another GPUDevice's source, even while empty; the device's own allocators still join", () => {
    const x = mockGpu(), y = mockGpu();
    const own = GpuCachingAllocator.deviceGroup(x.device);
    assert.throws(
      () =>
        new CachingAllocator(new GpuSegmentSource(y.device), { group: own }),
      InvalidArgumentError,
    );
    assert.equal(own.size, 0);
    assert.equal(x.live.size + y.live.size, 0);
    // the device's own allocators, plain or not, still join
    const a = new GpuCachingAllocator(x.device);
    const plain = new CachingAllocator(new GpuSegmentSource(x.device), {
      group: own,
    });
    assert.ok(own.has(a) && own.has(plain));
    assert.equal(own.size, 2);
    // and while it holds them, still not another device's
    assert.throws(
      () =>
        new CachingAllocator(new GpuSegmentSource(y.device), { group: own }),
      InvalidArgumentError,
    );
    assert.throws(
      () => new GpuCachingAllocator(y.device, { group: own }),
      InvalidArgumentError,
    );
    assert.equal(own.size, 2);
    a.allocate(4096).release();
    plain.allocate(4096).release();
    a.validate();
    plain.validate();
  });

  it("CachingGroup: a caller's group holding a CachingAllocator over one GPUDevice's source refuses another GPUDevice's GpuCachingAllocator; emptied, it takes any", () => {
    const x = mockGpu(), y = mockGpu();
    const group = new CachingGroup();
    const plain = new CachingAllocator(new GpuSegmentSource(x.device), {
      group,
    });
    assert.throws(
      () => new GpuCachingAllocator(y.device, { group }),
      InvalidArgumentError,
    );
    assert.throws(
      () => new CachingAllocator(new GpuSegmentSource(y.device), { group }),
      InvalidArgumentError,
    );
    assert.equal(group.size, 1);
    assert.equal(y.live.size, 0);
    const same = new GpuCachingAllocator(x.device, { group });
    assert.equal(group.size, 2);
    // emptied, the group takes any device's allocators again
    assert.ok(group.delete(plain) && group.delete(same));
    const other = new GpuCachingAllocator(y.device, { group });
    assert.ok(group.has(other));
  });
});
