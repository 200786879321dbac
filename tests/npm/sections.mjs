// Checks of the built npm packages that run the same way on Node
// (tests/npm/node_check.mjs) and in Chromium (tests/npm/browser_check.mjs):
// one section per package that allocates, views, copies and frees through
// its public API, plus a raw WebGPU check of the environment. Plain
// JavaScript for Node 20 and browsers: no `using`, no TypeScript.

/** A small assert that works in both places. */
export const assert = {
  ok(value, message = "expected a truthy value") {
    if (!value) throw new Error(message);
  },
  equal(actual, expected, message) {
    if (!Object.is(actual, expected)) {
      throw new Error(
        message ?? `expected ${String(expected)}, received ${String(actual)}`,
      );
    }
  },
  deepEqual(actual, expected, message) {
    const a = JSON.stringify(actual);
    const e = JSON.stringify(expected);
    if (a !== e) throw new Error(message ?? `expected ${e}, received ${a}`);
  },
  throws(fn, type, message) {
    try {
      fn();
    } catch (error) {
      if (type && !(error instanceof type)) {
        throw new Error(
          message ?? `expected a ${type.name}, received ${String(error)}`,
        );
      }
      return error;
    }
    throw new Error(message ?? "expected the call to throw");
  },
};

/** Copies a GPU buffer range back to the host. */
export async function readBack(device, buffer, byteOffset, byteLength) {
  const staging = device.createBuffer({
    label: "allot-check:staging",
    size: byteLength,
    usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
  });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, byteOffset, staging, 0, byteLength);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const bytes = new Uint8Array(staging.getMappedRange().slice(0));
  staging.unmap();
  staging.destroy();
  return bytes;
}

/**
 * The environment check: a GPUDevice writes a buffer and reads it back.
 *
 * @param {{ gpuDevice: () => Promise<GPUDevice> }} env
 */
export async function rawWebGpu(env) {
  const device = await env.gpuDevice();
  const buffer = device.createBuffer({
    label: "allot-check:raw",
    size: 16,
    usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
      GPUBufferUsage.COPY_DST,
  });
  device.queue.writeBuffer(buffer, 0, new Float32Array([1.5, 2.5, 3.5, 4.5]));
  const bytes = await readBack(device, buffer, 0, 16);
  assert.deepEqual([...new Float32Array(bytes.buffer)], [1.5, 2.5, 3.5, 4.5]);
  buffer.destroy();
}

/**
 * One section per package, keyed by folder name. Each gets
 * `env.load(pkg)` (imports `@allot/<pkg>`) and `env.gpuDevice()`.
 */
