import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type Fence,
  InvalidArgumentError,
  ManualStream,
  MockSegmentSource,
} from "@allot/core";
import {
  type CachedBlock,
  CachingAllocator,
  type CachingAllocatorOptions,
} from "./caching_allocator.ts";
import { CachingOutOfMemoryError, SegmentSourceError } from "./errors.ts";
import { modelRuns } from "../core/_test_faults.ts";

const MiB = 2 ** 20;

type Op =
  | { kind: "alloc"; size: number; stream: number }
  | { kind: "free"; index: number }
  | { kind: "record"; index: number; stream: number }
  | { kind: "complete"; stream: number; count: number }
  | { kind: "emptyCache" }
  | { kind: "fault"; throws: boolean }
  | { kind: "bad"; size: number };

const sizeArb = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 64 * 1024 }) },
  { weight: 3, arbitrary: fc.integer({ min: 64 * 1024, max: MiB }) },
  { weight: 3, arbitrary: fc.integer({ min: MiB + 1, max: 12 * MiB }) },
  { weight: 1, arbitrary: fc.integer({ min: 12 * MiB, max: 48 * MiB }) },
);

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      kind: fc.constant("alloc" as const),
      size: sizeArb,
      stream: fc.integer({ min: 0, max: 2 }),
    }),
  },
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant("free" as const),
      index: fc.nat(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("record" as const),
      index: fc.nat(),
      stream: fc.integer({ min: 0, max: 2 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("complete" as const),
      stream: fc.integer({ min: 0, max: 2 }),
      count: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "emptyCache" as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("fault" as const),
      throws: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("bad" as const),
      size: fc.constantFrom(-1, 0.5, NaN, 2 ** 60),
    }),
  },
);

const optionsArb: fc.Arbitrary<CachingAllocatorOptions> = fc.record({
  maxSplitByteLength: fc.constantFrom(Infinity, 20 * MiB, 32 * MiB),
  roundupPower2Divisions: fc.constantFrom(0, 4, [1, 2, 8]),
  memoryFraction: fc.constantFrom(1, 0.75),
  garbageCollectionThreshold: fc.constantFrom(0, 0.5),
});

interface Live {
  block: CachedBlock<{ id: number }>;
  start: number;
  end: number;
  memory: number;
  requested: number;
}
interface Waiting {
  start: number;
  end: number;
  memory: number;
  fences: Fence[];
}

function overlaps(
  a: { memory: number; start: number; end: number },
  b: { memory: number; start: number; end: number },
): boolean {
  return a.memory === b.memory && a.start < b.end && b.start < a.end;
}

/**
 * Address of the free block a request must take, by PyTorch's rule: the
 * smallest free block of the stream and pool at least as large, lowest
 * address first, unless the split limits rule it out; `undefined` when no
 * cached block serves it or when blocks wait for fences (they may return to
 * the pool first).
 */
function bestFit(
  allocator: CachingAllocator<{ id: number }>,
  byteLength: number,
  stream: number,
): number | undefined {
  let size: number;
  try {
    size = allocator.roundSize(byteLength);
  } catch {
    return undefined;
  }
  const pool = size <= allocator.smallRequestMaxByteLength ? "small" : "large";
  let best: { byteLength: number; address: number } | undefined;
  for (const seg of allocator.snapshot().segments) {
    for (const b of seg.blocks) {
      if (b.state === "active_pending_free") return undefined;
      if (
        b.state !== "inactive" || seg.stream !== stream || seg.pool !== pool ||
        b.byteLength < size
      ) continue;
      if (
        best === undefined || b.byteLength < best.byteLength ||
        (b.byteLength === best.byteLength && b.address < best.address)
      ) best = b;
    }
  }
  if (best === undefined) return undefined;
  const maxSplit = allocator.maxSplitByteLength;
  if (size < maxSplit && best.byteLength >= maxSplit) return undefined;
  if (
    size >= maxSplit &&
    best.byteLength >= size + allocator.maxNonSplitRoundingByteLength
  ) return undefined;
  return best.address;
}

