import assert from "node:assert/strict";
import {
  captureStack,
  classifyFrame,
  parseTrace,
  recordBufferPool,
  recordDevice,
  type TraceEvent,
} from "./mod.ts";

/** A device stand-in with WebGPU's method shapes on prototypes, like a real one. */
class FakeBuffer {
  destroyed = 0;
  constructor(readonly size: number, readonly usage: number) {}
  destroy() {
    this.destroyed++;
  }
  mapAsync(_mode: number) {
    return Promise.resolve();
  }
  unmap() {}
}
class FakeQueue {
  calls: string[] = [];
  submit(list: unknown[]) {
    this.calls.push(`submit ${list.length}`);
  }
  writeBuffer(_b: unknown, _o: number, data: ArrayBufferView) {
    this.calls.push(`write ${data.byteLength}`);
  }
}
class FakeDevice {
  readonly #queue = new FakeQueue();
  get queue() {
    return this.#queue;
  }
  createBuffer(d: { size: number; usage: number }) {
    if (d.size < 0) throw FAIL;
    return new FakeBuffer(d.size, d.usage);
  }
}
const FAIL = new RangeError("size is negative");

const ops = (events: readonly TraceEvent[]) =>
  events.filter((e) => e.op !== "stack").map((e) => {
    const x = e as unknown as Record<string, unknown>;
    return [e.op, x.id ?? x.count ?? x.name ?? x.call].join(" ");
  });

Deno.test("recordDevice records every call, in order, and the device still works", async () => {
  const raw = new FakeDevice();
  const { device, recorder, stop } = recordDevice(raw as unknown as GPUDevice);
  assert.equal(device, raw); // the same object: native calls get genuine objects
  recorder.step("a");
  const b = recorder.withTag(
    "t1",
    () => device.createBuffer({ size: 64, usage: 8 }),
  );
  device.queue.writeBuffer(b, 0, new Float32Array(4));
  device.queue.writeBuffer(b, 4, new Float32Array(8), 2, 3);
  device.queue.submit([{} as GPUCommandBuffer, {} as GPUCommandBuffer]);
  await b.mapAsync(1);
  b.unmap();
  b.destroy();
  b.destroy(); // a second destroy is legal WebGPU and not a second event
  recorder.step("b");
  stop();
  device.createBuffer({ size: 1, usage: 1 }); // not recorded after stop
  const trace = parseTrace(recorder.toJsonLines());
  assert.deepEqual(ops(trace.events), [
    "step a",
    "create 0",
    "write 0",
    "write 0",
    "submit 2",
    "map 0",
    "unmap 0",
    "destroy 0",
    "step b",
  ]);
  const create = trace.events.find((e) => e.op === "create")!;
  assert.equal(create.tag, "t1");
  assert.ok(create.s !== undefined);
  const writes = trace.events.filter((e) => e.op === "write");
  assert.deepEqual(writes.map((w) => [w.offset, w.size]), [[0, 16], [4, 12]]);
  assert.equal((b as unknown as FakeBuffer).destroyed, 2);
  assert.deepEqual(raw.queue.calls, ["write 16", "write 32", "submit 2"]);
});

Deno.test("recordDevice lets the device's own error through unchanged", () => {
  const { device, recorder } = recordDevice(
    new FakeDevice() as unknown as GPUDevice,
  );
  assert.throws(
    () => device.createBuffer({ size: -1, usage: 1 }),
    (e) => e === FAIL,
  );
  const last = recorder.events.at(-1)!;
  assert.equal(last.op, "error");
  assert.equal(parseTrace(recorder.toJsonLines()).events.length, 1);
});

Deno.test("recordDevice refuses a non-device and a device recorded twice", () => {
  assert.throws(() => recordDevice({} as GPUDevice), TypeError);
  const d = new FakeDevice() as unknown as GPUDevice;
  recordDevice(d);
  assert.throws(() => recordDevice(d), /already recorded/);
});

