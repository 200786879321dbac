// GpuCachingAllocator.synchronize({ signal }) and allocateAsync(n, { signal }):
// an aborted signal rejects with its reason and changes nothing; a value that
// is not an AbortSignal is refused with InvalidArgumentError.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError, OutOfMemoryError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { sharedDevice, skip } from "./_test_device.ts";
import { mockGpu } from "./_test_mock_device.ts";

describe("GpuCachingAllocator.synchronize({ signal })", { skip }, () => {
  it("an aborted signal rejects with its reason and leaves the pending frees; bad signals are refused", async () => {
    const device = await sharedDevice();
    const allocator = new GpuCachingAllocator(device, { reuse: "after-fence" });
    const a = allocator.allocate(4096);
    a.release();
    const pending = allocator.pendingFreeCount;
    for (const signal of [{}, 1, Object.create(AbortSignal.prototype)]) {
      await assert.rejects(
        allocator.synchronize({ signal } as never),
        InvalidArgumentError,
      );
    }
    const reason = new Error("stop");
    await assert.rejects(
      allocator.synchronize({ signal: AbortSignal.abort(reason) }),
      (e) => e === reason,
    );
    assert.ok(allocator.pendingFreeCount <= pending);
    await allocator.synchronize({ signal: new AbortController().signal });
    assert.equal(allocator.pendingFreeCount, 0);
    allocator.emptyCache();
  });
});

describe("GpuCachingAllocator.allocateAsync(n, { signal })", () => {
  it("a signal stops the wait for a queue that never finishes: rejects with its reason, the blocks stay pending; read once, bad ones refused", async () => {
    const gpu = mockGpu();
    const allocator = new GpuCachingAllocator(gpu.device, {
      source: { capacityBytes: 4 << 20 },
      reuse: "after-fence",
    });
    const a = allocator.allocate(3 << 20);
    gpu.device.queue.submit([]);
    a.release(); // held for the queue fence, which the test never completes
    assert.equal(allocator.pendingFreeCount, 1);
    assert.throws(() => allocator.allocate(3 << 20), OutOfMemoryError);
    const before = allocator.memoryStats();
    for (const signal of [{}, 1, Object.create(AbortSignal.prototype)]) {
      await assert.rejects(
        allocator.allocateAsync(3 << 20, { signal } as never),
        InvalidArgumentError,
      );
    }
    const stop = new Error("stop");
    await assert.rejects(
      allocator.allocateAsync(3 << 20, { signal: AbortSignal.abort(stop) }),
      (e) => e === stop,
    );
    // refused and already aborted calls did nothing (not even an attempt)
    assert.deepEqual(allocator.memoryStats(), before);
    const controller = new AbortController();
    let reads = 0;
    const waiting = allocator.allocateAsync(3 << 20, {
      get signal() {
        reads++;
        return reads === 1 ? controller.signal : undefined;
      },
    });
    await new Promise((r) => setTimeout(r, 5));
    const reason = new Error("give up");
    controller.abort(reason);
    await assert.rejects(waiting, (e) => e === reason);
    assert.equal(reads, 1);
    assert.equal(allocator.pendingFreeCount, 1);
    gpu.complete();
    const b = await allocator.allocateAsync(3 << 20, {
      signal: new AbortController().signal,
    });
    assert.equal(b.size, 3 << 20);
    assert.equal(allocator.pendingFreeCount, 0);
    b.release();
  });
});
