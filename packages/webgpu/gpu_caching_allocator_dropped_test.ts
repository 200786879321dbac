// A GpuCachingAllocator that its user drops while it is in a group (the
// device's own group, by default) is not kept alive by the group: once it
// is collected it leaves the group and its cached buffers are destroyed, so
// a device that outlives many allocators (one per model or session) does
// not keep their caches. Needs `--v8-flags=--expose-gc`; skipped without.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CachingGroup } from "@allot/caching";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { mockGpu } from "./_test_mock_device.ts";

const gc = (globalThis as { gc?: () => void }).gc;

/** Collects and lets finalizers run until `done()` or 50 rounds. */
async function collectUntil(done: () => boolean): Promise<void> {
  for (let i = 0; i < 50 && !done(); i++) {
    gc!();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

/** Makes `n` allocators in `group` (or the device's), each caching a buffer. */
function useAndDrop(
  gpu: ReturnType<typeof mockGpu>,
  n: number,
  group?: CachingGroup,
): void {
  for (let i = 0; i < n; i++) {
    const a = new GpuCachingAllocator(
      gpu.device,
      group === undefined ? {} : { group },
    );
    a.allocate(4096).release();
    gpu.complete();
  }
}

describe("GpuCachingAllocator dropped while in a group", { skip: !gc }, () => {
  it("GpuCachingAllocator dropped in the device's group leaves it and its cache is destroyed", async () => {
    const gpu = mockGpu();
    const group = GpuCachingAllocator.deviceGroup(gpu.device);
    const kept = new GpuCachingAllocator(gpu.device);
    kept.allocate(4096).release();
    gpu.complete();
    useAndDrop(gpu, 20);
    assert.equal(group.size, 21);
    // (the group has already given some of the idle members' segments back
    // for the others' misses: more than the one kept allocator's remain)
    assert.ok(gpu.live.size > 1);
    await collectUntil(() => group.size === 1 && gpu.live.size <= 1);
    assert.equal(group.size, 1, "the dropped allocators left the group");
    // what is left is the kept allocator's one segment, if the group has
    // not given it back for another's miss already
    assert.ok(gpu.live.size <= 1, "their cached buffers were destroyed");
    assert.ok(group.has(kept) && group.has(kept.caching));
    // the one still held works as before
    const again = kept.allocate(4096);
    assert.equal(gpu.live.size, 1);
    again.release();
    gpu.complete();
  });

  it("GpuCachingAllocator dropped in a caller's group leaves it too; one deleted first is left alone", async () => {
    const gpu = mockGpu();
    const group = new CachingGroup();
    useAndDrop(gpu, 10, group);
    const out = new GpuCachingAllocator(gpu.device, { group });
    out.allocate(4096).release();
    gpu.complete();
    assert.ok(group.delete(out));
    assert.equal(group.size, 10);
    await collectUntil(() => group.size === 0);
    assert.equal(group.size, 0);
    // `out` was deleted by its user before: its cache is its own
    assert.equal(gpu.live.size, 1);
    out.emptyCache();
    assert.equal(gpu.live.size, 0);
  });
});
