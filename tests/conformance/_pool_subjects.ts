/**
 * Adapters of the pools to the contract: `@allot/caching`'s
 * `CachingAllocator` and `StepPlannedPool`, `@allot/watermark`'s
 * `WatermarkAllocator` (all three over `@allot/cpu`'s `HostSegmentSource`,
 * so their blocks hold real bytes), and `@allot/storage`'s `BufferPool`.
 *
 * @module
 */

import type { DataPtr } from "@allot/core";
import { HostSegmentSource, SystemAllocator } from "@allot/cpu";
import {
  type CachedBlock,
  CachingAllocator,
  type PlannedBlock,
  StepPlannedPool,
} from "@allot/caching";
import { WatermarkAllocator, type WatermarkBuffer } from "@allot/watermark";
import { BufferPool, ManagedBufferPool } from "@allot/storage";
import { OwnershipRegistry } from "@allot/registry";
import { orUndefined, type Subject } from "./_contract.ts";

const KiB = 1024;
const MiB = 1024 * KiB;

type HostMemory = ArrayBuffer | SharedArrayBuffer;

function view(memory: HostMemory, byteOffset: number, n: number): Uint8Array {
  return new Uint8Array(memory, byteOffset, n);
}

/** `CachingAllocator` over host segments. */
export function cachingAllocator(): Subject<CachedBlock<HostMemory>> {
  const source = new HostSegmentSource({ capacityBytes: 4 * MiB });
  const a = new CachingAllocator(source);
  const other = new CachingAllocator(new HostSegmentSource());
  const stats = () => a.memoryStats();
  return {
    target: a,
    knownGaps: ["tryAllocate", "stats"],
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => orUndefined(() => a.allocate(n)),
    free: (b) => a.free(b),
    countedBytes: (b) => b.blockByteLength,
    bytes: (b) => view(b.memory, b.byteOffset, b.byteLength),
    bytesInUse: () => stats().allocatedBytes.all,
    allocations: () => stats().allocation.all,
    reservedBytes: () => stats().reservedBytes.all.current,
    summary: () => a.memorySummary(),
    validate: () => a.validate(),
    emptyCache: () => a.emptyCache(),
    resetPeakStats: () => a.resetPeakStats(),
    resetAccumulatedStats: () => a.resetAccumulatedStats(),
    state: () => ({ stats: stats(), snapshot: a.snapshot() }),
    capacityBytes: 4 * MiB,
    maxRequestBytes: 1.5 * MiB,
    extraOps: [
      { name: "setMemoryFraction(0.5)", run: () => a.setMemoryFraction(0.5) },
      { name: "setMemoryFraction(1)", run: () => a.setMemoryFraction(1) },
    ],
    extraParameters: [
      {
        name: "setMemoryFraction",
        call: (v) => a.setMemoryFraction(v as number),
      },
      { name: "roundSize", call: (v) => a.roundSize(v as number) },
    ],
    foreign: () => other.allocate(64),
    close: () => {
      a.emptyCache();
      other.emptyCache();
    },
  };
}

/** Everything a `StepPlannedPool` shows: it has no `stats()` or `snapshot()`. */
export function plannedState(p: StepPlannedPool<unknown>): unknown {
  return {
    requested: p.requestedBytes,
    live: p.liveBytes,
    reserved: p.reservedBytes,
    held: p.heldBytes,
    peaks: [p.peakRequestedBytes, p.peakLiveBytes, p.peakReservedBytes],
    segments: [p.segmentsCreated, p.segmentsReleased, p.segmentCount],
    steps: [p.stepCount, p.replanCount, p.fastStepCount],
  };
}

/** `StepPlannedPool` over host segments. */
export function stepPlannedPool(): Subject<PlannedBlock<HostMemory>> {
  const source = new HostSegmentSource({ capacityBytes: 4 * MiB });
  const p = new StepPlannedPool(source);
  const other = new StepPlannedPool(new HostSegmentSource());
  return {
    target: p,
    knownGaps: [
      "recordStream",
      "snapshot",
      "resetPeakStats",
      "resetAccumulatedStats",
      "stats",
      "memorySummary",
    ],
    allocate: (n) => p.allocate(n),
    tryAllocate: (n) => p.tryAllocate(n),
    free: (b) => p.free(b),
    countedBytes: (_b, n) => n,
    bytes: (b) => view(b.memory, b.byteOffset, b.requestedByteLength),
    bytesInUse: () => ({
      current: p.requestedBytes,
      peak: p.peakRequestedBytes,
    }),
    reservedBytes: () => p.reservedBytes,
    validate: () => p.validate(),
    emptyCache: () => p.emptyCache(),
    extraOps: [
      { name: "endStep", run: () => p.endStep() },
      { name: "endStep", run: () => p.endStep() },
      { name: "trim(0)", run: () => p.trim(0) },
    ],
    state: () => plannedState(p),
    capacityBytes: 4 * MiB,
    minRequestBytes: 1,
    maxRequestBytes: 1.5 * MiB,
    extraParameters: [
      { name: "trim", optional: true, call: (v) => p.trim(v as number) },
    ],
    foreign: () => other.allocate(64),
    close: () => {
      p.emptyCache();
      other.emptyCache();
    },
  };
}

