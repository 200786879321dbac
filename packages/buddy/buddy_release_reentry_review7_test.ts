// BuddyAllocator from the outside (review 7): a backing whose release of a
// pool (trim) or of a large block re-enters the buddy allocator (allocates
// small and large blocks, frees a live one, trims, reads the stats, the
// snapshot and largestFreeBytes, all of which merge the quick lists) or
// throws. A fast-check model with and without quick lists: every live block
// keeps its own byte pattern, validate() holds, the stats equal a recount of
// the live blocks and the backing's live bytes equal reservedBytes after
// every operation; everything goes back at the end.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { AllocatorBase, DataPtr, Device, OutOfMemoryError } from "@allot/core";
import {
  assertDisjoint,
  checkPattern,
  FirstFitAllocator,
  InjectedFault,
  modelRuns,
  writePattern,
} from "../core/_test_faults.ts";
import { BuddyAllocator } from "./buddy_allocator.ts";

const MIN = 64;
const POOL = 4096;
const POOLS = 4;

/** What a release does when armed. */
type Reentry =
  | "alloc"
  | "allocLarge"
  | "free"
  | "trim"
  | "stats"
  | "snapshot"
  | "largest"
  | "throw";

/**
 * A first-fit backing whose deleter, when armed, runs `onRelease` once
 * after the memory went back (so the buddy allocator is in the middle of a
 * trim or of a large block's free).
 */
class ReenteringBacking extends AllocatorBase<ArrayBuffer, number> {
  readonly device = Device.cpu();
  readonly base = new FirstFitAllocator(Device.cpu(), 1 << 20);
  onRelease: (() => void) | undefined;

  /** Bytes handed out and not yet released (as asked). */
  liveBytes = 0;

  allocate(byteLength: number): DataPtr<ArrayBuffer, number> {
    // (whole multiples of 64 keep every first-fit offset 64-aligned)
    const inner = this.base.allocate(Math.ceil(byteLength / MIN) * MIN);
    this.liveBytes += byteLength;
    return new DataPtr(
      inner.memory,
      inner.byteOffset,
      byteLength,
      this.device,
      {
        context: inner.byteOffset,
        deleter: () => {
          inner.release();
          this.liveBytes -= byteLength;
          const hook = this.onRelease;
          this.onRelease = undefined;
          hook?.();
        },
      },
    );
  }
}

type Op =
  | { op: "alloc"; size: number }
  | { op: "free"; i: number }
  | { op: "trim" }
  | { op: "read"; what: "stats" | "snapshot" | "largest" }
  | { op: "arm"; what: Reentry; size: number; i: number };

describe("BuddyAllocator with a backing that re-enters at release (review 7)", () => {
  it("model: trims and large frees whose release re-enters or throws; patterns survive, the stats add up, everything goes back (quick lists on and off)", () => {
    const size = fc.oneof(
      { weight: 6, arbitrary: fc.integer({ min: 0, max: POOL }) },
      { weight: 1, arbitrary: fc.integer({ min: POOL + 1, max: 3 * POOL }) },
    );
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({ op: fc.constant("alloc" as const), size }),
      },
      {
        weight: 6,
        arbitrary: fc.record({ op: fc.constant("free" as const), i: fc.nat() }),
      },
      { weight: 2, arbitrary: fc.constant({ op: "trim" as const }) },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("read" as const),
          what: fc.constantFrom(
            "stats" as const,
            "snapshot" as const,
            "largest" as const,
          ),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          op: fc.constant("arm" as const),
          what: fc.constantFrom<Reentry>(
            "alloc",
            "allocLarge",
            "free",
            "trim",
            "stats",
            "snapshot",
            "largest",
            "throw",
          ),
          size,
          i: fc.nat(),
        }),
      },
    );
    let reentered = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(0, 1, 32),
        fc.array(op, { maxLength: 80, size: "max" }),
        (quickListLength, ops) => {
          const backing = new ReenteringBacking();
          const buddy = new BuddyAllocator({
            initialPoolByteLength: POOL,
            maxPoolByteLength: POOLS * POOL,
            minBlockByteLength: MIN,
            quickListLength,
            backing,
          });
          const live: { at: number; n: number; tag: number }[] = [];
          let tag = 1;
          const take = (n: number) => {
            let at: number;
            try {
              at = buddy.alloc(n);
            } catch (error) {
              assert.ok(error instanceof OutOfMemoryError, String(error));
              return;
            }
            const t = tag++;
            writePattern(buddy.bytes(at, n), t);
            live.push({ at, n, tag: t });
          };
          const give = (i: number) => {
            if (live.length === 0) return;
            const [l] = live.splice(i % live.length, 1);
            try {
              buddy.free(l.at);
            } catch (error) {
              // the backing's release threw after the memory went back: the
              // block is gone all the same (the books say so below)
              assert.ok(error instanceof InjectedFault, String(error));
            }
          };
          const check = () => {
            buddy.validate();
            let bytes = 0;
            for (const l of live) {
              checkPattern(buddy.bytes(l.at, l.n), l.tag);
              bytes += buddy.byteLengthOf(l.at);
            }
            assertDisjoint(live.map((l) => {
              const start = buddy.byteOffsetOf(l.at);
              return [
                buddy.memoryOf(l.at),
                start,
                start + buddy.byteLengthOf(l.at),
              ] as const;
            }));
            assert.equal(buddy.allocatedBytes, bytes);
            assert.equal(
              backing.liveBytes,
              buddy.reservedBytes,
              `${buddy.poolCount} pools, ${buddy.allocatedBytes} allocated, ${live.length} live`,
            );
          };
          for (const o of ops) {
            switch (o.op) {
              case "alloc":
                take(o.size);
                break;
              case "free":
                give(o.i);
                break;
              case "trim":
                try {
                  buddy.trim();
                } catch (error) {
                  assert.ok(error instanceof InjectedFault, String(error));
                }
                break;
              case "read":
                if (o.what === "stats") buddy.stats();
                else if (o.what === "snapshot") buddy.snapshot();
                else void buddy.largestFreeBytes;
                break;
              case "arm":
                backing.onRelease = () => {
                  reentered++;
                  switch (o.what) {
                    case "alloc":
                      take(Math.min(o.size, POOL));
                      break;
                    case "allocLarge":
                      take(POOL + 1 + o.size);
                      break;
                    case "free":
                      give(o.i);
                      break;
                    case "trim":
                      buddy.trim();
                      break;
                    case "stats":
                      buddy.stats();
                      break;
                    case "snapshot":
                      buddy.snapshot();
                      break;
                    case "largest":
                      void buddy.largestFreeBytes;
                      break;
                    case "throw":
                      throw new InjectedFault("release threw");
                  }
                };
                break;
            }
            // a free of a large block runs the armed release too
            check();
          }
          backing.onRelease = undefined;
          for (const l of live.splice(0)) buddy.free(l.at);
          buddy.trim();
          check();
          assert.equal(buddy.reservedBytes, 0);
          assert.equal(backing.base.live.size, 0);
        },
      ),
      { numRuns: modelRuns(300) },
    );
    assert.ok(reentered > 0);
  });
});