function run(options: CachingAllocatorOptions, ops: Op[]): void {
  const device = new MockSegmentSource({ capacityBytes: 96 * MiB });
  const allocator = new CachingAllocator(device, options);
  const streams = [undefined, new ManualStream(), new ManualStream()];
  const live: Live[] = [];
  let waiting: Waiting[] = [];
  const check = (): void => {
    allocator.validate();
    waiting = waiting.filter((w) => !w.fences.every((f) => f.completed));
    const stats = allocator.memoryStats();
    assert.equal(stats.allocation.all.current, live.length);
    assert.equal(
      stats.allocatedBytes.all.current,
      live.reduce((s, l) => s + l.end - l.start, 0),
    );
    assert.ok(
      stats.requestedBytes.all.current >=
        live.reduce((s, l) => s + l.requested, 0),
    );
    assert.equal(stats.reservedBytes.all.current, device.reservedBytes);
    assert.equal(stats.segment.all.current, device.liveSegmentCount);
    assert.equal(stats.numDeviceAlloc, device.allocationCount);
    assert.equal(stats.numDeviceFree, device.freeCount);
    assert.ok(device.reservedBytes <= allocator.allowedBytes);
  };
  for (const op of ops) {
    switch (op.kind) {
      case "alloc": {
        const stream = streams[op.stream];
        let block: CachedBlock<{ id: number }>;
        const before = allocator.memoryStats().allocation.all.current;
        const fit = bestFit(allocator, op.size, stream?.id ?? 0);
        try {
          block = allocator.allocate(op.size, stream && { stream });
        } catch (error) {
          assert.ok(
            error instanceof CachingOutOfMemoryError ||
              error instanceof SegmentSourceError,
            String(error),
          );
          assert.equal(allocator.memoryStats().allocation.all.current, before);
          break;
        }
        const entry: Live = {
          block,
          start: block.byteOffset,
          end: block.byteOffset + block.blockByteLength,
          memory: block.memory.id,
          requested: op.size,
        };
        if (fit !== undefined) {
          assert.equal(block.address, fit, "not the best-fitting free block");
        }
        assert.ok(block.blockByteLength >= op.size);
        assert.equal(block.blockByteLength % 256, 0); // the default granule
        assert.equal(block.byteOffset % device.alignment, 0);
        for (const other of live) {
          assert.ok(!overlaps(entry, other), "live blocks overlap");
        }
        for (const w of waiting) {
          assert.ok(!overlaps(entry, w), "block reused before its fences");
        }
        live.push(entry);
        break;
      }
      case "free": {
        if (live.length === 0) break;
        const [entry] = live.splice(op.index % live.length, 1);
        const uses = streams.filter((s, i) =>
          s !== undefined &&
          (entry.block as unknown as { __uses?: Set<number> }).__uses?.has(i)
        ) as ManualStream[];
        entry.block.release();
        if (uses.length > 0) {
          // The allocator took one fence per stream at free: the newest one.
          const fences = uses.map((s) => {
            const seq = s.submitted;
            return {
              get completed() {
                return s.completedCount >= seq;
              },
              wait: () => Promise.resolve(),
            };
          });
          waiting.push({ ...entry, fences });
        }
        break;
      }
      case "record": {
        if (live.length === 0) break;
        const entry = live[op.index % live.length];
        const stream = streams[op.stream];
        if (stream === undefined) break;
        entry.block.recordStream(stream);
        if (entry.block.stream.id !== stream.id) {
          const b = entry.block as unknown as { __uses?: Set<number> };
          (b.__uses ??= new Set()).add(op.stream);
        }
        break;
      }
      case "complete": {
        const stream = streams[op.stream];
        stream?.complete(op.count);
        break;
      }
      case "emptyCache":
        allocator.emptyCache();
        break;
      case "fault":
        if (op.throws) device.throwNext();
        else device.failNext();
        break;
      case "bad": {
        const before = JSON.stringify(allocator.snapshot());
        assert.throws(() => allocator.allocate(op.size), InvalidArgumentError);
        assert.equal(JSON.stringify(allocator.snapshot()), before);
        break;
      }
    }
    check();
  }
  for (const entry of live) entry.block.release();
  live.length = 0;
  for (const s of streams) s?.completeAll();
  allocator.emptyCache();
  check();
  assert.equal(device.reservedBytes, 0);
  assert.equal(device.liveSegmentCount, 0);
  const stats = allocator.memoryStats();
  for (
    const name of [
      "allocation",
      "active",
      "allocatedBytes",
      "activeBytes",
      "requestedBytes",
      "inactiveSplit",
      "inactiveSplitBytes",
    ] as const
  ) {
    assert.equal(stats[name].all.current, 0, name);
  }
}

describe("CachingAllocator model", () => {
  it("CachingAllocator matches a model over random allocate, free, recordStream, fence and emptyCache sequences", () => {
    fc.assert(
      fc.property(
        optionsArb,
        // 1,000 runs in CI (modelRuns) of 20-120 ops (200 runs of 20-400
        // before); the nightly task runs more of them
        fc.array(opArb, { minLength: 20, maxLength: 120, size: "max" }),
        (options, ops) => run(options, ops),
      ),
      { numRuns: modelRuns() },
    );
  });
});

