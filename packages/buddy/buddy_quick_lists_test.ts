// A freed block goes to a quick list of its order (at most
// `quickListLength` blocks per order, 32 by default), unmerged, and the next allocation of that order takes it back
// (no split, no merge); a request that finds no free block coalesces the
// quick lists before it takes a new pool, and so do trim(),
// largestFreeBytes, stats() and snapshot(). These tests drive the quick
// path without anything that coalesces between steps (only alloc, free,
// bytes and validate, which does not), against a model of the live blocks:
// no block is handed out twice, every live block keeps its bytes, a request
// is refused only when eager merging would leave no block long enough, and
// validate() holds after every step.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "../core/_test_faults.ts";
import { DoubleFreeError, InvalidArgumentError } from "@allot/core";
import {
  largestFree,
  LiveBlocks,
  MIN,
  onePool,
  POOL,
} from "./_test_one_pool.ts";
import { PlaceAllocator } from "./place_allocator.ts";

describe("BuddyAllocator quick lists", () => {
  it("hand a freed block back to the next allocation of its order, unmerged", () => {
    const buddy = onePool();
    const a = buddy.alloc(100); // 128 bytes: the pool split down to order 3
    const b = buddy.alloc(100);
    buddy.free(a);
    buddy.validate();
    // a's buddy b is live: a would not merge anyway; a is taken back.
    assert.equal(buddy.alloc(120), a);
    buddy.free(b);
    buddy.free(a);
    buddy.validate();
    // Both wait unmerged in the quick list of order 3 (LIFO): a first.
    assert.equal(buddy.alloc(128), a);
    assert.equal(buddy.alloc(128), b);
    buddy.free(a);
    buddy.free(b);
    // A request no free block serves coalesces them: the whole pool.
    assert.equal(buddy.alloc(POOL), 0);
    assert.equal(buddy.poolCount, 1);
    buddy.free(0);
    assert.equal(buddy.largestFreeBytes, POOL);
    assert.equal(buddy.trim(), POOL);
  });

  it("merge the waiting blocks of lower orders before a split: the request takes their place", () => {
    const buddy = onePool();
    const a = buddy.alloc(MIN); // unit 0: the pool split down to order 0
    const b = buddy.alloc(MIN); // unit 1
    const c = buddy.alloc(2 * MIN); // units 2-3: no free block of order 1 left
    assert.deepEqual([a, b, c], [0, MIN, 2 * MIN]);
    buddy.free(a);
    buddy.free(b);
    // No free block of order 1: a and b merge into one rather than the
    // order-2 block at 4 * MIN being split.
    assert.equal(buddy.alloc(2 * MIN), 0);
    buddy.validate();
  });

  it("refuse a block waiting in a quick list: free, bytes and byteLengthOf are DoubleFreeErrors, and nothing changes", () => {
    const buddy = onePool();
    const a = buddy.alloc(64);
    const keep = buddy.alloc(64);
    buddy.free(a);
    assert.throws(() => buddy.free(a), DoubleFreeError);
    assert.throws(() => buddy.bytes(a, 1), DoubleFreeError);
    assert.throws(() => buddy.byteLengthOf(a), DoubleFreeError);
    assert.throws(() => buddy.view(a, Uint8Array), DoubleFreeError);
    buddy.validate();
    assert.equal(buddy.allocatedBytes, 64);
    assert.equal(buddy.alloc(64), a); // still listed once
    assert.notEqual(buddy.alloc(64), a);
    buddy.free(keep);
  });

  it("hold at most 32 blocks of an order; the rest merge on free", () => {
    const buddy = onePool();
    const blocks = Array.from({ length: 200 }, () => buddy.alloc(MIN));
    for (const at of blocks) {
      buddy.free(at);
      buddy.validate(); // checks the bound and that each block is listed
    }
    assert.equal(buddy.allocatedBytes, 0);
    assert.equal(buddy.largestFreeBytes, POOL);
    assert.equal(buddy.stats().largestFreeBytes, POOL);
  });

  it("coalesce before trim(), snapshot() and stats()", () => {
    for (const observe of ["trim", "snapshot", "stats"] as const) {
      const buddy = onePool();
      const blocks = Array.from({ length: 8 }, () => buddy.alloc(MIN));
      for (const at of blocks) buddy.free(at);
      if (observe === "trim") {
        assert.equal(buddy.trim(), POOL);
        assert.equal(buddy.poolCount, 0);
      } else if (observe === "snapshot") {
        const blocksSeen = buddy.snapshot().segments[0].blocks;
        assert.deepEqual(
          blocksSeen.map((b) => [b.offset, b.byteLength, b.state]),
          [[0, POOL, "inactive"]],
        );
      } else {
        assert.equal(buddy.stats().largestFreeBytes, POOL);
      }
      buddy.validate();
    }
  });

  it("quickListLength: 0 merges every free at once; a bound of n holds n blocks; hostile values are refused with the option, the value and the limit", () => {
    // [quickListLength, first allocation after freeing a then b, after
    // freeing a, b, c beside a live d]
    const cases: [number, number, number][] = [
      [0, 0, 2 * MIN],
      [1, 0, 0],
      [32, MIN, 2 * MIN],
    ];
    for (const [length, ab, abc] of cases) {
      let buddy = onePool(length);
      assert.equal(buddy.quickListLength, length);
      let [a, b] = [buddy.alloc(MIN), buddy.alloc(MIN)];
      buddy.free(a);
      buddy.free(b);
      buddy.validate();
      // Eager: a and b merged (up to the whole pool), so the pool is split
      // again from unit 0. Quick lists: b, the last freed, comes back.
      assert.equal(buddy.alloc(MIN), ab, `quickListLength ${length}`);
      buddy = onePool(length);
      [a, b] = [buddy.alloc(MIN), buddy.alloc(MIN)];
      const c = buddy.alloc(MIN);
      buddy.alloc(MIN); // d, c's buddy, stays live
      for (const at of [a, b, c]) buddy.free(at);
      buddy.validate();
      // Eager: a and b merged, c waits in stack 0 and comes back. One
      // quick block: a waits there (b and c went to the stacks) and comes
      // back first. 32: c, the last freed.
      assert.equal(buddy.alloc(MIN), abc, `quickListLength ${length}`);
    }
    assert.equal(onePool().quickListLength, 32);
    for (const value of [-1, 1.5, 2 ** 16 + 1, NaN, "8", 8n, null, {}]) {
      assert.throws(
        () => onePool(value as number),
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          e.argument === "quickListLength" && e.limit !== undefined &&
          e.message.includes("quickListLength"),
        String(value),
      );
      assert.throws(
        () => new PlaceAllocator({ quickListLength: value as number }),
        InvalidArgumentError,
      );
    }
  });

  it("model: allocations and frees with nothing coalescing between them keep every live block's bytes, and refuse only what eager merging could not serve (quick lists of 0, 1 and 32 blocks)", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(0, 1, 32),
        fc.array(
          fc.tuple(
            fc.nat(9),
            fc.oneof(
              { weight: 4, arbitrary: fc.nat(MIN) },
              { weight: 2, arbitrary: fc.nat(8 * MIN) },
              { weight: 1, arbitrary: fc.nat(POOL) },
            ),
            fc.nat(),
          ),
          { minLength: 100, maxLength: 1200 },
        ),
        (quickListLength, ops) => {
          const buddy = onePool(quickListLength);
          const blocks = new LiveBlocks(buddy);
          const live = blocks.live;
          for (const [kind, byteLength, pick] of ops) {
            if (kind < 5 || live.length === 0) {
              let address: number;
              try {
                address = buddy.alloc(byteLength);
              } catch {
                // Refused only when no free block is long enough once
                // merged: the quick lists were coalesced first.
                assert.ok(
                  Math.max(byteLength, 1) > largestFree(live),
                  `refused ${byteLength} with ${largestFree(live)} free`,
                );
                continue;
              }
              const length = blocks.add(address, byteLength);
              assert.ok(length < 2 * Math.max(byteLength, MIN));
            } else {
              const b = blocks.remove(pick);
              assert.throws(() => buddy.free(b.address), DoubleFreeError);
            }
            buddy.validate(); // does not coalesce
            assert.equal(
              buddy.allocatedBytes,
              live.reduce((sum, b) => sum + b.length, 0),
            );
          }
          for (const b of live) buddy.free(b.address);
          buddy.validate();
          const pools = buddy.poolCount;
          assert.equal(buddy.largestFreeBytes, pools * POOL);
          assert.equal(buddy.trim(), pools * POOL);
        },
      ),
      { numRuns: modelRuns(200) },
    );
  });
});
