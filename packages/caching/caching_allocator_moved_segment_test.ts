// Within a cycle of misses, a miss whose new segment would raise the held
// peak takes a whole free segment of the other pool (small or large) of at
// most twice the request instead: no device buffer made or given back.
// Before, a program whose phases want their blocks in different pools held
// both pools' segments at once (the recorded efficientnet-multires trace:
// the 96 x 96 passes' 216 KiB requests took new small-pool segments while
// the 128 x 128 passes' 384 KiB large-pool segments lay free; warm passes
// held 1.19x peak live and remade 13 buffers, now 1.066x and none). These
// are that program scaled down, named; the trace ceilings are in
// caching_allocator_traces_test.ts. At a low only a segment moved out of the
// pool comes home (moving nothing there ratcheted held bytes up: the third
// case).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { MockSegmentSource } from "@allot/core";
import { CachingAllocator } from "./caching_allocator.ts";
import type { CachedBlock } from "./cached_block.ts";
import type { MockMemory } from "@allot/core";

const KiB = 1024;

/**
 * Passes of a program in two rounds of three phases each: `large` large-pool
 * blocks (two kept), then six small-pool blocks of 216 KiB beside the two,
 * then two blocks of 600 KiB with little else live (a low: misses cycle).
 * A 64 KiB block stays live throughout. Per pass: peak held / peak live so
 * far and device buffers made after the first pass; and whether a large
 * segment was ever seen in the small pool.
 */
function phases(large: number, passes: number) {
  const source = new MockSegmentSource({ capacityBytes: 2 ** 42 });
  const a = new CachingAllocator(source);
  let live = 0, peakLive = 0, moved = false;
  const take = (n: number) => {
    live += n;
    if (live > peakLive) peakLive = live;
    return a.allocate(n);
  };
  const give = (bs: CachedBlock<MockMemory>[], n: number) => {
    for (const b of bs) {
      a.free(b);
      live -= n;
    }
  };
  const kept = take(64 * KiB);
  const rows: { ratio: number; madeAfterFirst: number }[] = [];
  let first = 0;
  for (let pass = 0; pass < passes; pass++) {
    for (let round = 0; round < 2; round++) {
      const big = [];
      for (let i = 0; i < 8; i++) big.push(take(large));
      give(big.slice(2), large);
      const mid = [];
      for (let i = 0; i < 6; i++) mid.push(take(216 * KiB));
      for (const s of a.snapshot().segments) {
        if (s.pool === "small" && s.byteLength === large) moved = true;
      }
      give(mid, 216 * KiB);
      give(big.slice(0, 2), large);
      give([take(600 * KiB), take(600 * KiB)], 600 * KiB);
      a.validate();
    }
    if (pass === 0) first = source.allocationCount;
    rows.push({
      ratio: a.memoryStats().reservedBytes.all.peak / peakLive,
      madeAfterFirst: source.allocationCount - first,
    });
  }
  a.free(kept);
  a.emptyCache();
  assert.equal(source.reservedBytes, 0);
  return { rows, moved };
}

describe("CachingAllocator, whole free segments moved between the pools", () => {
  it("phases that want different pools: warm passes hold no more than the first and make no buffer (was 1.55x, 4 remade)", () => {
    const { rows, moved } = phases(384 * KiB, 4);
    assert.ok(moved, "a 384 KiB large-pool segment served a 216 KiB request");
    for (const [pass, r] of rows.entries()) {
      assert.ok(
        r.ratio <= rows[0].ratio,
        `pass ${pass}: peak held ${
          r.ratio.toFixed(4)
        } x peak live, first pass ${rows[0].ratio.toFixed(4)}`,
      );
      assert.equal(r.madeAfterFirst, 0, `buffers made by pass ${pass}`);
    }
    assert.ok(rows[3].ratio < 1.3, `warm ${rows[3].ratio.toFixed(4)}`);
  });

  it("a segment more than twice the request stays in its pool", () => {
    // 448 KiB > 2 x 216 KiB: the small pool would split its rest among other
    // small requests and pin it there while the large pool wants it back.
    const { moved } = phases(448 * KiB, 3);
    assert.ok(!moved, "a 448 KiB large-pool segment moved for 216 KiB");
  });

  it("two phases, nothing live between: a segment moved out comes home at a low (settles by the 5th cycle, was 2 made a cycle to the 10th)", () => {
    // 20 blocks of 150 KiB (small pool), then 8 of 257 KiB (large pool).
    const source = new MockSegmentSource({ capacityBytes: 2 ** 42 });
    const a = new CachingAllocator(source);
    const made = [];
    for (let cycle = 0; cycle < 12; cycle++) {
      const before = source.allocationCount;
      for (const [size, count] of [[153089, 20], [263169, 8]]) {
        const live = [];
        for (let i = 0; i < count; i++) live.push(a.allocate(size));
        for (const b of live) a.free(b);
      }
      made.push(source.allocationCount - before);
    }
    // 28, 27, 20, 1, then none (the peak rule gives back an idle segment
    // in the 3rd cycle that the 4th makes again; none after it: 28, 27, 20,
    // then none before it).
    assert.deepEqual(made.slice(4), [0, 0, 0, 0, 0, 0, 0, 0], `${made}`);
    assert.ok(made[3] <= 1, `${made}`);
    // Without moves 5.2 MiB; moving nothing home at a low, 5.8 MiB.
    const peak = a.memoryStats().reservedBytes.all.peak;
    assert.ok(peak <= 4.5 * 2 ** 20, `peak held ${peak}`);
    a.validate();
  });

  it("random phased programs: moves keep the pools' stats, the source and every block consistent", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.array(fc.integer({ min: 1, max: 640 }), {
            minLength: 1,
            maxLength: 6,
          }),
          { minLength: 2, maxLength: 5 },
        ),
        fc.integer({ min: 2, max: 4 }),
        (program, passes) => {
          const source = new MockSegmentSource({ capacityBytes: 2 ** 42 });
          const a = new CachingAllocator(source, { strict: true });
          const kept = a.allocate(8 * KiB);
          let made = 0;
          for (let pass = 0; pass < passes; pass++) {
            let carried: CachedBlock<MockMemory>[] = [];
            for (const phase of program) {
              const blocks = phase.map((k) => a.allocate(k * KiB));
              for (const b of carried) a.free(b);
              // the first block of a phase lives into the next one
              carried = blocks.slice(0, 1);
              for (const b of blocks.slice(1)) a.free(b);
              const stats = a.memoryStats().reservedBytes;
              assert.equal(stats.all.current, source.reservedBytes);
              let small = 0;
              for (const s of a.snapshot().segments) {
                if (s.pool === "small") small += s.byteLength;
              }
              assert.equal(stats.smallPool.current, small);
            }
            for (const b of carried) a.free(b);
            if (pass === 0) made = source.allocationCount;
          }
          a.free(kept);
          a.emptyCache();
          assert.equal(source.reservedBytes, 0);
          return made <= source.allocationCount;
        },
      ),
      { numRuns: 200 },
    );
  });
});
