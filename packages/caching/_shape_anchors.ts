/**
 * Internal: keeps the shapes (V8 maps) of the pools' objects alive after the
 * last pool is dropped.
 *
 * V8 holds a class's instance maps (every map after the constructor's
 * initial one) only weakly, through the initial map's transitions. When a
 * runtime drops its last `CachingAllocator` or `StepPlannedPool` and a full
 * GC runs, those maps die: the next pool gets new maps, every optimized
 * function that checked the old ones is thrown away ("embedded weak objects
 * cleared"), its inline caches start over, and fields that had widened
 * (a byte counter past 2^30 is no longer a small integer) widen again,
 * deprecating maps and deoptimizing once more. On the real-trace replay
 * (`webgpu/bench/real_traces.ts`, one new allocator per pass and a `gc()`
 * between passes) that left `GpuCachingAllocator` about 4x slower per op for
 * the rest of the process.
 *
 * Below, at the first construction of each kind of pool, one pool of that
 * kind runs a short trace-like workload on a mock device (about 600 allocations and frees in both
 * pools, splits, merges, replans, byte counts past 2^30 so counters take
 * their widest representation) and is kept with a live block: the maps it
 * reached stay alive for the process. A workload that reaches fewer shapes
 * (a few fixed sizes) was measured not to be enough.
 *
 * @module
 */

import { MockSegmentSource } from "@allot/core";
import { CachingAllocator } from "./caching_allocator.ts";
import { StepPlannedPool } from "./step_planned_pool.ts";

/** Sizes across the small and large pools. */
const SIZES = [4, 512, 4096, 1 << 20, 3 << 20, 30 << 20];

/**
 * A trace-like mix on `allocate`/`free`: sizes across the pools with small
 * offsets, frees out of order, steps, and one request past 2^30 bytes per
 * step (so byte counts take their widest representation).
 */
function exercise<B>(
  allocate: (byteLength: number) => B,
  free: (block: B) => void,
  endStep: () => void,
): void {
  let seed = 1;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  const live: B[] = [];
  for (let step = 0; step < 3; step++) {
    for (let i = 0; i < 100; i++) {
      const r = next();
      if (live.length > 0 && r % 3 === 0) {
        free(live.splice(r % live.length, 1)[0]);
      } else {
        live.push(allocate(SIZES[r % SIZES.length] + (r % 7) * 1024));
      }
    }
    for (const block of live.splice(0)) free(block);
    free(allocate(2 ** 30 + 4096));
    endStep();
  }
}

function cachingAnchor(): unknown {
  const allocator = new CachingAllocator(
    new MockSegmentSource({ capacityBytes: 2 ** 40 }),
    { label: "allot:anchor" },
  );
  exercise(
    (size) => allocator.allocate(size),
    (block) => block.release(),
    () => {},
  );
  allocator.emptyCache();
  return [allocator, allocator.allocate(4), allocator.memoryStats()];
}

function stepPlannedAnchor(): unknown {
  const pool = new StepPlannedPool(
    new MockSegmentSource({ capacityBytes: 2 ** 40 }),
  );
  exercise(
    (size) => pool.allocate(size),
    (block) => pool.free(block),
    () => pool.endStep(),
  );
  pool.emptyCache();
  return [pool, pool.allocate(4)];
}

/** The anchors built so far, by pool kind (kept for the process). */
const kept = new Map<"caching" | "planned", unknown>();

/**
 * Builds the anchor of one pool kind once: `CachingAllocator`'s constructor
 * asks for `"caching"`, `StepPlannedPool`'s for `"planned"`, so a runtime
 * that uses one kind pays for that one (a few milliseconds, once). After the
 * first call of a kind, and inside the anchor's own construction, it returns
 * at once.
 *
 * @param kind The pool kind being constructed.
 */
export function _anchorShapes(kind: "caching" | "planned"): void {
  if (kept.has(kind)) return;
  kept.set(kind, undefined); // the anchor's own construction returns at once
  kept.set(kind, kind === "caching" ? cachingAnchor() : stepPlannedAnchor());
}
