/**
 * Outside-in hostile tests of `@allot/cpu`, written from the public API only
 * (`mod.ts`) plus the shared test helpers: hostile sizes, alignments, offsets
 * and options (a typed error that states the value and the limit, nothing
 * changed), offsets never issued / interior / of another heap / stale after
 * dispose, views over a memory that grew, was detached or shrank, growth that
 * fails in the middle of a request, reporters that throw or re-enter, and a
 * fast-check model over every memory kind and placement in which each live
 * block carries a byte pattern that must never change and the stats must equal
 * a recount.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllotError,
  Device,
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
  UseAfterFreeError,
} from "@allot/core";
import {
  CpuAllocator,
  CpuHeap,
  type CpuHeapPlacement,
  HostSegmentSource,
  ProfiledMemoryReporter,
  SystemAllocator,
} from "./mod.ts";
import {
  assertRefused,
  hostileFlags,
  hostileNumbers,
  hostileNumbersBut,
  hostileObjectsBut,
  HostileTally,
} from "../core/_test_hostile.ts";
import { checkPattern, modelRuns, writePattern } from "../core/_test_faults.ts";

const PLACEMENTS: readonly CpuHeapPlacement[] = [
  "good-fit",
  "compact",
  "first-fit",
];

/** Everything observable of a heap, for "a refused call changes nothing". */
function state(heap: CpuHeap): unknown {
  const s = heap.stats();
  return {
    blocks: heap.snapshot(),
    allocations: s.allocations,
    allocatedBytes: s.allocatedBytes,
    requestedBytes: s.requestedBytes,
    reservedBytes: s.reservedBytes,
    freeBytes: s.freeBytes,
    largestFreeBytes: s.largestFreeBytes,
    freeRegions: s.freeRegions,
    highWaterBytes: s.highWaterBytes,
    growCount: s.growCount,
    generation: heap.generation,
  };
}

const nullProto = (): object => Object.create(null);

describe("CpuHeap refuses hostile arguments with a typed error, changing nothing", () => {
  for (const placement of PLACEMENTS) {
    it(`${placement}: every entry point, every hostile number`, () => {
      const heap = new CpuHeap(1 << 16, { placement, maxByteLength: 1 << 17 });
      const a = heap.alloc(100);
      const b = heap.alloc(3000, 4096);
      writePattern(heap.bytes(a, 100), 1);
      const snapshot = () => state(heap);
      const tally = new HostileTally();
      const { refuse } = tally;
      const values = [
        ...hostileNumbers(),
        { name: "null-prototype object", value: nullProto() },
        { name: "-1e-300", value: -1e-300 },
        { name: "2^31+0.5", value: 2 ** 31 + 0.5 },
      ];
      const o = { snapshot };
      refuse("alloc(n)", values, (v) => heap.alloc(v as number), o);
      refuse("tryAlloc(n)", values, (v) => heap.tryAlloc(v as number), o);
      const aligns = [
        ...values.filter((h) => h.name !== "undefined"),
        { name: "-0", value: -0 },
        { name: "0", value: 0 },
        { name: "48", value: 48 },
        { name: "131072", value: 131072 },
        { name: "2^31", value: 2 ** 31 },
      ];
      refuse("alloc(8, a)", aligns, (v) => heap.alloc(8, v as number), o);
      refuse("tryAlloc(8, a)", aligns, (v) => heap.tryAlloc(8, v as number), o);
      const offsets = [...values, { name: "2^32", value: 2 ** 32 }];
      refuse("free(x)", offsets, (v) => heap.free(v as number), o);
      refuse("usable(x)", values, (v) => heap.usableByteLength(v as number), o);
      refuse("view(x)", values, (v) => heap.view(v as number, Uint8Array), o);
      refuse("bytes(x)", values, (v) => heap.bytes(v as number, 1), o);
      refuse("bytes(a, n)", values, (v) => heap.bytes(a, v as number), o);
      refuse("resize(x)", values, (v) => heap.resizeInPlace(v as number, 8), o);
      refuse(
        "resize(a, n)",
        values,
        (v) => heap.resizeInPlace(a, v as number),
        o,
      );
      refuse("realloc(x)", values, (v) => heap.realloc(v as number, 8), o);
      refuse("realloc(a, n)", values, (v) => heap.realloc(a, v as number), o);
      refuse("grow(n)", values, (v) => heap.grow(v as number), o);
      // owns() answers any value without throwing.
      for (const h of values) assert.equal(heap.owns(h.value as number), false);
      assert.ok(tally.calls > 400, `${tally.calls} hostile calls`);
      checkPattern(heap.bytes(a, 100), 1);
      heap.checkIntegrity();
      heap.free(b);
      heap.free(a);
      assert.equal(heap.allocatedBytes, 0);
      heap.dispose();
    });
  }

  it("the constructor refuses hostile memories and options", () => {
    const tally = new HostileTally();
    // null reads as "not given" for the options read with `??`.
    for (
      const key of ["alignment", "byteOffset", "byteLength", "maxByteLength"]
    ) {
      tally.refuse(
        key,
        hostileNumbersBut("undefined", "null"),
        (v) =>
          new CpuHeap(new ArrayBuffer(4096, { maxByteLength: 8192 }), {
            [key]: v,
          }),
      );
    }
    for (const key of ["mobile", "shared", "strict"]) {
      tally.refuse(key, hostileFlags(), (v) => new CpuHeap(4096, { [key]: v }));
    }
    tally.refuse(
      "placement",
      hostileNumbersBut("undefined", "null"),
      (v) => new CpuHeap(4096, { placement: v as CpuHeapPlacement }),
    );
    tally.refuse(
      "options",
      hostileObjectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => new CpuHeap(4096, v as object),
    );
    tally.refuse("memory", [
      ...hostileNumbersBut("0"),
      ...hostileObjectsBut("0"),
      { name: "Uint8Array", value: new Uint8Array(64) },
      { name: "DataView", value: new DataView(new ArrayBuffer(64)) },
      {
        name: "memory look-alike",
        value: { buffer: new ArrayBuffer(64), grow: () => 0 },
      },
    ], (v) => new CpuHeap(v as ArrayBuffer));
    assert.ok(tally.calls > 200);
  });

  it("view() refuses a type that is not a constructor (arrow, object, null-prototype)", () => {
    const heap = new CpuHeap(4096);
    const a = heap.alloc(64);
    const types = [
      ...hostileObjectsBut(),
      { name: "arrow", value: () => new Uint8Array(1) },
      { name: "null-prototype object", value: nullProto() },
      { name: "method", value: { m() {} }.m },
    ];
    assertRefusesTyped(
      "view(a, type)",
      types,
      (t) => heap.view(a, t as typeof Uint8Array),
      () => state(heap),
      InvalidArgumentError,
    );
    heap.free(a);
  });

  it("states the value and the limit in each error", () => {
    const heap = new CpuHeap(4096);
    const a = heap.alloc(100);
    const message = (f: () => unknown): string => {
      try {
        f();
      } catch (e) {
        assert.ok(e instanceof AllotError, String(e));
        return e.message;
      }
      assert.fail("accepted");
    };
    assert.match(message(() => heap.alloc(8, 48)), /48.*|65536/);
    assert.match(message(() => heap.alloc(8, 48)), /48/);
    assert.match(message(() => heap.alloc(8, 131072)), /131072.*|65536/);
    assert.match(message(() => heap.alloc(8, 131072)), /65536/);
    const past = message(() => heap.bytes(a, 129));
    assert.match(past, /129/);
    assert.match(past, /128/);
    assert.match(message(() => heap.alloc(-1)), /-1/);
    assert.match(message(() => heap.alloc(0.5)), /0\.5/);
    assert.match(message(() => heap.free(64 * 3)), /192/);
    assert.match(
      message(() => heap.free(nullProto() as unknown as number)),
      /object/,
    );
    assert.match(message(() => heap.free(10n as unknown as number)), /10n/);
    const oom = message(() => heap.alloc(8192));
    assert.match(oom, /8192/);
    assert.match(oom, /3968/); // largest free region
    assert.match(message(() => new CpuHeap(4096, { alignment: 4 })), /4/);
  });

  it("-0 is a valid zero everywhere", () => {
    const heap = new CpuHeap(4096);
    const a = heap.alloc(-0);
    assert.equal(a, 0);
    assert.equal(heap.owns(-0), true);
    assert.equal(heap.usableByteLength(-0), 64);
    assert.equal(heap.bytes(-0, -0).length, 0);
    assert.equal(heap.resizeInPlace(-0, -0), true);
    heap.free(-0);
    assert.equal(heap.allocationCount, 0);
    heap.checkIntegrity();
  });
});

