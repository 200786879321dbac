// The caching defaults of the seventh session from the outside (review 6):
// 256-byte granules (roundSize, hostile sizes) and "a miss while nothing
// held is free takes a segment of just the request", in a fast-check model
// over a backed mock source: every live block carries a byte pattern through
// allocations, frees, emptyCache, failing and throwing sources and
// CachingGroup give-backs with endStep() marks; blocks sit on 256-byte
// granules, the miss rule holds at every miss, the group's held bytes equal
// its members' reserved bytes and the sources' live bytes, and everything
// goes back at the end. CachingGroup.endStep() refuses nothing and breaks
// nothing when called at odd times.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { assertDisjoint, modelRuns } from "../core/_test_faults.ts";
import {
  AllotError,
  InvalidArgumentError,
  type MockMemory,
  MockSegmentSource,
  OutOfMemoryError,
} from "@allot/core";
import { CachingAllocator } from "./caching_allocator.ts";
import type { CachedBlock } from "./cached_block.ts";
import { CachingGroup } from "./caching_group.ts";

const KiB = 1024, MiB = 2 ** 20;

/** The bytes of a block the model writes and checks: its first and last
 * 64, and every 61st between (live ranges are also checked disjoint). */
function* probes(n: number): Generator<number> {
  for (let j = 0; j < n; j++) {
    if (j < 64 || j >= n - 64 || j % 61 === 0) yield j;
    else j = Math.min(n - 65, j + 60 - (j % 61));
  }
}

