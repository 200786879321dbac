import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { MockSegmentSource } from "@allot/core";
import { _GrowthRoom, GROWTH_HISTORY, MAX_STEP_SHARE } from "./_growth_room.ts";
import { CachingAllocator } from "./caching_allocator.ts";
import { modelRuns } from "../core/_test_faults.ts";

const G = 512;

/**
 * The rule as the spec states it, over a plain list of the last misses
 * (oldest first): the newest earlier miss `size - step` (0 < step <= size /
 * 8) with `size - 2 step` and `size - 3 step` older than it; room = step
 * capped, in whole granules.
 */
function oracle(seen: number[], size: number, cap: number): number {
  const last = seen.slice(-GROWTH_HISTORY);
  for (let i = last.length - 1; i >= 0; i--) {
    const step = size - last[i];
    if (step <= 0 || step > size / MAX_STEP_SHARE) continue;
    const older = last.slice(0, i);
    if (older.includes(size - 2 * step) && older.includes(size - 3 * step)) {
      return Math.max(0, Math.floor(Math.min(step, cap) / G) * G);
    }
  }
  return 0;
}

/** Misses: interleaved steady series and random sizes, in granules. */
const misses = fc.array(
  fc.oneof(
    fc.record({
      base: fc.integer({ min: 1, max: 400 }),
      step: fc.integer({ min: 1, max: 40 }),
      count: fc.integer({ min: 1, max: 8 }),
      series: fc.integer({ min: 1, max: 4 }),
    }).map(({ base, step, count, series }) => {
      const out: number[] = [];
      for (let t = 0; t < count; t++) {
        for (let k = 0; k < series; k++) out.push(base * (k + 1) + step * t);
      }
      return out;
    }),
    fc.array(fc.integer({ min: 1, max: 2000 }), { maxLength: 20 }),
  ),
  { maxLength: 12 },
).map((xs) => xs.flat().map((n) => n * G));

describe("_GrowthRoom", () => {
  it("model: room equals the rule's over interleaved growth and random sizes, capped", () => {
    fc.assert(
      fc.property(
        misses,
        fc.constantFrom(0.05, 0.1, 0.5, 0),
        (sizes, share) => {
          const room = new _GrowthRoom();
          const seen: number[] = [];
          for (const size of sizes) {
            const cap = share * size;
            const got = room.miss(size, G, cap);
            assert.equal(got, oracle(seen, size, cap), `after ${seen}`);
            assert.ok(got >= 0 && got <= cap && got % G === 0);
            seen.push(size);
          }
        },
      ),
      { numRuns: modelRuns(500) },
    );
  });

  it("steady growth gets its step from the fourth miss on; repeats and no growth get none", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 64, max: 4096 }),
        fc.integer({ min: 1, max: 8 }),
        (base, step) => {
          const room = new _GrowthRoom();
          for (let t = 0; t < 12; t++) {
            const size = (base + step * t) * G;
            const got = room.miss(size, G, size);
            assert.equal(got, t < 3 ? 0 : step * G);
          }
          const flat = new _GrowthRoom();
          for (let t = 0; t < 12; t++) {
            assert.equal(flat.miss(base * G, G, base * G), 0);
          }
        },
      ),
      { numRuns: modelRuns(200) },
    );
  });

  it("three sizes in step are not evidence enough (MobileNet's 288, 324, 360 KiB)", () => {
    const room = new _GrowthRoom();
    for (const kib of [288, 288, 864, 324, 324, 324, 360]) {
      assert.equal(room.miss(kib * 1024, G, kib * 1024), 0);
    }
    assert.equal(room.miss(396 * 1024, G, 396 * 1024), 36 * 1024);
  });
});

describe("CachingAllocator: room for growing requests", () => {
  /**
   * Four KV caches side by side, each token's blocks 512 B larger than the
   * token before, two tokens live at once; `passes` passes, all freed at a
   * pass's end. Returns the segments made after the first pass.
   */
  function kv(passes: number): number {
    const source = new MockSegmentSource({ capacityBytes: 2 ** 40 });
    const a = new CachingAllocator(source);
    let first = 0;
    for (let pass = 0; pass < passes; pass++) {
      const live: ReturnType<typeof a.allocate>[][] = [];
      for (let t = 0; t < 64; t++) {
        const now = [];
        for (let k = 0; k < 4; k++) {
          now.push(a.allocate(4096 * (1 + k / 4) + 512 * t));
        }
        for (const n of [2048, 512, 1000]) a.free(a.allocate(n));
        live.push(now);
        if (live.length > 2) { for (const b of live.shift()!) a.free(b); }
      }
      for (const l of live) for (const b of l) a.free(b);
      if (pass === 0) first = source.allocationCount;
    }
    return source.allocationCount - first;
  }

  it("a growing KV cache makes no segment after the first pass", () => {
    // Without the room: 1 (the end of the second pass, fragmented).
    assert.equal(kv(8), 0);
  });
});
