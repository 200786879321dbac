import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CpuAllocator } from "@allot/cpu";
import { OwnershipRegistry } from "./ownership_registry.ts";

// Known defect (own7 review, not fixed): records are keyed by place
// (memory, byteOffset). A registered DataPtr released behind the registry's
// back leaves a stale record; the allocator hands the place to a new
// pointer, which the registry then refuses as "already registered", and
// unregister(newPointer) drops the stale record and frees nothing, so the
// registry's figures no longer match the allocator's.
describe("OwnershipRegistry: stale record after a direct release", () => {
  it("a new owner at a released pointer's place is registered and freed", {
    skip: "known defect: stale place record after a direct DataPtr release",
  }, () => {
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
});
