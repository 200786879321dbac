// The one-owner mark lives in a used block's order byte (-(order + 1) - 32
// while a DataPtr owns the block): free()'s fast check reads that one byte
// for "live" and "owned". A fast-check model of raw and owned blocks side by
// side: a raw free of an owned block is refused and changes nothing, and
// every reader of the order byte (byteLengthOf, bytes, view, stats,
// snapshot, validate()) sees owned blocks as their true length.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { type DataPtr, DoubleFreeError } from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import { BuddyAllocator } from "./buddy_allocator.ts";

const MIN = 64;
const POOL = 8192;

interface Block {
  address: number;
  length: number; // the block's power-of-two length
  ptr: DataPtr<unknown, number> | undefined; // owned while set
}

function pow2(n: number): number {
  let p = MIN;
  while (p < n) p *= 2;
  return p;
}

describe("BuddyAllocator owned marks in the order byte", () => {
  it("model: raw frees of owned blocks are refused and change nothing; owned blocks read as their length", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(fc.nat(7), fc.nat(POOL), fc.nat()),
          { minLength: 20, maxLength: 200 },
        ),
        (ops) => {
          const buddy = new BuddyAllocator({
            initialPoolByteLength: POOL,
            maxPoolByteLength: 4 * POOL,
            minBlockByteLength: MIN,
          });
          const live: Block[] = [];
          for (const [kind, byteLength, pick] of ops) {
            const b = live.length > 0 ? live[pick % live.length] : undefined;
            if (kind < 2 || b === undefined) {
              // Allocate: raw (0) or owned (1).
              try {
                if (kind === 1) {
                  const ptr = buddy.allocate(byteLength);
                  live.push({
                    address: ptr.getContext() as number,
                    length: pow2(Math.max(byteLength, 1)),
                    ptr,
                  });
                } else {
                  const address = buddy.alloc(byteLength);
                  live.push({
                    address,
                    length: pow2(Math.max(byteLength, 1)),
                    ptr: undefined,
                  });
                }
              } catch {
                // Out of pools: nothing to model.
              }
            } else if (kind === 2 || kind === 3) {
              // A raw free: refused for an owned block, with no change.
              if (b.ptr !== undefined) {
                const before = JSON.stringify(buddy.stats());
                assert.throws(() => buddy.free(b.address), DoubleFreeError);
                assert.equal(JSON.stringify(buddy.stats()), before);
                assert.ok(buddy.ownsPointer(b.ptr));
              } else {
                buddy.free(b.address);
                live.splice(live.indexOf(b), 1);
              }
            } else if (kind === 4) {
              // The owner releases: its deleter frees the block.
              if (b.ptr !== undefined) {
                b.ptr.release();
                live.splice(live.indexOf(b), 1);
              }
            } else if (kind === 5) {
              // The owner gives the address up: a raw block from now on.
              if (b.ptr !== undefined) {
                assert.equal(b.ptr.releaseContext(), b.address);
                b.ptr = undefined;
              }
            } else {
              // Reads of the block through its order byte.
              assert.equal(buddy.byteLengthOf(b.address), b.length);
              assert.equal(buddy.bytes(b.address, b.length).length, b.length);
              assert.equal(
                buddy.view(b.address, Uint8Array).length,
                b.length,
              );
              assert.throws(() => buddy.bytes(b.address, b.length + 1));
              const block = buddy.snapshot().segments.flatMap((x) => x.blocks)
                .find((x) => x.address === b.address);
              assert.equal(block?.byteLength, b.length);
              assert.equal(block?.state, "active_allocated");
            }
            const allocated = live.reduce((s, x) => s + x.length, 0);
            assert.equal(buddy.allocatedBytes, allocated);
            for (const x of live) {
              assert.equal(buddy.byteLengthOf(x.address), x.length);
            }
            buddy.validate();
          }
          for (const x of live) {
            if (x.ptr !== undefined) x.ptr.release();
            else buddy.free(x.address);
          }
          assert.equal(buddy.allocatedBytes, 0);
          buddy.validate();
        },
      ),
      { numRuns: modelRuns(300) },
    );
  });
});
