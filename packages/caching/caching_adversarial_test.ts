/**
 * Adversarial tests of `@allot/caching` from the public API outward: every
 * entry point that takes a size, an id, a handle, a stream, a tag or options
 * gets the shared hostile-value table and must refuse each value with a
 * typed error, leaving the allocator's stats and live blocks as they were.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  InvalidArgumentError,
  ManualStream,
  MockSegmentSource,
} from "@allot/core";
import {
  CachingAllocator,
  CachingAllocatorAdapter,
  expandRoundupPower2Divisions,
  roundSize,
  StepPlannedPool,
} from "./mod.ts";
import {
  assertRefused,
  hostileFlags,
  hostileHandles,
  hostileNumbers,
  hostileObjects,
  HostileTally,
} from "../core/_test_hostile.ts";
import {
  attempt,
  FaultyFence,
  FaultySegmentSource,
} from "../core/_test_faults.ts";

const tally = new HostileTally();
const numbers = hostileNumbers();

const { refuse } = tally;

function one(label: string, call: () => unknown, snapshot: () => unknown) {
  assertRefused(label, call, { snapshot });
  tally.add(label, { calls: 1 });
}

/** A caching allocator with two live blocks, and its observable state. */
function setup() {
  const caching = new CachingAllocator(new MockSegmentSource());
  const live = [caching.allocate(1000), caching.allocate(5000)];
  const id = caching.allocateId(700);
  const state = () => ({
    stats: caching.memoryStats(),
    allocated: caching.allocatedBytes,
    reserved: caching.reservedBytes,
    pending: caching.pendingFreeCount,
    fraction: caching.memoryFraction,
    live: live.map((b) => [b.released, b.byteOffset, b.stream]),
    id: [caching.blockByteOffset(id), caching.blockByteLength(id)],
  });
  return { caching, live, id, state };
}

/** A released handle of `caching`. */
function staleBlock(caching: CachingAllocator) {
  const block = caching.allocate(64);
  block.release();
  return block;
}

