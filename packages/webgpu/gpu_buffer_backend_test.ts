import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Buffer, type Dtype } from "@allot/storage";
import { GpuBufferBackend } from "./gpu_buffer_backend.ts";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { newDevice, sharedDevice, skip } from "./_test_device.ts";

const DTYPES: Dtype[] = [
  "f32",
  "i32",
  "u32",
  "f64",
  "i16",
  "u16",
  "i8",
  "u8",
  "bool",
];

type ViewOp =
  | { kind: "transpose" }
  | { kind: "slice"; dim: number; start: number; step: number }
  | { kind: "unsqueeze"; dim: number }
  | { kind: "permute"; seed: number };

const opArb: fc.Arbitrary<ViewOp> = fc.oneof(
  fc.constant({ kind: "transpose" as const }),
  fc.record({
    kind: fc.constant("slice" as const),
    dim: fc.nat(),
    start: fc.nat(),
    step: fc.constantFrom(1, 2, -1, -2, 3),
  }),
  fc.record({ kind: fc.constant("unsqueeze" as const), dim: fc.nat() }),
  fc.record({ kind: fc.constant("permute" as const), seed: fc.nat() }),
);

/** Applies the same view op to a buffer; returns a new view or the same. */
function apply<D extends Dtype>(b: Buffer<D>, op: ViewOp): Buffer<D> {
  const rank = b.shape.length;
  switch (op.kind) {
    case "transpose":
      return rank >= 2 ? b.transpose() : b.clone();
    case "slice": {
      if (rank === 0) return b.clone();
      const dim = op.dim % rank;
      const n = b.shape[dim];
      if (n === 0) return b.clone();
      const start = op.step > 0 ? op.start % n : n - 1 - (op.start % n);
      return b.slice(dim, { start, step: op.step });
    }
    case "unsqueeze":
      return rank < 7 ? b.unsqueeze(op.dim % (rank + 1)) : b.clone();
    case "permute": {
      const axes = [...Array(rank).keys()];
      let x = op.seed + 1;
      for (let i = rank - 1; i > 0; i--) {
        x = (x * 1103515245 + 12345) >>> 0;
        const j = x % (i + 1);
        [axes[i], axes[j]] = [axes[j], axes[i]];
      }
      return b.permute(axes);
    }
  }
}

/** The view's elements, row-major, read from the host data by definition. */
function reference(data: ArrayLike<number>, view: Buffer): number[] {
  const { shape, strides, offset } = view;
  const out: number[] = [];
  const index = new Array(shape.length).fill(0);
  const count = shape.reduce((a, b) => a * b, 1);
  for (let e = 0; e < count; e++) {
    let pos = offset;
    for (let d = 0; d < shape.length; d++) pos += index[d] * strides[d];
    out.push(data[pos]);
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

function valuesFor(dtype: Dtype, n: number, seed: number): number[] {
  return Array.from({ length: n }, (_, i) => {
    const x = (i * 2654435761 + seed * 97) >>> 0;
    if (dtype === "bool") return x & 1;
    if (dtype === "f32" || dtype === "f64") return (x % 2000) / 8 - 100;
    return x % 100;
  });
}

describe("GpuBufferBackend", { skip }, () => {
  it("GPU Buffer views read, pack and copy like the CPU toData() of the same views", async () => {
    const device = await sharedDevice();
    const gpu = {
      allocator: new GpuCachingAllocator(device).asAllocator(),
      backend: new GpuBufferBackend(device),
    };
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...DTYPES),
        fc.array(fc.integer({ min: 1, max: 5 }), {
          minLength: 1,
          maxLength: 4,
        }),
        fc.array(opArb, { maxLength: 5 }),
        fc.nat(),
        async (dtype, shape, ops, seed) => {
          const n = shape.reduce((a, b) => a * b, 1);
          const data = valuesFor(dtype, n, seed);
          let g = Buffer.fromData(dtype, data, { shape, ...gpu });
          let c = Buffer.fromData(dtype, data, { shape });
          for (const op of ops) {
            const g2 = apply(g, op);
            const c2 = apply(c, op);
            g.release();
            c.release();
            g = g2;
            c = c2;
          }
          assert.deepEqual(g.shape, c.shape);
          assert.deepEqual(g.strides, c.strides);
          // The CPU buffer holds the same elements as the typed array does.
          using dense = Buffer.fromData(dtype, data, { shape });
          const host = [...dense.toData()];
          const expected = [...c.toData()];
          assert.deepEqual(
            expected,
            reference(host, c),
            "the CPU Buffer's toData() disagrees with a by-definition gather",
          );
          // read() downloads the view.
          assert.deepEqual([...await g.read()], expected);
          // contiguous() runs the strided kernel.
          using packed = g.contiguous();
          assert.ok(packed.isContiguous);
          assert.deepEqual([...await packed.read()], expected);
          // copyFrom() into a strided (transposed) destination.
          const rank = g.shape.length;
          using target = Buffer.empty(dtype, [...g.shape].reverse(), gpu);
          using strided = rank >= 2
            ? target.permute([...Array(rank).keys()].reverse())
            : target.clone();
          strided.copyFrom(g);
          assert.deepEqual([...await strided.read()], expected);
          g.release();
          c.release();
        },
      ),
      { numRuns: 25 },
    );
  });

  it("Buffer.fill() on a strided GPU view writes only that view", async () => {
    const device = await sharedDevice();
    const gpu = {
      allocator: new GpuCachingAllocator(device).asAllocator(),
      backend: new GpuBufferBackend(device),
    };
    for (const dtype of ["u8", "i16", "f32", "f64"] as const) {
      using g = Buffer.fromData(dtype, [1, 2, 3, 4, 5, 6, 7, 8, 9], {
        shape: [3, 3],
        ...gpu,
      });
      using c = Buffer.fromData(dtype, [1, 2, 3, 4, 5, 6, 7, 8, 9], {
        shape: [3, 3],
      });
      using gv = g.slice(1, { step: 2 });
      using cv = c.slice(1, { step: 2 });
      gv.fill(42);
      cv.fill(42);
      assert.deepEqual([...await g.read()], [...c.toData()]);
      g.fill(7);
      assert.deepEqual([...await g.read()], new Array(9).fill(7));
    }
  });

  it("GPU Buffers throw DeviceLostError after device loss", async () => {
    const device = await newDevice("lost-backend");
    const gpu = {
      allocator: new GpuCachingAllocator(device).asAllocator(),
      backend: new GpuBufferBackend(device),
    };
    const b = Buffer.fromData("f32", [1, 2, 3, 4], { shape: [2, 2], ...gpu });
    device.destroy();
    await device.lost;
    await Promise.resolve();
    await assert.rejects(b.read(), DeviceLostError);
    assert.throws(() => b.transpose().contiguous(), DeviceLostError);
    assert.throws(() => b.fill(0), DeviceLostError);
    b.release();
  });
});
