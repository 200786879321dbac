/**
 * Outside-in checks of `@allot/registry` against look-alikes and shared
 * state: an allocator that returns `Object.create(DataPtr.prototype)` is
 * refused with a typed error, and `Registry.entries()` hands out entries a
 * caller cannot change.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AllocatorBase,
  DataPtr,
  Device,
  InvalidArgumentError,
} from "@allot/core";
import { OwnershipRegistry, Registry } from "./mod.ts";

class Plain extends AllocatorBase<ArrayBuffer, null> {
  readonly device: Device = Device.cpu();
  allocate(byteLength: number): DataPtr<ArrayBuffer, null> {
    return new DataPtr(new ArrayBuffer(byteLength), 0, byteLength, this.device);
  }
}

class LookAlike extends Plain {
  override allocate(): DataPtr<ArrayBuffer, null> {
    return Object.create(DataPtr.prototype);
  }
}

describe("@allot/registry look-alikes", () => {
  it("OwnershipRegistry.newArray refuses an allocator that returns a look-alike DataPtr with a typed error, registering nothing", () => {
    const registry = new OwnershipRegistry();
    assert.throws(
      () => registry.newArray("f32", 4, { allocator: new LookAlike() }),
      InvalidArgumentError,
    );
    assert.equal(registry.pointerCount + registry.bufferCount, 0);
    registry.newArray("f32", 4, { allocator: new Plain() }); // still works
  });

  it("Registry.entries() hands out frozen entries: a caller's edit never reaches the registry", () => {
    const registry = new Registry();
    const user = new Plain(), evil = new Plain();
    registry.set("cpu", user, { priority: 10 });
    for (const e of registry.entries()) {
      assert.throws(() => {
        (e as { allocator: unknown }).allocator = evil;
      }, TypeError);
      assert.throws(() => {
        (e as { priority: number }).priority = -1;
      }, TypeError);
    }
    assert.equal(registry.get("cpu:0"), user);
    assert.equal(registry.set("cpu", evil), false); // priority 10 still holds
  });
});
