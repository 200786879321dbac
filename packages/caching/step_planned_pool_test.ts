import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  DoubleFreeError,
  InvalidArgumentError,
  MockSegmentSource,
  OutOfMemoryError,
} from "@allot/core";
import { StepPlannedPool } from "./step_planned_pool.ts";

const source = (capacityBytes = 2 ** 30) =>
  new MockSegmentSource({ capacityBytes, alignment: 256 });

/** A step of a small network: activations of falling then rising sizes. */
function step(pool: StepPlannedPool, sizes: number[]) {
  let prev = pool.allocate(sizes[0]);
  for (const s of sizes.slice(1)) {
    const next = pool.allocate(s);
    pool.free(prev);
    prev = next;
  }
  pool.free(prev);
  pool.endStep();
}

describe("StepPlannedPool", () => {
  it("makes no segment after the first steps when steps repeat, and holds the planned bound", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    const sizes = [
      1 << 20,
      3 << 19,
      1 << 19,
      5 << 18,
      1 << 18,
      3 << 20,
      1 << 16,
    ];
    step(pool, sizes);
    step(pool, sizes);
    const made = src.allocationCount;
    for (let i = 0; i < 10; i++) step(pool, sizes);
    assert.equal(src.allocationCount, made);
    // the largest pair live at once is 3 MiB + 1.25 MiB
    assert.ok(
      pool.reservedBytes <= (3 << 20) + (5 << 18),
      `held ${pool.reservedBytes}`,
    );
    pool.validate();
  });

  it("before the first plan, a block that would split a free one over 1.5 times its size gets its own segment", () => {
    // marked: the second step's small block (optimizer state made mid-step)
    // stays out of the freed activation segment, which then stays whole
    const src = source();
    const pool = new StepPlannedPool(src);
    // a first step that frees nothing (weights made): no plan, no arena
    pool.allocate(1024);
    pool.endStep();
    const big = pool.allocate(1 << 16);
    pool.free(big);
    const made = src.allocationCount;
    const state = pool.allocate(4096);
    assert.equal(src.allocationCount, made + 1);
    assert.equal(state.byteLength, 4096);
    assert.equal(pool.segmentCount, 3);
    pool.validate();
  });

  it("before the first plan, a free block up to 1.5 times the request is split", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    pool.allocate(1024);
    pool.endStep();
    pool.free(pool.allocate(6144));
    const made = src.allocationCount;
    const block = pool.allocate(4096);
    assert.equal(src.allocationCount, made);
    assert.equal(block.byteLength, 4096);
    pool.validate();
  });

  it("a step's end gives back free segments the window's steps used only far above the ratio; idle ones first", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    // one step peaks at two 64 KiB blocks, then 70 steps keep one (freed
    // and made again each step: it outlives its step, so no arena)
    const a = pool.allocate(1 << 16), b = pool.allocate(1 << 16);
    pool.endStep();
    pool.free(a);
    pool.free(b);
    let x = pool.allocate(1 << 16);
    pool.endStep();
    for (let s = 0; s < 70; s++) {
      pool.free(x);
      x = pool.allocate(1 << 16);
      pool.endStep();
      // within the window the old peak allows both
      if (s < 60) assert.equal(pool.reservedBytes, 2 << 16);
    }
    // the peak left the window: held was twice the ratio's bound, and both
    // segments were used lately (best fit takes the longest free)
    assert.equal(pool.reservedBytes, 1 << 16);
    assert.equal(src.allocationCount, 2);
    assert.equal(pool.arenaByteLength, 0);
    pool.free(x);
    pool.validate();
  });

  it("steps that alternate each follow their own plan", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    const a = [1 << 20, 1 << 19, 1 << 20];
    const b = [4096, 1 << 21, 8192, 1 << 21];
    for (let i = 0; i < 3; i++) {
      step(pool, a);
      step(pool, b);
    }
    const made = src.allocationCount;
    const replans = pool.replanCount;
    for (let i = 0; i < 5; i++) {
      step(pool, a);
      step(pool, b);
    }
    assert.equal(src.allocationCount, made);
    assert.equal(pool.replanCount, replans);
  });

  it("steps that never repeat back planning off; a step that repeats is planned and followed again", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    // a growing cache: each step's sizes differ from every earlier step
    for (let i = 1; i <= 64; i++) {
      step(pool, [4096, i * 1024, 8192, i * 1024 + 512]);
    }
    // planning every step would be 64 plans; backing off leaves few
    assert.ok(pool.replanCount <= 16, `replans ${pool.replanCount}`);
    pool.validate();
    // then the work settles: within one back-off interval it is planned,
    // after which it follows its plan (no plan, no segment made)
    const sizes = [1 << 20, 3 << 19, 1 << 19, 5 << 18];
    for (let i = 0; i < 40; i++) step(pool, sizes);
    const made = src.allocationCount;
    const replans = pool.replanCount;
    for (let i = 0; i < 10; i++) step(pool, sizes);
    assert.equal(pool.replanCount, replans);
    assert.equal(src.allocationCount, made);
    // and a new pattern that differs once is planned at once again
    const other = [1 << 21, 4096, 1 << 21];
    step(pool, other);
    assert.equal(pool.replanCount, replans + 1);
    pool.validate();
  });

  it("blocks that grow a little each step (a KV cache) get segments with room, within the held ratio", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    let caches = [pool.allocate(4096), pool.allocate(4096)];
    for (let i = 1; i <= 48; i++) {
      const scratch = pool.allocate(65536);
      const next = caches.map(() => pool.allocate(4096 + i * 512));
      for (const c of caches) pool.free(c);
      pool.free(scratch);
      caches = next;
      pool.endStep();
      pool.validate();
    }
    // exact segments only: 96 made here
    assert.ok(src.allocationCount <= 85, `made ${src.allocationCount}`);
    assert.ok(
      pool.peakReservedBytes <= 1.1 * pool.peakRequestedBytes,
      `held ${pool.peakReservedBytes} for ${pool.peakRequestedBytes} live`,
    );
  });

  it("refuses bad sizes and foreign or freed blocks, changing nothing", () => {
    const pool = new StepPlannedPool(source());
    const a = pool.allocate(100);
    for (const bad of [-1, 1.5, NaN, 2 ** 53]) {
      assert.throws(() => pool.allocate(bad), InvalidArgumentError);
    }
    const other = new StepPlannedPool(source()).allocate(100);
    // another pool's block: a handle this pool does not hold
    assert.throws(() => pool.free(other), DoubleFreeError);
    assert.throws(() => pool.free({} as never), InvalidArgumentError);
    // 0 bytes: an ordinary block (one alignment unit), counted as 0
    const zero = pool.allocate(0);
    assert.equal(zero.requestedByteLength, 0);
    assert.ok(zero.byteLength > 0);
    assert.equal(pool.requestedBytes, 100);
    pool.free(zero);
    pool.free(a);
    assert.throws(() => pool.free(a), DoubleFreeError);
    const b = pool.allocate(100);
    assert.throws(
      () => pool.free(a),
      DoubleFreeError,
      "a stale handle never frees a new block",
    );
    assert.equal(pool.requestedBytes, 100);
    pool.free(b);
    assert.throws(
      () => new StepPlannedPool(source(), { maxHeldRatio: 0.5 }),
      InvalidArgumentError,
    );
  });

  it("reports out of memory with the figures and keeps its state", () => {
    const pool = new StepPlannedPool(source(1 << 20));
    const a = pool.allocate(1 << 19);
    assert.throws(() => pool.allocate(1 << 20), (e: unknown) => {
      assert.ok(e instanceof OutOfMemoryError);
      assert.equal(e.requestedBytes, 1 << 20);
      assert.equal(e.allocatedBytes, 1 << 19);
      return true;
    });
    assert.equal(pool.tryAllocate(1 << 20), undefined);
    assert.equal(pool.requestedBytes, 1 << 19);
    pool.free(a);
    assert.ok(pool.allocate(1 << 20));
  });

  it("a segment made above the ratio gives back the free segments too small for the request first, before a larger free one", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    const x = pool.allocate(900 * 1024); // live: peak 1,100 KiB with L
    const large = pool.allocate(200 * 1024);
    pool.free(large); // L: free, 200 KiB, too loose to split for 100 KiB
    const small = pool.allocate(60 * 1024);
    pool.free(small); // S: free, 60 KiB, too small for 100 KiB
    assert.equal(pool.reservedBytes, 1160 * 1024);
    // 1,160 + 100 KiB is above 1.1 x 1,100 KiB: one segment goes, S
    const y = pool.allocate(100 * 1024);
    assert.equal(pool.segmentsReleased, 1);
    assert.equal(pool.reservedBytes, 1200 * 1024);
    for (const b of [x, y]) pool.free(b);
    pool.emptyCache();
    assert.equal(src.reservedBytes, 0);
  });

  it("trim(target) gives free segments back down to the target", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    const blocks = [1 << 20, 1 << 19, 1 << 18].map((n) => pool.allocate(n));
    const keep = pool.allocate(4096);
    for (const b of blocks) pool.free(b);
    assert.ok(pool.reservedBytes > 1 << 20);
    assert.equal(pool.trim(1 << 19), pool.reservedBytes);
    assert.ok(pool.reservedBytes <= 1 << 19);
    assert.equal(pool.trim(0), 4096);
    assert.equal(src.reservedBytes, 4096);
    assert.throws(() => pool.trim(-1), InvalidArgumentError);
    pool.free(keep);
    pool.emptyCache();
    assert.equal(src.reservedBytes, 0);
  });
});
