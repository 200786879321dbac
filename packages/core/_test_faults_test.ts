import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Device } from "./device.ts";
import { MockSegmentSource } from "./segment_source.ts";
import {
  checkPattern,
  FaultyAllocator,
  FaultyFence,
  FaultySegmentSource,
  FirstFitAllocator,
  InjectedFault,
  writePattern,
} from "./_test_faults.ts";

describe("_test_faults", () => {
  it("FaultyAllocator misbehaves once per arm() and frees what it handed out", () => {
    const base = new FirstFitAllocator(Device.cpu(), 4096);
    const a = new FaultyAllocator(base);
    a.arm("throw");
    assert.throws(() => a.allocate(8), InjectedFault);
    a.arm("short");
    const short = a.allocate(16);
    assert.equal(short.byteLength, 15);
    a.arm("misaligned");
    const odd = a.allocate(16);
    assert.equal(odd.byteOffset % 8, 1);
    a.arm("released");
    assert.ok(a.allocate(8).released);
    const ok = a.allocate(8);
    a.arm("duplicate");
    assert.equal(a.allocate(8), ok);
    a.arm("deleter-throws");
    assert.throws(() => ok.release(), InjectedFault);
    for (const p of [short, odd]) p.release();
    assert.equal(a.liveCount, 0);
    assert.equal(base.live.size, 0);
  });

  it("FaultySegmentSource lies about segments and still frees the real ones", () => {
    const inner = new MockSegmentSource({ capacityBytes: 1 << 20 });
    const s = new FaultySegmentSource(inner);
    s.arm("short");
    const short = s.tryAllocateSegment(1024)!;
    assert.equal(short.byteLength, 512);
    s.arm("misaligned");
    const odd = s.tryAllocateSegment(1024)!;
    assert.equal(odd.byteOffset, 1);
    s.arm("throw");
    assert.throws(() => s.tryAllocateSegment(1024), InjectedFault);
    s.freeSegment(short);
    s.arm("free-throws");
    assert.throws(() => s.freeSegment(odd), InjectedFault);
    assert.equal(inner.reservedBytes, 0);
  });

  it("FaultyFence completes twice, never, or throws on its first read", async () => {
    const twice = new FaultyFence("completes-twice");
    twice.complete();
    assert.deepEqual([twice.completed, twice.completed, twice.completed], [
      true,
      false,
      true,
    ]);
    const never = new FaultyFence("never");
    never.complete();
    assert.equal(never.completed, false);
    const throws = new FaultyFence("completed-throws");
    assert.throws(() => throws.completed, InjectedFault);
    assert.equal(throws.completed, false);
    await assert.rejects(new FaultyFence("wait-rejects").wait(), InjectedFault);
  });

  it("writePattern()/checkPattern() catch one changed byte", () => {
    const bytes = new Uint8Array(64);
    writePattern(bytes, 7);
    checkPattern(bytes, 7);
    bytes[33] ^= 1;
    assert.throws(() => checkPattern(bytes, 7), /byte 33/);
    assert.throws(() => checkPattern(new Uint8Array(64).fill(0), 7));
  });
});
