/**
 * `snapshot()` of the planned pools on a planned (fast) step, where the
 * arena's blocks sit at planned offsets, and of `SharedHeap` with blocks of
 * several threads' handles: the blocks tile each segment and the live ones
 * are exactly the blocks held.
 *
 * @module
 */

import assert from "node:assert/strict";
import { StepPlannedPool } from "@allot/caching";
import { HostSegmentSource } from "@allot/cpu";
import type { MemorySnapshot } from "@allot/core";
import { SharedHeap } from "@allot/threads";

/** Blocks tile their segments; returns the live blocks as [address, length]. */
function liveOf(snap: MemorySnapshot): [number, number][] {
  const out: [number, number][] = [];
  for (const seg of snap.segments) {
    let at = 0;
    for (const b of seg.blocks) {
      assert.equal(b.offset, at, "blocks tile their segment in order");
      assert.equal(b.address, seg.address + b.offset);
      at += b.byteLength;
      if (b.state === "active_allocated") out.push([b.address, b.byteLength]);
    }
    assert.equal(at, seg.byteLength, "blocks cover their segment");
  }
  assert.deepEqual(JSON.parse(JSON.stringify(snap)), snap, "plain data");
  return out;
}

Deno.test("StepPlannedPool.snapshot() pictures a planned step's arena", () => {
  const pool = new StepPlannedPool(new HostSegmentSource());
  const sizes = [1000, 64, 70_000, 3000, 5];
  for (let step = 0; step < 4; step++) {
    const blocks = sizes.map((n) => pool.allocate(n));
    pool.free(blocks[1]);
    if (step === 3) {
      assert.ok(pool.stats().fastStepCount > 0, "a planned step");
      const live = liveOf(pool.snapshot());
      assert.equal(live.length, sizes.length - 1, "each live block once");
      const want = blocks.filter((_, i) => i !== 1).map((b) => b.byteLength)
        .sort((a, b) => a - b);
      assert.deepEqual(live.map(([, n]) => n).sort((a, b) => a - b), want);
      const requested = pool.snapshot().segments.reduce(
        (n, s) => n + s.requestedBytes,
        0,
      );
      assert.equal(requested, pool.stats().requestedBytes.current);
    }
    for (const [i, b] of blocks.entries()) if (i !== 1) pool.free(b);
    pool.endStep();
  }
  assert.equal(liveOf(pool.snapshot()).length, 0);
  pool.emptyCache();
});

Deno.test("SharedHeap.snapshot() shows every handle's blocks, cached spans inactive", () => {
  using heap = SharedHeap.create(8 << 20);
  using other = SharedHeap.attach(heap.descriptor());
  const mine = [heap.alloc(100), heap.alloc(20_000), heap.alloc(9000)];
  const theirs = [other.alloc(5000), other.alloc(300_000)];
  other.free(theirs[1]); // kept in its arena's span cache
  const live = liveOf(heap.snapshot());
  const want = [...mine, theirs[0]].map((o) => [o, heap.usableByteLength(o)]);
  assert.deepEqual(
    live.sort((a, b) => a[0] - b[0]),
    want.sort((a, b) => a[0] - b[0]),
  );
  const cached = heap.snapshot().segments.filter((s) =>
    s.blocks.some((b) => b.state === "inactive" && b.address === theirs[1])
  );
  assert.equal(cached.length, 1, "the cached span is an inactive segment");
  const bytes = live.reduce((n, [, l]) => n + l, 0);
  assert.equal(bytes, heap.stats().allocatedBytes.current);
  for (const o of mine) heap.free(o);
  other.free(theirs[0]);
});
