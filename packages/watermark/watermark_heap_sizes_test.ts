import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError, MockSegmentSource } from "@allot/core";
import {
  WatermarkAllocator,
  type WatermarkAllocatorOptions,
  type WatermarkBuffer,
} from "./mod.ts";
import { _adaptiveHeapSize, _HEAP_GROWTH_DIVISOR } from "./_watermark_heaps.ts";
import { modelRuns } from "../core/_test_faults.ts";

const KiB = 1024;
const MiB = 1024 * KiB;

/** A mock device that records the size of every segment it hands out. */
class RecordingSource extends MockSegmentSource {
  readonly made: number[] = [];
  override tryAllocateSegment(
    ...args: Parameters<MockSegmentSource["tryAllocateSegment"]>
  ): ReturnType<MockSegmentSource["tryAllocateSegment"]> {
    const s = super.tryAllocateSegment(...args);
    if (s) this.made.push(s.byteLength);
    return s;
  }
}

function setup(options: WatermarkAllocatorOptions = {}) {
  const device = new RecordingSource({ capacityBytes: 64 * 2 ** 30 });
  const allocator = new WatermarkAllocator(device, options);
  return { device, allocator };
}

const isPowerOfTwo = (n: number) =>
  n > 0 && 2 ** Math.round(Math.log2(n)) === n;

