/**
 * Adversarial tests of `@allot/webgpu`'s storage edges, from the public API:
 * zero-element GPU buffers behave like host ones, and hostile sizes, shapes,
 * data and options are refused with typed errors and no change of state.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer, type Dtype } from "@allot/storage";
import { DeviceLostError } from "./device_lost_error.ts";
import { GpuBufferBackend } from "./gpu_buffer_backend.ts";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";
import { GpuSegmentSource } from "./gpu_segment_source.ts";
import { GpuStaging } from "./gpu_staging.ts";
import { newDevice, sharedDevice, skip } from "./_test_device.ts";
import {
  assertRefusesAll,
  assertRejectsAll,
  hostileNumbers,
  hostileObjects,
  HostileTally,
} from "../core/_test_hostile.ts";

const tally = new HostileTally();

describe("@allot/webgpu adversarial", { skip }, () => {
  it("zero-element GPU buffers: fromData, zeros, read, copyFrom, contiguous work like the host path", async () => {
    const device = await sharedDevice();
    const caching = new GpuCachingAllocator(device);
    const gpu = {
      allocator: caching.asAllocator(),
      backend: new GpuBufferBackend(device),
    };
    const dtypes: Dtype[] = ["f32", "i32", "u8", "f64", "bool"];
    for (const dtype of dtypes) {
      for (const shape of [[0], [3, 0], [0, 2, 4]]) {
        using host = Buffer.zeros(dtype, shape);
        using a = Buffer.fromData(dtype, [], { shape, ...gpu });
        using z = Buffer.zeros(dtype, shape, gpu);
        assert.deepEqual(a.shape, shape);
        assert.deepEqual([...(await a.read())], [...host.toData()]);
        assert.equal((await z.read()).length, 0);
        z.copyFrom(a);
        using packed = a.contiguous();
        assert.deepEqual(packed.shape, shape);
        if (shape.length > 1) {
          using t = a.transpose();
          using tp = t.contiguous();
          assert.equal(tp.shape.length, shape.length);
          assert.equal((await tp.read()).length, 0);
        }
        using c = a.clone();
        assert.equal((await c.read()).length, 0);
      }
    }
    // Empty and non-empty together: a zero-element slice of real storage.
    using full = Buffer.fromData("f32", [1, 2, 3, 4], {
      shape: [2, 2],
      ...gpu,
    });
    using none = full.slice(0, { start: 2 });
    assert.deepEqual(none.shape, [0, 2]);
    assert.equal((await none.read()).length, 0);
    assert.deepEqual([...(await full.read())], [1, 2, 3, 4]);
  });

  it("zero-element GPU buffers refuse work after the device is destroyed", async () => {
    const device = await newDevice("zero-lost");
    const gpu = {
      allocator: new GpuCachingAllocator(device).asAllocator(),
      backend: new GpuBufferBackend(device),
    };
    const empty = Buffer.zeros("f32", [0], gpu);
    device.destroy();
    await device.lost;
    await assert.rejects(() => empty.read(), DeviceLostError);
    empty.release();
  });

  it("GPU Buffer.fromData and zeros refuse hostile data and shapes, allocating nothing", async () => {
    const device = await sharedDevice();
    const caching = new GpuCachingAllocator(device);
    const gpu = {
      allocator: caching.asAllocator(),
      backend: new GpuBufferBackend(device),
    };
    const state = () => {
      const s = caching.memoryStats();
      return JSON.stringify(s);
    };
    tally.add(
      "Buffer.fromData(data) on GPU",
      assertRefusesAll(
        "Buffer.fromData(data) on GPU",
        [
          ...hostileObjects().filter((h) =>
            h.name !== "[]" && h.name !== "trap proxy"
          ),
          { name: "[1n]", value: [1n] },
          { name: "[Symbol()]", value: [Symbol("x")] },
        ],
        (v) => Buffer.fromData("f32", v as number[], gpu),
        { snapshot: state },
      ),
    );
    tally.add(
      "Buffer.zeros(shape) on GPU",
      assertRefusesAll(
        "Buffer.zeros(shape) on GPU",
        hostileNumbers().map((h) => ({ name: `[${h.name}]`, value: [h.value] }))
          .filter((h) => h.name !== "[[8]]" && h.name !== "[new Number(8)]"),
        (v) => Buffer.zeros("f32", v as number[], gpu),
        { snapshot: state },
      ),
    );
  });

  it("GpuStaging.download and upload refuse hostile offsets and lengths", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device);
    const buffer = device.createBuffer({
      size: 256,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
        GPUBufferUsage.COPY_DST,
    });
    const binding = { buffer, offset: 0, size: 256 };
    const state = () => JSON.stringify(staging.stats());
    tally.add(
      "GpuStaging.download(byteLength)",
      await assertRejectsAll(
        "GpuStaging.download(byteLength)",
        [...hostileNumbers(), { name: "257", value: 257 }].filter((h) =>
          h.value !== undefined && h.value !== null
        ),
        (v) => staging.download(binding, { byteLength: v as number }),
        { snapshot: state },
      ),
    );
    tally.add(
      "GpuStaging.download(byteOffset)",
      await assertRejectsAll(
        "GpuStaging.download(byteOffset)",
        [...hostileNumbers(), { name: "300", value: 300 }].filter((h) =>
          h.value !== undefined && h.value !== null
        ),
        (v) => staging.download(binding, { byteOffset: v as number }),
        { snapshot: state },
      ),
    );
    staging.release();
    buffer.destroy();
  });

  it("GpuPlannedAllocator refuses hostile options, sizes and trim targets, changing nothing; endStep() in odd places", async () => {
    const device = await sharedDevice();
    tally.add(
      "new GpuPlannedAllocator(device, options)",
      assertRefusesAll(
        "new GpuPlannedAllocator(device, options)",
        hostileObjects().filter((h) =>
          !["undefined", "{}", "[]", "() => {}"].includes(h.name)
        ),
        (v) => new GpuPlannedAllocator(device, v as object),
      ),
    );
    const accepted: Record<string, string[]> = {
      // null, like undefined, means the default (`??`)
      maxHeldRatio: ["undefined", "null", "1.5", "2^53", "2^53+2", "1e308"],
      strict: ["undefined", "true"],
    };
    for (const [key, ok] of Object.entries(accepted)) {
      tally.add(
        `new GpuPlannedAllocator({ ${key} })`,
        assertRefusesAll(
          `new GpuPlannedAllocator({ ${key} })`,
          hostileNumbers().filter((h) => !ok.includes(h.name)),
          (v) => new GpuPlannedAllocator(device, { [key]: v }),
        ),
      );
    }
    const allocator = new GpuPlannedAllocator(device);
    allocator.endStep(); // no step yet
    allocator.endStep();
    const live = allocator.allocate(1000);
    allocator.allocate(70_000).release();
    const state = () => [
      allocator.pool.reservedBytes,
      allocator.pool.requestedBytes,
      allocator.source.reservedBytes,
      live.offset,
    ];
    for (
      const [label, call] of [
        [
          "GpuPlannedAllocator.allocate()",
          (v: unknown) => allocator.allocate(v as number),
        ],
        [
          "GpuPlannedAllocator.trim()",
          (v: unknown) => allocator.trim(v as number),
        ],
      ] as const
    ) {
      tally.add(
        label,
        assertRefusesAll(
          label,
          hostileNumbers().filter((h) =>
            !(label.endsWith("trim()") && h.name === "undefined")
          ),
          call,
          { snapshot: state },
        ),
      );
    }
    for (let s = 0; s < 3; s++) {
      allocator.allocate(4096).release();
      allocator.endStep();
      allocator.endStep();
      if (s === 1) allocator.emptyCache();
    }
    allocator.pool.validate();
    live.release();
    allocator.emptyCache();
    assert.equal(allocator.source.reservedBytes, 0);
  });

  it("GpuSegmentSource refuses hostile segment sizes, changing nothing", async () => {
    const device = await sharedDevice();
    const source = new GpuSegmentSource(device);
    const state = () => source.reservedBytes;
    tally.add(
      "GpuSegmentSource.tryAllocateSegment()",
      assertRefusesAll(
        "GpuSegmentSource.tryAllocateSegment()",
        hostileNumbers(),
        (v) => source.tryAllocateSegment(v as number),
        { snapshot: state },
      ),
    );
    console.log(
      `webgpu adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });
});
