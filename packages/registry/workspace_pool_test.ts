import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError, UseAfterFreeError } from "@allot/core";
import { OwnershipRegistry } from "./ownership_registry.ts";
import { WorkspacePool } from "./workspace_pool.ts";

describe("WorkspacePool", () => {
  it("WorkspacePool.get() returns the same preallocated array per rank", () => {
    using registry = new OwnershipRegistry();
    const pool = new WorkspacePool(registry, "f32", 256, { ranks: 3 });
    assert.equal(registry.pointerCount, 3);
    assert.equal(registry.requestedBytes, 3 * 1024);
    const first = [0, 1, 2].map((r) => pool.get(r));
    for (let i = 0; i < 30; i++) assert.equal(pool.get(i % 3), first[i % 3]);
    assert.equal(new Set(first.map((a) => a.buffer)).size, 3);
    assert.equal(registry.pointerCount, 3);
    pool.release();
    assert.equal(registry.pointerCount, 0);
    assert.ok(first.every((a) => a.length === 0));
    assert.throws(() => pool.get(0), UseAfterFreeError);
    pool.release();
  });

  it("WorkspacePool refuses bad ranks and leaves nothing allocated", () => {
    using registry = new OwnershipRegistry();
    assert.throws(
      () => new WorkspacePool(registry, "f32", 8, { ranks: 0 }),
      InvalidArgumentError,
    );
    assert.throws(
      () => new WorkspacePool(registry, "f32", -8, { ranks: 2 }),
      InvalidArgumentError,
    );
    assert.equal(registry.requestedBytes, 0);
    using pool = new WorkspacePool(registry, "u8", 8, { ranks: 2 });
    assert.throws(() => pool.get(2), /\[0, 1\], received 2/);
    assert.throws(() => pool.get(0.5), InvalidArgumentError);
  });

  it("WorkspacePool with shared: true uses SharedArrayBuffers", () => {
    using registry = new OwnershipRegistry();
    using pool = new WorkspacePool(registry, "i32", 4, {
      ranks: 2,
      shared: true,
    });
    assert.ok(pool.get(1).buffer instanceof SharedArrayBuffer);
  });
});
