/**
 * Adapters of the pools to the contract: `@allot/caching`'s
 * `CachingAllocator` and `StepPlannedPool`, `@allot/watermark`'s
 * `WatermarkAllocator` (all three over `@allot/cpu`'s `HostSegmentSource`,
 * so their blocks hold real bytes), and `@allot/storage`'s `BufferPool`.
 *
 * @module
 */

import { type DataPtr, OutOfMemoryError } from "@allot/core";
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
import {
  NO_FENCES,
  NO_LAYOUT,
  NO_STREAMS,
  NOTHING_CACHED,
  SELF_FREEING,
  type Subject,
} from "./_contract.ts";

const NO_ASYNC = { recordStream: NO_STREAMS, synchronize: NO_FENCES } as const;

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
  const stats = () => a.stats();
  return {
    target: a,
    knownGaps: [],
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => a.tryAllocate(n),
    free: (b) => a.free(b),
    countedBytes: (b) => b.blockByteLength,
    bytes: (b) => view(b.memory, b.byteOffset, b.byteLength),
    bytesInUse: () => stats().allocatedBytes.all,
    allocations: () => stats().allocation.all,
    reservedBytes: () => stats().reservedBytes.all.current,
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

/** Everything a `StepPlannedPool` shows: its `stats()` and figures. */
export function plannedState(p: StepPlannedPool<unknown>): unknown {
  return {
    stats: p.stats(),
    snapshot: p.snapshot(),
    requested: p.requestedBytes,
    live: p.liveBytes,
    reserved: p.reservedBytes,
    held: p.heldBytes,
    peaks: [p.peakRequestedBytes, p.peakLiveBytes, p.peakReservedBytes],
    segments: [p.segmentsCreated, p.segmentsReleased, p.segmentCount],
    steps: [p.stepCount, p.replanCount, p.fastStepCount],
  };
}

/** Why a planned pool has no `recordStream`. */
export const PLANNED_NO_STREAMS =
  "no streams: a freed range is reused in queue order (one queue)";

/** `StepPlannedPool` over host segments. */
export function stepPlannedPool(): Subject<PlannedBlock<HostMemory>> {
  const source = new HostSegmentSource({ capacityBytes: 4 * MiB });
  const p = new StepPlannedPool(source);
  const other = new StepPlannedPool(new HostSegmentSource());
  return {
    target: p,
    knownGaps: [],
    notApplicable: { recordStream: PLANNED_NO_STREAMS },
    allocate: (n) => p.allocate(n),
    tryAllocate: (n) => p.tryAllocate(n),
    free: (b) => p.free(b),
    countedBytes: (_b, n) => n,
    bytes: (b) => view(b.memory, b.byteOffset, b.requestedByteLength),
    bytesInUse: () => p.stats().requestedBytes,
    reservedBytes: () => p.reservedBytes,
    validate: () => p.validate(),
    emptyCache: () => p.emptyCache(),
    resetPeakStats: () => p.resetPeakStats(),
    resetAccumulatedStats: () => p.resetAccumulatedStats(),
    extraOps: [
      { name: "endStep", run: () => p.endStep() },
      { name: "endStep", run: () => p.endStep() },
      { name: "trim(0)", run: () => p.trim(0) },
    ],
    state: () => plannedState(p),
    capacityBytes: 4 * MiB,
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
    knownGaps: [],
    allocate: (n) => a.allocateBuffer(n),
    tryAllocate: (n) => a.tryAllocateBuffer(n),
    free: (b) => a.free(b),
    countedBytes: (b) => b.byteLength,
    bytes: (b) => view(b.memory, b.byteOffset, b.requestedByteLength),
    bytesInUse: () => a.stats().allocatedBytes,
    reservedBytes: () => source.reservedBytes,
    validate: () => a.validate(),
    emptyCache: () => a.emptyCache(),
    resetPeakStats: () => a.resetPeakStats(),
    resetAccumulatedStats: () => a.resetAccumulatedStats(),
    extraOps: [
      { name: "freeInactiveBuffers", run: () => a.freeInactiveBuffers() },
    ],
    state: () => ({ stats: a.stats(), snapshot: a.snapshot() }),
    capacityBytes: 4 * MiB,
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
    knownGaps: [],
    notApplicable: { ...NO_ASYNC, snapshot: NO_LAYOUT },
    allocate: (n) => ({ p: pool.allocate(n), n }),
    tryAllocate: (n) => {
      const p = pool.tryAllocate(n);
      return p === undefined ? undefined : { p, n };
    },
    free: (h) => pool.free(h.p),
    freeRaw: (v) => pool.free(v as never),
    countedBytes: (_h, n) => n,
    bytes: (h) =>
      new Uint8Array(h.p.memory as ArrayBuffer, h.p.byteOffset, h.n),
    bytesInUse: () => stats().requested,
    reservedBytes: () => stats().reserved.current,
    validate: () => pool.validate(),
    emptyCache: () => void pool.emptyCache(),
    resetPeakStats: () => pool.resetPeakStats(),
    resetAccumulatedStats: () => pool.resetAccumulatedStats(),
    state: () => stats(),
    capacityBytes: 1 * MiB,
    maxRequestBytes: 200 * KiB,
    foreign: () => ({ p: other.allocate(64), n: 64 }),
    close: () => {
      pool.emptyCache();
      other.emptyCache();
    },
  };
}

/** Why a registry has no allocate/tryAllocate/free of its own. */
const REGISTRY_RECORDS =
  "a registry records ownership of memory allocated elsewhere: `register`/`newArray` and `unregister`";

/** `OwnershipRegistry`: arrays it allocates (`newArray`) and frees. */
export function ownershipRegistry(): Subject<Uint8Array> {
  const allocator = new SystemAllocator({ capacityBytes: 1 * MiB });
  const r = new OwnershipRegistry();
  const stats = () => r.stats();
  return {
    target: r,
    knownGaps: [],
    notApplicable: {
      ...NO_ASYNC,
      allocate: REGISTRY_RECORDS,
      tryAllocate: REGISTRY_RECORDS,
      free: REGISTRY_RECORDS,
      emptyCache: NOTHING_CACHED,
      snapshot: "its `records()` list every live record",
    },
    allocate: (n) => r.newArray("u8", n, { allocator }),
    tryAllocate: (n) => {
      try {
        return r.newArray("u8", n, { allocator });
      } catch (e) {
        if (e instanceof OutOfMemoryError) return undefined;
        throw e;
      }
    },
    free: (a) => void r.unregister(a),
    freeRaw: (v) => void r.unregister(v as Uint8Array),
    countedBytes: (_a, n) => n,
    bytes: (a) => a,
    bytesInUse: () => stats().requestedBytes,
    reservedBytes: () => stats().reservedBytes.current,
    validate: () => r.validate(),
    resetPeakStats: () => r.resetPeakStats(),
    resetAccumulatedStats: () => r.resetAccumulatedStats(),
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
    knownGaps: [],
    notApplicable: { ...NO_ASYNC, free: SELF_FREEING, snapshot: NO_LAYOUT },
    releaseIsIdempotent: true,
    allocate: (n) => pool.allocate(n),
    tryAllocate: (n) => pool.tryAllocate(n),
    free: (p) => p.release(),
    countedBytes: (_p, n) => n,
    bytes: (p) =>
      new Uint8Array(p.memory as ArrayBuffer, p.byteOffset, p.byteLength),
    bytesInUse: () => stats().requested,
    reservedBytes: () => stats().reserved.current,
    validate: () => pool.validate(),
    emptyCache: () => void pool.emptyCache(),
    resetPeakStats: () => pool.resetPeakStats(),
    resetAccumulatedStats: () => pool.resetAccumulatedStats(),
    state: () => stats(),
    capacityBytes: 1 * MiB,
    maxRequestBytes: 200 * KiB,
    close: () => pool.dispose(),
  };
}
