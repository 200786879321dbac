import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllocatorBase,
  DataPtr,
  Device,
  DoubleFreeError,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import { type LeakReport, OwnershipRegistry } from "./ownership_registry.ts";
import { modelRuns } from "../core/_test_faults.ts";

function snapshot(registry: OwnershipRegistry) {
  return {
    stats: registry.stats(),
    records: registry.records().map((r) => ({ ...r })),
  };
}

class CountingAllocator extends AllocatorBase<ArrayBuffer, number> {
  readonly device: Device = Device.cpu();
  readonly memory = new ArrayBuffer(1 << 16);
  next = 8;
  live = new Set<number>();
  allocate(byteLength: number): DataPtr<ArrayBuffer, number> {
    const offset = this.next;
    this.next += byteLength + 8;
    this.live.add(offset);
    return new DataPtr(this.memory, offset, byteLength, this.device, {
      context: offset,
      deleter: (ctx) => {
        assert.ok(this.live.delete(ctx), `double free of ${ctx}`);
      },
    });
  }
}

describe("OwnershipRegistry", () => {
  it("OwnershipRegistry.unregister() frees a plain pointer at once", () => {
    const registry = new OwnershipRegistry();
    const a = registry.newArray("f32", 1000);
    assert.equal(registry.pointerCount, 1);
    assert.equal(registry.requestedBytes, 4000);
    assert.equal(registry.unregister(a), true);
    assert.equal(a.length, 0, "the system buffer is detached");
    assert.equal(registry.pointerCount, 0);
    assert.equal(registry.requestedBytes, 0);
    assert.equal(registry.dispose(), undefined);
  });

  it("OwnershipRegistry.unregister() of an unknown or freed pointer throws and changes nothing", () => {
    const registry = new OwnershipRegistry();
    const kept = registry.newArray("u8", 10);
    const gone = registry.newArray("u8", 10);
    registry.unregister(gone);
    const before = snapshot(registry);
    assert.throws(() => registry.unregister(gone), DoubleFreeError);
    assert.throws(
      () => registry.unregister(new Uint8Array(4)),
      /not registered/,
    );
    assert.throws(() => registry.unregister(kept.subarray(1)), DoubleFreeError);
    assert.deepEqual(snapshot(registry), before);
    registry.unregister(kept);
    registry.dispose();
  });

  it("OwnershipRegistry.register() refuses bad input and changes nothing", () => {
    const registry = new OwnershipRegistry();
    const main = new Float32Array(16);
    registry.register(main);
    const before = snapshot(registry);
    assert.throws(() => registry.register(main), /already registered/);
    assert.throws(
      () => registry.register({ memory: new ArrayBuffer(8), byteOffset: 0 }),
      /byteLength is required/,
    );
    assert.throws(
      () => registry.register(new Uint8Array(4), { byteLength: -1 }),
      InvalidArgumentError,
    );
    assert.throws(
      () => registry.register(new Uint8Array(4), { kind: "custom" }),
      /deleter function is required/,
    );
    assert.throws(
      () => registry.register(new Uint8Array(8).subarray(4), { alignment: 8 }),
      /multiple of the alignment 8, received 4/,
    );
    assert.throws(
      () => registry.register(new Uint8Array(4), { alignment: 3 }),
      /power of two/,
    );
    const other = new Float32Array(8);
    assert.throws(
      () => registry.registerBuffer(other, { aliases: [main.subarray(2)] }),
      /an alias must lie in/,
    );
    assert.throws(
      () =>
        registry.registerBuffer(other.subarray(0, 4), {
          aliases: [other.subarray(6)],
        }),
      /an alias must lie in/,
    );
    assert.throws(
      () =>
        registry.register({ memory: 7 as unknown as object, byteOffset: 0 }),
      /memory must be an object/,
    );
    assert.deepEqual(snapshot(registry), before);
    assert.ok(!registry.isRegistered(other));
    registry.unregister(main);
    registry.dispose();
  });

  it("OwnershipRegistry.registerBuffer() counts one plus the aliases and frees at zero", () => {
    const registry = new OwnershipRegistry();
    const freed: number[] = [];
    const main = new Float32Array(1000);
    const aliases = Array.from(
      { length: 10 },
      (_, i) => main.subarray(i * 100),
    );
    registry.registerBuffer(main, {
      aliases,
      deleter: () => freed.push(1),
    });
    // aliases[0] is the real pointer itself: one more reference there.
    assert.equal(registry.records()[0].references, 11);
    assert.equal(registry.bufferCount, 1);
    assert.equal(registry.stats().references, 11);
    for (const alias of aliases) registry.unregister(alias);
    assert.equal(registry.records()[0].references, 1);
    assert.deepEqual(freed, []);
    assert.equal(registry.unregister(main), true);
    assert.deepEqual(freed, [1]);
    assert.equal(registry.bufferCount, 0);
    assert.equal(registry.stats().references, 0);
    registry.dispose();
  });

  it("OwnershipRegistry keeps alias reference counts equal to a model under random orders", () => {
    type Op =
      | { op: "buffer"; length: number; aliases: number[]; plain: boolean }
      | { op: "unregister"; pick: number; stale: boolean }
      | { op: "alias"; pick: number; offset: number };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      fc.record({
        op: fc.constant("buffer" as const),
        length: fc.integer({ min: 0, max: 16 }),
        aliases: fc.array(fc.integer({ min: 0, max: 16 }), { maxLength: 5 }),
        plain: fc.boolean(),
      }),
      fc.record({
        op: fc.constant("unregister" as const),
        pick: fc.nat(),
        stale: fc.boolean(),
      }),
      fc.record({
        op: fc.constant("alias" as const),
        pick: fc.nat(),
        offset: fc.integer({ min: 0, max: 20 }),
      }),
    );
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 60 }), (ops) => {
        const registry = new OwnershipRegistry({ onLeak: () => {} });
        // Model: every allocation, the multiset of places that hold references.
        interface M {
          array: Float64Array;
          keys: Map<number, number>; // element offset -> references there
          refs: number;
          buffer: boolean;
          freed: number;
        }
        const live: M[] = [];
        const dead: M[] = [];
        for (const o of ops) {
          if (o.op === "buffer") {
            const m: M = {
              array: new Float64Array(o.length),
              keys: new Map([[0, 1]]),
              refs: 1,
              buffer: !o.plain,
              freed: 0,
            };
            const deleter = () => m.freed++;
            if (o.plain) {
              registry.register(m.array, { deleter });
            } else {
              const aliases = o.aliases.map((i) =>
                m.array.subarray(Math.min(i, o.length))
              );
              registry.registerBuffer(m.array, { deleter, aliases });
              for (const a of aliases) {
                const k = a.byteOffset / 8;
                m.keys.set(k, (m.keys.get(k) ?? 0) + 1);
                m.refs++;
              }
            }
            live.push(m);
          } else if (o.op === "unregister") {
            if (o.stale || live.length === 0) {
              const pool = dead.length > 0 ? dead : live;
              if (pool.length === 0) continue;
              const m = pool[o.pick % pool.length];
              const offset = [...Array(m.array.length + 1).keys()].find((i) =>
                !m.keys.has(i)
              );
              if (offset === undefined) continue;
              const before = snapshot(registry);
              assert.throws(
                () => registry.unregister(m.array.subarray(offset)),
                DoubleFreeError,
              );
              assert.deepEqual(snapshot(registry), before);
            } else {
              const index = o.pick % live.length;
              const m = live[index];
              const keys = [...m.keys.keys()];
              const k = keys[o.pick % keys.length];
              const freed = registry.unregister(m.array.subarray(k));
              const left = m.keys.get(k)! - 1;
              if (left === 0) m.keys.delete(k);
              else m.keys.set(k, left);
              m.refs--;
              assert.equal(freed, m.refs === 0);
              assert.equal(m.freed, m.refs === 0 ? 1 : 0);
              if (m.refs === 0) {
                live.splice(index, 1);
                dead.push(m);
              }
            }
          } else {
            if (live.length === 0) continue;
            const m = live[o.pick % live.length];
            const existing = [...m.keys.keys()][o.pick % m.keys.size];
            if (o.offset > m.array.length) {
              const before = snapshot(registry);
              assert.throws(
                () =>
                  registry.addAlias(m.array.subarray(existing), {
                    memory: m.array.buffer,
                    byteOffset: o.offset * 8,
                  }),
                InvalidArgumentError,
              );
              assert.deepEqual(snapshot(registry), before);
              continue;
            }
            const refs = registry.addAlias(
              m.array.subarray(existing),
              m.array.subarray(o.offset),
            );
            m.keys.set(o.offset, (m.keys.get(o.offset) ?? 0) + 1);
            m.refs++;
            m.buffer = true;
            assert.equal(refs, m.refs);
          }
          // Invariants against the model.
          const stats = registry.stats();
          assert.equal(stats.pointers, live.filter((m) => !m.buffer).length);
          assert.equal(stats.buffers, live.filter((m) => m.buffer).length);
          assert.equal(
            stats.references,
            live.filter((m) => m.buffer).reduce((s, m) => s + m.refs, 0),
          );
          assert.equal(
            registry.requestedBytes,
            live.reduce((s, m) => s + m.array.byteLength, 0),
          );
          for (const m of live) {
            for (let i = 0; i <= m.array.length; i++) {
              assert.equal(
                registry.isRegistered(m.array.subarray(i)),
                m.keys.has(i),
              );
            }
            assert.equal(m.freed, 0);
          }
          for (const m of dead) assert.equal(m.freed, 1);
        }
        // Everything still live is reported and freed exactly once by dispose.
        const reports: LeakReport[] = [];
        const leaked = registry.dispose();
        assert.equal(leaked?.records.length ?? 0, live.length);
        for (const m of [...live, ...dead]) assert.equal(m.freed, 1);
        assert.equal(reports.length, 0);
      }),
      { numRuns: modelRuns() },
    );
  });

  it("OwnershipRegistry treats views of a detached buffer as registered nowhere", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    const a = registry.newArray("f32", 100);
    const b = registry.newArray("f32", 100);
    registry.addAlias(b, b.subarray(50));
    const alias = a.subarray(50);
    registry.unregister(a); // detached: alias now reports byteOffset 0
    assert.equal(alias.byteOffset, 0);
    assert.ok(!registry.isRegistered(alias));
    assert.throws(() => registry.unregister(alias), DoubleFreeError);
    assert.throws(() => registry.register(alias), /detached/);
    assert.throws(() => registry.addAlias(b, alias), UseAfterFreeError);
    assert.throws(
      () => registry.registerBuffer(new Float32Array(4), { aliases: [alias] }),
      /alias's ArrayBuffer is detached/,
    );
    assert.equal(registry.records().length, 1);
    registry.dispose();
  });

  it("OwnershipRegistry.addAlias() turns a plain pointer into a buffer", () => {
    const registry = new OwnershipRegistry();
    const a = registry.newArray("i32", 100);
    assert.equal(registry.addAlias(a, a.subarray(50)), 2);
    assert.equal(registry.pointerCount, 0);
    assert.equal(registry.bufferCount, 1);
    assert.throws(
      () => registry.addAlias(new Int32Array(3), a),
      DoubleFreeError,
    );
    registry.unregister(a.subarray(50));
    registry.unregister(a);
    assert.equal(a.length, 0);
    registry.dispose();
  });

  it("OwnershipRegistry.newArray() uses an allocator, aligns, shares and refuses bad input", () => {
    const allocator = new CountingAllocator();
    const registry = new OwnershipRegistry();
    const heap = registry.newArray("f32", 10, { allocator });
    assert.equal(heap.buffer, allocator.memory);
    assert.equal(registry.recordOf(heap)?.kind, "heap");
    const aligned = registry.newArray("f64", 3, { allocator, alignment: 64 });
    assert.equal(aligned.byteOffset % 64, 0);
    assert.equal(registry.recordOf(aligned)?.kind, "aligned");
    assert.equal(allocator.live.size, 2);
    const shared = registry.newArray("i32", 4, { shared: true });
    assert.ok(shared.buffer instanceof SharedArrayBuffer);
    const before = snapshot(registry);
    assert.throws(() => registry.newArray("f32", -1), /length/);
    assert.throws(() => registry.newArray("f32", 1.5), /length/);
    assert.throws(
      () => registry.newArray("float" as "f32", 1),
      /Unknown dtype/,
    );
    assert.throws(
      () => registry.newArray("f32", 1, { alignment: 48 }),
      /power of two, received 48/,
    );
    assert.throws(
      () => registry.newArray("f32", 1, { shared: true, allocator }),
      /exclusive/,
    );
    assert.deepEqual(snapshot(registry), before);
    assert.equal(allocator.live.size, 2);
    registry.unregister(heap);
    registry.unregister(aligned);
    assert.equal(allocator.live.size, 0);
    registry.unregister(shared);
    registry.dispose();
  });

  it("OwnershipRegistry.register() frees a DataPtr through its allocator", () => {
    const allocator = new CountingAllocator();
    const registry = new OwnershipRegistry();
    const ptr = allocator.allocate(32);
    registry.register(ptr);
    assert.equal(registry.recordOf(ptr)?.kind, "heap");
    assert.ok(
      registry.isRegistered({ memory: ptr.memory, byteOffset: ptr.byteOffset }),
    );
    registry.unregister(ptr);
    assert.ok(ptr.released);
    assert.equal(allocator.live.size, 0);
    assert.throws(() => registry.unregister(ptr), UseAfterFreeError);
    registry.dispose();
  });

  it("OwnershipRegistry.dispose() lists every leaked allocation with its stack", () => {
    const reports: LeakReport[] = [];
    const registry = new OwnershipRegistry({
      track: true,
      worker: "rank-0",
      onLeak: (r) => reports.push(r),
    });
    const a = registry.newArray("f32", 256);
    const b = registry.newArray("u8", 100, { alignment: 64 });
    const info = registry.allocationInfo(a);
    assert.equal(info?.worker, "rank-0");
    assert.match(info?.stack ?? "", /ownership_registry_test\.ts/);
    assert.ok((info?.time ?? -1) >= 0);
    registry.dispose();
    assert.equal(reports.length, 1);
    assert.equal(reports[0].records.length, 2);
    assert.equal(reports[0].byteLength, 1024 + 100);
    assert.equal(reports[0].reservedByteLength, 1024 + 128);
    assert.match(reports[0].text, /2 allocations still registered, 1124 bytes/);
    assert.match(reports[0].text, /ownership_registry_test\.ts/);
    assert.equal(a.length, 0);
    assert.equal(b.length, 0);
    assert.equal(registry.requestedBytes, 0);
    assert.throws(() => registry.newArray("f32", 1), UseAfterFreeError);
    assert.equal(registry.dispose(), undefined);
    assert.equal(reports.length, 1);
  });

  it("OwnershipRegistry.report() prints counts, bytes and the largest allocations", () => {
    using registry = new OwnershipRegistry();
    const a = registry.newArray("f32", 1024);
    const b = registry.newArray("u8", 10);
    const text = registry.report(1);
    assert.match(text, /pointers 2, buffers 0 \(0 references\)/);
    assert.match(text, /current 4\.0 KiB \(4106\)/);
    assert.match(text, /#1 system ArrayBuffer\(4096\)\+0 4\.0 KiB/);
    assert.match(text, /and 1 more/);
    registry.unregister(a);
    registry.unregister(b);
  });

  it("OwnershipRegistry with checkAtExit reports leaks when the process exits", async () => {
    const code = `
      import { OwnershipRegistry } from "${
      new URL("./mod.ts", import.meta.url).href
    }";
      const registry = new OwnershipRegistry({ checkAtExit: true });
      registry.newArray("f64", 16);
      const clean = new OwnershipRegistry({ checkAtExit: true });
      clean.unregister(clean.newArray("u8", 4));
    `;
    const command = new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-check", code],
      stdout: "piped",
      stderr: "piped",
      cwd: new URL(".", import.meta.url).pathname,
    });
    const { code: status, stderr } = await command.output();
    const text = new TextDecoder().decode(stderr);
    assert.equal(status, 0, text);
    assert.equal(text.match(/Memory leak detected at exit/g)?.length, 1, text);
    assert.match(text, /1 allocation still registered, 128 bytes/);
  });
});
