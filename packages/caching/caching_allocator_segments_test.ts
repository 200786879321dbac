import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError, MockSegmentSource } from "@allot/core";
import {
  type CachedBlock,
  CachingAllocator,
  type CachingAllocatorOptions,
} from "./caching_allocator.ts";
import { modelRuns } from "../core/_test_faults.ts";
import { PYTORCH_SEGMENTS } from "./caching_options.ts";

// Model test of adaptive segment sizes (`segmentGrowthFraction`,
// `minSegmentByteLength`) and of giving whole free segments back on a miss
// (`releaseCachedAboveRatio`): every new segment has the size the rule
// names, a miss gives back exactly the whole free segments the rule asks
// for (no fewer, none more than needed; least recently used first, those
// under a quarter of the request last), under
// the ratio as the back-off moves it (the model keeps the ghosts: widened
// when a miss would have been served by a segment given back, narrowed when a
// cache's worth of them is forgotten with none hit), live blocks never
// overlap, stats equal a recount, and everything comes back.

const MiB = 2 ** 20;

type Op =
  | { kind: "alloc"; size: number }
  | { kind: "free"; index: number }
  | { kind: "emptyCache" };

const sizeArb = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 64 * 1024 }) },
  { weight: 3, arbitrary: fc.integer({ min: 64 * 1024, max: MiB }) },
  { weight: 2, arbitrary: fc.integer({ min: MiB + 1, max: 12 * MiB }) },
);

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      kind: fc.constant("alloc" as const),
      size: sizeArb,
    }),
  },
  {
    weight: 9,
    arbitrary: fc.record({
      kind: fc.constant("free" as const),
      index: fc.nat(),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "emptyCache" as const }) },
);

const optionsArb = fc.record({
  segmentGrowthFraction: fc.constantFrom(0, 1 / 128, 1 / 8, 1),
  minSegmentByteLength: fc.constantFrom(512, 4096, 100_000),
  releaseCachedAboveRatio: fc.constantFrom(1, 1.5, Infinity),
  smallRequestMaxByteLength: fc.constantFrom(256 * 1024, MiB),
  roundupPower2Divisions: fc.constantFrom(0, 4),
});

interface Live {
  block: CachedBlock<{ id: number }>;
  start: number;
  end: number;
  memory: number;
}

/** The segment size the rule names for a request of `size` rounded bytes. */
function expectedSegment(
  a: CachingAllocator<{ id: number }>,
  o: Required<typeof optionsArb extends fc.Arbitrary<infer T> ? T : never>,
  size: number,
  reserved: number,
  active: number,
): number {
  const small = size <= a.smallRequestMaxByteLength;
  const g = a.minBlockByteLength;
  let s = small
    ? a.smallSegmentByteLength
    : size < a.ownSegmentMinByteLength
    ? a.largeSegmentByteLength
    : Math.ceil(size / a.largeRoundByteLength) * a.largeRoundByteLength;
  if (
    o.segmentGrowthFraction > 0 && (small || size < a.ownSegmentMinByteLength)
  ) {
    const share = Math.ceil(reserved * o.segmentGrowthFraction / g) * g;
    const min = Math.ceil(o.minSegmentByteLength / g) * g;
    const adaptive = Math.max(min, share);
    // Its own size: a large request of more than a third of the adaptive
    // size, a small one that would leave a tail under an eighth of it.
    if (adaptive < s) {
      const own = small
        ? (adaptive - size) * 8 < adaptive
        : adaptive < 3 * size;
      s = own ? size : adaptive;
    }
  }
  // Nothing held is free: just the request.
  if (o.segmentGrowthFraction > 0 && reserved === active) s = size;
  return Math.max(s, size);
}

/**
 * Room for growing requests: the step by which `size` follows three earlier
 * misses of its pool in step (among the last 16, step at most an eighth of
 * `size`), at most the give-back ratio's share of `size`, in granules.
 */
function growthRoom(
  seen: number[],
  size: number,
  ratio: number,
  granule: number,
): number {
  const last = seen.slice(-16);
  for (let i = last.length - 1; i >= 0; i--) {
    const step = size - last[i];
    if (step <= 0 || 8 * step > size) continue;
    const older = last.slice(0, i);
    if (older.includes(size - 2 * step) && older.includes(size - 3 * step)) {
      return Math.floor(Math.min(step, (ratio - 1) * size) / granule) *
        granule;
    }
  }
  return 0;
}

