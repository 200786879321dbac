/**
 * Second outside-in review of `@allot/webgpu`, from the public API only
 * (`mod.ts`): what the first one (`webgpu_hostile_api_test.ts`) missed.
 * Transfers that read or write their bytes later than the call, a
 * watermark pool whose `synchronize()` could not be stopped, and copy
 * kernels checked byte for byte with guard bytes around their destination
 * on the real (software) adapter.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  ContractViolationError,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import { Buffer, BufferView, type Dtype } from "@allot/storage";
import {
  createUniformBuffer,
  type GpuAllocation,
  GpuAllocatorAdapter,
  GpuBufferBackend,
  GpuCachingAllocator,
  GpuKernels,
  GpuSegmentSource,
  GpuStaging,
  GpuWatermarkAllocator,
} from "./mod.ts";
import { newDevice, sharedDevice, skip } from "./_test_device.ts";
import { mockGpu } from "./_test_mock_device.ts";

const USAGE = 0x80 | 0x4 | 0x8; // STORAGE | COPY_SRC | COPY_DST

function gpuBuffer(device: GPUDevice, size: number, byte = 0xaa): GPUBuffer {
  const buffer = device.createBuffer({
    size,
    usage: USAGE,
    mappedAtCreation: true,
  });
  new Uint8Array(buffer.getMappedRange()).fill(byte);
  buffer.unmap();
  return buffer;
}

function counts(bytes: Uint8Array): Record<number, number> {
  const out: Record<number, number> = {};
  for (const b of bytes) out[b] = (out[b] ?? 0) + 1;
  return out;
}

describe("@allot/webgpu transfers read and write the bytes of the call", {
  skip,
}, () => {
  it("GpuStaging.upload() sends what data held at the call, even when it is refilled or transferred before the promise settles", async () => {
    const device = await sharedDevice();
    // small writeBuffer limit: the staged path, in several chunks
    using staging = new GpuStaging(device, {
      writeBufferMaxByteLength: 16,
      chunkByteLength: 4096,
    });
    for (
      const spoil of [
        (data: Uint8Array) => data.fill(9),
        (data: Uint8Array) => (data.buffer as ArrayBuffer).transfer(),
      ]
    ) {
      const dst = gpuBuffer(device, 16384);
      const data = new Uint8Array(16384).fill(7);
      const sent = staging.upload(
        { buffer: dst, offset: 0, size: 16384 },
        data,
      );
      spoil(data); // was uploaded as 9s, or a raw TypeError mid-upload
      await sent;
      const back = await staging.download({
        buffer: dst,
        offset: 0,
        size: 16384,
      });
      assert.deepEqual(counts(back), { 7: 16384 });
      dst.destroy();
    }
  });

  it("GpuStaging.download() copies the range as of the call: work submitted after it does not show", async () => {
    const device = await sharedDevice();
    // a bound of two chunks: the third chunk has no staging room at the
    // call and is copied aside first
    using staging = new GpuStaging(device, {
      chunkByteLength: 4096,
      maxStagingBytes: 8192,
    });
    for (const size of [4096, 12288]) {
      const src = gpuBuffer(device, size, 7);
      const read = staging.download({ buffer: src, offset: 0, size });
      device.queue.writeBuffer(src, 0, new Uint8Array(size).fill(9));
      assert.deepEqual(counts(await read), { 7: size });
      src.destroy();
    }
    assert.equal(staging.stats().downloads, 2);
  });

  for (
    const [name, make] of [
      ["GpuCachingAllocator", (d: GPUDevice) => new GpuCachingAllocator(d)],
      [
        "GpuWatermarkAllocator queue-order",
        (d: GPUDevice) =>
          new GpuWatermarkAllocator(d, { reuse: "queue-order" }),
      ],
    ] as const
  ) {
    it(`Buffer.read() of a GPU buffer released at once reads its own bytes, not the next owner's (${name})`, async () => {
      const device = await sharedDevice();
      const gpu = {
        allocator: make(device).asAllocator(),
        backend: new GpuBufferBackend(device),
      };
      const a = Buffer.fromData("f32", [1, 2, 3, 4], gpu);
      const read = a.read();
      a.release(); // the range goes back to the pool in queue order
      using b = Buffer.filled("f32", [4], { value: 99, ...gpu });
      // was [99, 99, 99, 99]: the copy was encoded after an await
      assert.deepEqual([...await read], [1, 2, 3, 4]);
      assert.deepEqual([...await b.read()], [99, 99, 99, 99]);
    });
  }

  it("GpuStaging.download() resolves with the bytes when the device is lost after the map completed", async () => {
    const device = await newDevice("lost-after-map");
    using staging = new GpuStaging(device);
    const src = gpuBuffer(device, 4096, 5);
    const read = staging.download({ buffer: src, offset: 0, size: 4096 });
    device.destroy();
    // either the bytes, or a typed error (never a raw OperationError)
    await read.then(
      (bytes) => assert.deepEqual(counts(bytes), { 5: 4096 }),
      (error) => assert.equal((error as Error).name, "DeviceLostError"),
    );
    assert.equal(staging.stats().liveCount, 0);
  });
});

describe("GpuWatermarkAllocator.synchronize({ signal })", { skip }, () => {
  it("an aborted signal rejects with its reason and leaves the pending frees; bad options are refused", async () => {
    const device = await sharedDevice();
    const allocator = new GpuWatermarkAllocator(device);
    const a = allocator.allocate(4096);
    device.queue.submit([]); // a fence for the free to wait on
    a.release();
    const pending = allocator.pendingFreeCount;
    for (
      const options of [
        { signal: {} },
        { signal: 1 },
        { signal: Object.create(AbortSignal.prototype) },
        null,
        7,
        "signal",
      ]
    ) {
      await assert.rejects(
        allocator.synchronize(options as never),
        InvalidArgumentError,
      );
    }
    const reason = new Error("stop");
    await assert.rejects(
      allocator.synchronize({ signal: AbortSignal.abort(reason) }),
      (e) => e === reason,
    );
    assert.ok(allocator.pendingFreeCount <= pending);
    // a getter is read once: it cannot check one signal and hand another
    let reads = 0;
    const controller = new AbortController();
    await allocator.synchronize({
      get signal() {
        reads++;
        return reads === 1 ? controller.signal : AbortSignal.abort();
      },
    });
    assert.equal(reads, 1);
    assert.equal(allocator.pendingFreeCount, 0);
    allocator.emptyCache();
  });

  it("a signal aborted during the wait rejects at once with its reason", async () => {
    const device = await sharedDevice();
    const allocator = new GpuWatermarkAllocator(device);
    const a = allocator.allocate(4096);
    a.release();
    const controller = new AbortController();
    const reason = new Error("late stop");
    const waiting = allocator.synchronize({ signal: controller.signal });
    controller.abort(reason);
    await waiting.then(
      () => {}, // the queue may have been done already
      (e) => assert.equal(e, reason),
    );
    await allocator.synchronize();
    assert.equal(allocator.pendingFreeCount, 0);
    allocator.emptyCache();
  });
});

describe("@allot/webgpu copy kernels keep guard bytes", { skip }, () => {
  const DTYPES = {
    u8: 1,
    i8: 1,
    f16: 2,
    u16: 2,
    i16: 2,
    f32: 4,
    u32: 4,
    i32: 4,
  } as const;
  /** [shape, src strides, src offset, dst strides, dst offset] */
  const CASES: [number[], number[], number, number[], number][] = [
    [[5], [-1], 10, [-2], 12],
    [[3, 3], [1, 3], 0, [3, 1], 1],
    [[7], [3], 2, [1], 5],
    [[2, 3], [3, 1], 0, [-3, -1], 6],
    [[4, 4], [1, 4], 0, [4, 1], 0],
    [[2, 1, 3], [1, 9, 2], 1, [1, 7, 2], 3],
    [[], [], 4, [], 9],
  ];

  function offsets(shape: number[], strides: number[], offset: number) {
    const out: number[] = [];
    const walk = (d: number, at: number): void => {
      if (d === shape.length) {
        out.push(at);
        return;
      }
      for (let i = 0; i < shape[d]; i++) walk(d + 1, at + i * strides[d]);
    };
    walk(0, offset);
    return out;
  }

  it("copyStrided and contiguous write exactly the view's bytes, at binding offsets off 4 bytes, for every dtype", async () => {
    const device = await sharedDevice();
    const kernels = new GpuKernels(device);
    using staging = new GpuStaging(device);
    const SIZE = 512;
    const source = new Uint8Array(SIZE);
    for (let i = 0; i < SIZE; i++) source[i] = (i * 7 + 1) & 255;
    const src = gpuBuffer(device, SIZE);
    device.queue.writeBuffer(src, 0, source);
    const bad: string[] = [];
    for (const [dtype, size] of Object.entries(DTYPES)) {
      for (const [shape, ss, so, ds, dof] of CASES) {
        // 256: a storage-aligned binding; 256 + 3 elements: off 4 (and
        // off 16) bytes for 1- and 2-byte elements
        for (
          const [strided, base] of [
            [true, 256],
            [false, 256],
            [true, 256 + 3 * size],
            [false, 256 + 5 * size],
          ] as const
        ) {
          const dst = gpuBuffer(device, SIZE);
          // the destination binding starts at `base`: bytes before it and
          // past the view are guards
          const binding = { buffer: dst, offset: base, size: 128 };
          if (strided) {
            kernels.copyStrided(
              { buffer: src, offset: 0, size: SIZE },
              { shape, strides: ss, offset: so },
              binding,
              { shape, strides: ds, offset: dof },
              dtype as keyof typeof DTYPES,
            );
          } else {
            kernels.contiguous(
              { buffer: src, offset: 0, size: SIZE },
              { shape, strides: ss, offset: so },
              binding,
              { dtype: dtype as keyof typeof DTYPES, dstOffset: dof },
            );
          }
          await kernels.flush();
          const out = await staging.download({
            buffer: dst,
            offset: 0,
            size: SIZE,
          });
          const want = new Uint8Array(SIZE).fill(0xaa);
          const from = offsets(shape, ss, so);
          const to = strided
            ? offsets(shape, ds, dof)
            : from.map((_, i) => dof + i);
          from.forEach((s, i) => {
            for (let b = 0; b < size; b++) {
              want[base + to[i] * size + b] = source[s * size + b];
            }
          });
          const at = want.findIndex((w, i) => w !== out[i]);
          if (at >= 0) {
            bad.push(
              `${dtype} ${
                strided ? "strided" : "contiguous"
              } at ${base} [${shape}] byte ${at}: ${out[at]} != ${want[at]}`,
            );
          }
          dst.destroy();
        }
      }
    }
    src.destroy();
    assert.deepEqual(bad, []);
  });
});

