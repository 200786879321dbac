import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type MockMemory,
  MockSegmentSource,
  UnsupportedOperationError,
  UseAfterFreeError,
} from "@allot/core";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";
import { StepPoolGroup } from "./step_pool_group.ts";

const source = () => new MockSegmentSource({ alignment: 256 });

/** Runs a few steps of mixed requests, freeing them all at each end. */
function work(pool: StepPlannedPool<MockMemory>, sizes: number[]): void {
  for (let step = 0; step < 3; step++) {
    const blocks = sizes.map((s) => pool.allocate(s));
    for (const b of blocks) pool.free(b);
    pool.endStep();
  }
}

describe("StepPlannedPool.dispose", () => {
  it("gives every segment back and refuses later calls", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    work(pool, [4096, 1 << 16, 300]);
    const kept = pool.allocate(512);
    pool.free(kept);
    assert.ok(src.liveSegmentCount > 0);
    pool.dispose();
    assert.equal(pool.disposed, true);
    assert.equal(src.liveSegmentCount, 0);
    assert.equal(src.reservedBytes, 0);
    assert.equal(pool.reservedBytes, 0);
    assert.equal(pool.requestedBytes, 0);
    pool.validate();
    assert.throws(() => pool.allocate(8), UseAfterFreeError);
    assert.throws(() => pool.tryAllocate(8), UseAfterFreeError);
    assert.throws(() => pool.free(kept), UseAfterFreeError);
    assert.throws(() => pool.endStep(), UseAfterFreeError);
    assert.throws(() => pool.trim(), UseAfterFreeError);
    assert.throws(() => pool.emptyCache(), UseAfterFreeError);
    pool.dispose(); // a second dispose does nothing
    assert.equal(src.freeCount, src.allocationCount);
  });

  it("disposes a pool on its fast path", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    for (let step = 0; step < 40; step++) {
      const a = pool.allocate(1024);
      const b = pool.allocate(4096);
      pool.free(a);
      pool.free(b);
      pool.endStep();
    }
    pool.dispose();
    assert.equal(src.liveSegmentCount, 0);
  });

  it("refuses while blocks are live, changing nothing", () => {
    const src = source();
    const group = new StepPoolGroup();
    const pool = new StepPlannedPool(src, { group, strict: true });
    work(pool, [2048, 8192]);
    const live = [pool.allocate(1000), pool.allocate(3000)];
    const before = [
      pool.reservedBytes,
      pool.requestedBytes,
      src.liveSegmentCount,
      group.poolCount,
      group.reservedBytes,
      group.requestedBytes,
    ];
    assert.throws(
      () => pool.dispose(),
      (e: unknown) =>
        e instanceof UnsupportedOperationError &&
        /2 blocks \(4000 bytes\)/.test(e.message),
    );
    assert.equal(pool.disposed, false);
    assert.deepEqual([
      pool.reservedBytes,
      pool.requestedBytes,
      src.liveSegmentCount,
      group.poolCount,
      group.reservedBytes,
      group.requestedBytes,
    ], before);
    pool.validate();
    for (const b of live) pool.free(b);
    pool.endStep(); // still usable
    pool[Symbol.dispose]();
    assert.equal(pool.disposed, true);
    assert.equal(group.poolCount, 0);
  });

  it("leaves its group; the group's figures stay consistent", () => {
    const group = new StepPoolGroup();
    const a = new StepPlannedPool(source(), { group });
    const b = new StepPlannedPool(source(), { group });
    const kept: PlannedBlock<MockMemory>[] = [b.allocate(1 << 20)];
    a.free(a.allocate(4 << 20));
    group.endStep();
    const peak = group.peakRequestedBytes;
    assert.equal(group.poolCount, 2);
    {
      using c = new StepPlannedPool(source(), { group });
      c.free(c.allocate(1 << 16));
      assert.equal(group.poolCount, 3);
    }
    assert.equal(group.poolCount, 2);
    a.dispose();
    assert.equal(group.poolCount, 1);
    assert.equal(group.reservedBytes, b.reservedBytes);
    assert.equal(group.requestedBytes, b.requestedBytes);
    assert.equal(group.peakRequestedBytes, peak);
    // the group no longer drives the disposed pool
    group.endStep();
    kept.push(b.allocate(1 << 20));
    group.endStep();
    assert.equal(a.reservedBytes, 0);
    assert.equal(group.reservedBytes, b.reservedBytes);
    for (const k of kept) b.free(k);
    b.dispose();
    assert.equal(group.poolCount, 0);
    assert.equal(group.reservedBytes, 0);
    assert.equal(group.requestedBytes, 0);
  });

  it("model: pools made and dropped per session leave the group", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.array(fc.integer({ min: 1, max: 1 << 18 }), {
            minLength: 1,
            maxLength: 6,
          }),
          { minLength: 1, maxLength: 8 },
        ),
        (sessions) => {
          const group = new StepPoolGroup();
          const src = source();
          const lasting = new StepPlannedPool(src, { group });
          const held = lasting.allocate(4096);
          for (const sizes of sessions) {
            const s = source();
            const pool = new StepPlannedPool(s, { group });
            const blocks = sizes.map((n) => pool.allocate(n));
            group.endStep();
            assert.throws(() => pool.dispose(), UnsupportedOperationError);
            assert.equal(group.poolCount, 2);
            for (const b of blocks) pool.free(b);
            pool.dispose();
            assert.equal(s.liveSegmentCount, 0);
            assert.equal(group.poolCount, 1);
            assert.equal(group.reservedBytes, lasting.reservedBytes);
            assert.equal(group.requestedBytes, lasting.requestedBytes);
            assert.ok(group.peakRequestedBytes >= group.requestedBytes);
            group.endStep();
          }
          lasting.free(held);
          lasting.dispose();
          assert.equal(src.liveSegmentCount, 0);
          assert.equal(group.poolCount, 0);
        },
      ),
      { numRuns: 100 },
    );
  });
});
