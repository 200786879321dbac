import assert from "node:assert/strict";
import { SharedHeap } from "./mod.ts";
import { arenaCounters, counterDelta } from "./_counters.ts";

const MiB = 1 << 20;
const PAGE = 4096;
const SLAB = 16 * PAGE;
const SLAB_HEADER = 3328;

/** Allocates `size`-byte blocks until one lands outside the first's slab. */
function fillSlab(heap: SharedHeap, size: number) {
  const blocks = [heap.alloc(size)];
  const start = blocks[0] - SLAB_HEADER;
  for (;;) {
    const x = heap.alloc(size);
    if (x < start || x >= start + SLAB) return { blocks, next: x };
    blocks.push(x);
  }
}

Deno.test("SharedHeap's large-span cache reuses freed spans without the core lock and evicts the oldest first", () => {
  using heap = SharedHeap.create(4 * MiB);
  const pages = heap.stats().byteLength / PAGE;
  const limit = Math.min(16384, pages >> 4);
  // Three spans, freed oldest to newest: 16, 32 and 16 pages, 64 in all,
  // over the limit: the oldest (the first 16) goes back, the 32 stays.
  assert.ok(limit >= 48 && limit < 64, `limit ${limit} fits the scenario`);
  const s = heap.alloc(16 * PAGE);
  const b = heap.alloc(32 * PAGE);
  const c = heap.alloc(16 * PAGE);
  heap.free(s);
  heap.free(b);
  const before = arenaCounters(heap);
  heap.free(c); // over the limit: one flush under the lock
  const flushed = counterDelta(arenaCounters(heap), before);
  assert.equal(flushed.locks, 1);
  assert.equal(flushed.pagesReturned, 16, "only the oldest span went back");
  const t0 = arenaCounters(heap);
  assert.equal(heap.alloc(32 * PAGE), b, "the newer, larger span stayed");
  assert.equal(heap.alloc(16 * PAGE), c, "the newest 16-page span is reused");
  const reuse = counterDelta(arenaCounters(heap), t0);
  assert.equal(reuse.largeHits, 2);
  assert.equal(reuse.locks, 0, "cache hits take no lock");
  assert.equal(heap.stats().allocationCount, 2);
  heap.free(b);
  heap.free(c);
  heap.checkIntegrity();
});

Deno.test("SharedHeap keeps one empty slab per class back: a swing around a slab boundary takes no slab each time", () => {
  using heap = SharedHeap.create(4 * MiB);
  // Fill the first 1 KiB slab, then swing one block in and out of a second.
  const { blocks: first, next } = fillSlab(heap, 1024);
  heap.free(next);
  const before = arenaCounters(heap);
  for (let i = 0; i < 100; i++) heap.free(heap.alloc(1024));
  const swing = counterDelta(arenaCounters(heap), before);
  assert.equal(swing.slabsTaken, 0);
  assert.equal(swing.locks, 0);
  for (const x of first) heap.free(x);
  heap.checkIntegrity();
  assert.equal(heap.stats().allocationCount, 0);
});

Deno.test("SharedHeap gives its spare slabs and cached spans back when the core runs out", () => {
  using heap = SharedHeap.create(2 * MiB);
  const pages = heap.stats().byteLength / PAGE;
  // Pages: a filler, slab A (full), slab B (emptied: the spare), a cached
  // 8-page span, then the free rest. With B and the span given back, the
  // free run after A is 448 pages, a bin base the core's good fit serves.
  const want = 448;
  const filler = heap.alloc((pages - 16 - want) * PAGE);
  const { blocks, next } = fillSlab(heap, 4096);
  heap.free(next); // B empty, kept back
  heap.free(heap.alloc(8 * PAGE)); // cached
  assert.ok(heap.stats().freeBytes < want * PAGE, "needs what was kept back");
  const all = heap.alloc(want * PAGE);
  assert.equal(heap.usableByteLength(all), want * PAGE);
  heap.free(all);
  heap.free(filler);
  for (const x of blocks) heap.free(x);
  heap.checkIntegrity();
  assert.equal(heap.stats().allocationCount, 0);
});