type StatOp =
  | { kind: "alloc"; size: number; stream: number }
  | { kind: "free"; index: number; record: boolean }
  | { kind: "complete" }
  | { kind: "resetPeak" }
  | { kind: "resetAccumulated" };

const statOpArb: fc.Arbitrary<StatOp> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("alloc" as const),
      size: fc.oneof(
        fc.integer({ min: 0, max: 256 * 1024 }),
        fc.integer({ min: MiB + 1, max: 4 * MiB }),
      ),
      stream: fc.integer({ min: 0, max: 1 }),
    }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("free" as const),
      index: fc.nat(),
      record: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ kind: "complete" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "resetPeak" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "resetAccumulated" as const }) },
);

describe("CachingAllocator active stats", () => {
  it("CachingAllocator active and activeBytes (current, peak, allocated, freed) match a recount through pending frees and resets", () => {
    fc.assert(
      fc.property(fc.array(statOpArb, { maxLength: 120 }), (ops) => {
        const allocator = new CachingAllocator(new MockSegmentSource());
        const other = new ManualStream();
        const live: CachedBlock[] = [];
        // Per figure (count, bytes) and pool (all, small, large): the model.
        const zero = () => [0, 0, 0];
        const model = {
          peak: [zero(), zero()],
          allocated: [zero(), zero()],
          base: [zero(), zero()],
        };
        const recount = (): number[][] => {
          const out = [zero(), zero()];
          for (const seg of allocator.snapshot().segments) {
            const p = seg.pool === "small" ? 1 : 2;
            for (const b of seg.blocks) {
              if (b.state === "inactive") continue;
              out[0][0]++;
              out[0][p]++;
              out[1][0] += b.byteLength;
              out[1][p] += b.byteLength;
            }
          }
          return out;
        };
        const check = (): void => {
          const now = recount();
          const stats = allocator.memoryStats();
          for (
            const [f, name] of [[0, "active"], [1, "activeBytes"]] as const
          ) {
            (["all", "smallPool", "largePool"] as const).forEach((type, p) => {
              model.peak[f][p] = Math.max(model.peak[f][p], now[f][p]);
              const got = stats[name][type];
              const what = `${name}.${type}`;
              assert.equal(got.current, now[f][p], what);
              assert.equal(got.peak, model.peak[f][p], what);
              assert.equal(got.allocated, model.allocated[f][p], what);
              assert.equal(
                got.freed,
                model.base[f][p] + model.allocated[f][p] - now[f][p],
                what,
              );
            });
          }
        };
        for (const op of ops) {
          switch (op.kind) {
            case "alloc": {
              const block = allocator.allocate(
                op.size,
                op.stream === 1 ? { stream: other } : undefined,
              );
              const p = op.size <= MiB ? 1 : 2;
              for (const q of [0, p]) {
                model.allocated[0][q]++;
                model.allocated[1][q] += block.blockByteLength;
              }
              live.push(block);
              break;
            }
            case "free": {
              if (live.length === 0) break;
              const [block] = live.splice(op.index % live.length, 1);
              if (op.record) block.recordStream(other);
              block.release();
              break;
            }
            case "complete":
              other.completeAll();
              break;
            case "resetPeak":
              allocator.resetPeakStats();
              model.peak = recount();
              break;
            case "resetAccumulated":
              allocator.resetAccumulatedStats();
              model.allocated = [zero(), zero()];
              model.base = recount();
              break;
          }
          check();
          allocator.validate();
        }
      }),
      { numRuns: modelRuns() },
    );
  });
});

describe("CachingAllocator best fit", () => {
  it("CachingAllocator takes the smallest, then lowest-addressed, free block among many of similar sizes", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            // Sizes that share bins: exact 512 B steps and 2 KiB-wide bins.
            size: fc.oneof(
              fc.integer({ min: 1, max: 6 }).map((k) => k * 512),
              fc.integer({ min: 16 * 1024 + 1, max: 24 * 1024 }),
              fc.integer({ min: 1, max: 4 * MiB }),
            ),
            free: fc.boolean(),
            pick: fc.nat(),
          }),
          { minLength: 1, maxLength: 300 },
        ),
        (ops) => {
          const allocator = new CachingAllocator(new MockSegmentSource());
          const live: CachedBlock<{ id: number }>[] = [];
          for (const op of ops) {
            if (op.free && live.length > 0) {
              live.splice(op.pick % live.length, 1)[0].release();
              continue;
            }
            const fit = bestFit(allocator, op.size, 0);
            const block = allocator.allocate(op.size);
            if (fit !== undefined) assert.equal(block.address, fit);
            live.push(block);
          }
          allocator.validate();
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});