describe("@allot/webgpu Buffer.copyFrom between overlapping views", {
  skip,
}, () => {
  it("overlapping views of one GPU storage copy as on the host (were refused by the kernels) (model-based)", async () => {
    const device = await sharedDevice();
    const gpu = {
      allocator: new GpuCachingAllocator(device).asAllocator(),
      backend: new GpuBufferBackend(device),
    };
    /** strides and offset of a view of the shared shape */
    const place = fc.record({
      rowStride: fc.integer({ min: -6, max: 6 }),
      colStride: fc.integer({ min: -3, max: 3 }),
      offset: fc.nat({ max: 23 }),
    });
    type P = typeof place extends fc.Arbitrary<infer T> ? T : never;
    const viewOf = (shape: number[], p: P): BufferView | undefined => {
      try {
        const v = new BufferView(shape, {
          strides: [p.rowStride, p.colStride],
          offset: p.offset,
        });
        return v.maxIndex < 24 ? v : undefined;
      } catch {
        return undefined;
      }
    };
    let copies = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Dtype>("u8", "i16", "f16", "f32", "i32"),
        fc.tuple(
          fc.integer({ min: 1, max: 3 }),
          fc.integer({ min: 1, max: 3 }),
        ),
        place,
        place,
        async (dtype, shape, s, d) => {
          const sv = viewOf(shape, s), dv = viewOf(shape, d);
          fc.pre(sv !== undefined && dv !== undefined);
          // a destination must not alias itself (a broadcast is refused)
          const seen = new Set<number>();
          for (let i = 0; i < shape[0]; i++) {
            for (let j = 0; j < shape[1]; j++) {
              seen.add(d.offset + i * d.rowStride + j * d.colStride);
            }
          }
          fc.pre(seen.size === shape[0] * shape[1]);
          const data = Array.from({ length: 24 }, (_, i) => i + 1);
          using host = Buffer.fromData(dtype, data);
          using dev = Buffer.fromData(dtype, data, gpu);
          host.withView(dv!).copyFrom(host.withView(sv!));
          dev.withView(dv!).copyFrom(dev.withView(sv!));
          assert.deepEqual([...await dev.read()], [...host.toData()]);
          copies++;
        },
      ),
      { numRuns: 40 },
    );
    assert.ok(copies >= 20, `${copies} copies ran`);
  });
});