export const sections = {
  async core(env) {
    const core = await env.load("core");
    const { AllocatorBase, DataPtr, Device, IntrusivePtr, IntrusiveTarget } =
      core;
    class Simple extends AllocatorBase {
      device = Device.cpu();
      live = 0;
      allocate(byteLength) {
        const memory = new ArrayBuffer(byteLength);
        this.live += byteLength;
        return new DataPtr(memory, 0, byteLength, this.device, {
          context: byteLength,
          deleter: (n) => (this.live -= n),
        });
      }
    }
    const allocator = new Simple();
    const a = allocator.allocate(16);
    new Float32Array(a.memory, a.byteOffset, 4).set([1, 2, 3, 4]);
    const b = allocator.clone(a);
    assert.deepEqual([...new Float32Array(b.memory)], [1, 2, 3, 4]);
    assert.equal(allocator.live, 32);
    const c = allocator.allocate(8);
    assert.equal(c.byteLength, 8);
    c[Symbol.dispose](); // what `using` calls at scope exit
    assert.equal(allocator.live, 32);
    a.release();
    b.release();
    assert.equal(allocator.live, 0);
    assert.throws(() => a.memory, core.UseAfterFreeError);
    assert.throws(() => Device.parse("nope:x"), core.AllotError);
    assert.equal(String(Device.parse("webgpu:1")), "webgpu:1");
    let freed = 0;
    class Owner extends IntrusiveTarget {
      releaseResources() {
        freed++;
      }
    }
    const p = IntrusivePtr.make(new Owner());
    const q = p.clone();
    p.release();
    q.release();
    assert.equal(freed, 1);
  },

  async buddy(env) {
    const { PlaceAllocator } = await env.load("buddy");
    const memory = new PlaceAllocator({ initialPoolByteLength: 1 << 20 });
    const a = memory.alloc("cpu", 4096);
    const b = memory.alloc("cpu", 4096);
    assert.equal(a.byteOffset % 64, 0, "64-byte alignment");
    assert.equal(memory.used("cpu"), 8192);
    const bytesA = new Uint8Array(a.memory, a.byteOffset, a.byteLength);
    const bytesB = new Uint8Array(b.memory, b.byteOffset, b.byteLength);
    bytesA.fill(7);
    bytesB.set(bytesA);
    assert.equal(bytesB[4095], 7);
    memory.free("cpu", a);
    memory.free("cpu", b);
    assert.equal(memory.used("cpu"), 0);
  },

  async caching(env) {
    const { CachingAllocator } = await env.load("caching");
    const { ManualStream, MockSegmentSource } = await env.load("core");
    const device = new MockSegmentSource({ capacityBytes: 64 * 2 ** 20 });
    const allocator = new CachingAllocator(device);
    const stream = new ManualStream();
    const a = allocator.allocate(3000, { stream });
    assert.equal(a.byteLength >= 3000, true);
    a.release();
    const b = allocator.allocate(3000, { stream }); // served from the cache
    assert.equal(device.allocationCount, 1);
    assert.equal(allocator.memoryStats().allocatedBytes.all.current, 3072);
    b.release();
    assert.equal(allocator.memoryStats().allocatedBytes.all.current, 0);
    assert.ok(allocator.snapshot().segments.length >= 1);
    allocator.validate();
  },

  async cpu(env) {
    const { CpuAllocator, CpuHeap, SystemAllocator } = await env.load("cpu");
    const { OutOfMemoryError } = await env.load("core");
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 4 });
    const heap = new CpuHeap(memory, { maxByteLength: 4 * 65536 });
    const allocator = new CpuAllocator({ heap });
    const a = allocator.allocate(4096);
    const b = allocator.allocate(4096);
    assert.equal(a.byteOffset % 64, 0, "64-byte alignment");
    allocator.view(a, Float32Array).fill(1.5);
    allocator.copyData(b, a, 4096);
    assert.equal(allocator.view(b, Float32Array)[1023], 1.5);
    assert.equal(heap.bytesInUse, 8192);
    assert.throws(() => allocator.allocate(1 << 30), OutOfMemoryError);
    assert.equal(heap.bytesInUse, 8192, "a refused call changes nothing");
    a.release();
    b[Symbol.dispose]();
    assert.equal(heap.bytesInUse, 0);
    const system = new SystemAllocator();
    const c = system.allocate(64);
    assert.equal(c.byteLength, 64);
    c.release();
  },

  async registry(env) {
    const { AllocatorNotFoundError, Registry } = await env.load("registry");
    const { AllocatorBase, DataPtr, Device } = await env.load("core");
    class Plain extends AllocatorBase {
      device = Device.cpu();
      allocate(byteLength) {
        return new DataPtr(
          new ArrayBuffer(byteLength),
          0,
          byteLength,
          this.device,
        );
      }
    }
    const registry = new Registry();
    const user = new Plain();
    registry.set("cpu", user, { priority: 10 });
    assert.equal(registry.set("cpu", new Plain()), false, "lower priority");
    assert.equal(registry.get(Device.cpu()), user);
    const a = registry.get("cpu:0").allocate(64);
    new Uint8Array(a.memory).fill(3);
    const b = user.clone(a);
    assert.equal(new Uint8Array(b.memory)[63], 3);
    a.release();
    b.release();
    assert.throws(() => registry.get("webgpu:0"), AllocatorNotFoundError);
  },

  async sparse(env) {
    const { SparseMatrix } = await env.load("sparse");
    const { OwnershipRegistry } = await env.load("registry");
    const registry = new OwnershipRegistry();
    const csr = {
      values: new Float64Array([10, 20, 30, 40]),
      indices: new Int32Array([0, 3, 1, 2]),
      indptr: new Int32Array([0, 2, 2, 4]),
    };
    const m = SparseMatrix.build(csr, { shape: [3, 4], registry });
    const last = m.slice(2, 3);
    m.release(); // the slice keeps its block alive
    assert.deepEqual([...last.entries()], [[0, 1, 30], [0, 2, 40]]);
    last.release();
    assert.equal(registry.totalBytes, 0);
    registry[Symbol.dispose]();
  },

  async storage(env) {
    const { Buffer } = await env.load("storage");
    const m = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
    const t = m.transpose(); // a view: same storage
    assert.deepEqual(t.shape, [3, 2]);
    assert.equal(t.storageId, m.storageId);
    const packed = t.contiguous(); // a copy
    assert.deepEqual([...packed.toData()], [1, 4, 2, 5, 3, 6]);
    packed.release();
    t.release();
    m.release();
  },

  async threads(env) {
    // Browsers give SharedArrayBuffer to cross-origin isolated pages only
    // (the browser check serves COOP/COEP headers).
    assert.ok(
      typeof SharedArrayBuffer === "function",
      `SharedArrayBuffer is missing (crossOriginIsolated: ${globalThis.crossOriginIsolated})`,
    );
    const { NotSharedMemoryError, SharedHeap, SharedHeapAllocator } = await env
      .load("threads");
    const { Buffer } = await env.load("storage");
    assert.throws(
      () => SharedHeap.create(new ArrayBuffer(1 << 20)),
      NotSharedMemoryError,
    );
    const memory = new WebAssembly.Memory({
      initial: 64,
      maximum: 64,
      shared: true,
    });
    const heap = SharedHeap.create(memory);
    // A second handle, as a Worker makes from the posted descriptor.
    const other = SharedHeap.attach(structuredClone(heap.descriptor()));
    const a = heap.alloc(100), big = other.alloc(100_000);
    heap.free(big); // a free into the other arena
    other.free(a);
    const here = new SharedHeapAllocator(heap);
    const there = new SharedHeapAllocator(other);
    const m = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], {
      shape: [2, 3],
      allocator: here,
    });
    const b = there.receive(structuredClone(here.share(m)));
    b.set([1, 2], 9);
    assert.equal(m.get([1, 2]), 9, "both sides see the same bytes");
    m.release();
    b.release();
    assert.equal(heap.stats().allocationCount, 0);
    other.detach();
    if (globalThis.process?.versions?.node) {
      // A real worker_threads Worker allocates from the same heap and
      // reads a Buffer handed to it; this thread frees its blocks.
      const { Worker } = await import("node:worker_threads");
      const v = Buffer.fromData("i32", [5, 6, 7], { allocator: here });
      const worker = new Worker(
        `const { parentPort, workerData } = require("node:worker_threads");
        import("@allot/threads").then(({ SharedHeap, SharedHeapAllocator }) => {
          const heap = SharedHeap.attach(workerData.heap);
          const allocator = new SharedHeapAllocator(heap);
          const got = allocator.receive(workerData.buffer);
          const sum = got.toData().reduce((a, x) => a + x, 0);
          got.release();
          const blocks = [];
          for (let i = 0; i < 200; i++) {
            const at = heap.alloc(16 << (i % 14));
            new Uint8Array(heap.buffer, at, 16).fill(i & 255);
            blocks.push(at);
          }
          heap.detach();
          parentPort.postMessage({ sum, blocks });
        }).catch((e) => parentPort.postMessage({ error: String(e.stack) }));`,
        {
          eval: true,
          workerData: { heap: heap.descriptor(), buffer: here.share(v) },
        },
      );
      const reply = await new Promise((resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
      });
      await worker.terminate();
      assert.equal(reply.error, undefined, reply.error);
      assert.equal(reply.sum, 18);
      reply.blocks.forEach((at, i) => {
        assert.equal(new Uint8Array(heap.buffer, at, 16)[15], i & 255);
        heap.free(at); // frees into the Worker's abandoned slabs
      });
      v.release();
      assert.equal(heap.stats().allocationCount, 0);
      env.log("  threads: a worker_threads Worker shared the heap");
    }
    heap.close();
  },

  async watermark(env) {
    const { WatermarkAllocator, WatermarkOutOfMemoryError } = await env.load(
      "watermark",
    );
    const { MockSegmentSource } = await env.load("core");
    const MiB = 1 << 20;
    const device = new MockSegmentSource({ capacityBytes: 256 * MiB });
    const allocator = new WatermarkAllocator(device, {
      highWatermarkRatio: 1.0,
      lowWatermarkRatio: 0.5,
    });
    const buffers = [1, 2, 3].map(() => allocator.allocateBuffer(60 * MiB));
    for (const b of buffers) b.release();
    allocator.allocateBuffer(100 * MiB).release();
    assert.ok(allocator.stats().numGarbageCollections >= 1);
    assert.ok(allocator.driverAllocatedBytes <= allocator.highWatermarkLimit);
    assert.throws(
      () => allocator.allocateBuffer(300 * MiB),
      WatermarkOutOfMemoryError,
    );
  },

  async webgpu(env) {
    const { GpuKernels, GpuSegmentSource, GpuStaging } = await env.load(
      "webgpu",
    );
    const device = await env.gpuDevice();
    const source = new GpuSegmentSource(device);
    const staging = new GpuStaging(device);
    const a = source.tryAllocateSegment(256);
    const b = source.tryAllocateSegment(256);
    assert.ok(a && b, "no segment");
    assert.equal(a.byteLength, 256);
    const binding = (s) => ({
      buffer: s.memory,
      offset: s.byteOffset,
      size: 24,
    });
    // Upload a 2x3 matrix, make its transposed view contiguous on the GPU,
    // read it back.
    await staging.upload(binding(a), new Float32Array([1, 2, 3, 4, 5, 6]));
    GpuKernels.of(device).contiguous(
      binding(a),
      { shape: [3, 2], strides: [1, 3], offset: 0 },
      binding(b),
      { dtype: "f32" },
    );
    const bytes = await staging.download(binding(b));
    assert.deepEqual([...new Float32Array(bytes.buffer)], [1, 4, 2, 5, 3, 6]);
    source.freeSegment(a);
    source.freeSegment(b);
    // The pooled path: @allot/caching carving blocks out of GPU segments.
    const { CachingAllocator } = await env.load("caching");
    const pool = new CachingAllocator(source);
    const block = pool.allocate(4096);
    const view = { buffer: block.memory, offset: block.byteOffset, size: 16 };
    await staging.upload(view, new Uint32Array([1, 2, 3, 4]));
    const back = await staging.download(view);
    assert.deepEqual([...new Uint32Array(back.buffer)], [1, 2, 3, 4]);
    block.release();
    pool.emptyCache();
    staging.release();
  },
};

