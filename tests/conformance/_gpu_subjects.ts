/**
 * Adapters of `@allot/webgpu`'s allocators to the contract, over any
 * `GPUDevice`: a mock one (`_mock_gpu.ts`) in the main run, Deno's real
 * WebGPU (llvmpipe here) in the GPU run. Storage buffers are not CPU
 * visible, so no byte patterns; the handle frees itself (`release()`), so no
 * foreign free.
 *
 * @module
 */

import {
  type GpuAllocation,
  GpuCachingAllocator,
  GpuPlannedAllocator,
  GpuWatermarkAllocator,
} from "@allot/webgpu";
import { ONE_QUEUE, SELF_FREEING, type Subject } from "./_contract.ts";
import { PLANNED_NO_STREAMS, plannedState } from "./_pool_subjects.ts";

const MiB = 2 ** 20;
const source = { capacityBytes: 16 * MiB };

/** `GpuCachingAllocator` on `device`. */
export function gpuCaching(
  device: GPUDevice,
  reuse: "queue-order" | "after-fence" = "queue-order",
): Subject<GpuAllocation> {
  const a = new GpuCachingAllocator(device, { source, reuse });
  const stats = () => a.stats();
  return {
    target: a,
    pendingFrees: reuse === "after-fence",
    knownGaps: [],
    notApplicable: { free: SELF_FREEING, recordStream: ONE_QUEUE },
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => a.tryAllocate(n),
    free: (h) => h.release(),
    countedBytes: (_h, n) => n,
    bytesInUse: () => stats().requestedBytes.all,
    allocations: () => stats().allocation.all,
    reservedBytes: () => a.source.reservedBytes,
    validate: () => a.validate(),
    emptyCache: () => a.emptyCache(),
    resetPeakStats: () => a.resetPeakStats(),
    resetAccumulatedStats: () => a.resetAccumulatedStats(),
    state: () => ({ stats: stats(), snapshot: a.snapshot() }),
    capacityBytes: 16 * MiB,
    maxRequestBytes: 3 * MiB,
    settle: () => a.synchronize(),
    close: () => a.emptyCache(),
  };
}

/** `GpuWatermarkAllocator` on `device`. */
export function gpuWatermark(device: GPUDevice): Subject<GpuAllocation> {
  const a = new GpuWatermarkAllocator(device, { source });
  return {
    target: a,
    pendingFrees: a.reuse === "after-fence",
    knownGaps: [],
    notApplicable: { free: SELF_FREEING, recordStream: ONE_QUEUE },
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => a.tryAllocate(n),
    free: (h) => h.release(),
    countedBytes: (_h, n) => n,
    bytesInUse: () => a.stats().requestedBytes,
    reservedBytes: () => a.source.reservedBytes,
    validate: () => a.validate(),
    emptyCache: () => a.emptyCache(),
    resetPeakStats: () => a.resetPeakStats(),
    resetAccumulatedStats: () => a.resetAccumulatedStats(),
    state: () => ({ stats: a.stats(), snapshot: a.snapshot() }),
    capacityBytes: 16 * MiB,
    maxRequestBytes: 3 * MiB,
    settle: () => a.synchronize(),
    close: () => a.emptyCache(),
  };
}

/** `GpuPlannedAllocator` on `device`. */
export function gpuPlanned(device: GPUDevice): Subject<GpuAllocation> {
  const a = new GpuPlannedAllocator(device, { source });
  const p = a.pool;
  return {
    target: a,
    knownGaps: [],
    notApplicable: { free: SELF_FREEING, recordStream: PLANNED_NO_STREAMS },
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => a.tryAllocate(n),
    free: (h) => h.release(),
    countedBytes: (_h, n) => n,
    bytesInUse: () => a.stats().requestedBytes,
    reservedBytes: () => a.source.reservedBytes,
    validate: () => a.validate(),
    resetPeakStats: () => a.resetPeakStats(),
    resetAccumulatedStats: () => a.resetAccumulatedStats(),
    settle: () => a.synchronize(),
    emptyCache: () => a.emptyCache(),
    extraOps: [
      { name: "endStep", run: () => a.endStep() },
      { name: "endStep", run: () => a.endStep() },
      { name: "trim(0)", run: () => a.trim(0) },
    ],
    state: () => plannedState(p),
    capacityBytes: 16 * MiB,
    maxRequestBytes: 3 * MiB,
    extraParameters: [
      { name: "trim", optional: true, call: (v) => a.trim(v as number) },
    ],
    close: () => a.emptyCache(),
  };
}
