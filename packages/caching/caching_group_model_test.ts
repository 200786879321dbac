// A fast-check model of a CachingGroup of 2-3 caching allocators (one per
// "usage", each on its own mock source of one device): random allocations,
// frees, frees held by another stream's fence, fences completing,
// emptyCache() and step marks (endStep()), with phases whose sizes change so
// that misses cycle and the group gives segments back (also of members that
// hold nothing after a whole step). After every step: every allocator's invariants,
// no live blocks overlap, each allocator's stats equal a recount of its
// source, the group's held bytes equal the sum, the group never holds more
// than its bound and the bound never falls; at the end everything comes back.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { ManualStream, type MockMemory, MockSegmentSource } from "@allot/core";
import { type CachedBlock, CachingAllocator } from "./caching_allocator.ts";
import { CachingGroup } from "./caching_group.ts";
import { modelRuns } from "../core/_test_faults.ts";
import { _groupCore } from "./_caching_group.ts";

const KiB = 1024;

type Op =
  | { kind: "alloc"; pool: number; size: number }
  | { kind: "free"; index: number; stream: boolean }
  | { kind: "complete" }
  | { kind: "emptyCache"; pool: number }
  | { kind: "endStep" }
  | { kind: "phase"; pool: number; scale: number };

const opArb = (pools: number): fc.Arbitrary<Op> =>
  fc.oneof(
    {
      weight: 10,
      arbitrary: fc.record({
        kind: fc.constant("alloc" as const),
        pool: fc.nat(pools - 1),
        size: fc.integer({ min: 1, max: 600 * KiB }),
      }),
    },
    {
      weight: 9,
      arbitrary: fc.record({
        kind: fc.constant("free" as const),
        index: fc.nat(),
        stream: fc.boolean(),
      }),
    },
    { weight: 2, arbitrary: fc.constant({ kind: "complete" as const }) },
    { weight: 2, arbitrary: fc.constant({ kind: "endStep" as const }) },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant("emptyCache" as const),
        pool: fc.nat(pools - 1),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant("phase" as const),
        pool: fc.nat(pools - 1),
        scale: fc.integer({ min: 1, max: 8 }),
      }),
    },
  );

interface Live {
  pool: number;
  block: CachedBlock<MockMemory>;
}

let givenBackInAllRuns = 0;
/** Segments given back in all runs by members holding nothing after a step. */
let givenBackEmptyInAllRuns = 0;

function run(pools: number, ops: Op[]): void {
  const group = new CachingGroup();
  const sources = Array.from({ length: pools }, () => new MockSegmentSource());
  const allocators = sources.map((s) => new CachingAllocator(s, { group }));
  const stream = new ManualStream();
  const scale = new Array<number>(pools).fill(1);
  let live: Live[] = [];
  let peak = 0;
  const check = (): void => {
    let held = 0;
    for (let i = 0; i < pools; i++) {
      const a = allocators[i], s = sources[i];
      a.validate();
      const stats = a.memoryStats();
      assert.equal(stats.reservedBytes.all.current, s.reservedBytes);
      assert.equal(stats.segment.all.current, s.liveSegmentCount);
      assert.equal(stats.numDeviceAlloc, s.allocationCount);
      assert.equal(stats.numDeviceFree, s.freeCount);
      held += s.reservedBytes;
    }
    assert.equal(group.heldBytes, held);
    assert.ok(
      group.heldBytes <= group.peakHeldBytes,
      `${group.heldBytes} > bound ${group.peakHeldBytes}`,
    );
    assert.ok(group.peakHeldBytes >= peak, "the bound fell");
    peak = group.peakHeldBytes;
    // live blocks of one memory never overlap
    const byMemory = new Map<object, [number, number][]>();
    for (const l of live) {
      const r = byMemory.get(l.block.memory) ?? [];
      r.push([
        l.block.byteOffset,
        l.block.byteOffset + l.block.blockByteLength,
      ]);
      byMemory.set(l.block.memory, r);
    }
    for (const ranges of byMemory.values()) {
      ranges.sort((x, y) => x[0] - y[0]);
      for (let i = 1; i < ranges.length; i++) {
        assert.ok(ranges[i - 1][1] <= ranges[i][0], "live blocks overlap");
      }
    }
  };
  for (const op of ops) {
    const givenBefore = group.givenBackSegments;
    switch (op.kind) {
      case "alloc": {
        const size = op.size * scale[op.pool];
        live.push({ pool: op.pool, block: allocators[op.pool].allocate(size) });
        break;
      }
      case "free": {
        if (live.length === 0) break;
        const [l] = live.splice(op.index % live.length, 1);
        if (op.stream) l.block.recordStream(stream);
        allocators[l.pool].free(l.block);
        break;
      }
      case "complete":
        stream.completeAll();
        break;
      case "emptyCache":
        allocators[op.pool].emptyCache();
        break;
      case "endStep":
        group.endStep();
        break;
      case "phase":
        // a phase ends: what the pool holds live is freed, sizes change
        for (const l of live.filter((x) => x.pool === op.pool)) {
          allocators[op.pool].free(l.block);
        }
        live = live.filter((x) => x.pool !== op.pool);
        scale[op.pool] = op.scale;
        break;
    }
    // segments are given back for a member's miss only
    if (op.kind !== "alloc") assert.equal(group.givenBackSegments, givenBefore);
    else if (group.givenBackSegments > givenBefore) {
      const ghosts = _groupCore(group)!.ghosts;
      givenBackEmptyInAllRuns += ghosts.slice(
        -(group.givenBackSegments - givenBefore),
      ).filter((g) => g.step >= 0).length;
    }
    check();
  }
  givenBackInAllRuns += group.givenBackSegments;
  for (const l of live) allocators[l.pool].free(l.block);
  stream.completeAll();
  for (const a of allocators) {
    a.emptyCache();
    assert.equal(a.memoryStats().allocation.all.current, 0);
  }
  for (const s of sources) assert.equal(s.reservedBytes, 0);
  assert.equal(group.heldBytes, 0);
}

describe("CachingGroup model", () => {
  it("A group of 2-3 allocators keeps blocks apart, counts exactly, stays within its bound and gives everything back", () => {
    givenBackInAllRuns = 0;
    givenBackEmptyInAllRuns = 0;
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 3 }).chain((n) =>
          fc.tuple(
            fc.constant(n),
            fc.array(opArb(n), { minLength: 20, maxLength: 160 }),
          )
        ),
        ([n, ops]) => run(n, ops),
      ),
      { numRuns: modelRuns(300) },
    );
    // the property reached the give-back, not only the bookkeeping
    assert.ok(givenBackInAllRuns > 0, "no segment was ever given back");
    assert.ok(
      givenBackEmptyInAllRuns > 0,
      "no segment of a member holding nothing after a step was given back",
    );
  });
});
