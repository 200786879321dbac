import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError } from "@allot/core";
import { GpuKernels, MAX_RANK, type StridedLayout } from "./gpu_kernels.ts";
import { GpuStaging } from "./gpu_staging.ts";
import { dtypeByteSize, encodeElement, type GpuDtype } from "./dtype.ts";
import { pipelineCacheSize } from "./kernel.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { newDevice, sharedDevice, skip } from "./_test_device.ts";
import { randomBytes } from "./_test_bytes.ts";

const USAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
  GPUBufferUsage.COPY_DST;
const DTYPES: GpuDtype[] = [
  "f32",
  "u32",
  "i32",
  "f16",
  "u16",
  "i16",
  "u8",
  "i8",
  "bool",
  "f64",
];

/** CPU reference: gather the view's elements, row-major. */
function gather(
  src: Uint8Array,
  layout: StridedLayout,
  size: number,
): Uint8Array<ArrayBuffer> {
  const count = layout.shape.reduce((a, b) => a * b, 1);
  const out = new Uint8Array(count * size);
  const index = new Array(layout.shape.length).fill(0);
  for (let e = 0; e < count; e++) {
    let pos = layout.offset;
    for (let d = 0; d < index.length; d++) pos += index[d] * layout.strides[d];
    out.set(src.subarray(pos * size, pos * size + size), e * size);
    for (let d = index.length - 1; d >= 0; d--) {
      if (++index[d] < layout.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

const viewArb = fc.record({
  dtype: fc.constantFrom(...DTYPES),
  dims: fc.array(
    fc.record({
      n: fc.integer({ min: 1, max: 4 }),
      stride: fc.integer({ min: -7, max: 7 }),
    }),
    { minLength: 0, maxLength: 8 },
  ),
  extraOffset: fc.integer({ min: 0, max: 5 }),
  srcElementOffset: fc.integer({ min: 0, max: 70 }),
  dstOffset: fc.integer({ min: 0, max: 9 }),
  aliased: fc.boolean(),
  seed: fc.integer(),
});

/**
 * Runs `contiguous()` on random bytes, the source at `srcStart` and the
 * output after it (in the same buffer when `aliased`, else at `dstStart` of a
 * second one), and compares every byte of the destination buffer with the
 * CPU gather: the output where it belongs, everything else untouched.
 */
async function checkContiguous(
  device: GPUDevice,
  kernels: GpuKernels,
  staging: GpuStaging,
  c: {
    layout: StridedLayout;
    dtype: GpuDtype;
    srcStart: number;
    srcBytes: number;
    dstStart: number;
    dstBytes: number;
    dstOffset: number;
    aliased: boolean;
    seed: number;
  },
): Promise<void> {
  const size = dtypeByteSize(c.dtype);
  const dstStart = c.aliased
    ? Math.ceil((c.srcStart + c.srcBytes) / 256) * 256 + 256
    : c.dstStart;
  const total = Math.ceil(
        Math.max(c.srcStart + c.srcBytes, dstStart + c.dstBytes) / 16,
      ) * 16 + 256;
  const a = device.createBuffer({ size: total, usage: USAGE });
  const b = c.aliased ? a : device.createBuffer({ size: total, usage: USAGE });
  const initialA = randomBytes(total, c.seed);
  const initialB = c.aliased ? initialA : randomBytes(total, c.seed + 1);
  device.queue.writeBuffer(a, 0, initialA);
  if (!c.aliased) device.queue.writeBuffer(b, 0, initialB);
  kernels.contiguous(
    { buffer: a, offset: c.srcStart, size: c.srcBytes },
    c.layout,
    { buffer: b, offset: dstStart, size: c.dstBytes },
    { dtype: c.dtype, dstOffset: c.dstOffset },
  );
  const got = await staging.download({ buffer: b, offset: 0, size: total });
  const expected = initialB.slice();
  expected.set(
    gather(
      initialA.subarray(c.srcStart, c.srcStart + c.srcBytes),
      c.layout,
      size,
    ),
    dstStart + c.dstOffset * size,
  );
  a.destroy();
  if (!c.aliased) b.destroy();
  assert.deepEqual(got, expected);
}

describe("GpuKernels", { skip }, () => {
  it("GpuKernels.contiguous() matches the CPU gather over random views, dtypes and offsets", async () => {
    const device = await sharedDevice();
    const kernels = GpuKernels.of(device);
    const staging = new GpuStaging(device);
    await fc.assert(
      fc.asyncProperty(viewArb, async (c) => {
        const size = dtypeByteSize(c.dtype);
        const shape = c.dims.map((d) => d.n);
        const strides = c.dims.map((d) => d.stride);
        let lo = 0;
        let hi = 0;
        for (const d of c.dims) {
          if (d.stride < 0) lo += d.stride * (d.n - 1);
          else hi += d.stride * (d.n - 1);
        }
        const layout = { shape, strides, offset: -lo + c.extraOffset };
        const srcElements = hi - lo + 1 + c.extraOffset + 3;
        const count = shape.reduce((a, b) => a * b, 1);
        const srcByteOffset = c.srcElementOffset * size;
        const srcBytes = srcElements * size;
        const dstBytes = (c.dstOffset + count + 3) * size;
        await checkContiguous(device, kernels, staging, {
          layout,
          dtype: c.dtype,
          srcStart: 256 + srcByteOffset,
          srcBytes,
          dstStart: 512,
          dstBytes,
          dstOffset: c.dstOffset,
          aliased: c.aliased,
          seed: c.seed,
        });
      }),
      { numRuns: 40 },
    );
    staging.release();
  });

  it("GpuKernels.contiguous() block transposes (permuted, batched, flipped, offset views) match the CPU gather", async () => {
    const device = await sharedDevice();
    const kernels = GpuKernels.of(device);
    const staging = new GpuStaging(device);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<GpuDtype>("f32", "u32", "u16", "f16", "f64", "i16"),
        // a dense tensor of rank 2-4: extents in whole vectors (or not)
        fc.array(fc.integer({ min: 1, max: 3 }), {
          minLength: 2,
          maxLength: 4,
        }),
        fc.integer({ min: 0, max: 2 ** 30 }),
        fc.boolean(), // aliased
        fc.boolean(), // flip the outermost view dimension
        fc.integer({ min: 0, max: 3 }), // source start, in vectors
        fc.integer({ min: 0, max: 3 }), // destination start, in vectors
        fc.boolean(), // misalign the start by one element (fallback path)
        fc.integer(),
        async (dtype, units, permSeed, aliased, flip, s0, d0, skew, seed) => {
          const size = dtypeByteSize(dtype);
          const per = 16 / size;
          // the unit-stride dimension and the even ones whole vectors long, the
          // odd ones not: some views take the block kernel, some fall back
          const base = units.map((u, i) =>
            i === units.length - 1 || i % 2 === 0
              ? (u === 3 ? 4 : u) * per // 4 vectors: several blocks a thread
              : u + 1
          );
          const rank = base.length;
          const dense: number[] = new Array(rank);
          let acc = 1;
          for (let d = rank - 1; d >= 0; d--) {
            dense[d] = acc;
            acc *= base[d];
          }
          // a permutation that moves the unit-stride dimension off the end
          const axes = [...base.keys()];
          let r = permSeed;
          for (let i = rank - 1; i > 0; i--) {
            const j = r % (i + 1);
            r = Math.floor(r / (i + 1));
            [axes[i], axes[j]] = [axes[j], axes[i]];
          }
          if (axes[rank - 1] === rank - 1) {
            [axes[rank - 1], axes[0]] = [axes[0], axes[rank - 1]];
          }
          const shape = axes.map((a) => base[a]);
          const strides = axes.map((a) => dense[a]);
          let offset = s0 * per + (skew ? 1 : 0);
          if (flip) {
            offset += strides[0] * (shape[0] - 1);
            strides[0] = -strides[0];
          }
          const layout = { shape, strides, offset };
          const count = acc;
          const srcBytes = (offset + count + per) * size;
          const dstOffset = d0 * per;
          const dstBytes = (dstOffset + count + per) * size;
          await checkContiguous(device, kernels, staging, {
            layout,
            dtype,
            srcStart: 256,
            srcBytes,
            dstStart: 256,
            dstBytes,
            dstOffset,
            aliased,
            seed,
          });
        },
      ),
      { numRuns: 60 },
    );
    staging.release();
  });

  it("GpuKernels.copyStrided() scatters into permuted, stepped and flipped views like the CPU", async () => {
    const device = await sharedDevice();
    const kernels = GpuKernels.of(device);
    const staging = new GpuStaging(device);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...DTYPES),
        fc.array(
          fc.record({
            n: fc.integer({ min: 1, max: 4 }),
            srcStride: fc.integer({ min: -5, max: 5 }),
            step: fc.integer({ min: 1, max: 2 }),
            flip: fc.boolean(),
            key: fc.double({ min: 0, max: 1, noNaN: true }),
          }),
          { minLength: 1, maxLength: 6 },
        ),
        fc.boolean(),
        fc.integer(),
        async (dtype, dims, aliased, seed) => {
          const size = dtypeByteSize(dtype);
          const shape = dims.map((d) => d.n);
          // Source: any strides, offset so that it stays in range.
          let lo = 0;
          let hi = 0;
          for (const d of dims) {
            if (d.srcStride < 0) lo += d.srcStride * (d.n - 1);
            else hi += d.srcStride * (d.n - 1);
          }
          const srcLayout = {
            shape,
            strides: dims.map((d) => d.srcStride),
            offset: -lo,
          };
          const srcElements = hi - lo + 1;
          // Destination: a permuted, stepped, flipped view of a dense block.
          const order = dims.map((_, i) => i).sort((a, b) =>
            dims[a].key - dims[b].key
          );
          const base = new Array(dims.length).fill(0);
          let run = 1;
          for (let j = order.length - 1; j >= 0; j--) {
            const d = order[j];
            base[d] = run;
            run *= dims[d].n * dims[d].step;
          }
          let offset = 0;
          const dstStrides = dims.map((d, i) => {
            const s = base[i] * d.step;
            if (d.flip) {
              offset += s * (d.n - 1);
              return -s;
            }
            return s;
          });
          const dstLayout = { shape, strides: dstStrides, offset };
          const dstElements = run;
          const srcBytes = srcElements * size;
          const dstBytes = dstElements * size;
          const dstStart = aliased ? Math.ceil(srcBytes / 256) * 256 + 256 : 0;
          const total =
            Math.ceil((Math.max(srcBytes, dstStart + dstBytes) + 4) / 4) * 4;
          const a = device.createBuffer({ size: total, usage: USAGE });
          const b = aliased
            ? a
            : device.createBuffer({ size: total, usage: USAGE });
          const ia = randomBytes(total, seed);
          const ib = aliased ? ia : randomBytes(total, seed ^ 0x55);
          device.queue.writeBuffer(a, 0, ia);
          if (!aliased) device.queue.writeBuffer(b, 0, ib);
          kernels.copyStrided(
            { buffer: a, offset: 0, size: srcBytes },
            srcLayout,
            { buffer: b, offset: dstStart, size: dstBytes },
            dstLayout,
            dtype,
          );
          const got = await staging.download({
            buffer: b,
            offset: 0,
            size: total,
          });
          const expected = ib.slice();
          const values = gather(ia, srcLayout, size);
          const index = new Array(dims.length).fill(0);
          for (let e = 0; e < values.length / size; e++) {
            let pos = offset;
            for (let d = 0; d < dims.length; d++) {
              pos += index[d] * dstStrides[d];
            }
            expected.set(
              values.subarray(e * size, e * size + size),
              dstStart + pos * size,
            );
            for (let d = dims.length - 1; d >= 0; d--) {
              if (++index[d] < shape[d]) break;
              index[d] = 0;
            }
          }
          a.destroy();
          b.destroy();
          assert.deepEqual(got, expected);
        },
      ),
      { numRuns: 30 },
    );
  });

  it("GpuKernels.contiguous() handles rank MAX_RANK with broadcast strides", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device);
    const shape = Array.from(
      { length: MAX_RANK },
      (_, d) => (d % 4 === 0 ? 2 : 1),
    );
    const strides = shape.map((_, d) => (d === 4 ? 0 : d % 3));
    const layout = { shape, strides, offset: 1 };
    const count = 16;
    const src = device.createBuffer({ size: 256, usage: USAGE });
    const dst = device.createBuffer({ size: count * 2 + 2, usage: USAGE });
    const bytes = randomBytes(256, 7);
    device.queue.writeBuffer(src, 0, bytes);
    GpuKernels.of(device).contiguous(
      { buffer: src, offset: 0, size: 256 },
      layout,
      { buffer: dst, offset: 0, size: count * 2 },
      { dtype: "u16" },
    );
    const got = await staging.download({
      buffer: dst,
      offset: 0,
      size: count * 2,
    });
    assert.deepEqual(got, gather(bytes, layout, 2));
    src.destroy();
    dst.destroy();
  });

  it("GpuKernels folds dispatches past maxComputeWorkgroupsPerDimension", async () => {
    const device = await sharedDevice();
    const kernels = new GpuKernels(device, { workgroupSize: 1 });
    // Each invocation writes up to 4 words: make more groups than one dimension holds.
    const n = (device.limits.maxComputeWorkgroupsPerDimension + 1000) * 4;
    const buffer = device.createBuffer({ size: n * 4, usage: USAGE });
    kernels.fill({ buffer, offset: 0, size: n * 4 }, 7, { dtype: "u32" });
    const staging = new GpuStaging(device);
    const got = new Uint32Array(
      (await staging.download({ buffer, offset: 0, size: n * 4 })).buffer,
    );
    assert.equal(got.length, n);
    assert.ok(got.every((v) => v === 7));
    buffer.destroy();
  });

  it("GpuKernels.copyBytes() copies between arbitrary byte offsets, also within one buffer", async () => {
    const device = await sharedDevice();
    const kernels = GpuKernels.of(device);
    const staging = new GpuStaging(device);
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 600 }),
        fc.integer({ min: 0, max: 600 }),
        fc.integer({ min: 1, max: 700 }),
        fc.boolean(),
        fc.integer(),
        async (srcOff, dstOff, len, aliased, seed) => {
          const total = 4096;
          const a = device.createBuffer({ size: total, usage: USAGE });
          const b = aliased
            ? a
            : device.createBuffer({ size: total, usage: USAGE });
          const ia = randomBytes(total, seed);
          const ib = aliased ? ia : randomBytes(total, seed + 9);
          device.queue.writeBuffer(a, 0, ia);
          if (!aliased) device.queue.writeBuffer(b, 0, ib);
          const src = { buffer: a, offset: 0, size: 1400 };
          const dst = { buffer: b, offset: aliased ? 1536 : 0, size: 1400 };
          kernels.copyBytes(src, dst, {
            srcByteOffset: srcOff,
            dstByteOffset: dstOff,
            byteLength: len,
          });
          const got = await staging.download({
            buffer: b,
            offset: 0,
            size: total,
          });
          const expected = ib.slice();
          expected.set(ia.subarray(srcOff, srcOff + len), dst.offset + dstOff);
          a.destroy();
          b.destroy();
          assert.deepEqual(got, expected);
        },
      ),
      { numRuns: 25 },
    );
  });

  it("GpuKernels.fill() writes the value's bytes and keeps the bytes around them", async () => {
    const device = await sharedDevice();
    const kernels = GpuKernels.of(device);
    const staging = new GpuStaging(device);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...DTYPES),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 60 }),
        fc.oneof(
          fc.constant(0),
          fc.integer({ min: -1000, max: 1000 }),
          fc.double({ noNaN: true }),
        ),
        async (dtype, offset, wanted, value) => {
          const size = dtypeByteSize(dtype);
          const length = Math.min(wanted, 512 / size - offset);
          const total = 1024;
          const buffer = device.createBuffer({ size: total, usage: USAGE });
          const initial = randomBytes(total, offset * 131 + length);
          device.queue.writeBuffer(buffer, 0, initial);
          const binding = { buffer, offset: 256, size: 512 };
          kernels.fill(binding, value, { dtype, offset, length });
          const got = await staging.download({
            buffer,
            offset: 0,
            size: total,
          });
          const expected = initial.slice();
          const one = encodeElement(dtype, value);
          for (let e = 0; e < length; e++) {
            expected.set(one, 256 + (offset + e) * size);
          }
          buffer.destroy();
          assert.deepEqual(got, expected);
        },
      ),
      { numRuns: 25 },
    );
  });

  it("GpuKernels refuses bad input with typed errors before submitting anything", async () => {
    const device = await sharedDevice();
    const kernels = new GpuKernels(device);
    const a = device.createBuffer({ size: 1024, usage: USAGE });
    const b = device.createBuffer({ size: 1024, usage: USAGE });
    const src = { buffer: a, offset: 0, size: 64 };
    const dst = { buffer: b, offset: 0, size: 64 };
    const bad: (() => void)[] = [
      // View reaches past the source binding.
      () =>
        kernels.contiguous(
          src,
          { shape: [4, 5], strides: [5, 1], offset: 0 },
          dst,
          { dtype: "f32" },
        ),
      // Negative reach below element 0.
      () =>
        kernels.contiguous(src, { shape: [4], strides: [-1], offset: 2 }, dst, {
          dtype: "f32",
        }),
      // Too many dimensions (storage's limit is 64; MAX_RANK is per dispatch).
      () =>
        kernels.contiguous(
          src,
          {
            shape: new Array(65).fill(1),
            strides: new Array(65).fill(1),
            offset: 0,
          },
          dst,
          { dtype: "u8" },
        ),
      // Output does not fit.
      () =>
        kernels.contiguous(src, { shape: [16], strides: [1], offset: 0 }, dst, {
          dtype: "f32",
          dstOffset: 1,
        }),
      // Binding outside its buffer.
      () =>
        kernels.fill({ buffer: a, offset: 1000, size: 64 }, 1, { dtype: "u8" }),
      // Binding offset not a multiple of the element size.
      () =>
        kernels.fill({ buffer: a, offset: 2, size: 8 }, 1, { dtype: "f32" }),
      // Unknown dtype.
      () => kernels.fill(src, 1, { dtype: "f128" as GpuDtype }),
      // Overlapping ranges of one buffer.
      () => kernels.copyBytes(src, { buffer: a, offset: 3, size: 64 }),
      // Broadcast destination.
      () =>
        kernels.copyStrided(src, { shape: [2], strides: [1], offset: 0 }, dst, {
          shape: [2],
          strides: [0],
          offset: 0,
        }, "u8"),
      // Shapes differ.
      () =>
        kernels.copyStrided(src, { shape: [2], strides: [1], offset: 0 }, dst, {
          shape: [3],
          strides: [1],
          offset: 0,
        }, "u8"),
      // Fill past the binding.
      () => kernels.fill(src, 1, { dtype: "f32", offset: 10, length: 7 }),
    ];
    for (const call of bad) assert.throws(call, InvalidArgumentError);
    assert.equal(kernels.dispatchCount, 0);
    a.destroy();
    b.destroy();
  });

  it("GpuKernels caches one pipeline per compile-time variant", async () => {
    const device = await newDevice("cache");
    const kernels = GpuKernels.of(device);
    const buffer = device.createBuffer({ size: 1024, usage: USAGE });
    const binding = { buffer, offset: 0, size: 512 };
    const out = { buffer, offset: 512, size: 512 };
    for (let i = 2; i < 6; i++) {
      kernels.contiguous(
        binding,
        { shape: [i, 2], strides: [1, i], offset: 0 },
        out,
        { dtype: "f32" },
      );
    }
    assert.equal(pipelineCacheSize(device), 1);
    kernels.contiguous(binding, { shape: [3], strides: [2], offset: 0 }, out, {
      dtype: "u8",
    });
    assert.equal(pipelineCacheSize(device), 2);
    await device.queue.onSubmittedWorkDone();
    device.destroy();
  });

  it("GpuKernels throws DeviceLostError after device loss", async () => {
    const device = await newDevice("lost-kernels");
    const kernels = GpuKernels.of(device);
    const buffer = device.createBuffer({ size: 256, usage: USAGE });
    device.destroy();
    await device.lost;
    await Promise.resolve();
    assert.throws(
      () => kernels.fill({ buffer, offset: 0, size: 256 }, 1, { dtype: "f32" }),
      DeviceLostError,
    );
  });
});