describe("@allot/webgpu GpuSegmentSource request options", { skip }, () => {
  it("tryAllocateSegment() checks its options as core's MockSegmentSource does, making nothing", async () => {
    const device = await sharedDevice();
    const source = new GpuSegmentSource(device);
    const junk = [
      null, // threw TypeError
      5, // accepted
      "shared",
      { hostVisible: 1 }, // asked for shared memory
      { hostVisible: "no" }, // (also shared: a truthy string)
      { label: 5 },
      { label: { toString: () => "ran our code" } },
    ];
    for (const options of junk) {
      assert.throws(
        () => source.tryAllocateSegment(256, options as never),
        InvalidArgumentError,
      );
    }
    assert.deepEqual(
      [source.reservedBytes, source.allocationCount, source.liveSegmentCount],
      [0, 0, 0],
    );
    const segment = source.tryAllocateSegment(256, {
      hostVisible: true,
      label: "ok",
    })!;
    assert.equal(source.isHostVisible(segment.memory), true);
    assert.match(segment.memory.label, / ok$/);
    source.freeSegment(segment);
    assert.equal(source.reservedBytes, 0);
  });
});

describe("@allot/webgpu high-rank copies read their options once", {
  skip,
}, () => {
  it("contiguous() above rank 16 uses the dtype it validated for every dispatch", async () => {
    const device = await sharedDevice();
    const kernels = new GpuKernels(device);
    using staging = new GpuStaging(device);
    // rank 18, nothing foldable: 2 x 2 leading dispatches
    const shape = [2, 2, ...Array(16).fill(1)];
    shape[17] = 3;
    const strides = new Array<number>(18).fill(1);
    strides[0] = 1;
    strides[1] = 6;
    strides[17] = 2;
    const src = gpuBuffer(device, 256);
    device.queue.writeBuffer(
      src,
      0,
      Uint8Array.from({ length: 256 }, (_, i) => i),
    );
    const dst = gpuBuffer(device, 256);
    let reads = 0;
    kernels.contiguous(
      { buffer: src, offset: 0, size: 256 },
      { shape, strides, offset: 0 },
      { buffer: dst, offset: 0, size: 256 },
      {
        get dtype() {
          return reads++ === 0 ? "u8" : "f32";
        },
      } as never,
    );
    await kernels.flush();
    assert.equal(reads, 1);
    const out = await staging.download({ buffer: dst, offset: 0, size: 256 });
    const want: number[] = [];
    for (let a = 0; a < 2; a++) {
      for (let b = 0; b < 2; b++) {
        for (let c = 0; c < 3; c++) want.push(a + 6 * b + 2 * c);
      }
    }
    assert.deepEqual([...out.subarray(0, 12)], want);
    assert.deepEqual([...new Set(out.subarray(12))], [0xaa]);
    src.destroy();
    dst.destroy();
  });
});

