// The free stacks keep stale entries (buddies a merge absorbed, units freed
// again while a stale entry of them is still there) and drop them in one
// pass when a stack grows past twice its free blocks plus a slack. These
// tests drive many merges through small pools, so stacks compact over and
// over, and check against a model of the live blocks: every free block stays
// listed (validate()), no block is handed out twice, and the free blocks
// are exactly what eager merging leaves (the largest free block matches the
// model's).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "../core/_test_faults.ts";
import {
  largestFree,
  LiveBlocks,
  MIN,
  onePool,
  POOL,
} from "./_test_one_pool.ts";

describe("BuddyAllocator free stacks", () => {
  it("stay bounded over a million merges of one small block (they compact)", () => {
    const buddy = onePool();
    // Each cycle splits the pool down to order 0 and merges it back: one
    // stale entry per order per cycle. Without compaction stack 0 holds
    // 1,000 entries, past validate()'s bound of 2 * 256 + 64.
    for (let i = 0; i < 1000; i++) {
      const a = buddy.alloc(1);
      assert.equal(a, 0);
      buddy.free(a);
    }
    buddy.validate();
    assert.equal(buddy.largestFreeBytes, POOL);
  });

  it("model: long runs of small allocations and frees keep every free block listed and merged", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.nat(9),
            fc.oneof(
              { weight: 4, arbitrary: fc.nat(MIN) },
              { weight: 2, arbitrary: fc.nat(4 * MIN) },
              { weight: 1, arbitrary: fc.nat(POOL / 2) },
            ),
            fc.nat(),
          ),
          { minLength: 200, maxLength: 1500 },
        ),
        (ops) => {
          const buddy = onePool();
          const blocks = new LiveBlocks(buddy);
          const live = blocks.live;
          for (const [kind, byteLength, pick] of ops) {
            if (kind === 9) {
              // Up to 200 splits and merges of one block beside the live
              // ones: a stale entry per merge, so the stacks compact while
              // they hold free blocks that must stay listed.
              for (let i = pick % 200; i > 0; i--) {
                let address: number;
                try {
                  address = buddy.alloc(byteLength);
                } catch {
                  break;
                }
                buddy.free(address);
              }
            } else if (kind < 5 || live.length === 0) {
              let address: number;
              try {
                address = buddy.alloc(byteLength);
              } catch {
                // Refused only when no free block is long enough.
                assert.ok(Math.max(byteLength, 1) > largestFree(live));
                continue;
              }
              // Never a block already live (a stale entry popped as free).
              blocks.add(address, byteLength);
            } else {
              blocks.remove(pick);
            }
            // (No pool before the first allocation: a kind-9 step that
            // allocates nothing may come first.)
            assert.equal(
              buddy.largestFreeBytes,
              buddy.poolCount === 0 ? 0 : largestFree(live),
            );
          }
          buddy.validate();
          for (const b of live) buddy.free(b.address);
          buddy.validate();
          assert.equal(buddy.largestFreeBytes, buddy.poolCount * POOL);
        },
      ),
      { numRuns: modelRuns(200) },
    );
  });
});
