/**
 * Adversarial table for the registry package's public entry points, written
 * from the public API outward (#17): every hostile value must be refused
 * with a typed error (an `AllotError`), and the refused call must change
 * nothing (stats, records and the allocator's live blocks are equal before
 * and after). Queries (`isRegistered`, `recordOf`, `allocationInfo`,
 * `tryUnregister`) may instead answer "not registered".
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { AllotError } from "@allot/core";
import { OwnershipRegistry, type Pointer } from "./ownership_registry.ts";
import { WorkspacePool } from "./workspace_pool.ts";
import { ReusingAllocator as Allocator } from "./_test_reusing_allocator.ts";

const boom = () => {
  throw new Error("boom");
};
/** An object whose every read and conversion throws. */
const throwing = new Proxy({}, {
  get: boom,
  has: boom,
  getPrototypeOf: boom,
  ownKeys: boom,
});
const getters = {
  get memory() {
    return boom();
  },
  get byteOffset() {
    return boom();
  },
  get byteLength() {
    return boom();
  },
  toString: boom,
  valueOf: boom,
};

/** Hostile numbers: where a count, length, offset or alignment goes. */
const NUMBERS: [string, unknown][] = [
  ["NaN", NaN],
  ["Infinity", Infinity],
  ["-Infinity", -Infinity],
  ["-1", -1],
  ["1.5", 1.5],
  ["2^53", 2 ** 53],
  ["BigInt 4n", 4n],
  ["null", null],
  ['string "4"', "4"],
  ["symbol", Symbol("s")],
  ["throwing getters", getters],
  ["proxy that throws", throwing],
  ["{}", {}],
];

function fixture() {
  const allocator = new Allocator();
  const registry = new OwnershipRegistry({ onLeak: () => {} });
  const other = new OwnershipRegistry({ onLeak: () => {} });
  const owned = registry.newArray("f32", 16);
  const heap = registry.newArray("f32", 4, { allocator });
  const stale = registry.newArray("f32", 4, { allocator });
  registry.unregister(stale);
  const reused = registry.newArray("f32", 4, { allocator }); // stale's place
  const foreign = other.newArray("f32", 4); // another instance's handle
  const released = allocator.allocate(8);
  released.release();
  const detached = new Float32Array(4);
  structuredClone(detached.buffer, { transfer: [detached.buffer] });
  const free = new Float32Array(8); // registered nowhere
  return {
    allocator,
    registry,
    other,
    owned,
    heap,
    stale,
    reused,
    foreign,
    released,
    detached,
    free,
  };
}
type Fixture = ReturnType<typeof fixture>;

/** Hostile pointers, and the not-registered ones of each kind. */
function hostilePointers(f: Fixture): [string, unknown, boolean][] {
  const buf = new ArrayBuffer(8);
  // [label, value, malformed] (malformed: not a pointer at all)
  return [
    ...NUMBERS.map(([l, v]) => [l, v, true] as [string, unknown, boolean]),
    ["undefined", undefined, true],
    ["{ memory: null }", { memory: null, byteOffset: 0 }, true],
    ["{ memory: 5 }", { memory: 5, byteOffset: 0 }, true],
    ...NUMBERS.map(([l, v]) =>
      [`{ byteOffset: ${l} }`, { memory: buf, byteOffset: v }, true] as [
        string,
        unknown,
        boolean,
      ]
    ),
    ["Place with throwing getters", getters, true],
    ["released DataPtr", f.released, true],
    ["detached view", f.detached, false],
    ["view of another registry", f.foreign, false],
    ["stale heap array (place reused)", f.stale, false],
    ["unregistered view", f.free, false],
    ["unregistered Place", { memory: buf, byteOffset: 0 }, false],
  ];
}

function snapshot(f: Fixture) {
  return JSON.stringify({
    stats: f.registry.stats(),
    records: f.registry.records().map((r) => ({ ...r, memory: undefined })),
    other: f.other.stats(),
    live: [...f.allocator.live],
    owned: f.owned.length,
    heap: f.heap.length,
  });
}

