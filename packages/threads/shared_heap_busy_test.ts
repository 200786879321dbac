/**
 * A free is done once its block is back in its arena: work it may start
 * afterwards under the shared core lock (giving an empty slab or cached
 * spans back) must not turn it into a `HeapBusyError` when the lock is held
 * (the caller would free again: a double free, or a free of the block's next
 * owner). The lock is held here by writing a foreign token into its word, as
 * a Worker terminated inside it leaves it.
 */
import assert from "node:assert/strict";
import { HeapBusyError, SharedHeap } from "./mod.ts";
import {
  A_STATE,
  ARENA_ATTACHED,
  ARENA_WORDS,
  H_ARENAS,
  H_ATTACHED,
  H_LOCK,
} from "./_layout.ts";
import { checkPattern, writePattern } from "../core/_test_faults.ts";

const KiB = 1024, MiB = 1 << 20;
const FOREIGN = (1 << 6) | 63; // arena 63, generation 1: no handle here

function holdLock(heap: SharedHeap): () => void {
  const i32 = new Int32Array(heap.buffer);
  const w = (heap.byteOffset >> 2) + H_LOCK;
  assert.equal(Atomics.compareExchange(i32, w, 0, FOREIGN), 0);
  return () => Atomics.store(i32, w, 0);
}

/** Every page is back in the core once all handles detach. */
function assertAllReturned(heap: SharedHeap): void {
  using probe = SharedHeap.attach(heap.descriptor());
  heap.detach();
  probe.checkIntegrity();
  assert.equal(probe.stats().freeBytes, probe.stats().byteLength);
}

Deno.test("SharedHeap: an owner's free that empties a slab succeeds while the core lock is held", () => {
  const heap = SharedHeap.create(4 * MiB, { lockTimeoutMs: 0 });
  const blocks = Array.from({ length: 3 * 972 }, () => heap.alloc(64));
  const release = holdLock(heap);
  for (const at of blocks) heap.free(at); // two slabs empty: one is spare
  assert.equal(heap.stats().allocations.current, 0);
  assert.throws(() => heap.alloc(100_000), HeapBusyError);
  release();
  heap.checkIntegrity();
  assertAllReturned(heap);
});

Deno.test("SharedHeap: an owner's large frees past its cache budget succeed while the core lock is held", () => {
  const heap = SharedHeap.create(4 * MiB, { lockTimeoutMs: 0 });
  const blocks = Array.from({ length: 6 }, () => heap.alloc(400 * KiB));
  const before = heap.stats();
  const release = holdLock(heap);
  for (const at of blocks) heap.free(at);
  assert.equal(heap.stats().allocations.current, 0);
  assert.equal(heap.stats().freeBytes, before.freeBytes); // kept cached
  release();
  // The next large free gives the excess back.
  heap.free(heap.alloc(400 * KiB));
  heap.checkIntegrity();
  assertAllReturned(heap);
});

Deno.test("SharedHeap: a remote free that empties an abandoned slab succeeds while the core lock is held", () => {
  const heap = SharedHeap.create(4 * MiB, { lockTimeoutMs: 0 });
  const worker = SharedHeap.attach(heap.descriptor());
  const a = worker.alloc(64), b = worker.alloc(64);
  worker.detach(); // its slab is abandoned, two blocks live
  heap.free(a);
  const release = holdLock(heap);
  heap.free(b); // the slab's last block
  assert.equal(heap.stats().allocations.current, 0);
  assert.throws(
    () => heap.free(b),
    (e: unknown) => !(e instanceof HeapBusyError),
  );
  release();
  heap.checkIntegrity();
});

Deno.test("SharedHeap: a free that needs the held lock first is refused with HeapBusyError and changes nothing", () => {
  const heap = SharedHeap.create(4 * MiB, { lockTimeoutMs: 0 });
  const worker = SharedHeap.attach(heap.descriptor());
  const large = worker.alloc(100_000);
  writePattern(heap.bytes(large, 1000), 5);
  worker.detach(); // the owner is gone: its span goes to the core, locked
  const before = heap.stats();
  const release = holdLock(heap);
  assert.throws(() => heap.free(large), HeapBusyError);
  assert.deepEqual(heap.stats(), before);
  assert.equal(heap.usableByteLength(large), 25 * 4096);
  checkPattern(heap.bytes(large, 1000), 5);
  release();
  heap.free(large);
  assertAllReturned(heap);
});

Deno.test("SharedHeap.reclaim() frees the slot of a Worker that died claiming it (no token yet), not HeapBusyError", () => {
  const heap = SharedHeap.create(4 * MiB, { lockTimeoutMs: 0 });
  const i32 = new Int32Array(heap.buffer);
  const h = heap.byteOffset >> 2, arena = 9;
  // What attach() leaves when terminated right after winning the slot.
  Atomics.store(
    i32,
    h + H_ARENAS + arena * ARENA_WORDS + A_STATE,
    ARENA_ATTACHED,
  );
  Atomics.add(i32, h + H_ATTACHED, 1);
  assert.ok(heap.arenas().some((a) => a.arena === arena));
  const report = heap.reclaim(arena);
  assert.deepEqual(report, { arena, freed: [], kept: [] });
  assert.ok(!heap.arenas().some((a) => a.arena === arena));
  heap.checkIntegrity();
  heap.detach();
});

Deno.test("SharedHeap.reclaim() refused on a busy core changes nothing: the arena is reclaimed once the core is free", () => {
  const heap = SharedHeap.create(4 * MiB, { lockTimeoutMs: 0 });
  const dead = SharedHeap.attach(heap.descriptor()); // its Worker "died"
  const blocks = [dead.alloc(100), dead.alloc(100_000)];
  const before = { arenas: heap.arenas(), stats: heap.stats() };
  const release = holdLock(heap);
  assert.throws(() => heap.reclaim(dead.arena), HeapBusyError);
  release();
  assert.deepEqual({ arenas: heap.arenas(), stats: heap.stats() }, before);
  const report = heap.reclaim(dead.arena);
  assert.deepEqual(report.freed.map((b) => b.byteOffset), blocks);
  assert.equal(heap.stats().allocations.current, 0);
  assertAllReturned(heap);
});