/**
 * The packages composed as the demo composes them: a registry with a CPU
 * heap and a caching allocator over WebGPU, a storage tensor on the GPU, a
 * zero-copy strided view, packed by a WGSL kernel, read back and compared
 * with the same view on the CPU, then everything released.
 */
export const composition = {
  needs: ["cpu", "registry", "storage", "webgpu"],
  async run(env) {
    const { CpuAllocator } = await env.load("cpu");
    const { Registry } = await env.load("registry");
    const { Buffer } = await env.load("storage");
    const { GpuBufferBackend, GpuCachingAllocator } = await env.load("webgpu");
    const device = await env.gpuDevice();
    const registry = new Registry();
    const cpu = new CpuAllocator({ byteLength: 1 << 24 });
    const gpu = new GpuCachingAllocator(device);
    registry.set("cpu", cpu);
    registry.set("webgpu", gpu.asAllocator(), { priority: 10 });
    const backend = new GpuBufferBackend(device);
    const [rows, cols] = [64, 96];
    const data = Float32Array.from({ length: rows * cols }, (_, i) => i % 251);
    const owned = [];
    const keep = (b) => (owned.push(b), b);
    const a = keep(Buffer.fromData("f32", data, {
      shape: [rows, cols],
      allocator: registry.get("webgpu:0"),
      backend,
    }));
    const ref = keep(Buffer.fromData("f32", data, {
      shape: [rows, cols],
      allocator: registry.get("cpu"),
    }));
    const view = keep(
      keep(a.transpose()).slice(0, { start: cols - 1, step: -3 }),
    );
    assert.ok(view.sharesStorageWith(a), "a view shares its storage");
    const packed = keep(view.contiguous());
    const got = await packed.read();
    const expected = keep(
      keep(ref.transpose()).slice(0, {
        start: cols - 1,
        step: -3,
      }),
    ).toData();
    assert.equal(got.length, expected.length);
    assert.deepEqual([...got], [...expected]);
    // a plain transpose takes the block kernel (16-byte vectors)
    const transposed = keep(keep(a.transpose()).contiguous());
    assert.deepEqual(
      [...await transposed.read()],
      [...keep(ref.transpose()).toData()],
    );
    for (const b of owned.reverse()) b.release();
    await gpu.synchronize();
    assert.equal(cpu.bytesInUse, 0, "the CPU heap is empty again");
  },
};

