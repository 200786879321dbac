import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError, UnsupportedOperationError } from "@allot/core";
import { GpuKernels, type StridedLayout } from "./gpu_kernels.ts";
import { GpuStaging } from "./gpu_staging.ts";
import { dtypeByteSize, encodeElement, type GpuDtype } from "./dtype.ts";
import { _splitRun, _splitStrided, _wordOwned } from "./_kernel_pieces.ts";
import { sharedDevice, skip } from "./_test_device.ts";
import { randomBytes } from "./_test_bytes.ts";

const USAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
  GPUBufferUsage.COPY_DST;
const DTYPES: GpuDtype[] = ["f32", "u32", "f16", "u16", "u8", "i8", "f64"];

/** Element positions of a view, row-major. */
function positions(layout: StridedLayout): number[] {
  const out: number[] = [];
  const count = layout.shape.reduce((a, b) => a * b, 1);
  const index = new Array(layout.shape.length).fill(0);
  for (let e = 0; e < count; e++) {
    let pos = layout.offset;
    for (let d = 0; d < index.length; d++) pos += index[d] * layout.strides[d];
    out.push(pos);
    for (let d = index.length - 1; d >= 0; d--) {
      if (++index[d] < layout.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

function span(
  shape: readonly number[],
  strides: readonly number[],
): [number, number] {
  let lo = 0;
  let hi = 0;
  shape.forEach((n, d) => {
    if (strides[d] < 0) lo += strides[d] * (n - 1);
    else hi += strides[d] * (n - 1);
  });
  return [lo, hi];
}

const caseArb = fc.record({
  dtype: fc.constantFrom(...DTYPES),
  dims: fc.array(
    fc.record({
      n: fc.integer({ min: 2, max: 12 }),
      // 0: broadcast; negative: flipped
      stride: fc.integer({ min: -40, max: 40 }),
    }),
    { minLength: 1, maxLength: 4, size: "max" },
  ),
  // transpose-like: strides taken from a dense block in permuted order
  permuted: fc.boolean(),
  perm: fc.integer({ min: 0, max: 23 }),
  extra: fc.integer({ min: 0, max: 9 }),
  srcStart: fc.integer({ min: 0, max: 700 }),
  dstStart: fc.integer({ min: 0, max: 700 }),
  dstOffset: fc.integer({ min: 0, max: 9 }),
  strided: fc.boolean(), // copyStrided to a permuted, flipped destination
  aliased: fc.boolean(),
  limit: fc.integer({ min: 512, max: 2048 }),
  seed: fc.integer(),
});

function permutation(rank: number, k: number): number[] {
  const left = Array.from({ length: rank }, (_, i) => i);
  const out: number[] = [];
  for (let r = rank; r > 0; r--) {
    out.push(left.splice(k % r, 1)[0]);
    k = Math.floor(k / r);
  }
  return out;
}

/** Dense strides of `shape`, dimensions laid out in `order` (outer first). */
function denseStrides(shape: number[], order: number[]): number[] {
  const strides = new Array(shape.length).fill(0);
  let run = 1;
  for (let j = order.length - 1; j >= 0; j--) {
    strides[order[j]] = run;
    run *= shape[order[j]];
  }
  return strides;
}

describe("GpuKernels split into pieces", { skip }, () => {
  it("contiguous()/copyStrided() over views wider than maxBindingByteLength match the CPU byte for byte", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device);
    let split = 0;
    let refusedRuns = 0;
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const size = dtypeByteSize(c.dtype);
        const shape = c.dims.map((d) => d.n);
        const rank = shape.length;
        const srcStrides = c.permuted
          ? denseStrides(shape, permutation(rank, c.perm)).map((s, d) =>
            c.dims[d].stride < 0 ? -s : s
          )
          : c.dims.map((d) => d.stride);
        const [sLo, sHi] = span(shape, srcStrides);
        const srcLayout = {
          shape,
          strides: srcStrides,
          offset: -sLo + c.extra,
        };
        const srcBytes = (sHi - sLo + 1 + c.extra) * size;
        let dstLayout: StridedLayout;
        if (c.strided) {
          const strides = denseStrides(shape, permutation(rank, c.perm + 7))
            .map((s, d) => (c.dims[d].stride % 2 === 0 ? -s : s));
          const [lo] = span(shape, strides);
          dstLayout = { shape, strides, offset: -lo + c.dstOffset };
        } else {
          dstLayout = {
            shape,
            strides: denseStrides(shape, shape.map((_, i) => i)),
            offset: c.dstOffset,
          };
        }
        const [dLo, dHi] = span(shape, dstLayout.strides);
        const dstBytes = (dHi - dLo + 1 + c.dstOffset) * size;
        const srcAt = c.srcStart * size;
        const dstAt = c.aliased
          ? srcAt + srcBytes + c.dstStart * size
          : c.dstStart * size;
        const total = Math.ceil(
              Math.max(srcAt + srcBytes, dstAt + dstBytes) / 4,
            ) * 4 + 64;
        const a = device.createBuffer({ size: total, usage: USAGE });
        const b = c.aliased
          ? a
          : device.createBuffer({ size: total, usage: USAGE });
        const initialA = randomBytes(total, c.seed);
        const initialB = c.aliased ? initialA : randomBytes(total, ~c.seed);
        device.queue.writeBuffer(a, 0, initialA);
        if (!c.aliased) device.queue.writeBuffer(b, 0, initialB);
        const kernels = new GpuKernels(device, {
          maxBindingByteLength: c.limit,
        });
        const src = { buffer: a, offset: srcAt, size: srcBytes };
        const dst = { buffer: b, offset: dstAt, size: dstBytes };
        let refused: unknown;
        const before = kernels.dispatchCount;
        try {
          if (c.strided) {
            kernels.copyStrided(src, srcLayout, dst, dstLayout, c.dtype);
          } else {
            kernels.contiguous(src, srcLayout, dst, {
              dtype: c.dtype,
              dstOffset: c.dstOffset,
            });
          }
        } catch (e) {
          refused = e;
        }
        if (kernels.dispatchCount - before > 1) split++;
        if (refused) refusedRuns++;
        const got = await staging.download({
          buffer: b,
          offset: 0,
          size: total,
        });
        await kernels.flush();
        a.destroy();
        if (!c.aliased) b.destroy();
        const expected = initialB.slice();
        if (refused === undefined) {
          const from = positions(srcLayout);
          const to = positions(dstLayout);
          from.forEach((p, i) =>
            expected.set(
              initialA.subarray(srcAt + p * size, srcAt + (p + 1) * size),
              dstAt + to[i] * size,
            )
          );
        } else {
          // only where one element cannot bind (the ranges of one buffer
          // farther apart than the limit), and then nothing changed
          assert.fail(`refused: ${refused}`);
        }
        assert.deepEqual(got, expected);
      }),
      { numRuns: 120 },
    );
    staging.release();
    assert.ok(
      split > 20,
      `only ${split} of 120 runs were split, ${refusedRuns} refused`,
    );
  });

  it("a 4 MiB transpose split under a 1 MiB binding limit equals the unsplit one", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device);
    const rows = 1024;
    const cols = 1024;
    const bytes = rows * cols * 4;
    const src = device.createBuffer({ size: bytes, usage: USAGE });
    const whole = device.createBuffer({ size: bytes, usage: USAGE });
    const pieces = device.createBuffer({ size: bytes, usage: USAGE });
    device.queue.writeBuffer(src, 0, randomBytes(bytes, 7));
    const layout = { shape: [cols, rows], strides: [1, cols], offset: 0 };
    const one = new GpuKernels(device);
    const small = new GpuKernels(device, { maxBindingByteLength: 1 << 20 });
    one.contiguous({ buffer: src, offset: 0, size: bytes }, layout, {
      buffer: whole,
      offset: 0,
      size: bytes,
    }, { dtype: "f32" });
    // every piece in one submit
    const queue = device.queue;
    const submit = queue.submit;
    let submits = 0;
    queue.submit = (buffers) => {
      submits++;
      submit.call(queue, buffers);
    };
    try {
      small.contiguous({ buffer: src, offset: 0, size: bytes }, layout, {
        buffer: pieces,
        offset: 0,
        size: bytes,
      }, { dtype: "f32" });
    } finally {
      delete (queue as { submit?: unknown }).submit;
      if (queue.submit !== submit) queue.submit = submit;
    }
    assert.equal(submits, 1);
    assert.equal(one.dispatchCount, 1);
    assert.ok(small.dispatchCount >= 16, `${small.dispatchCount} pieces`);
    assert.ok(small.dispatchCount <= 32, `${small.dispatchCount} pieces`);
    const a = await staging.download({ buffer: whole, offset: 0, size: bytes });
    const b = await staging.download({
      buffer: pieces,
      offset: 0,
      size: bytes,
    });
    assert.ok(a.every((v, i) => v === b[i]));
    // source and destination 4 MiB apart in one buffer: bound twice
    const shared = device.createBuffer({ size: 2 * bytes, usage: USAGE });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(src, 0, shared, 0, bytes);
    device.queue.submit([encoder.finish()]);
    small.contiguous({ buffer: shared, offset: 0, size: bytes }, layout, {
      buffer: shared,
      offset: bytes,
      size: bytes,
    }, { dtype: "f32" });
    const c = await staging.download({
      buffer: shared,
      offset: bytes,
      size: bytes,
    });
    await small.flush();
    assert.ok(a.every((v, i) => v === c[i]));
    shared.destroy();
    for (const buffer of [src, whole, pieces]) buffer.destroy();
    staging.release();
  });

  it("pieces wider than maxComputeWorkgroupsPerDimension workgroups fold their dispatch", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device);
    // a stride-2 view: one element per invocation group of 8, workgroups of 1
    const n = (device.limits.maxComputeWorkgroupsPerDimension + 100) * 8 * 2;
    const bytes = n * 2 * 4;
    const src = device.createBuffer({ size: bytes, usage: USAGE });
    const dst = device.createBuffer({ size: bytes / 2, usage: USAGE });
    const host = new Uint32Array(n * 2).map((_, i) => i);
    device.queue.writeBuffer(src, 0, host);
    for (const limit of [undefined, bytes / 2 + 4096]) {
      device.queue.writeBuffer(dst, 0, new Uint8Array(bytes / 2));
      const kernels = new GpuKernels(device, {
        workgroupSize: 1,
        maxBindingByteLength: limit,
      });
      kernels.contiguous(
        { buffer: src, offset: 0, size: bytes },
        { shape: [n], strides: [2], offset: 1 },
        { buffer: dst, offset: 0, size: bytes / 2 },
        { dtype: "u32" },
      );
      assert.equal(kernels.dispatchCount, limit === undefined ? 1 : 2);
      const got = new Uint32Array(
        (await staging.download({ buffer: dst, offset: 0, size: bytes / 2 }))
          .buffer,
      );
      await kernels.flush();
      assert.ok(got.every((v, i) => v === 2 * i + 1), `limit ${limit}`);
    }
    src.destroy();
    dst.destroy();
    staging.release();
  });

  it("views above MAX_RANK split each leading index's dispatch too", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device);
    // rank 18, every dimension 2, reversed (a full transpose, no folding)
    const rank = 18;
    const shape = new Array(rank).fill(2);
    const strides = shape.map((_, d) => 2 ** d);
    const layout = { shape, strides, offset: 0 };
    const count = 2 ** rank;
    const bytes = count * 4;
    const src = device.createBuffer({ size: bytes, usage: USAGE });
    const dst = device.createBuffer({ size: bytes, usage: USAGE });
    const host = new Uint32Array(count).map((_, i) => i * 2654435761);
    device.queue.writeBuffer(src, 0, host);
    const kernels = new GpuKernels(device, { maxBindingByteLength: 64 << 10 });
    kernels.contiguous({ buffer: src, offset: 0, size: bytes }, layout, {
      buffer: dst,
      offset: 0,
      size: bytes,
    }, { dtype: "u32" });
    assert.ok(kernels.dispatchCount > 4, `${kernels.dispatchCount}`);
    const got = new Uint32Array(
      (await staging.download({ buffer: dst, offset: 0, size: bytes })).buffer,
    );
    await kernels.flush();
    const want = positions(layout).map((p) => host[p]);
    assert.ok(got.every((v, i) => v === want[i]));
    src.destroy();
    dst.destroy();
    staging.release();
  });

  it("copyBytes() and fill() split byte ranges wider than the limit and keep the bytes around them", async () => {
    const device = await sharedDevice();
    const staging = new GpuStaging(device);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...DTYPES),
        fc.integer({ min: 0, max: 3000 }), // length (elements or bytes)
        fc.integer({ min: 0, max: 900 }), // src/dst byte starts
        fc.integer({ min: 0, max: 900 }),
        fc.boolean(), // aliased
        fc.integer({ min: 512, max: 4096 }),
        fc.integer(),
        async (dtype, n, s0, d0, aliased, limit, seed) => {
          const size = dtypeByteSize(dtype);
          const kernels = new GpuKernels(device, {
            maxBindingByteLength: limit,
          });
          const total = 2 * 900 + 2 * 3000 * 8 + 64;
          const a = device.createBuffer({ size: total, usage: USAGE });
          const b = aliased
            ? a
            : device.createBuffer({ size: total, usage: USAGE });
          const initialA = randomBytes(total, seed);
          const initialB = aliased ? initialA : randomBytes(total, ~seed);
          device.queue.writeBuffer(a, 0, initialA);
          if (!aliased) device.queue.writeBuffer(b, 0, initialB);
          // copyBytes: n bytes (odd offsets take the kernel)
          const to = aliased ? s0 + n + d0 : d0;
          let refused: unknown;
          try {
            kernels.copyBytes({ buffer: a, offset: 0, size: total }, {
              buffer: b,
              offset: 0,
              size: total,
            }, { srcByteOffset: s0, dstByteOffset: to, byteLength: n });
          } catch (e) {
            refused = e;
          }
          const expected = initialB.slice();
          if (refused === undefined) {
            expected.set(initialA.subarray(s0, s0 + n), to);
          } else {
            assert.fail(`refused: ${refused}`);
          }
          // fill: up to n elements of a non-zero value, after the copy
          const fillStart = aliased ? Math.ceil((to + n) / 8) * 8 : 0;
          const fillBytes = Math.floor((total - fillStart) / 8) * 8;
          const at = d0 % 50;
          const count = Math.min(n, fillBytes / size - at);
          const value = dtype.startsWith("f") ? 1.5 : 3;
          kernels.fill(
            { buffer: b, offset: fillStart, size: fillBytes },
            value,
            {
              dtype,
              offset: at,
              length: count,
            },
          );
          const element = encodeElement(dtype, value);
          for (let i = 0; i < count; i++) {
            expected.set(element, fillStart + (at + i) * size);
          }
          const got = await staging.download({
            buffer: b,
            offset: 0,
            size: total,
          });
          await kernels.flush();
          a.destroy();
          if (!aliased) b.destroy();
          assert.deepEqual(got, expected);
        },
      ),
      { numRuns: 60 },
    );
    staging.release();
  });

  it("refuses, submitting nothing, where one element cannot bind or the pieces would pass MAX_PIECES", async () => {
    const device = await sharedDevice();
    const align = device.limits.minStorageBufferOffsetAlignment;
    const a = device.createBuffer({ size: 1 << 16, usage: USAGE });
    // one element (at byte 16 of a 256-byte boundary) cannot bind in 8 bytes
    const tiny = new GpuKernels(device, { maxBindingByteLength: 8 });
    assert.throws(
      () =>
        tiny.contiguous(
          { buffer: a, offset: 16, size: 4096 },
          { shape: [8, 8], strides: [1, 8], offset: 0 },
          { buffer: a, offset: 8192, size: 4096 },
          { dtype: "f32" },
        ),
      (e: Error) =>
        e instanceof UnsupportedOperationError &&
        /within 8 bytes/.test(e.message),
    );
    assert.equal(tiny.dispatchCount, 0);
    // a transpose needing more than MAX_PIECES pieces of 260 bytes
    const big = device.createBuffer({ size: 300 * 300 * 8, usage: USAGE });
    const narrow = new GpuKernels(device, { maxBindingByteLength: 260 });
    assert.throws(
      () =>
        narrow.contiguous(
          { buffer: big, offset: 0, size: 300 * 300 * 4 },
          { shape: [300, 300], strides: [1, 300], offset: 0 },
          { buffer: big, offset: 300 * 300 * 4, size: 300 * 300 * 4 },
          { dtype: "f32" },
        ),
      (e: Error) =>
        e instanceof UnsupportedOperationError &&
        /65536 pieces/.test(e.message),
    );
    assert.equal(narrow.dispatchCount, 0);
    big.destroy();
    // bad options are refused with the value and the limit
    for (const bad of [0, 3, -1, 1.5, NaN]) {
      assert.throws(
        () => new GpuKernels(device, { maxBindingByteLength: bad }),
        InvalidArgumentError,
      );
    }
    // clamped to the device and to a multiple of 4
    assert.equal(
      new GpuKernels(device, { maxBindingByteLength: 2 ** 52 })
        .maxBindingByteLength,
      device.limits.maxStorageBufferBindingSize,
    );
    assert.equal(
      new GpuKernels(device, { maxBindingByteLength: 1027 })
        .maxBindingByteLength,
      1024,
    );
    assert.equal(
      GpuKernels.of(device).maxBindingByteLength,
      device.limits.maxStorageBufferBindingSize,
    );
    assert.ok(align <= 256);
    a.destroy();
  });
});