describe("caching defaults (review 6)", () => {
  it("roundSize: 256-byte granules by default; hostile sizes are refused", () => {
    const pool = new CachingAllocator(new MockSegmentSource());
    assert.equal(pool.roundSize(0), 256);
    assert.equal(pool.roundSize(1), 256);
    assert.equal(pool.roundSize(256), 256);
    assert.equal(pool.roundSize(257), 512);
    assert.equal(pool.roundSize(-0), 256);
    for (
      const bad of [NaN, -1, 1.5, Infinity, 2 ** 53 + 2, "256", null, {}, 1n]
    ) {
      assert.throws(
        () => pool.roundSize(bad as number),
        InvalidArgumentError,
        String(bad),
      );
      assert.throws(
        () => pool.allocate(bad as number),
        InvalidArgumentError,
        String(bad),
      );
    }
    assert.equal(pool.reservedBytes, 0);
  });

  it("CachingGroup.endStep(): at odd times (empty group, many in a row, from a source's free, after a member left) it changes no count", () => {
    const group = new CachingGroup();
    for (let i = 0; i < 100; i++) group.endStep();
    assert.equal(group.heldBytes, 0);
    const source = new MockSegmentSource();
    const a = new CachingAllocator(source, { group });
    const freeSegment = source.freeSegment.bind(source);
    source.freeSegment = (segment) => {
      group.endStep(); // re-entrant mark
      freeSegment(segment);
    };
    a.allocate(4 * KiB).release();
    a.emptyCache();
    group.endStep();
    assert.equal(group.heldBytes, 0);
    assert.equal(source.reservedBytes, 0);
    group.delete(a);
    group.endStep();
    assert.equal(group.size, 0);
  });

  it("model: byte patterns survive; blocks on 256-byte granules; a miss while nothing held is free takes just the request; the group's counts add up; everything goes back", () => {
    type Op =
      | { op: "alloc"; m: number; size: number }
      | { op: "free"; i: number }
      | { op: "freeAll"; m: number }
      | { op: "empty"; m: number }
      | { op: "step" }
      | { op: "fail"; m: number; size: number; throws: boolean };
    const M = 3;
    const size = fc.oneof(
      { weight: 4, arbitrary: fc.integer({ min: 0, max: 2 * KiB }) },
      { weight: 2, arbitrary: fc.integer({ min: 1, max: 256 * KiB }) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 * MiB }) },
    );
    const m = fc.nat(M - 1);
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 8,
        arbitrary: fc.record({ op: fc.constant("alloc"), m, size }),
      },
      {
        weight: 6,
        arbitrary: fc.record({ op: fc.constant("free"), i: fc.nat() }),
      },
      { weight: 1, arbitrary: fc.record({ op: fc.constant("freeAll"), m }) },
      { weight: 1, arbitrary: fc.record({ op: fc.constant("empty"), m }) },
      { weight: 1, arbitrary: fc.constant({ op: "step" }) },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("fail"),
          m,
          size,
          throws: fc.boolean(),
        }),
      },
    ) as fc.Arbitrary<Op>;
    let ownMisses = 0, givenBack = 0;
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120, size: "max" }), (ops) => {
        const group = new CachingGroup();
        const sources = Array.from(
          { length: M },
          () => new MockSegmentSource({ backed: true }),
        );
        const pools = sources.map((s) => new CachingAllocator(s, { group }));
        const live: { b: CachedBlock<MockMemory>; m: number; fill: number }[] =
          [];
        let fill = 1;
        const check = () => {
          let held = 0;
          for (let i = 0; i < M; i++) {
            pools[i].validate();
            held += pools[i].reservedBytes;
            assert.equal(pools[i].reservedBytes, sources[i].reservedBytes);
          }
          assert.equal(group.heldBytes, held);
          for (const { b, fill } of live) {
            const bytes = b.memory.bytes!;
            for (const j of probes(b.byteLength)) {
              if (bytes[b.byteOffset + j] !== ((fill + j) & 0xff)) {
                throw new Error(`block at ${b.address} lost byte ${j}`);
              }
            }
            assert.equal(b.blockByteLength % 256, 0);
          }
          assertDisjoint(
            live.map(({ b }) =>
              [
                b.memory,
                b.byteOffset,
                b.byteOffset + b.blockByteLength,
              ] as const
            ),
          );
        };
        const take = (i: number, n: number) => {
          const pool = pools[i];
          const nothingFree = pool.reservedBytes ===
            pool.memoryStats().activeBytes.all.current;
          const segments = sources[i].allocationCount;
          const b = pool.allocate(n);
          if (sources[i].allocationCount > segments && nothingFree) {
            // a miss while nothing held was free: just the request
            const seg = pool.snapshot().segments.find((s) =>
              s.blocks.some((x) => x.address === b.address)
            )!;
            assert.equal(seg.byteLength, pool.roundSize(n));
            ownMisses++;
          }
          const f = fill++ & 0xff;
          const bytes = b.memory.bytes!;
          for (const j of probes(n)) bytes[b.byteOffset + j] = (f + j) & 0xff;
          live.push({ b, m: i, fill: f });
        };
        for (const o of ops) {
          if (o.op === "alloc") take(o.m, o.size);
          else if (o.op === "fail") {
            const source = sources[o.m];
            if (o.throws) source.throwNext();
            else source.failNext();
            try {
              take(o.m, o.size);
            } catch (error) {
              assert.ok(error instanceof AllotError, String(error));
              assert.ok(
                error instanceof OutOfMemoryError || o.throws,
                String(error),
              );
            }
            // (a hit used no segment: the armed fault still waits; spend it)
            try {
              const spare = source.tryAllocateSegment(256);
              if (spare !== undefined) source.freeSegment(spare);
            } catch {
              // the armed throw
            }
          } else if (o.op === "free") {
            if (live.length === 0) continue;
            live.splice(o.i % live.length, 1)[0].b.release();
          } else if (o.op === "freeAll") {
            for (let i = live.length - 1; i >= 0; i--) {
              if (live[i].m === o.m) live.splice(i, 1)[0].b.release();
            }
          } else if (o.op === "empty") pools[o.m].emptyCache();
          else group.endStep();
          check();
        }
        givenBack += group.givenBackSegments;
        for (const { b } of live) b.release();
        for (let i = 0; i < M; i++) {
          pools[i].emptyCache();
          assert.equal(pools[i].allocatedBytes, 0);
          assert.equal(sources[i].reservedBytes, 0);
        }
        assert.equal(group.heldBytes, 0);
      }),
      { numRuns: modelRuns(100) },
    );
    assert.ok(ownMisses > 0);
    assert.ok(givenBack > 0, "the runs reached the group's give-backs");
  });
});