/**
 * f16 buffers that live on the GPU and are never viewed on the host work on
 * runtimes without `Float16Array` (Node 20): filled, transposed and packed
 * by the kernels, checked through their raw bits; a host view alone is
 * refused, with a message that says why.
 */
export const f16OnGpu = {
  needs: ["registry", "storage", "webgpu"],
  async run(env) {
    const { Registry } = await env.load("registry");
    const { GpuBufferBackend, GpuCachingAllocator, gpuBufferOf, bindingOf } =
      await env.load("webgpu");
    const device = await env.gpuDevice();
    const registry = new Registry();
    const gpu = new GpuCachingAllocator(device);
    registry.set("webgpu", gpu.asAllocator(), {
      backend: new GpuBufferBackend(device),
    });
    const a = registry.buffer("f16", [3, 4], { device: "webgpu", fill: 1.5 });
    const t = a.transpose();
    const packed = t.contiguous();
    assert.equal(packed.isContiguous, true);
    const range = bindingOf(packed);
    const bits = await readBack(
      device,
      gpuBufferOf(packed),
      range.offset,
      24,
    );
    // 1.5 in IEEE half precision is 0x3e00
    assert.deepEqual(
      [...new Uint16Array(bits.buffer, 0, 12)],
      new Array(12).fill(0x3e00),
    );
    assert.equal(registry.memory().numStorages, 1);
    if (typeof globalThis.Float16Array === "undefined") {
      assert.throws(() => packed.hostView(), Error);
      await packed.read().then(
        () => assert.ok(false, "read() of f16 needs Float16Array"),
        (e) => assert.ok(/no Float16Array/.test(e.message), e.message),
      );
    }
    for (const b of [packed, t, a]) b.release();
    await gpu.synchronize();
  },
};