describe("_splitStrided", () => {
  it("covers every index once, each piece within the budget, and refuses past maxPieces", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            n: fc.integer({ min: 1, max: 9 }),
            a: fc.integer({ min: -50, max: 50 }),
            b: fc.integer({ min: -50, max: 50 }),
          }),
          { minLength: 1, maxLength: 4 },
        ),
        fc.integer({ min: 1, max: 200 }),
        fc.constantFrom(1, 2, 4),
        (dims, budget, dstUnit) => {
          const shape = dims.map((d) => d.n);
          const a = dims.map((d) => d.a);
          const b = dims.map((d) => d.b);
          const [aLo] = span(shape, a);
          const [bLo] = span(shape, b);
          const result = _splitStrided({
            shape,
            srcStrides: a,
            dstStrides: b,
            srcOffset: -aLo,
            dstOffset: -bLo,
            budget,
            dstUnit,
            maxPieces: 1e6,
            fits: (sLo, sHi, dLo, dHi) =>
              sHi - sLo < budget && dHi - dLo < budget,
          });
          assert.ok("pieces" in result);
          const seen = new Map<string, number>();
          const all = positions({ shape, strides: a, offset: -aLo });
          for (const p of result.pieces) {
            const [lo, hi] = span(p.shape, a);
            assert.ok(hi - lo < budget);
            const [dlo, dhi] = span(p.shape, b);
            assert.ok(dhi - dlo < budget);
            const src = positions({
              shape: p.shape,
              strides: a,
              offset: p.srcOffset,
            });
            const dst = positions({
              shape: p.shape,
              strides: b,
              offset: p.dstOffset,
            });
            src.forEach((s, i) => {
              const key = `${s}:${dst[i]}`;
              seen.set(key, (seen.get(key) ?? 0) + 1);
            });
          }
          const dstAll = positions({ shape, strides: b, offset: -bLo });
          const want = new Map<string, number>();
          all.forEach((s, i) => {
            const key = `${s}:${dstAll[i]}`;
            want.set(key, (want.get(key) ?? 0) + 1);
          });
          assert.deepEqual(seen, want);
        },
      ),
      { numRuns: 300 },
    );
    const result = _splitStrided({
      shape: [100],
      srcStrides: [1],
      dstStrides: [1],
      srcOffset: 0,
      dstOffset: 0,
      budget: 1,
      maxPieces: 99,
      fits: (sLo, sHi) => sHi === sLo,
    });
    assert.deepEqual(result, { refused: "pieces" });
  });

  it("_splitRun takes the longest runs that fit and refuses what cannot", () => {
    assert.deepEqual(_splitRun(10, 1, (_, n) => n <= 4, 100), [
      [0, 4],
      [4, 4],
      [8, 2],
    ]);
    assert.equal(_splitRun(10, 2, (_, n) => n < 2, 100), undefined);
    assert.equal(_splitRun(10, 1, (_, n) => n <= 4, 2), undefined);
  });
});

