// The GPU allocators' one deferred-free path: under after-fence reuse a
// freed range waits in the pooling allocator's fence-grouped DeferredFrees
// (@allot/core), and handles made through the reused binding record stay
// independent of each other.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { UseAfterFreeError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";
import { GpuWatermarkAllocator } from "./gpu_watermark_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { sharedDevice, skip } from "./_test_device.ts";

const afterFence: [
  string,
  (d: GPUDevice) => GpuCachingAllocator | GpuWatermarkAllocator,
][] = [
  [
    "GpuCachingAllocator (after-fence)",
    (d) => new GpuCachingAllocator(d, { reuse: "after-fence" }),
  ],
  ["GpuWatermarkAllocator (after-fence)", (d) => new GpuWatermarkAllocator(d)],
];

describe("GPU deferred frees", { skip }, () => {
  for (const [name, make] of afterFence) {
    it(`${name}: 2,000 frees of one task wait for one queue fence and all come back after it`, async () => {
      const device = await sharedDevice();
      const allocator = make(device);
      const n = 2000;
      const live = Array.from(
        { length: n },
        (_, i) => allocator.allocate(256 + (i % 7) * 256),
      );
      const ranges = new Set(live.map((a) => `${a.buffer.label}@${a.offset}`));
      const fence = allocator.stream.fence();
      for (const a of live) a.release();
      assert.equal(allocator.pendingFreeCount, n);
      const pending = allocator.pendingFreeBytes;
      assert.ok(
        pending >= live.reduce((s, a) => s + a.size, 0),
        `pending ${pending} bytes`,
      );
      // nothing freed in this task is reused before the fence completes
      const fresh = allocator.allocate(256);
      assert.equal(fence.completed, false);
      assert.ok(!ranges.has(`${fresh.buffer.label}@${fresh.offset}`));
      fresh.release();
      await fence.wait();
      await allocator.synchronize();
      assert.equal(allocator.pendingFreeCount, 0);
      assert.equal(allocator.pendingFreeBytes, 0);
      allocator.emptyCache();
      assert.equal(allocator.source.reservedBytes, 0);
    });
  }

  it("GpuCachingAllocator (after-fence) takes blocks back once their fence resolved, without synchronize()", async () => {
    const device = await sharedDevice();
    const allocator = new GpuCachingAllocator(device, { reuse: "after-fence" });
    const a = allocator.allocate(4096);
    const where = a.offset;
    const fence = allocator.stream.fence();
    a.release();
    assert.equal(allocator.pendingFreeCount, 1);
    await fence.wait();
    assert.equal(allocator.pendingFreeCount, 0);
    assert.equal(allocator.pendingFreeBytes, 0);
    const b = allocator.allocate(4096);
    assert.equal(b.offset, where);
    b.release();
  });

  const queueOrder: [
    string,
    (d: GPUDevice) => GpuCachingAllocator | GpuPlannedAllocator,
  ][] = [
    ["GpuCachingAllocator (queue-order)", (d) => new GpuCachingAllocator(d)],
    ["GpuPlannedAllocator", (d) => new GpuPlannedAllocator(d)],
  ];
  for (const [name, make] of queueOrder) {
    it(`${name}: handles keep their own range, size and owner over random sequences`, async () => {
      const device = await sharedDevice();
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.oneof(
              fc.record({ alloc: fc.integer({ min: 1, max: 3 << 20 }) }),
              fc.record({ free: fc.nat() }),
            ),
            { maxLength: 60 },
          ),
          async (ops) => {
            const allocator = make(device);
            const live: [GpuAllocation, GPUBuffer, number, number][] = [];
            for (const op of ops) {
              if ("alloc" in op) {
                const a = allocator.allocate(op.alloc);
                live.push([a, a.buffer, a.offset, op.alloc]);
              } else if (live.length > 0) {
                const [a] = live.splice(op.free % live.length, 1)[0];
                a.release();
                assert.throws(() => a.offset, UseAfterFreeError);
                assert.equal(a.released, true);
              }
              // every live handle still reads what it was given, and no two
              // live ranges of one buffer overlap
              const byBuffer = new Map<GPUBuffer, [number, number][]>();
              for (const [a, buffer, offset, size] of live) {
                assert.equal(a.buffer, buffer);
                assert.equal(a.offset, offset);
                assert.equal(a.size, size);
                assert.equal(a.released, false);
                const list = byBuffer.get(buffer) ?? [];
                list.push([offset, offset + size]);
                byBuffer.set(buffer, list);
              }
              for (const list of byBuffer.values()) {
                list.sort((x, y) => x[0] - y[0]);
                for (let i = 1; i < list.length; i++) {
                  assert.ok(
                    list[i - 1][1] <= list[i][0],
                    "live ranges overlap",
                  );
                }
              }
            }
            for (const [a] of live) a.release();
            allocator.emptyCache();
            assert.equal(allocator.source.reservedBytes, 0);
            await device.queue.onSubmittedWorkDone();
          },
        ),
        { numRuns: 40 },
      );
    });
  }
});
