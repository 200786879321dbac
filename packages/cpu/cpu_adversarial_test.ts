/**
 * Adversarial tests of `CpuHeap` from the public API outward, for each of its
 * three placements (`"good-fit"`, `"compact"`, `"first-fit"`): hostile option
 * values and arguments (a typed error stating the value, nothing changed),
 * frees of foreign, stale and disguised offsets, growth, aligned requests and
 * requests around the 1,024-granule boundary of first-fit's small index,
 * strict mode's junk fill, and byte patterns of live blocks over long random
 * runs (fast-check model, `checkIntegrity()` after each step).
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
  UseAfterFreeError,
} from "@allot/core";
import { CpuHeap, type CpuHeapPlacement } from "./heap.ts";
import { CpuAllocator } from "./cpu_allocator.ts";
import { SystemAllocator } from "./system_allocator.ts";
import { HostSegmentSource } from "./host_segment_source.ts";
import {
  type Hostile,
  hostileNumbers,
  HostileTally,
  trapObject,
} from "../core/_test_hostile.ts";
import { modelRuns } from "../core/_test_faults.ts";

const PLACEMENTS: CpuHeapPlacement[] = ["good-fit", "compact", "first-fit"];
// First-fit keeps free blocks under this many granules in its small index.
const SMALL_GRANULES = 1024;

const tally = new HostileTally();
const { refuse } = tally;
const numbers = hostileNumbers();
// `undefined` (and `null`, through `??`) mean the default for options.
const optionNumbers = numbers.filter((h) =>
  h.name !== "undefined" && h.name !== "null"
);

function state(heap: CpuHeap): string {
  return JSON.stringify([heap.stats(), heap.snapshot(), heap.byteLength]);
}

/** A heap of each placement with live blocks of both index kinds, holes. */
function setup(placement: CpuHeapPlacement) {
  const heap = new CpuHeap(1 << 20, { placement, maxByteLength: 1 << 21 });
  const g = heap.alignment;
  const small = heap.alloc(100);
  const hole = heap.alloc(3 * g);
  const large = heap.alloc(SMALL_GRANULES * g + 1); // 1,025 granules
  const tail = heap.alloc(5000, 4096);
  heap.free(hole);
  const snapshot = () => state(heap);
  return { heap, small, hole, large, tail, snapshot };
}