function assertRefusesTyped(
  label: string,
  values: { name: string; value: unknown }[],
  call: (v: unknown) => unknown,
  snapshot: () => unknown,
  error: abstract new (...args: never[]) => Error,
): void {
  for (const h of values) {
    const before = snapshot();
    assert.throws(() => call(h.value), error, `${label} with ${h.name}`);
    assert.deepStrictEqual(snapshot(), before, `${label} with ${h.name}`);
  }
}

describe("CpuHeap refuses offsets it did not issue", () => {
  for (const placement of PLACEMENTS) {
    it(`${placement}: interior, never issued, double, another heap's, stale after dispose`, () => {
      const memory = new ArrayBuffer(1 << 16);
      const heap = new CpuHeap(memory, { placement, byteLength: 1 << 15 });
      const other = new CpuHeap(memory, { placement, byteOffset: 1 << 15 });
      const a = heap.alloc(1000);
      const b = heap.alloc(200, 256);
      const c = heap.alloc(64);
      writePattern(heap.bytes(a, 1000), 7);
      const theirs = other.alloc(64);
      heap.free(c);
      const snapshot = () => [state(heap), state(other)];
      const bad = [
        a + 64, // interior, granule aligned
        a + 1, // interior, unaligned
        b - 64, // the gap before an aligned block, or a neighbour
        c, // freed
        theirs, // another heap's live block
        1 << 15, // the other heap's first byte
        (1 << 16) + 64, // past the memory
        2 ** 40, // far past
        2 ** 53 - 64, // largest safe multiple of 64
      ];
      for (const x of bad) {
        assertRefused(`free(${x})`, () => heap.free(x), {
          snapshot,
          error: DoubleFreeError,
        });
        assertRefused(`view(${x})`, () => heap.view(x, Uint8Array), {
          snapshot,
          error: UseAfterFreeError,
        });
        assertRefused(`bytes(${x})`, () => heap.bytes(x, 0), {
          snapshot,
          error: UseAfterFreeError,
        });
        assertRefused(`resize(${x})`, () => heap.resizeInPlace(x, 8), {
          snapshot,
          error: UseAfterFreeError,
        });
        assertRefused(`realloc(${x})`, () => heap.realloc(x, 8), {
          snapshot,
          error: UseAfterFreeError,
        });
        assertRefused(`usable(${x})`, () => heap.usableByteLength(x), {
          snapshot,
          error: UseAfterFreeError,
        });
        assert.equal(heap.owns(x), false);
      }
      checkPattern(heap.bytes(a, 1000), 7);
      // Stale after dispose: every call refused, even the diagnostics.
      heap.dispose();
      for (
        const call of [
          () => heap.free(a),
          () => heap.alloc(8),
          () => heap.tryAlloc(8),
          () => heap.view(a, Uint8Array),
          () => heap.bytes(a, 1),
          () => heap.realloc(a, 8),
          () => heap.resizeInPlace(a, 8),
          () => heap.usableByteLength(a),
          () => heap.grow(64),
          () => heap.checkIntegrity(),
          () => heap.snapshot(),
        ]
      ) {
        assert.throws(
          call,
          (e) => e instanceof AllotError && !(e instanceof TypeError),
        );
        assert.throws(call, InvalidArgumentError);
      }
      assert.equal(heap.owns(a), false);
      heap.dispose(); // twice: nothing
      // The bytes are free for a new heap; the old offsets mean nothing to it.
      const next = new CpuHeap(memory, { placement, byteLength: 1 << 15 });
      assert.throws(() => next.free(a), DoubleFreeError);
      assert.equal(next.alloc(64), 0);
      other.free(theirs);
      other.checkIntegrity();
      next.checkIntegrity();
    });
  }
});

