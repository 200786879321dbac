// WatermarkAllocator's smallest heap sizes from the outside (review 5):
// hostile values (Infinity, above the class size, getters), and heap sizes
// within their class's bounds under random workloads with random minimums.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError, MockSegmentSource } from "@allot/core";
import {
  WatermarkAllocator,
  type WatermarkAllocatorOptions,
  type WatermarkBuffer,
} from "./mod.ts";
import { modelRuns } from "../core/_test_faults.ts";

const KiB = 1024, MiB = 1024 * KiB;

/** A mock device that records every segment's size and request. */
class RecordingSource extends MockSegmentSource {
  readonly made: [number, number][] = [];
  override tryAllocateSegment(
    ...args: Parameters<MockSegmentSource["tryAllocateSegment"]>
  ): ReturnType<MockSegmentSource["tryAllocateSegment"]> {
    const s = super.tryAllocateSegment(...args);
    if (s) this.made.push([s.byteLength, args[0]]);
    return s;
  }
}

const alignUp = (n: number, a: number) => Math.ceil(n / a) * a;

describe("WatermarkAllocator smallest heaps (review 5)", () => {
  it("refuses Infinity, -0, bigint, a boxed number and above-class values; makes nothing", () => {
    const device = new MockSegmentSource({ capacityBytes: 64 * MiB });
    for (
      const name of [
        "minSmallHeapByteLength",
        "minLargeHeapByteLength",
        "minXlargeHeapByteLength",
      ]
    ) {
      for (
        const v of [
          Infinity,
          -Infinity,
          -0,
          2 ** 53,
          1n,
          new Number(MiB),
          { valueOf: () => MiB },
          2 ** 40,
          null,
          true,
        ]
      ) {
        assert.throws(
          () =>
            new WatermarkAllocator(device, {
              [name]: v,
            } as WatermarkAllocatorOptions),
          (e: unknown) =>
            e instanceof InvalidArgumentError &&
            e.message.includes(name) &&
            (e as InvalidArgumentError & { name: string }).name ===
              "InvalidArgumentError",
          `${name}: ${String(v)}`,
        );
      }
    }
    assert.equal(device.reservedBytes, 0);
    assert.equal(device.allocationCount, 0);
  });

  it("reads each smallest-heap getter once; a throwing one propagates and makes nothing", () => {
    const device = new RecordingSource({ capacityBytes: 64 * MiB });
    let reads = 0;
    const a = new WatermarkAllocator(device, {
      get minSmallHeapByteLength() {
        return reads++ === 0 ? 64 * KiB : 0;
      },
    });
    assert.equal(reads, 1);
    a.allocateBuffer(KiB).release();
    assert.deepEqual(device.made.map((m) => m[0]), [64 * KiB]);
    assert.throws(
      () =>
        new WatermarkAllocator(device, {
          get minLargeHeapByteLength(): number {
            throw new RangeError("no");
          },
        }),
      RangeError,
    );
    assert.equal(device.made.length, 1);
  });

  it("under random workloads and minimums every heap stays within its class's bounds, and stats add up", () => {
    const options = fc.record({
      minSmallHeapByteLength: fc.integer({ min: 1, max: 8 * MiB }),
      minLargeHeapByteLength: fc.integer({ min: 1, max: 32 * MiB }),
      minXlargeHeapByteLength: fc.integer({ min: 1, max: 256 * MiB }),
    });
    const step = fc.oneof(
      fc.record({
        size: fc.oneof(
          fc.integer({ min: 1, max: MiB }),
          fc.integer({ min: MiB, max: 10 * MiB }),
          fc.integer({ min: 10 * MiB, max: 200 * MiB }),
        ),
        free: fc.nat(),
        empty: fc.constant(false),
      }),
      fc.record({
        size: fc.constant(0),
        free: fc.nat(),
        empty: fc.boolean(),
      }),
    );
    fc.assert(
      fc.property(
        options,
        fc.array(step, { maxLength: 60, size: "max" }),
        (o, steps) => {
          const device = new RecordingSource({ capacityBytes: 2 ** 34 });
          const allocator = new WatermarkAllocator(device, {
            ...o,
            xlargeHeapByteLength: 256 * MiB,
          });
          const al = device.alignment;
          const bounds: [number, number][] = [
            [o.minSmallHeapByteLength, 8 * MiB],
            [o.minLargeHeapByteLength, 32 * MiB],
            [o.minXlargeHeapByteLength, 256 * MiB],
          ];
          const live: WatermarkBuffer[] = [];
          for (const s of steps) {
            const n = device.made.length;
            if (s.size > 0) {
              live.push(allocator.allocateBuffer(s.size));
              for (const [made, asked] of device.made.slice(n)) {
                assert.ok(made >= s.size && asked >= s.size);
                // the class of the request rounded to the alignment
                const sz = alignUp(s.size, al);
                const cls = sz <= MiB ? 0 : sz < 10 * MiB ? 1 : 2;
                const [lo, hi] = bounds[cls];
                const own = made === alignUp(s.size, al) ||
                  made === alignUp(s.size, 2 * MiB) || made === s.size;
                const inClass = made >= alignUp(lo, al) &&
                  made <= alignUp(hi, al);
                assert.ok(
                  own || (cls < 2 ? inClass : inClass && sz < made / 2),
                  `request ${s.size} made ${made}, class ${cls} [${lo}, ${hi}]`,
                );
                if (cls < 2) {
                  assert.ok(
                    made <= Math.max(alignUp(hi, al), s.size),
                  );
                }
              }
            } else if (s.empty) {
              allocator.emptyCache();
            } else if (live.length > 0) {
              live.splice(s.free % live.length, 1)[0].release();
            }
            allocator.validate();
            assert.equal(
              allocator.memoryStats().reservedBytes.all.current,
              device.reservedBytes,
            );
            let bytes = 0;
            for (const b of live) bytes += b.byteLength;
            assert.ok(
              allocator.memoryStats().allocatedBytes.all.current >= bytes,
            );
          }
          for (const b of live) b.release();
          allocator.emptyCache();
          assert.equal(device.reservedBytes, 0);
        },
      ),
      { numRuns: modelRuns(200) },
    );
  });
});
