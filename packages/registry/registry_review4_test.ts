/**
 * Fourth outside-in review of `@allot/registry`: option bags of the
 * per-call verbs. A misspelt key (`bytelength`, `alias`, `filll`,
 * `resizeable`, `alignmnt`, `rank`) did nothing, silently; they are refused
 * now, naming the key and the accepted ones, and the refused call changes
 * nothing.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { CpuAllocator } from "@allot/cpu";
import { OwnershipRegistry, Registry, WorkspacePool } from "./mod.ts";

function refusesKey(f: () => unknown, key: string): void {
  assert.throws(
    f,
    (e: unknown) =>
      e instanceof InvalidArgumentError &&
      e.message.includes(`"${key}"`) &&
      Array.isArray(e.limit),
  );
}

describe("registry fourth review", () => {
  it("OwnershipRegistry.register(), registerBuffer() and newArray() refuse unknown option keys, registering nothing", () => {
    using registry = new OwnershipRegistry();
    const a = new Float32Array(8);
    refusesKey(
      () => registry.register(a, { bytelength: 4 } as never),
      "bytelength",
    );
    refusesKey(
      () => registry.registerBuffer(a, { alias: [a.subarray(2)] } as never),
      "alias",
    );
    // aliases belong to registerBuffer() only
    refusesKey(
      () => registry.register(a, { aliases: [] } as never),
      "aliases",
    );
    refusesKey(
      () => registry.newArray("f32", 4, { alignmnt: 64 } as never),
      "alignmnt",
    );
    assert.equal(registry.pointerCount, 0);
    assert.equal(registry.isRegistered(a), false);
    registry.registerBuffer(a, { byteLength: 32, aliases: [a.subarray(2)] });
    assert.ok(registry.isRegistered(a.subarray(2)));
    const b = registry.newArray("f32", 4, { alignment: 64 });
    assert.equal(b.length, 4);
  });

  it("new WorkspacePool() refuses unknown option keys", () => {
    using registry = new OwnershipRegistry();
    refusesKey(
      () => new WorkspacePool(registry, "f32", 4, { rank: 2 } as never),
      "rank",
    );
    assert.equal(registry.pointerCount, 0);
  });

  it("Registry.set(), storage() and buffer() refuse unknown option keys, changing nothing", () => {
    const registry = new Registry();
    registry.set("cpu", new CpuAllocator());
    refusesKey(
      () => registry.storage(8, { resizeable: true } as never),
      "resizeable",
    );
    refusesKey(
      () => registry.buffer("f32", [2], { filll: 1 } as never),
      "filll",
    );
    const cpu = registry.get("cpu");
    refusesKey(
      () => registry.set("cpu", cpu, { priorty: 9 } as never),
      "priorty",
    );
    assert.equal(registry.get("cpu"), cpu);
    using ones = registry.buffer("f32", [2], { fill: 1 });
    assert.deepEqual([...ones.toData()], [1, 1]);
  });
});
