/**
 * Outside-in hostile review of `@allot/registry` (review6): what
 * `adversarial_test.ts` and `registry_adversarial_test.ts` do not cover.
 * Constructor and option flags (non-booleans, junk callbacks and stores),
 * the `registry` argument of `ArrayOwner` / `RegistryGuard` /
 * `WorkspacePool`, `report(limit)`, `Registry.set/storage/buffer` options,
 * lying allocators and getters read twice, re-entrant callbacks, and a
 * fast-check model of register/unregister/lookup against a `Map`.
 * Every refusal is a typed `AllotError` and changes nothing.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { AllotError, DataPtr, Device } from "@allot/core";
import {
  ArrayOwner,
  MapRecordStore,
  OwnershipRegistry,
  type Pointer,
  type RecordStore,
  Registry,
  RegistryGuard,
  WorkspacePool,
} from "./mod.ts";
import {
  assertRefusesAll,
  type Hostile,
  hostileNumbers,
  hostileObjects,
  HostileTally,
  HostileTrapError,
  throwingGetter,
  trapObject,
} from "../core/_test_hostile.ts";
import { FirstFitAllocator } from "../core/_test_faults.ts";
import { ReusingAllocator } from "./_test_reusing_allocator.ts";

const tally = new HostileTally();

/** Values that are not a boolean (for flags). */
function hostileFlags(): Hostile[] {
  return [
    { name: "1", value: 1 },
    { name: "0", value: 0 },
    { name: "NaN", value: NaN },
    { name: '"yes"', value: "yes" },
    { name: '"false"', value: "false" },
    { name: "null", value: null },
    { name: "8n", value: 8n },
    { name: "Symbol()", value: Symbol("flag") },
    { name: "{}", value: {} },
    { name: "new Boolean(false)", value: new Boolean(false) },
    { name: "trap proxy", value: trapObject() },
    { name: "throwing valueOf", value: throwingGetter("x") },
  ];
}

/** Options objects whose every read throws, and non-objects. */
function hostileOptions(): Hostile[] {
  return [
    ...hostileObjects().filter((h) =>
      h.name !== "undefined" && h.name !== "{}" && h.name !== "[]"
    ),
    { name: "throwing getters", value: allGetters() },
  ];
}

/** An options object whose every field of every options type throws. */
function allGetters(): object {
  const o: Record<string, unknown> = {};
  for (
    const key of [
      "priority",
      "backend",
      "device",
      "resizable",
      "fill",
      "track",
      "strict",
      "worker",
      "onLeak",
      "store",
      "checkAtExit",
    ]
  ) {
    Object.defineProperty(o, key, {
      get(): never {
        throw new HostileTrapError(`getter ${key}`);
      },
    });
  }
  return o;
}

function ownershipState(r: OwnershipRegistry) {
  return JSON.stringify({
    stats: r.stats(),
    records: r.records().map((x) => ({ ...x, memory: undefined })),
  });
}

