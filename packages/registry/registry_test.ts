import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllocatorBase,
  DataPtr,
  Device,
  InvalidArgumentError,
} from "@allot/core";
import { CpuAllocator } from "@allot/cpu";
import type { Buffer, BufferBackend } from "@allot/storage";
import {
  AllocatorNotFoundError,
  BackendNotFoundError,
  defaultRegistry,
  Registry,
} from "./registry.ts";
import { modelRuns } from "../core/_test_faults.ts";

class Plain extends AllocatorBase<ArrayBuffer, null> {
  readonly device: Device;
  constructor(device = "cpu:0", readonly label = "") {
    super();
    this.device = Device.parse(device);
  }
  allocate(byteLength: number): DataPtr<ArrayBuffer, null> {
    return new DataPtr(
      new ArrayBuffer(byteLength),
      0,
      byteLength,
      this.device,
    );
  }
}

describe("Registry", () => {
  it("Registry.set() replaces a registration only at equal or higher priority", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 20 }),
        (priorities) => {
          const registry = new Registry();
          let model: { a: Plain; p: number } | undefined;
          for (const p of priorities) {
            const a = new Plain();
            const took = registry.set("cpu", a, { priority: p });
            const expected = model === undefined || p >= model.p;
            assert.equal(took, expected);
            if (expected) model = { a, p };
            assert.equal(registry.get("cpu"), model!.a);
            assert.equal(registry.priorityOf("cpu"), model!.p);
          }
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("Registry.get() prefers the exact device over its type", () => {
    const registry = new Registry();
    const any = new Plain("webgpu:0"), second = new Plain("webgpu:1");
    registry.set("webgpu", any);
    registry.set(new Device("webgpu", 1), second);
    assert.equal(registry.get("webgpu:0"), any);
    assert.equal(registry.get("webgpu:1"), second);
    assert.equal(registry.get(new Device("webgpu", 7)), any);
    assert.equal(registry.get("webgpu"), any);
    assert.ok(registry.delete("webgpu"));
    assert.equal(registry.tryGet("webgpu:0"), undefined);
    assert.equal(registry.get("webgpu:1"), second);
    assert.deepEqual(registry.entries().map((e) => e.target), ["webgpu:1"]);
  });

  it("Registry.get() throws AllocatorNotFoundError naming the device and what is registered", () => {
    const registry = new Registry();
    registry.set("cpu", new Plain());
    assert.throws(() => registry.get("wasm:2"), (error: unknown) => {
      assert.ok(error instanceof AllocatorNotFoundError);
      assert.equal(String(error.device), "wasm:2");
      assert.match(
        error.message,
        /No allocator is registered for wasm:2: registered cpu/,
      );
      return true;
    });
  });

  it("Registry.set() refuses bad input and changes nothing", () => {
    const registry = new Registry();
    const a = new Plain();
    registry.set("cpu", a, { priority: 3 });
    const before = registry.entries();
    assert.throws(
      () => registry.set("cpu", new Plain(), { priority: 256 }),
      /priority/,
    );
    assert.throws(
      () => registry.set("cpu", new Plain(), { priority: -1 }),
      InvalidArgumentError,
    );
    assert.throws(
      () => registry.set("CPU", new Plain()),
      /Invalid device target/,
    );
    assert.throws(
      () => registry.set("cpu:x", new Plain()),
      /Invalid device string/,
    );
    assert.throws(
      () => registry.set("webgpu", new Plain()),
      /must be of type webgpu, received cpu:0/,
    );
    assert.throws(() => registry.set("cpu", {} as Plain), InvalidArgumentError);
    assert.deepEqual(registry.entries(), before);
  });

  it("defaultRegistry() is created once, lazily", () => {
    const r = defaultRegistry();
    assert.ok(r instanceof Registry);
    assert.equal(defaultRegistry(), r);
  });

  it("Registry.storage() and Registry.buffer() allocate through the allocator serving the device", () => {
    const registry = new Registry();
    const counts = { cpu: 0, wasm: 0 };
    class Counting extends Plain {
      override allocate(byteLength: number): DataPtr<ArrayBuffer, null> {
        counts[this.device.type as "cpu" | "wasm"]++;
        return super.allocate(byteLength);
      }
    }
    registry.set("cpu", new Counting("cpu:0"));
    registry.set("wasm", new Counting("wasm:0"));
    {
      using storage = registry.storage(64, { resizable: true });
      assert.equal(storage.target.byteLength, 64);
      using ones = registry.buffer("i32", [2, 2], {
        device: "wasm:0",
        fill: 7,
      });
      assert.deepEqual([...ones.toData()], [7, 7, 7, 7]);
      using empty = registry.buffer("u8", [3]);
      assert.deepEqual(empty.shape, [3]);
    }
    assert.deepEqual(counts, { cpu: 2, wasm: 1 });
    assert.throws(
      () => registry.storage(8, { device: "webgpu" }),
      AllocatorNotFoundError,
    );
    assert.throws(() => registry.storage(-1), InvalidArgumentError);
    assert.deepEqual(counts, { cpu: 2, wasm: 1 });
  });

  it("defaultRegistry() serves cpu with @allot/cpu's CpuAllocator at priority 0, which users replace", () => {
    const r = defaultRegistry();
    const previous = r.get("cpu");
    assert.ok(previous instanceof CpuAllocator);
    assert.equal(r.priorityOf("cpu"), 0);
    using b = r.buffer("f64", [4], { fill: 0.5 });
    assert.equal(b.toData()[3], 0.5);
    const mine = new Plain();
    assert.ok(r.set("cpu", mine));
    assert.equal(r.get("cpu:0"), mine);
    r.set("cpu", previous); // restore for other tests
  });

  it("Registry.set() refuses an allocator of another device index and objects without allocate()", () => {
    const registry = new Registry();
    registry.set("cpu:1", new Plain("cpu:1"));
    const before = registry.entries();
    assert.throws(
      () => registry.set("cpu:1", new Plain("cpu:0")),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        /allocator of cpu:0 for cpu:1/.test(e.message),
    );
    assert.throws(
      () => registry.set("cpu", { device: Device.cpu() } as unknown as Plain),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        /not an Allocator \(it has no allocate\(\) method\)/.test(e.message),
    );
    assert.throws(
      () =>
        registry.set("cpu", new Plain(), {
          backend: {} as unknown as BufferBackend,
        }),
      InvalidArgumentError,
    );
    // a type-level registration serves any index
    assert.equal(registry.set("cpu", new Plain("cpu:3")), true);
    assert.deepEqual(registry.entries().slice(0, 1), before);
  });

  it("Registry.buffer() on non-host memory needs a backend: refused at once without one, used when registered", () => {
    // an allocator whose memory is not host memory (as a GPU's)
    class Opaque extends AllocatorBase<object, object> {
      readonly device = new Device("webgpu", 0);
      live = 0;
      allocate(byteLength: number): DataPtr<object, object> {
        this.live++;
        return new DataPtr({ opaque: true }, 0, byteLength, this.device, {
          context: {},
          deleter: () => void this.live--,
        });
      }
    }
    const registry = new Registry();
    const gpu = new Opaque();
    registry.set("webgpu", gpu as never);
    assert.throws(
      () => registry.buffer("f32", [4], { device: "webgpu" }),
      (e: unknown) =>
        e instanceof BackendNotFoundError &&
        String(e.device) === "webgpu:0" &&
        /backend: new GpuBufferBackend/.test(e.message),
    );
    assert.equal(gpu.live, 0); // nothing leaked
    const fills: number[] = [];
    const backend: BufferBackend = {
      name: "fake",
      copy() {},
      fill: (_dst, value) => void fills.push(value),
      write() {},
      read: () => Promise.resolve(new Float32Array(4)),
    };
    registry.set("webgpu", gpu as never, { backend });
    assert.equal(registry.backendOf("webgpu:0"), backend);
    using b = registry.buffer("f32", [4], { device: "webgpu", fill: 3 });
    assert.equal(b.backend, backend);
    assert.deepEqual(fills, [3]);
  });

  it("Registry.memory() reports live storages and bytes per device, like tf.memory()", () => {
    const registry = new Registry();
    registry.set("cpu", new CpuAllocator());
    registry.set("wasm", new Plain("wasm:0"));
    assert.deepEqual(registry.memory(), {
      numStorages: 0,
      numBytes: 0,
      devices: {},
    });
    const model: Buffer<"f32">[] = [];
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              op: fc.constant("make" as const),
              n: fc.integer({ min: 0, max: 64 }),
              wasm: fc.boolean(),
            }),
            fc.record({ op: fc.constant("free" as const), i: fc.nat() }),
          ),
          { maxLength: 80 },
        ),
        (ops) => {
          for (const o of ops) {
            if (o.op === "make") {
              const b = registry.buffer("f32", [o.n], {
                device: o.wasm ? "wasm" : "cpu",
              });
              model.push(b);
              // a view shares the storage: counted once
              b.reshape([o.n]).release();
            } else if (model.length > 0) {
              model.splice(o.i % model.length, 1)[0].release();
            }
          }
          const devices: Record<
            string,
            { numStorages: number; numBytes: number }
          > = {};
          for (const b of model) {
            const d = devices[String(b.storage.device)] ??= {
              numStorages: 0,
              numBytes: 0,
            };
            d.numStorages++;
            d.numBytes += b.storage.byteLength;
          }
          const memory = registry.memory();
          assert.equal(memory.numStorages, model.length);
          assert.equal(
            memory.numBytes,
            model.reduce((s, b) => s + b.storage.byteLength, 0),
          );
          assert.deepEqual(memory.devices, devices);
        },
      ),
      { numRuns: modelRuns() },
    );
    for (const b of model) b.release();
    assert.equal(registry.memory().numStorages, 0);
  });
});