describe("CpuHeap views", () => {
  it("bytes() refuses a length past the block with a typed error naming both", () => {
    for (const placement of PLACEMENTS) {
      const heap = new CpuHeap(4096, { placement });
      const a = heap.alloc(100); // 128 usable
      heap.alloc(64);
      assert.equal(heap.bytes(a, 128).length, 128);
      assert.throws(
        () => heap.bytes(a, 129),
        (e: unknown) =>
          e instanceof InvalidArgumentError && e.value === 129 &&
          e.limit === 128,
      );
      assert.equal(heap.view(a, Uint8Array).length, 100);
      assert.equal(heap.view(a, Float64Array).length, 12);
      assert.equal(heap.view(a, DataView).byteLength, 100);
    }
  });

  it("views of a plain ArrayBuffer that was transferred away: a typed error", () => {
    const memory = new ArrayBuffer(4096);
    const heap = new CpuHeap(memory);
    const a = heap.alloc(256);
    (memory as ArrayBuffer & { transfer(): ArrayBuffer }).transfer();
    assert.throws(() => heap.view(a, Float32Array), UseAfterFreeError);
    assert.throws(() => heap.bytes(a, 8), UseAfterFreeError);
    // The metadata is intact: the block can still be freed.
    heap.free(a);
    heap.checkIntegrity();
  });

  it("views of a resizable ArrayBuffer shrunk behind the heap's back: a typed error", () => {
    const memory = new ArrayBuffer(4096, { maxByteLength: 8192 });
    const heap = new CpuHeap(memory, { maxByteLength: 8192 });
    const low = heap.alloc(512);
    const high = heap.alloc(2048);
    memory.resize(1024);
    assert.equal(heap.view(low, Uint8Array).length, 512);
    assert.throws(() => heap.view(high, Uint8Array), UseAfterFreeError);
    assert.throws(() => heap.bytes(high, 2048), UseAfterFreeError);
    const allocator = new CpuAllocator({ heap });
    heap.free(high);
    const ptr = allocator.allocate(2048);
    assert.ok(ptr.byteOffset + 2048 > 1024);
    assert.throws(() => allocator.view(ptr, Uint8Array), UseAfterFreeError);
  });

  it("a WebAssembly.Memory that grows: old views detach, new ones read the same bytes", () => {
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 4 });
    const heap = new CpuHeap(memory, { maxByteLength: 4 * 65536 });
    const a = heap.alloc(1000);
    writePattern(heap.bytes(a, 1000), 3);
    const old = heap.view(a, Uint8Array);
    const generation = heap.generation;
    const big = heap.alloc(100_000); // grows
    assert.ok(heap.generation > generation);
    assert.equal(old.length, 0);
    checkPattern(heap.bytes(a, 1000), 3);
    assert.equal(heap.view(big, Uint8Array).length, 100_000);
    assert.equal(heap.buffer, memory.buffer);
    heap.free(big);
    heap.free(a);
    heap.checkIntegrity();
  });
});

describe("CpuHeap growth that fails mid-request", () => {
  const kinds: [
    string,
    () => {
      memory: ArrayBuffer | WebAssembly.Memory | SharedArrayBuffer;
      max: number;
    },
  ][] = [
    ["WebAssembly.Memory at its maximum", () => ({
      memory: new WebAssembly.Memory({ initial: 1, maximum: 2 }),
      max: 8 * 65536, // more than the memory's maximum: growth fails inside
    })],
    ["resizable ArrayBuffer at maxByteLength", () => ({
      memory: new ArrayBuffer(65536, { maxByteLength: 2 * 65536 }),
      max: 2 * 65536,
    })],
    ["growable SharedArrayBuffer at maxByteLength", () => ({
      memory: new SharedArrayBuffer(65536, { maxByteLength: 2 * 65536 }),
      max: 2 * 65536,
    })],
  ];
  for (const [name, make] of kinds) {
    for (const placement of PLACEMENTS) {
      it(`${name}, ${placement}: alloc and realloc refuse, nothing else changes`, () => {
        const { memory, max } = make();
        const heap = new CpuHeap(memory, { placement, maxByteLength: max });
        const a = heap.alloc(30_000);
        writePattern(heap.bytes(a, 30_000), 9);
        const grown = heap.alloc(60_000); // grows to 2 pages
        assert.equal(heap.stats().growCount, 1);
        const before = state(heap);
        const ooms = heap.stats().outOfMemoryCount;
        assert.throws(() => heap.alloc(200_000), OutOfMemoryError);
        assert.equal(heap.tryAlloc(200_000), undefined);
        assert.throws(() => heap.realloc(a, 200_000), OutOfMemoryError);
        assert.equal(heap.resizeInPlace(a, 200_000), false);
        assert.equal(heap.grow(1 << 20), false);
        assert.deepStrictEqual(state(heap), before);
        assert.ok(heap.stats().outOfMemoryCount >= ooms + 2);
        checkPattern(heap.bytes(a, 30_000), 9);
        // The heap keeps working within what it has.
        heap.free(grown);
        const c = heap.alloc(60_000);
        heap.free(c);
        heap.free(a);
        heap.checkIntegrity();
        assert.equal(heap.allocatedBytes, 0);
        assert.equal(heap.freeRegionCount, 1);
      });
    }
  }
});

