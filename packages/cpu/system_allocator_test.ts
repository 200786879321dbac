import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AllotError,
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
} from "@allot/core";
import { SystemAllocator } from "./system_allocator.ts";
import { HostSegmentSource } from "./host_segment_source.ts";
import { ProfiledMemoryReporter } from "./memory_reporter.ts";

describe("SystemAllocator", () => {
  it("SystemAllocator.allocate() makes one zeroed buffer per allocation", () => {
    const system = new SystemAllocator();
    const a = system.allocate(100);
    const b = system.allocate(100);
    assert.notEqual(a.memory, b.memory);
    assert.equal(a.byteOffset, 0);
    assert.ok(new Uint8Array(a.memory).every((x) => x === 0));
    assert.equal(system.allocatedBytes, 200);
    assert.equal(system.allocationCount, 2);
    a.release();
    b.release();
    assert.deepEqual(system.stats(), {
      current: 0,
      peak: 200,
      allocated: 200,
      freed: 200,
    });
  });

  it("SystemAllocator makes SharedArrayBuffers when shared", () => {
    const system = new SystemAllocator({ shared: true });
    assert.ok(system.allocate(8).memory instanceof SharedArrayBuffer);
  });

  it("SystemAllocator refuses bad lengths, double frees and foreign buffers", () => {
    const reporter = new ProfiledMemoryReporter();
    const system = new SystemAllocator({ capacityBytes: 1000, reporter });
    for (const bad of [-1, 0.5, NaN, Infinity]) {
      assert.throws(() => system.allocate(bad), InvalidArgumentError);
    }
    const raw = system.rawAllocate(10);
    system.rawDeallocate(raw);
    assert.throws(() => system.rawDeallocate(raw), DoubleFreeError);
    assert.throws(
      () => system.rawDeallocate(new ArrayBuffer(10)),
      DoubleFreeError,
    );
    assert.throws(
      () => system.allocate(1001),
      (e: unknown) =>
        e instanceof OutOfMemoryError && e.requestedBytes === 1001 &&
        /1000 of 1000 bytes free/.test(e.message),
    );
    assert.equal(reporter.outOfMemoryCount, 1);
    assert.equal(system.allocatedBytes, 0);
    assert.equal(system.allocate(1000).byteLength, 1000);
  });

  it("SystemAllocator junk-fills fresh buffers when asked", () => {
    const system = new SystemAllocator({ junkFill: true });
    const a = system.allocate(8);
    assert.equal(new Uint32Array(a.memory)[1], 0x7fedbeef);
  });
});

describe("HostSegmentSource", () => {
  it("HostSegmentSource makes segments within its capacity and refuses foreign ones", () => {
    const source = new HostSegmentSource({ capacityBytes: 1024 });
    const a = source.tryAllocateSegment(1000);
    assert.ok(a);
    assert.equal(a.memory.byteLength, 1000);
    assert.equal(source.tryAllocateSegment(100), undefined);
    assert.throws(() => source.tryAllocateSegment(0), InvalidArgumentError);
    assert.throws(
      () =>
        source.freeSegment({
          memory: new ArrayBuffer(4),
          byteOffset: 0,
          byteLength: 4,
        }),
      DoubleFreeError,
    );
    source.freeSegment(a);
    assert.throws(() => source.freeSegment(a), DoubleFreeError);
    assert.equal(source.reservedBytes, 0);
    assert.equal(source.peakReservedBytes, 1000);
    assert.equal(source.alignment, 64);
  });
});

describe("SystemAllocator strict mode", () => {
  it("SystemAllocator in strict mode detaches a freed ArrayBuffer (stale views read length 0) and junk-fills a shared one; off by default", () => {
    for (const strict of [true, false]) {
      const allocator = new SystemAllocator({ strict });
      const ptr = allocator.allocate(64);
      const stale = new Uint8Array(ptr.memory).fill(1);
      ptr.release();
      assert.equal(stale.length, strict ? 0 : 64);
      const shared = new SystemAllocator({ strict, shared: true });
      const sp = shared.allocate(64);
      const staleShared = new Uint8Array(sp.memory).fill(1);
      sp.release();
      assert.equal(staleShared[0] !== 1, strict);
    }
  });

  it("SystemAllocator in strict mode validates on every call and catches a live buffer detached behind its back", () => {
    for (const strict of [true, false]) {
      const allocator = new SystemAllocator({ strict });
      let calls = 0;
      const validate = allocator.validate.bind(allocator);
      Object.defineProperty(allocator, "validate", {
        value: () => {
          calls++;
          validate();
        },
      });
      allocator.allocate(8).release(); // 2 + 1
      assert.equal(calls, strict ? 3 : 0);
      const ptr = allocator.allocate(64);
      structuredClone(ptr.memory, { transfer: [ptr.memory as ArrayBuffer] });
      if (strict) assert.throws(() => allocator.allocate(8), AllotError);
      else allocator.allocate(8);
      assert.throws(() => validate(), AllotError);
    }
  });
});
