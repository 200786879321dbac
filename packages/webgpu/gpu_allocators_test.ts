import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  InvalidArgumentError,
  OutOfMemoryError,
  UseAfterFreeError,
} from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuWatermarkAllocator } from "./gpu_watermark_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { GpuKernels } from "./gpu_kernels.ts";
import { GpuStaging } from "./gpu_staging.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { newDevice, sharedDevice, skip } from "./_test_device.ts";

type Any = GpuCachingAllocator | GpuWatermarkAllocator;

const makers: [string, (d: GPUDevice) => Any][] = [
  [
    "GpuCachingAllocator (after-fence)",
    (d) => new GpuCachingAllocator(d, { reuse: "after-fence" }),
  ],
  ["GpuWatermarkAllocator", (d) => new GpuWatermarkAllocator(d)],
];

function checkDisjoint(live: GpuAllocation[], alignment: number): void {
  const byBuffer = new Map<GPUBuffer, [number, number][]>();
  for (const a of live) {
    assert.equal(a.offset % alignment, 0, `offset ${a.offset} unaligned`);
    assert.ok(a.offset + a.size <= a.buffer.size, "range past its buffer");
    const list = byBuffer.get(a.buffer) ?? [];
    list.push([a.offset, a.offset + a.size]);
    byBuffer.set(a.buffer, list);
  }
  for (const list of byBuffer.values()) {
    list.sort((x, y) => x[0] - y[0]);
    for (let i = 1; i < list.length; i++) {
      assert.ok(list[i - 1][1] <= list[i][0], "live ranges overlap");
    }
  }
}