describe("CpuHeap edges", () => {
  for (const placement of PLACEMENTS) {
    it(`${placement}: resizeInPlace takes all of a free neighbour, never a byte more`, () => {
      const heap = new CpuHeap(1 << 16, { placement });
      const a = heap.alloc(64);
      const b = heap.alloc(128);
      const c = heap.alloc(64);
      writePattern(heap.bytes(c, 64), 5);
      heap.free(b);
      const before = state(heap);
      assert.equal(heap.resizeInPlace(a, 64 + 128 + 1), false);
      assert.equal(heap.resizeInPlace(a, 64 + 128 + 64), false);
      assert.deepStrictEqual(state(heap), before);
      assert.equal(heap.resizeInPlace(a, 64 + 128), true);
      assert.equal(heap.usableByteLength(a), 192);
      assert.equal(heap.freeRegionCount, 1);
      checkPattern(heap.bytes(c, 64), 5);
      heap.checkIntegrity();
    });

    it(`${placement}: a request the growth limit cannot fit does not grow the heap`, () => {
      for (
        const memory of [
          new ArrayBuffer(65536, { maxByteLength: 4 * 65536 }),
          new SharedArrayBuffer(65536, { maxByteLength: 4 * 65536 }),
          new WebAssembly.Memory({ initial: 1, maximum: 4 }),
        ]
      ) {
        const heap = new CpuHeap(memory, {
          placement,
          maxByteLength: 4 * 65536,
        });
        const a = heap.alloc(1000);
        const before = state(heap);
        const length = memory instanceof WebAssembly.Memory
          ? memory.buffer.byteLength
          : memory.byteLength;
        assert.throws(() => heap.alloc(4 * 65536), OutOfMemoryError);
        assert.throws(() => heap.realloc(a, 4 * 65536), OutOfMemoryError);
        assert.equal(heap.grow(4 * 65536), false);
        assert.deepStrictEqual(state(heap), before);
        assert.equal(
          memory instanceof WebAssembly.Memory
            ? memory.buffer.byteLength
            : memory.byteLength,
          length,
          "the memory grew for a request that could not fit",
        );
        assert.ok(heap.alloc(3 * 65536) >= 0); // fits after growth
        heap.dispose();
      }
    });
  }
});

describe("CpuHeap over a memory whose resize misbehaves (ArrayBuffer subclasses)", () => {
  const max = 4 * 65536;
  it("a resize that re-enters the heap: the inner growth is refused, no recursion, nothing corrupt", () => {
    const ref: { heap?: CpuHeap } = {};
    let calls = 0;
    class Reentrant extends ArrayBuffer {
      override resize(n: number): void {
        if (++calls > 50) throw new Error("resize recursed");
        const inner = ref.heap!.tryAlloc(64); // no growth needed
        assert.equal(ref.heap!.tryAlloc(150_000), undefined); // needs growth
        if (inner !== undefined) ref.heap!.free(inner);
        super.resize(n);
      }
    }
    const heap = ref.heap = new CpuHeap(
      new Reentrant(65536, { maxByteLength: max }),
      {
        maxByteLength: max,
      },
    );
    const a = heap.alloc(60_000);
    writePattern(heap.bytes(a, 60_000), 2);
    const b = heap.alloc(100_000);
    assert.ok(calls <= 2, `${calls} resizes for one growth`);
    heap.checkIntegrity();
    assert.ok(heap.byteLength <= (heap.memory as ArrayBuffer).byteLength);
    writePattern(heap.bytes(b, 100_000), 3);
    checkPattern(heap.bytes(a, 60_000), 2);
  });

  it("a resize that grows less than asked: the heap does not manage bytes the memory lacks", () => {
    class Short extends ArrayBuffer {
      override resize(n: number): void {
        super.resize(Math.min(n, 65536 + 4096));
      }
    }
    const memory = new Short(65536, { maxByteLength: max });
    const heap = new CpuHeap(memory, { maxByteLength: max });
    heap.alloc(60_000);
    const before = state(heap);
    assert.throws(() => heap.alloc(100_000), OutOfMemoryError);
    assert.deepStrictEqual(state(heap), before);
    assert.ok(heap.byteOffset + heap.byteLength <= memory.byteLength);
    for (const block of heap.snapshot()) {
      assert.ok(block.byteOffset + block.byteLength <= memory.byteLength);
    }
  });

  it("a resize that throws (anything) or disposes the heap: a typed error, nothing handed out", () => {
    class Throws extends ArrayBuffer {
      override resize(_n: number): void {
        throw 42;
      }
    }
    const heap = new CpuHeap(new Throws(65536, { maxByteLength: max }), {
      maxByteLength: max,
    });
    heap.alloc(60_000);
    const before = state(heap);
    assert.throws(() => heap.alloc(100_000), OutOfMemoryError);
    assert.equal(heap.grow(65536), false);
    assert.deepStrictEqual(state(heap), before);

    const target: { heap?: CpuHeap } = {};
    class Disposes extends ArrayBuffer {
      override resize(n: number): void {
        target.heap!.dispose();
        super.resize(n);
      }
    }
    const victim = target.heap = new CpuHeap(
      new Disposes(65536, { maxByteLength: max }),
      {
        maxByteLength: max,
      },
    );
    victim.alloc(60_000);
    assert.throws(() => victim.alloc(100_000), AllotError);
    assert.throws(() => victim.alloc(8), InvalidArgumentError);
  });
});

