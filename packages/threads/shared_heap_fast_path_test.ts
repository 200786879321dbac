/**
 * Tests of `SharedHeap`'s owner fast paths: `alloc()` with the default
 * alignment (a block from the current slab or the span cache) and `free()`
 * of the caller's own block, both with plain reads and writes. Every test
 * here goes through `alloc` (the model test in `shared_heap_test.ts` goes
 * through `tryAlloc`, the general path).
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
} from "@allot/core";
import { SharedHeap } from "./mod.ts";
import { modelRuns } from "../core/_test_faults.ts";
import { arenaCounters, counterDelta } from "./_counters.ts";
import {
  CLASS_OF,
  CLASS_RECIPROCALS,
  CLASS_SIZES,
  MAX_SMALL,
  SLAB_BYTES,
  SLAB_HEADER,
} from "./_layout.ts";

const MiB = 1 << 20;

Deno.test("SharedHeap's block index by multiply equals the division for every offset of every class", () => {
  for (let cls = 0; cls < CLASS_SIZES.length; cls++) {
    const size = CLASS_SIZES[cls];
    for (let r = 0; r < SLAB_BYTES - SLAB_HEADER; r++) {
      const k = ((r >>> 6) * CLASS_RECIPROCALS[cls]) >>> 20;
      if (k !== Math.floor(r / size)) {
        assert.fail(`class ${cls} (${size} B), offset ${r}: ${k}`);
      }
    }
  }
  // The fast path's class: the smallest that holds the request.
  for (let n = 0; n <= MAX_SMALL; n++) {
    const cls = CLASS_OF[(n + 63) >> 6];
    assert.ok(CLASS_SIZES[cls] >= n && (cls === 0 || CLASS_SIZES[cls - 1] < n));
  }
});

interface Op {
  kind: "alloc" | "free" | "double" | "hostile";
  handle: number;
  byteLength: number;
  pick: number;
}

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom<Op["kind"]>(
    "alloc",
    "alloc",
    "alloc",
    "free",
    "free",
    "double",
    "hostile",
  ),
  // Mostly the owner (handle 0), which takes the fast paths.
  handle: fc.constantFrom(0, 0, 0, 1),
  byteLength: fc.oneof(
    fc.integer({ min: 0, max: 300 }),
    fc.integer({ min: 0, max: MAX_SMALL + 64 }),
    fc.integer({ min: MAX_SMALL - 64, max: 200_000 }),
  ),
  pick: fc.nat(),
});

Deno.test("SharedHeap's alloc() and free() fast paths match a model: no overlap, double and hostile frees refused, counts exact", () => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 150 }), (ops) => {
      using owner = SharedHeap.create(2 * MiB);
      using other = SharedHeap.attach(owner.descriptor());
      const handles = [owner, other];
      const u8 = new Uint8Array(owner.buffer);
      const live = new Map<number, { len: number; tag: number; by: number }>();
      const freed: number[] = [];
      const remote = [0, 0];
      let tag = 0, bytes = 0;
      for (const op of ops) {
        const h = handles[op.handle];
        if (op.kind === "alloc") {
          let at: number;
          try {
            // The default alignment, omitted or given.
            at = op.pick % 2
              ? h.alloc(op.byteLength)
              : h.alloc(op.byteLength, 64);
          } catch (e) {
            assert.ok(e instanceof OutOfMemoryError);
            continue;
          }
          assert.equal(at % 64, 0, "aligned");
          const len = h.usableByteLength(at);
          assert.ok(len >= op.byteLength, "long enough");
          for (const [o, b] of live) {
            assert.ok(at + len <= o || o + b.len <= at, "no overlap");
          }
          tag = (tag % 250) + 1;
          u8.fill(tag, at, at + len);
          live.set(at, { len, tag, by: op.handle });
          bytes += len;
        } else if (op.kind === "free" && live.size > 0) {
          const keys = [...live.keys()];
          const at = keys[op.pick % keys.length];
          const b = live.get(at)!;
          assert.ok(
            u8.subarray(at, at + b.len).every((x) => x === b.tag),
            "pattern intact",
          );
          h.free(at);
          if (b.by !== op.handle) remote[op.handle]++;
          live.delete(at);
          freed.push(at);
          bytes -= b.len;
        } else if (op.kind === "double" && freed.length > 0) {
          const at = freed[op.pick % freed.length];
          // Freed, maybe now inside another block or a slab's header:
          // refused either way, and nothing changes.
          if (!live.has(at)) {
            assert.throws(
              () => h.free(at),
              (e) =>
                e instanceof DoubleFreeError ||
                e instanceof InvalidArgumentError,
            );
          }
        } else if (op.kind === "hostile" && live.size > 0) {
          const keys = [...live.keys()];
          const at = keys[op.pick % keys.length];
          // A live block's offset in disguise, or inside the block.
          const bad = [
            String(at),
            { valueOf: () => at },
            [at],
            at + 0.5,
          ];
          for (const offset of bad) {
            assert.throws(() => h.free(offset as number), InvalidArgumentError);
          }
          // an offset inside a block: no block this heap holds
          assert.throws(() => h.free(at + 8), DoubleFreeError);
        }
        const stats = owner.stats();
        assert.equal(stats.allocations.current, live.size);
        assert.equal(stats.allocatedBytes.current, bytes);
        assert.equal(stats.reservedBytes + stats.freeBytes, stats.byteLength);
        for (const [at, b] of live) {
          assert.equal(u8[at], b.tag, "no live block touched");
        }
      }
      assert.equal(arenaCounters(owner).remoteFrees, remote[0]);
      assert.equal(arenaCounters(other).remoteFrees, remote[1]);
      owner.checkIntegrity();
      for (const at of live.keys()) owner.free(at);
      other.detach();
      owner.detach();
      const after = SharedHeap.attach(owner.descriptor());
      after.checkIntegrity();
      const stats = after.stats();
      after.detach();
      assert.equal(stats.allocations.current, 0);
      assert.equal(stats.freeBytes, stats.byteLength, "every page returned");
    }),
    { numRuns: modelRuns() },
  );
});

Deno.test("SharedHeap's owner frees take no lock and no other arena's path; another arena's free goes remote", () => {
  using heap = SharedHeap.create(8 * MiB);
  using other = SharedHeap.attach(heap.descriptor());
  // Warm: a slab per class used, a span of each size cached.
  const sizes = [64, 1000, 8192, 20_000, 300_000];
  for (const n of sizes) heap.free(heap.alloc(n));
  const before = arenaCounters(heap);
  for (let i = 0; i < 100; i++) {
    const blocks = sizes.map((n) => heap.alloc(n));
    for (const b of blocks) heap.free(b);
  }
  const own = counterDelta(arenaCounters(heap), before);
  assert.equal(own.locks, 0, "no lock");
  assert.equal(own.remoteFrees, 0);
  assert.equal(own.largeHits, 200, "every large block from the cache");
  const small = heap.alloc(64), large = heap.alloc(20_000);
  const o0 = arenaCounters(other);
  other.free(small);
  other.free(large);
  assert.equal(counterDelta(arenaCounters(other), o0).remoteFrees, 2);
  assert.throws(() => heap.free(small), DoubleFreeError);
  assert.throws(() => heap.free(large), DoubleFreeError);
  assert.equal(heap.stats().allocations.current, 0);
  heap.checkIntegrity();
});

Deno.test("SharedHeap.create() over memory that is not zero (a used buffer) starts clean", () => {
  for (const dirt of [0xff, 0xa5, 0x01]) {
    const memory = new SharedArrayBuffer(4 * MiB);
    new Uint8Array(memory).fill(dirt);
    for (const byteOffset of [0, 4096 + 8]) {
      using heap = SharedHeap.create(memory, { byteOffset });
      heap.checkIntegrity();
      assert.equal(heap.stats().freeBytes, heap.stats().byteLength);
      const blocks = [64, 5000, 9000, 100_000, 64, 300_000].map((n) =>
        heap.alloc(n)
      );
      for (const b of blocks) heap.free(b);
      for (const b of blocks) {
        assert.throws(() => heap.free(b), DoubleFreeError);
      }
      heap.checkIntegrity();
      const again = blocks.map((_, i) => heap.alloc(i % 2 ? 9000 : 64));
      for (const b of again) heap.free(b);
      assert.equal(heap.stats().allocations.current, 0);
      // The next heap lies over this one's leftovers, dirt included.
      heap.detach();
    }
  }
});
