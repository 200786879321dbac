// GpuCachingAllocator's defaults for a runtime's pools of one device: they
// share the device's own CachingGroup unless told otherwise (`group: null`,
// or another group), and a pool that is not storage takes 256-byte blocks
// and 1 KiB first segments unless its options say otherwise.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CachingGroup } from "@allot/caching";
import { InvalidArgumentError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { _Usage } from "./_flags.ts";
import { mockGpu, mockGpuWithUniforms } from "./_test_mock_device.ts";

const U = _Usage;
const UNIFORM = U.UNIFORM | U.COPY_DST;
const KiB = 1024, MiB = 2 ** 20;

describe("GpuCachingAllocator device group and usage defaults", () => {
  it("GpuCachingAllocator joins its device's own group by default", () => {
    const a = mockGpu(), b = mockGpu();
    const storage = new GpuCachingAllocator(a.device);
    const copies = new GpuCachingAllocator(a.device, {
      source: { usage: U.COPY_SRC | U.COPY_DST },
    });
    const other = new GpuCachingAllocator(b.device);
    const group = GpuCachingAllocator.deviceGroup(a.device);
    assert.ok(group instanceof CachingGroup);
    assert.equal(GpuCachingAllocator.deviceGroup(a.device), group);
    assert.ok(storage.group === group && copies.group === group);
    assert.ok(group.has(storage) && group.has(copies.caching));
    assert.equal(group.size, 2);
    assert.equal(other.group, GpuCachingAllocator.deviceGroup(b.device));
    assert.notEqual(other.group, group);
  });

  it("GpuCachingAllocator option group: null joins no group; another group is joined instead of the device's", () => {
    const gpu = mockGpu();
    const alone = new GpuCachingAllocator(gpu.device, { group: null });
    assert.equal(alone.group, undefined);
    const own = new CachingGroup();
    const member = new GpuCachingAllocator(gpu.device, { group: own });
    assert.equal(member.group, own);
    assert.ok(own.has(member));
    // neither is in the device's group
    assert.equal(GpuCachingAllocator.deviceGroup(gpu.device).size, 0);
  });

  it("GpuCachingAllocator.deviceGroup() refuses what is not a GPUDevice", () => {
    for (const bad of [undefined, null, 1, {}, { limits: {} }]) {
      assert.throws(
        () => GpuCachingAllocator.deviceGroup(bad as unknown as GPUDevice),
        InvalidArgumentError,
      );
    }
  });

  it("GpuCachingAllocator: a storage pool takes the caching defaults (256-byte blocks, 4 KiB segments); others 256-byte blocks and 1 KiB segments", () => {
    const gpu = mockGpuWithUniforms();
    const storage = new GpuCachingAllocator(gpu.device, { group: null });
    assert.equal(storage.caching.roundSize(16), 256);
    for (const usage of [UNIFORM, U.VERTEX | U.COPY_DST, U.COPY_SRC]) {
      const pool = new GpuCachingAllocator(gpu.device, {
        source: { usage },
        group: null,
      });
      assert.equal(pool.caching.roundSize(16), 256);
      // a miss while nothing held is free takes a buffer of just the
      // request; one while something is free takes at least the smallest
      // segment, 1 KiB, whose tail the next small blocks share
      const first = pool.allocate(64);
      assert.equal([...gpu.live].at(-1)!.size, 256);
      const second = pool.allocate(600);
      first.release();
      const before = gpu.live.size;
      const blocks = [pool.allocate(512)];
      assert.equal(gpu.live.size, before + 1);
      assert.equal([...gpu.live].at(-1)!.size, 1024);
      blocks.push(pool.allocate(64), pool.allocate(64), pool.allocate(64));
      // (the freed 256-byte block, then the 1 KiB segment's tail)
      assert.equal(gpu.live.size, before + 1);
      assert.equal(blocks[2].buffer, blocks[0].buffer);
      second.release();
      for (const b of blocks) b.release();
      pool.validate();
    }
  });

  it("GpuCachingAllocator: a pool's own minBlockByteLength and minSegmentByteLength win over the usage's", () => {
    const gpu = mockGpuWithUniforms();
    const pool = new GpuCachingAllocator(gpu.device, {
      source: { usage: UNIFORM },
      minBlockByteLength: 512,
      minSegmentByteLength: 8 * KiB,
      group: null,
    });
    assert.equal(pool.caching.roundSize(16), 512);
    // (a miss while something held is free: the smallest segment applies)
    const first = pool.allocate(16), second = pool.allocate(600);
    first.release();
    using _a = pool.allocate(1024);
    assert.equal([...gpu.live].at(-1)!.size, 8 * KiB);
    second.release();
    // given as undefined: the usage's default
    const other = new GpuCachingAllocator(gpu.device, {
      source: { usage: UNIFORM },
      minBlockByteLength: undefined,
      group: null,
    });
    assert.equal(other.caching.roundSize(16), 256);
    // null is a value, refused as before (not taken for absent)
    for (const key of ["minBlockByteLength", "minSegmentByteLength"]) {
      assert.throws(
        () =>
          new GpuCachingAllocator(gpu.device, {
            source: { usage: UNIFORM },
            [key]: null,
          }),
        InvalidArgumentError,
      );
    }
  });

  it("GpuCachingAllocator: after the device group's endStep(), an idle upload pool's buffer goes before storage grows", () => {
    const gpu = mockGpu();
    const storage = new GpuCachingAllocator(gpu.device);
    const uploads = new GpuCachingAllocator(gpu.device, {
      source: { usage: U.COPY_SRC },
    });
    const group = storage.group!;
    const kept = [storage.allocate(MiB)];
    uploads.allocate(4 * MiB).release(); // weights copied in at load
    const weights = [...gpu.live].find((b) => b.size >= 4 * MiB)!;
    group.endStep();
    uploads.allocate(KiB).release();
    kept.push(storage.allocate(MiB));
    assert.ok(!weights.destroyed); // its first step: kept
    group.endStep();
    uploads.allocate(KiB).release();
    kept.push(storage.allocate(MiB));
    assert.ok(weights.destroyed);
    assert.equal(group.givenBackSegments, 1);
    let held = 0;
    for (const b of gpu.live) held += b.size;
    assert.equal(group.heldBytes, held);
    for (const k of kept) k.release();
    storage.emptyCache();
    uploads.emptyCache();
    assert.equal(gpu.live.size, 0);
  });
});
