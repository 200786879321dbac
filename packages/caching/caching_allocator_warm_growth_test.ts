// Warm passes of growing requests through a default CachingAllocator: a KV
// cache grown token by token, pass after pass (each token's blocks a steady
// step larger than the token before, a few tokens live at once, temporaries
// between; everything freed at a pass's end). At a pass's start almost
// nothing is live: giving back measured against that alone returned all the
// last pass made, its next misses made it again, and the back-off, having
// regretted that give-back against almost nothing live, widened the ratio to
// keep every size the pass saw (4.06x peak live over 8 warm passes at step
// 4 KiB, 64 KiB base, where one pass holds 1.10; random caches up to 19x).
// Giving back at such a low (a miss needing at most a quarter of the last
// cycle's active peak) is measured against the most the last cycle needed,
// and a miss at a low widens nothing.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { MockSegmentSource } from "@allot/core";
import { CachingAllocator } from "./caching_allocator.ts";
import { modelRuns } from "../core/_test_faults.ts";

interface Kv {
  caches: number;
  base: number;
  step: number;
  tokens: number;
  window: number;
}

/**
 * Peak bytes held up to the end of each of `count` passes of `kv` through
 * one default allocator, device buffers made in each pass, and the peak
 * bytes live (the same every pass).
 */
function passes(
  kv: Kv,
  count: number,
): { held: number[]; made: number[]; live: number } {
  const source = new MockSegmentSource({ capacityBytes: 2 ** 42 });
  const a = new CachingAllocator(source);
  const held: number[] = [], made: number[] = [];
  let peak = 0, live = 0, peakLive = 0;
  const take = (n: number) => {
    const b = a.allocate(n);
    live += n;
    if (live > peakLive) peakLive = live;
    if (a.reservedBytes > peak) peak = a.reservedBytes;
    return b;
  };
  const give = (b: ReturnType<typeof take>) => {
    live -= b.byteLength;
    a.free(b);
  };
  for (let pass = 0; pass < count; pass++) {
    const before = source.allocationCount;
    const steps: ReturnType<typeof take>[][] = [];
    for (let t = 0; t < kv.tokens; t++) {
      const now = [];
      for (let k = 0; k < kv.caches; k++) {
        now.push(take(kv.base * (1 + k / 4) + kv.step * t));
      }
      for (const n of [kv.base / 2, kv.base / 8, 1000]) give(take(n));
      steps.push(now);
      if (steps.length > kv.window) { for (const b of steps.shift()!) give(b); }
    }
    for (const s of steps) for (const b of s) give(b);
    held.push(peak);
    made.push(source.allocationCount - before);
    a.validate();
  }
  assert.equal(live, 0);
  a.emptyCache();
  assert.equal(source.reservedBytes, 0);
  return { held, made, live: peakLive };
}

/**
 * The bound of the property below: warm passes of a random growing cache
 * hold at most this many times its peak live bytes. Not a figure a growing
 * cache reaches by design: within a pass, segments given back as the cache
 * grows past them are regretted when a later, smaller token (in the next
 * pass) could have used them, and the back-off widens for that as for any
 * program whose steps repeat (keeping every phase's segments is what makes
 * phased programs settle: `caching_allocator_phases_test.ts`). Measured over
 * random caches of this shape, 8 warm passes (`bench/growth_warm_passes.ts
 * --random=10000,99`): median 1.21x, 9 in 10 under 1.89x, 79 in 10,000
 * above 4x, none above 6x (worst 5.53x; one pass alone holds up to 2.0x);
 * the bound leaves room for 12 passes and fast-check's draws. Before the
 * low rule: 84 in 2,000 above 6x, 46 above 8x, up to 19.6x.
 */
const MAX_WARM_OVER_LIVE = 8;

const kvArb: fc.Arbitrary<Kv> = fc.record({
  caches: fc.integer({ min: 1, max: 6 }),
  base: fc.integer({ min: 4, max: 256 }).map((n) => n * 4096),
  step: fc.integer({ min: 1, max: 64 }).map((n) => n * 256),
  tokens: fc.integer({ min: 16, max: 80 }),
  window: fc.integer({ min: 1, max: 3 }),
});

describe("CachingAllocator, warm passes of a growing KV cache", () => {
  it("step 4 KiB, 64 KiB base, 4 caches: warm passes hold what one pass holds (1.1024x peak live; was 4.06x), to pass 32", () => {
    const kv = { caches: 4, base: 65536, step: 4096, tokens: 64, window: 2 };
    const { held, live } = passes(kv, 32);
    assert.ok(held[0] / live <= 1.11, `one pass ${held[0] / live}`);
    assert.ok(held[7] / live <= 1.15, `8 passes ${held[7] / live}`);
    assert.equal(held[31], held[0], "warm passes hold more than one");
  });

  it(`property: warm passes (2 to 12) of random growing caches hold at most ${MAX_WARM_OVER_LIVE}x peak live`, () => {
    fc.assert(
      fc.property(kvArb, fc.integer({ min: 2, max: 12 }), (kv, count) => {
        const { held, live } = passes(kv, count);
        const ratio = held[count - 1] / live;
        assert.ok(
          ratio <= MAX_WARM_OVER_LIVE,
          `${JSON.stringify(kv)}, ${count} passes: ${ratio.toFixed(3)}x`,
        );
      }),
      {
        numRuns: modelRuns(200),
        // Caches that held 19.6x, 12.8x and 4.06x before the low rule.
        examples: [
          [{ caches: 3, base: 49152, step: 14592, tokens: 79, window: 1 }, 8],
          [{ caches: 4, base: 40960, step: 14592, tokens: 71, window: 2 }, 8],
          [{ caches: 4, base: 65536, step: 4096, tokens: 64, window: 2 }, 12],
        ],
      },
    );
  });

  it("a low is measured against the most the last cycle needed", () => {
    // Each cycle: 8 blocks of 1 MiB (a segment each) live, then freed;
    // then, with nothing else live, two small requests of new sizes (a low:
    // the second one's miss looks for segments to give back). Lows keep the
    // 8 MiB the last cycle needed; measured against the bytes then needed,
    // the first gave all 8 back and later ones one each, which the next
    // cycle made again.
    const source = new MockSegmentSource({ capacityBytes: 2 ** 42 });
    const a = new CachingAllocator(source);
    const MiB = 2 ** 20;
    const held: number[] = [], made: number[] = [];
    for (let c = 0; c < 6; c++) {
      const before = source.allocationCount;
      const large = [];
      for (let i = 0; i < 8; i++) large.push(a.allocate(MiB));
      for (const b of large) a.free(b);
      const x = a.allocate(81920 + 8192 * c);
      const y = a.allocate(163840 + 8192 * c);
      held.push(
        a.snapshot().segments.filter((s) => s.byteLength === MiB).length,
      );
      a.free(x);
      a.free(y);
      made.push(source.allocationCount - before);
    }
    assert.deepEqual(held, [8, 8, 8, 8, 8, 8], "1 MiB segments kept");
    // After the first cycle at most the two small requests' segments.
    assert.ok(made.slice(1).every((n) => n <= 2), `made per cycle ${made}`);
  });
});
