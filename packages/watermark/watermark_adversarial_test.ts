/**
 * Adversarial tests of `@allot/watermark` from the public API outward: every
 * entry point that takes a size, a buffer, a pointer, a stream or fence, a
 * callback or options gets the shared hostile-value table and must refuse
 * each value with a typed error, leaving the allocator's stats and live
 * buffers as they were.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  InvalidArgumentError,
  ManualStream,
  MockSegmentSource,
} from "@allot/core";
import { WatermarkAllocator } from "./mod.ts";
import {
  assertRefused,
  assertRejectsAll,
  hostileFlags,
  hostileHandles,
  hostileNumbers,
  hostileObjects,
  hostileObjectsBut,
  HostileTally,
} from "../core/_test_hostile.ts";
import {
  attempt,
  FaultyFence,
  FaultySegmentSource,
} from "../core/_test_faults.ts";
import { SMALL } from "./_test_options.ts";

const KiB = 1024;
const tally = new HostileTally();
const numbers = hostileNumbers();
const objectsBut = hostileObjectsBut;

const { refuse } = tally;

/** An allocator with live private and shared buffers, and its state. */
function setup() {
  const allocator = new WatermarkAllocator(
    new MockSegmentSource({ capacityBytes: 8 << 20, backed: true }),
    SMALL,
  );
  const live = [
    allocator.allocateBuffer(100),
    allocator.allocateBuffer(5 * KiB, { pool: "shared" }),
  ];
  const state = () => ({
    stats: allocator.stats(),
    memory: allocator.memoryStats(),
    ratios: [
      allocator.highWatermarkRatio,
      allocator.lowWatermarkRatio,
      allocator.highWatermarkLimit,
    ],
    live: live.map((b) => [b.released, b.byteOffset, b.byteLength, b.shape]),
  });
  return { allocator, live, state };
}