describe("@allot/webgpu GpuStaging with a map that throws at once", {
  skip,
}, () => {
  it("an upload buffer whose re-map throws is dropped, not counted live forever (later uploads starved)", async () => {
    const device = await sharedDevice();
    using staging = new GpuStaging(device, {
      writeBufferMaxByteLength: 0,
      chunkByteLength: 4096,
      maxStagingBytes: 8192,
    });
    const dst = gpuBuffer(device, 4096);
    const binding = { buffer: dst, offset: 0, size: 4096 };
    const mapAsync = GPUBuffer.prototype.mapAsync;
    try {
      GPUBuffer.prototype.mapAsync = function () {
        throw new TypeError("map refused at once");
      };
      for (let i = 0; i < 3; i++) {
        await staging.upload(binding, new Uint8Array(4096).fill(i));
      }
    } finally {
      GPUBuffer.prototype.mapAsync = mapAsync;
    }
    assert.deepEqual(
      [staging.stats().reservedBytes, staging.stats().liveCount],
      [0, 0],
    );
    // was: two leaked buffers filled the bound and this upload never ran
    const done = staging.upload(binding, new Uint8Array(4096).fill(9));
    const timeout = new Promise((resolve) => setTimeout(resolve, 5000, "hung"));
    assert.equal(
      await Promise.race([done.then(() => "done"), timeout]),
      "done",
    );
    const back = await staging.download(binding);
    assert.deepEqual(counts(back), { 9: 4096 });
    dst.destroy();
  });
});

