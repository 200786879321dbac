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
import { hostileNumbers } from "../core/_test_hostile.ts";
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

/** Values at the 32-bit edges and objects that lie when coerced. */
function edgeValues(): { name: string; value: unknown }[] {
  return [
    ...hostileNumbers(),
    { name: "2^31", value: 2 ** 31 },
    { name: "2^32", value: 2 ** 32 },
    { name: "2^32 + 256", value: 2 ** 32 + 256 },
    { name: "-2^32 + 256", value: -(2 ** 32) + 256 },
    { name: "lying valueOf", value: { valueOf: () => 256 } },
    {
      name: "lying toPrimitive",
      value: { [Symbol.toPrimitive]: () => 256 },
    },
  ];
}

function twinBuddy(): { buddy: BuddyAllocator; live: number[] } {
  const buddy = new BuddyAllocator({
    initialPoolByteLength: POOL,
    maxPoolByteLength: 2 * POOL,
    minBlockByteLength: MIN,
  });
  const live = [buddy.alloc(100), buddy.alloc(5000), buddy.alloc(16)];
  buddy.free(live[0]); // on a quick list
  return { buddy, live };
}

describe("BuddyAllocator refusals against a twin (review 9)", () => {
  it("every refused call is typed, names a numeric value, and leaves the figures and later addresses as a twin's", () => {
    const hit = twinBuddy();
    const twin = twinBuddy();
    const [, large, small] = hit.live;
    const calls: [string, (v: unknown) => unknown][] = [
      ["alloc", (v) => hit.buddy.alloc(v as number)],
      ["free", (v) => hit.buddy.free(v as number)],
      ["bytes(address)", (v) => hit.buddy.bytes(v as number, 1)],
      ["bytes(length)", (v) => hit.buddy.bytes(small, v as number)],
      ["byteLengthOf", (v) => hit.buddy.byteLengthOf(v as number)],
      ["byteOffsetOf", (v) => hit.buddy.byteOffsetOf(v as number)],
      ["memoryOf", (v) => hit.buddy.memoryOf(v as number)],
      ["view", (v) => hit.buddy.view(v as number, Uint8Array)],
      ["allocate", (v) => hit.buddy.allocate(v as number)],
    ];
    let refused = 0;
    for (const [label, call] of calls) {
      for (const { name, value } of edgeValues()) {
        // -0 is a valid zero, undefined a valid (default) nothing for none
        let result: unknown;
        try {
          result = call(value);
        } catch (error) {
          assert.ok(
            error instanceof AllotError,
            `${label}(${name}) threw ${error}`,
          );
          if (typeof value === "number" && value !== 0) {
            // the message names the value
            assert.ok(
              error.message.includes(String(value)) ||
                error.message.includes(value.toLocaleString("en-US")),
              `${label}(${name}): ${error.message}`,
            );
          }
          refused++;
          continue;
        }
        // accepted: only lengths a pool or the backing can serve
        assert.ok(
          label === "alloc" || label === "allocate" ||
            label === "bytes(length)",
          `${label}(${name}) was accepted`,
        );
        if (label === "alloc") hit.buddy.free(result as number);
        if (label === "allocate") {
          (result as DataPtr<unknown, number>).release();
        }
      }
    }
    assert.ok(refused > 100);
    // what accepted alloc()s did was undone; the twin makes the same ones
    for (const n of [0, 1, 16]) twin.buddy.free(twin.buddy.alloc(n));
    twin.buddy.allocate(0).release();
    const sequence = (b: BuddyAllocator) =>
      [300, 16, 2000, 16, 700].map((n) => b.alloc(n));
    const state = (b: BuddyAllocator) => {
      const s = b.stats();
      return [b.allocatedBytes, b.poolCount, s.allocations.current];
    };
    assert.deepEqual(state(hit.buddy), state(twin.buddy));
    assert.deepEqual(sequence(hit.buddy), sequence(twin.buddy));
    assert.equal(hit.buddy.byteLengthOf(large), 5000); // a large block
    hit.buddy.validate();
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
