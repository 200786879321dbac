// CachingAllocator's id path from the outside (review 7): a segment source
// that re-enters allocateId() at a miss and takes the last free id slots.
// (One test holds 2^20 live ids: about 1 s and 280 MiB of heap.)
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CachingAllocator } from "@allot/caching";
import { InvalidArgumentError, MockSegmentSource } from "@allot/core";

const MiB = 2 ** 20;

describe("CachingAllocator ids (review 7)", () => {
  it("allocateId: a source that fills the id table from inside a miss gets the outer request refused, not an id of -1 holding a block for good", () => {
    const source = new MockSegmentSource();
    const a = new CachingAllocator(source, { segmentGrowthFraction: 0 });
    const ids: number[] = [];
    for (let i = 0; i < 2 ** 20 - 1; i++) ids.push(a.allocateId(1));
    const make = source.tryAllocateSegment.bind(source);
    let entered = false;
    source.tryAllocateSegment = (n, options) => {
      if (!entered) {
        entered = true;
        ids.push(a.allocateId(1)); // the last slot
      }
      return make(n, options);
    };
    const before = a.allocatedBytes;
    let id: number | undefined;
    try {
      id = a.allocateId(8 * MiB); // a miss
    } catch (error) {
      assert.ok(error instanceof InvalidArgumentError, String(error));
      assert.match((error as Error).message, /1048576 blocks have ids/);
    }
    assert.ok(entered);
    if (id !== undefined) {
      // given: a live id that reads back
      assert.equal(a.blockByteLength(id), 8 * MiB);
      ids.push(id);
    } else {
      // refused: only the inner id's block was taken
      assert.equal(a.allocatedBytes, before + a.roundSize(1));
    }
    a.validate();
    for (const x of ids) a.freeById(x);
    assert.equal(a.allocatedBytes, 0);
    a.emptyCache();
    assert.equal(source.reservedBytes, 0);
  });
});
