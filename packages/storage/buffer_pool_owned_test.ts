import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type DataPtr, DoubleFreeError, UseAfterFreeError } from "@allot/core";
import { CpuAllocator } from "@allot/cpu";
import { BufferPool } from "./buffer_pool.ts";

const bytes = (p: DataPtr): Uint8Array =>
  new Uint8Array(p.memory as ArrayBuffer, p.byteOffset, 256);

// One owner per block: every acquire hands out a fresh handle of the pooled
// block, and recycle invalidates it, so a stale handle cannot recycle the
// block again once another holder acquired it.
describe("BufferPool: one owner per block", () => {
  it("recycle through a stale handle is refused after the block was acquired again, changing nothing", () => {
    const cpu = new CpuAllocator({ byteLength: 1 << 16 });
    const pool = new BufferPool(cpu);
    const a = pool.acquire(256);
    const place = a.byteOffset;
    pool.recycle(a);
    const b = pool.acquire(256);
    assert.notEqual(b, a);
    assert.equal(b.byteOffset, place); // the same block, a fresh handle
    bytes(b).fill(0xab);
    const before = pool.stats();
    assert.throws(() => pool.recycle(a), DoubleFreeError);
    assert.deepEqual(pool.stats(), before);
    assert.equal(pool.owns(b), true);
    // The block stays b's: the next acquire gets another block.
    const c = pool.acquire(256);
    bytes(c).fill(0xcd);
    assert.ok(
      bytes(b).every((x) => x === 0xab),
    );
    assert.throws(() => a.memory, UseAfterFreeError); // a is invalid
    pool.recycle(b);
    pool.recycle(c);
    assert.equal(pool.stats().inUseHandles, 0);
    pool.cleanup();
    assert.equal(cpu.allocatedBytes, 0);
  });

  it("a handle released directly frees its block to the allocator, and the pool forgets it", () => {
    const cpu = new CpuAllocator({ byteLength: 1 << 16 });
    const pool = new BufferPool(cpu);
    const a = pool.acquire(100);
    a.release();
    assert.equal(cpu.allocatedBytes, 0);
    assert.equal(pool.stats().inUseHandles, 0);
    assert.equal(pool.stats().reserved.current, 0);
    pool.validate();
    // The allocator may give the block out again: the pool takes it.
    const b = pool.acquire(100);
    pool.recycle(b);
    pool.cleanup();
    assert.equal(cpu.allocatedBytes, 0);
  });
});
