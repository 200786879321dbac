import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { Buffer } from "@allot/storage";
import { GpuBufferBackend } from "./gpu_buffer_backend.ts";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { MAX_RANK } from "./gpu_kernels.ts";
import { sharedDevice, skip } from "./_test_device.ts";

describe("GPU contiguous() above rank 16", { skip }, () => {
  it("packs a rank-18 view no dimension of which folds (one dispatch per leading index) as the CPU does", async () => {
    const device = await sharedDevice();
    const gpu = {
      allocator: new GpuCachingAllocator(device).asAllocator(),
      backend: new GpuBufferBackend(device),
    };
    const rank = 18;
    assert.ok(rank > MAX_RANK);
    const shape = new Array(rank).fill(2);
    const data = Float32Array.from({ length: 1 << rank }, (_, i) => i);
    using g = Buffer.fromData("f32", data, { shape, ...gpu });
    using c = Buffer.fromData("f32", data, { shape });
    const axes = [...shape.keys()].reverse(); // strides 1, 2, 4, ...: no fold
    using gv = g.permute(axes);
    using cv = c.permute(axes);
    using packed = gv.contiguous();
    const got = await packed.read();
    const expected = cv.toData();
    assert.equal(got.length, expected.length);
    assert.ok(got.every((v, i) => v === expected[i]));
  });

  it("model: random views of rank 17 to 24 (permuted, sliced, broadcast, unit dims) pack as on the CPU", async () => {
    const device = await sharedDevice();
    const gpu = {
      allocator: new GpuCachingAllocator(device).asAllocator(),
      backend: new GpuBufferBackend(device),
    };
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 3 }), {
          minLength: 17,
          maxLength: 24,
        }).filter((s) => s.reduce((a, b) => a * b, 1) <= 1 << 14),
        fc.infiniteStream(fc.nat()),
        fc.nat(),
        async (shape, picks, sliced) => {
          const n = shape.reduce((a, b) => a * b, 1);
          const data = Int32Array.from({ length: n }, (_, i) => i * 7 - 3);
          using g = Buffer.fromData("i32", data, { shape, ...gpu });
          using c = Buffer.fromData("i32", data, { shape });
          const it = picks[Symbol.iterator]();
          const axes = [...shape.keys()];
          for (let i = axes.length - 1; i > 0; i--) {
            const j = it.next().value % (i + 1);
            [axes[i], axes[j]] = [axes[j], axes[i]];
          }
          const dim = sliced % shape.length;
          const view = (b: Buffer<"i32">) => {
            const p = b.permute(axes);
            const s = p.slice(axes.indexOf(dim), {
              step: shape[dim] > 1 ? -1 : 1,
            });
            p.release();
            return s;
          };
          using gv = view(g);
          using cv = view(c);
          using packed = gv.contiguous();
          assert.deepEqual([...await packed.read()], [...cv.toData()]);
          // and through a strided destination (copyFrom)
          using dst = Buffer.zeros("i32", gv.shape, gpu);
          using dstView = dst.permute([...gv.shape.keys()].reverse());
          using srcView = gv.permute([...gv.shape.keys()].reverse());
          dstView.copyFrom(srcView);
          assert.deepEqual([...await dst.read()], [...cv.toData()]);
        },
      ),
      { numRuns: 15 },
    );
  });
});
