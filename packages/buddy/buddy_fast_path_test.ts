// The fast checks of alloc(), free() and bytes() take only addresses that
// are aligned uint32s (`g * min === address`); every other address must
// take the slow path and get the same answers. Addresses past 2^32 are valid
// (units go up to 2^31 - 1), so they must work through the slow path, and
// must never alias the block whose address is their low 32 bits.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  Device,
  DoubleFreeError,
  InvalidArgumentError,
  type SegmentSource,
  UnsupportedOperationError,
} from "@allot/core";
import { BuddyAllocator } from "./buddy_allocator.ts";

const GiB = 2 ** 30;

// Pools of 1 GiB in non-host memories (as GPU buffers would be): nothing is
// allocated, so six pools reach addresses past 2^32 cheaply.
function farAllocator(): BuddyAllocator {
  let next = 0;
  const source = {
    device: Device.cpu(),
    alignment: 256,
    maxSegmentByteLength: 2 ** 40,
    capacityBytes: Infinity,
    tryAllocateSegment: (byteLength: number) => ({
      memory: { id: next++ },
      byteOffset: 0,
      byteLength,
    }),
    freeSegment: () => {},
  } as unknown as SegmentSource;
  return new BuddyAllocator({
    initialPoolByteLength: GiB,
    maxPoolByteLength: 8 * GiB,
    minBlockByteLength: 2 ** 20,
    backing: source,
  });
}

function state(buddy: BuddyAllocator): string {
  return JSON.stringify(buddy.stats());
}

describe("BuddyAllocator fast paths", () => {
  it("frees, reads and refuses addresses past 2^32 like any other, never aliasing the low 32 bits", () => {
    const buddy = farAllocator();
    const pools = Array.from({ length: 6 }, () => buddy.alloc(GiB));
    assert.deepEqual(pools, [0, 1, 2, 3, 4, 5].map((i) => i * GiB));
    const far = pools[4]; // 2^32: its low 32 bits are pool 0's address
    assert.equal(far, 2 ** 32);
    assert.equal(buddy.byteLengthOf(far), GiB);
    assert.equal(buddy.byteOffsetOf(far), 0);
    assert.deepEqual(buddy.memoryOf(far), { id: 4 });
    assert.throws(() => buddy.bytes(far, 1), UnsupportedOperationError);
    // Refusals past 2^32 change nothing.
    const before = state(buddy);
    for (const bad of [far + 0.5, far + 2 ** 20, 2 ** 32 + 5 * GiB * 2]) {
      assert.throws(
        () => buddy.free(bad),
        (e) =>
          e instanceof DoubleFreeError || e instanceof InvalidArgumentError,
        String(bad),
      );
    }
    assert.equal(state(buddy), before);
    buddy.free(far);
    // Pool 0's block is still live: freeing 2^32 did not free address 0.
    assert.equal(buddy.byteLengthOf(0), GiB);
    assert.equal(buddy.allocatedBytes, 5 * GiB);
    assert.throws(() => buddy.free(far), DoubleFreeError);
    assert.throws(() => buddy.byteLengthOf(far), DoubleFreeError);
    // The freed pool is reused, split, and merged back.
    const a = buddy.alloc(1);
    const b = buddy.alloc(GiB / 2);
    assert.equal(a, far);
    assert.equal(b, far + GiB / 2);
    buddy.free(a);
    buddy.free(b);
    for (const p of [0, 1, 2, 3, 5]) buddy.free(pools[p]);
    assert.equal(buddy.allocatedBytes, 0);
    buddy.checkIntegrity();
    assert.equal(buddy.largestFreeBytes, GiB);
  });

  it("bytes() refuses, past the fast path, what the fast path would refuse", () => {
    const buddy = new BuddyAllocator({
      initialPoolByteLength: 1 << 16,
      minBlockByteLength: 256,
    });
    const a = buddy.alloc(1000); // a 1024-byte block
    assert.equal(buddy.bytes(a, 1024).byteLength, 1024);
    assert.equal(buddy.bytes(a, 0).byteLength, 0);
    assert.equal(buddy.bytes(-0, 3).byteOffset, buddy.bytes(a, 3).byteOffset);
    for (
      const [address, n] of [
        [a, 1025],
        [a + 256, 1],
        [a + 1, 1],
        [
          a + 0.5,
          1,
        ],
        [a, -1],
        [a, 1.5],
        [a, 2 ** 32],
      ]
    ) {
      assert.throws(
        () => buddy.bytes(address, n),
        (e) =>
          e instanceof DoubleFreeError || e instanceof InvalidArgumentError,
        `${address}, ${n}`,
      );
    }
    buddy.free(a);
    assert.throws(() => buddy.bytes(a, 1), DoubleFreeError);
  });
});