describe(
  "@allot/webgpu GpuAllocatorAdapter and lying sources",
  { skip },
  () => {
    it("refuses a junk source, a source returning junk, released or short ranges (releasing what it got), and non-DataPtrs in copyData", async () => {
      const device = await sharedDevice();
      for (const junk of [5, null, {}, { allocate: 1 }]) {
        assert.throws(
          () => new GpuAllocatorAdapter(junk as never),
          InvalidArgumentError,
        );
      }
      const real = new GpuWatermarkAllocator(device, { reuse: "queue-order" });
      const made: GpuAllocation[] = [];
      let answer: (n: number) => unknown = () => undefined;
      const lying = {
        device: real.device,
        gpuDevice: device,
        allocate: (n: number) => answer(n),
      };
      const adapter = new GpuAllocatorAdapter(lying as never);
      const answers: [string, (n: number) => unknown][] = [
        ["undefined", () => undefined],
        [
          "a look-alike",
          () => ({ buffer: made[0]?.buffer, offset: 0, size: 64 }),
        ],
        ["a released range", (n) => {
          const a = real.allocate(n);
          a.release();
          return a;
        }],
        ["a short range", (n) => {
          const a = real.allocate(n - 8);
          made.push(a);
          return a;
        }],
      ];
      for (const [name, give] of answers) {
        answer = give;
        assert.throws(
          () => adapter.allocate(64),
          ContractViolationError,
          name,
        );
      }
      // the short range was given back, not leaked
      assert.equal(made[0].released, true);
      assert.equal(real.stats().allocatedBytes.current, 0);
      answer = (n) => real.allocate(n);
      using ok = adapter.allocate(64);
      assert.equal(ok.byteLength, 64);
      const own = real.asAllocator();
      using p = own.allocate(64);
      for (const junk of [{}, null, { memory: p.memory, byteOffset: 0 }]) {
        for (const n of [0, 4]) {
          assert.throws(
            () => own.copyData(junk as never, p, n),
            InvalidArgumentError,
          );
          assert.throws(
            () => own.copyData(p, junk as never, n),
            InvalidArgumentError,
          );
        }
      }
      // a released pointer: a typed error, not a copy from a null buffer
      const gone = own.allocate(64);
      gone.release();
      for (const n of [0, 4]) {
        assert.throws(() => own.copyData(gone, p, n), UseAfterFreeError);
        assert.throws(() => own.copyData(p, gone, n), UseAfterFreeError);
      }
    });
  },
);

describe("@allot/webgpu createUniformBuffer on a lying device", () => {
  it("refuses a buffer of the wrong size with InvalidArgumentError, destroying it (was a DeviceLostError)", () => {
    const gpu = mockGpu();
    const device = gpu.device as unknown as {
      limits: Record<string, number>;
      createBuffer: (d: GPUBufferDescriptor) => unknown;
    };
    device.limits.maxUniformBufferBindingSize = 65536;
    const make = device.createBuffer.bind(device);
    device.createBuffer = (d) => make({ ...d, size: d.size / 2 });
    assert.throws(
      () => createUniformBuffer(gpu.device, new Float32Array(8)),
      (error) =>
        error instanceof InvalidArgumentError &&
        /made a buffer of 16 bytes/.test(error.message),
    );
    assert.equal(gpu.live.size, 0);
  });
});