describe("@allot/watermark adversarial", () => {
  after(() => {
    console.log(
      `watermark adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("WatermarkAllocator constructor refuses hostile sources and options", () => {
    refuse(
      "new WatermarkAllocator(source)",
      hostileObjects(),
      (v) => new WatermarkAllocator(v as MockSegmentSource),
    );
    refuse(
      "new WatermarkAllocator(source, options)",
      objectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => new WatermarkAllocator(new MockSegmentSource(), v as object),
    );
    for (
      const key of [
        "maxSmallByteLength",
        "smallHeapByteLength",
        "largeHeapByteLength",
        "largeRoundByteLength",
        "highWatermarkRatio",
      ]
    ) {
      refuse(
        `new WatermarkAllocator({ ${key} })`,
        // null, like undefined, means the default (`??`)
        numbers.filter((h) =>
          !["undefined", "null", "0.5", "1.5"].includes(h.name)
        ),
        (v) => new WatermarkAllocator(new MockSegmentSource(), { [key]: v }),
      );
    }
  });

  it("WatermarkAllocator constructor refuses non-boolean flags (strict, unifiedMemory, recordHistory)", () => {
    // Truthy look-alikes must not switch a mode on, nor falsy ones off.
    const flags = hostileFlags();
    for (const key of ["strict", "unifiedMemory"]) {
      refuse(
        `new WatermarkAllocator({ ${key} })`,
        flags,
        (v) => new WatermarkAllocator(new MockSegmentSource(), { [key]: v }),
        { error: InvalidArgumentError },
      );
    }
    refuse(
      "new WatermarkAllocator({ recordHistory })",
      // null means the default (`??`); an object is recorder options
      flags.filter((h) => h.name !== "null" && typeof h.value !== "object"),
      (v) =>
        new WatermarkAllocator(new MockSegmentSource(), {
          recordHistory: v as boolean,
        }),
      { error: InvalidArgumentError },
    );
    for (const value of [false, true]) {
      const a = new WatermarkAllocator(new MockSegmentSource(), {
        ...SMALL,
        strict: value,
        unifiedMemory: value,
        recordHistory: value,
      });
      a.free(a.allocateBuffer(64));
    }
  });

  it("allocateBuffer(), tryAllocateBuffer() and allocate() refuse hostile sizes and options", async () => {
    const { allocator, state } = setup();
    const opts = { snapshot: state };
    refuse(
      "allocateBuffer(byteLength)",
      numbers,
      (v) => allocator.allocateBuffer(v as number),
      opts,
    );
    refuse(
      "tryAllocateBuffer(byteLength)",
      numbers,
      (v) => allocator.tryAllocateBuffer(v as number),
      opts,
    );
    refuse(
      "allocate(byteLength)",
      numbers,
      (v) => allocator.allocate(v as number),
      opts,
    );
    refuse(
      "allocateBuffer(8, options)",
      objectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => allocator.allocateBuffer(8, v as object),
      opts,
    );
    refuse(
      "allocateBuffer(8, { pool })",
      [
        // null, like undefined, means the default (`??`)
        ...objectsBut("undefined", "null"),
        { name: '"scalar"', value: "scalar" },
        { name: '"Private"', value: "Private" },
      ],
      (v) => allocator.allocateBuffer(8, { pool: v as "shared" }),
      opts,
    );
    tally.add(
      "allocateBufferAsync(byteLength)",
      await assertRejectsAll(
        "allocateBufferAsync(byteLength)",
        numbers,
        (v) => allocator.allocateBufferAsync(v as number),
        opts,
      ),
    );
    refuse(
      "allocScalarBufferWithValue(value)",
      [
        ...hostileObjects(),
        { name: "2 KiB view", value: new Uint8Array(2 * KiB) },
        { name: "empty view", value: new Uint8Array(0) },
      ],
      (v) => allocator.allocScalarBufferWithValue(v as Uint8Array),
      opts,
    );
  });

  it("free(), recordEvents() and buffer.shape refuse foreign, stale and look-alike buffers", () => {
    const { allocator, live, state } = setup();
    const other = new WatermarkAllocator(new MockSegmentSource(), SMALL);
    const handles = hostileHandles({
      otherInstance: () => other.allocateBuffer(64),
      stale: () => {
        const b = allocator.allocateBuffer(64);
        b.release();
        return b;
      },
      lookalike: () => ({ ...live[0] }),
    });
    const opts = { snapshot: state };
    refuse("free(buffer)", handles, (v) => allocator.free(v as never), opts);
    refuse(
      "recordEvents([buffer], stream)",
      handles,
      (v) => allocator.recordEvents([v as never], new ManualStream()),
      opts,
    );
    refuse(
      "recordEvents(buffers, stream)",
      objectsBut("[]"),
      (v) => allocator.recordEvents(v as never, new ManualStream()),
      opts,
    );
    refuse(
      "recordEvents([live], work)",
      hostileObjects(),
      (v) => allocator.recordEvents([live[0]], v as ManualStream),
      opts,
    );
    refuse(
      "buffer.shape = shape",
      [
        ...objectsBut("[]"),
        ...numbers.filter((h) => !["[8]", "new Number(8)"].includes(h.name))
          .map((h) => ({ name: `[${h.name}]`, value: [h.value] })),
      ],
      (v) => {
        live[0].shape = v as number[];
      },
      opts,
    );
    const stale = handles.find((h) => h.name === "stale")!.value as {
      release(): void;
    };
    assertRefused("stale buffer.release()", () => stale.release(), opts);
    tally.add("stale buffer.release()", { calls: 1 });
  });

  it("copyData() refuses hostile lengths and released pointers", () => {
    const { allocator, state } = setup();
    const a = allocator.allocate(64);
    const b = allocator.allocate(64);
    const opts = { snapshot: state };
    refuse(
      "copyData(dest, src, byteLength)",
      [...numbers, { name: "65", value: 65 }],
      (v) => allocator.copyData(a, b, v as number),
      opts,
    );
    const c = allocator.allocate(64);
    c.release();
    refuse(
      "copyData(released, src, 8)",
      [{ name: "released dest", value: c }],
      (v) => allocator.copyData(v as typeof a, b, 8),
      opts,
    );
  });

  it("settings, callbacks and reports refuse hostile values", () => {
    const { allocator, state } = setup();
    const opts = { snapshot: state };
    const ratios = [
      ...numbers.filter((h) => !["0.5", "1.5"].includes(h.name)),
      { name: "-0.1", value: -0.1 },
    ];
    refuse(
      "setHighWatermarkRatio(ratio)",
      ratios,
      (v) => allocator.setHighWatermarkRatio(v as number),
      opts,
    );
    refuse(
      "setLowWatermarkRatio(ratio)",
      ratios,
      (v) => allocator.setLowWatermarkRatio(v as number),
      opts,
    );
    refuse(
      "setPerProcessMemoryFraction(fraction)",
      ratios.filter((h) => h.name !== "0.5"),
      (v) => allocator.setPerProcessMemoryFraction(v as number),
      opts,
    );
    refuse(
      "addCallback(callback)",
      objectsBut("() => {}"),
      (v) => allocator.addCallback(v as () => void),
      opts,
    );
    refuse(
      "memorySummary(options)",
      objectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => allocator.memorySummary(v as object),
      opts,
    );
    refuse(
      "recordHistory(options)",
      objectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => allocator.recordHistory(v as object),
      opts,
    );
  });
});

describe("@allot/watermark adversarial collaborators", () => {
  it("a fence whose completed check throws does not brick the allocator", () => {
    const { allocator } = setup();
    const fence = new FaultyFence("completed-throws");
    const b = allocator.allocateBuffer(100);
    allocator.recordEvents([b], fence);
    attempt(() => b.release());
    attempt(() => allocator.allocateBuffer(100).release());
    fence.complete();
    for (let i = 0; i < 3; i++) allocator.allocateBuffer(100).release();
    allocator.freeInactiveBuffers();
  });

  for (const fault of ["throw", "short", "misaligned"] as const) {
    it(`a segment source that faults (${fault}) is refused with a typed error, changing nothing`, () => {
      const source = new FaultySegmentSource(
        new MockSegmentSource({ capacityBytes: 8 << 20 }),
      );
      const allocator = new WatermarkAllocator(source, SMALL);
      const live = allocator.allocateBuffer(100);
      const state = () => ({
        stats: allocator.stats(),
        memory: allocator.memoryStats(),
        live: live.byteOffset,
      });
      source.arm(fault);
      assertRefused(
        `allocateBuffer() with a ${fault} segment`,
        () => allocator.allocateBuffer(100 * KiB),
        { snapshot: state },
      );
      assert.equal(source.fired.get(fault), 1);
      allocator.allocateBuffer(100 * KiB).release();
    });
  }
});