describe("CpuAllocator", () => {
  // `null` reads as "not given" for the options read with `??` (placement,
  // byteLength, maxByteLength, alignment), as in CpuHeap.
  it("passes placement to its heaps and refuses a bad one", () => {
    for (const placement of PLACEMENTS) {
      const allocator = new CpuAllocator({ byteLength: 4096, placement });
      assert.equal(allocator.heap.placement, placement);
      // Added heaps get it too.
      const big = allocator.allocate(8192);
      assert.equal(allocator.heaps.length, 2);
      for (const heap of allocator.heaps) {
        assert.equal(heap.placement, placement);
      }
      big.release();
    }
    for (
      const v of [...hostileNumbersBut("undefined", "null"), {
        name: '"best"',
        value: "best",
      }]
    ) {
      assert.throws(
        () => new CpuAllocator({ placement: v.value as CpuHeapPlacement }),
        InvalidArgumentError,
        v.name,
      );
    }
  });

  it("refuses hostile options with a typed error", () => {
    const tally = new HostileTally();
    for (const flag of ["zeroFill", "junkFill", "strict", "mobile", "shared"]) {
      tally.refuse(
        flag,
        hostileFlags(),
        (v) => new CpuAllocator({ byteLength: 4096, [flag]: v }),
      );
    }
    tally.refuse(
      "heap",
      hostileObjectsBut("undefined").concat([{
        name: "null-prototype",
        value: nullProto(),
      }]),
      (v) => new CpuAllocator({ heap: v as CpuHeap }),
    );
    tally.refuse(
      "reporter",
      hostileObjectsBut("undefined", "{}", "[]", "trap proxy"),
      (v) =>
        new CpuAllocator({
          byteLength: 4096,
          reporter: v as ProfiledMemoryReporter,
        }),
    );
    tally.refuse(
      "device",
      hostileObjectsBut("undefined"),
      (v) => new CpuAllocator({ byteLength: 4096, device: v as Device }),
    );
    tally.refuse(
      "byteLength",
      hostileNumbersBut("undefined", "null"),
      (v) => new CpuAllocator({ byteLength: v as number }),
    );
    tally.refuse(
      "maxByteLength",
      hostileNumbersBut("undefined", "null", "Infinity"),
      (v) => new CpuAllocator({ byteLength: 4096, maxByteLength: v as number }),
    );
    tally.refuse(
      "alignment",
      hostileNumbersBut("undefined", "null"),
      (v) => new CpuAllocator({ byteLength: 4096, alignment: v as number }),
    );
    tally.refuse(
      "options",
      hostileObjectsBut("undefined", "{}", "[]", "trap proxy", "() => {}"),
      (v) => new CpuAllocator(v as object),
    );
    const allocator = new CpuAllocator({ byteLength: 4096 });
    const snapshot = () => [allocator.stats(), state(allocator.heap)];
    tally.refuse(
      "allocate(n)",
      hostileNumbers(),
      (v) => allocator.allocate(v as number),
      { snapshot },
    );
    tally.refuse(
      "allocate(8, a)",
      hostileNumbersBut("undefined", "null"),
      (v) => allocator.allocate(8, v as number),
      { snapshot },
    );
    tally.refuse(
      "view(ptr)",
      [...hostileObjectsBut(), { name: "null-prototype", value: nullProto() }],
      (v) => allocator.view(v as never, Uint8Array),
      { snapshot },
    );
    const ptr = allocator.allocate(64);
    tally.refuse(
      "view(p, type)",
      [...hostileObjectsBut(), { name: "arrow", value: () => 1 }],
      (v) => allocator.view(ptr, v as typeof Uint8Array),
      { snapshot },
    );
    ptr.release();
    assert.throws(() => allocator.view(ptr, Uint8Array), UseAfterFreeError);
    assert.ok(tally.calls > 150);
  });

  it("a reporter whose getters throw or whose callbacks re-enter changes nothing the allocator did", () => {
    const throwing = new Proxy({}, {
      get() {
        throw new Error("reporter getter");
      },
    });
    const allocator = new CpuAllocator({
      byteLength: 4096,
      maxByteLength: 4096,
      reporter: throwing,
    });
    const ptr = allocator.allocate(64);
    assert.equal(allocator.allocatedBytes, 64);
    ptr.release();
    assert.equal(allocator.allocatedBytes, 0);
    assert.equal(allocator.heap.allocatedBytes, 0);
    assert.throws(() => allocator.allocate(1 << 20), OutOfMemoryError);
    const system = new SystemAllocator({ reporter: throwing });
    const sp = system.allocate(64);
    assert.equal(system.allocatedBytes, 64);
    sp.release();
    assert.equal(system.allocatedBytes, 0);

    // Re-entry: allocate and free from inside the callbacks.
    let depth = 0;
    const events: string[] = [];
    const reentrant = new CpuAllocator({
      byteLength: 1 << 16,
      reporter: {
        onAllocate(r) {
          events.push(`a${r.byteLength}`);
          if (depth++ < 3) reentrant.allocate(r.byteLength + 64).release();
          throw new Error("after re-entering");
        },
        onFree(r) {
          events.push(`f${r.byteLength}`);
        },
      },
    });
    const p = reentrant.allocate(64);
    writePattern(reentrant.view(p, Uint8Array), 4);
    assert.equal(reentrant.allocatedBytes, 64);
    assert.equal(reentrant.heap.allocationCount, 1);
    checkPattern(reentrant.view(p, Uint8Array), 4);
    p.release();
    assert.equal(reentrant.allocatedBytes, 0);
    reentrant.heap.checkIntegrity();
    assert.ok(events.length >= 8, events.join());
  });
});

describe("CpuAllocator frees", () => {
  it("a release refused by a disposed heap writes no junk over the bytes' next owner", () => {
    const memory = new ArrayBuffer(4096);
    const heap = new CpuHeap(memory);
    const allocator = new CpuAllocator({ heap, junkFill: true });
    const ptr = allocator.allocate(64);
    heap.dispose();
    const next = new CpuHeap(memory);
    const at = next.alloc(64);
    writePattern(next.bytes(at, 64), 11);
    assert.throws(() => ptr.release(), InvalidArgumentError);
    checkPattern(next.bytes(at, 64), 11);
    assert.equal(allocator.allocatedBytes, 64); // the free did not happen
  });

  it("rawDeallocate refuses contexts it did not make, naming what it got", () => {
    const allocator = new CpuAllocator({ byteLength: 4096 });
    const other = new CpuAllocator({ byteLength: 4096 });
    const theirs = other.rawAllocate(64);
    const mine = allocator.rawAllocate(64);
    const snapshot = () => [allocator.stats(), state(allocator.heap)];
    const contexts = [
      ...hostileObjectsBut("trap proxy"),
      { name: "null-prototype", value: nullProto() },
      { name: "another allocator's", value: theirs },
      {
        name: "look-alike",
        value: {
          heap: allocator.heap,
          byteOffset: 0,
          byteLength: 64,
          released: false,
        },
      },
    ];
    for (const c of contexts) {
      assertRefused(
        `rawDeallocate(${c.name})`,
        () => allocator.rawDeallocate(c.value as typeof mine),
        {
          snapshot,
          error: DoubleFreeError,
        },
      );
    }
    assert.throws(
      () => allocator.rawDeallocate(nullProto() as typeof mine),
      (e: unknown) =>
        e instanceof DoubleFreeError && /an object/.test(e.message) &&
        !/undefined/.test(e.message),
    );
    allocator.rawDeallocate(mine);
    assertRefused("rawDeallocate twice", () => allocator.rawDeallocate(mine), {
      snapshot,
      error: DoubleFreeError,
    });
    other.rawDeallocate(theirs);
    assert.equal(allocator.heap.allocationCount, 0);
  });
});

