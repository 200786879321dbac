/**
 * Adversarial tests of `@allot/buddy` from the public API outward
 * (`BuddyAllocator`, `PlaceAllocator`): hostile option values and arguments
 * (a typed error that states the value, nothing changed, later allocations
 * identical to a twin that never saw the call), foreign, stale and made-up
 * addresses and pointers, views that would reach past their block, backing
 * allocators and segment sources that throw, lie about lengths, hand out a
 * block twice or re-enter, and byte patterns of live blocks over long random
 * runs (fast-check model: no overlap, alignment, power-of-two lengths, stats
 * equal a recount, everything given back at the end).
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  ContractViolationError,
  DataPtr,
  Device,
  DoubleFreeError,
  InvalidArgumentError,
  MockSegmentSource,
  OutOfMemoryError,
  UnsupportedOperationError,
} from "@allot/core";
import { HostSegmentSource, SystemAllocator } from "@allot/cpu";
import {
  BuddyAllocator,
  type BuddyAllocatorOptions,
} from "./buddy_allocator.ts";
import {
  PlaceAllocator,
  type PlaceAllocatorOptions,
} from "./place_allocator.ts";
import {
  type ErrorClass,
  type Hostile,
  hostileNumbers,
  hostileObjects,
  HostileTally,
  HostileTrapError,
  trapObject,
} from "../core/_test_hostile.ts";
import {
  ALLOCATOR_FAULTS,
  type AllocatorFault,
  assertDisjoint,
  checkPattern,
  FaultyAllocator,
  FaultySegmentSource,
  FirstFitAllocator,
  InjectedFault,
  modelRuns,
  SEGMENT_FAULTS,
  type SegmentFault,
  writePattern,
} from "../core/_test_faults.ts";

const tally = new HostileTally();
const { refuse } = tally;
const numbers = hostileNumbers();
// `undefined` (and `null`, through `??`) mean the default for options.
const optionNumbers = numbers.filter((h) =>
  h.name !== "undefined" && h.name !== "null"
);
const OPTIONS: BuddyAllocatorOptions = {
  initialPoolByteLength: 4096,
  maxPoolByteLength: 4 * 4096,
  minBlockByteLength: 64,
};
const PLACE_OPTIONS: PlaceAllocatorOptions = {
  initialPoolByteLength: 4096,
  maxPoolByteLength: 4 * 4096,
  minBlockByteLength: 64,
};
const isAddressError = (e: unknown) =>
  e instanceof InvalidArgumentError || e instanceof DoubleFreeError;

function state(buddy: BuddyAllocator): string {
  return JSON.stringify([
    buddy.stats(),
    buddy.poolCount,
    buddy.allocatedBytes,
    buddy.reservedBytes,
    buddy.largestFreeBytes,
  ]);
}

/** An allocator with live blocks of several orders, a hole and a large block. */
function populated(options: BuddyAllocatorOptions = OPTIONS) {
  const buddy = new BuddyAllocator(options);
  const small = buddy.alloc(10); // 64 B
  const hole = buddy.alloc(100); // 128 B, freed below
  const mid = buddy.alloc(1000); // 1 KiB
  const large = buddy.alloc(5000); // past a pool: straight to the backing
  const full = buddy.alloc(4096); // a whole second pool
  buddy.free(hole);
  return { buddy, small, hole, mid, large, full };
}

/** The same calls on `a` and `b` give the same addresses and stats. */
function assertTwins(a: BuddyAllocator, b: BuddyAllocator): void {
  assert.equal(state(a), state(b));
  const sizes = [1, 64, 65, 200, 1024, 3000, 4096, 5000, 64, 64];
  const got = (x: BuddyAllocator) => {
    const out: (number | string)[] = [];
    const live: number[] = [];
    for (const n of sizes) {
      try {
        const at = x.alloc(n);
        live.push(at);
        out.push(at);
      } catch (e) {
        out.push((e as Error).name);
      }
      if (live.length > 3) x.free(live.splice(1, 1)[0]);
    }
    out.push(state(x), x.trim(), state(x));
    return out;
  };
  assert.deepEqual(got(a), got(b), "refused calls changed later allocations");
  a.checkIntegrity();
  b.checkIntegrity();
}

