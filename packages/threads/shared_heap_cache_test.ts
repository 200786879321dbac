import assert from "node:assert/strict";
import { DoubleFreeError, InvalidArgumentError } from "@allot/core";
import { SharedHeap } from "./mod.ts";
import { arenaCounters, counterDelta } from "./_counters.ts";
import { H_RETURNS, RETURN_WORDS, RETURNS_CLOSED } from "./_layout.ts";

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
  const limit = pages >> 2;
  // A lone handle's cache may hold the caches' whole budget, a quarter of
  // the heap. Spans freed oldest to newest: 68, 68, 80 and 40 pages, 256 in
  // all, over the limit of 252: the oldest go back until half the limit
  // (126) is left, so the two 68-page spans go and the larger one stays.
  assert.equal(limit, 252, "the scenario's limit");
  const s1 = heap.alloc(68 * PAGE);
  const s2 = heap.alloc(68 * PAGE);
  const b = heap.alloc(80 * PAGE);
  const c = heap.alloc(40 * PAGE);
  heap.free(s1);
  heap.free(s2);
  heap.free(b);
  const before = arenaCounters(heap);
  heap.free(c); // over the limit: one flush under the lock
  const flushed = counterDelta(arenaCounters(heap), before);
  assert.equal(flushed.locks, 1);
  assert.equal(flushed.pagesReturned, 136, "only the two oldest went back");
  const t0 = arenaCounters(heap);
  assert.equal(heap.alloc(80 * PAGE), b, "the newer, larger span stayed");
  assert.equal(heap.alloc(40 * PAGE), c, "the newest span is reused");
  const reuse = counterDelta(arenaCounters(heap), t0);
  assert.equal(reuse.largeHits, 2);
  assert.equal(reuse.locks, 0, "cache hits take no lock");
  assert.equal(heap.stats().allocations.current, 2);
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
  assert.equal(heap.stats().allocations.current, 0);
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
  assert.equal(heap.stats().allocations.current, 0);
});

Deno.test("SharedHeap returns a large block freed by another arena to its owner without the lock", () => {
  using heap = SharedHeap.create(8 * MiB);
  using other = SharedHeap.attach(heap.descriptor());
  const a = heap.alloc(32 * PAGE);
  const o0 = arenaCounters(other);
  other.free(a);
  const o = counterDelta(arenaCounters(other), o0);
  assert.equal(o.locks, 0, "the remote free took no lock");
  assert.equal(o.remoteFrees, 1);
  assert.equal(heap.stats().allocations.current, 0);
  // Not live while on the return list: every free of it is refused.
  assert.throws(() => other.free(a), DoubleFreeError);
  assert.throws(() => heap.free(a), DoubleFreeError);
  assert.throws(() => heap.usableByteLength(a), InvalidArgumentError);
  // The owner's next block of that size is the same span, without the lock.
  const h0 = arenaCounters(heap);
  assert.equal(heap.alloc(32 * PAGE), a);
  const h = counterDelta(arenaCounters(heap), h0);
  assert.equal(h.spansAdopted, 1);
  assert.equal(h.largeHits, 1);
  assert.equal(h.locks, 0);
  other.free(a);
  heap.checkIntegrity();
});

Deno.test("SharedHeap gives returned spans to the core when their owner detaches, is reclaimed, or has left", () => {
  using heap = SharedHeap.create(8 * MiB);
  const all = heap.stats().byteLength;
  // Detach takes its return list back.
  const w1 = SharedHeap.attach(heap.descriptor());
  heap.free(w1.alloc(24 * PAGE));
  w1.detach();
  assert.equal(heap.stats().freeBytes, all, "detach");
  // Reclaim of a dead arena takes its return list back.
  const w2 = SharedHeap.attach(heap.descriptor());
  heap.free(w2.alloc(24 * PAGE));
  heap.reclaim(w2.arena);
  assert.equal(heap.stats().freeBytes, all, "reclaim");
  // A free after the owner left goes straight to the core.
  const w3 = SharedHeap.attach(heap.descriptor());
  const b = w3.alloc(24 * PAGE);
  w3.detach();
  heap.free(b);
  assert.equal(heap.stats().freeBytes, all, "owner gone");
  // A list closed under a pusher's feet (owner leaving): the core takes it.
  const w4 = SharedHeap.attach(heap.descriptor());
  const c = w4.alloc(24 * PAGE);
  const i32 = new Int32Array(heap.buffer);
  const r = (heap.byteOffset >> 2) + H_RETURNS + w4.arena * RETURN_WORDS;
  Atomics.store(i32, r, RETURNS_CLOSED);
  heap.free(c);
  Atomics.store(i32, r, 0);
  assert.equal(heap.stats().freeBytes, all, "list closed");
  w4.detach();
  heap.checkIntegrity();
  heap.detach();
  using after = SharedHeap.attach(heap.descriptor());
  assert.equal(after.stats().freeBytes, all, "every page back in the core");
});

Deno.test("SharedHeap bounds a return list its owner does not take, and any arena takes it when the core runs out", () => {
  using heap = SharedHeap.create(8 * MiB);
  using other = SharedHeap.attach(heap.descriptor());
  const pages = heap.stats().byteLength / PAGE;
  const limit = Math.min(16384, pages >> 4);
  assert.ok(limit > 120 && limit < 160, `limit ${limit} fits the scenario`);
  // The owner allocates seven 40-page spans (pages 0-279) and stops;
  // another arena frees them all: past the limit (the fourth) the list
  // goes to the core, the last three (pages 160-279) wait on it.
  const spans = Array.from({ length: 7 }, () => heap.alloc(40 * PAGE));
  const free0 = heap.stats().freeBytes;
  for (const s of spans) other.free(s);
  assert.equal(heap.stats().freeBytes - free0, 160 * PAGE, "bounded");
  // 1,792 pages in one span: only with the waiting spans back in the core
  // (free runs: 160 and pages - 280), whichever arena asks.
  assert.ok(pages - 280 < 1792 && pages >= 1792);
  other.free(other.alloc(1792 * PAGE));
  heap.checkIntegrity();
});