describe("CpuHeap adversarial", () => {
  after(() => {
    console.log(
      `cpu adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("CpuHeap refuses hostile placements with a typed error that states the value and the three placements", () => {
    const placements: Hostile[] = [
      { name: '"First-Fit"', value: "First-Fit" },
      { name: '"first-fit "', value: "first-fit " },
      { name: '"firstfit"', value: "firstfit" },
      { name: '"best-fit"', value: "best-fit" },
      { name: '""', value: "" },
      { name: "0", value: 0 },
      { name: "true", value: true },
      { name: "8n", value: 8n },
      { name: "Symbol()", value: Symbol("first-fit") },
      { name: 'new String("first-fit")', value: new String("first-fit") },
      { name: "toString look-alike", value: { toString: () => "first-fit" } },
      { name: '["first-fit"]', value: ["first-fit"] },
      { name: "trap proxy", value: trapObject() },
    ];
    refuse(
      "new CpuHeap(n, { placement })",
      placements,
      (v) => new CpuHeap(4096, { placement: v as CpuHeapPlacement }),
      { error: InvalidArgumentError },
    );
    for (const value of ["First-Fit", "best-fit", ""]) {
      assert.throws(
        () => new CpuHeap(4096, { placement: value as CpuHeapPlacement }),
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          e.message.includes(JSON.stringify(value)) &&
          /"good-fit"/.test(e.message) && /"compact"/.test(e.message) &&
          /"first-fit"/.test(e.message),
      );
    }
    // A refused heap claims nothing: the same memory takes a heap after it.
    const memory = new ArrayBuffer(4096);
    assert.throws(() =>
      new CpuHeap(memory, { placement: "First-Fit" as CpuHeapPlacement })
    );
    new CpuHeap(memory, { placement: "first-fit" }).dispose();
  });

  it("CpuHeap refuses hostile alignments, offsets, lengths and growth limits under every placement", () => {
    for (const placement of PLACEMENTS) {
      for (const key of ["alignment", "byteOffset", "byteLength"]) {
        refuse(
          `new CpuHeap(memory, { ${key} }) (${placement})`,
          optionNumbers,
          (v) => new CpuHeap(new ArrayBuffer(1 << 16), { placement, [key]: v }),
        );
      }
      refuse(
        `new CpuHeap(n, { maxByteLength }) (${placement})`,
        [
          ...optionNumbers,
          { name: "below byteLength", value: 4096 },
          { name: "unaligned below byteLength", value: 8191 },
        ],
        (v) => new CpuHeap(8192, { placement, maxByteLength: v as number }),
      );
      refuse(
        `new CpuHeap(n, { alignment }) out of range (${placement})`,
        [0, 1, 2, 4, 3, 24, 96, 1 << 17, 2 ** 31].map((value) => ({
          name: String(value),
          value,
        })),
        (v) => new CpuHeap(1 << 16, { placement, alignment: v as number }),
        { error: InvalidArgumentError },
      );
      // A plain ArrayBuffer cannot grow: a larger limit is refused.
      refuse(
        `new CpuHeap(ArrayBuffer, { maxByteLength }) (${placement})`,
        [{ name: "2x", value: 1 << 17 }],
        (v) =>
          new CpuHeap(new ArrayBuffer(1 << 16), {
            placement,
            maxByteLength: v as number,
          }),
        { error: InvalidArgumentError },
      );
      assert.throws(
        () => new CpuHeap(1 << 16, { placement, alignment: 96 }),
        (e: unknown) =>
          e instanceof InvalidArgumentError && /96/.test(e.message),
      );
    }
  });

  it("cpu constructors refuse boolean options that are not booleans", () => {
    const flags: Hostile[] = [
      { name: "1", value: 1 },
      { name: "0", value: 0 },
      { name: '"false"', value: "false" },
      { name: '"true"', value: "true" },
      { name: "null", value: null },
      { name: "{}", value: {} },
      { name: "new Boolean(false)", value: new Boolean(false) },
      { name: "trap proxy", value: trapObject() },
    ];
    const cases: [string, string[], (o: object) => unknown][] = [
      [
        "new CpuHeap",
        ["mobile", "shared", "strict"],
        (o) => new CpuHeap(4096, o),
      ],
      ["new CpuAllocator", [
        "mobile",
        "shared",
        "strict",
        "zeroFill",
        "junkFill",
      ], (o) => new CpuAllocator({ byteLength: 4096, ...o })],
      [
        "new SystemAllocator",
        ["shared", "strict", "junkFill"],
        (o) => new SystemAllocator(o),
      ],
      ["new HostSegmentSource", ["shared"], (o) => new HostSegmentSource(o)],
    ];
    for (const [name, keys, make] of cases) {
      for (const key of keys) {
        refuse(`${name}({ ${key} })`, flags, (v) => make({ [key]: v }), {
          error: InvalidArgumentError,
        });
        make({ [key]: true });
        make({ [key]: false });
      }
    }
    assert.throws(
      () => new CpuHeap(4096, { strict: 1 as unknown as boolean }),
      (e: unknown) =>
        e instanceof InvalidArgumentError && /strict/.test(e.message) &&
        /boolean/.test(e.message) && / 1$/.test(e.message),
    );
  });

  it("CpuHeap entry points refuse hostile values and change nothing, under every placement", () => {
    for (const placement of PLACEMENTS) {
      const { heap, small, snapshot } = setup(placement);
      const opts = { snapshot };
      const at = (name: string) => `${name} (${placement})`;
      refuse(at("alloc(byteLength)"), numbers, (v) => heap.alloc(v as number), {
        ...opts,
        error: InvalidArgumentError,
      });
      refuse(
        at("tryAlloc(byteLength)"),
        numbers,
        (v) => heap.tryAlloc(v as number),
        { ...opts, error: InvalidArgumentError },
      );
      refuse(
        at("alloc(64, alignment)"),
        [
          ...numbers.filter((h) => h.name !== "undefined"),
          ...[0, 3, 24, 1 << 17, 2 ** 31, 2 ** 32].map((value) => ({
            name: String(value),
            value,
          })),
        ],
        (v) => heap.alloc(64, v as number),
        { ...opts, error: InvalidArgumentError },
      );
      refuse(at("free(offset)"), numbers, (v) => heap.free(v as number), opts);
      refuse(
        at("realloc(at, byteLength)"),
        numbers,
        (v) => heap.realloc(small, v as number),
        opts,
      );
      refuse(
        at("realloc(offset, 8)"),
        numbers,
        (v) => heap.realloc(v as number, 8),
        opts,
      );
      refuse(
        at("resizeInPlace(at, byteLength)"),
        numbers,
        (v) => heap.resizeInPlace(small, v as number),
        opts,
      );
      refuse(
        at("grow(byteLength)"),
        numbers,
        (v) => heap.grow(v as number),
        opts,
      );
      refuse(
        at("view(offset)"),
        numbers,
        (v) => heap.view(v as number, Uint8Array),
        opts,
      );
      refuse(
        at("bytes(at, byteLength)"),
        numbers,
        (v) => heap.bytes(small, v as number),
        opts,
      );
      refuse(
        at("usableByteLength(offset)"),
        numbers,
        (v) => heap.usableByteLength(v as number),
        opts,
      );
      // Requests past the growth limit: out of memory, nothing changed.
      refuse(
        at("alloc(too large)"),
        [
          { name: "2 MiB", value: 1 << 21 },
          { name: "2^31", value: 2 ** 31 },
          { name: "2^32 - 1", value: 2 ** 32 - 1 },
        ],
        (v) => heap.alloc(v as number),
        {
          snapshot: () => {
            const s = JSON.parse(snapshot());
            s[0].outOfMemoryCount = 0; // counted, the one change allowed
            return s;
          },
          error: OutOfMemoryError,
        },
      );
      heap.checkIntegrity();
    }
  });

  it("CpuHeap.free() refuses foreign, stale and disguised offsets and changes nothing, under every placement", () => {
    for (const placement of PLACEMENTS) {
      const { heap, small, hole, large, tail, snapshot } = setup(placement);
      const g = heap.alignment;
      const other = new CpuHeap(1 << 16, { placement });
      const otherAt = other.alloc(64);
      other.alloc(64);
      const offsets: Hostile[] = [
        { name: "freed (stale)", value: hole },
        { name: "inside a small block", value: small + g },
        { name: "inside a large block", value: large + SMALL_GRANULES * g },
        { name: "one byte in", value: small + 1 },
        {
          name: "last byte of a block",
          value: large + heap.usableByteLength(large) - 1,
        },
        { name: "free tail", value: tail + heap.usableByteLength(tail) },
        { name: "heap end", value: heap.byteOffset + heap.byteLength },
        { name: "growth limit", value: heap.maxByteLength },
        { name: "2^32 - 64", value: 2 ** 32 - 64 },
        { name: "2^32 + small", value: 2 ** 32 + small },
        { name: "2^31 + small", value: 2 ** 31 + small },
        { name: "-small - 64", value: -small - 64 },
        { name: "other heap's live offset", value: otherAt + 128 },
        { name: "new Number(small)", value: new Number(small) },
        { name: "String(small)", value: String(small) },
        { name: "BigInt(small)", value: BigInt(small) },
      ];
      for (
        const [name, call] of [
          ["free", (v: unknown) => heap.free(v as number)],
          ["realloc", (v: unknown) => heap.realloc(v as number, 64)],
          [
            "resizeInPlace",
            (v: unknown) => heap.resizeInPlace(v as number, 64),
          ],
          [
            "usableByteLength",
            (v: unknown) => heap.usableByteLength(v as number),
          ],
          ["view", (v: unknown) => heap.view(v as number, Uint8Array)],
        ] as const
      ) {
        refuse(`${name}(foreign/stale offset) (${placement})`, offsets, call, {
          snapshot,
        });
      }
      for (const h of offsets) {
        assert.equal(heap.owns(h.value as number), false);
      }
      // The typed classes: a stale or disguised offset is a double free.
      assert.throws(() => heap.free(hole), DoubleFreeError);
      assert.throws(() => heap.free(small + g), DoubleFreeError);
      assert.throws(() => heap.view(hole, Uint8Array), UseAfterFreeError);
      // After a merge the stale offset lies inside a larger free block.
      heap.free(small);
      assert.throws(() => heap.free(small), DoubleFreeError);
      assert.throws(() => heap.free(hole), DoubleFreeError);
      heap.checkIntegrity();
      other.dispose();
      heap.dispose();
    }
  });

  it("CpuHeap strict mode junk-fills freed blocks of every size and checks itself, under every placement", () => {
    for (const placement of PLACEMENTS) {
      const heap = new CpuHeap(1 << 18, {
        placement,
        strict: true,
        maxByteLength: 1 << 22,
      });
      const g = heap.alignment;
      const sizes = [1, g, 255 * g, 1023 * g, 1024 * g, 1025 * g, 3000 * g];
      const offsets = sizes.map((n) => heap.alloc(n));
      offsets.forEach((at, i) => heap.bytes(at, sizes[i]).fill(0x11));
      for (let i = 0; i < offsets.length; i += 2) {
        const stale = new Uint32Array(
          heap.buffer,
          offsets[i],
          heap.usableByteLength(offsets[i]) / 4,
        );
        heap.free(offsets[i]);
        assert.ok(
          stale.every((w) => w === 0x7fedbeef),
          `${placement}: freed ${sizes[i]} bytes not junk-filled`,
        );
      }
      // Neighbours kept their bytes.
      for (let i = 1; i < offsets.length; i += 2) {
        assert.ok(heap.bytes(offsets[i], sizes[i]).every((b) => b === 0x11));
      }
      assert.throws(() => heap.free(offsets[0]), DoubleFreeError);
      // A shrink in place gives its tail back junk-filled; a moving realloc
      // junk-fills the old block.
      const big = offsets[5];
      const tail = new Uint32Array(heap.buffer, big + 8 * g, 8 * g / 4);
      assert.equal(heap.resizeInPlace(big, 8 * g), true);
      assert.ok(tail.every((w) => w === 0x7fedbeef), `${placement}: shrink`);
      assert.ok(heap.bytes(big, 8 * g).every((b) => b === 0x11));
      const blocker = heap.alloc(g); // lies right after big's block or not
      const old = new Uint32Array(heap.buffer, offsets[1], g / 4);
      const moved = heap.realloc(offsets[1], 4000 * g);
      if (moved !== offsets[1]) {
        assert.ok(old.every((w) => w === 0x7fedbeef), `${placement}: realloc`);
      }
      assert.ok(heap.bytes(moved, g).every((b) => b === 0x11));
      heap.free(blocker);
      heap.checkIntegrity();
    }
  });
});

describe("CpuHeap growth under every placement", () => {
  it("CpuHeap over a WebAssembly.Memory grows under each placement, keeps every live byte and its first-fit order", () => {
    for (const placement of PLACEMENTS) {
      const memory = new WebAssembly.Memory({ initial: 1, maximum: 256 });
      const heap = new CpuHeap(memory, {
        placement,
        maxByteLength: 256 * 65536,
      });
      const g = heap.alignment;
      const live: Block[] = [];
      let seed = 1;
      const generation = heap.generation;
      for (let i = 0; i < 300; i++) {
        // Sizes around 1,024 granules and tiny ones, some aligned.
        const granules = [1, 3, 255, 1023, 1024, 1025, 40][i % 7];
        const length = granules * g - (i % 3);
        const alignment = i % 5 === 0 ? 4096 : undefined;
        const at = heap.alloc(length, alignment);
        if (alignment !== undefined) assert.equal(at % alignment, 0);
        const block = { at, length, alignment: alignment ?? g, seed: seed++ };
        write(heap, block);
        live.push(block);
        if (i % 3 === 2) {
          const [gone] = live.splice((i * 7) % live.length, 1);
          verify(heap, gone);
          heap.free(gone.at);
        }
      }
      assert.ok(heap.generation > generation, `${placement} did not grow`);
      assert.equal(heap.buffer, memory.buffer);
      for (const block of live) verify(heap, block);
      heap.checkIntegrity();
      if (placement === "first-fit") {
        const lowest = lowestFit(heap, 100 * g);
        if (lowest !== undefined) assert.equal(heap.alloc(100 * g), lowest);
      }
      heap.dispose();
    }
  });
});

// ---------------------------------------------------------------------------
// Model: long random runs with growth, alignments, boundary sizes, hostile
// frees and byte patterns.

type Op =
  | { kind: "alloc"; granules: number; delta: number; alignment?: number }
  | { kind: "free"; pick: number }
  | { kind: "realloc"; pick: number; granules: number; delta: number }
  | { kind: "grow"; granules: number }
  | { kind: "hostileFree"; pick: number; how: number };

// Sizes in granules: the boundaries of first-fit's small index (1,024), of
// compact's small classes (256), of the size classes, and log-uniform ones.
const granulesArb = fc.oneof(
  fc.constantFrom(
    1,
    2,
    31,
    32,
    33,
    255,
    256,
    257,
    1022,
    1023,
    1024,
    1025,
    1026,
    2047,
    2048,
    4096,
  ),
  fc.integer({ min: 0, max: 13 }).chain((bits) =>
    fc.integer({ min: 1 << bits, max: (2 << bits) - 1 })
  ),
);
const deltaArb = fc.constantFrom(-1, 0, 0, 1); // bytes off a whole granule

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("alloc" as const),
      granules: granulesArb,
      delta: deltaArb,
      alignment: fc.option(fc.constantFrom(8, 64, 128, 4096, 65536), {
        nil: undefined,
        freq: 3,
      }),
    }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("free" as const),
      pick: fc.nat(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("realloc" as const),
      pick: fc.nat(),
      granules: granulesArb,
      delta: deltaArb,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("grow" as const),
      granules: fc.integer({ min: 0, max: 3000 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("hostileFree" as const),
      pick: fc.nat(),
      how: fc.nat(5),
    }),
  },
);

interface Block {
  at: number;
  length: number;
  alignment: number;
  seed: number;
}

function pattern(block: Block, i: number): number {
  return (block.seed + i * 7 + (i >>> 8)) & 255;
}

function write(heap: CpuHeap, block: Block): void {
  const bytes = heap.view(block.at, Uint8Array);
  assert.equal(bytes.length, block.length);
  for (let i = 0; i < bytes.length; i++) bytes[i] = pattern(block, i);
}

function verify(heap: CpuHeap, block: Block, length = block.length): void {
  const bytes = heap.bytes(block.at, length);
  for (let i = 0; i < length; i++) {
    if (bytes[i] !== pattern(block, i)) {
      assert.fail(
        `byte ${i} of the ${block.length}-byte block at ${block.at} changed`,
      );
    }
  }
}

function lowestFit(heap: CpuHeap, bytes: number): number | undefined {
  return heap.snapshot().find((b) => b.free && b.byteLength >= bytes)
    ?.byteOffset;
}

function runModel(
  heap: CpuHeap,
  ops: Op[],
  strict: boolean,
  seen: { grew: boolean; junk: number; oracle: number },
): void {
  const g = heap.alignment;
  const live: Block[] = [];
  const freed: number[] = [];
  let seed = 1;
  for (const op of ops) {
    if (op.kind === "alloc") {
      const length = Math.max(0, op.granules * g + op.delta);
      const units = Math.max(1, Math.ceil(length / g));
      const lowest = op.alignment === undefined || op.alignment <= g
        ? lowestFit(heap, units * g)
        : undefined;
      const before = heap.stats().growCount;
      let at: number | undefined;
      try {
        at = heap.alloc(length, op.alignment);
      } catch (e) {
        assert.ok(e instanceof OutOfMemoryError, String(e));
        continue;
      }
      if (
        heap.placement === "first-fit" && units < SMALL_GRANULES &&
        lowest !== undefined && heap.stats().growCount === before
      ) {
        seen.oracle++;
        assert.equal(at, lowest, `first-fit put ${length} B at ${at}`);
      }
      const alignment = Math.max(op.alignment ?? g, g);
      assert.equal(at % alignment, 0, `${at} not aligned to ${alignment}`);
      const block = { at, length, alignment, seed: seed++ };
      write(heap, block);
      live.push(block);
    } else if (op.kind === "free" || op.kind === "realloc") {
      if (live.length === 0) continue;
      const i = op.pick % live.length;
      const block = live[i];
      verify(heap, block);
      if (op.kind === "free") {
        const usable = heap.usableByteLength(block.at);
        heap.free(block.at);
        live.splice(i, 1);
        freed.push(block.at);
        if (strict) {
          const words = new Uint32Array(heap.buffer, block.at, usable / 4);
          assert.ok(words.every((w) => w === 0x7fedbeef), "junk fill");
          seen.junk++;
        }
      } else {
        const length = Math.max(0, op.granules * g + op.delta);
        try {
          const at = heap.realloc(block.at, length);
          const kept = Math.min(length, block.length);
          const moved = { ...block, at };
          verify(heap, moved, kept);
          if (at !== block.at) freed.push(block.at);
          block.at = at;
          block.length = length;
          block.alignment = g;
          write(heap, block);
        } catch (e) {
          assert.ok(e instanceof OutOfMemoryError, String(e));
          verify(heap, block);
        }
      }
    } else if (op.kind === "grow") {
      const before = heap.byteLength;
      const grew = heap.grow(op.granules * g);
      if (grew) assert.equal(heap.byteLength, before + op.granules * g);
      else assert.equal(heap.byteLength, before);
    } else {
      // A hostile free: stale, disguised or foreign. Refused, nothing changed.
      const block = live.length > 0 ? live[op.pick % live.length] : undefined;
      const stale = freed.find((f) => !live.some((b) => b.at === f));
      const candidates = [
        stale,
        block && block.at + g,
        block && block.at + heap.usableByteLength(block.at) - g,
        block && block.at + 1,
        heap.byteOffset + heap.byteLength + g * op.pick,
        block && block.at + 2 ** 32,
      ];
      const offset = candidates[op.how];
      if (
        offset === undefined || offset === 0 ||
        live.some((b) => b.at === offset)
      ) continue;
      const before = state(heap);
      assert.throws(
        () => heap.free(offset),
        (e: unknown) =>
          e instanceof DoubleFreeError || e instanceof InvalidArgumentError,
      );
      assert.equal(state(heap), before, `free(${offset}) changed the heap`);
    }
    heap.checkIntegrity();
    assert.equal(heap.allocationCount, live.length);
  }
  seen.grew ||= heap.stats().growCount > 0;
  for (const block of live) verify(heap, block);
  for (const block of live) heap.free(block.at);
  heap.checkIntegrity();
  assert.equal(heap.allocatedBytes, 0);
  assert.equal(heap.freeRegionCount, 1);
  assert.equal(heap.largestFreeBytes, heap.byteLength);
}

describe("CpuHeap adversarial model", () => {
  it("CpuHeap keeps live bytes, alignment, first-fit's lowest-fit rule and its invariants over random runs with growth, boundary sizes and hostile frees", () => {
    const seen = { grew: false, junk: 0, oracle: 0 };
    fc.assert(
      fc.property(
        fc.constantFrom(...PLACEMENTS, "first-fit" as const),
        fc.constantFrom(16, 64),
        fc.boolean(),
        fc.array(opArb, { minLength: 20, maxLength: 120 }),
        (placement, alignment, strict, ops) => {
          const heap = new CpuHeap(1 << 16, {
            placement,
            alignment,
            strict,
            maxByteLength: 1 << 23,
          });
          try {
            runModel(heap, ops, strict, seen);
          } finally {
            heap.dispose();
          }
        },
      ),
      { numRuns: modelRuns(300) },
    );
    assert.ok(seen.grew, "no run grew the heap");
    assert.ok(seen.junk > 0, "no strict free was checked");
    assert.ok(seen.oracle > 0, "no first-fit placement was checked");
  });
});
