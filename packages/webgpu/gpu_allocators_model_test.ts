/**
 * Model test of the GPU allocators' bookkeeping on a mock device, at the
 * project's 1,000 runs in CI (`modelRuns()`): live ranges are aligned,
 * inside a live buffer and disjoint, a range freed under "after-fence" reuse
 * is not handed out again before the queue finished, and every byte and
 * buffer goes back. The real-device model (`gpu_allocators_test.ts`) checks
 * the same on the GPU itself, stamping every range's bytes, with a few runs.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { LeakDetector } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";
import { GpuWatermarkAllocator } from "./gpu_watermark_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { mockGpu, type MockGpuBuffer } from "./_test_mock_device.ts";
import { modelRuns } from "../core/_test_faults.ts";

type Any = GpuCachingAllocator | GpuWatermarkAllocator | GpuPlannedAllocator;

const makers: [string, (d: GPUDevice) => Any, boolean][] = [
  [
    "GpuCachingAllocator (queue-order)",
    (d) => new GpuCachingAllocator(d),
    false,
  ],
  [
    "GpuCachingAllocator (after-fence)",
    (d) => new GpuCachingAllocator(d, { reuse: "after-fence" }),
    true,
  ],
  // (With a leak detector the handle keeps a CachedBlock: the other path.)
  [
    "GpuCachingAllocator (queue-order, leak detector)",
    (d) => new GpuCachingAllocator(d, { leakDetector: new LeakDetector() }),
    false,
  ],
  [
    "GpuCachingAllocator (after-fence, leak detector)",
    (d) =>
      new GpuCachingAllocator(d, {
        reuse: "after-fence",
        leakDetector: new LeakDetector(),
      }),
    true,
  ],
  ["GpuWatermarkAllocator", (d) => new GpuWatermarkAllocator(d), true],
  ["GpuPlannedAllocator", (d) => new GpuPlannedAllocator(d), false],
];

type Op =
  | { alloc: number }
  | { free: number }
  | { complete: true }
  | { step: true };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      alloc: fc.oneof(
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 3_000_000 }),
      ),
    }),
  },
  { weight: 4, arbitrary: fc.record({ free: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ complete: true as const }) },
  { weight: 1, arbitrary: fc.constant({ step: true as const }) },
);

interface Range {
  buffer: unknown;
  offset: number;
  size: number;
}

const overlaps = (a: Range, b: Range): boolean =>
  a.buffer === b.buffer && a.offset < b.offset + b.size &&
  b.offset < a.offset + a.size;

describe("GPU allocators on a mock device (model)", () => {
  for (const [name, make, afterFence] of makers) {
    it(`${name} keeps live ranges aligned and disjoint, and waits for the queue when it must`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(opArb, { minLength: 1, maxLength: 40 }),
          async (ops) => {
            const gpu = mockGpu();
            const allocator = make(gpu.device);
            const alignment = allocator.source.alignment;
            const live: GpuAllocation[] = [];
            // freed while the queue was busy: not reusable yet (after-fence)
            let fenced: Range[] = [];
            for (const op of ops) {
              if ("alloc" in op) {
                const a = allocator.allocate(op.alloc);
                const r = { buffer: a.buffer, offset: a.offset, size: a.size };
                assert.equal(a.size, op.alloc);
                assert.equal(a.offset % alignment, 0);
                assert.ok(a.offset + a.size <= a.buffer.size);
                assert.ok(!(a.buffer as unknown as MockGpuBuffer).destroyed);
                for (const l of live) assert.ok(!overlaps(r, l), "overlap");
                if (afterFence) {
                  for (const f of fenced) {
                    assert.ok(!overlaps(r, f), "reused before the queue ran");
                  }
                }
                live.push(a);
                gpu.device.queue.submit([]); // the work that uses it
              } else if ("free" in op) {
                if (live.length === 0) continue;
                const [a] = live.splice(op.free % live.length, 1);
                const r = { buffer: a.buffer, offset: a.offset, size: a.size };
                a.release();
                if (gpu.busy) fenced.push(r);
              } else if ("complete" in op) {
                gpu.complete();
                fenced = [];
                if (!(allocator instanceof GpuPlannedAllocator)) {
                  await allocator.synchronize();
                }
              } else if (allocator instanceof GpuPlannedAllocator) {
                allocator.endStep();
              }
            }
            for (const a of live) a.release();
            gpu.complete();
            if (allocator instanceof GpuCachingAllocator) {
              await allocator.synchronize();
              allocator.caching.validate();
              assert.equal(allocator.caching.allocatedBytes, 0);
            } else if (allocator instanceof GpuWatermarkAllocator) {
              await allocator.synchronize();
              allocator.watermark.validate();
              assert.equal(allocator.watermark.currentAllocatedBytes, 0);
            } else {
              allocator.pool.validate();
              assert.equal(allocator.pool.liveBytes, 0);
            }
            allocator.emptyCache();
            assert.equal(allocator.source.reservedBytes, 0);
            assert.equal(gpu.live.size, 0, "a buffer was not destroyed");
          },
        ),
        { numRuns: modelRuns() },
      );
    });
  }
});
