// GpuCachingAllocator dropped by its user while frees wait for the queue
// (review 7): under after-fence reuse, a freed id or handle waits for its
// fence; the allocator must not be collected (its cache destroyed, its pool
// taken out of the group) before the block is back, else the block comes
// back into a pool outside any group and stays cached for good. Needs
// `--v8-flags=--expose-gc`; skipped without.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { mockGpu } from "./_test_mock_device.ts";

const gc = (globalThis as { gc?: () => void }).gc;

async function collect(rounds: number, done = () => false): Promise<void> {
  for (let i = 0; i < rounds && !done(); i++) {
    gc!();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

describe("GpuCachingAllocator dropped while frees wait (review 7)", {
  skip: !gc,
}, () => {
  for (const path of ["id", "handle"] as const) {
    it(`GpuCachingAllocator (after-fence) dropped while a freed ${path} waits for the queue: kept until it is back, then its cache is destroyed`, async () => {
      const gpu = mockGpu();
      const group = GpuCachingAllocator.deviceGroup(gpu.device);
      let ref!: WeakRef<GpuCachingAllocator>;
      (() => {
        const a = new GpuCachingAllocator(gpu.device, { reuse: "after-fence" });
        ref = new WeakRef(a);
        gpu.device.queue.submit([]); // work in flight
        if (path === "id") a.freeById(a.allocateId(4096));
        else a.allocate(4096).release();
        assert.equal(a.pendingFreeCount, 1);
      })();
      await collect(20);
      assert.ok(ref.deref() !== undefined, "kept while its free waits");
      assert.equal(group.size, 1);
      assert.equal(gpu.live.size, 1);
      gpu.complete();
      await collect(50, () => group.size === 0 && gpu.live.size === 0);
      assert.equal(group.size, 0, "it left the group once collected");
      assert.equal(gpu.live.size, 0, "its cache was destroyed");
    });
  }
});
