import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DoubleFreeError, InvalidArgumentError } from "@allot/core";
import { HostSegmentSource } from "./host_segment_source.ts";

describe("HostSegmentSource.tryResizeSegment()", () => {
  it("grows and shrinks a resizable segment in place, keeping its bytes", () => {
    const source = new HostSegmentSource({ capacityBytes: 1 << 16 });
    const a = source.tryAllocateSegment(4096, { resizable: true })!;
    new Uint8Array(a.memory).fill(9);
    const b = source.tryResizeSegment(a, 16384)!;
    assert.equal(b.memory, a.memory);
    assert.equal(b.memory.byteLength, 16384);
    assert.ok(new Uint8Array(b.memory, 0, 4096).every((x) => x === 9));
    assert.equal(source.reservedBytes, 16384);
    const c = source.tryResizeSegment(b, 1024)!;
    assert.equal(c.memory.byteLength, 1024);
    assert.equal(source.reservedBytes, 1024);
    assert.throws(() => source.tryResizeSegment(a, 2048), DoubleFreeError);
    source.freeSegment(c);
    assert.equal(source.reservedBytes, 0);
  });

  it("refuses past the capacity, for a fixed segment and for a bad length, changing nothing", () => {
    const source = new HostSegmentSource({ capacityBytes: 8192 });
    const a = source.tryAllocateSegment(4096, { resizable: true })!;
    assert.equal(source.tryResizeSegment(a, 16384), undefined);
    assert.throws(() => source.tryResizeSegment(a, 0), InvalidArgumentError);
    assert.throws(() => source.tryResizeSegment(a, 1.5), InvalidArgumentError);
    assert.equal(a.memory.byteLength, 4096);
    const fixed = source.tryAllocateSegment(1024)!;
    assert.equal(source.tryResizeSegment(fixed, 2048), undefined);
    assert.equal(source.reservedBytes, 5120);
  });

  it("only grows a shared segment", () => {
    const source = new HostSegmentSource({ shared: true });
    const a = source.tryAllocateSegment(4096, { resizable: true })!;
    const b = source.tryResizeSegment(a, 8192)!;
    assert.equal(b.memory, a.memory);
    assert.equal(source.tryResizeSegment(b, 4096), undefined);
    assert.equal(source.reservedBytes, 8192);
  });
});