describe("HostSegmentSource requests", () => {
  it("refuses request options that are not an object or flags that are not booleans", () => {
    const source = new HostSegmentSource({ capacityBytes: 1 << 16 });
    const snapshot = () => [
      source.reservedBytes,
      source.allocationCount,
      source.liveSegmentCount,
    ];
    const tally = new HostileTally();
    tally.refuse(
      "options",
      hostileObjectsBut("undefined", "{}", "[]", "trap proxy", "() => {}"),
      (v) => source.tryAllocateSegment(64, v as object),
      { snapshot },
    );
    tally.refuse(
      "resizable",
      hostileFlags(),
      (v) => source.tryAllocateSegment(64, { resizable: v as boolean }),
      { snapshot },
    );
    tally.refuse(
      "hostVisible",
      hostileFlags(),
      (v) => source.tryAllocateSegment(64, { hostVisible: v as boolean }),
      { snapshot },
    );
    tally.refuse(
      "byteLength",
      hostileNumbers(),
      (v) => source.tryAllocateSegment(v as number),
      { snapshot },
    );
    const segment = source.tryAllocateSegment(64, { resizable: true })!;
    tally.refuse(
      "resize byteLength",
      hostileNumbers(),
      (v) => source.tryResizeSegment(segment, v as number),
      { snapshot },
    );
    source.freeSegment(segment);
    assertRefused("free twice", () => source.freeSegment(segment), {
      snapshot,
      error: DoubleFreeError,
    });
    assert.equal(source.reservedBytes, 0);
  });
});

describe("SystemAllocator, HostSegmentSource, ProfiledMemoryReporter options", () => {
  it("refuse a device that is not a Device, a bad reporter or log", () => {
    const tally = new HostileTally();
    const notDevice = [...hostileObjectsBut("undefined"), {
      name: '"cpu"',
      value: "cpu",
    }];
    tally.refuse(
      "SystemAllocator device",
      notDevice,
      (v) => new SystemAllocator({ device: v as Device }),
    );
    tally.refuse(
      "HostSegmentSource device",
      notDevice,
      (v) => new HostSegmentSource({ device: v as Device }),
    );
    tally.refuse(
      "SystemAllocator reporter",
      hostileObjectsBut("undefined", "{}", "[]", "trap proxy"),
      (v) => new SystemAllocator({ reporter: v as ProfiledMemoryReporter }),
    );
    tally.refuse(
      "ProfiledMemoryReporter options",
      hostileObjectsBut("undefined", "{}", "[]", "trap proxy", "() => {}"),
      (v) => new ProfiledMemoryReporter(v as object),
    );
    tally.refuse(
      "ProfiledMemoryReporter log",
      hostileObjectsBut("undefined", "() => {}").concat([{
        name: "5",
        value: 5,
      }]),
      (v) => new ProfiledMemoryReporter({ log: v as () => void }),
    );
    assert.ok(
      new SystemAllocator({ device: Device.cpu() }).device.equals?.(
        Device.cpu(),
      ) ?? true,
    );
    assert.ok(tally.calls > 40);
  });
});

// ---------------------------------------------------------------------------
// Model: random alloc / free / resize / realloc / grow / view on every memory
// kind and placement; every live block keeps its byte pattern, alignment and
// length; the stats equal a recount; a refused call changes nothing; all is
// returned at the end.

type MemoryKind = "plain" | "resizable" | "wasm" | "sab" | "shared-wasm";
type Op =
  | { k: "alloc"; n: number; align?: number }
  | { k: "free"; i: number }
  | { k: "resize"; i: number; n: number }
  | { k: "realloc"; i: number; n: number }
  | { k: "grow"; n: number }
  | { k: "stale"; i: number }
  | { k: "edge"; i: number; d: number }
  | { k: "largest" };

const sizeArb = fc.oneof(
  fc.integer({ min: 0, max: 200 }),
  fc.integer({ min: 0, max: 20_000 }),
  fc.constantFrom(
    63,
    64,
    65,
    16383,
    16384,
    16385,
    65535,
    65536,
    150_000,
    300_000,
  ),
);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      k: fc.constant("alloc" as const),
      n: sizeArb,
      align: fc.option(fc.constantFrom(8, 16, 128, 1024, 4096), {
        nil: undefined,
        freq: 3,
      }),
    }, { requiredKeys: ["k", "n"] }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ k: fc.constant("free" as const), i: fc.nat() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant("resize" as const),
      i: fc.nat(),
      n: sizeArb,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant("realloc" as const),
      i: fc.nat(),
      n: sizeArb,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("grow" as const),
      n: fc.integer({ min: 0, max: 70_000 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant("stale" as const), i: fc.nat() }),
  },
  {
    // Resize to exactly the block plus its free next neighbour, give or take.
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant("edge" as const),
      i: fc.nat(),
      d: fc.constantFrom(-64, -1, 0, 1, 64, 65),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ k: "largest" as const }) },
);

function makeHeap(kind: MemoryKind, placement: CpuHeapPlacement): CpuHeap {
  const initial = 65536, max = 4 * 65536;
  switch (kind) {
    case "plain":
      return new CpuHeap(new ArrayBuffer(initial), { placement });
    case "resizable":
      return new CpuHeap(new ArrayBuffer(initial, { maxByteLength: max }), {
        placement,
        maxByteLength: max,
      });
    case "sab":
      return new CpuHeap(
        new SharedArrayBuffer(initial, { maxByteLength: max }),
        { placement, maxByteLength: max },
      );
    case "wasm":
      // Its maximum is below the heap's: the last growth fails inside.
      return new CpuHeap(new WebAssembly.Memory({ initial: 1, maximum: 3 }), {
        placement,
        maxByteLength: max,
      });
    case "shared-wasm":
      return new CpuHeap(
        new WebAssembly.Memory({ initial: 1, maximum: 4, shared: true }),
        { placement, maxByteLength: max },
      );
  }
}

interface Live {
  at: number;
  n: number;
  align: number;
  id: number;
}