describe("_wordOwned", () => {
  it("holds only where no destination word is written by two invocations", () => {
    let owned = 0;
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            n: fc.integer({ min: 1, max: 9 }),
            step: fc.integer({ min: 1, max: 3 }),
            flip: fc.boolean(),
            key: fc.integer(),
            pad: fc.integer({ min: 0, max: 3 }), // row pitch past the row
          }),
          { minLength: 1, maxLength: 4 },
        ),
        fc.constantFrom(1, 2),
        fc.integer({ min: 0, max: 9 }),
        fc.boolean(), // last dimension dense
        fc.constantFrom(4, 8, 6),
        (dims, size, base, dense, chunk) => {
          const shape = dims.map((d) => d.n);
          const rank = shape.length;
          const order = shape.map((_, i) => i).sort((a, b) =>
            dims[a].key - dims[b].key
          );
          if (dense) {
            order.splice(order.indexOf(rank - 1), 1);
            order.push(rank - 1);
          }
          const strides = new Array(rank).fill(0);
          let run = 1;
          let offset = base;
          for (let j = rank - 1; j >= 0; j--) {
            const d = order[j];
            const s = run * (dense && d === rank - 1 ? 1 : dims[d].step);
            strides[d] = dims[d].flip && d !== rank - 1 ? -s : s;
            if (strides[d] < 0) offset -= strides[d] * (shape[d] - 1);
            run = s * shape[d] + dims[d].pad;
          }
          if (!_wordOwned({ shape, strides }, offset, size, chunk)) return;
          owned++;
          const per = 4 / size;
          const writer = new Map<number, number>();
          positions({ shape, strides, offset }).forEach((p, e) => {
            const word = Math.floor(p / per);
            const by = writer.get(word);
            assert.ok(by === undefined || by === Math.floor(e / chunk));
            writer.set(word, Math.floor(e / chunk));
          });
        },
      ),
      { numRuns: 2000 },
    );
    assert.ok(owned > 50, `only ${owned} owned layouts`);
  });
});
