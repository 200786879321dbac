import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MockSegmentSource } from "./segment_source.ts";
import { DoubleFreeError, InvalidArgumentError } from "./errors.ts";

describe("MockSegmentSource", () => {
  it("MockSegmentSource counts allocations and refuses past capacity", () => {
    const d = new MockSegmentSource({ capacityBytes: 1000, backed: true });
    const a = d.tryAllocateSegment(600)!;
    assert.equal(a.memory.bytes?.byteLength, 600);
    assert.equal(d.tryAllocateSegment(401), undefined);
    assert.equal(d.failureCount, 1);
    const b = d.tryAllocateSegment(400)!;
    assert.equal(d.reservedBytes, 1000);
    d.freeSegment(a);
    d.freeSegment(b);
    assert.deepEqual(
      [d.reservedBytes, d.peakReservedBytes, d.allocationCount, d.freeCount],
      [0, 1000, 2, 2],
    );
  });

  it("MockSegmentSource.freeSegment() refuses a segment freed twice", () => {
    const d = new MockSegmentSource();
    const a = d.tryAllocateSegment(8)!;
    d.freeSegment(a);
    assert.throws(() => d.freeSegment(a), DoubleFreeError);
    assert.equal(d.freeCount, 1);
  });

  it("MockSegmentSource injects failures and throws", () => {
    const d = new MockSegmentSource();
    d.failNext();
    assert.equal(d.tryAllocateSegment(8), undefined);
    d.throwNext();
    assert.throws(() => d.tryAllocateSegment(8), /Mock device failed/);
    assert.ok(d.tryAllocateSegment(8));
  });

  it("MockSegmentSource validates lengths", () => {
    const d = new MockSegmentSource({ maxSegmentByteLength: 64 });
    for (const n of [0, -1, 1.5, 65, NaN]) {
      assert.throws(() => d.tryAllocateSegment(n), InvalidArgumentError);
    }
    assert.equal(d.allocationCount, 0);
  });

  it("MockSegmentSource resizes resizable segments in place, keeping bytes", () => {
    const d = new MockSegmentSource({ capacityBytes: 4096, backed: true });
    const a = d.tryAllocateSegment(1024, { resizable: true })!;
    a.memory.bytes!.fill(5);
    const b = d.tryResizeSegment(a, 3072)!;
    assert.equal(b.memory, a.memory);
    assert.equal(b.memory.bytes!.length, 3072);
    assert.equal(b.memory.bytes![1023], 5);
    assert.equal(d.reservedBytes, 3072);
    assert.equal(d.peakReservedBytes, 3072);
    assert.equal(d.tryResizeSegment(b, 8192), undefined);
    assert.throws(() => d.tryResizeSegment(a, 2048), /not a live segment/);
    const c = d.tryResizeSegment(b, 512)!;
    assert.equal(d.reservedBytes, 512);
    assert.equal(d.resizeCount, 2);
    const fixed = d.tryAllocateSegment(512)!;
    assert.equal(d.tryResizeSegment(fixed, 1024), undefined);
    d.freeSegment(c);
    d.freeSegment(fixed);
    assert.equal(d.reservedBytes, 0);
  });
});