function checkAll(heap: CpuHeap, live: Live[], freed: Set<number>): void {
  heap.checkIntegrity();
  let requested = 0, allocated = 0;
  const spans: [number, number][] = [];
  for (const b of live) {
    assert.equal(
      b.at % b.align,
      0,
      `block at ${b.at} lost its alignment ${b.align}`,
    );
    assert.equal(b.at % heap.alignment, 0);
    assert.ok(heap.owns(b.at));
    const usable = heap.usableByteLength(b.at);
    assert.ok(
      usable >= Math.max(b.n, 1) &&
        usable - b.n <= heap.alignment + (b.n === 0 ? 0 : 0),
    );
    assert.equal(heap.view(b.at, Uint8Array).length, b.n);
    checkPattern(heap.bytes(b.at, b.n), b.id);
    requested += b.n;
    allocated += usable;
    spans.push([b.at, b.at + usable]);
  }
  spans.sort((x, y) => x[0] - y[0]);
  for (let i = 1; i < spans.length; i++) {
    assert.ok(spans[i - 1][1] <= spans[i][0], "two live blocks overlap");
  }
  const s = heap.stats();
  assert.equal(s.allocations.current, live.length);
  assert.equal(s.requestedBytes.current, requested);
  assert.equal(s.allocatedBytes.current, allocated);
  assert.equal(heap.allocatedBytes, allocated);
  assert.equal(heap.freeBytes, heap.byteLength - allocated);
  assert.ok(s.allocations.peak >= live.length);
  assert.ok(s.requestedBytes.peak >= requested);
  assert.ok(s.allocatedBytes.peak >= allocated);
  for (const v of [s.requestedBytes, s.allocatedBytes, s.allocations]) {
    assert.equal(v.allocated - v.freed, v.current);
  }
  const blocks = heap.snapshot();
  assert.equal(blocks.filter((b) => !b.free).length, live.length);
  assert.equal(blocks.filter((b) => b.free).length, s.freeRegions);
  const largest = Math.max(
    0,
    ...blocks.filter((b) => b.free).map((b) => b.byteLength),
  );
  assert.equal(heap.largestFreeBytes, largest);
  const top = Math.max(0, ...spans.map((x) => x[1] - heap.byteOffset));
  assert.ok(s.highWaterBytes >= top);
  for (const at of freed) {
    if (!live.some((b) => b.at === at)) assert.equal(heap.owns(at), false);
  }
}

function runModel(
  kind: MemoryKind,
  placement: CpuHeapPlacement,
  ops: Op[],
): void {
  const heap = makeHeap(kind, placement);
  const live: Live[] = [];
  const freed = new Set<number>();
  let id = 1;
  const refusedSame = (
    f: () => unknown,
    error: abstract new (...a: never[]) => Error,
  ) => {
    const before = state(heap);
    assert.throws(f, error);
    assert.deepStrictEqual(state(heap), before);
  };
  for (const op of ops) {
    const pick = (i: number) => live[i % live.length];
    switch (op.k) {
      case "alloc": {
        const before = state(heap);
        const at = heap.tryAlloc(op.n, op.align);
        if (at === undefined) {
          assert.deepStrictEqual(
            state(heap),
            before,
            "a refused alloc changed the heap",
          );
          // No false out-of-memory: a refused request could not surely fit
          // (one granule at least, plus the alignment's slack).
          const need = Math.max(op.n, 1) +
            Math.max(0, (op.align ?? 0) - heap.alignment);
          assert.ok(
            need > heap.largestFreeBytes,
            `refused ${op.n} bytes aligned to ${op.align} with ${heap.largestFreeBytes} free in one region`,
          );
          break;
        }
        const b = {
          at,
          n: op.n,
          align: Math.max(op.align ?? 1, heap.alignment),
          id: id++,
        };
        writePattern(heap.bytes(at, op.n), b.id);
        live.push(b);
        freed.delete(at);
        break;
      }
      case "free": {
        if (live.length === 0) break;
        const b = pick(op.i);
        heap.free(b.at);
        live.splice(live.indexOf(b), 1);
        freed.add(b.at);
        refusedSame(() => heap.free(b.at), DoubleFreeError);
        break;
      }
      case "resize": {
        if (live.length === 0) break;
        const b = pick(op.i);
        const before = state(heap);
        if (heap.resizeInPlace(b.at, op.n)) {
          const keep = Math.min(b.n, op.n);
          checkPattern(heap.bytes(b.at, keep), b.id);
          b.n = op.n;
          writePattern(heap.bytes(b.at, b.n), b.id);
        } else {
          assert.deepStrictEqual(
            state(heap),
            before,
            "a refused resize changed the heap",
          );
        }
        break;
      }
      case "realloc": {
        if (live.length === 0) break;
        const b = pick(op.i);
        const before = state(heap);
        let to: number;
        try {
          to = heap.realloc(b.at, op.n);
        } catch (e) {
          assert.ok(e instanceof OutOfMemoryError, String(e));
          const after = state(heap) as { growCount: number };
          // Growth may have happened before the refusal; else nothing changed.
          if (after.growCount === (before as { growCount: number }).growCount) {
            assert.deepStrictEqual(
              after,
              before,
              "a refused realloc changed the heap",
            );
          }
          break;
        }
        const keep = Math.min(b.n, op.n);
        checkPattern(heap.bytes(to, keep), b.id);
        if (to !== b.at) freed.add(b.at);
        b.at = to;
        b.n = op.n;
        writePattern(heap.bytes(b.at, b.n), b.id);
        break;
      }
      case "grow": {
        const had = heap.byteLength;
        const grew = heap.grow(op.n);
        if (grew) assert.ok(heap.byteLength >= had + op.n);
        else assert.equal(heap.byteLength, had);
        assert.ok(heap.byteLength <= heap.maxByteLength);
        break;
      }
      case "largest": {
        // No false out-of-memory: the largest free region fits a request of
        // its length, whatever the placement.
        const n = heap.largestFreeBytes;
        if (n === 0) break;
        const at = heap.tryAlloc(n);
        assert.notEqual(
          at,
          undefined,
          `a request of largestFreeBytes ${n} failed`,
        );
        const b = { at: at!, n, align: heap.alignment, id: id++ };
        writePattern(heap.bytes(b.at, n), b.id);
        live.push(b);
        freed.delete(b.at);
        break;
      }
      case "edge": {
        if (live.length === 0) break;
        const b = pick(op.i);
        const blocks = heap.snapshot();
        const k = blocks.findIndex((x) => x.byteOffset === b.at);
        const next = blocks[k + 1];
        const room = blocks[k].byteLength + (next?.free ? next.byteLength : 0);
        const n = Math.max(0, room + op.d);
        const before = state(heap);
        if (heap.resizeInPlace(b.at, n)) {
          assert.ok(
            n <= room,
            `resized ${n} bytes in place with ${room} of room`,
          );
          checkPattern(heap.bytes(b.at, Math.min(b.n, n)), b.id);
          b.n = n;
          writePattern(heap.bytes(b.at, b.n), b.id);
        } else {
          assert.ok(
            n > room,
            `refused ${n} bytes in place with ${room} of room`,
          );
          assert.deepStrictEqual(state(heap), before);
        }
        break;
      }
      case "stale": {
        const at = [...freed][op.i % Math.max(1, freed.size)];
        if (at === undefined || heap.owns(at)) break;
        refusedSame(() => heap.free(at), DoubleFreeError);
        refusedSame(() => heap.view(at, Uint8Array), UseAfterFreeError);
        refusedSame(() => heap.realloc(at, 8), UseAfterFreeError);
        if (live.length > 0) {
          const b = pick(op.i);
          refusedSame(
            () => heap.free(b.at + heap.alignment / 2),
            DoubleFreeError,
          );
          refusedSame(
            () => heap.bytes(b.at, heap.usableByteLength(b.at) + 1),
            InvalidArgumentError,
          );
        }
        break;
      }
    }
    checkAll(heap, live, freed);
  }
  for (const b of live.splice(0)) heap.free(b.at);
  checkAll(heap, live, freed);
  assert.equal(heap.allocatedBytes, 0);
  assert.equal(heap.requestedBytes, 0);
  assert.equal(heap.freeRegionCount, heap.byteLength > 0 ? 1 : 0);
  assert.equal(heap.largestFreeBytes, heap.byteLength);
  heap.dispose();
}

