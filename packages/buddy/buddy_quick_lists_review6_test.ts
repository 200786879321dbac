// BuddyAllocator's quick lists from the outside (review 6): hostile
// `quickListLength` values (-0, infinities, the limit and one past it,
// strings, getters that throw or change between reads, keys it does not
// read), and a fast-check model over several pools in which every live block
// carries a byte pattern while allocations, frees, and everything that
// merges the quick lists (trim, snapshot, stats, largestFreeBytes, a request
// that needs a new pool, one that the backing refuses) run in any order:
// every pattern survives, validate() holds, the stats add up to the live
// blocks and the backing's bytes, and everything goes back at the end.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "../core/_test_faults.ts";
import {
  AllotError,
  type DataPtr,
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
} from "@allot/core";
import { SystemAllocator, type SystemMemory } from "@allot/cpu";
import { BuddyAllocator } from "./buddy_allocator.ts";
import { PlaceAllocator } from "./place_allocator.ts";

const MIN = 16;
const POOL = 1024; // 64 units, orders 0 to 6
const POOLS = 3;

/** A system allocator that refuses while `refuse` is set. */
class RefusingBacking extends SystemAllocator {
  refuse = false;
  refused = 0;
  override allocate(
    byteLength: number,
  ): DataPtr<SystemMemory, SystemMemory> {
    if (this.refuse) {
      this.refused++;
      throw new OutOfMemoryError(`refused ${byteLength} bytes (test)`, {
        requestedBytes: byteLength,
      });
    }
    return super.allocate(byteLength);
  }
}

function buddyOf(quickListLength: number, backing = new RefusingBacking()) {
  return new BuddyAllocator({
    initialPoolByteLength: POOL,
    maxPoolByteLength: POOLS * POOL,
    minBlockByteLength: MIN,
    quickListLength,
    backing,
  });
}

