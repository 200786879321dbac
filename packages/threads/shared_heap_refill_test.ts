/**
 * A slab taken from the core must be complete when the core lock is
 * released: `snapshot()`, `checkIntegrity()` (strict heaps run it under the
 * lock after every call) and the walk of `blocksOf()` / `reclaim()` read a
 * slab's header under that lock in any thread. The test makes the window
 * deterministic without a hook in the heap: a fake waiter on the lock makes
 * every release call `Atomics.notify`, which the test wraps to look at the
 * heap from a second handle at each release, while the allocating handle
 * is stopped right after it.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { SharedHeap } from "./mod.ts";
import {
  A_TOKEN,
  ARENA_WORDS,
  CLASS_SIZES,
  H_ARENAS,
  H_LOCK,
  H_WAITERS,
  PAGE,
  S_BUMP,
  S_CAP,
  S_CLASS,
  S_OWNER,
  S_SIZE,
  S_STATES,
  SLAB_BYTES,
  SLAB_HEADER,
} from "./_layout.ts";

const MiB = 1 << 20;

/**
 * Fills every free page of the core with a slab header that lies: class,
 * size, capacity and bump all 3, every state byte live and the owner word
 * `token`. A slab whose header is written after the lock is released shows
 * it to whoever looks in between.
 */
function poisonFreePages(heap: SharedHeap, token: number): void {
  const free = heap.stats().freeBytes;
  const span = heap.alloc(free);
  const i32 = new Int32Array(heap.buffer);
  const u8 = new Uint8Array(heap.buffer);
  for (let at = span; at < span + free; at += PAGE) {
    u8.fill(0x5a, at, at + PAGE);
    const s = at >> 2;
    i32[s + S_CLASS] = 3;
    i32[s + S_SIZE] = 3;
    i32[s + S_CAP] = 3;
    i32[s + S_BUMP] = 3;
    i32[s + S_OWNER] = token;
    u8.fill(1, at + S_STATES, at + S_STATES + 64);
  }
  heap.free(span);
  heap.emptyCache();
  assert.equal(heap.stats().freeBytes, free);
}

/** Runs `look` at every release of the core lock of `heap` during `body`. */
function atEveryUnlock(
  heap: SharedHeap,
  look: () => void,
  body: () => void,
): number {
  const i32 = new Int32Array(heap.buffer);
  const lockWord = (heap.byteOffset >> 2) + H_LOCK;
  const waiters = (heap.byteOffset >> 2) + H_WAITERS;
  const notify = Atomics.notify;
  let looks = 0, inside = false;
  Atomics.add(i32, waiters, 1);
  Atomics.notify = ((array: Int32Array, index: number, count?: number) => {
    if (!inside && array.buffer === heap.buffer && index === lockWord) {
      inside = true;
      try {
        looks++;
        look();
      } finally {
        inside = false;
      }
    }
    return notify(array, index, count);
  }) as typeof Atomics.notify;
  try {
    body();
  } finally {
    Atomics.notify = notify;
    Atomics.sub(i32, waiters, 1);
  }
  return looks;
}

describe("SharedHeap slab refill", () => {
  it("SharedHeap writes a new slab's header before it releases the core lock: snapshot, checkIntegrity and blocksOf never see the pages' old bytes", () => {
    using heap = SharedHeap.create(new SharedArrayBuffer(4 * MiB));
    using other = SharedHeap.attach(heap.descriptor());
    const i32 = new Int32Array(heap.buffer);
    const token = i32[
      (heap.byteOffset >> 2) + H_ARENAS + heap.arena * ARENA_WORDS + A_TOKEN
    ];
    assert.notEqual(token, 0);
    poisonFreePages(heap, token);
    const live: number[] = [];
    let slabsSeen = 0;
    const look = (): void => {
      other.checkIntegrity();
      const snapshot = other.snapshot();
      let active = 0;
      for (const segment of snapshot.segments) {
        if (segment.pool !== "small") continue;
        slabsSeen++;
        const size = segment.blocks[0]?.byteLength;
        assert.ok(CLASS_SIZES.includes(size), `block size ${size}`);
        assert.equal(
          segment.blocks.length,
          Math.floor((SLAB_BYTES - SLAB_HEADER) / size),
        );
        for (const block of segment.blocks) {
          if (block.state === "active_allocated") active++;
        }
      }
      // The block being allocated is marked after its slab is set up.
      assert.equal(active, live.length);
      assert.deepEqual(
        other.blocksOf(heap.arena).map((b) => b.byteOffset),
        [...live].sort((a, b) => a - b),
      );
    };
    const looks = atEveryUnlock(heap, look, () => {
      for (const size of [64, 100, 3000, 8192]) {
        // Two slabs of each class: the second taken while the first is live.
        const cap = Math.floor((SLAB_BYTES - SLAB_HEADER) / size);
        for (let i = 0; i <= cap; i++) live.push(heap.alloc(size));
      }
    });
    assert.ok(looks >= 4, `${looks} lock releases seen`);
    assert.ok(slabsSeen >= 4, `${slabsSeen} slabs seen`);
    for (const offset of live) heap.free(offset);
    heap.checkIntegrity();
  });

  it("SharedHeap in strict mode: another handle's check under the lock never meets a half-set slab", () => {
    using heap = SharedHeap.create(new SharedArrayBuffer(4 * MiB), {
      strict: true,
    });
    using other = SharedHeap.attach(heap.descriptor());
    assert.equal(other.strict, true);
    poisonFreePages(heap, 0x7fff_0000);
    const live: number[] = [];
    const looks = atEveryUnlock(heap, () => {
      // A strict handle's free runs checkIntegrity under the core lock.
      other.free(other.alloc(64));
    }, () => {
      for (let i = 0; i < 20; i++) live.push(heap.alloc(CLASS_SIZES[i]));
    });
    assert.ok(looks >= 20);
    for (const offset of live) heap.free(offset);
  });
});
