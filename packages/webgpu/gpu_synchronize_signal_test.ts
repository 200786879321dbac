// GpuCachingAllocator.synchronize({ signal }): an aborted signal rejects with
// its reason and changes nothing; a value that is not an AbortSignal is
// refused with InvalidArgumentError.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { sharedDevice, skip } from "./_test_device.ts";

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