describe("CpuHeap model: patterns, alignment, stats recount, refusals change nothing", () => {
  const kinds: MemoryKind[] = [
    "plain",
    "resizable",
    "wasm",
    "sab",
    "shared-wasm",
  ];
  for (const kind of kinds) {
    for (const placement of PLACEMENTS) {
      it(`${kind}, ${placement}`, () => {
        fc.assert(
          fc.property(
            fc.array(opArb, { maxLength: 60 }),
            (ops) => runModel(kind, placement, ops),
          ),
          { numRuns: Math.max(20, Math.floor(modelRuns(1000) / 25)) },
        );
      });
    }
  }
});

// CpuAllocator model: adds heaps up to maxByteLength, zero-fills, trims; each
// live pointer keeps its pattern and alignment, stats equal a recount, an
// out-of-memory refusal changes nothing, everything returns at the end.
type AOp =
  | { k: "alloc"; n: number; align?: number }
  | { k: "free"; i: number }
  | { k: "trim" };

const aopArb: fc.Arbitrary<AOp> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      k: fc.constant("alloc" as const),
      n: fc.oneof(
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 0, max: 40_000 }),
      ),
      align: fc.option(fc.constantFrom(16, 256, 8192), {
        nil: undefined,
        freq: 3,
      }),
    }, { requiredKeys: ["k", "n"] }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ k: fc.constant("free" as const), i: fc.nat() }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("trim" as const) }) },
);

describe("CpuAllocator model: heaps added and trimmed, patterns and stats kept", () => {
  for (const placement of PLACEMENTS) {
    it(placement, () => {
      fc.assert(
        fc.property(fc.array(aopArb, { maxLength: 50 }), (ops) => {
          const reporter = new ProfiledMemoryReporter();
          const allocator = new CpuAllocator({
            byteLength: 16384,
            maxByteLength: 131072,
            placement,
            zeroFill: true,
            reporter,
          });
          const live: {
            ptr: ReturnType<CpuAllocator["allocate"]>;
            id: number;
            align: number;
          }[] = [];
          let id = 1;
          for (const op of ops) {
            if (op.k === "alloc") {
              const before = [
                allocator.stats(),
                allocator.reservedBytes,
                allocator.heaps.length,
              ];
              let ptr;
              try {
                ptr = allocator.allocate(op.n, op.align);
              } catch (e) {
                assert.ok(e instanceof OutOfMemoryError, String(e));
                assert.deepStrictEqual(
                  [
                    allocator.stats(),
                    allocator.reservedBytes,
                    allocator.heaps.length,
                  ],
                  before,
                );
                continue;
              }
              const bytes = allocator.view(ptr, Uint8Array);
              assert.equal(bytes.length, op.n);
              assert.ok(bytes.every((x) => x === 0), "zeroFill left old bytes");
              writePattern(bytes, id);
              live.push({ ptr, id: id++, align: op.align ?? 64 });
            } else if (op.k === "free") {
              if (live.length === 0) continue;
              const [b] = live.splice(op.i % live.length, 1);
              b.ptr.release();
              assert.throws(
                () => allocator.rawDeallocate(b.ptr.releaseContext()!),
                AllotError,
              );
            } else {
              allocator.trim();
            }
            assert.ok(allocator.reservedBytes <= allocator.maxByteLength);
            let bytes = 0;
            for (const b of live) {
              if (b.ptr.byteLength > 0) {
                assert.equal(b.ptr.byteOffset % b.align, 0);
              }
              checkPattern(allocator.view(b.ptr, Uint8Array), b.id);
              bytes += b.ptr.byteLength;
            }
            assert.equal(allocator.allocatedBytes, bytes);
            assert.equal(reporter.bytes.current, bytes);
            let count = 0;
            for (const heap of allocator.heaps) {
              heap.checkIntegrity();
              count += heap.allocationCount;
            }
            assert.equal(
              count,
              live.filter((b) => b.ptr.byteLength > 0).length,
            );
          }
          for (const b of live) b.ptr.release();
          assert.equal(allocator.allocatedBytes, 0);
          allocator.trim();
          assert.equal(allocator.heaps.length, 1);
          assert.equal(allocator.heap.allocatedBytes, 0);
          assert.equal(
            allocator.heap.largestFreeBytes,
            allocator.heap.byteLength,
          );
        }),
        { numRuns: Math.max(20, Math.floor(modelRuns(1000) / 10)) },
      );
    });
  }
});