Deno.test("captureStack: user frames first, allot and runtime frames marked, V8's limit restored", () => {
  const E = Error as { stackTraceLimit?: number };
  const before = E.stackTraceLimit;
  const deep = (n: number): ReturnType<typeof captureStack> =>
    n === 0
      ? captureStack({
        classify: (at) => at.includes("deep") ? "user" : classifyFrame(at),
      })
      : deep(n - 1);
  const frames = deep(30);
  assert.equal(E.stackTraceLimit, before);
  assert.ok(
    frames.length > 30,
    `only ${frames.length} frames: the limit was not raised`,
  );
  const firstOther = frames.findIndex((f) => f.kind !== "user");
  assert.ok(frames.slice(firstOther).every((f) => f.kind !== "user"));
  assert.equal(
    classifyFrame(
      "x (file:///app/node_modules/@allot/caching/caching_allocator.js:1:1)",
    ),
    "allot",
  );
  assert.equal(
    classifyFrame("x (file:///c/npm/registry.npmjs.org/@tensorflow/a.js:1:1)"),
    "runtime",
  );
  assert.equal(
    classifyFrame("x (ext:deno_webgpu/01_webgpu.js:1:1)"),
    "runtime",
  );
  assert.equal(classifyFrame("main (file:///home/me/app.ts:3:3)"), "user");
});

Deno.test("recordBufferPool records a pool's acquire/release as alloc/free", () => {
  const rec = recordDevice(new FakeDevice() as unknown as GPUDevice);
  const pool = {
    numBytesUsed: 0,
    acquireBuffer(size: number, usage: number) {
      this.numBytesUsed += size;
      return rec.device.createBuffer({ size, usage });
    },
    releaseBuffer(b: GPUBuffer) {
      this.numBytesUsed -= b.size;
    },
  };
  recordBufferPool(pool, rec);
  const a = pool.acquireBuffer(100, 128);
  pool.releaseBuffer(a);
  const t = parseTrace(rec.recorder.toJsonLines());
  assert.deepEqual(ops(t.events), ["create 0", "alloc 1", "free 1"]);
  assert.equal(t.events.find((e) => e.op === "alloc")!.buffer, 0);
  assert.throws(() => recordBufferPool({} as never, rec), TypeError);
});

Deno.test({
  name: "recordDevice on this runtime's WebGPU",
  ignore: !("gpu" in navigator),
  async fn() {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return;
    const { device, recorder, stop } = recordDevice(
      await adapter.requestDevice(),
    );
    const b = device.createBuffer({
      size: 256,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    device.queue.writeBuffer(
      device.createBuffer({ size: 16, usage: GPUBufferUsage.COPY_DST }),
      0,
      new Uint8Array(16),
    );
    device.queue.submit([device.createCommandEncoder().finish()]);
    await b.mapAsync(GPUMapMode.READ);
    assert.equal(b.getMappedRange().byteLength, 256);
    b.unmap();
    b.destroy();
    // the runtime's own TypeError (missing size) passes through unchanged
    let bare: unknown, wrapped: unknown;
    try {
      GPUDevice.prototype.createBuffer.call(device, {} as GPUBufferDescriptor);
    } catch (e) {
      bare = e;
    }
    try {
      device.createBuffer({} as GPUBufferDescriptor);
    } catch (e) {
      wrapped = e;
    }
    assert.ok(bare instanceof Error && wrapped instanceof Error);
    assert.equal(wrapped.constructor, bare.constructor);
    assert.equal(wrapped.message, bare.message);
    stop();
    device.destroy();
    assert.deepEqual(ops(parseTrace(recorder.toJsonLines()).events), [
      "create 0",
      "create 1",
      "write 1",
      "submit 1",
      "map 0",
      "unmap 0",
      "destroy 0",
      "error createBuffer",
    ]);
  },
});
