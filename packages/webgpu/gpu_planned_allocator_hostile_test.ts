// GpuPlannedAllocator from the public API with hostile callers:
// `synchronize({ signal })` (waits for the queue, an aborted signal rejects
// with its reason, bad options are refused), hostile sizes and targets
// (refused, nothing made), a released allocation released again.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError, UseAfterFreeError } from "@allot/core";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";
import { mockGpu } from "./_test_mock_device.ts";

describe("GpuPlannedAllocator hostile", () => {
  it("synchronize({ signal }) waits for the queue's work; an abort rejects with its reason; bad options are refused", async () => {
    const gpu = mockGpu();
    const allocator = new GpuPlannedAllocator(gpu.device);
    allocator.allocate(4096).release();
    await allocator.synchronize();
    gpu.device.queue.submit([]);
    assert.ok(gpu.busy);
    let done = false;
    const waiting = allocator.synchronize().then(() => done = true);
    await new Promise((r) => setTimeout(r, 5));
    assert.equal(done, false, "resolved before the queue's work was done");
    const controller = new AbortController();
    const aborted = allocator.synchronize({ signal: controller.signal });
    const reason = new Error("stop");
    controller.abort(reason);
    await assert.rejects(aborted, (e) => e === reason);
    await assert.rejects(
      allocator.synchronize({ signal: AbortSignal.abort(reason) }),
      (e) => e === reason,
    );
    for (const options of [null, 1, { signal: {} }, { signal: 1 }]) {
      await assert.rejects(
        allocator.synchronize(options as never),
        InvalidArgumentError,
      );
    }
    gpu.complete();
    await waiting;
    assert.equal(done, true);
  });

  it("hostile sizes and targets are refused, nothing made; a released allocation released again is refused", () => {
    const gpu = mockGpu();
    const allocator = new GpuPlannedAllocator(gpu.device);
    const a = allocator.allocate(1000);
    const before = [allocator.pool.reservedBytes, gpu.live.size];
    for (
      const v of [NaN, -1, 1.5, 2 ** 53, Infinity, "16", null, 16n, {}]
    ) {
      assert.throws(
        () => allocator.allocate(v as number),
        InvalidArgumentError,
      );
    }
    assert.throws(
      () => allocator.allocate(256 * 2 ** 20 + 1),
      InvalidArgumentError,
    );
    for (const v of [NaN, -1, 1.5, 2 ** 53, "16", null]) {
      assert.throws(() => allocator.trim(v as number), InvalidArgumentError);
    }
    assert.deepEqual([allocator.pool.reservedBytes, gpu.live.size], before);
    a.release();
    assert.throws(() => a.release());
    assert.equal(allocator.pool.requestedBytes, 0);
    allocator.pool.dispose();
    assert.throws(() => allocator.allocate(16), UseAfterFreeError);
  });
});