/**
 * Runs the environment check and every installed package's section.
 *
 * @param {string[]} packages Installed `@allot/*` folder names.
 * @param {object} env `load`, `gpuDevice`, and `log` for progress lines.
 * @returns {Promise<{ passed: number, failed: number, results: object[] }>}
 */
export async function runAll(packages, env) {
  const results = [];
  async function check(name, fn) {
    try {
      await fn(env);
      results.push({ name, ok: true });
      env.log(`  ok   ${name}`);
    } catch (error) {
      const message = String(error?.stack ?? error);
      results.push({ name, ok: false, error: message });
      env.log(`  FAIL ${name}\n${message}`);
    }
  }
  await check(
    "WebGPU: a GPUDevice writes a buffer and reads it back",
    rawWebGpu,
  );
  for (const pkg of packages) {
    if (env.loadAll) {
      await check(`@allot/${pkg}: every module loads`, () => env.loadAll(pkg));
    }
    await check(
      `@allot/${pkg}: allocate, view, copy, free`,
      sections[pkg] ?? (() => {
        throw new Error(
          `no section for @allot/${pkg} in tests/npm/sections.mjs: add one`,
        );
      }),
    );
  }
  if (composition.needs.every((pkg) => packages.includes(pkg))) {
    await check(
      "composition: a strided tensor view packed on WebGPU equals the CPU's",
      composition.run,
    );
  }
  if (f16OnGpu.needs.every((pkg) => packages.includes(pkg))) {
    await check(
      "f16 on the GPU without host views (Float16Array optional)",
      f16OnGpu.run,
    );
  }
  const failed = results.filter((r) => !r.ok).length;
  return { passed: results.length - failed, failed, results };
}