describe("registry hostile review (review6)", () => {
  after(() => {
    console.log(
      `registry hostile: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("OwnershipRegistry options: non-boolean flags, junk callbacks, stores and options objects are refused", () => {
    for (const flag of ["track", "strict", "checkAtExit"]) {
      tally.add(
        `new OwnershipRegistry({ ${flag} })`,
        assertRefusesAll(
          `new OwnershipRegistry({ ${flag} })`,
          hostileFlags(),
          (v) => new OwnershipRegistry({ [flag]: v }),
        ),
      );
    }
    const junk = [
      ...hostileNumbers().filter((h) =>
        h.name !== "undefined" && h.name !== "() => 8"
      ),
    ];
    tally.add(
      "new OwnershipRegistry({ onLeak })",
      assertRefusesAll(
        "new OwnershipRegistry({ onLeak })",
        junk,
        (v) => new OwnershipRegistry({ onLeak: v as never }),
      ),
    );
    tally.add(
      "new OwnershipRegistry({ worker })",
      assertRefusesAll(
        "new OwnershipRegistry({ worker })",
        junk.filter((h) => typeof h.value !== "string"),
        (v) => new OwnershipRegistry({ worker: v as never }),
      ),
    );
    tally.add(
      "new OwnershipRegistry({ store })",
      assertRefusesAll(
        "new OwnershipRegistry({ store })",
        [...junk, { name: "{ get }", value: { get: () => -1 } }],
        (v) => new OwnershipRegistry({ store: v as never }),
      ),
    );
    tally.add(
      "new OwnershipRegistry(options)",
      assertRefusesAll(
        "new OwnershipRegistry(options)",
        hostileOptions(),
        (v) => new OwnershipRegistry(v as never),
      ),
    );
    // A valid registry still works, and flags read back as given.
    using ok = new OwnershipRegistry({ track: true, strict: false });
    assert.equal(ok.tracking, true);
    assert.equal(ok.strict, false);
  });

  it("newArray shared, register detach and report(limit) refuse non-booleans and bad limits, changing nothing", () => {
    using r = new OwnershipRegistry({ onLeak: () => {} });
    const kept = r.newArray("f32", 4);
    const snapshot = () => ownershipState(r);
    tally.add(
      "newArray({ shared })",
      assertRefusesAll(
        "newArray({ shared })",
        hostileFlags(),
        (v) => r.newArray("f32", 4, { shared: v as boolean }),
        { snapshot },
      ),
    );
    tally.add(
      "register({ detach })",
      assertRefusesAll(
        "register({ detach })",
        hostileFlags(),
        (v) => r.register(new Float32Array(4), { detach: v as boolean }),
        { snapshot },
      ),
    );
    tally.add(
      "report(limit)",
      assertRefusesAll(
        "report(limit)",
        hostileNumbers().filter((h) =>
          h.name !== "undefined" && h.name !== "Infinity"
        ),
        (v) => r.report(v as number),
        { snapshot },
      ),
    );
    assert.match(r.report(0), /pointers 1/);
    assert.match(r.report(Infinity), /#1 system/);
    assert.match(r.report(-0), /pointers 1/);
    r.unregister(kept);
  });

  it("ArrayOwner, RegistryGuard and WorkspacePool refuse a registry argument that is not an OwnershipRegistry", () => {
    using r = new OwnershipRegistry({ onLeak: () => {} });
    const a = r.newArray("f32", 4);
    const registries = [
      ...hostileObjects(),
      { name: "Registry", value: new Registry() },
      {
        name: "look-alike",
        value: {
          isRegistered: () => true,
          newArray: () => new Float32Array(4),
        },
      },
    ];
    const snapshot = () => ownershipState(r);
    for (
      const [name, call] of [
        [
          "new ArrayOwner(registry)",
          (v: unknown) => new ArrayOwner(v as never, a),
        ],
        [
          "new RegistryGuard(registry)",
          (v: unknown) => new RegistryGuard(v as never, "f32", 4),
        ],
        [
          "new WorkspacePool(registry)",
          (v: unknown) => new WorkspacePool(v as never, "f32", 4),
        ],
      ] as const
    ) {
      tally.add(name, assertRefusesAll(name, registries, call, { snapshot }));
    }
    tally.add(
      "new ArrayOwner(array)",
      assertRefusesAll(
        "new ArrayOwner(array)",
        [...hostileObjects(), {
          name: "Place",
          value: { memory: a.buffer, byteOffset: 0 },
        }],
        (v) => new ArrayOwner(r, v as never),
        { snapshot },
      ),
    );
    r.unregister(a);
  });

  it("WorkspacePool reads its options once: a getter that lies after the first read cannot give ranks different arrays", () => {
    using r = new OwnershipRegistry({ onLeak: () => {} });
    let reads = 0;
    const options = {
      ranks: 3,
      get shared() {
        reads++;
        return reads === 1 ? false : ("yes" as unknown as boolean);
      },
    };
    using pool = new WorkspacePool(r, "f32", 4, options);
    assert.equal(reads, 1);
    for (let k = 0; k < 3; k++) {
      assert.ok(pool.get(k).buffer instanceof ArrayBuffer);
    }
  });

  it("Registry.set/storage/buffer refuse junk options, priorities, allocators, backends and fills, changing nothing", () => {
    const registry = new Registry();
    const allocator = new FirstFitAllocator(Device.cpu(), 1 << 16);
    registry.set("cpu", allocator, { priority: 5 });
    const snapshot = () => [
      JSON.stringify(registry.entries().map((e) => [e.target, e.priority])),
      allocator.live.size,
    ];
    const other = new FirstFitAllocator(Device.cpu(), 1 << 12);
    for (
      const [name, call] of [
        [
          "Registry.set(options)",
          (v: unknown) => registry.set("cpu", other, v as never),
        ],
        [
          "Registry.storage(options)",
          (v: unknown) => registry.storage(8, v as never),
        ],
        [
          "Registry.buffer(options)",
          (v: unknown) => registry.buffer("f32", [2], v as never),
        ],
      ] as const
    ) {
      tally.add(
        name,
        assertRefusesAll(name, hostileOptions(), call, { snapshot }),
      );
    }
    tally.add(
      "Registry.set({ priority })",
      assertRefusesAll(
        "Registry.set({ priority })",
        [
          ...hostileNumbers().filter((h) => h.name !== "undefined"),
          { name: "256", value: 256 },
        ],
        (v) => registry.set("cpu", other, { priority: v as number }),
        { snapshot },
      ),
    );
    tally.add(
      "Registry.set(allocator)",
      assertRefusesAll(
        "Registry.set(allocator)",
        [...hostileObjects(), {
          name: "throwing getters",
          value: throwingGetter("allocate"),
        }],
        (v) => registry.set("cpu", v as never, { priority: 255 }),
        { snapshot },
      ),
    );
    tally.add(
      "Registry.set({ backend })",
      assertRefusesAll(
        "Registry.set({ backend })",
        hostileObjects().filter((h) => h.name !== "undefined"),
        (v) =>
          registry.set("cpu", other, { priority: 255, backend: v as never }),
        { snapshot },
      ),
    );
    tally.add(
      "Registry.buffer({ backend })",
      assertRefusesAll(
        "Registry.buffer({ backend })",
        hostileObjects().filter((h) => h.name !== "undefined"),
        (v) => registry.buffer("f32", [2], { backend: v as never }),
        { snapshot },
      ),
    );
    tally.add(
      "Registry.buffer({ fill })",
      assertRefusesAll(
        "Registry.buffer({ fill })",
        hostileNumbers().filter((h) =>
          typeof h.value !== "number" && h.value !== undefined
        ),
        (v) => registry.buffer("f32", [2], { fill: v as number }),
        { snapshot },
      ),
    );
    // A throwing options getter is typed, not the getter's own error.
    assert.throws(
      () => registry.set("cpu", other, allGetters() as never),
      AllotError,
    );
    assert.equal(registry.get("cpu"), allocator);
  });

  it("newArray with a lying allocator (junk, short pointers, throwing) refuses with a typed error and leaks nothing", () => {
    using r = new OwnershipRegistry({ onLeak: () => {} });
    const snapshot = () => ownershipState(r);
    const before = snapshot();
    const memory = new ArrayBuffer(64);
    let released = 0;
    const short = {
      device: Device.cpu(),
      allocate: () =>
        new DataPtr(memory, 0, 4, Device.cpu(), {
          context: 1,
          deleter: () => released++,
        }),
    };
    assert.throws(
      () => r.newArray("f32", 8, { allocator: short as never }),
      AllotError,
    );
    assert.equal(released, 1, "the short pointer went back");
    for (const junk of hostileObjects()) {
      if (junk.name === "trap proxy") continue;
      const lying = { device: Device.cpu(), allocate: () => junk.value };
      assert.throws(
        () => r.newArray("f32", 2, { allocator: lying as never }),
        (e: unknown) => e instanceof AllotError,
        `allocate() returning ${junk.name}`,
      );
    }
    const throwing = {
      device: Device.cpu(),
      allocate: () => {
        throw new HostileTrapError("allocate");
      },
    };
    assert.throws(
      () => r.newArray("f32", 2, { allocator: throwing as never }),
      HostileTrapError,
    );
    assert.equal(snapshot(), before);
  });

  it("a lying RecordStore (junk slots, another place's slot) is refused with a typed error before any change", () => {
    for (const junk of [999, 1.5, NaN, -5, "x", 2 ** 40, 3, 0]) {
      const inner = new MapRecordStore();
      const store: RecordStore = {
        get: (m, o) => inner.get(m, o) >= 0 ? junk as number : -1,
        set: (m, o, v) => inner.set(m, o, v),
        delete: (m, o) => inner.delete(m, o),
        clear: () => inner.clear(),
        get size() {
          return inner.size;
        },
      };
      const r = new OwnershipRegistry({ store, onLeak: () => {} });
      // slot 0 belongs to another place in the same memory
      const memory = new Float32Array(8);
      r.register(memory.subarray(4));
      const a = memory.subarray(0, 4);
      r.register(a);
      const before = ownershipState(r);
      for (
        const [name, call] of [
          ["unregister", () => r.unregister(a)],
          ["isRegistered", () => r.isRegistered(a)],
          ["addAlias", () => r.addAlias(a, a)],
          ["register", () => r.register(a)],
          ["transferOut", () => r.transferOut(a)],
        ] as const
      ) {
        assert.throws(
          call,
          AllotError,
          `${name} with a store answering ${String(junk)}`,
        );
        assert.equal(ownershipState(r), before, `${name}: state changed`);
      }
    }
    // a store that lies only after the registry's own set(): registerBuffer
    // (past validation) neither throws nor miscounts
    {
      const inner = new MapRecordStore();
      const store: RecordStore = {
        get: (m, o) => inner.get(m, o) >= 0 ? 999 : -1,
        set: (m, o, v) => inner.set(m, o, v),
        delete: (m, o) => inner.delete(m, o),
        clear: () => inner.clear(),
        get size() {
          return inner.size;
        },
      };
      using r = new OwnershipRegistry({ store, onLeak: () => {} });
      const b = new Float32Array(8);
      r.registerBuffer(b, { aliases: [b.subarray(2), b.subarray(2)] });
      const st = r.stats();
      assert.equal(st.buffers, 1);
      assert.equal(st.references, 3);
      assert.equal(r.records()[0].references, 3);
    }
    // an honest custom store works as the default one does
    const inner = new MapRecordStore();
    const honest: RecordStore = {
      get: (m, o) => inner.get(m, o),
      set: (m, o, v) => inner.set(m, o, v),
      delete: (m, o) => inner.delete(m, o),
      clear: () => inner.clear(),
      get size() {
        return inner.size;
      },
    };
    using r = new OwnershipRegistry({ store: honest, onLeak: () => {} });
    const b = new Float32Array(8);
    r.registerBuffer(b, { aliases: [b.subarray(2), b.subarray(2)] });
    r.unregister(b.subarray(2));
    assert.equal(r.isRegistered(b.subarray(2)), true);
    r.unregister(b.subarray(2));
    assert.equal(r.unregister(b), true);
    assert.equal(r.pointerCount + r.bufferCount, 0);
  });

  it("a RecordStore whose set() or delete() throws changes nothing, at every call it can fail", () => {
    class Trap extends Error {}
    // The k-th set() or delete() throws, once; every call of the scenario
    // that throws is retried with the store honest again.
    for (let k = 1; k <= 24; k++) {
      const inner = new MapRecordStore();
      let writes = 0;
      let armed = true;
      const fail = () => {
        if (armed && ++writes === k) {
          armed = false;
          throw new Trap(`write ${k}`);
        }
      };
      const store: RecordStore = {
        get: (m, o) => inner.get(m, o),
        set: (m, o, v) => (fail(), inner.set(m, o, v)),
        delete: (m, o) => (fail(), inner.delete(m, o)),
        clear: () => inner.clear(),
        get size() {
          return inner.size;
        },
      };
      const r = new OwnershipRegistry({ store, onLeak: () => {} });
      const memory = new Float32Array(64);
      const a = memory.subarray(0, 16), b = memory.subarray(16, 32);
      const steps: [string, () => unknown][] = [
        ["register(a)", () => r.register(a)],
        [
          "registerBuffer(b, aliases)",
          () =>
            r.registerBuffer(b, {
              aliases: [b.subarray(2), b.subarray(4), b.subarray(2)],
            }),
        ],
        ["addAlias(b, b+6)", () => r.addAlias(b, b.subarray(6))],
        ["addAlias(b, b)", () => r.addAlias(b, b)],
        ["unregister(b+2)", () => r.unregister(b.subarray(2))],
        ["unregister(b+6)", () => r.unregister(b.subarray(6))],
        ["unregister(b)", () => r.unregister(b)],
        ["unregister(b+2) again", () => r.unregister(b.subarray(2))],
        ["unregister(b+4)", () => r.unregister(b.subarray(4))],
        ["unregister(b) last", () => r.unregister(b)],
        ["unregister(a)", () => r.unregister(a)],
      ];
      let failed = 0;
      for (const [name, step] of steps) {
        const before = ownershipState(r);
        try {
          step();
          continue;
        } catch (error) {
          assert.ok(error instanceof Trap, `${name} at k=${k}: ${error}`);
          failed++;
        }
        assert.equal(ownershipState(r), before, `${name} at k=${k}`);
        step();
      }
      assert.equal(r.pointerCount + r.bufferCount, 0, `k=${k}: all freed`);
      assert.equal(r.stats().references, 0, `k=${k}: no references left`);
      assert.equal(inner.size, 0, `k=${k}: the store holds no place`);
      assert.equal(r.isRegistered(b), false);
      assert.ok(failed <= 1);
      r.dispose();
    }
  });

  it("callbacks that throw or re-enter: onLeak registering during dispose, a deleter registering into its own place", () => {
    // onLeak re-enters: the registry is already disposing, the call is refused
    let inner: unknown;
    const r: OwnershipRegistry = new OwnershipRegistry({
      onLeak: () => {
        try {
          r.newArray("f32", 4);
        } catch (e) {
          inner = e;
        }
      },
    });
    r.newArray("f32", 4);
    r.dispose();
    assert.ok(inner instanceof AllotError, "re-entrant newArray is typed");
    assert.equal(r.pointerCount, 0);
    assert.equal(r.disposed, true);
    // a throwing onLeak: leaks are still freed, the error reaches the caller
    const t = new OwnershipRegistry({
      onLeak: () => {
        throw new HostileTrapError("onLeak");
      },
    });
    const leaked = t.newArray("f32", 4);
    assert.throws(() => t.dispose(), HostileTrapError);
    assert.equal(t.pointerCount, 0);
    assert.equal(leaked.length, 0, "freed although onLeak threw");
    // a deleter that registers a new record at the place being freed
    using u = new OwnershipRegistry({ onLeak: () => {} });
    const a = new Float32Array(4);
    let again = 0;
    u.register(a, {
      deleter: () => {
        again = u.register(a, { kind: "custom", deleter: () => {} });
      },
    });
    u.unregister(a);
    assert.ok(again > 0);
    assert.equal(u.isRegistered(a), true);
    assert.equal(u.pointerCount, 1);
    u.unregister(a);
    assert.equal(u.pointerCount, 0);
    assert.throws(() => u.unregister(a), AllotError);
  });

  it("fast-check model: register/addAlias/unregister/lookup sequences equal a Map model; stats equal a recount; nothing left", () => {
    const commands = fc.array(
      fc.record({
        op: fc.constantFrom(
          "register",
          "alias",
          "unregister",
          "lookup",
          "foreign",
        ),
        slot: fc.nat(2),
        offset: fc.oneof(fc.constant(0), fc.nat(3)),
        heap: fc.nat(3).map((x) => x === 0),
      }),
      { minLength: 10, maxLength: 80 },
    );
    fc.assert(
      fc.property(commands, (cmds) => {
        const allocator = new ReusingAllocator();
        const r = new OwnershipRegistry({ onLeak: () => {} });
        const other = new OwnershipRegistry({ onLeak: () => {} });
        const buffers = Array.from(
          { length: 3 },
          () => new Float32Array(16),
        );
        // model: buffer -> (byte offset -> [root, references at the place])
        type Root = { refs: number; bytes: number; array: Float32Array };
        const places = new Map<Float32Array, Map<number, [Root, number]>>();
        const roots = new Set<Root>();
        const heapArrays: Float32Array[] = [];
        const at = (b: Float32Array, o: number) => places.get(b)?.get(o);
        const dropRoot = (root: Root) => {
          roots.delete(root);
          for (const m of places.values()) {
            for (const [o, e] of m) if (e[0] === root) m.delete(o);
          }
        };
        for (const c of cmds) {
          const b = buffers[c.slot];
          const off = c.offset * 16;
          const p = b.subarray(c.offset * 4);
          if (c.op === "register") {
            if (c.heap) {
              const h = r.newArray("f32", 4, { allocator }) as Float32Array;
              const root = { refs: 1, bytes: 16, array: h };
              roots.add(root);
              heapArrays.push(h);
              places.set(h, new Map([[h.byteOffset, [root, 1]]]));
              continue;
            }
            if (at(b, off) !== undefined) {
              const before = ownershipState(r);
              assert.throws(() => r.register(p), AllotError);
              assert.equal(ownershipState(r), before);
              continue;
            }
            r.register(p);
            const root = { refs: 1, bytes: p.byteLength, array: p };
            roots.add(root);
            const m = places.get(b) ?? new Map();
            m.set(off, [root, 1]);
            places.set(b, m);
          } else if (c.op === "alias") {
            // alias p into the record at offset 0 (it spans the buffer)
            const whole = at(b, 0)?.[0];
            const here = at(b, off);
            if (whole === undefined || (here && here[0] !== whole)) {
              const before = ownershipState(r);
              assert.throws(() => r.addAlias(b, p), AllotError);
              assert.equal(ownershipState(r), before);
              continue;
            }
            r.addAlias(b, p);
            whole.refs++;
            places.get(b)!.set(off, [whole, (here?.[1] ?? 0) + 1]);
          } else if (c.op === "unregister") {
            const e = at(b, off);
            if (e === undefined) {
              const before = ownershipState(r);
              assert.throws(() => r.unregister(p), AllotError);
              assert.equal(ownershipState(r), before);
              continue;
            }
            r.unregister(p);
            const [root, count] = e;
            if (count === 1) places.get(b)!.delete(off);
            else places.get(b)!.set(off, [root, count - 1]);
            if (--root.refs === 0) dropRoot(root);
          } else if (c.op === "foreign") {
            // another registry's handle never reaches this one
            const f = other.newArray("f32", 4);
            assert.equal(r.isRegistered(f), false);
            assert.throws(() => r.unregister(f), AllotError);
            other.unregister(f);
            assert.throws(() => other.unregister(f), AllotError);
          } else {
            assert.equal(r.isRegistered(p), at(b, off) !== undefined);
          }
          // stats equal a recount of the records
          const recs = r.records(), st = r.stats();
          const bufs = recs.filter((x) => x.buffer);
          assert.equal(st.pointers, recs.length - bufs.length, "pointers");
          assert.equal(st.buffers, bufs.length, "buffers");
          assert.equal(
            st.references,
            bufs.reduce((n, x) => n + x.references, 0),
            "references",
          );
          assert.equal(
            st.requestedBytes.current,
            recs.reduce((n, x) => n + x.byteLength, 0),
            "requested bytes",
          );
          assert.equal(r.pointerCount, st.pointers);
          assert.equal(r.bufferCount, st.buffers);
          // every place answers isRegistered as the model does
          for (const [k, buffer] of buffers.entries()) {
            for (let o = 0; o < 4; o++) {
              assert.equal(
                r.isRegistered(buffer.subarray(o * 4)),
                at(buffer, o * 16) !== undefined,
                `isRegistered(buffer ${k}, byteOffset ${o * 16})`,
              );
            }
          }
          // heap arrays: unregister one now and then (stale afterwards)
          if (c.heap && heapArrays.length > 0 && c.offset === 0) {
            const h = heapArrays.shift()!;
            dropRoot(places.get(h)!.get(h.byteOffset)![0]);
            places.delete(h);
            r.unregister(h);
            // the allocator gives h's place to a new owner: h is stale
            const n = r.newArray("f32", 4, { allocator }) as Float32Array;
            const root = { refs: 1, bytes: 16, array: n };
            roots.add(root);
            heapArrays.push(n);
            places.set(n, new Map([[n.byteOffset, [root, 1]]]));
            assert.equal(r.isRegistered(h), false);
            const before = ownershipState(r);
            assert.throws(() => r.unregister(h as Pointer), AllotError);
            assert.equal(ownershipState(r), before);
            assert.equal(r.isRegistered(n), true);
          }
        }
        // entries equal the model; stats equal a recount
        let pointerPlaces = 0, bytes = 0, refs = 0;
        for (const root of roots) {
          bytes += root.bytes;
          refs += root.refs;
        }
        for (const m of places.values()) pointerPlaces += m.size;
        assert.equal(r.records().length, roots.size);
        assert.equal(r.requestedBytes, bytes);
        assert.equal(r.stats().requestedBytes.current, bytes);
        const counted = r.records().reduce(
          (s, x) => s + x.references,
          0,
        );
        assert.equal(counted, refs);
        assert.ok(pointerPlaces >= roots.size);
        // nothing left at the end
        const report = r.dispose();
        assert.equal(report?.records.length ?? 0, roots.size);
        assert.equal(r.pointerCount, 0);
        assert.equal(allocator.live.size, 0);
        other.dispose();
      }),
      { numRuns: 150 },
    );
  });
});
