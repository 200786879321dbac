import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DoubleFreeError, UseAfterFreeError } from "@allot/core";
import { OwnershipRegistry } from "./ownership_registry.ts";
import { ArrayOwner, RegistryGuard } from "./registry_guard.ts";

describe("RegistryGuard", () => {
  it("RegistryGuard frees its array at scope exit, also when an exception is thrown", () => {
    using registry = new OwnershipRegistry();
    let seen: Float32Array | undefined;
    assert.throws(() => {
      using guard = new RegistryGuard(registry, "f32", 100);
      seen = guard.array;
      assert.equal(registry.requestedBytes, 400);
      throw new Error("boom");
    }, /boom/);
    assert.equal(registry.requestedBytes, 0);
    assert.equal(seen?.length, 0);
  });

  it("RegistryGuard.release() moves ownership out and the guard no longer frees", () => {
    using registry = new OwnershipRegistry();
    let out: Uint8Array;
    {
      using guard = new RegistryGuard(registry, "u8", 8);
      out = guard.release();
      assert.equal(guard.owns, false);
      assert.throws(() => guard.array, UseAfterFreeError);
      assert.throws(() => guard.release(), UseAfterFreeError);
    }
    assert.ok(registry.isRegistered(out));
    registry.unregister(out);
  });

  it("RegistryGuard.handOff() gives an ArrayOwner whose release unregisters once", () => {
    using registry = new OwnershipRegistry();
    let owner: ArrayOwner<Float64Array>;
    {
      using guard = new RegistryGuard(registry, "f64", 4);
      guard.array.set([1, 2, 3, 4]);
      owner = guard.handOff();
    }
    assert.deepEqual([...owner.array], [1, 2, 3, 4]);
    assert.equal(registry.pointerCount, 1);
    owner.release();
    assert.equal(registry.pointerCount, 0);
    assert.throws(() => owner.release(), DoubleFreeError);
    assert.throws(() => owner.array, UseAfterFreeError);
  });

  it("ArrayOwner refuses an array that is not registered", () => {
    using registry = new OwnershipRegistry();
    assert.throws(
      () => new ArrayOwner(registry, new Float32Array(2)),
      DoubleFreeError,
    );
  });

  it("ArrayOwner of an alias keeps the buffer alive until every owner released", () => {
    using registry = new OwnershipRegistry();
    const block = registry.newArray("f32", 20);
    const rows = [block.subarray(0, 10), block.subarray(10, 20)];
    registry.addAlias(block, rows[1]);
    const owners = rows.map((r) => new ArrayOwner(registry, r));
    owners[0].release(); // the real pointer's reference
    assert.equal(block.length, 20);
    owners[1][Symbol.dispose]();
    assert.equal(block.length, 0);
  });
});