describe("@allot/caching adversarial", () => {
  after(() => {
    console.log(
      `caching adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("roundSize() refuses hostile sizes", () => {
    refuse("roundSize(byteLength)", numbers, (v) => roundSize(v as number));
  });

  it("expandRoundupPower2Divisions() refuses hostile lists and entries", () => {
    refuse(
      "expandRoundupPower2Divisions([entry])",
      numbers.filter((h) => !["[8]", "new Number(8)", "8n"].includes(h.name))
        .map((h) => ({ name: `[${h.name}]`, value: [h.value] })),
      (v) => expandRoundupPower2Divisions(v as number[]),
    );
  });

  it("CachingAllocator constructor refuses hostile sources and options", () => {
    refuse(
      "new CachingAllocator(source)",
      hostileObjects(),
      (v) => new CachingAllocator(v as MockSegmentSource),
    );
    refuse(
      "new CachingAllocator(source, options)",
      hostileObjects().filter((h) =>
        !["undefined", "{}", "[]", "() => {}"].includes(h.name)
      ),
      (v) => new CachingAllocator(new MockSegmentSource(), v as object),
    );
    for (
      const key of [
        "minBlockByteLength",
        "smallRequestMaxByteLength",
        "smallSegmentByteLength",
        "largeSegmentByteLength",
        "maxSplitByteLength",
        "memoryFraction",
      ]
    ) {
      refuse(
        `new CachingAllocator({ ${key} })`,
        // null, like undefined, means the default (`??`)
        numbers.filter((h) =>
          h.name !== "undefined" && h.name !== "null" &&
          !(key === "maxSplitByteLength" && h.name === "Infinity") && // no limit
          !(key === "memoryFraction" && h.name === "0.5")
        ),
        (v) => new CachingAllocator(new MockSegmentSource(), { [key]: v }),
      );
    }
  });

  it("CachingAllocator constructor refuses non-boolean flags (strict, expandableSegments, recordHistory)", () => {
    // Truthy look-alikes must not switch a mode on, nor falsy ones off.
    const flags = hostileFlags();
    for (const key of ["strict", "expandableSegments"]) {
      refuse(
        `new CachingAllocator({ ${key} })`,
        flags,
        (v) => new CachingAllocator(new MockSegmentSource(), { [key]: v }),
        { error: InvalidArgumentError },
      );
    }
    refuse(
      "new CachingAllocator({ recordHistory })",
      // null means the default (`??`); an object is recorder options
      flags.filter((h) => h.name !== "null" && typeof h.value !== "object"),
      (v) =>
        new CachingAllocator(new MockSegmentSource(), {
          recordHistory: v as boolean,
        }),
      { error: InvalidArgumentError },
    );
    for (const value of [false, true]) {
      const a = new CachingAllocator(new MockSegmentSource(), {
        strict: value,
        expandableSegments: value,
        recordHistory: value,
      });
      a.free(a.allocate(64));
    }
  });

  it("CachingAllocator.allocate() refuses hostile sizes and options, changing nothing", () => {
    const { caching, state } = setup();
    refuse(
      "allocate(byteLength)",
      numbers,
      (v) => caching.allocate(v as number),
      {
        snapshot: state,
      },
    );
    refuse(
      "allocate(8, options)",
      hostileObjects().filter((h) =>
        !["undefined", "{}", "[]", "() => {}"].includes(h.name)
      ),
      (v) => caching.allocate(8, v as object),
      { snapshot: state },
    );
    refuse(
      "allocate(8, { stream })",
      hostileObjects().filter((h) => h.name !== "undefined"),
      (v) => caching.allocate(8, { stream: v as ManualStream }),
      { snapshot: state },
    );
    refuse(
      "allocate(8, { tag })",
      hostileObjects().filter((h) =>
        h.name !== "undefined" && h.name !== '"abc"'
      ),
      (v) => caching.allocate(8, { tag: v as string }),
      { snapshot: state },
    );
    refuse(
      "allocateId(byteLength)",
      numbers,
      (v) => caching.allocateId(v as number),
      { snapshot: state },
    );
    caching.validate();
  });

  it("CachingAllocator id API refuses hostile, stale and unknown ids", () => {
    const { caching, state } = setup();
    const stale = caching.allocateId(300);
    caching.freeById(stale);
    const ids = [
      ...numbers,
      { name: "stale id", value: stale },
      { name: "never issued id", value: 123456 },
    ];
    for (
      const m of [
        "blockByteOffset",
        "blockByteLength",
        "blockMemory",
        "freeById",
      ] as const
    ) {
      refuse(`${m}(id)`, ids, (v) => caching[m](v as number), {
        snapshot: state,
      });
    }
    caching.validate();
  });

  it("CachingAllocator.free() and recordStream() refuse foreign, stale and look-alike handles", () => {
    const { caching, live, state } = setup();
    const other = new CachingAllocator(new MockSegmentSource());
    const handles = hostileHandles({
      otherInstance: () => other.allocate(64),
      stale: () => staleBlock(caching),
      lookalike: () => ({ ...live[0], released: false, byteLength: 1000 }),
    });
    refuse("free(block)", handles, (v) => caching.free(v as never), {
      snapshot: state,
    });
    refuse(
      "recordStream(block, stream)",
      handles,
      (v) => caching.recordStream(v as never, new ManualStream()),
      { snapshot: state },
    );
    refuse(
      "recordStream(live, stream)",
      hostileObjects().filter((h) => h.name !== "undefined"),
      (v) => caching.recordStream(live[0], v as ManualStream),
      { snapshot: state },
    );
    refuse(
      "CachedBlock.recordStream(stream)",
      hostileObjects().filter((h) => h.name !== "undefined"),
      (v) => live[1].recordStream(v as ManualStream),
      { snapshot: state },
    );
    const stale = staleBlock(caching);
    one("CachedBlock.release() twice", () => stale.release(), state);
    one("CachedBlock.memory of a released block", () => stale.memory, state);
    one(
      "CachedBlock.byteOffset of a released block",
      () => stale.byteOffset,
      state,
    );
    caching.validate();
    other.validate();
  });

  it("CachingAllocator settings refuse hostile values", () => {
    const { caching, state } = setup();
    refuse(
      "setMemoryFraction(fraction)",
      [
        ...numbers.filter((h) => h.name !== "0.5"),
        { name: "1.0001", value: 1.0001 },
        { name: "-0.1", value: -0.1 },
      ],
      (v) => caching.setMemoryFraction(v as number),
      { snapshot: state },
    );
    refuse(
      "roundSize method(byteLength)",
      numbers,
      (v) => caching.roundSize(v as number),
      { snapshot: state },
    );
    refuse(
      "withTag(tag, fn)",
      hostileObjects().filter((h) => h.name !== '"abc"'),
      (v) => caching.withTag(v as string, () => 1),
      { snapshot: state },
    );
    refuse(
      "withTag(tag, fn) with a hostile fn",
      hostileObjects().filter((h) => h.name !== "() => {}"),
      (v) => caching.withTag("t", v as () => number),
      { snapshot: state },
    );
    refuse(
      "memorySummary(options)",
      hostileObjects().filter((h) =>
        !["undefined", "{}", "[]", "() => {}"].includes(h.name)
      ),
      (v) => caching.memorySummary(v as object),
      { snapshot: state },
    );
    refuse(
      "recordHistory(options)",
      hostileObjects().filter((h) =>
        !["undefined", "{}", "[]", "() => {}"].includes(h.name)
      ),
      (v) => caching.recordHistory(v as object),
      { snapshot: state },
    );
  });

  it("CachingAllocatorAdapter refuses hostile sizes, contexts and collaborators", () => {
    const { caching, state } = setup();
    const adapter = new CachingAllocatorAdapter(caching);
    const other = new CachingAllocator(new MockSegmentSource());
    refuse(
      "new CachingAllocatorAdapter(caching)",
      hostileObjects(),
      (v) => new CachingAllocatorAdapter(v as CachingAllocator),
    );
    refuse(
      "new CachingAllocatorAdapter(caching, stream)",
      hostileObjects().filter((h) => h.name !== "undefined"),
      (v) => new CachingAllocatorAdapter(caching, v as ManualStream),
      { snapshot: state },
    );
    refuse(
      "adapter.allocate(byteLength)",
      numbers,
      (v) => adapter.allocate(v as number),
      { snapshot: state },
    );
    refuse(
      "adapter.rawAllocate(byteLength)",
      numbers,
      (v) => adapter.rawAllocate(v as number),
      { snapshot: state },
    );
    refuse(
      "adapter.rawDeallocate(context)",
      hostileHandles({
        otherInstance: () => other.allocate(64),
        stale: () => staleBlock(caching),
      }),
      (v) => adapter.rawDeallocate(v as never),
      { snapshot: state },
    );
    assert.equal(other.memoryStats().allocation.all.current, 1);
    caching.validate();
  });

  it("StepPlannedPool refuses hostile sizes, blocks and options", () => {
    const pool = new StepPlannedPool(new MockSegmentSource());
    const other = new StepPlannedPool(new MockSegmentSource());
    const live = [pool.allocate(1000), pool.allocate(3000)];
    const state = () => ({
      live: pool.requestedBytes,
      held: pool.reservedBytes,
      peakLive: pool.peakRequestedBytes,
      segments: pool.segmentCount,
      created: pool.segmentsCreated,
      steps: pool.stepCount,
      blocks: live.map((b) => [b.byteOffset, b.byteLength]),
    });
    refuse(
      "StepPlannedPool.allocate(byteLength)",
      numbers,
      (v) => pool.allocate(v as number),
      { snapshot: state },
    );
    refuse(
      "StepPlannedPool.tryAllocate(byteLength)",
      numbers,
      (v) => pool.tryAllocate(v as number),
      { snapshot: state },
    );
    refuse(
      "StepPlannedPool.trim(target)",
      numbers.filter((h) => h.name !== "undefined"),
      (v) => pool.trim(v as number),
      { snapshot: state },
    );
    refuse(
      "StepPlannedPool.free(block)",
      hostileHandles({
        otherInstance: () => other.allocate(64),
        stale: () => {
          const b = pool.allocate(64);
          pool.free(b);
          return b;
        },
        lookalike: () => ({ ...live[0] }),
      }),
      (v) => pool.free(v as never),
      { snapshot: state },
    );
    refuse(
      "new StepPlannedPool(source)",
      hostileObjects(),
      (v) => new StepPlannedPool(v as MockSegmentSource),
    );
    refuse(
      "new StepPlannedPool({ maxHeldRatio })",
      numbers.filter((h) =>
        // null, like undefined, means the default (`??`)
        !["undefined", "null", "1.5", "2^53", "2^53+2", "1e308"].includes(
          h.name,
        )
      ),
      (v) =>
        new StepPlannedPool(new MockSegmentSource(), {
          maxHeldRatio: v as number,
        }),
    );
    pool.validate();
  });
});

describe("@allot/caching adversarial collaborators", () => {
  it("a fence whose completed check throws does not brick the allocator", () => {
    const caching = new CachingAllocator(new MockSegmentSource());
    const fence = new FaultyFence("completed-throws");
    const stream = { id: 7, fence: () => fence };
    const block = caching.allocate(4096);
    block.recordStream(stream as unknown as ManualStream);
    attempt(() => block.release());
    attempt(() => caching.allocate(4096).release());
    fence.complete();
    for (let i = 0; i < 3; i++) caching.allocate(4096).release();
    caching.validate();
  });

  for (const fault of ["throw", "short", "misaligned"] as const) {
    it(`a segment source that faults (${fault}) is refused with a typed error, changing nothing`, () => {
      const source = new FaultySegmentSource(new MockSegmentSource());
      const caching = new CachingAllocator(source);
      const live = caching.allocate(1000);
      const state = () => ({
        stats: caching.memoryStats(),
        reserved: caching.reservedBytes,
        live: live.byteOffset,
      });
      source.arm(fault);
      assertRefused(
        `allocate() with a ${fault} segment`,
        () => caching.allocate(8 << 20),
        { snapshot: state },
      );
      tally.add(`segment fault ${fault}`, { calls: 1 });
      assert.equal(source.fired.get(fault), 1);
      caching.allocate(8 << 20).release();
      caching.validate();
    });
  }
});