describe("GPU allocators", { skip }, () => {
  for (const [name, make] of makers) {
    it(`${name} keeps live ranges disjoint, aligned and intact over random sequences with real buffers`, async () => {
      const device = await sharedDevice();
      const kernels = GpuKernels.of(device);
      const staging = new GpuStaging(device);
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.oneof(
              {
                weight: 5,
                arbitrary: fc.record({
                  alloc: fc.integer({ min: 1, max: 300_000 }),
                }),
              },
              { weight: 4, arbitrary: fc.record({ free: fc.nat() }) },
              { weight: 1, arbitrary: fc.constant({ sync: true }) },
            ),
            { maxLength: 30 },
          ),
          async (ops) => {
            const allocator = make(device);
            const live: { a: GpuAllocation; tag: number }[] = [];
            let tag = 1;
            for (const op of ops) {
              if ("alloc" in op) {
                const a = allocator.allocate(op.alloc);
                assert.equal(a.size, op.alloc);
                // Stamp the range so an overlap on the GPU would show.
                kernels.fill(a, tag & 0xff, { dtype: "u8" });
                live.push({ a, tag: tag++ });
              } else if ("free" in op) {
                if (live.length > 0) {
                  live.splice(op.free % live.length, 1)[0].a.release();
                }
              } else {
                await allocator.synchronize();
              }
              checkDisjoint(live.map((l) => l.a), allocator.source.alignment);
            }
            for (const { a, tag } of live) {
              const bytes = await staging.download(a);
              assert.ok(
                bytes.every((b) => b === (tag & 0xff)),
                `${a} was overwritten`,
              );
              a.release();
            }
            await allocator.synchronize();
            if (allocator instanceof GpuCachingAllocator) {
              allocator.caching.validate();
              assert.equal(allocator.caching.allocatedBytes, 0);
            } else {
              assert.equal(allocator.watermark.currentAllocatedBytes, 0);
            }
            allocator.emptyCache();
            assert.equal(allocator.source.reservedBytes, 0);
          },
        ),
        { numRuns: 8 },
      );
    });

    it(`${name} reuses a freed range only after the queue finished the work before the free`, async () => {
      const device = await sharedDevice();
      const allocator = make(device);
      const kernels = GpuKernels.of(device);
      const a = allocator.allocate(1 << 16);
      const where = [a.buffer, a.offset] as const;
      kernels.fill(a, 1, { dtype: "f32" }); // submitted work that uses `a`
      const fence = allocator.stream.fence();
      a.release();
      assert.equal(allocator.pendingFreeCount, 1);
      assert.ok(allocator.pendingFreeBytes >= 1 << 16);
      const b = allocator.allocate(1 << 16);
      assert.equal(fence.completed, false);
      assert.ok(
        b.buffer !== where[0] || b.offset !== where[1],
        "reused before its fence",
      );
      await fence.wait();
      await allocator.synchronize();
      assert.equal(allocator.pendingFreeCount, 0);
      const c = allocator.allocate(1 << 16);
      assert.ok(
        c.buffer === where[0] && c.offset === where[1],
        "not reused after its fence",
      );
      b.release();
      c.release();
    });

    it(`${name} with reuse "queue-order" reuses a freed range at once`, async () => {
      const device = await sharedDevice();
      const allocator = name === "GpuCachingAllocator"
        ? new GpuCachingAllocator(device, { reuse: "queue-order" })
        : new GpuWatermarkAllocator(device, { reuse: "queue-order" });
      const a = allocator.allocate(4096);
      const offset = a.offset;
      a.release();
      using b = allocator.allocate(4096);
      assert.equal(b.offset, offset);
    });

    it(`${name}.allocate() refuses sizes above maxBufferSize and changes nothing`, async () => {
      const device = await sharedDevice();
      const allocator = make(device);
      using kept = allocator.allocate(100);
      const reserved = allocator.source.reservedBytes;
      for (const bad of [-1, 1.5, device.limits.maxBufferSize + 1]) {
        assert.throws(() => allocator.allocate(bad), InvalidArgumentError);
      }
      assert.equal(allocator.source.reservedBytes, reserved);
      assert.equal(kept.size, 100);
    });

    it(`${name} makes every handle unusable after device loss, and release never throws`, async () => {
      const device = await newDevice(`lost-${name}`);
      const allocator = make(device);
      const handles = [allocator.allocate(100), allocator.allocate(5 << 20)];
      const released = allocator.allocate(64);
      released.release();
      device.destroy();
      await device.lost;
      await Promise.resolve();
      for (const h of handles) {
        assert.throws(() => h.buffer, DeviceLostError);
        assert.throws(() => h.binding, DeviceLostError);
      }
      assert.throws(() => allocator.allocate(16), DeviceLostError);
      for (let i = 0; i < 3; i++) {
        for (const h of [...handles, released]) h.release();
      }
      allocator.emptyCache();
      await allocator.synchronize();
      assert.equal(allocator.source.reservedBytes, 0);
    });
  }

  it("GpuCachingAllocator labels its GPU buffers with the allocator, the pool and the tag scope", async () => {
    const device = await sharedDevice();
    const allocator = new GpuCachingAllocator(device);
    const small = allocator.allocate(64);
    const large = allocator.caching.withTag(
      "conv1",
      () => allocator.allocate(4 << 20),
    );
    assert.match(small.buffer.label, /segment#\d+ webgpu small pool$/);
    assert.match(
      large.buffer.label,
      /segment#\d+ webgpu large pool, tag conv1$/,
    );
    small.release();
    large.release();
    allocator.emptyCache();
    await allocator.synchronize();
  });

  it("GpuAllocation throws UseAfterFreeError after release", async () => {
    const device = await sharedDevice();
    const allocator = new GpuCachingAllocator(device);
    const a = allocator.allocate(8);
    a.release();
    assert.throws(() => a.offset, UseAfterFreeError);
    assert.throws(() => a.release(), /already released/);
  });

  it("GpuKernels and GpuStaging refuse a released allocation before submitting anything", async () => {
    const device = await sharedDevice();
    const allocator = new GpuCachingAllocator(device);
    const kernels = new GpuKernels(device);
    const staging = new GpuStaging(device);
    const a = allocator.allocate(256);
    using b = allocator.allocate(256);
    a.release();
    assert.throws(() => kernels.fill(a, 1, { dtype: "u8" }), UseAfterFreeError);
    assert.throws(() => kernels.copyBytes(b, a), UseAfterFreeError);
    await assert.rejects(staging.download(a), UseAfterFreeError);
    await assert.rejects(
      staging.upload(a, new Uint8Array(4)),
      UseAfterFreeError,
    );
    assert.equal(kernels.dispatchCount, 0);
  });

  it("GpuWatermarkAllocator serves the shared pool from staged storage buffers", async () => {
    const device = await sharedDevice();
    const allocator = new GpuWatermarkAllocator(device);
    const staging = new GpuStaging(device);
    using a = allocator.allocate(1000, { pool: "shared" });
    assert.ok(allocator.source.isHostVisible(a.buffer));
    const data = new Uint8Array(1000).map((_, i) => i * 7);
    await staging.upload(a, data);
    assert.deepEqual(await staging.download(a), data);
  });

  it("GpuCachingAllocator by default reuses in queue order: a loop that never awaits holds what it uses", () => {
    return sharedDevice().then((device) => {
      const allocator = new GpuCachingAllocator(device);
      assert.equal(allocator.reuse, "queue-order");
      const kernels = GpuKernels.of(device);
      for (let step = 0; step < 300; step++) {
        const a = allocator.allocate(1 << 16);
        const b = allocator.allocate(1 << 12);
        kernels.fill(a, step, { dtype: "f32" });
        kernels.fill(b, step, { dtype: "f32" });
        a.release();
        b.release();
      }
      assert.equal(allocator.pendingFreeCount, 0);
      const stats = allocator.caching.memoryStats();
      // two live blocks at most, so one small and one large segment at most
      assert.ok(
        allocator.source.reservedBytes <= 2 * (20 << 20),
        `reserved ${allocator.source.reservedBytes}`,
      );
      assert.equal(stats.allocatedBytes.all.current, 0);
      allocator.emptyCache();
    });
  });

  it("GpuCachingAllocator.allocateAsync() waits for held blocks instead of failing", async () => {
    const device = await sharedDevice();
    const allocator = new GpuCachingAllocator(device, {
      source: { capacityBytes: 4 << 20 },
      reuse: "after-fence",
    });
    const a = allocator.allocate(3 << 20);
    a.release(); // held for the queue fence
    assert.throws(() => allocator.allocate(3 << 20), OutOfMemoryError);
    using b = await allocator.allocateAsync(3 << 20);
    assert.equal(b.size, 3 << 20);
    assert.ok(allocator.source.reservedBytes <= 4 << 20);
  });

  it("GpuCachingAllocator keeps large segments bindable", async () => {
    const device = await sharedDevice();
    const allocator = new GpuCachingAllocator(device, {
      largeSegmentByteLength: 2 ** 30,
      ownSegmentMinByteLength: 2 ** 29,
    });
    assert.ok(
      allocator.caching.largeSegmentByteLength <=
        device.limits.maxStorageBufferBindingSize,
    );
  });
  it("GpuWatermarkAllocator with default options makes no heap far larger than a 10 MiB request", async () => {
    const device = await sharedDevice();
    const allocator = new GpuWatermarkAllocator(device);
    const a = allocator.allocate(10 << 20);
    assert.ok(
      a.buffer.size <= 32 << 20,
      `a ${a.buffer.size}-byte buffer for a 10 MiB request`,
    );
    a.release();
    await allocator.synchronize();
    allocator.emptyCache();
  });

  for (const [name, make] of makers) {
    it(`${name}.allocate() in the same task as device.destroy() is refused at once`, async () => {
      const device = await newDevice(`destroyed-${name}`);
      const allocator = make(device);
      allocator.allocate(256).release();
      device.destroy();
      assert.throws(() => allocator.allocate(256), DeviceLostError);
      await device.lost;
      assert.throws(() => allocator.allocate(256), DeviceLostError);
    });
  }
});
