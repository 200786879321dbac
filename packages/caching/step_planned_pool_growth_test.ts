// StepPlannedPool on work whose steps drift (a KV cache grown each step, a
// batch size that changes): small blocks kept apart from large ones, a
// pool of a few small requests that keeps its segment, outgrown segments
// given back, room made only for growth seen twice.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MockSegmentSource } from "@allot/core";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";
import { StepPoolGroup } from "./step_pool_group.ts";

const source = () => new MockSegmentSource({ alignment: 256, backed: true });

/**
 * One pass of decoding: each step a scratch block, `caches` blocks grown by
 * 512 bytes (the new one made before the old one is freed) and a small
 * block kept to the pass's end (a token id).
 */
function decodePass(pool: StepPlannedPool, steps: number, caches = 4) {
  let live: PlannedBlock[] = [];
  const kept: PlannedBlock[] = [];
  for (let s = 0; s < steps; s++) {
    const scratch = pool.allocate(32768);
    const next = Array.from(
      { length: caches },
      () => pool.allocate(3584 + 512 * s),
    );
    for (const b of live) pool.free(b);
    live = next;
    kept.push(pool.allocate(4 + (s & 3) * 4));
    pool.free(scratch);
    pool.endStep();
  }
  for (const b of live) pool.free(b);
  for (const b of kept) pool.free(b);
  pool.endStep();
}

describe("StepPlannedPool on drifting steps", () => {
  it("a small block that outlives its step does not take a free segment a large request needs", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    for (let s = 0; s < 2; s++) {
      pool.free(pool.allocate(4096));
      pool.endStep();
    }
    const a = pool.allocate(8192);
    pool.free(a);
    const small = pool.allocate(256);
    const made = src.allocationCount;
    const b = pool.allocate(8192);
    assert.equal(b.memory, a.memory, "the free segment serves it again");
    assert.equal(src.allocationCount, made);
    assert.notEqual(small.memory, a.memory);
    pool.validate();
    pool.free(small);
    pool.free(b);
    pool.emptyCache();
    assert.equal(src.reservedBytes, 0);
  });

  it("a small block made while the arena is free does not pin it: a larger step gets a larger arena", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    for (let s = 0; s < 2; s++) {
      pool.free(pool.allocate(8192));
      pool.endStep();
    }
    const keep = pool.allocate(10_000);
    const frees = [20_000, 40_000, 60_000].map((n) => pool.allocate(n));
    for (const f of frees) pool.free(f);
    pool.free(keep);
    // outlives the step: in the arena, the arena could not be replaced
    const small = pool.allocate(256);
    pool.endStep();
    assert.ok(
      pool.arenaByteLength >= 130_000,
      `arena ${pool.arenaByteLength} bytes`,
    );
    assert.notEqual(small.memory, keep.memory);
    pool.validate();
    pool.free(small);
    pool.emptyCache();
    assert.equal(src.reservedBytes, 0);
  });

  it("a small request takes a large free range when the source refuses a segment for small requests", () => {
    const src = new MockSegmentSource({
      capacityBytes: 16384,
      alignment: 256,
      backed: true,
    });
    const pool = new StepPlannedPool(src);
    pool.free(pool.allocate(8192));
    const b = pool.allocate(6144); // 2 KiB of its segment left free
    const c = pool.allocate(8192); // the source is full
    const small = pool.allocate(100);
    assert.equal(small.memory, b.memory);
    pool.validate();
    for (const x of [b, c, small]) pool.free(x);
    pool.emptyCache();
    assert.equal(src.reservedBytes, 0);
  });

  it("a pool of a few small requests keeps its segments from pass to pass", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    const made: number[] = [];
    for (let pass = 0; pass < 6; pass++) {
      // uniforms made at a pass's start and kept to its end
      const uniforms = Array.from({ length: 8 }, () => pool.allocate(64));
      for (let s = 0; s < 10; s++) pool.endStep();
      for (const u of uniforms) pool.free(u);
      pool.endStep();
      pool.validate();
      made.push(src.allocationCount);
    }
    // (trimmed to the ratio of the bytes asked for, 512, the 256-byte
    // blocks went back at each pass's end and were made again)
    assert.equal(made[5], made[0], `segments made by pass: ${made}`);
    assert.ok(pool.reservedBytes <= 4096, `held ${pool.reservedBytes}`);
  });

  it("growing blocks and small blocks kept for a pass: no segment made once warm, within the held ratio", () => {
    for (const grouped of [false, true]) {
      const src = source();
      const group = grouped ? new StepPoolGroup() : undefined;
      const pool = new StepPlannedPool(src, { group });
      const made: number[] = [];
      for (let pass = 0; pass < 8; pass++) {
        decodePass(pool, 40);
        pool.validate();
        made.push(src.allocationCount);
      }
      assert.equal(made[7], made[4], `segments made by pass: ${made}`);
      assert.ok(
        pool.peakReservedBytes <= 1.1 * pool.peakRequestedBytes,
        `held ${pool.peakReservedBytes} for ${pool.peakRequestedBytes} live`,
      );
      pool.emptyCache();
      assert.equal(src.reservedBytes, 0);
    }
  });

  it("a request a little larger than a free segment gives it back; room is made once the growth is seen twice", () => {
    const src = source();
    const pool = new StepPlannedPool(src);
    // a large block live: held bytes are far within the bound below
    const big = pool.allocate(65536);
    pool.free(pool.allocate(4096));
    // a new shape a little larger: an exact segment, the outgrown one back
    const b = pool.allocate(4608);
    assert.equal(pool.reservedBytes, 65536 + 4608);
    assert.equal(pool.segmentsReleased, 1);
    pool.free(b);
    // it grows again: a segment with room for the next sizes
    const c = pool.allocate(5376);
    assert.equal(pool.reservedBytes, 65536 + 6144);
    const d = pool.allocate(600);
    pool.free(c);
    pool.free(d);
    pool.free(big);
    pool.validate();
    pool.emptyCache();
    assert.equal(src.reservedBytes, 0);
  });
});
