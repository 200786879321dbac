// GpuSegmentSource's `usage` option: pools of uniform, vertex, index and
// indirect buffers. The usage is checked (known bits, no mapping, not 0) with
// nothing made when refused; it sets the block alignment and the binding
// limit; every GPU allocator gets it through `source`; the copy kernels
// refuse blocks of a pool without STORAGE.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError } from "@allot/core";
import { GpuSegmentSource } from "./gpu_segment_source.ts";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuWatermarkAllocator } from "./gpu_watermark_allocator.ts";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { GpuKernels } from "./gpu_kernels.ts";
import { GpuStaging } from "./gpu_staging.ts";
import { _Usage } from "./_flags.ts";
import { sharedDevice, skip } from "./_test_device.ts";
import { type MockGpu, mockGpu } from "./_test_mock_device.ts";
import { modelRuns } from "../core/_test_faults.ts";

const U = _Usage;
const DEFAULT = U.STORAGE | U.COPY_SRC | U.COPY_DST;
const UNIFORM = U.UNIFORM | U.COPY_DST;

/** A mock device with uniform limits (and any limit overridden). */
function mock(limits: Record<string, number> = {}): MockGpu {
  const gpu = mockGpu();
  Object.assign(gpu.device.limits as unknown as Record<string, number>, {
    minUniformBufferOffsetAlignment: 64,
    maxUniformBufferBindingSize: 64 * 1024,
    ...limits,
  });
  return gpu;
}