describe("BuddyAllocator quick lists (review 6)", () => {
  it("quickListLength: -0 is 0 (eager merging), the limit is taken, hostile values are refused and make nothing", () => {
    const zero = buddyOf(-0);
    assert.ok(Object.is(zero.quickListLength, 0) || zero.quickListLength === 0);
    const [a, b] = [zero.alloc(MIN), zero.alloc(MIN)];
    zero.free(a);
    zero.free(b);
    // eager: a and b merged back into the pool, which splits again from 0
    assert.equal(zero.alloc(MIN), 0);
    assert.equal(buddyOf(2 ** 16).quickListLength, 2 ** 16);
    const backing = new RefusingBacking();
    for (
      const value of [
        Infinity,
        -Infinity,
        2 ** 16 + 1,
        2 ** 53,
        -(2 ** 31),
        0.5,
        "",
        "32",
        true,
        [],
        [8],
        Symbol("q"),
        () => 8,
        new Number(8),
      ]
    ) {
      assert.throws(
        () => buddyOf(value as number, backing),
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          e.argument === "quickListLength",
        String(typeof value === "symbol" ? "symbol" : value),
      );
      assert.equal(backing.allocatedBytes, 0);
    }
    // a getter that throws: its error
    const boom = new Error("boom");
    assert.throws(
      () =>
        new BuddyAllocator({
          get quickListLength(): number {
            throw boom;
          },
        }),
      (e: unknown) => e === boom,
    );
    // keys it does not read
    for (const key of ["quickListlength", "quickLists", "quick"]) {
      assert.throws(
        () => new BuddyAllocator({ [key]: 8 } as never),
        InvalidArgumentError,
      );
      assert.throws(
        () => new PlaceAllocator({ [key]: 8 } as never),
        InvalidArgumentError,
      );
    }
  });

  it("quickListLength: a getter that changes between reads is read once", () => {
    let reads = 0;
    const buddy = new BuddyAllocator({
      initialPoolByteLength: POOL,
      minBlockByteLength: MIN,
      get quickListLength() {
        return reads++ === 0 ? 1 : 2 ** 20;
      },
    });
    assert.equal(reads, 1);
    assert.equal(buddy.quickListLength, 1);
    // one block waits; the second freed merges
    const blocks = [0, 1, 2, 3].map(() => buddy.alloc(MIN));
    for (const b of blocks) buddy.free(b);
    buddy.validate();
    assert.equal(buddy.alloc(MIN), blocks[0]);
  });

  it("a waiting block is a stale handle: free, bytes, byteLengthOf and view refuse it and change nothing, on every bound", () => {
    for (const length of [1, 32]) {
      const buddy = buddyOf(length);
      const a = buddy.alloc(100), b = buddy.alloc(100);
      buddy.bytes(b, 100).fill(0xab);
      buddy.free(a);
      const before = JSON.stringify(buddy.stats());
      assert.throws(() => buddy.free(a), DoubleFreeError);
      assert.throws(() => buddy.bytes(a, 1), DoubleFreeError);
      assert.throws(() => buddy.byteLengthOf(a), DoubleFreeError);
      assert.throws(() => buddy.view(a, Uint8Array), DoubleFreeError);
      // an address inside a waiting block, and one past every pool
      assert.throws(() => buddy.free(a + MIN), AllotError);
      assert.throws(() => buddy.free(POOLS * POOL * 4), AllotError);
      assert.equal(JSON.stringify(buddy.stats()), before);
      buddy.validate();
      assert.ok(buddy.bytes(b, 100).every((x) => x === 0xab));
      buddy.free(b);
      assert.equal(buddy.trim(), POOL);
    }
  });

  it("model: byte patterns in every live block survive allocations, frees, the merges of trim, snapshot, stats, largestFreeBytes and a refused new pool; the stats add up; everything goes back", () => {
    type Op =
      | { op: "alloc"; size: number }
      | { op: "free"; i: number }
      | { op: "refused"; size: number }
      | { op: "trim" | "snapshot" | "stats" | "largest" };
    const size = fc.oneof(
      fc.integer({ min: 0, max: 4 * MIN }),
      fc.integer({ min: 1, max: POOL }),
    );
    const op: fc.Arbitrary<Op> = fc.oneof(
      { weight: 8, arbitrary: fc.record({ op: fc.constant("alloc"), size }) },
      {
        weight: 7,
        arbitrary: fc.record({ op: fc.constant("free"), i: fc.nat() }),
      },
      {
        weight: 1,
        arbitrary: fc.record({ op: fc.constant("refused"), size }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          op: fc.constantFrom("trim", "snapshot", "stats", "largest"),
        }),
      },
    ) as fc.Arbitrary<Op>;
    let refusedMerges = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(0, 1, 2, 32),
        fc.array(op, { maxLength: 150, size: "max" }),
        (quickListLength, ops) => {
          const backing = new RefusingBacking();
          const buddy = buddyOf(quickListLength, backing);
          const live: { address: number; length: number; fill: number }[] = [];
          let fill = 1;
          const check = () => {
            buddy.validate();
            let allocated = 0;
            for (const b of live) {
              const bytes = buddy.bytes(b.address, b.length);
              for (let j = 0; j < bytes.length; j++) {
                if (bytes[j] !== ((b.fill + j) & 0xff)) {
                  throw new Error(
                    `block at ${b.address} lost its pattern at byte ${j}`,
                  );
                }
              }
              allocated += buddy.byteLengthOf(b.address);
            }
            assert.equal(buddy.allocatedBytes, allocated);
            assert.equal(buddy.reservedBytes, backing.allocatedBytes);
            assert.equal(buddy.reservedBytes, buddy.poolCount * POOL);
          };
          for (const o of ops) {
            if (o.op === "alloc" || o.op === "refused") {
              backing.refuse = o.op === "refused";
              const pools = buddy.poolCount;
              let address: number | undefined;
              try {
                address = buddy.alloc(o.size);
              } catch (error) {
                assert.ok(error instanceof OutOfMemoryError, String(error));
                // refused: nothing changed but the merged quick lists
                assert.equal(buddy.poolCount, pools);
                // and only when no free block, waiting or not, is long enough
                let need = MIN;
                while (need < o.size) need *= 2;
                assert.ok(buddy.largestFreeBytes < need, "refused wrongly");
                if (o.op === "refused") refusedMerges++;
              } finally {
                backing.refuse = false;
              }
              if (address !== undefined) {
                const length = Math.max(o.size, 1);
                const f = fill++ & 0xff;
                const bytes = buddy.bytes(address, o.size);
                for (let j = 0; j < bytes.length; j++) {
                  bytes[j] = (f + j) & 0xff;
                }
                assert.ok(buddy.byteLengthOf(address) >= length);
                live.push({ address, length: o.size, fill: f });
              }
            } else if (o.op === "free") {
              if (live.length === 0) continue;
              const [b] = live.splice(o.i % live.length, 1);
              buddy.free(b.address);
              assert.throws(() => buddy.free(b.address), DoubleFreeError);
            } else if (o.op === "trim") {
              const pools = buddy.poolCount;
              const trimmed = buddy.trim();
              assert.equal(trimmed, (pools - buddy.poolCount) * POOL);
            } else if (o.op === "snapshot") {
              const snap = buddy.snapshot();
              let active = 0, largestInactive = 0;
              for (const s of snap.segments) {
                active += s.activeBytes;
                for (const b of s.blocks) {
                  if (b.state === "inactive") {
                    largestInactive = Math.max(largestInactive, b.byteLength);
                  }
                }
              }
              assert.equal(active, buddy.allocatedBytes);
              // the snapshot shows the merged layout (eager merging's)
              assert.equal(largestInactive, buddy.largestFreeBytes);
            } else if (o.op === "stats") {
              const s = buddy.stats();
              assert.equal(s.allocatedBytes.current, buddy.allocatedBytes);
              assert.equal(s.allocations.current, live.length);
            } else {
              const largest = buddy.largestFreeBytes;
              assert.ok(largest >= 0 && largest <= POOL);
              backing.refuse = true;
              try {
                // a block of that length is there: taken without a pool
                if (largest > 0) buddy.free(buddy.alloc(largest));
                // and none longer, waiting blocks merged or not
                const longer = largest === 0 ? MIN : 2 * largest;
                if (longer <= POOL) {
                  assert.throws(() => buddy.alloc(longer), OutOfMemoryError);
                }
              } finally {
                backing.refuse = false;
              }
            }
            check();
          }
          for (const b of live) buddy.free(b.address);
          assert.equal(buddy.allocatedBytes, 0);
          const pools = buddy.poolCount;
          assert.equal(buddy.trim(), pools * POOL);
          assert.equal(buddy.poolCount, 0);
          assert.equal(buddy.reservedBytes, 0);
          assert.equal(backing.allocatedBytes, 0);
          buddy.validate();
        },
      ),
      { numRuns: modelRuns(300) },
    );
    assert.ok(refusedMerges > 0);
  });
});