/** Runs `call`; it must throw an AllotError (or answer `ok`), changing nothing. */
function refused(
  f: Fixture,
  label: string,
  call: () => unknown,
  ok?: (result: unknown) => boolean,
): void {
  const before = snapshot(f);
  let result: unknown, error: unknown, threw = false;
  try {
    result = call();
  } catch (e) {
    threw = true;
    error = e;
  }
  if (threw) {
    assert.ok(
      error instanceof AllotError,
      `${label}: threw an untyped ${(error as Error)?.constructor?.name}: ${
        (error as Error)?.message
      }`,
    );
  } else {
    assert.ok(
      ok !== undefined && ok(result),
      `${label}: accepted (returned ${typeof result})`,
    );
  }
  assert.equal(snapshot(f), before, `${label}: the refused call changed state`);
}

describe("registry adversarial table (#17)", () => {
  it("pointer arguments: every entry point refuses hostile, foreign and stale pointers with a typed error and changes nothing", () => {
    const f = fixture();
    let calls = 0;
    const notRegistered = (r: unknown) => r === false || r === undefined;
    for (const [label, p] of hostilePointers(f)) {
      const ptr = p as Pointer;
      const at = (what: string) => `${what}(${label})`;
      refused(f, at("unregister"), () => f.registry.unregister(ptr));
      refused(f, at("transferOut"), () => f.registry.transferOut(ptr));
      refused(f, at("addAlias existing"), () => f.registry.addAlias(ptr, ptr));
      refused(
        f,
        at("addAlias alias"),
        () => f.registry.addAlias(f.owned, ptr),
      );
      refused(
        f,
        at("isRegistered"),
        () => f.registry.isRegistered(ptr),
        notRegistered,
      );
      refused(
        f,
        at("tryUnregister"),
        () => f.registry.tryUnregister(ptr),
        notRegistered,
      );
      refused(f, at("recordOf"), () => f.registry.recordOf(ptr), notRegistered);
      refused(
        f,
        at("allocationInfo"),
        () => f.registry.allocationInfo(ptr),
        notRegistered,
      );
      refused(
        f,
        at("registerBuffer aliases"),
        () =>
          f.registry.registerBuffer(new Float32Array(8), { aliases: [ptr] }),
      );
      calls += 9;
    }
    // register/adopt: malformed pointers (foreign views are fine to register).
    for (const [label, p, malformed] of hostilePointers(f)) {
      if (!malformed && label !== "detached view") continue;
      refused(f, `register(${label})`, () => f.registry.register(p as Pointer));
      refused(
        f,
        `adopt(${label})`,
        () => f.registry.adopt(p as ArrayBufferView),
      );
      calls += 2;
    }
    assert.ok(calls > 300, `${calls} hostile calls`);
    f.registry.dispose();
    f.other.dispose();
  });

  it("option and size arguments: hostile numbers, kinds, deleters, aliases and options objects are refused and change nothing", () => {
    const f = fixture();
    const r = f.registry;
    for (const [label, v] of NUMBERS) {
      const x = v as number;
      refused(
        f,
        `register byteLength ${label}`,
        () => r.register(f.free, { byteLength: x }),
      );
      refused(
        f,
        `register alignment ${label}`,
        () => r.register(f.free, { alignment: x }),
      );
      refused(
        f,
        `register kind ${label}`,
        () => r.register(f.free, { kind: x as never }),
      );
      refused(
        f,
        `register deleter ${label}`,
        () => r.register(f.free, { kind: "custom", deleter: x as never }),
      );
      // `{}` is valid options; the getters object has none of newArray's.
      const options = label !== "{}";
      if (options) {
        refused(
          f,
          `register options ${label}`,
          () => r.register(f.free, x as never),
        );
      }
      refused(
        f,
        `registerBuffer aliases ${label}`,
        () => r.registerBuffer(f.free, { aliases: x as never }),
      );
      refused(f, `newArray length ${label}`, () => r.newArray("f32", x));
      refused(f, `newArray dtype ${label}`, () => r.newArray(x as never, 4));
      refused(
        f,
        `newArray alignment ${label}`,
        () => r.newArray("f32", 4, { alignment: x }),
      );
      refused(
        f,
        `newArray allocator ${label}`,
        () => r.newArray("f32", 4, { allocator: x as never }),
      );
      if (options && label !== "throwing getters") {
        refused(
          f,
          `newArray options ${label}`,
          () => r.newArray("f32", 4, x as never),
        );
      }
      refused(
        f,
        `WorkspacePool length ${label}`,
        () => new WorkspacePool(r, "f32", x),
      );
      refused(
        f,
        `WorkspacePool ranks ${label}`,
        () => new WorkspacePool(r, "f32", 4, { ranks: x }),
      );
    }
    refused(
      f,
      "register kind bogus",
      () => r.register(f.free, { kind: "bogus" as never }),
    );
    refused(
      f,
      "register place without byteLength",
      () => r.register({ memory: new ArrayBuffer(8), byteOffset: 0 }),
    );
    refused(
      f,
      "register misaligned",
      () => r.register(f.owned.subarray(1), { alignment: 8 }),
    );
    refused(f, "register twice", () => r.register(f.owned));
    refused(
      f,
      "alias outside the buffer",
      () => r.registerBuffer(f.free, { aliases: [new Float32Array(4)] }),
    );
    refused(f, "alias of another record", () => r.addAlias(f.owned, f.heap));
    refused(f, "transferOut of a heap record", () => r.transferOut(f.heap));
    refused(
      f,
      "newArray shared + allocator",
      () => r.newArray("f32", 4, { shared: true, allocator: f.allocator }),
    );
    refused(f, "newArray too long", () => r.newArray("f64", 2 ** 53 / 4));
    f.registry.dispose();
    f.other.dispose();
  });

  it("WorkspacePool.get() refuses hostile ranks with a typed error", () => {
    const f = fixture();
    const pool = new WorkspacePool(f.registry, "f32", 4, { ranks: 2 });
    for (const [label, v] of [...NUMBERS, ["2", 2], ["-0.5", -0.5]]) {
      refused(f, `get(${label})`, () => pool.get(v as number));
    }
    assert.equal(pool.get(-0).length, 4, "-0 is rank 0");
    pool.release();
    f.registry.dispose();
    f.other.dispose();
  });

  it("a disposed registry refuses every change with a typed error", () => {
    const f = fixture();
    f.registry.dispose();
    refused(f, "register", () => f.registry.register(f.free));
    refused(f, "registerBuffer", () => f.registry.registerBuffer(f.free));
    refused(f, "unregister", () => f.registry.unregister(f.owned));
    refused(f, "addAlias", () => f.registry.addAlias(f.owned, f.owned));
    refused(f, "newArray", () => f.registry.newArray("f32", 4));
    refused(f, "adopt", () => f.registry.adopt(new Float32Array(4)));
    refused(f, "transferOut", () => f.registry.transferOut(f.owned));
    f.other.dispose();
  });

  it("deleters that throw or re-enter the registry leave it consistent", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    // a throwing deleter: the record is gone, the error reaches the caller
    const a = new Float32Array(4);
    registry.register(a, {
      deleter: () => {
        throw new Error("deleter failed");
      },
    });
    assert.throws(() => registry.unregister(a), /deleter failed/);
    assert.equal(registry.isRegistered(a), false);
    assert.equal(registry.pointerCount, 0);
    assert.equal(registry.requestedBytes, 0);
    // a re-entrant deleter registers one array and frees another
    const b = new Float32Array(4), c = new Float32Array(4);
    const d = new Float32Array(4);
    registry.register(c);
    registry.register(b, {
      deleter: () => {
        registry.register(d);
        registry.unregister(c);
      },
    });
    assert.equal(registry.unregister(b), true);
    assert.ok(registry.isRegistered(d));
    assert.equal(registry.isRegistered(c), false);
    assert.equal(registry.pointerCount, 1);
    assert.equal(registry.requestedBytes, 16);
    // a deleter that unregisters its own pointer again sees a double free
    const e = new Float32Array(4);
    let inner: unknown;
    registry.register(e, {
      deleter: () => {
        try {
          registry.unregister(e);
        } catch (error) {
          inner = error;
        }
      },
    });
    registry.unregister(e);
    assert.ok(inner instanceof AllotError);
    // dispose frees everything even when a deleter throws, then rethrows
    let freed = 0;
    registry.register(new Float32Array(2), {
      deleter: () => {
        throw new Error("dispose deleter failed");
      },
    });
    registry.register(new Float32Array(2), { deleter: () => freed++ });
    assert.throws(() => registry.dispose(), /dispose deleter failed/);
    assert.equal(freed, 1);
    assert.equal(registry.pointerCount, 0);
    assert.deepEqual(registry.records(), []);
  });
});