describe("BuddyAllocator adversarial: options", () => {
  after(() => {
    console.log(
      `buddy adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("new BuddyAllocator() refuses hostile sizes with an InvalidArgumentError naming the option, the value and the limit", () => {
    for (const key of Object.keys(OPTIONS)) {
      refuse(
        `new BuddyAllocator({ ${key} })`,
        optionNumbers,
        (v) => new BuddyAllocator({ ...OPTIONS, [key]: v }),
        { error: InvalidArgumentError },
      );
    }
    const cases: [BuddyAllocatorOptions, string, RegExp][] = [
      [{ minBlockByteLength: 96 }, "minBlockByteLength", /96/],
      [{ minBlockByteLength: 3 }, "minBlockByteLength", /3/],
      [{ minBlockByteLength: 0 }, "minBlockByteLength", /0/],
      [{ minBlockByteLength: 2 ** 21 }, "minBlockByteLength", /2097152/],
      [
        { initialPoolByteLength: 2 ** 31 },
        "initialPoolByteLength",
        /2147483648/,
      ],
      [
        { initialPoolByteLength: 8192, maxPoolByteLength: 4096 },
        "maxPoolByteLength",
        /8192.*4096/,
      ],
      [
        {
          minBlockByteLength: 1,
          initialPoolByteLength: 1 << 20,
          maxPoolByteLength: 2 ** 40,
        },
        "maxPoolByteLength",
        /2\^31 - 1 blocks of 1 bytes/,
      ],
    ];
    for (const [options, name, pattern] of cases) {
      assert.throws(
        () => new BuddyAllocator(options),
        (e: unknown) =>
          e instanceof InvalidArgumentError && e.argument === name &&
          e.limit !== undefined && pattern.test(e.message) &&
          e.message.includes(name),
        JSON.stringify(options),
      );
    }
  });

  it("new BuddyAllocator() refuses hostile options objects, strict flags and backings", () => {
    refuse(
      "new BuddyAllocator(options)",
      hostileObjects().filter((h) =>
        !["undefined", "{}", "[]"].includes(h.name)
      ),
      (v) => new BuddyAllocator(v as BuddyAllocatorOptions),
    );
    const flags: Hostile[] = [
      { name: "1", value: 1 },
      { name: "0", value: 0 },
      { name: '"true"', value: "true" },
      { name: "null", value: null },
      { name: "{}", value: {} },
      { name: "new Boolean(true)", value: new Boolean(true) },
      { name: "trap proxy", value: trapObject() },
    ];
    refuse(
      "new BuddyAllocator({ strict })",
      flags,
      (v) => new BuddyAllocator({ strict: v as boolean }),
      { error: InvalidArgumentError },
    );
    assert.throws(
      () => new BuddyAllocator({ strict: 1 as unknown as boolean }),
      (e: unknown) =>
        e instanceof InvalidArgumentError && /strict/.test(e.message) &&
        /boolean/.test(e.message) && / 1$/.test(e.message),
    );
    const backings: Hostile[] = [
      ...hostileObjects().filter((h) => h.name !== "undefined"),
      { name: "allocate: 1", value: { allocate: 1, device: Device.cpu() } },
      { name: "no device", value: { allocate: () => undefined } },
      {
        name: "device look-alike",
        value: { allocate: () => undefined, device: { type: "cpu" } },
      },
    ];
    refuse(
      "new BuddyAllocator({ backing })",
      backings,
      (v) => new BuddyAllocator({ backing: v as SystemAllocator }),
    );
  });

  it("new PlaceAllocator() refuses what new BuddyAllocator() refuses, and a backing that is not a function", () => {
    for (const key of Object.keys(PLACE_OPTIONS)) {
      refuse(
        `new PlaceAllocator({ ${key} })`,
        optionNumbers,
        (v) => new PlaceAllocator({ ...PLACE_OPTIONS, [key]: v }),
        { error: InvalidArgumentError },
      );
    }
    refuse(
      "new PlaceAllocator(options)",
      hostileObjects().filter((h) =>
        !["undefined", "{}", "[]"].includes(h.name)
      ),
      (v) => new PlaceAllocator(v as PlaceAllocatorOptions),
    );
    refuse(
      "new PlaceAllocator({ strict })",
      [{ name: "1", value: 1 }, { name: '"yes"', value: "yes" }],
      (v) => new PlaceAllocator({ strict: v as boolean }),
      { error: InvalidArgumentError },
    );
    refuse(
      "new PlaceAllocator({ backing })",
      hostileObjects().filter((h) =>
        !["undefined", "() => {}", "null"].includes(h.name)
      ).concat([{ name: "an Allocator", value: new SystemAllocator() }]),
      (v) =>
        new PlaceAllocator({
          backing: v as () => undefined,
        }),
      { error: InvalidArgumentError },
    );
  });
});

describe("BuddyAllocator adversarial: hostile arguments", () => {
  it("every BuddyAllocator entry point refuses hostile values with a typed error, and later allocations match a twin that never saw them", () => {
    const { buddy, small, large } = populated();
    const twin = populated().buddy;
    const snapshot = () => state(buddy);
    const sizes = numbers;
    refuse("alloc(n)", sizes, (v) => buddy.alloc(v as number), {
      snapshot,
      error: InvalidArgumentError,
    });
    refuse("allocate(n)", sizes, (v) => buddy.allocate(v as number), {
      snapshot,
      error: InvalidArgumentError,
    });
    refuse("rawAllocate(n)", sizes, (v) => buddy.rawAllocate(v as number), {
      snapshot,
      error: InvalidArgumentError,
    });
    const addresses = [
      ...numbers,
      { name: "inside a block", value: small + 64 * 3 },
      { name: "unaligned", value: small + 1 },
      { name: "past the pools", value: 1 << 20 },
      { name: "made-up large", value: -64 * 1000 },
      { name: "large + 64", value: large - 64 },
    ];
    const readers: [string, (v: unknown) => unknown][] = [
      ["free(address)", (v) => buddy.free(v as number)],
      ["rawDeallocate(address)", (v) => buddy.rawDeallocate(v as number)],
      ["memoryOf(address)", (v) => buddy.memoryOf(v as number)],
      ["byteOffsetOf(address)", (v) => buddy.byteOffsetOf(v as number)],
      ["byteLengthOf(address)", (v) => buddy.byteLengthOf(v as number)],
      ["bytes(address, n)", (v) => buddy.bytes(v as number, 8)],
      ["view(address, type)", (v) => buddy.view(v as number, Uint8Array)],
    ];
    for (const [label, call] of readers) {
      refuse(label, addresses, call, { snapshot });
      for (const h of addresses) {
        try {
          call(h.value);
        } catch (e) {
          assert.ok(isAddressError(e), `${label} with ${h.name}: ${e}`);
        }
      }
    }
    for (const at of [small, large]) {
      refuse(
        `bytes(live, n)`,
        [
          ...numbers,
          { name: "block + 1", value: buddy.byteLengthOf(at) + 1 },
          { name: "2^32", value: 2 ** 32 },
        ],
        (v) => buddy.bytes(at, v as number),
        { snapshot, error: InvalidArgumentError },
      );
    }
    assertTwins(buddy, twin);
  });

  it("BuddyAllocator errors name the value and the limit", () => {
    const { buddy, small } = populated();
    assert.throws(
      () => buddy.alloc(-5),
      (e: unknown) =>
        e instanceof InvalidArgumentError && e.value === -5 &&
        /-5/.test(e.message) && /non-negative integer/.test(e.message),
    );
    assert.throws(
      () => buddy.bytes(small, 65),
      (e: unknown) =>
        e instanceof InvalidArgumentError && e.limit === 64 &&
        /at most 64, received 65/.test(e.message),
    );
    assert.throws(
      () => buddy.free(small + 64),
      (e: unknown) =>
        e instanceof DoubleFreeError && e.message.includes(String(small + 64)),
    );
    assert.throws(
      () => buddy.free(Symbol("x") as unknown as number),
      (e: unknown) =>
        e instanceof InvalidArgumentError && /a symbol/.test(e.message),
    );
    buddy.alloc(4096);
    buddy.alloc(4096);
    assert.throws(
      () => buddy.alloc(4096),
      (e: unknown) =>
        e instanceof OutOfMemoryError && e.requestedBytes === 4096 &&
        e.capacityBytes === 4 * 4096 && /4 pools of 4096 bytes/.test(e.message),
    );
  });

  it("BuddyAllocator.view() refuses types that are not typed arrays, or lie about their element size, and never spans past the block", () => {
    const { buddy, small, mid } = populated();
    const snapshot = () => state(buddy);
    class Liar extends Uint8Array {
      static override readonly BYTES_PER_ELEMENT = 0.5;
    }
    class Zero extends Uint8Array {
      static override readonly BYTES_PER_ELEMENT = 0;
    }
    class Wide extends Uint8Array {
      static override readonly BYTES_PER_ELEMENT = 16;
    }
    // Ignores its arguments: a view of the whole pool.
    class Whole extends Uint8Array {
      constructor(buffer: ArrayBuffer) {
        super(buffer);
      }
    }
    const types: Hostile[] = [
      ...hostileObjects(),
      { name: "Liar (0.5 bytes)", value: Liar },
      { name: "Zero", value: Zero },
      { name: "Wide", value: Wide },
      { name: "Whole", value: Whole },
      { name: "Array", value: Array },
      { name: "Object", value: Object },
      { name: "Number", value: Number },
    ];
    for (const at of [small, mid]) {
      refuse("view(address, type)", types, (v) => buddy.view(at, v as never), {
        snapshot,
      });
      const good = [Uint8Array, Float32Array, Float64Array, DataView];
      for (const type of good) {
        const view = buddy.view(at, type as typeof Uint8Array);
        assert.equal(view.byteLength, buddy.byteLengthOf(at));
        assert.equal(view.byteOffset, buddy.byteOffsetOf(at));
      }
    }
  });

  it("PlaceAllocator refuses hostile places, lengths and pointers and makes no place", () => {
    const places = new PlaceAllocator({ initialPoolByteLength: 4096 });
    const p = places.alloc("cpu", 64);
    const snapshot = () =>
      JSON.stringify([
        places.places().map(String),
        places.used("cpu"),
        places.allocatorFor("cpu").stats(),
      ]);
    refuse(
      "PlaceAllocator.alloc(place, n)",
      numbers,
      (v) => places.alloc("cpu", v as number),
      { snapshot, error: InvalidArgumentError },
    );
    refuse(
      "PlaceAllocator.alloc(new place, n)",
      numbers,
      (v) => places.alloc("cpu:3", v as number),
      { snapshot, error: InvalidArgumentError },
    );
    const badPlaces: Hostile[] = [
      ...hostileObjects(),
      { name: '"cpu:-1"', value: "cpu:-1" },
      { name: '"cpu:1.5"', value: "cpu:1.5" },
      { name: '"gpu"', value: "gpu" },
      { name: '"cpu:99999999999999999999"', value: "cpu:99999999999999999999" },
      { name: "Device look-alike", value: { type: "cpu", index: 0 } },
    ];
    refuse(
      "PlaceAllocator.alloc(place)",
      badPlaces,
      (v) => places.alloc(v as string, 8),
      { snapshot },
    );
    // "abc" and "gpu" are well-formed places with nothing used.
    const usedPlaces = badPlaces.filter((h) =>
      h.name !== '"abc"' && h.name !== '"gpu"'
    );
    assert.equal(places.used("abc"), 0);
    refuse(
      "PlaceAllocator.used(place)",
      usedPlaces,
      (v) => places.used(v as string),
      { snapshot },
    );
    refuse(
      "PlaceAllocator.allocatorFor(place)",
      badPlaces,
      (v) => places.allocatorFor(v as string),
      { snapshot },
    );
    refuse(
      "PlaceAllocator.free(place, p)",
      badPlaces,
      (v) => places.free(v as string, p),
      { snapshot },
    );
    const other = new PlaceAllocator({ initialPoolByteLength: 4096 });
    const direct = new BuddyAllocator({ initialPoolByteLength: 4096 });
    const released = places.alloc("cpu", 8);
    released.release();
    refuse(
      "PlaceAllocator.free(place, ptr)",
      [
        ...hostileObjects(),
        { name: "another PlaceAllocator's", value: other.alloc("cpu", 64) },
        { name: "a BuddyAllocator's", value: direct.allocate(64) },
        { name: "released", value: released },
        {
          name: "look-alike DataPtr",
          value: new DataPtr(p.memory, p.byteOffset, 64, Device.cpu(), {
            context: p.getContext(),
            deleter: () => {},
          }),
        },
        { name: "another place's", value: places.alloc("cpu:1", 64) },
      ],
      (v) => places.free("cpu", v as DataPtr<unknown, number>),
      { snapshot },
    );
    assert.throws(() => places.free("cpu", released), DoubleFreeError);
    places.free("cpu", p);
    assert.throws(() => places.free("cpu", p), DoubleFreeError);
    assert.equal(places.used("cpu"), 0);
  });
});

describe("BuddyAllocator adversarial: zeros, getters and memories it cannot view", () => {
  it("BuddyAllocator takes -0 as 0 wherever 0 is valid", () => {
    const buddy = new BuddyAllocator(OPTIONS);
    const at = buddy.alloc(-0);
    assert.ok(Object.is(at, 0));
    assert.equal(buddy.byteLengthOf(-0), 64);
    assert.equal(buddy.bytes(-0, -0).length, 0);
    assert.equal(buddy.bytes(at, 64).length, 64);
    assert.equal(buddy.allocate(-0).byteLength, 0);
    buddy.free(-0);
    assert.throws(() => buddy.free(0), DoubleFreeError);
  });

  it("BuddyAllocator lets a throwing options getter through and is not made", () => {
    for (const key of [...Object.keys(OPTIONS), "backing", "strict"]) {
      const options = Object.defineProperty({ ...OPTIONS }, key, {
        enumerable: true,
        get(): never {
          throw new HostileTrapError(`getter ${key}`);
        },
      });
      assert.throws(() => new BuddyAllocator(options), HostileTrapError);
      assert.throws(
        () => new PlaceAllocator(options as PlaceAllocatorOptions),
        HostileTrapError,
      );
    }
  });

  it("BuddyAllocator over memory the host cannot read refuses views with UnsupportedOperationError and still allocates", () => {
    const buddy = new BuddyAllocator({
      ...OPTIONS,
      backing: new MockSegmentSource(),
    });
    const small = buddy.alloc(64), large = buddy.alloc(5000);
    const before = state(buddy);
    for (const at of [small, large]) {
      refuse(
        "bytes()/view() of a mock memory",
        [{ name: String(at), value: at }],
        (v) => buddy.bytes(v as number, 1),
        { error: UnsupportedOperationError },
      );
      assert.throws(
        () => buddy.view(at, Uint8Array),
        UnsupportedOperationError,
      );
      assert.ok(buddy.memoryOf(at) !== undefined);
    }
    assert.equal(state(buddy), before);
    buddy.free(small);
    buddy.free(large);
    assert.equal(buddy.trim(), 4096);
  });
});

describe("BuddyAllocator adversarial: foreign and stale handles", () => {
  it("BuddyAllocator refuses stale addresses (freed twice, merged into a larger block, in a trimmed pool) and changes nothing", () => {
    const buddy = new BuddyAllocator(OPTIONS);
    const twin = new BuddyAllocator(OPTIONS);
    const run = (b: BuddyAllocator) => {
      const x = b.alloc(64), y = b.alloc(64);
      b.free(x);
      b.free(y); // merged: y's address is now inside a free 128-byte block
      const z = b.alloc(128); // z takes x's address: y's is inside z
      const big = b.alloc(5000);
      b.free(big);
      const w = b.alloc(4096), v = b.alloc(4096); // a second and third pool
      b.free(v);
      b.free(w);
      b.trim(); // pools 1 and 2 go back
      return { x, y, z, big, w, v };
    };
    const { y, big, w, v } = run(buddy);
    run(twin);
    const snapshot = () => state(buddy);
    const stale: Hostile[] = [
      { name: "inside a live block", value: y },
      { name: "large, freed", value: big },
      { name: "in a trimmed pool", value: w },
      { name: "in another trimmed pool", value: v },
    ];
    refuse("free(stale)", stale, (a) => buddy.free(a as number), {
      snapshot,
      error: DoubleFreeError,
    });
    refuse("bytes(stale)", stale, (a) => buddy.bytes(a as number, 1), {
      snapshot,
      error: DoubleFreeError,
    });
    refuse(
      "byteLengthOf(stale)",
      stale,
      (a) => buddy.byteLengthOf(a as number),
      { snapshot, error: DoubleFreeError },
    );
    assertTwins(buddy, twin);
  });

  it("BuddyAllocator refuses another allocator's addresses that it has no live block at, and stale pointers", () => {
    const buddy = new BuddyAllocator(OPTIONS);
    const keep = buddy.alloc(64);
    const other = new BuddyAllocator(OPTIONS);
    other.alloc(64);
    const foreign = [other.alloc(1024), other.alloc(5000), other.alloc(4096)];
    const snapshot = () => state(buddy);
    refuse(
      "free(foreign)",
      foreign.map((value) => ({ name: String(value), value })),
      (a) => buddy.free(a as number),
      { snapshot, error: DoubleFreeError },
    );
    const ptr = buddy.allocate(100);
    const context = ptr.getContext()!;
    ptr.release();
    const released = state(buddy);
    ptr.release(); // a no-op on a released DataPtr
    assert.equal(state(buddy), released);
    refuse(
      "rawDeallocate(stale context)",
      [{ name: "context", value: context }],
      (c) => buddy.rawDeallocate(c as number),
      { snapshot, error: DoubleFreeError },
    );
    // A pointer of another allocator frees there, never here.
    const theirs = other.allocate(64);
    const before = state(buddy);
    theirs.release();
    assert.equal(state(buddy), before);
    buddy.free(keep);
    assert.equal(buddy.allocatedBytes, 0);
  });
});

describe("BuddyAllocator adversarial: lying backing allocators and segment sources", () => {
  const faults: AllocatorFault[] = ["short", "released", "duplicate"];
  it("BuddyAllocator refuses a short, released or twice-handed-out pool or large block with a ContractViolationError and changes nothing", () => {
    for (const fault of faults) {
      for (const length of [100, 4096, 5120]) {
        const base = new FirstFitAllocator(Device.cpu(), 1 << 20);
        const backing = new FaultyAllocator(base);
        const buddy = new BuddyAllocator({ ...OPTIONS, backing });
        const keep = buddy.alloc(5120); // backing's last block: a large one
        const snapshot = () => state(buddy);
        const before = snapshot();
        backing.arm(fault);
        assert.throws(
          () => buddy.alloc(length),
          ContractViolationError,
          `${fault} ${length}`,
        );
        assert.equal(snapshot(), before, `${fault} ${length} changed state`);
        assert.equal(backing.fired.get(fault), 1);
        buddy.checkIntegrity();
        // Nothing leaked but the block handed out twice (still ours).
        assert.equal(backing.liveCount, 1, `${fault} ${length} leaked`);
        const at = buddy.alloc(length);
        writePattern(buddy.bytes(at, length), 1);
        writePattern(buddy.bytes(keep, 5120), 2);
        checkPattern(buddy.bytes(at, length), 1);
        buddy.free(at);
        buddy.free(keep);
        buddy.trim();
        assert.equal(base.live.size, 0);
      }
    }
  });

  it("BuddyAllocator turns a throwing or refusing backing into an OutOfMemoryError, refuses a misaligned pool, and changes nothing", () => {
    const cases: [AllocatorFault, ErrorClass][] = [
      ["throw", OutOfMemoryError],
      ["misaligned", UnsupportedOperationError],
    ];
    for (const [fault, error] of cases) {
      const base = new FirstFitAllocator(Device.cpu(), 1 << 20);
      const backing = new FaultyAllocator(base);
      const buddy = new BuddyAllocator({ ...OPTIONS, backing });
      const before = state(buddy);
      backing.arm(fault);
      assert.throws(() => buddy.alloc(64), error);
      assert.equal(state(buddy), before);
      assert.equal(backing.liveCount, 0);
    }
    const junk = {
      device: Device.cpu(),
      allocate: () => ({ byteOffset: 0, byteLength: 1 << 20 }),
    };
    const buddy = new BuddyAllocator({
      ...OPTIONS,
      backing: junk as unknown as SystemAllocator,
    });
    for (const n of [64, 5000]) {
      assert.throws(() => buddy.alloc(n), ContractViolationError);
    }
    assert.equal(buddy.reservedBytes, 0);
  });

  it("BuddyAllocator refuses a segment source that returns a non-segment or a segment outside its memory with a ContractViolationError", () => {
    const freed: unknown[] = [];
    const lies: unknown[] = [
      null,
      5,
      "segment",
      { memory: new ArrayBuffer(100), byteOffset: 0, byteLength: 4096 },
      { memory: new ArrayBuffer(8192), byteOffset: NaN, byteLength: 4096 },
      { memory: new ArrayBuffer(8192), byteOffset: 0, byteLength: -1 },
    ];
    for (const lie of lies) {
      const source = {
        device: Device.cpu(),
        alignment: 64,
        maxSegmentByteLength: 2 ** 32,
        capacityBytes: Infinity,
        tryAllocateSegment: () => lie,
        freeSegment: (segment: unknown) => {
          freed.push(segment);
          if (typeof segment !== "object") throw new InjectedFault("free");
        },
      } as unknown as HostSegmentSource;
      const buddy = new BuddyAllocator({ ...OPTIONS, backing: source });
      const before = state(buddy);
      for (const n of [64, 5000]) {
        assert.throws(
          () => buddy.alloc(n),
          ContractViolationError,
          String(lie),
        );
      }
      assert.equal(state(buddy), before);
    }
    // Each object that was not a usable segment went back to its source.
    assert.deepEqual(freed, lies.slice(3).flatMap((l) => [l, l]));
  });

  it("BuddyAllocator reports its refusal of a bad pool even when giving the pool back throws", () => {
    const cases: [number, number, ErrorClass][] = [
      [8, 4096, UnsupportedOperationError], // misaligned
      [0, 100, ContractViolationError], // short
    ];
    for (const [skew, length, error] of cases) {
      let released = 0;
      const backing = {
        device: Device.cpu(),
        allocate: (n: number) =>
          new DataPtr(
            new ArrayBuffer(n + skew),
            skew,
            Math.min(n, length),
            Device.cpu(),
            {
              context: 0,
              deleter: () => {
                released++;
                throw new InjectedFault("deleter");
              },
            },
          ),
      } as unknown as SystemAllocator;
      const buddy = new BuddyAllocator({ ...OPTIONS, backing });
      const before = state(buddy);
      assert.throws(() => buddy.alloc(64), error);
      assert.equal(released, 1);
      assert.equal(state(buddy), before);
    }
  });

  it("BuddyAllocator stays consistent when its backing allocator re-enters it", () => {
    const base = new FirstFitAllocator(Device.cpu(), 1 << 20);
    const backing = new FaultyAllocator(base);
    const buddy = new BuddyAllocator({ ...OPTIONS, backing });
    const live: [number, number][] = [];
    let id = 0;
    const take = (n: number) => {
      const at = buddy.alloc(n);
      writePattern(buddy.bytes(at, n), ++id);
      live.push([at, n]);
    };
    backing.onReenter = () => take(64);
    for (const n of [64, 4096, 5120, 64, 4096]) {
      backing.arm("reenter");
      take(n);
      buddy.checkIntegrity();
    }
    assertDisjoint(
      live.map(([at]) => {
        const start = buddy.byteOffsetOf(at);
        return [buddy.memoryOf(at), start, start + buddy.byteLengthOf(at)];
      }),
    );
    live.forEach(([at, n], i) => checkPattern(buddy.bytes(at, n), i + 1));
    // Pools and the one large block: nothing else is held.
    assert.equal(backing.liveCount, buddy.poolCount + 1);
  });

  it("BuddyAllocator keeps its maximum when a re-entering backing takes the last pool", () => {
    const base = new FirstFitAllocator(Device.cpu(), 1 << 20);
    const backing = new FaultyAllocator(base);
    const buddy = new BuddyAllocator({
      ...OPTIONS,
      maxPoolByteLength: 2 * 4096,
      backing,
    });
    const first = buddy.alloc(4096);
    let inner = -1;
    backing.onReenter = () => {
      inner = buddy.alloc(4096); // the second and last pool
    };
    backing.arm("reenter");
    assert.throws(() => buddy.alloc(64), OutOfMemoryError);
    assert.equal(buddy.poolCount, 2);
    assert.equal(buddy.reservedBytes, 2 * 4096);
    assert.equal(backing.liveCount, 2, "the third pool was not given back");
    buddy.checkIntegrity();
    buddy.free(inner);
    buddy.free(first);
    assert.equal(buddy.trim(), 2 * 4096);
    assert.equal(base.live.size, 0);
  });

  it("BuddyAllocator in strict mode never writes into a large block it has given back", () => {
    // A backing that reuses a freed range at once (its deleter writes the
    // next owner's bytes there).
    const memory = new ArrayBuffer(1 << 16);
    const backing = {
      device: Device.cpu(),
      allocate(byteLength: number) {
        return new DataPtr(memory, 0, byteLength, Device.cpu(), {
          context: byteLength,
          deleter: (n: number) => new Uint8Array(memory, 0, n).fill(0x5a),
        });
      },
    } as unknown as SystemAllocator;
    const buddy = new BuddyAllocator({ ...OPTIONS, backing, strict: true });
    const large = buddy.alloc(8192);
    buddy.free(large);
    assert.ok(
      new Uint8Array(memory, 0, 8192).every((b) => b === 0x5a),
      "strict mode junk-filled memory after giving it back",
    );
  });

  it("BuddyAllocator.clone() and copyData() refuse hostile pointers and lengths and change nothing", () => {
    const { buddy, small, mid } = populated();
    const snapshot = () => state(buddy);
    const a = buddy.allocate(64), b = buddy.allocate(1000);
    const dead = buddy.allocate(8);
    dead.release();
    refuse(
      "clone(src)",
      [...hostileObjects(), { name: "released", value: dead }],
      (v) => buddy.clone(v as DataPtr<unknown, number>),
      { snapshot },
    );
    refuse(
      "copyData(dest, src, n)",
      [...numbers, { name: "65", value: 65 }],
      (v) => buddy.copyData(a, b, v as number),
      { snapshot },
    );
    writePattern(buddy.bytes(small, 64), 7);
    const copy = buddy.clone(a);
    assert.equal(copy.byteLength, 64);
    copy.release();
    const stats = buddy.stats();
    stats.allocations.current = -1;
    assert.notEqual(buddy.stats().allocations.current, -1);
    checkPattern(buddy.bytes(small, 64), 7);
    buddy.free(mid);
  });

  it("PlaceAllocator refuses a backing factory that re-enters it for the same place", () => {
    let inner: unknown;
    const places: PlaceAllocator = new PlaceAllocator({
      initialPoolByteLength: 4096,
      backing: (device) => {
        try {
          places.alloc(device, 8);
        } catch (e) {
          inner = e;
        }
        return new SystemAllocator({ device });
      },
    });
    const p = places.alloc("cpu", 8);
    assert.ok(inner instanceof UnsupportedOperationError, String(inner));
    assert.equal(places.used("cpu"), 256);
    places.free("cpu", p);
    assert.equal(places.used("cpu"), 0);
  });

  it("PlaceAllocator refuses a backing factory that returns another device's backing, and makes no place", () => {
    const places = new PlaceAllocator({
      initialPoolByteLength: 4096,
      backing: () => new SystemAllocator(), // always cpu:0
    });
    const p = places.alloc("cpu:0", 8);
    for (const place of ["cpu:1", "webgpu:0", Device.cpu(2)]) {
      assert.throws(() => places.alloc(place, 8), ContractViolationError);
      assert.throws(() => places.allocatorFor(place), ContractViolationError);
    }
    assert.deepEqual(places.places().map(String), ["cpu:0"]);
    assert.equal(p.device.toString(), "cpu:0");
    places.free("cpu", p);
  });

  it("BuddyAllocator over a segment source: throwing, short, misaligned and re-entering sources are refused or survived", () => {
    const cases: [SegmentFault, ErrorClass | undefined][] = [
      ["throw", OutOfMemoryError],
      ["short", ContractViolationError],
      // One byte in, the segment ends past its memory.
      ["misaligned", ContractViolationError],
      ["reenter", undefined],
    ];
    for (const [fault, error] of cases) {
      const host = new HostSegmentSource();
      const source = new FaultySegmentSource(host);
      const buddy = new BuddyAllocator({ ...OPTIONS, backing: source });
      const keep = buddy.alloc(64);
      const inner: number[] = [];
      source.onReenter = () => void inner.push(buddy.alloc(64));
      const before = state(buddy);
      source.arm(fault);
      if (error === undefined) {
        inner.push(buddy.alloc(4096));
      } else {
        assert.throws(() => buddy.alloc(4096), error, fault);
        assert.equal(state(buddy), before, fault);
      }
      buddy.checkIntegrity();
      buddy.free(keep);
      inner.forEach((at) => buddy.free(at));
      buddy.trim();
      assert.equal(host.liveSegmentCount, 0, `${fault}: a segment leaked`);
    }
  });
});

// ---------------------------------------------------------------------------
// Model: random runs with byte patterns in every live block.

type Op =
  | { kind: "alloc"; n: number; fault?: AllocatorFault | SegmentFault }
  | { kind: "allocate"; n: number }
  | { kind: "free"; pick: number; fault?: AllocatorFault | SegmentFault }
  | { kind: "trim"; fault?: AllocatorFault | SegmentFault }
  | { kind: "largest" }
  | { kind: "hostile"; pick: number; how: number };

const MIN = 64;
const POOL = 4096;
const MAX_POOLS = 4;
const sizeArb = fc.oneof(
  fc.constantFrom(
    0,
    1,
    MIN - 1,
    MIN,
    MIN + 1,
    2 * MIN,
    POOL / 2 - 1,
    POOL / 2 + 1,
    POOL - 1,
    POOL,
    POOL + 1,
    3 * POOL,
  ),
  fc.integer({ min: 0, max: 12 }).chain((bits) =>
    fc.integer({ min: 1 << bits, max: (2 << bits) - 1 })
  ),
);
const faultArb = fc.option(
  fc.constantFrom<AllocatorFault | SegmentFault>(
    ...ALLOCATOR_FAULTS,
    ...SEGMENT_FAULTS,
  ),
  { nil: undefined, freq: 4 },
);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("alloc" as const),
      n: sizeArb,
      fault: faultArb,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("allocate" as const),
      n: sizeArb,
    }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("free" as const),
      pick: fc.nat(),
      fault: faultArb,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("trim" as const),
      fault: faultArb,
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "largest" as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("hostile" as const),
      pick: fc.nat(),
      how: fc.nat(6),
    }),
  },
);

interface Block {
  at: number;
  n: number;
  id: number;
  ptr?: DataPtr<unknown, number>;
}

type Backing = "system" | "faulty-allocator" | "faulty-segments";

function pow2Block(n: number, min: number): number {
  let b = min;
  while (b < n) b *= 2;
  return b;
}

const seen = {
  refusedByContract: 0,
  injected: 0,
  trimmed: 0,
  large: 0,
  hostile: 0,
  maxPools: 0,
};

function runModel(
  backingKind: Backing,
  strict: boolean,
  min: number,
  ops: Op[],
) {
  const base = new FirstFitAllocator(Device.cpu(), 1 << 20);
  const faultyAllocator = new FaultyAllocator(base);
  const faultySource = new FaultySegmentSource(new HostSegmentSource());
  const backing = backingKind === "system"
    ? new SystemAllocator()
    : backingKind === "faulty-allocator"
    ? faultyAllocator
    : faultySource;
  const buddy = new BuddyAllocator({
    initialPoolByteLength: POOL,
    maxPoolByteLength: MAX_POOLS * POOL,
    minBlockByteLength: min,
    backing,
    strict,
  });
  const live: Block[] = [];
  const gone: number[] = [];
  let nextId = 1;
  let allocated = 0, freed = 0;
  const arm = (fault: AllocatorFault | SegmentFault | undefined) => {
    faultyAllocator.arm(fault as AllocatorFault);
    faultySource.arm(fault as SegmentFault);
  };
  const add = (at: number, n: number, ptr?: DataPtr<unknown, number>) => {
    const block = { at, n, id: nextId++, ptr };
    writePattern(buddy.bytes(at, n), block.id);
    live.push(block);
    allocated++;
  };
  const reenter = () => add(buddy.alloc(64), 64);
  faultyAllocator.onReenter = reenter;
  faultySource.onReenter = reenter;
  const expected = (e: unknown) => {
    if (e instanceof ContractViolationError) seen.refusedByContract++;
    if (e instanceof InjectedFault) seen.injected++;
    // Refusals of a lying backing, its own injected errors, a full pool.
    assert.ok(
      e instanceof InjectedFault || e instanceof ContractViolationError ||
        e instanceof UnsupportedOperationError ||
        e instanceof OutOfMemoryError,
      `unexpected ${e}`,
    );
  };
  for (const op of ops) {
    if (op.kind === "alloc" || op.kind === "allocate") {
      const before = state(buddy);
      if (op.kind === "alloc") arm(op.fault);
      try {
        if (op.kind === "alloc") {
          add(buddy.alloc(op.n), op.n);
        } else {
          const ptr = buddy.allocate(op.n);
          assert.equal(ptr.byteLength, op.n);
          add(ptr.getContext()!, op.n, ptr);
        }
      } catch (e) {
        expected(e);
        // A re-entering backing allocates on its own before the refusal.
        if (op.kind === "allocate" || op.fault !== "reenter") {
          assert.equal(state(buddy), before, `refused alloc changed state`);
        }
      } finally {
        arm(undefined);
      }
    } else if (op.kind === "free") {
      if (live.length === 0) continue;
      const [block] = live.splice(op.pick % live.length, 1);
      checkPattern(buddy.bytes(block.at, block.n), block.id);
      arm(op.fault);
      try {
        if (block.ptr) block.ptr.release();
        else buddy.free(block.at);
      } catch (e) {
        expected(e);
        assert.ok(e instanceof InjectedFault, `free refused: ${e}`);
      } finally {
        arm(undefined);
      }
      freed++;
      gone.push(block.at);
      assert.throws(() => buddy.free(block.at), DoubleFreeError);
    } else if (op.kind === "trim") {
      arm(op.fault);
      const pools = buddy.poolCount;
      try {
        const back = buddy.trim();
        assert.equal(back % POOL, 0);
        if (back > 0) seen.trimmed++;
        assert.equal(buddy.poolCount, pools - back / POOL);
      } catch (e) {
        expected(e);
        assert.ok(e instanceof InjectedFault, `trim refused: ${e}`);
      } finally {
        arm(undefined);
      }
    } else if (op.kind === "largest") {
      // The largest free block is there: taking it adds no pool.
      const largest = buddy.largestFreeBytes;
      if (largest > 0) {
        const pools = buddy.poolCount;
        add(buddy.alloc(largest), largest);
        assert.equal(buddy.poolCount, pools);
      }
    } else {
      const block = live.length > 0 ? live[op.pick % live.length] : undefined;
      const stale = gone.find((g) => !live.some((b) => b.at === g));
      const candidates = [
        stale,
        block && block.at + min,
        block && block.at + 1,
        block && block.at + (1 << 30),
        block && -block.at - min * 4096,
        block && block.at + buddy.byteLengthOf(block.at),
        stale,
      ];
      const at = candidates[op.how];
      if (at === undefined || live.some((b) => b.at === at)) continue;
      const before = state(buddy);
      seen.hostile++;
      assert.throws(() => buddy.free(at), isAddressError);
      assert.throws(() => buddy.bytes(at, 1), isAddressError);
      if (block) {
        assert.throws(
          () => buddy.bytes(block.at, buddy.byteLengthOf(block.at) + 1),
          InvalidArgumentError,
        );
      }
      assert.equal(state(buddy), before, `free(${at}) changed the allocator`);
    }
    // Invariants: patterns, no overlap, alignment, lengths, stats recount.
    const ranges: [unknown, number, number][] = [];
    let bytes = 0;
    for (const b of live) {
      const length = buddy.byteLengthOf(b.at);
      if (b.n > POOL) {
        seen.large++;
        assert.ok(b.at < 0 && length >= b.n);
        bytes += b.n;
      } else {
        assert.equal(length, pow2Block(b.n, min), `block of ${b.n} bytes`);
        assert.equal(b.at % length, 0, `${b.at} not aligned to ${length}`);
        bytes += length;
      }
      const start = buddy.byteOffsetOf(b.at);
      ranges.push([buddy.memoryOf(b.at), start, start + length]);
      checkPattern(buddy.bytes(b.at, b.n), b.id);
    }
    assertDisjoint(ranges);
    seen.maxPools = Math.max(seen.maxPools, buddy.poolCount);
    const stats = buddy.stats();
    assert.equal(stats.allocatedBytes.current, bytes);
    assert.equal(stats.allocations.current, live.length);
    assert.equal(stats.allocations.allocated, allocated);
    assert.equal(stats.allocations.freed, freed);
    assert.equal(
      stats.allocatedBytes.allocated - stats.allocatedBytes.freed,
      bytes,
    );
    assert.ok(stats.allocatedBytes.peak >= bytes);
    assert.ok(stats.reservedBytes >= bytes);
    buddy.checkIntegrity();
  }
  // Everything goes back, and the space is reusable.
  for (const b of live) {
    checkPattern(buddy.bytes(b.at, b.n), b.id);
    if (b.ptr) b.ptr.release();
    else buddy.free(b.at);
  }
  assert.equal(buddy.allocatedBytes, 0);
  assert.equal(buddy.largestFreeBytes, buddy.poolCount > 0 ? POOL : 0);
  const pools = buddy.poolCount;
  if (pools > 0) {
    const whole: number[] = [];
    for (let i = 0; i < pools; i++) whole.push(buddy.alloc(POOL));
    assert.equal(buddy.poolCount, pools);
    whole.forEach((at) => buddy.free(at));
  }
  assert.equal(buddy.trim(), pools * POOL);
  assert.equal(buddy.reservedBytes, 0);
  buddy.checkIntegrity();
  if (backingKind === "faulty-allocator") {
    assert.equal(faultyAllocator.liveCount, 0, "pools leaked");
    assert.equal(base.live.size, 0, "pools leaked");
  }
}

describe("BuddyAllocator adversarial model", () => {
  it("BuddyAllocator keeps every live block's bytes, alignment, power-of-two length and stats over random runs with lying backings, trims and hostile frees", () => {
    fc.assert(
      fc.property(
        fc.constantFrom<Backing>(
          "system",
          "faulty-allocator",
          "faulty-segments",
        ),
        fc.boolean(),
        fc.constantFrom(16, 64, 256),
        fc.array(opArb, { minLength: 10, maxLength: 80 }),
        (backing, strict, min, ops) => runModel(backing, strict, min, ops),
      ),
      { numRuns: modelRuns(300) },
    );
    console.log(`buddy model: ${JSON.stringify(seen)}`);
    for (const [what, count] of Object.entries(seen)) {
      assert.ok(count > 0, `no run saw ${what}`);
    }
    assert.ok(seen.maxPools === MAX_POOLS, "no run filled every pool");
  });
});
