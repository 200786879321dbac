/**
 * Model test of expandable segments: random allocate / free / emptyCache
 * sequences on a small backed device whose segments resize in place, so
 * segments grow, shrink and run out of room. Invariants: no two live blocks
 * overlap, a byte pattern written into every live block is intact after
 * every step (so growth keeps the bytes), stats equal a recount
 * (`validate()`), a refused request changes nothing, and everything goes
 * back at the end.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type MockMemory,
  MockSegmentSource,
  type Segment,
  type SegmentSource,
} from "@allot/core";
import { type CachedBlock, CachingAllocator } from "./caching_allocator.ts";
import { CachingOutOfMemoryError, SegmentSourceError } from "./errors.ts";
import { churnTrace, replayTrace, summarizeTrace } from "./traces.ts";

const KiB = 1024;
const MiB = 1024 * KiB;

const OPTIONS = {
  expandableSegments: true,
  smallRequestMaxByteLength: 16 * KiB,
  smallSegmentByteLength: 64 * KiB,
  largeSegmentByteLength: 1 * MiB,
  ownSegmentMinByteLength: 256 * KiB,
  largeRoundByteLength: 64 * KiB,
} as const;

type Op =
  | { kind: "alloc"; byteLength: number }
  | { kind: "free"; pick: number }
  | { kind: "empty" };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("alloc" as const),
      // log-uniform from 1 byte to 640 KiB: every pool and own segments
      // (no bias: fast-check's bias would pile sizes at the two ends)
      byteLength: fc.noBias(fc.integer({ min: 0, max: 1000 }))
        .map((k) => Math.floor(2 ** (k / 1000 * Math.log2(640 * KiB)))),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("free" as const),
      pick: fc.nat(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("empty" as const) }) },
);

interface Live {
  block: CachedBlock<MockMemory>;
  fill: number;
}

function bytesOf(b: CachedBlock<MockMemory>): Uint8Array {
  return new Uint8Array(
    b.memory.bytes!.buffer,
    b.byteOffset,
    b.byteLength,
  );
}

function checkLive(live: Live[]): void {
  const ranges = live.map(({ block }) => [block.address, block.blockByteLength])
    .sort((x, y) => x[0] - y[0]);
  for (let i = 1; i < ranges.length; i++) {
    assert.ok(
      ranges[i - 1][0] + ranges[i - 1][1] <= ranges[i][0],
      `blocks overlap at ${ranges[i][0]}`,
    );
  }
  for (const { block, fill } of live) {
    const bytes = bytesOf(block);
    for (let i = 0; i < bytes.length; i += 97) {
      assert.equal(bytes[i], fill, `byte ${i} of ${block} changed`);
    }
    if (bytes.length > 0) assert.equal(bytes[bytes.length - 1], fill);
  }
}

describe("CachingAllocator with expandableSegments", () => {
  it("grows and shrinks segments in place, keeping bytes, stats and bounds", () => {
    fc.assert(
      fc.property(
        fc.array(op, { minLength: 1, maxLength: 120, size: "max" }),
        fc.integer({ min: 256, max: 2048 }),
        (ops, capacityKiB) => {
          const device = new MockSegmentSource({
            capacityBytes: capacityKiB * KiB,
            backed: true,
          });
          const allocator = new CachingAllocator(device, OPTIONS);
          assert.ok(allocator.expandableSegments);
          const live: Live[] = [];
          let fill = 0;
          for (const o of ops) {
            if (o.kind === "alloc") {
              const before = allocator.memoryStats().allocatedBytes.all
                .current;
              let block: CachedBlock<MockMemory>;
              try {
                block = allocator.allocate(o.byteLength);
              } catch (error) {
                assert.ok(error instanceof CachingOutOfMemoryError);
                assert.equal(
                  allocator.memoryStats().allocatedBytes.all.current,
                  before,
                );
                continue;
              }
              fill = (fill % 255) + 1;
              bytesOf(block).fill(fill);
              live.push({ block, fill });
            } else if (o.kind === "free" && live.length > 0) {
              const [x] = live.splice(o.pick % live.length, 1);
              x.block.release();
            } else if (o.kind === "empty") {
              allocator.emptyCache();
            }
            allocator.validate();
            assert.ok(device.reservedBytes <= device.capacityBytes);
            assert.equal(
              device.reservedBytes,
              allocator.memoryStats().reservedBytes.all.current,
            );
            checkLive(live);
          }
          for (const x of live) x.block.release();
          allocator.emptyCache();
          allocator.validate();
          assert.equal(device.reservedBytes, 0);
          assert.equal(device.liveSegmentCount, 0);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("extends a segment's free tail instead of taking a new segment", () => {
    const device = new MockSegmentSource({ capacityBytes: 2 * MiB });
    const allocator = new CachingAllocator(device, OPTIONS);
    const a = allocator.allocate(100 * KiB); // large pool, expandable
    const b = allocator.allocate(150 * KiB); // grows the same segment
    allocator.validate();
    assert.equal(device.allocationCount, 1);
    assert.ok(device.resizeCount >= 1);
    assert.equal(allocator.snapshot().segments.length, 1);
    b.release();
    allocator.emptyCache(); // the free tail goes back
    allocator.validate();
    assert.equal(
      device.reservedBytes,
      allocator.snapshot().segments[0].blocks[0].byteLength,
    );
    a.release();
    allocator.emptyCache();
    assert.equal(device.reservedBytes, 0);
  });

  it("serves the log-uniform churn trace at 1.1x its peak", () => {
    // Sizes from 256 B to 64 MiB under 256 MiB live: non-moving pools with
    // fixed segments fail here from 1.5x (the benchmark's stress trace).
    const trace = churnTrace({ allocations: 4000 });
    const peak = summarizeTrace(trace).peakRequestedBytes;
    for (const ratio of [1.5, 1.1]) {
      const device = new MockSegmentSource({
        capacityBytes: Math.ceil(peak * ratio / 4096) * 4096,
      });
      const allocator = new CachingAllocator(device, {
        expandableSegments: true,
      });
      replayTrace(trace, {
        allocate: (n) => allocator.allocate(n),
        free: (b) => b.release(),
      });
      assert.equal(allocator.memoryStats().numOoms, 0);
      allocator.emptyCache();
      assert.equal(device.reservedBytes, 0);
    }
  });

  it("refuses a resize that throws or moves the memory, and stays usable", () => {
    const mock = new MockSegmentSource({ capacityBytes: 4 * MiB });
    let fault: "none" | "throw" | "move" = "none";
    const source: SegmentSource<MockMemory> = {
      device: mock.device,
      alignment: mock.alignment,
      maxSegmentByteLength: mock.maxSegmentByteLength,
      capacityBytes: mock.capacityBytes,
      tryAllocateSegment: (n, o) => mock.tryAllocateSegment(n, o),
      freeSegment: (segment) => mock.freeSegment(segment),
      tryResizeSegment: (
        segment: Segment<MockMemory>,
        n: number,
      ): Segment<MockMemory> | undefined => {
        if (fault === "throw") throw new Error("device lost");
        if (fault === "move") {
          return {
            memory: { ...segment.memory },
            byteOffset: 0,
            byteLength: n,
          };
        }
        return mock.tryResizeSegment(segment, n);
      },
    };
    const allocator = new CachingAllocator(source, OPTIONS);
    const a = allocator.allocate(40 * KiB); // 64 KiB expandable large segment
    const before = JSON.stringify(allocator.memoryStats());
    for (const f of ["throw", "move"] as const) {
      fault = f;
      assert.throws(() => allocator.allocate(100 * KiB), SegmentSourceError);
      allocator.validate();
      assert.equal(JSON.stringify(allocator.memoryStats()), before);
    }
    fault = "none";
    const b = allocator.allocate(100 * KiB);
    allocator.validate();
    a.release();
    b.release();
    allocator.emptyCache();
    assert.equal(mock.reservedBytes, 0);
  });
});
