import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CpuAllocator } from "@allot/cpu";
import { OwnershipRegistry } from "./ownership_registry.ts";

// Records are keyed by place (memory, byteOffset). A registered DataPtr
// released behind the registry's back leaves a stale record; the registry
// sees the pointer's released state and drops that record (and its alias
// places) before refusing anything at its places, freeing nothing.
describe("OwnershipRegistry: stale record after a direct release", () => {
  it("a new owner at a released pointer's place is registered and freed", () => {
    const cpu = new CpuAllocator({ byteLength: 1 << 16 });
    using registry = new OwnershipRegistry();
    const p = cpu.allocate(256);
    registry.register(p);
    p.release(); // behind the registry's back
    const q = cpu.allocate(256);
    assert.equal(q.byteOffset, 0);
    registry.register(q);
    registry.unregister(q);
    assert.equal(q.released, true);
    assert.equal(cpu.allocatedBytes, 0);
    assert.equal(registry.requestedBytes, 0);
  });

  it("releasing a registered DataPtr twice (directly, then by unregister) frees once", () => {
    const cpu = new CpuAllocator({ byteLength: 1 << 16 });
    using registry = new OwnershipRegistry();
    const p = cpu.allocate(256);
    registry.register(p);
    registry.unregister(p);
    p.release();
    assert.equal(cpu.allocatedBytes, 0);
    const q = cpu.allocate(256);
    registry.register(q);
    registry.dispose();
    assert.equal(q.released, true);
    q.release();
    assert.equal(cpu.allocatedBytes, 0);
  });

  it("a stale buffer's alias places are dropped too, and the figures add up", () => {
    const cpu = new CpuAllocator({ byteLength: 1 << 16 });
    using registry = new OwnershipRegistry();
    const p = cpu.allocate(256);
    registry.registerBuffer(p, {
      aliases: [{ memory: p.memory, byteOffset: p.byteOffset + 64 }],
    });
    p.release(); // behind the registry's back
    const q = cpu.allocate(256);
    assert.equal(q.byteOffset, 0);
    const inner = { memory: q.memory, byteOffset: 64 };
    // A lookup of the alias place finds the stale record and drops it.
    assert.equal(registry.isRegistered(inner), false);
    assert.equal(registry.isRegistered(q), false);
    registry.register(q);
    registry.register(inner, { byteLength: 8, kind: "system" });
    assert.deepEqual(
      [registry.stats().pointers, registry.stats().buffers],
      [2, 0],
    );
    assert.equal(registry.stats().references, 0);
    assert.equal(registry.requestedBytes, 264);
    registry.unregister(inner);
    registry.unregister(q);
    assert.equal(q.released, true);
    assert.equal(cpu.allocatedBytes, 0);
    assert.equal(registry.requestedBytes, 0);
  });

  it("stats(), records() and dispose() drop stale records; live ones stay", () => {
    const cpu = new CpuAllocator({ byteLength: 1 << 16 });
    const registry = new OwnershipRegistry();
    const p = cpu.allocate(128), live = cpu.allocate(64);
    registry.register(p);
    registry.register(live);
    p.release();
    assert.deepEqual(registry.records().map((r) => r.byteLength), [64]);
    assert.equal(registry.stats().pointers, 1);
    assert.equal(registry.stats().requestedBytes.current, 64);
    // Another object naming the live pointer's place finds its record.
    assert.equal(
      registry.isRegistered({
        memory: live.memory,
        byteOffset: live.byteOffset,
      }),
      true,
    );
    registry.unregister(live);
    assert.equal(registry.dispose(), undefined); // no leak reported
    assert.equal(cpu.allocatedBytes, 0);
  });
});
