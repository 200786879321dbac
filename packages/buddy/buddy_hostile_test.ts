/**
 * Second outside-in review of `BuddyAllocator`, from the public API only:
 * backings that hand out memory overlapping what they handed out before,
 * backings that hand out more than asked (stats against a recount), view
 * constructors that call back into the allocator, and a fast-check model
 * that fills every live block with its own byte pattern under a backing
 * that sometimes lies, checking the patterns, a recount of the stats, and
 * that every refused call changes nothing.
 *
 * @module
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type Allocator,
  AllotError,
  ContractViolationError,
  DataPtr,
  Device,
  DoubleFreeError,
  type SegmentSource,
} from "@allot/core";
import { BuddyAllocator } from "./buddy_allocator.ts";

const POOL = 4096;
const MIN = 64;

function snapshot(buddy: BuddyAllocator): string {
  return JSON.stringify(buddy.stats());
}

describe("BuddyAllocator hostile backings", () => {
  it("refuses a pool from an allocator that overlaps a pool it holds, and changes nothing", () => {
    const memory = new ArrayBuffer(1 << 16);
    const released: number[] = [];
    let next = 0;
    // Pools at 0, then 2048 (overlapping the first), then 8192 (clear).
    const offsets = [0, 2048, 8192];
    const backing = {
      device: Device.cpu(),
      allocate(byteLength: number) {
        const offset = offsets[next++];
        return new DataPtr(memory, offset, byteLength, Device.cpu(), {
          context: offset,
          deleter: (o: number) => released.push(o),
        });
      },
    } as unknown as Allocator;
    const buddy = new BuddyAllocator({
      initialPoolByteLength: POOL,
      minBlockByteLength: MIN,
      backing,
    });
    const a = buddy.alloc(POOL);
    const before = snapshot(buddy);
    assert.throws(() => buddy.alloc(POOL), ContractViolationError);
    assert.equal(snapshot(buddy), before);
    assert.deepEqual(released, [2048], "the overlapping pool is given back");
    const b = buddy.alloc(POOL); // the clear one is taken
    assert.equal(buddy.byteOffsetOf(b), 8192);
    buddy.free(a);
    buddy.free(b);
    buddy.checkIntegrity();
  });

  it("refuses overlapping segments and overlapping large blocks from a segment source", () => {
    const memory = new ArrayBuffer(1 << 16);
    const source = {
      device: Device.cpu(),
      tryAllocateSegment: (byteLength: number) => ({
        memory,
        byteOffset: 1024,
        byteLength,
      }),
      freeSegment() {},
    } as unknown as SegmentSource;
    const buddy = new BuddyAllocator({
      initialPoolByteLength: POOL,
      minBlockByteLength: MIN,
      backing: source,
    });
    const a = buddy.alloc(100);
    const before = snapshot(buddy);
    assert.throws(() => buddy.alloc(POOL), ContractViolationError); // pool
    assert.throws(() => buddy.alloc(3 * POOL), ContractViolationError); // large
    assert.equal(snapshot(buddy), before);
    buddy.free(a);
    buddy.checkIntegrity();
  });

  it("accepts pools that touch but do not overlap, in one memory", () => {
    const memory = new ArrayBuffer(1 << 16);
    let next = 0;
    const backing = {
      device: Device.cpu(),
      allocate(byteLength: number) {
        const offset = next;
        next += byteLength;
        return new DataPtr(memory, offset, byteLength, Device.cpu());
      },
    } as unknown as Allocator;
    const buddy = new BuddyAllocator({
      initialPoolByteLength: POOL,
      minBlockByteLength: MIN,
      backing,
    });
    const blocks = [buddy.alloc(POOL), buddy.alloc(POOL), buddy.alloc(POOL)];
    assert.equal(buddy.poolCount, 3);
    for (const b of blocks) buddy.free(b);
  });

  it("counts a large block as long as the pointer the backing gave, as byteLengthOf, bytes() and view() do", () => {
    const backing = {
      device: Device.cpu(),
      allocate(byteLength: number) {
        return new DataPtr(
          new ArrayBuffer(byteLength + 100),
          0,
          byteLength + 100,
          Device.cpu(),
        );
      },
    } as unknown as Allocator;
    const buddy = new BuddyAllocator({
      initialPoolByteLength: POOL,
      minBlockByteLength: MIN,
      backing,
    });
    const big = buddy.alloc(10_000);
    const length = buddy.byteLengthOf(big);
    assert.equal(length, 10_100);
    assert.equal(buddy.bytes(big, length).length, length);
    assert.equal(buddy.view(big, Uint8Array).length, length);
    assert.equal(buddy.allocatedBytes, length);
    assert.equal(buddy.reservedBytes, length);
    buddy.free(big);
    const stats = buddy.stats();
    assert.equal(stats.allocatedBytes.current, 0);
    assert.equal(stats.allocatedBytes.freed, length);
    assert.equal(buddy.reservedBytes, 0);
    buddy.checkIntegrity();
  });
});

describe("BuddyAllocator re-entrant view constructors", () => {
  it("view() refuses to hand out a view of a block its constructor freed", () => {
    const buddy = new BuddyAllocator({
      initialPoolByteLength: POOL,
      minBlockByteLength: MIN,
    });
    const a = buddy.alloc(MIN);
    class Freeing extends Uint8Array {
      constructor(
        buffer: ArrayBuffer | SharedArrayBuffer,
        byteOffset: number,
        length: number,
      ) {
        super(buffer as ArrayBuffer, byteOffset, length);
        buddy.free(a);
      }
    }
    assert.throws(() => buddy.view(a, Freeing), DoubleFreeError);
    assert.equal(buddy.allocatedBytes, 0);
    buddy.checkIntegrity();
    // A constructor that allocates (and keeps the block) is fine.
    const b = buddy.alloc(MIN);
    let inner = -1;
    class Allocating extends Uint8Array {
      constructor(
        buffer: ArrayBuffer | SharedArrayBuffer,
        byteOffset: number,
        length: number,
      ) {
        super(buffer as ArrayBuffer, byteOffset, length);
        inner = buddy.alloc(MIN);
      }
    }
    assert.equal(buddy.view(b, Allocating).length, MIN);
    assert.notEqual(inner, b);
    buddy.free(inner);
    buddy.free(b);
    buddy.checkIntegrity();
  });
});

// The model: every live block holds its own byte pattern; after every step
// the patterns hold, the stats equal a recount, and a refused call changed
// nothing.
type Op =
  | { op: "alloc"; size: number }
  | { op: "free"; pick: number }
  | { op: "stale"; pick: number }
  | { op: "hostile"; value: unknown }
  | { op: "trim" };

const HOSTILE = [
  NaN,
  -0.5,
  -1,
  2 ** 53,
  "64",
  { valueOf: () => 64 },
  null,
  Infinity,
];

describe("BuddyAllocator hostile model", () => {
  it("keeps each live block's own byte pattern and stats equal to a recount, over a backing that sometimes overlaps or shortchanges", () => {
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 5,
        arbitrary: fc.record({
          op: fc.constant("alloc" as const),
          size: fc.oneof(
            fc.integer({ min: 0, max: 3 * POOL }),
            fc.constantFrom(0, 1, MIN, MIN + 1, POOL - 1, POOL, POOL + 1),
          ),
        }),
      },
      {
        weight: 4,
        arbitrary: fc.record({
          op: fc.constant("free" as const),
          pick: fc.nat(),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("stale" as const),
          pick: fc.nat(),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("hostile" as const),
          value: fc.constantFrom(...HOSTILE),
        }),
      },
      { weight: 1, arbitrary: fc.constant({ op: "trim" as const }) },
    );
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 120 }),
        fc.array(fc.constantFrom("ok", "ok", "ok", "overlap", "short")),
        (ops, faults) => {
          // The backing: sub-allocates one memory; a fault "overlap" hands
          // out the last place again, "short" fewer bytes than asked.
          const memory = new ArrayBuffer(1 << 20);
          let next = 0, last = 0, calls = 0;
          const backing = {
            device: Device.cpu(),
            allocate(byteLength: number) {
              const fault = faults[calls++ % Math.max(1, faults.length)];
              if (fault === "overlap" && next > 0) {
                return new DataPtr(memory, last, byteLength, Device.cpu());
              }
              const length = fault === "short" ? byteLength - 1 : byteLength;
              if (next + byteLength > memory.byteLength) {
                throw new RangeError("backing full");
              }
              last = next;
              next += Math.ceil(byteLength / MIN) * MIN;
              return new DataPtr(memory, last, length, Device.cpu());
            },
          } as unknown as Allocator;
          const buddy = new BuddyAllocator({
            initialPoolByteLength: POOL,
            maxPoolByteLength: 16 * POOL,
            minBlockByteLength: MIN,
            backing,
          });
          const live: { address: number; pattern: number }[] = [];
          const freed: number[] = [];
          let pattern = 1;
          const fill = (address: number, value: number) => {
            buddy.bytes(address, buddy.byteLengthOf(address)).fill(value);
          };
          const check = () => {
            let bytes = 0;
            for (const { address, pattern } of live) {
              const view = buddy.bytes(address, buddy.byteLengthOf(address));
              bytes += view.length;
              for (let i = 0; i < view.length; i += 7) {
                assert.equal(view[i], pattern, `block ${address} byte ${i}`);
              }
              assert.equal(view[view.length - 1], pattern);
            }
            const stats = buddy.stats();
            assert.equal(stats.allocatedBytes.current, bytes);
            assert.equal(stats.allocations.current, live.length);
            assert.ok(stats.allocatedBytes.peak >= bytes);
            assert.equal(
              stats.allocatedBytes.allocated - stats.allocatedBytes.freed,
              bytes,
            );
            buddy.checkIntegrity();
          };
          const refused = (f: () => unknown) => {
            const before = snapshot(buddy);
            assert.throws(f, AllotError);
            assert.equal(snapshot(buddy), before);
          };
          for (const step of ops) {
            if (step.op === "alloc") {
              const before = snapshot(buddy);
              let address: number;
              try {
                address = buddy.alloc(step.size);
              } catch (error) {
                assert.ok(error instanceof AllotError, String(error));
                assert.equal(snapshot(buddy), before);
                continue;
              }
              assert.ok(buddy.byteLengthOf(address) >= step.size);
              pattern = (pattern % 250) + 1;
              fill(address, pattern);
              live.push({ address, pattern });
            } else if (step.op === "free" && live.length > 0) {
              const [{ address }] = live.splice(step.pick % live.length, 1);
              buddy.free(address);
              freed.push(address);
            } else if (step.op === "stale" && freed.length > 0) {
              const address = freed[step.pick % freed.length];
              if (!live.some((b) => b.address === address)) {
                refused(() => buddy.free(address));
                refused(() => buddy.bytes(address, 1));
              }
            } else if (step.op === "hostile") {
              refused(() => buddy.alloc(step.value as number));
              refused(() => buddy.free(step.value as number));
              if (live.length > 0) {
                refused(() =>
                  buddy.bytes(live[0].address, step.value as number)
                );
              }
            } else if (step.op === "trim") {
              buddy.trim();
            }
            check();
          }
          for (const { address } of live) buddy.free(address);
          live.length = 0;
          check();
        },
      ),
      { numRuns: 150 },
    );
  });
});