function run(
  o: Required<typeof optionsArb extends fc.Arbitrary<infer T> ? T : never>,
  ops: Op[],
): void {
  const device = new MockSegmentSource({ capacityBytes: 2 ** 40 });
  const a = new CachingAllocator(device, o as CachingAllocatorOptions);
  const live: Live[] = [];
  // Last use of each whole free segment (by address): the allocator's
  // clock when it last became whole and free.
  const lastUse = new Map<number, number>();
  const check = (): void => {
    a.validate();
    const stats = a.memoryStats();
    assert.equal(stats.allocation.all.current, live.length);
    assert.equal(
      stats.allocatedBytes.all.current,
      live.reduce((s, l) => s + l.end - l.start, 0),
    );
    assert.equal(stats.reservedBytes.all.current, device.reservedBytes);
    assert.equal(stats.segment.all.current, device.liveSegmentCount);
    assert.equal(stats.numDeviceAlloc, device.allocationCount);
    assert.equal(stats.numDeviceFree, device.freeCount);
  };
  const wholeFree = () =>
    a.snapshot().segments.filter((s) =>
      s.blocks.length === 1 && s.blocks[0].state === "inactive"
    );
  // The allocator's clock: allocation requests so far.
  let clock = 0;
  // The clock at the last miss above the ratio: a whole free segment of the
  // other pool is given back only when unused since then (no thrashing
  // between the pools).
  let lastMiss = 0;
  // The back-off: the ratio in use, the ghosts (segments given back, oldest
  // first: pool and bytes), and the ghost bytes hit since the ratio last
  // widened.
  let ratio = o.releaseCachedAboveRatio;
  // The peak rule's ratio: its slack doubles each time a segment it gave
  // back is wanted again.
  let peakRatio = o.releaseCachedAboveRatio;
  // The held peak's rises that idle segments kept by the widened peak
  // ratio account for, since that ratio last changed: at the slack in use
  // times the held peak, the slack halves.
  let peakCost = 0;
  const ghosts: { pool: string; size: number; keep: number; peak: boolean }[] =
    [];
  let regretBytes = 0;
  let forgotten = 0;
  let ghostLimit = 0;
  // Cycles of misses: the most bytes active at a miss of this cycle and
  // of the last, and the most a miss of each needed.
  let cycleActive = 0, lastActive = 0, cycleNeed = 0, lastNeed = 0;
  // The most bytes reserved after a miss.
  let heldPeak = 0;
  const missed: Record<string, number[]> = { small: [], large: [] };
  for (const op of ops) {
    const wasWhole = new Set(wholeFree().map((s) => s.address));
    if (op.kind === "alloc") {
      clock++;
      const before = a.snapshot().segments;
      const size = a.roundSize(op.size);
      const pool = size <= a.smallRequestMaxByteLength ? "small" : "large";
      // The candidates: whole free segments of the request's pool, and of
      // the other pool those unused since the last miss above the ratio.
      const whole = wholeFree().filter((s) =>
        s.pool === pool || lastUse.get(s.address)! < lastMiss
      );
      const reserved = device.reservedBytes;
      const active = a.memoryStats().activeBytes.all.current;
      const made = device.allocationCount;
      const block = a.allocate(op.size);
      const entry = {
        block,
        start: block.byteOffset,
        end: block.byteOffset + block.blockByteLength,
        memory: block.memory.id,
      };
      for (const other of live) {
        assert.ok(
          other.memory !== entry.memory || other.end <= entry.start ||
            entry.end <= other.start,
          "live blocks overlap",
        );
      }
      live.push(entry);
      if (device.allocationCount > made) {
        // A miss: the whole free segments given back, then one new segment.
        assert.equal(device.allocationCount, made + 1);
        const after = new Set(a.snapshot().segments.map((s) => s.address));
        const gone = before.filter((s) => !after.has(s.address));
        const goneBytes = gone.reduce((n, s) => n + s.byteLength, 0);
        // What the miss is measured against: what it needs, or at a low
        // (needing at most a quarter of the last cycle's active peak) the
        // most a miss of the last cycle needed. A miss needing at most a
        // quarter of this cycle's active peak begins the next cycle.
        let need = active + size, atLow = false;
        if (o.releaseCachedAboveRatio !== Infinity) {
          if (4 * need <= cycleActive) {
            lastActive = cycleActive;
            lastNeed = cycleNeed;
            cycleActive = active;
            cycleNeed = need;
          } else {
            cycleActive = Math.max(cycleActive, active);
            cycleNeed = Math.max(cycleNeed, need);
          }
          atLow = 4 * need <= lastActive;
          if (atLow) need = lastNeed;
        }
        // A segment's keep is measured against the most needed lately.
        const recent = Math.max(need, cycleNeed, lastNeed);
        if (o.releaseCachedAboveRatio !== Infinity) {
          // A miss first looks for the smallest ghost that would serve it
          // (at a low, it is forgotten without regret).
          let best = -1;
          ghosts.forEach((g, i) => {
            if (
              g.pool === pool && g.size >= size &&
              (best < 0 || g.size < ghosts[best].size)
            ) best = i;
          });
          if (best >= 0 && atLow) ghosts.splice(best, 1);
          else if (best >= 0) {
            if (ghosts[best].peak) {
              peakRatio = 1 + Math.max(2 * (peakRatio - 1), 1 / 32);
              peakCost = 0;
            }
            regretBytes += ghosts[best].size;
            forgotten = 0;
            const slack = ratio - 1;
            if (regretBytes >= slack * reserved) {
              regretBytes = 0;
              ratio = Math.max(
                1 + Math.max(2 * slack, 1 / 32),
                ghosts[best].keep,
              );
            }
            ghosts.splice(best, 1);
          }
        }
        // At a low, or with nothing active, a miss does not raise the held
        // peak (the most reserved after a miss) above what the configured
        // ratio allows: whole free segments go back first, but not, within
        // the ratio, those under a quarter of the request.
        const ratioBound = ratio * need;
        let bound = ratioBound;
        if (
          o.releaseCachedAboveRatio !== Infinity && (atLow || active === 0)
        ) {
          bound = Math.min(
            bound,
            Math.max(heldPeak, o.releaseCachedAboveRatio * need) - size,
          );
        }
        // Once misses cycle, a miss whose new segment would raise the held
        // peak halves the slack, but gives back no more than keeps the peak
        // where it is.
        if (o.releaseCachedAboveRatio !== Infinity && lastNeed > 0) {
          const segment = expectedSegment(a, o, size, reserved, active);
          if (reserved + segment > heldPeak) {
            bound = Math.min(
              bound,
              Math.max((1 + (ratio - 1) / 2) * need, heldPeak - segment),
            );
          }
        }
        // A miss whose new segment would raise the held peak counts it:
        // down to the peak ratio of what it needs with it, never below what
        // keeps the peak; past the older bounds, only segments unused since
        // the previous miss above the bound go.
        const older = bound;
        let peak = false;
        // Where the peak ratio has widened: the bound the configured ratio
        // would set, and the slack at which the rule begins giving back.
        let narrow = Infinity, narrowSlack = 0;
        if (o.releaseCachedAboveRatio !== Infinity) {
          const segment = expectedSegment(a, o, size, reserved, active);
          if (reserved + segment > heldPeak) {
            const counted = Math.max(
              peakRatio * need - segment,
              heldPeak - segment,
            );
            if (counted < bound) {
              bound = counted;
              peak = true;
            }
            if (peakRatio > o.releaseCachedAboveRatio) {
              narrow = Math.max(
                o.releaseCachedAboveRatio * need - segment,
                heldPeak - segment,
              );
              if (narrow >= bound || narrow >= reserved) narrow = Infinity;
              narrowSlack = (reserved + segment) / need - 1;
            }
          }
        }
        const previousMiss = lastMiss;
        const tiny = (s: { byteLength: number }) => s.byteLength * 4 < size;
        for (const s of gone) {
          assert.ok(
            whole.some((w) => w.address === s.address),
            "not a candidate",
          );
        }
        // The order segments are given back in: least recently used first
        // (ties by address), but those under a quarter of the request last.
        const order = (
          x: { byteLength: number; address: number },
          y: { byteLength: number; address: number },
        ) =>
          (x.byteLength * 4 < size ? 1 : 0) -
            (y.byteLength * 4 < size ? 1 : 0) ||
          lastUse.get(x.address)! - lastUse.get(y.address)! ||
          x.address - y.address;
        // Requests seen growing get a step of room (see the segment size
        // below); then segments just short of the request are outgrown.
        const room = o.releaseCachedAboveRatio === Infinity ? 0 : growthRoom(
          missed[pool],
          size,
          o.releaseCachedAboveRatio,
          a.roundSize(1),
        );
        // Within a cycle (not at a low, something active, no growth), once
        // the back-off has widened the ratio, whole free segments of the
        // request's pool within 1/8 below it whose size another candidate
        // shares are kept, in the give-back order, up to twice the request;
        // others go in their place.
        const kept = new Set<number>(), skipped = new Set<number>();
        const simulated = new Set<number>();
        if (o.releaseCachedAboveRatio !== Infinity) {
          const nearOn = !atLow && active !== 0 && room === 0 &&
            ratio > o.releaseCachedAboveRatio;
          let left = reserved, near = nearOn ? 2 * size : 0;
          for (const w of [...whole].sort(order)) {
            if (left <= bound || (left <= ratioBound && tiny(w))) break;
            if (
              peak && left <= older && lastUse.get(w.address)! >= previousMiss
            ) {
              skipped.add(w.address);
            } else if (
              w.pool === pool && w.byteLength * 8 >= size * 7 &&
              w.byteLength <= near &&
              whole.some((v) =>
                v.address !== w.address && v.byteLength === w.byteLength &&
                v.pool === w.pool
              )
            ) {
              near -= w.byteLength;
              kept.add(w.address);
            } else {
              left -= w.byteLength;
              simulated.add(w.address);
            }
          }
        }
        for (const s of gone) {
          assert.ok(!kept.has(s.address), "a segment just short given back");
        }
        for (const s of gone) {
          assert.ok(!skipped.has(s.address), "a used segment given back");
        }
        if (o.releaseCachedAboveRatio !== Infinity && reserved > bound) {
          assert.deepEqual(
            new Set(gone.map((g) => g.address)),
            simulated,
            "segments given back",
          );
        }
        const others = whole.filter((w) =>
          !kept.has(w.address) && !skipped.has(w.address)
        );
        if (reserved > bound) lastMiss = clock;
        if (o.releaseCachedAboveRatio === Infinity || reserved <= bound) {
          assert.equal(gone.length, 0, "released below the bound");
        } else if (gone.length < others.length) {
          const left = reserved - goneBytes;
          const next = others.filter((w) =>
            !gone.some((g) => g.address === w.address)
          ).sort((x, y) => order(x, y))[0];
          assert.ok(
            left <= bound || (left <= ratioBound && tiny(next)),
            "released too little",
          );
        }
        if (gone.length > 0) {
          // In that order, and no more than needed.
          gone.sort(order);
          const last = gone[gone.length - 1];
          for (const w of others) {
            if (!gone.some((g) => g.address === w.address)) {
              assert.ok(order(w, last) > 0, "not in the give-back order");
            }
          }
          // The last one given back was still needed.
          assert.ok(
            reserved - goneBytes + last.byteLength > bound,
            "released more than needed",
          );
          if (tiny(last)) {
            assert.ok(
              reserved - goneBytes + last.byteLength > ratioBound,
              "a tiny segment released within the ratio",
            );
          }
        }
        if (gone.length > 0) {
          // Ghosts of the segments given back, in that order, each time
          // within the limits.
          if (reserved > ghostLimit) ghostLimit = reserved;
          let left = reserved;
          for (const s of gone) {
            // The ratio that would have kept it, against the recent peak.
            const keep = left / recent;
            left -= s.byteLength;
            ghosts.push({ pool: s.pool, size: s.byteLength, keep, peak });
            let bytes = ghosts.reduce((n, g) => n + g.size, 0);
            let dropped = false;
            while (
              ghosts.length > 256 || (bytes > ghostLimit && ghosts.length > 1)
            ) {
              const g = ghosts.shift()!;
              bytes -= g.size;
              forgotten += g.size;
              dropped = true;
            }
            // A cache's worth of ghosts forgotten with none hit: the ratio
            // narrows.
            if (dropped && forgotten >= ghostLimit) {
              forgotten = 0;
              ratio = Math.max(o.releaseCachedAboveRatio, 1 + (ratio - 1) / 2);
            }
          }
        }
        const fresh = a.snapshot().segments.find((s) =>
          !before.some((b) => b.address === s.address)
        )!;
        let expected = expectedSegment(
          a,
          o,
          size,
          reserved - goneBytes,
          active,
        );
        if (o.releaseCachedAboveRatio !== Infinity) {
          // Requests seen growing get a step of room.
          missed[pool].push(size);
          if (room > 0 && expected < size + room) {
            expected = Math.min(size + room, a.maxBlockByteLength);
          }
        }
        assert.equal(fresh.byteLength, expected, "segment size");
        if (narrow !== Infinity && device.reservedBytes > heldPeak) {
          // The idle candidates still held (unused since the previous miss
          // above the bound, not under a quarter of the request) that the
          // configured ratio would have given back: the part of the held
          // peak's rise they account for is the widened ratio's cost.
          const kept = whole.filter((w) =>
            !gone.some((g) => g.address === w.address) &&
            lastUse.get(w.address)! < previousMiss && !tiny(w)
          ).reduce((n, w) => n + w.byteLength, 0);
          const heldBack = Math.min(kept, reserved - goneBytes - narrow);
          if (heldBack > 0) {
            peakCost += Math.min(device.reservedBytes - heldPeak, heldBack);
            const slack = Math.min(peakRatio - 1, narrowSlack);
            if (peakCost >= slack * heldPeak) {
              peakCost = 0;
              peakRatio = Math.max(o.releaseCachedAboveRatio, 1 + slack / 2);
            }
          }
        }
        heldPeak = Math.max(heldPeak, device.reservedBytes);
      } else if (
        o.releaseCachedAboveRatio !== Infinity &&
        a.snapshot().segments.some((s) =>
          before.some((b) => b.address === s.address && b.pool !== s.pool)
        )
      ) {
        // A miss served by a whole free segment of the other pool, moved
        // (no device buffer made, nothing given back): it still counts in
        // the cycles of misses.
        const need = active + size;
        if (4 * need <= cycleActive) {
          lastActive = cycleActive;
          lastNeed = cycleNeed;
          cycleActive = active;
          cycleNeed = need;
        } else {
          cycleActive = Math.max(cycleActive, active);
          cycleNeed = Math.max(cycleNeed, need);
        }
      }
    } else if (op.kind === "free") {
      if (live.length === 0) continue;
      const [entry] = live.splice(op.index % live.length, 1);
      entry.block.release();
    } else {
      a.emptyCache();
    }
    for (const s of wholeFree()) {
      if (!wasWhole.has(s.address)) lastUse.set(s.address, clock);
    }
    check();
  }
  for (const entry of live) entry.block.release();
  live.length = 0;
  a.emptyCache();
  check();
  assert.equal(device.reservedBytes, 0);
  assert.equal(device.liveSegmentCount, 0);
}

