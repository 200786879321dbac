/**
 * Internal: keeps the shapes (V8 maps) of the GPU allocators' objects alive
 * after the last allocator is dropped.
 *
 * V8 holds a class's instance maps only weakly (through the transitions of
 * the constructor's initial map): when a runtime drops its last
 * `GpuCachingAllocator` or `GpuPlannedAllocator` (with its segment source,
 * ledger, queue frees and caching allocator) and a full GC runs, the maps
 * die, and the next allocator gets new ones. Every optimized function that
 * checked the old maps is thrown away, its inline caches start over, and the
 * hot paths run unoptimized for a while. On the real-trace replay
 * (`bench/real_traces.ts`: a new allocator per pass, `gc()` between passes)
 * that left `GpuCachingAllocator` 3-5x slower per op in the rows that ran
 * after the fresh rows.
 *
 * Below, at the first construction of each kind of allocator, one
 * allocator of that kind runs a short workload on a stand-in device (no GPU: `createBuffer` returns a plain object), with limits
 * past 2^30 bytes so size fields take their widest representation, and is
 * kept: the maps it reached stay alive for the process. `@allot/caching`
 * does the same for its pools (`_shape_anchors.ts` there).
 *
 * @module
 */

import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuPlannedAllocator } from "./gpu_planned_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";

function standInDevice(): GPUDevice {
  return {
    label: "allot:anchor",
    limits: {
      minStorageBufferOffsetAlignment: 256,
      maxBufferSize: 2 ** 32,
      maxStorageBufferBindingSize: 2 ** 31,
    },
    lost: new Promise<never>(() => {}),
    queue: { onSubmittedWorkDone: () => Promise.resolve() },
    pushErrorScope() {},
    popErrorScope: () => Promise.resolve(null),
    createBuffer: (d: GPUBufferDescriptor) => ({
      label: d.label ?? "",
      size: d.size,
      usage: d.usage,
      destroy() {},
    }),
  } as unknown as GPUDevice;
}

/** Sizes across the small and large pools. */
const SIZES = [4, 512, 4096, 1 << 20, 3 << 20, 30 << 20];

function exercise(
  allocator: { allocate(byteLength: number): GpuAllocation },
  endStep: () => void,
): GpuAllocation {
  // a trace-like mix: sizes across the pools, frees out of order, steps
  let seed = 1;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  const live: GpuAllocation[] = [];
  for (let step = 0; step < 3; step++) {
    for (let i = 0; i < 100; i++) {
      const r = next();
      if (live.length > 0 && r % 3 === 0) {
        live.splice(r % live.length, 1)[0].release();
      } else {
        live.push(allocator.allocate(SIZES[r % SIZES.length] + (r % 7) * 1024));
      }
    }
    for (const handle of live.splice(0)) handle.release();
    allocator.allocate(2 ** 30 + 4096).release();
    endStep();
  }
  return allocator.allocate(4);
}

function cachingAnchor(): unknown[] {
  const device = standInDevice();
  const caching = new GpuCachingAllocator(device);
  const result: unknown[] = [
    caching,
    exercise(caching, () => {}),
    new GpuCachingAllocator(device, { reuse: "after-fence" }),
  ];
  // the id path's slots too (out of order, sizes across the pools)
  const ids: number[] = [];
  for (let i = 0; i < 300; i++) {
    if (i % 3 === 2) caching.freeById(ids.splice((i * 7) % ids.length, 1)[0]);
    else {
      const id = caching.allocateId(SIZES[i % SIZES.length] + (i % 5) * 512);
      if (caching.bufferOf(id) === null || caching.offsetOf(id) < 0) break;
      ids.push(id);
    }
  }
  for (const id of ids) caching.freeById(id);
  result.push(caching.allocateId(2 ** 30 + 4096));
  caching.emptyCache();
  return result;
}

function plannedAnchor(): unknown[] {
  const planned = new GpuPlannedAllocator(standInDevice());
  const result = [planned, exercise(planned, () => planned.endStep())];
  planned.emptyCache();
  return result;
}

/** The anchors built so far, by allocator kind (kept for the process). */
const kept = new Map<"caching" | "planned", unknown>();

/**
 * Builds the anchor of one allocator kind once: `GpuCachingAllocator`'s
 * constructor asks for `"caching"`, `GpuPlannedAllocator`'s for
 * `"planned"`. After the first call of a kind, and inside the anchor's own
 * construction, it returns at once.
 *
 * @param kind The allocator kind being constructed.
 */
export function _anchorShapes(kind: "caching" | "planned"): void {
  if (kept.has(kind)) return;
  kept.set(kind, undefined);
  kept.set(kind, kind === "caching" ? cachingAnchor() : plannedAnchor());
}