describe("GpuSegmentSource usage (mock device)", () => {
  it("GpuSegmentSource keeps today's storage usage, alignment and label by default", () => {
    const gpu = mock();
    const source = new GpuSegmentSource(gpu.device, { label: "t" });
    assert.equal(source.usage, DEFAULT);
    assert.equal(source.alignment, 256);
    assert.equal(source.maxBindingByteLength, 128 * 2 ** 20);
    const segment = source.tryAllocateSegment(100)!;
    assert.equal(segment.memory.usage, DEFAULT);
    assert.match(segment.memory.label, /^t:segment#\d+$/);
  });

  it("GpuSegmentSource option usage sets the alignment and binding limit of each usage", () => {
    const gpu = mock({ minStorageBufferOffsetAlignment: 32 });
    const max = gpu.device.limits.maxBufferSize;
    const cases: [number, number, number][] = [
      // usage, alignment, maxBindingByteLength
      [UNIFORM, 64, 64 * 1024],
      [U.UNIFORM | U.STORAGE | U.COPY_DST, 64, 64 * 1024],
      [U.STORAGE, 32, 128 * 2 ** 20],
      [U.VERTEX | U.COPY_DST, 4, max],
      [U.INDEX | U.COPY_DST, 4, max],
      [U.INDIRECT | U.STORAGE, 32, 128 * 2 ** 20],
      [U.COPY_SRC, 4, max],
      [U.QUERY_RESOLVE | U.COPY_SRC, 256, max],
    ];
    for (const [usage, alignment, binding] of cases) {
      const source = new GpuSegmentSource(gpu.device, { usage });
      assert.equal(source.usage, usage);
      assert.equal(source.alignment, alignment, `usage ${usage}`);
      assert.equal(source.maxBindingByteLength, binding, `usage ${usage}`);
      const segment = source.tryAllocateSegment(10)!;
      assert.equal(segment.memory.usage, usage);
      source.freeSegment(segment);
    }
    // the larger alignment when both binding kinds are there
    const wide = mock({ minStorageBufferOffsetAlignment: 256 });
    const both = new GpuSegmentSource(wide.device, {
      usage: U.UNIFORM | U.STORAGE,
    });
    assert.equal(both.alignment, 256);
  });

  it("GpuSegmentSource names a usage other than the default in buffer labels, summaries and snapshots", () => {
    const gpu = mock();
    const allocator = new GpuCachingAllocator(gpu.device, {
      source: { usage: UNIFORM, label: "u" },
    });
    using a = allocator.allocate(16);
    assert.match(a.buffer.label, /^u:segment#\d+ \[COPY_DST\|UNIFORM\] /);
    assert.equal(allocator.caching.label, "webgpu [COPY_DST|UNIFORM]");
    assert.match(allocator.caching.memorySummary(), /COPY_DST\|UNIFORM/);
    assert.equal(
      allocator.caching.snapshot().allocator,
      allocator.caching.label,
    );
    // a label given by the caller wins
    const named = new GpuCachingAllocator(gpu.device, {
      label: "uniforms",
      source: { usage: UNIFORM },
    });
    assert.equal(named.caching.label, "uniforms");
    assert.equal(new GpuCachingAllocator(gpu.device).caching.label, "webgpu");
  });

  it("GpuSegmentSource refuses hostile usages with a typed error and makes nothing", () => {
    const bad: unknown[] = [
      -1,
      0,
      1.5,
      2 ** 40,
      0x400,
      NaN,
      Infinity,
      U.MAP_READ | U.COPY_DST,
      U.MAP_WRITE | U.COPY_SRC,
      U.MAP_READ,
      "72",
      null,
      72n,
      { valueOf: () => 72 },
    ];
    const makers: [string, (gpu: MockGpu, usage: unknown) => unknown][] = [
      [
        "source",
        (gpu, usage) =>
          new GpuSegmentSource(gpu.device, { usage: usage as number }),
      ],
      ["caching", (gpu, usage) =>
        new GpuCachingAllocator(gpu.device, {
          source: { usage: usage as number },
        })],
      ["watermark", (gpu, usage) =>
        new GpuWatermarkAllocator(gpu.device, {
          source: { usage: usage as number },
        })],
      ["planned", (gpu, usage) =>
        new GpuPlannedAllocator(gpu.device, {
          source: { usage: usage as number },
        })],
    ];
    for (const [name, make] of makers) {
      for (const usage of bad) {
        const gpu = mock();
        assert.throws(
          () => make(gpu, usage),
          (e: unknown) =>
            e instanceof InvalidArgumentError && /usage/.test(e.message) &&
            (e as { name?: unknown }).name === "InvalidArgumentError",
          `${name}: ${String(usage)}`,
        );
        assert.equal(gpu.live.size, 0);
      }
    }
    // the message says why mapping is refused and where to go instead
    const gpu = mock();
    assert.throws(
      () =>
        new GpuSegmentSource(gpu.device, { usage: U.MAP_READ | U.COPY_DST }),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        /MAP_READ/.test(e.message) && /GpuStaging/.test(e.message) &&
        /0x9/.test(e.message),
    );
    assert.throws(
      () => new GpuSegmentSource(gpu.device, { usage: 2 ** 40 }),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        e.message.includes(String(2 ** 40)) && /0x3ff/.test(e.message),
    );
  });

  it("GpuSegmentSource reads the usage option once: a changing getter cannot pass one value and use another", () => {
    const gpu = mock();
    let reads = 0;
    const options = {
      get usage(): number {
        reads++;
        return reads === 1 ? UNIFORM : U.MAP_READ | U.COPY_DST;
      },
    };
    const source = new GpuSegmentSource(gpu.device, options);
    assert.equal(reads, 1);
    assert.equal(source.usage, UNIFORM);
    assert.equal(source.tryAllocateSegment(8)!.memory.usage, UNIFORM);
    // the other order: refused at its one read, nothing made
    let reads2 = 0;
    const hostile = {
      get usage(): number {
        reads2++;
        return reads2 === 1 ? U.MAP_READ | U.COPY_DST : UNIFORM;
      },
    };
    const other = mock();
    assert.throws(
      () => new GpuCachingAllocator(other.device, { source: hostile }),
      InvalidArgumentError,
    );
    assert.equal(reads2, 1);
    assert.equal(other.live.size, 0);
  });

  it("GpuSegmentSource checks the uniform limits only for a uniform usage", () => {
    const bare = mockGpu(); // a device that reports no uniform limits
    assert.equal(new GpuSegmentSource(bare.device).usage, DEFAULT);
    assert.equal(
      new GpuSegmentSource(bare.device, { usage: U.VERTEX }).alignment,
      4,
    );
    assert.throws(
      () => new GpuSegmentSource(bare.device, { usage: UNIFORM }),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        /minUniformBufferOffsetAlignment/.test(e.message),
    );
    const lying = mock({ minUniformBufferOffsetAlignment: 48 });
    assert.throws(
      () => new GpuSegmentSource(lying.device, { usage: UNIFORM }),
      InvalidArgumentError,
    );
    assert.equal(bare.live.size + lying.live.size, 0);
  });

  it("GpuCachingAllocator caps large segments at the storage binding size only for a storage pool", () => {
    const gpu = mock({ maxStorageBufferBindingSize: 8 * 2 ** 20 });
    const uniform = new GpuCachingAllocator(gpu.device, {
      source: { usage: UNIFORM },
    });
    // the uniform binding limit (64 KiB) does not shrink the pool's segments
    using big = uniform.allocate(3 * 2 ** 20);
    using small = uniform.allocate(100);
    assert.equal(big.buffer.usage, UNIFORM);
    assert.ok(big.buffer.size >= 3 * 2 ** 20);
    assert.equal(small.offset % 64, 0);
    const storage = new GpuCachingAllocator(gpu.device);
    const blocks = [
      storage.allocate(3 * 2 ** 20),
      storage.allocate(3 * 2 ** 20),
    ];
    for (const b of blocks) assert.ok(b.buffer.size <= 8 * 2 ** 20);
    for (const b of blocks) b.release();
  });

  it("GpuSegmentSource refuses host-visible segments for a usage staging cannot copy", () => {
    const gpu = mock();
    const vertex = new GpuSegmentSource(gpu.device, { usage: U.VERTEX });
    assert.equal(
      vertex.tryAllocateSegment(64, { hostVisible: true }),
      undefined,
    );
    assert.equal(vertex.refusalCount, 1);
    assert.equal(gpu.live.size, 0);
    const private_ = vertex.tryAllocateSegment(64)!;
    assert.equal(vertex.isHostVisible(private_.memory), false);
    const uniform = new GpuSegmentSource(gpu.device, { usage: UNIFORM });
    const shared = uniform.tryAllocateSegment(64, { hostVisible: true })!;
    assert.ok(uniform.isHostVisible(shared.memory));
    assert.match(shared.memory.label, /\[COPY_DST\|UNIFORM\] \(shared\)$/);
  });

  it("GpuCachingAllocator, GpuWatermarkAllocator and GpuPlannedAllocator pass source.usage through", () => {
    const gpu = mock();
    const usage = U.INDEX | U.COPY_DST;
    const caching = new GpuCachingAllocator(gpu.device, { source: { usage } });
    const watermark = new GpuWatermarkAllocator(gpu.device, {
      source: { usage },
    });
    const planned = new GpuPlannedAllocator(gpu.device, { source: { usage } });
    for (const allocator of [caching, watermark, planned]) {
      assert.equal(allocator.source.usage, usage);
      assert.equal(allocator.source.alignment, 4);
      const a = allocator.allocate(6);
      const b = allocator.allocate(6);
      assert.equal(a.buffer.usage, usage);
      assert.equal(b.buffer.usage, usage);
      assert.equal(a.offset % 4, 0);
      assert.equal(b.offset % 4, 0);
      a.release();
      b.release();
    }
  });

  it("blocks of every usage sit at offsets aligned for that usage and never overlap (model)", () => {
    const pow2 = (lo: number, hi: number) =>
      fc.integer({ min: lo, max: hi }).map((k) => 2 ** k);
    const usageArb = fc.integer({ min: 1, max: 0x3ff })
      .map((u) => u & ~(U.MAP_READ | U.MAP_WRITE))
      .filter((u) => u !== 0);
    fc.assert(
      fc.property(
        usageArb,
        pow2(2, 8), // minStorageBufferOffsetAlignment
        pow2(2, 8), // minUniformBufferOffsetAlignment
        fc.constantFrom("caching", "watermark", "planned"),
        fc.array(
          fc.oneof(
            fc.integer({ min: 0, max: 300 }),
            fc.integer({ min: 0, max: 70_000 }),
          ),
          { minLength: 1, maxLength: 40 },
        ),
        fc.array(fc.boolean(), { maxLength: 40 }),
        (usage, storageAlign, uniformAlign, kind, sizes, frees) => {
          const gpu = mock({
            minStorageBufferOffsetAlignment: storageAlign,
            minUniformBufferOffsetAlignment: uniformAlign,
          });
          const options = { source: { usage } };
          const allocator = kind === "caching"
            ? new GpuCachingAllocator(gpu.device, options)
            : kind === "watermark"
            ? new GpuWatermarkAllocator(gpu.device, options)
            : new GpuPlannedAllocator(gpu.device, options);
          let want = 4;
          if (usage & U.STORAGE) want = Math.max(want, storageAlign);
          if (usage & U.UNIFORM) want = Math.max(want, uniformAlign);
          if (usage & U.QUERY_RESOLVE) want = Math.max(want, 256);
          assert.equal(allocator.source.alignment, want);
          const live: GpuAllocation[] = [];
          sizes.forEach((size, i) => {
            const a = allocator.allocate(size);
            assert.equal(a.buffer.usage, usage);
            assert.equal(a.offset % want, 0, `offset ${a.offset} % ${want}`);
            assert.ok(a.offset + a.size <= a.buffer.size);
            for (const b of live) {
              if (b.buffer !== a.buffer || a.size === 0 || b.size === 0) {
                continue;
              }
              assert.ok(
                a.offset + a.size <= b.offset || b.offset + b.size <= a.offset,
                `[${a.offset}, +${a.size}) overlaps [${b.offset}, +${b.size})`,
              );
            }
            live.push(a);
            if (frees[i] && live.length > 1) live.shift()!.release();
          });
          for (const a of live) a.release();
        },
      ),
      { numRuns: modelRuns(300) },
    );
  });
});

describe("GpuSegmentSource usage (WebGPU device)", { skip }, () => {
  it("a uniform pool's blocks bind as uniform buffers in a compute pass and read back right", async () => {
    const device = await sharedDevice();
    const uniforms = new GpuCachingAllocator(device, {
      source: { usage: UNIFORM },
    });
    const storage = new GpuCachingAllocator(device);
    assert.equal(
      uniforms.source.alignment,
      Math.max(4, device.limits.minUniformBufferOffsetAlignment),
    );
    assert.equal(
      uniforms.source.maxBindingByteLength,
      device.limits.maxUniformBufferBindingSize,
    );
    const n = 5;
    // A free segment that the blocks are carved from (a miss while nothing
    // held is free takes a buffer of just the request).
    uniforms.allocate(4096).release();
    const blocks = Array.from({ length: n }, () => uniforms.allocate(16));
    for (const [i, block] of blocks.entries()) {
      assert.equal(block.buffer.usage, UNIFORM);
      assert.equal(
        block.offset % device.limits.minUniformBufferOffsetAlignment,
        0,
      );
      device.queue.writeBuffer(
        block.buffer,
        block.offset,
        new Uint32Array([i + 1, 10 * (i + 1), 100, 7]),
      );
    }
    // several blocks in one buffer: the uniform pool shares its segments
    // (256-byte blocks in segments of at least 1 KiB, where the device's
    // uniform alignment is at most 512)
    if (device.limits.minUniformBufferOffsetAlignment <= 512) {
      assert.ok(blocks[1].buffer === blocks[0].buffer);
    }
    using out = storage.allocate(n * 4);
    const module = device.createShaderModule({
      code: `
        struct Params { a: u32, b: u32, c: u32, d: u32 }
        @group(0) @binding(0) var<uniform> params: Params;
        @group(0) @binding(1) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(1)
        fn main() {
          out[params.a - 1u] = params.a + params.b + params.c * params.d;
        }`,
    });
    const pipeline = device.createComputePipeline({
      layout: "auto",
      compute: { module, entryPoint: "main" },
    });
    device.pushErrorScope("validation");
    const encoder = device.createCommandEncoder();
    for (const block of blocks) {
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(
        0,
        device.createBindGroup({
          layout: pipeline.getBindGroupLayout(0),
          entries: [
            {
              binding: 0,
              resource: {
                buffer: block.buffer,
                offset: block.offset,
                size: block.size,
              },
            },
            {
              binding: 1,
              resource: { buffer: out.buffer, offset: out.offset, size: n * 4 },
            },
          ],
        }),
      );
      pass.dispatchWorkgroups(1);
      pass.end();
    }
    device.queue.submit([encoder.finish()]);
    assert.equal(await device.popErrorScope(), null);
    const staging = new GpuStaging(device);
    const bytes = await staging.download(out);
    const got = Array.from(new Uint32Array(bytes.buffer, bytes.byteOffset, n));
    assert.deepEqual(
      got,
      Array.from({ length: n }, (_, i) => (i + 1) * 11 + 700),
    );
    staging.release();
    for (const block of blocks) block.release();
  });

  it("blocks of random usages on the device sit at offsets aligned to its limit for the usage and never overlap", async () => {
    const device = await sharedDevice();
    const limits = device.limits;
    const pooled = [
      DEFAULT,
      UNIFORM,
      U.UNIFORM | U.STORAGE | U.COPY_DST,
      U.VERTEX | U.COPY_DST,
      U.INDEX | U.COPY_DST,
      U.INDIRECT | U.STORAGE | U.COPY_DST,
      U.VERTEX | U.INDEX | U.COPY_SRC | U.COPY_DST,
    ];
    device.pushErrorScope("validation");
    fc.assert(
      fc.property(
        fc.constantFrom(...pooled),
        fc.constantFrom("caching", "watermark"),
        fc.array(fc.integer({ min: 0, max: 5000 }), {
          minLength: 1,
          maxLength: 12,
        }),
        (usage, kind, sizes) => {
          const options = { source: { usage } };
          const allocator = kind === "caching"
            ? new GpuCachingAllocator(device, options)
            : new GpuWatermarkAllocator(device, options);
          let want = 4;
          if (usage & U.STORAGE) {
            want = Math.max(want, limits.minStorageBufferOffsetAlignment);
          }
          if (usage & U.UNIFORM) {
            want = Math.max(want, limits.minUniformBufferOffsetAlignment);
          }
          const live = sizes.map((size) => allocator.allocate(size));
          for (const [i, a] of live.entries()) {
            assert.equal(a.buffer.usage, usage);
            assert.equal(a.offset % want, 0);
            for (const b of live.slice(0, i)) {
              if (b.buffer !== a.buffer || a.size === 0 || b.size === 0) {
                continue;
              }
              assert.ok(
                a.offset + a.size <= b.offset || b.offset + b.size <= a.offset,
              );
            }
          }
          for (const a of live) a.release();
          allocator.emptyCache();
        },
      ),
      { numRuns: 25 },
    );
    assert.equal(await device.popErrorScope(), null);
  });

  it("GpuKernels refuse a block of a pool without STORAGE with a typed error and no GPU error", async () => {
    const device = await sharedDevice();
    const uniforms = new GpuCachingAllocator(device, {
      source: { usage: UNIFORM | U.COPY_SRC },
    });
    const storage = new GpuCachingAllocator(device);
    const kernels = new GpuKernels(device);
    using u = uniforms.allocate(64);
    using s = storage.allocate(64);
    device.pushErrorScope("validation");
    assert.throws(
      () => kernels.fill(u, 3, { dtype: "u32" }),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        /lacks STORAGE usage/.test(e.message),
    );
    assert.throws(
      () =>
        kernels.copyStrided(
          u,
          { shape: [4], strides: [2], offset: 0 },
          s,
          { shape: [4], strides: [1], offset: 0 },
          "u32",
        ),
      (e: unknown) =>
        e instanceof InvalidArgumentError && /STORAGE/.test(e.message),
    );
    assert.equal(await device.popErrorScope(), null);
  });

  it("vertex and index pools make 4-aligned blocks that take writeBuffer and copies", async () => {
    const device = await sharedDevice();
    const vertices = new GpuCachingAllocator(device, {
      source: { usage: U.VERTEX | U.COPY_DST | U.COPY_SRC },
    });
    assert.equal(vertices.source.alignment, 4);
    assert.equal(
      vertices.source.maxBindingByteLength,
      vertices.source.maxSegmentByteLength,
    );
    // the caching allocator's own minimum block size still rounds blocks up
    const blocks = [vertices.allocate(12), vertices.allocate(8)];
    device.pushErrorScope("validation");
    for (const [i, b] of blocks.entries()) {
      assert.equal(b.offset % 4, 0);
      device.queue.writeBuffer(
        b.buffer,
        b.offset,
        new Float32Array([i, i + 0.5]),
      );
    }
    const staging = new GpuStaging(device);
    const bytes = await staging.download(blocks[1], { byteLength: 8 });
    assert.deepEqual(
      Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, 2)),
      [1, 1.5],
    );
    assert.equal(await device.popErrorScope(), null);
    staging.release();
    for (const b of blocks) b.release();
  });
});
