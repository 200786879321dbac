/**
 * Ownership hazards from issue #17 (item 2, item 10 and WorkspacePool after
 * dispose): each test failed on the registry before the fix.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  UnsupportedOperationError,
  UseAfterFreeError,
} from "@allot/core";
import { OwnershipRegistry } from "./ownership_registry.ts";
import { WorkspacePool } from "./workspace_pool.ts";
import { ReusingAllocator } from "./_test_reusing_allocator.ts";
import { modelRuns } from "../core/_test_faults.ts";

function snapshot(registry: OwnershipRegistry) {
  return {
    stats: registry.stats(),
    records: registry.records().map((r) => ({ ...r })),
  };
}

describe("OwnershipRegistry ownership hazards (#17)", () => {
  it("unregister() of a stale heap array whose place was reused throws UseAfterFreeError and leaves the new owner alone", () => {
    const allocator = new ReusingAllocator();
    using registry = new OwnershipRegistry();
    const stale = registry.newArray("f32", 4, { allocator });
    registry.unregister(stale);
    const owner = registry.newArray("f32", 4, { allocator });
    assert.equal(owner.byteOffset, stale.byteOffset, "the place was reused");
    assert.equal(owner.buffer, stale.buffer);
    const before = snapshot(registry);
    assert.throws(() => registry.unregister(stale), UseAfterFreeError);
    assert.throws(() => registry.addAlias(stale, stale), UseAfterFreeError);
    assert.throws(() => registry.transferOut(stale), UseAfterFreeError);
    assert.equal(registry.isRegistered(stale), false);
    assert.equal(registry.tryUnregister(stale), false);
    assert.equal(registry.recordOf(stale), undefined);
    assert.deepEqual(snapshot(registry), before);
    assert.equal(allocator.live.size, 1, "the new owner's block is alive");
    // A view the owner made of its own array still reaches its record.
    assert.ok(registry.isRegistered(owner.subarray(0)));
    assert.equal(registry.unregister(owner), true);
    assert.equal(allocator.live.size, 0);
    // Re-registering the very array that was stale makes it live again.
    const again = registry.newArray("f32", 4, { allocator });
    registry.unregister(again);
    registry.register(stale, { kind: "heap" });
    assert.ok(registry.isRegistered(stale));
    registry.unregister(stale);
  });

  it("adopt() of a view that does not own its whole ArrayBuffer does not detach the rest on unregister", () => {
    using registry = new OwnershipRegistry();
    const buffer = new ArrayBuffer(16);
    const left = new Uint8Array(buffer, 0, 8);
    const right = new Uint8Array(buffer, 8, 8).fill(7);
    registry.adopt(left);
    assert.equal(registry.reservedBytes, 8, "it holds its own bytes only");
    registry.unregister(left);
    assert.equal(buffer.detached, false);
    assert.equal(right.length, 8);
    assert.equal(right[7], 7);
    // A view over the whole buffer does own it: detached when freed.
    const whole = new Uint8Array(new ArrayBuffer(8));
    registry.adopt(whole);
    registry.unregister(whole);
    assert.equal(whole.length, 0);
  });

  it("two adopt()s of the halves of one buffer are both freeable, with no record left", () => {
    using registry = new OwnershipRegistry();
    const buffer = new ArrayBuffer(32);
    const left = new Float32Array(buffer, 0, 4);
    const right = new Float32Array(buffer, 16, 4);
    registry.adopt(left);
    registry.adopt(right);
    assert.equal(registry.pointerCount, 2);
    assert.equal(registry.unregister(left), true);
    assert.equal(registry.unregister(right), true);
    assert.equal(registry.pointerCount, 0);
    assert.deepEqual(registry.records(), []);
    assert.equal(registry.requestedBytes, 0);
    assert.equal(registry.reservedBytes, 0);
    // Neither half can be transferred: that would move the other half too.
    registry.adopt(left);
    assert.throws(() => registry.transferOut(left), UnsupportedOperationError);
    registry.unregister(left);
  });

  it("strict mode detects a stale view that wrote freed heap memory", () => {
    const allocator = new ReusingAllocator();
    const registry = new OwnershipRegistry({ strict: true });
    assert.equal(registry.strict, true);
    const kept = registry.newArray("u8", 8, { allocator });
    const stale = registry.newArray("u8", 8, { allocator });
    registry.unregister(stale);
    assert.deepEqual([...stale], new Array(8).fill(0xdd), "junk-filled");
    stale[3] = 1; // a stale view writes freed memory
    const before = snapshot(registry);
    assert.throws(
      () => registry.register(new Uint8Array(4)),
      (e: unknown) =>
        e instanceof UseAfterFreeError && /byte 67\b/.test(e.message),
    );
    assert.deepEqual(
      snapshot(registry),
      before,
      "the refused call changed nothing",
    );
    // Reported once; the registry keeps working.
    const next = registry.newArray("u8", 8, { allocator });
    next.fill(9); // the new owner writes its own memory: no report
    registry.unregister(kept);
    registry.unregister(next);
    registry.dispose();
  });

  it("without strict mode a stale write is not detected (documented limit)", () => {
    const allocator = new ReusingAllocator();
    using registry = new OwnershipRegistry();
    const stale = registry.newArray("u8", 8, { allocator });
    registry.unregister(stale);
    stale[0] = 1;
    registry.unregister(registry.newArray("u8", 8, { allocator }));
  });

  it("transferOut() of a record whose aliases were all unregistered is allowed", () => {
    using registry = new OwnershipRegistry();
    const data = registry.newArray("f32", 8);
    const half = data.subarray(4);
    registry.addAlias(data, half);
    const before = snapshot(registry);
    assert.throws(() => registry.transferOut(data), UnsupportedOperationError);
    assert.throws(() => registry.transferOut(half), UnsupportedOperationError);
    assert.deepEqual(snapshot(registry), before);
    registry.unregister(half);
    const buffer = registry.transferOut(data);
    assert.equal(buffer, data.buffer);
    assert.equal(registry.bufferCount, 0);
    assert.equal(registry.pointerCount, 0);
    assert.equal(registry.stats().references, 0);
    assert.equal(registry.requestedBytes, 0);
    assert.throws(() => registry.unregister(data), DoubleFreeError);
  });

  it("WorkspacePool.get() after the registry was disposed throws UseAfterFreeError, not a detached array", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    const pool = new WorkspacePool(registry, "f32", 16, { ranks: 2 });
    assert.equal(pool.get(1).length, 16);
    registry.dispose();
    assert.throws(() => pool.get(0), UseAfterFreeError);
    pool.release();
    assert.throws(() => pool.get(0), UseAfterFreeError);
  });

  it("heap places reused at random: stale arrays never reach a live record, counts and blocks match a model", () => {
    type Op =
      | { op: "heap" }
      | { op: "system"; whole: boolean }
      | { op: "free"; pick: number }
      | { op: "stale"; pick: number }
      | { op: "transfer"; pick: number }
      | { op: "alias"; pick: number };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      fc.constant({ op: "heap" as const }),
      fc.record({ op: fc.constant("system" as const), whole: fc.boolean() }),
      fc.record({ op: fc.constant("free" as const), pick: fc.nat() }),
      fc.record({ op: fc.constant("stale" as const), pick: fc.nat() }),
      fc.record({ op: fc.constant("transfer" as const), pick: fc.nat() }),
      fc.record({ op: fc.constant("alias" as const), pick: fc.nat() }),
    );
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 50 }), (ops) => {
        const allocator = new ReusingAllocator();
        const registry = new OwnershipRegistry({ onLeak: () => {} });
        interface M {
          array: Uint8Array;
          heap: boolean;
          aliases: Uint8Array[];
        }
        const live: M[] = [];
        const stale: Uint8Array[] = [];
        const drop = (i: number) => {
          const [m] = live.splice(i, 1);
          if (m.heap) stale.push(m.array);
        };
        for (const o of ops) {
          if (o.op === "heap") {
            const array = registry.newArray("u8", 16, { allocator });
            live.push({ array, heap: true, aliases: [] });
          } else if (o.op === "system") {
            const buffer = new ArrayBuffer(32);
            const array = o.whole
              ? new Uint8Array(buffer)
              : new Uint8Array(buffer, 8, 8);
            registry.adopt(array);
            live.push({ array, heap: false, aliases: [] });
          } else if (o.op === "alias") {
            if (live.length === 0) continue;
            const m = live[o.pick % live.length];
            const alias = m.array.subarray(1 + m.aliases.length % 4);
            registry.addAlias(m.array, alias);
            m.aliases.push(alias);
          } else if (o.op === "free") {
            if (live.length === 0) continue;
            const i = o.pick % live.length;
            const m = live[i];
            // unregister the aliases first, then the array: freed at the end
            for (const a of m.aliases) {
              assert.equal(registry.unregister(a), false);
            }
            assert.equal(registry.unregister(m.array), true);
            drop(i);
          } else if (o.op === "stale") {
            if (stale.length === 0) continue;
            const array = stale[o.pick % stale.length];
            const before = snapshot(registry);
            const blocks = [...allocator.live];
            assert.throws(
              () => registry.unregister(array),
              (e) =>
                e instanceof UseAfterFreeError || e instanceof DoubleFreeError,
            );
            assert.equal(registry.isRegistered(array), false);
            assert.deepEqual(snapshot(registry), before);
            assert.deepEqual([...allocator.live], blocks);
          } else {
            if (live.length === 0) continue;
            const i = o.pick % live.length;
            const m = live[i];
            const movable = !m.heap && m.array.byteLength === 32 &&
              m.aliases.length === 0;
            if (movable) {
              registry.transferOut(m.array);
              drop(i);
            } else {
              const before = snapshot(registry);
              assert.throws(
                () => registry.transferOut(m.array),
                UnsupportedOperationError,
              );
              assert.deepEqual(snapshot(registry), before);
            }
          }
          const stats = registry.stats();
          assert.equal(
            stats.pointers + stats.buffers,
            live.length,
            "one record per live array",
          );
          assert.equal(
            stats.buffers,
            live.filter((m) => m.aliases.length).length,
          );
          assert.equal(
            registry.requestedBytes,
            live.reduce((s, m) => s + m.array.byteLength, 0),
          );
          assert.equal(allocator.live.size, live.filter((m) => m.heap).length);
          for (const m of live) assert.ok(registry.isRegistered(m.array));
        }
        registry.dispose();
        assert.equal(allocator.live.size, 0);
      }),
      { numRuns: modelRuns() },
    );
  });
});