/** `WatermarkAllocator` over host segments. */
export function watermarkAllocator(): Subject<WatermarkBuffer<HostMemory>> {
  const source = new HostSegmentSource({ capacityBytes: 4 * MiB });
  const a = new WatermarkAllocator(source);
  const other = new WatermarkAllocator(new HostSegmentSource());
  return {
    target: a,
    knownGaps: ["tryAllocate", "recordStream"],
    allocate: (n) => a.allocateBuffer(n),
    tryAllocate: (n) => a.tryAllocateBuffer(n),
    free: (b) => a.free(b),
    countedBytes: (b) => b.byteLength,
    bytes: (b) => view(b.memory, b.byteOffset, b.requestedByteLength),
    bytesInUse: () => a.stats().allocatedBytes,
    reservedBytes: () => source.reservedBytes,
    summary: () => a.memorySummary(),
    validate: () => a.validate(),
    emptyCache: () => a.emptyCache(),
    resetPeakStats: () => a.resetPeakStats(),
    resetAccumulatedStats: () => a.resetAccumulatedStats(),
    extraOps: [
      { name: "freeInactiveBuffers", run: () => a.freeInactiveBuffers() },
    ],
    state: () => ({ stats: a.stats(), snapshot: a.snapshot() }),
    capacityBytes: 4 * MiB,
    minRequestBytes: 1,
    maxRequestBytes: 1.5 * MiB,
    extraParameters: [
      {
        name: "setHighWatermarkRatio",
        accepts: [1.5],
        call: (v) => a.setHighWatermarkRatio(v as number),
      },
      {
        name: "setLowWatermarkRatio",
        accepts: [1.5],
        call: (v) => a.setLowWatermarkRatio(v as number),
      },
    ],
    foreign: () => other.allocateBuffer(64),
    close: () => {
      a.emptyCache();
      other.emptyCache();
    },
  };
}

/** `BufferPool` over a bounded `SystemAllocator`. */
export function bufferPool(): Subject<
  { p: DataPtr<HostMemory, HostMemory>; n: number }
> {
  const pool = new BufferPool(
    new SystemAllocator({ capacityBytes: 1 * MiB }),
  );
  const other = new BufferPool(new SystemAllocator());
  const stats = () => pool.stats();
  return {
    target: pool,
    knownGaps: [
      "allocate",
      "tryAllocate",
      "free",
      "recordStream",
      "synchronize",
      "emptyCache",
      "snapshot",
      "resetPeakStats",
      "resetAccumulatedStats",
      "memorySummary",
    ],
    allocate: (n) => ({ p: pool.acquire(n), n }),
    tryAllocate: (n) => orUndefined(() => ({ p: pool.acquire(n), n })),
    free: (h) => pool.recycle(h.p),
    freeRaw: (v) => pool.recycle(v as never),
    countedBytes: (_h, n) => n,
    bytes: (h) =>
      new Uint8Array(h.p.memory as ArrayBuffer, h.p.byteOffset, h.n),
    bytesInUse: () => ({ current: stats().requestedBytes }),
    reservedBytes: () => stats().reserved.current,
    validate: () => pool.validate(),
    emptyCache: () => pool.cleanup(),
    state: () => stats(),
    capacityBytes: 1 * MiB,
    maxRequestBytes: 200 * KiB,
    foreign: () => ({ p: other.acquire(64), n: 64 }),
    close: () => {
      pool.cleanup();
      other.cleanup();
    },
  };
}

/** `OwnershipRegistry`: arrays it allocates (`newArray`) and frees. */
export function ownershipRegistry(): Subject<Uint8Array> {
  const allocator = new SystemAllocator({ capacityBytes: 1 * MiB });
  const r = new OwnershipRegistry();
  const stats = () => r.stats();
  return {
    target: r,
    knownGaps: [
      "allocate",
      "tryAllocate",
      "free",
      "recordStream",
      "synchronize",
      "emptyCache",
      "snapshot",
      "resetPeakStats",
      "resetAccumulatedStats",
      "validate",
      "memorySummary",
    ],
    allocate: (n) => r.newArray("u8", n, { allocator }),
    tryAllocate: (n) => orUndefined(() => r.newArray("u8", n, { allocator })),
    free: (a) => void r.unregister(a),
    freeRaw: (v) => void r.unregister(v as Uint8Array),
    countedBytes: (_a, n) => n,
    bytes: (a) => a,
    bytesInUse: () => stats().requestedBytes,
    reservedBytes: () => stats().reservedBytes.current,
    validate: () => {},
    state: () => ({ stats: stats(), records: [...r.records()] }),
    capacityBytes: 1 * MiB,
    maxRequestBytes: 200 * KiB,
    extraParameters: [
      {
        name: "newArray(u8, 64, { alignment })",
        optional: true,
        call: (v) => r.newArray("u8", 64, { alignment: v as number }),
      },
    ],
    foreign: () => new Uint8Array(64),
    close: () => r.dispose(),
  };
}

/** `ManagedBufferPool`: pooled `DataPtr`s that return on release. */
export function managedBufferPool(): Subject<DataPtr<HostMemory, unknown>> {
  const pool = new ManagedBufferPool(
    new SystemAllocator({ capacityBytes: 1 * MiB }),
  );
  const stats = () => pool.stats();
  return {
    target: pool,
    knownGaps: [
      "tryAllocate",
      "free",
      "recordStream",
      "synchronize",
      "emptyCache",
      "snapshot",
      "resetPeakStats",
      "resetAccumulatedStats",
      "validate",
      "memorySummary",
    ],
    releaseIsIdempotent: true,
    allocate: (n) => pool.allocate(n),
    tryAllocate: (n) => orUndefined(() => pool.allocate(n)),
    free: (p) => p.release(),
    countedBytes: (_p, n) => n,
    bytes: (p) =>
      new Uint8Array(p.memory as ArrayBuffer, p.byteOffset, p.byteLength),
    bytesInUse: () => ({ current: stats().requestedBytes }),
    reservedBytes: () => stats().reserved.current,
    validate: () => {},
    emptyCache: () => pool.cleanup(),
    state: () => stats(),
    capacityBytes: 1 * MiB,
    maxRequestBytes: 200 * KiB,
    close: () => pool.dispose(),
  };
}
