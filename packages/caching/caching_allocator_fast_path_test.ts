// The id pair's fast paths, each against what it shortcuts: ids kept on
// the block (a reused slot refuses the ids of its earlier blocks), the
// release fast path (taken only for a block no other stream used and with
// history and strict mode off), the in-place re-key of a block alone in its
// bin (split rests and merge survivors, checked by validate() against many
// blocks of one bin), and the all-pools figures of PoolStats derived as
// sums of the pools (peaks of both pools together, through resets).

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  ManualStream,
  MockSegmentSource,
  UseAfterFreeError,
} from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import { CachingAllocator } from "./caching_allocator.ts";
import { ID_SLOTS } from "./_block_ids.ts";

const KiB = 1024;
const MiB = 2 ** 20;

describe("CachingAllocator id pair fast paths", () => {
  it("refuses every earlier id of a reused slot, and serves the live one", () => {
    const allocator = new CachingAllocator(new MockSegmentSource());
    // One id at a time: after the reserve of free slots fills, slots come
    // back in turn, each under its next generation.
    const bySlot = new Map<number, number[]>();
    for (let i = 0; i < 5000; i++) {
      const id = allocator.allocateId(512);
      const slot = id % ID_SLOTS;
      const earlier = bySlot.get(slot) ?? [];
      for (const old of earlier) {
        assert.notEqual(old, id, `id ${id} issued twice`);
        assert.throws(() => allocator.blockByteOffset(old), UseAfterFreeError);
        assert.throws(() => allocator.freeById(old), DoubleFreeError);
      }
      assert.equal(allocator.blockByteLength(id), 512);
      earlier.push(id);
      bySlot.set(slot, earlier);
      allocator.freeById(id);
    }
    // Slots were reused (the test means something) and generations moved.
    assert.ok([...bySlot.values()].some((ids) => ids.length >= 10));
    assert.equal(allocator.allocatedBytes, 0);
    allocator.validate();
  });

  it("gives ids that are small non-negative integers, distinct among live blocks", () => {
    const allocator = new CachingAllocator(new MockSegmentSource());
    const live = new Set<number>();
    for (let round = 0; round < 40; round++) {
      const ids = Array.from({ length: 50 }, () => allocator.allocateId(600));
      for (const id of ids) {
        assert.ok(Number.isInteger(id) && id >= 0 && id < 2 ** 30, `${id}`);
        assert.ok(!live.has(id), `live id ${id} given again`);
        live.add(id);
      }
      // Free all but a few, so slots cycle while others stay live.
      for (const id of ids.slice(5)) {
        allocator.freeById(id);
        live.delete(id);
      }
    }
    for (const id of live) assert.equal(allocator.blockByteLength(id), 768);
    allocator.validate();
  });

  it("takes the release fast path only when no stream and no history watch it", () => {
    const allocator = new CachingAllocator(new MockSegmentSource());
    const copy = new ManualStream();
    // Another stream's use keeps the block pending until its fence.
    const a = allocator.allocate(4 * KiB);
    const address = a.address;
    a.recordStream(copy);
    a.release();
    assert.equal(allocator.pendingFreeCount, 1);
    assert.equal(allocator.memoryStats().activeBytes.all.current, 4 * KiB);
    copy.completeAll();
    const b = allocator.allocate(4 * KiB);
    assert.equal(b.address, address);
    b.release();
    // History records the free of an id block and of a handle.
    allocator.recordHistory();
    allocator.freeById(allocator.allocateId(100));
    allocator.allocate(100).release();
    const actions = allocator.snapshot().history.map((e) => e.action);
    assert.deepEqual(
      actions.filter((a) => a !== "snapshot"),
      [
        "alloc",
        "free_requested",
        "free_completed",
        "alloc",
        "free_requested",
        "free_completed",
      ],
    );
    allocator.validate();
  });

  it("counts oversize blocks out on the release fast path", () => {
    const allocator = new CachingAllocator(new MockSegmentSource(), {
      maxSplitByteLength: 20 * MiB,
    });
    const id = allocator.allocateId(21 * MiB);
    assert.equal(allocator.memoryStats().oversizeAllocations.current, 1);
    allocator.freeById(id);
    assert.equal(allocator.memoryStats().oversizeAllocations.current, 0);
    allocator.allocate(22 * MiB).release();
    const over = allocator.memoryStats().oversizeAllocations;
    assert.deepEqual(
      { current: over.current, peak: over.peak },
      { current: 0, peak: 1 },
    );
    allocator.validate();
  });

  it("keeps pools in order when many free blocks share a bin (split rests, merge survivors)", () => {
    // Sizes within one bin (16 KiB to 18 KiB) and holes between live
    // blocks: the in-place re-key must fall back when a bin holds more
    // than its block.
    const sizes = fc.integer({ min: 16 * KiB + 1, max: 18 * KiB });
    const op = fc.oneof(
      fc.record({ alloc: sizes }),
      fc.record({ free: fc.nat() }),
    );
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 120 }), (ops) => {
        const allocator = new CachingAllocator(new MockSegmentSource());
        const live: number[] = [];
        for (const o of ops) {
          if ("alloc" in o) live.push(allocator.allocateId(o.alloc));
          else if (live.length > 0) {
            allocator.freeById(live.splice(o.free % live.length, 1)[0]);
          }
          allocator.validate();
        }
        for (const id of live) allocator.freeById(id);
        allocator.validate();
        assert.equal(allocator.allocatedBytes, 0);
      }),
      { numRuns: modelRuns() },
    );
  });

  it("keeps all-pools current and peak figures as sums of both pools, through resets", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ alloc: fc.integer({ min: 1, max: 3 * MiB }) }),
            fc.record({ free: fc.nat() }),
            fc.constant("resetPeak" as const),
          ),
          { minLength: 1, maxLength: 60 },
        ),
        (ops) => {
          const allocator = new CachingAllocator(new MockSegmentSource());
          const live: number[] = [];
          // Peaks of the sum, taken after every step.
          const peak = { allocation: 0, allocatedBytes: 0, requestedBytes: 0 };
          const requested = new Map<number, number>();
          for (const o of ops) {
            if (o === "resetPeak") {
              allocator.resetPeakStats();
              for (const k of Object.keys(peak) as (keyof typeof peak)[]) {
                peak[k] = allocator.memoryStats()[k].all.current;
              }
            } else if ("alloc" in o) {
              const id = allocator.allocateId(o.alloc);
              live.push(id);
              requested.set(id, o.alloc);
            } else if (live.length > 0) {
              allocator.freeById(live.splice(o.free % live.length, 1)[0]);
            }
            const s = allocator.memoryStats();
            let bytes = 0, asked = 0;
            for (const id of live) {
              bytes += allocator.blockByteLength(id);
              asked += requested.get(id)!;
            }
            const now = {
              allocation: live.length,
              allocatedBytes: bytes,
              requestedBytes: asked,
            };
            for (const k of Object.keys(now) as (keyof typeof now)[]) {
              peak[k] = Math.max(peak[k], now[k]);
              const all = s[k].all;
              assert.equal(all.current, now[k], k);
              assert.equal(
                all.current,
                s[k].smallPool.current + s[k].largePool.current,
              );
              assert.equal(all.peak, peak[k], `${k} peak`);
            }
            assert.equal(
              s.reservedBytes.all.current,
              s.reservedBytes.smallPool.current +
                s.reservedBytes.largePool.current,
            );
            assert.equal(allocator.allocatedBytes, now.allocatedBytes);
          }
          allocator.validate();
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});
