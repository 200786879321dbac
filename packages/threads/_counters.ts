/**
 * Contention counters of a shared heap's arenas, for benchmarks and tests:
 * each arena counts its own lock acquisitions, waits, large-span cache hits
 * and page traffic with plain increments on its own arena line (no shared
 * word is written for them). Internal: not part of the public API.
 *
 * @module
 */

import {
  A_LARGE_HITS,
  A_LARGE_MISSES,
  A_LOCK_SLEEPS,
  A_LOCK_WAITS,
  A_LOCKS,
  A_PAGES_RETURNED,
  A_PAGES_TAKEN,
  A_REMOTE_FREES,
  A_SLABS_TAKEN,
  A_SPANS_ADOPTED,
  ARENA_WORDS,
  H_ARENAS,
} from "./_layout.ts";
import type { SharedHeap } from "./shared_heap.ts";

/** What one arena counted since it was claimed. */
export interface ArenaCounters {
  /** Shared core lock acquisitions. */
  locks: number;
  /** Acquisitions that found the lock held. */
  lockWaits: number;
  /** Sleeps in `Atomics.wait` on the lock. */
  lockSleeps: number;
  /** Large allocations served by the arena's span cache. */
  largeHits: number;
  /** Large allocations that went to the core. */
  largeMisses: number;
  /** Pages taken from the core. */
  pagesTaken: number;
  /** Pages given back to the core. */
  pagesReturned: number;
  /** Frees of blocks other arenas allocated (small and large). */
  remoteFrees: number;
  /** Slabs taken from the core. */
  slabsTaken: number;
  /** Large spans other arenas freed, taken back into the cache. */
  spansAdopted: number;
}

/**
 * Reads an arena's counters (exact once its thread is quiet).
 *
 * @param heap Any handle of the heap.
 * @param arena The arena index (default: the handle's own).
 * @returns The counters.
 */
export function arenaCounters(
  heap: SharedHeap,
  arena: number = heap.arena,
): ArenaCounters {
  const i32 = new Int32Array(heap.buffer);
  const w = (heap.byteOffset >> 2) + H_ARENAS + arena * ARENA_WORDS;
  const at = (k: number) => Atomics.load(i32, w + k);
  return {
    locks: at(A_LOCKS),
    lockWaits: at(A_LOCK_WAITS),
    lockSleeps: at(A_LOCK_SLEEPS),
    largeHits: at(A_LARGE_HITS),
    largeMisses: at(A_LARGE_MISSES),
    pagesTaken: at(A_PAGES_TAKEN),
    pagesReturned: at(A_PAGES_RETURNED),
    remoteFrees: at(A_REMOTE_FREES),
    slabsTaken: at(A_SLABS_TAKEN),
    spansAdopted: at(A_SPANS_ADOPTED),
  };
}

/** `after - before`, field by field. */
export function counterDelta(
  after: ArenaCounters,
  before: ArenaCounters,
): ArenaCounters {
  const out = { ...after };
  for (const k of Object.keys(out) as (keyof ArenaCounters)[]) {
    out[k] -= before[k];
  }
  return out;
}