describe("WatermarkAllocator heap sizes that adapt to the workload", () => {
  it("a small workload holds one smallest heap per class, not MPS's 8 MiB and 32 MiB", () => {
    const { device, allocator } = setup();
    const live: WatermarkBuffer[] = [];
    // 100 KiB of small buffers and one 1.5 MiB buffer (large class)
    for (let i = 0; i < 100; i++) live.push(allocator.allocateBuffer(KiB));
    live.push(allocator.allocateBuffer(1536 * KiB));
    // one 128 KiB small heap; the large heap is the request (2 MiB minimum)
    assert.deepEqual(device.made, [128 * KiB, 2 * MiB]);
    assert.ok(device.reservedBytes <= 2.2 * 1636 * KiB);
    for (const b of live) b.release();
    allocator.emptyCache();
    assert.equal(device.reservedBytes, 0);
  });

  it("a growing workload's heaps grow geometrically with what is held, up to the class sizes", () => {
    const { device, allocator } = setup();
    const live: WatermarkBuffer[] = [];
    // 192 MiB of 64 KiB (small) buffers, then 192 MiB of 4 MiB (large)
    for (let i = 0; i < 3072; i++) {
      const before = device.reservedBytes;
      const n = device.made.length;
      live.push(allocator.allocateBuffer(64 * KiB));
      if (device.made.length > n) {
        const heap = device.made.at(-1)!;
        // the power of two at or above an eighth of the bytes held, clamped
        assert.equal(
          heap,
          Math.min(
            8 * MiB,
            Math.max(128 * KiB, 2 ** Math.ceil(Math.log2(before / 8))),
          ),
        );
      }
    }
    const small = device.made.slice();
    for (let i = 0; i < 48; i++) live.push(allocator.allocateBuffer(4 * MiB));
    const large = device.made.slice(small.length);
    for (const sizes of [small, large]) {
      for (let i = 1; i < sizes.length; i++) {
        assert.ok(sizes[i] >= sizes[i - 1], `${sizes}`);
        assert.ok(isPowerOfTwo(sizes[i]), `${sizes[i]}`);
      }
    }
    // converges to MPS's sizes, with few heaps
    assert.equal(small.at(-1), 8 * MiB);
    assert.equal(large[0], 32 * MiB); // 192 MiB held: the cap
    // the growth costs at most 32 heaps below the cap (24 heaps of 8 MiB
    // hold 192 MiB)
    const belowCap = small.filter((s) => s < 8 * MiB).length;
    assert.ok(belowCap <= 32, `${small}`);
    assert.ok(small.length <= 24 + belowCap, `${small}`);
    // geometric: each heap below the cap is at least an eighth of what
    // was held before it, so held bytes grow by at least 1/8 per heap
    let held = 0;
    for (const s of small) {
      if (s < 8 * MiB && held > 128 * KiB * 8) assert.ok(s >= held / 8);
      held += s;
    }
    assert.ok(device.reservedBytes <= 1.2 * 384 * MiB);
    for (const b of live) b.release();
    allocator.emptyCache();
    assert.equal(device.reservedBytes, 0);
  });

  it("a smallest heap equal to the class size gives MPS's fixed heaps", () => {
    const { device, allocator } = setup({
      minSmallHeapByteLength: 8 * MiB,
      minLargeHeapByteLength: 32 * MiB,
    });
    const a = allocator.allocateBuffer(KiB);
    const b = allocator.allocateBuffer(2 * MiB);
    assert.deepEqual(device.made, [8 * MiB, 32 * MiB]);
    a.release();
    b.release();
  });

  it("the extra-large class grows from the large heap to its size", () => {
    const { device, allocator } = setup({ lowWatermarkRatio: 0 });
    const a = allocator.allocateBuffer(12 * MiB); // < 32 MiB / 2
    const b = allocator.allocateBuffer(24 * MiB); // >= 16 MiB: own heap
    assert.deepEqual(device.made, [32 * MiB, 24 * MiB]);
    const big = allocator.allocateBuffer(16 * 2 ** 30); // own heap
    const c = allocator.allocateBuffer(100 * MiB); // 2 GiB held / 8 > 1 GiB
    assert.equal(device.made.at(-1), 2 ** 30);
    for (const x of [a, b, big, c]) x.release();
  });

  it("the size rule: within the class's bounds, a power of two, monotone in the bytes held", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 44 }),
        fc.integer({ min: 0, max: 2 ** 44 }),
        fc.integer({ min: 1, max: 2 ** 30 }),
        fc.integer({ min: 1, max: 2 ** 31 }),
        (h1, h2, a, b) => {
          const [min, max] = a <= b ? [a, b] : [b, a];
          const [lo, hi] = h1 <= h2 ? [h1, h2] : [h2, h1];
          const s = _adaptiveHeapSize(lo, min, max);
          assert.ok(s >= min && s <= max);
          assert.ok(s === min || s === max || isPowerOfTwo(s));
          assert.ok(_adaptiveHeapSize(hi, min, max) >= s);
          // at least the share of the bytes held, unless capped
          if (s < max) assert.ok(s >= lo / _HEAP_GROWTH_DIVISOR);
          // at most twice the share, unless at the minimum
          if (s > min) assert.ok(s < 2 * lo / _HEAP_GROWTH_DIVISOR);
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("refuses a smallest heap that is not a positive integer or above its class size", () => {
    const device = new MockSegmentSource({ capacityBytes: 64 * MiB });
    const cases: [WatermarkAllocatorOptions, RegExp][] = [
      [
        { minSmallHeapByteLength: 0 },
        /minSmallHeapByteLength.*positive integer.*0/,
      ],
      [{ minSmallHeapByteLength: 1.5 }, /minSmallHeapByteLength/],
      [{ minLargeHeapByteLength: NaN }, /minLargeHeapByteLength/],
      [{ minXlargeHeapByteLength: -1 }, /minXlargeHeapByteLength/],
      [
        { minSmallHeapByteLength: 8 * MiB + 1 },
        /minSmallHeapByteLength: must be at most smallHeapByteLength \(8388608\), received 8388609/,
      ],
      [
        { largeHeapByteLength: 16 * MiB, minLargeHeapByteLength: 32 * MiB },
        /at most largeHeapByteLength \(16777216\)/,
      ],
      [
        { xlargeHeapByteLength: 64 * MiB, minXlargeHeapByteLength: 128 * MiB },
        /at most xlargeHeapByteLength/,
      ],
      [
        { minLargeHeapByteLength: "1" as unknown as number },
        /minLargeHeapByteLength/,
      ],
    ];
    for (const [options, message] of cases) {
      assert.throws(
        () => new WatermarkAllocator(device, options),
        (e: unknown) =>
          e instanceof InvalidArgumentError && message.test(e.message),
        JSON.stringify(options),
      );
    }
    assert.equal(device.reservedBytes, 0);
    // a smallest heap above a class size smaller than the default is refused,
    // one equal to it is taken
    assert.throws(
      () =>
        new WatermarkAllocator(device, {
          smallHeapByteLength: 1 * MiB,
          minSmallHeapByteLength: 2 * MiB,
        }),
      InvalidArgumentError,
    );
    new WatermarkAllocator(device, {
      smallHeapByteLength: 1 * MiB,
      minSmallHeapByteLength: 1 * MiB,
    });
  });
});
