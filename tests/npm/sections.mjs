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

  async webgpu(env) {
    const { GpuSegmentSource } = await env.load("webgpu");
    const device = await env.gpuDevice();
    const source = new GpuSegmentSource(device);
    const segment = source.tryAllocateSegment(256);
    assert.ok(segment, "no segment");
    assert.equal(segment.byteLength, 256);
    device.queue.writeBuffer(
      segment.memory,
      segment.byteOffset,
      new Uint32Array([7, 8, 9, 10]),
    );
    const bytes = await readBack(
      device,
      segment.memory,
      segment.byteOffset,
      16,
    );
    assert.deepEqual([...new Uint32Array(bytes.buffer)], [7, 8, 9, 10]);
    source.freeSegment(segment);
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
  const failed = results.filter((r) => !r.ok).length;
  return { passed: results.length - failed, failed, results };
}
