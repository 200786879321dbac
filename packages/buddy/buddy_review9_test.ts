// The buddy allocator from the outside (review 9): view types whose
// constructor frees the block and allocates again at the same address (a
// smaller block there, or a new pool after trim()), and a fast-check model
// mixing raw blocks, owning pointers from allocate(), large blocks straight
// from the backing, and trim(), in which every live block carries a byte
// pattern checked after every operation, views never reach past their
// block, the stats equal a recount, and everything goes back at the end.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllotError,
  type DataPtr,
  DoubleFreeError,
  OutOfMemoryError,
  viewSpan,
} from "@allot/core";
import { SystemAllocator } from "@allot/cpu";
import { checkPattern, modelRuns, writePattern } from "../core/_test_faults.ts";
import { BuddyAllocator } from "./buddy_allocator.ts";

const MIN = 16;
const POOL = 4096;

describe("BuddyAllocator.view() re-entered (review 9)", () => {
  it("a constructor that frees the block and allocates a smaller one at its address gets no view past the new block", () => {
    for (const quickListLength of [0, 32]) {
      const buddy = new BuddyAllocator({
        initialPoolByteLength: POOL,
        maxPoolByteLength: POOL,
        minBlockByteLength: MIN,
        quickListLength,
      });
      const big = buddy.alloc(1024);
      const others: number[] = [];
      class Reuser extends Uint8Array {
        constructor(buffer: ArrayBuffer, byteOffset: number, length: number) {
          buddy.free(big);
          buddy.trim(); // merges the quick lists: the address is free again
          others.push(buddy.alloc(MIN), buddy.alloc(MIN));
          super(buffer, byteOffset, length);
        }
      }
      let view: Uint8Array | undefined;
      try {
        view = buddy.view(big, Reuser as never);
      } catch (error) {
        assert.ok(error instanceof AllotError, String(error));
      }
      if (view !== undefined) {
        assert.ok(
          view.byteLength <= buddy.byteLengthOf(big),
          `a ${view.byteLength}-byte view of a ${
            buddy.byteLengthOf(big)
          }-byte block`,
        );
      }
      for (const a of others) buddy.free(a);
      buddy.validate();
      assert.equal(buddy.allocatedBytes, 0);
    }
  });

  it("a constructor that frees the block, trims its pool and takes a new one gets no view of the old memory", () => {
    const buddy = new BuddyAllocator({
      initialPoolByteLength: POOL,
      maxPoolByteLength: POOL,
      minBlockByteLength: MIN,
      quickListLength: 0,
    });
    const at = buddy.alloc(POOL);
    let again = -1;
    class Mover extends Uint8Array {
      constructor(buffer: ArrayBuffer, byteOffset: number, length: number) {
        buddy.free(at);
        assert.equal(buddy.trim(), POOL); // the pool goes back
        again = buddy.alloc(POOL); // a new pool in the same slot
        super(buffer, byteOffset, length);
      }
    }
    let view: Uint8Array | undefined;
    try {
      view = buddy.view(at, Mover as never);
    } catch (error) {
      assert.ok(error instanceof AllotError, String(error));
    }
    assert.equal(again, at);
    if (view !== undefined) {
      const span = viewSpan(view)!;
      assert.equal(
        span.buffer,
        buddy.bytes(at, 1).buffer,
        "a view of the pool given back",
      );
    }
    buddy.free(again);
    buddy.validate();
  });
});

type Op =
  | { kind: "alloc"; byteLength: number }
  | { kind: "allocate"; byteLength: number }
  | { kind: "free"; pick: number }
  | { kind: "trim" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("alloc" as const),
      byteLength: fc.oneof(
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 0, max: 2 * POOL }),
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("allocate" as const),
      byteLength: fc.integer({ min: 0, max: 2 * POOL }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("free" as const),
      pick: fc.nat(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("trim" as const) }) },
);

interface Live {
  address: number;
  byteLength: number;
  id: number;
  ptr?: DataPtr<unknown, number>;
}

describe("BuddyAllocator model with byte patterns (review 9)", () => {
  for (const quickListLength of [0, 2, 32]) {
    it(`quickListLength ${quickListLength}: raw blocks, owning pointers, large blocks and trim keep every pattern`, () => {
      fc.assert(
        fc.property(fc.array(opArb, { maxLength: 50, size: "max" }), (ops) => {
          const backing = new SystemAllocator();
          const buddy = new BuddyAllocator({
            initialPoolByteLength: POOL,
            maxPoolByteLength: 4 * POOL,
            minBlockByteLength: MIN,
            quickListLength,
            backing,
          });
          const live: Live[] = [];
          let nextId = 1;
          for (const op of ops) {
            if (op.kind === "alloc" || op.kind === "allocate") {
              let b: Live;
              try {
                if (op.kind === "alloc") {
                  const address = buddy.alloc(op.byteLength);
                  b = { address, byteLength: op.byteLength, id: nextId++ };
                } else {
                  const ptr = buddy.allocate(op.byteLength);
                  b = {
                    address: ptr.getContext()!,
                    byteLength: op.byteLength,
                    id: nextId++,
                    ptr,
                  };
                }
              } catch (error) {
                assert.ok(error instanceof OutOfMemoryError, String(error));
                continue;
              }
              writePattern(buddy.bytes(b.address, b.byteLength), b.id);
              live.push(b);
            } else if (op.kind === "trim") {
              buddy.trim();
            } else if (live.length !== 0) {
              const [b] = live.splice(op.pick % live.length, 1);
              if (b.ptr !== undefined) {
                assert.throws(() => buddy.free(b.address), DoubleFreeError);
                b.ptr.release();
              } else {
                buddy.free(b.address);
              }
              assert.throws(() => buddy.free(b.address), DoubleFreeError);
            }
            let allocated = 0;
            const spans: [unknown, number, number][] = [];
            for (const b of live) {
              const length = buddy.byteLengthOf(b.address);
              assert.ok(length >= b.byteLength);
              if (b.address >= 0) {
                // a pool block: a power of two, aligned to its length
                assert.equal(length & (length - 1), 0);
                assert.equal(buddy.byteOffsetOf(b.address) % length, 0);
                assert.ok(length >= MIN);
              }
              const view = buddy.view(b.address, DataView);
              assert.equal(viewSpan(view)!.byteLength, length);
              assert.throws(
                () => buddy.bytes(b.address, length + 1),
                AllotError,
              );
              checkPattern(buddy.bytes(b.address, b.byteLength), b.id);
              allocated += length;
              const offset = buddy.byteOffsetOf(b.address);
              spans.push([buddy.memoryOf(b.address), offset, offset + length]);
            }
            spans.sort((x, y) => x[1] - y[1]);
            for (let i = 0; i < spans.length; i++) {
              for (let j = i + 1; j < spans.length; j++) {
                if (spans[i][0] !== spans[j][0]) continue;
                assert.ok(spans[i][2] <= spans[j][1], "blocks overlap");
              }
            }
            assert.equal(buddy.stats().allocations.current, live.length);
            assert.equal(buddy.allocatedBytes, allocated);
            buddy.validate();
          }
          for (const b of live) {
            if (b.ptr !== undefined) b.ptr.release();
            else buddy.free(b.address);
          }
          assert.equal(buddy.allocatedBytes, 0);
          buddy.trim();
          assert.equal(buddy.poolCount, 0);
          assert.equal(backing.allocatedBytes, 0);
          buddy.validate();
        }),
        { numRuns: modelRuns(120) },
      );
    });
  }
});