// The GpuCachingAllocator passed the options object on to two waits, each
// of which read `signal` again (3 reads): a getter could have one signal
// checked and another used. Like GpuWatermarkAllocator (above), it reads it
// once.
describe("GpuCachingAllocator.synchronize({ signal }) reads the signal once", {
  skip,
}, () => {
  it("reads options.signal once", async () => {
    const device = await sharedDevice();
    const allocator = new GpuCachingAllocator(device, {
      reuse: "after-fence",
    });
    let reads = 0;
    const controller = new AbortController();
    await allocator.synchronize({
      get signal() {
        reads++;
        return controller.signal;
      },
    });
    assert.equal(reads, 1);
    // checked once, used as checked: a getter that hands out an aborted
    // signal after a live one cannot get past the check
    const aborted = AbortSignal.abort(new Error("stop"));
    const syncs = allocator.memoryStats().numSyncAllStreams;
    let n = 0;
    await allocator.synchronize({
      get signal() {
        return n++ === 0 ? controller.signal : aborted;
      },
    });
    await assert.rejects(
      allocator.synchronize({ signal: aborted }),
      (e) => e === aborted.reason,
    );
    await assert.rejects(
      allocator.synchronize({ signal: {} as AbortSignal }),
      InvalidArgumentError,
    );
    // the refused and aborted calls counted no wait
    assert.equal(allocator.memoryStats().numSyncAllStreams, syncs + 1);
  });
});

describe("@allot/webgpu GpuStaging bytes (model-based)", { skip }, () => {
  it("uploads and downloads at any offset, length and staging bound move exactly their bytes, guards kept", async () => {
    const device = await sharedDevice();
    const SIZE = 8192;
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          chunk: fc.constantFrom(4096, 8192),
          chunks: fc.integer({ min: 1, max: 3 }),
          writeMax: fc.constantFrom(0, 64, 1 << 20),
          bindAt: fc.constantFrom(0, 256, 512),
          at: fc.nat({ max: 3000 }),
          length: fc.integer({ min: 1, max: 5000 }),
          readAt: fc.nat({ max: 3000 }),
          readLength: fc.integer({ min: 1, max: 5000 }),
          seed: fc.nat({ max: 255 }),
        }),
        async (c) => {
          const size = SIZE - c.bindAt;
          fc.pre(c.at + c.length <= size && c.readAt + c.readLength <= size);
          using staging = new GpuStaging(device, {
            chunkByteLength: c.chunk,
            maxStagingBytes: c.chunk * c.chunks,
            writeBufferMaxByteLength: c.writeMax,
          });
          const buffer = gpuBuffer(device, SIZE, 0xaa);
          const model = new Uint8Array(SIZE).fill(0xaa);
          const data = Uint8Array.from(
            { length: c.length },
            (_, i) => (i * 31 + c.seed) & 255,
          );
          const binding = { buffer, offset: c.bindAt, size };
          const sent = staging.upload(binding, data, { byteOffset: c.at });
          data.fill(0); // read at the call
          await sent;
          model.set(
            Uint8Array.from(
              { length: c.length },
              (_, i) => (i * 31 + c.seed) & 255,
            ),
            c.bindAt + c.at,
          );
          const whole = await staging.download({
            buffer,
            offset: 0,
            size: SIZE,
          });
          assert.deepEqual(whole, model);
          const part = await staging.download(binding, {
            byteOffset: c.readAt,
            byteLength: c.readLength,
          });
          assert.deepEqual(
            part,
            model.subarray(
              c.bindAt + c.readAt,
              c.bindAt + c.readAt + c.readLength,
            ),
          );
          buffer.destroy();
        },
      ),
      { numRuns: 25 },
    );
  });
});
