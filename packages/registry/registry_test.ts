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
import {
  AllocatorNotFoundError,
  defaultRegistry,
  Registry,
} from "./registry.ts";

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
      { numRuns: 100 },
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
});
