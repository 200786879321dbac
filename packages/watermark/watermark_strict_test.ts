import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AllotError,
  JUNK_BYTE,
  type MockMemory,
  MockSegmentSource,
  type Segment,
  type SegmentRequestOptions,
  type SegmentSource,
} from "@allot/core";
import { WatermarkAllocator } from "./mod.ts";

/** A source whose segments can be shrunk after the fact (a lying device). */
function shrinkableSource(): {
  source: SegmentSource<MockMemory>;
  segments: { byteLength: number }[];
} {
  const inner = new MockSegmentSource({ capacityBytes: 1 << 24, backed: true });
  const originals = new Map<Segment<MockMemory>, Segment<MockMemory>>();
  const segments: { byteLength: number }[] = [];
  const source: SegmentSource<MockMemory> = {
    device: inner.device,
    alignment: inner.alignment,
    maxSegmentByteLength: inner.maxSegmentByteLength,
    capacityBytes: inner.capacityBytes,
    tryAllocateSegment(n: number, options?: SegmentRequestOptions) {
      const s = inner.tryAllocateSegment(n, options);
      if (s === undefined) return undefined;
      const copy = { ...s };
      originals.set(copy, s);
      segments.push(copy);
      return copy;
    },
    freeSegment(s: Segment<MockMemory>) {
      inner.freeSegment(originals.get(s) ?? s);
    },
  };
  return { source, segments };
}

describe("WatermarkAllocator strict mode", () => {
  it("WatermarkAllocator in strict mode junk-fills a freed buffer (after its work) and is off by default", () => {
    for (const strict of [true, false]) {
      const allocator = new WatermarkAllocator(
        new MockSegmentSource({ capacityBytes: 1 << 24, backed: true }),
        { strict },
      );
      const buffer = allocator.allocateBuffer(64, { pool: "shared" });
      const stale = buffer.sharedView()!;
      stale.fill(1);
      buffer.release();
      assert.equal(stale.every((x) => x === JUNK_BYTE), strict, `${strict}`);
      allocator.validate();
    }
  });

  it("WatermarkAllocator in strict mode validates before and after every call that changes it", () => {
    for (const strict of [true, false]) {
      const allocator = new WatermarkAllocator(new MockSegmentSource(), {
        strict,
      });
      let calls = 0;
      const validate = allocator.validate.bind(allocator);
      Object.defineProperty(allocator, "validate", {
        value: () => {
          calls++;
          validate();
        },
      });
      const a = allocator.allocateBuffer(100); // 2
      allocator.free(a); // 2
      allocator.emptyCache(); // 1
      assert.equal(calls, strict ? 5 : 0);
    }
  });

  it("WatermarkAllocator in strict mode catches a heap that shrank under it; off, it goes on", () => {
    for (const strict of [true, false]) {
      const { source, segments } = shrinkableSource();
      const allocator = new WatermarkAllocator(source, { strict });
      const a = allocator.allocateBuffer(100);
      segments[0].byteLength = 64; // the device lies after the fact
      if (strict) {
        assert.throws(
          () => allocator.allocateBuffer(100),
          (e) =>
            e instanceof AllotError && /tiled|inconsistent/.test(e.message),
        );
        assert.throws(() => allocator.validate(), AllotError);
      } else {
        allocator.allocateBuffer(100);
        a.release();
      }
    }
  });
});