/**
 * A long program in two phases, as ops: rounds of `idle` blocks taken and
 * freed, then two blocks kept (a miss whose new segment would raise the held
 * peak gives the idle segments back, and the next round wants them again: the
 * peak rule's slack widens); then steps of `per` blocks whose size grows by
 * `growth` a step, each step's blocks freed once the next step's are taken
 * (idle segments just short of the next request: the widened slack keeps
 * them, the held peak rises, and the slack narrows again).
 */
const longProgramArb: fc.Arbitrary<Op[]> = fc.record({
  rounds: fc.integer({ min: 1, max: 5 }),
  idle: fc.integer({ min: 2, max: 5 }),
  idleSize: fc.integer({ min: 100 * 1024, max: 600 * 1024 }),
  kept: fc.integer({ min: 100 * 1024, max: 300 * 1024 }),
  big: fc.integer({ min: MiB / 2, max: 2 * MiB }),
  steps: fc.integer({ min: 40, max: 80 }),
  per: fc.integer({ min: 1, max: 3 }),
  start: fc.integer({ min: MiB, max: 3 * MiB }),
  growth: fc.constantFrom(1.03, 1.05, 1.1),
}).map((g) => {
  const ops: Op[] = [];
  const ids: number[] = [];
  let next = 0;
  const alloc = (size: number) => {
    ops.push({ kind: "alloc", size: Math.round(size) });
    ids.push(next);
    return next++;
  };
  const free = (id: number) => {
    const index = ids.indexOf(id);
    ids.splice(index, 1);
    ops.push({ kind: "free", index });
  };
  alloc(MiB);
  for (let r = 0; r < g.rounds; r++) {
    const idle = Array.from({ length: g.idle }, () => alloc(g.idleSize));
    for (const id of idle) free(id);
    alloc(g.kept);
    alloc(g.big);
  }
  let previous: number[] = [];
  for (let k = 0; k < g.steps; k++) {
    const step = Array.from(
      { length: g.per },
      () => alloc(g.start * g.growth ** k),
    );
    for (const id of previous) free(id);
    previous = step;
  }
  return ops;
});

