import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  Device,
  DoubleFreeError,
  InvalidArgumentError,
  MockSegmentSource,
  OutOfMemoryError,
  UnsupportedOperationError,
} from "@allot/core";
import { SystemAllocator } from "@allot/cpu";
import { PlaceAllocator } from "./place_allocator.ts";

describe("PlaceAllocator", () => {
  it("PlaceAllocator makes one buddy allocator per place on first use", () => {
    const memory = new PlaceAllocator({ initialPoolByteLength: 1 << 16 });
    assert.deepEqual(memory.places(), []);
    const a = memory.alloc("cpu", 4096);
    const b = memory.alloc(Device.cpu(1), 100);
    assert.equal(
      memory.allocatorFor("cpu:0"),
      memory.allocatorFor(Device.cpu()),
    );
    assert.notEqual(memory.allocatorFor("cpu:0"), memory.allocatorFor("cpu:1"));
    assert.deepEqual(memory.places().map(String), ["cpu:0", "cpu:1"]);
    assert.equal(memory.used("cpu"), 4096);
    assert.equal(memory.used("cpu:1"), 256);
    assert.equal(memory.used("cpu:7"), 0);
    assert.ok(b.device.equals(Device.cpu(1)));
    memory.free("cpu", a);
    memory.free("cpu:1", b);
    assert.equal(memory.used("cpu"), 0);
  });

  it("PlaceAllocator.free() refuses pointers of another place and double frees", () => {
    const memory = new PlaceAllocator({ initialPoolByteLength: 1 << 16 });
    const a = memory.alloc("cpu:0", 64);
    memory.alloc("cpu:1", 64);
    assert.throws(() => memory.free("cpu:1", a), /not allocated on this place/);
    assert.equal(memory.used("cpu:0"), 256);
    memory.free("cpu:0", a);
    assert.throws(() => memory.free("cpu:0", a), DoubleFreeError);
  });

  it("PlaceAllocator serves a GPU-like place from a segment source", () => {
    const gpu = new MockSegmentSource({
      device: Device.parse("webgpu:0"),
      capacityBytes: 1 << 20,
    });
    const memory = new PlaceAllocator({
      initialPoolByteLength: 1 << 18,
      maxPoolByteLength: 1 << 20,
      backing: (device) => device.type === "webgpu" ? gpu : undefined,
    });
    const p = memory.alloc("webgpu:0", 1000);
    assert.equal(p.device.type, "webgpu");
    assert.equal(gpu.reservedBytes, 1 << 18);
    assert.equal(memory.used("webgpu:0"), 1024);
    const buddy = memory.allocatorFor("webgpu:0");
    assert.throws(
      () => buddy.view(p.getContext()!, Uint8Array),
      UnsupportedOperationError,
    );
    memory.free("webgpu:0", p);
    assert.equal(buddy.trim(), 1 << 18);
    assert.equal(gpu.reservedBytes, 0);
    gpu.failNext();
    assert.throws(() => memory.alloc("webgpu:0", 10), OutOfMemoryError);
    assert.equal(memory.used("webgpu:0"), 0);
  });

  it("PlaceAllocator uses the backing factory for other places", () => {
    const memory = new PlaceAllocator({
      initialPoolByteLength: 4096,
      backing: (device) =>
        device.type === "wasm" ? new SystemAllocator({ device }) : undefined,
    });
    const p = memory.alloc("wasm:0", 10);
    assert.equal(p.device.type, "wasm");
    assert.throws(() => memory.alloc("cpu", 10), UnsupportedOperationError);
    assert.throws(() => memory.alloc("not a place", 10), InvalidArgumentError);
    assert.throws(
      () => new PlaceAllocator({ minBlockByteLength: 3 }),
      InvalidArgumentError,
    );
  });
});

describe("PlaceAllocator strict mode", () => {
  it("PlaceAllocator passes strict to every place's buddy allocator: freed bytes junk-filled, invariants checked; off by default", () => {
    for (const strict of [true, false]) {
      const places = new PlaceAllocator({
        initialPoolByteLength: 1 << 16,
        strict,
      });
      const ptr = places.alloc("cpu", 64);
      const buddy = places.allocatorFor("cpu");
      let checks = 0;
      const check = buddy.checkIntegrity.bind(buddy);
      Object.defineProperty(buddy, "checkIntegrity", {
        value: () => {
          checks++;
          check();
        },
      });
      const stale = new Uint8Array(
        ptr.memory as ArrayBuffer,
        ptr.byteOffset,
        64,
      );
      stale.fill(1);
      places.free("cpu", ptr);
      assert.equal(stale[0] !== 1, strict, `${strict}`);
      places.free("cpu", places.alloc("cpu", 64));
      assert.equal(checks, strict ? 3 : 0);
    }
  });
});