describe("CachingAllocator adaptive segments and release above ratio", () => {
  it("new segments take the adaptive size; a miss above the ratio gives back whole free segments, oldest first and those under a quarter of the request last, just enough", () => {
    fc.assert(
      fc.property(
        optionsArb,
        fc.array(opArb, { minLength: 10, maxLength: 150, size: "max" }),
        (o, ops) => run(o, ops),
      ),
      { numRuns: modelRuns() },
    );
  });

  it("a long program whose peak-rule give-backs are regretted, then whose requests drift: the same rule, the slack widened and narrowed again", () => {
    fc.assert(
      fc.property(
        fc.record({
          segmentGrowthFraction: fc.constantFrom(1 / 128, 1 / 8),
          minSegmentByteLength: fc.constantFrom(512, 4096),
          releaseCachedAboveRatio: fc.constantFrom(1, 1.05),
          smallRequestMaxByteLength: fc.constantFrom(256 * 1024, MiB),
          roundupPower2Divisions: fc.constantFrom(0, 4),
        }),
        longProgramArb,
        (o, ops) => run(o, ops),
      ),
      { numRuns: Math.max(20, modelRuns() / 10) },
    );
  });

  it("one block live at a time, sizes alternating between the pools: no device allocation after warm-up (giving back does not thrash)", () => {
    const source = new MockSegmentSource();
    const a = new CachingAllocator(source);
    const sizes = [300_000, 1000, 8 * MiB, 60_000, 2 * MiB, 200_000];
    for (const n of sizes) a.allocate(n).release();
    const warm = source.allocationCount;
    for (let i = 0; i < 600; i++) a.allocate(sizes[i % sizes.length]).release();
    assert.equal(source.allocationCount, warm);
    a.validate();
  });

  it("a large request of more than a third of the adaptive size takes a segment of its own size; a smaller one the adaptive size", () => {
    // Layer after layer of slowly growing weights, all live (MobileNet):
    // a segment of twice the request left a tail just short of the next.
    const source = new MockSegmentSource({ capacityBytes: 2 ** 40 });
    const a = new CachingAllocator(source);
    const held: CachedBlock<{ id: number }>[] = [];
    while (source.reservedBytes < 200 * MiB) held.push(a.allocate(MiB));
    // Something held is free (else a miss takes just the request).
    a.allocate(1000).release();
    const share = () => Math.ceil(source.reservedBytes / 128 / 256) * 256;
    // Under a third of the adaptive size (and above the small pool's 256
    // KiB): one segment of that size, whose rest serves the next two.
    const quarter = Math.floor(share() / 4 / 512) * 512;
    assert.ok(quarter > 256 * 1024);
    let before = source.reservedBytes;
    const made = share();
    for (let i = 0; i < 3; i++) held.push(a.allocate(quarter));
    assert.equal(source.reservedBytes - before, made);
    // Over a third: exactly the request, however many follow.
    for (const n of [0.4, 0.41, 0.41, 0.9].map((f) => share() * f)) {
      const size = Math.ceil(n / 512) * 512;
      before = source.reservedBytes;
      held.push(a.allocate(size));
      assert.equal(source.reservedBytes - before, size);
    }
    for (const b of held) b.release();
    a.emptyCache();
    assert.equal(source.reservedBytes, 0);
  });

  it("a small request that would leave a tail under an eighth of the adaptive size takes a segment of its own size", () => {
    const source = new MockSegmentSource({ capacityBytes: 2 ** 40 });
    const a = new CachingAllocator(source);
    const held: CachedBlock<{ id: number }>[] = [];
    while (source.reservedBytes < 8 * MiB) held.push(a.allocate(MiB));
    // Something held is free (else a miss takes just the request).
    a.allocate(1000).release();
    const share = Math.ceil(source.reservedBytes / 128 / 256) * 256;
    // A tail of an eighth or more: the adaptive size.
    let before = source.reservedBytes;
    const base = Math.floor((share - share / 8) / 256) * 256;
    held.push(a.allocate(base));
    assert.equal(source.reservedBytes - before, share);
    // Under an eighth (of the share now): the request's own size.
    const now = Math.ceil(source.reservedBytes / 128 / 256) * 256;
    const size = Math.ceil((now - now / 8 + 1) / 256) * 256;
    before = source.reservedBytes;
    held.push(a.allocate(size));
    assert.equal(source.reservedBytes - before, size);
    for (const b of held) b.release();
    a.emptyCache();
    assert.equal(source.reservedBytes, 0);
  });

  it("a miss while nothing held is free takes a segment of just the request; once something held is free, the adaptive size", () => {
    const source = new MockSegmentSource({ capacityBytes: 2 ** 40 });
    const a = new CachingAllocator(source);
    assert.equal(a.minBlockByteLength, 256); // the default granule
    const held: CachedBlock<{ id: number }>[] = [];
    // Growing, everything live: each miss holds exactly its rounded request
    // (an exact-size pool's bytes), however small.
    for (const n of [1, 100, 300, 5000, 70_000, 300_000, 12 * MiB + 1]) {
      const before = source.reservedBytes;
      held.push(a.allocate(n));
      assert.equal(source.reservedBytes - before, a.roundSize(n), `${n}`);
      assert.equal(source.reservedBytes, a.allocatedBytes);
    }
    // A free block anywhere: the next miss takes the adaptive size (its
    // tail can take requests that the free blocks do not fit).
    held.shift()!.release();
    const share = Math.max(
      4096,
      Math.ceil(source.reservedBytes / 128 / 256) * 256,
    );
    const before = source.reservedBytes;
    held.push(a.allocate(1000));
    assert.equal(source.reservedBytes - before, share);
    for (const b of held) b.release();
    a.emptyCache();
    assert.equal(source.reservedBytes, 0);
    // PyTorch's fixed sizes keep their 2 MiB first segment.
    const fixed = new CachingAllocator(source, PYTORCH_SEGMENTS);
    using _f = fixed.allocate(1000);
    assert.equal(source.reservedBytes, 2 * MiB);
  });

  it("refuses out-of-range options with a typed error", () => {
    const source = new MockSegmentSource({ capacityBytes: 64 * MiB });
    for (
      const bad of [
        { segmentGrowthFraction: -0.1 },
        { segmentGrowthFraction: 1.5 },
        { segmentGrowthFraction: NaN },
        { minSegmentByteLength: 0 },
        { minSegmentByteLength: 1.5 },
        { releaseCachedAboveRatio: 0.9 },
        { releaseCachedAboveRatio: NaN },
      ]
    ) {
      assert.throws(
        () => new CachingAllocator(source, bad as CachingAllocatorOptions),
        InvalidArgumentError,
        JSON.stringify(bad),
      );
    }
    assert.equal(source.reservedBytes, 0);
  });

  it("PyTorch's fixed sizes stay reachable: segmentGrowthFraction 0 takes a 2 MiB small segment first", () => {
    const source = new MockSegmentSource({ capacityBytes: 64 * MiB });
    const fixed = new CachingAllocator(source, {
      segmentGrowthFraction: 0,
      releaseCachedAboveRatio: Infinity,
      smallRequestMaxByteLength: MiB,
    });
    using _a = fixed.allocate(1000);
    assert.equal(source.reservedBytes, 2 * MiB);
    const adaptive = new CachingAllocator(source);
    using _b = adaptive.allocate(1000);
    // Nothing held was free: just the request (1000 in 256-byte granules).
    assert.equal(source.reservedBytes, 2 * MiB + 1024);
  });
});
