/**
 * Adapters of the CPU-side allocators to the contract: `@allot/cpu`'s
 * `CpuHeap`, `CpuAllocator` and `SystemAllocator`, `@allot/buddy`'s
 * `BuddyAllocator`, `@allot/threads`' `SharedHeap` and `SharedHeapAllocator`.
 *
 * @module
 */

import type { DataPtr } from "@allot/core";
import { CpuAllocator, CpuHeap, SystemAllocator } from "@allot/cpu";
import { BuddyAllocator } from "@allot/buddy";
import { SharedHeap, SharedHeapAllocator } from "@allot/threads";
import { orUndefined, type Subject } from "./_contract.ts";

const KiB = 1024;
const MiB = 1024 * KiB;

/** The part of a `DataPtr` the adapters use. */
function hostBytes(p: DataPtr): Uint8Array {
  const m = p.memory as ArrayBufferLike | WebAssembly.Memory;
  const buffer = m instanceof WebAssembly.Memory ? m.buffer : m;
  return new Uint8Array(buffer, p.byteOffset, p.byteLength);
}

/** `CpuHeap`: offsets in one `ArrayBuffer`. */
export function cpuHeap(): Subject<{ off: number; n: number }> {
  const heap = new CpuHeap(256 * KiB);
  return {
    target: heap,
    knownGaps: [
      "allocate",
      "tryAllocate",
      "recordStream",
      "synchronize",
      "emptyCache",
      "resetPeakStats",
      "resetAccumulatedStats",
      "validate",
      "memorySummary",
    ],
    allocate: (n) => ({ off: heap.alloc(n), n }),
    tryAllocate: (n) => {
      const off = heap.tryAlloc(n);
      return off === undefined ? undefined : { off, n };
    },
    free: (h) => heap.free(h.off),
    freeRaw: (v) => heap.free(v as number),
    countedBytes: (_h, n) => n,
    bytes: (h) => heap.bytes(h.off, h.n),
    bytesInUse: () => heap.stats().requestedBytes,
    allocations: () => heap.stats().allocations,
    resetPeakStats: () => heap.resetPeaks(),
    validate: () => heap.checkIntegrity(),
    state: () => ({ stats: heap.stats(), snapshot: heap.snapshot() }),
    capacityBytes: 256 * KiB,
    maxRequestBytes: 40 * KiB,
    extraParameters: [
      {
        name: "alloc(64, alignment)",
        optional: true,
        call: (v) => heap.alloc(64, v as number),
      },
    ],
    foreign: () => ({ off: 32, n: 64 }),
    close: () => heap.dispose(),
  };
}

/** `CpuAllocator`: `DataPtr`s over its heaps. */
export function cpuAllocator(): Subject<DataPtr> {
  const a = new CpuAllocator({
    heap: new CpuHeap(64 * KiB, { maxByteLength: 256 * KiB }),
    maxByteLength: 256 * KiB,
  });
  const other = new CpuAllocator();
  return {
    target: a,
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
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => orUndefined(() => a.allocate(n)),
    free: (p) => p.release(),
    countedBytes: (_p, n) => n,
    bytes: hostBytes,
    bytesInUse: () => a.stats(),
    reservedBytes: undefined,
    validate: () => {
      for (const h of a.heaps) h.checkIntegrity();
    },
    emptyCache: () => a.trim(),
    state: () => ({
      stats: a.stats(),
      heaps: a.heaps.map((h) => h.snapshot()),
    }),
    capacityBytes: 256 * KiB,
    maxRequestBytes: 40 * KiB,
    extraParameters: [
      {
        name: "allocate(64, alignment)",
        optional: true,
        call: (v) => a.allocate(64, v as number),
      },
    ],
    foreign: () => other.allocate(64),
    close: () => {},
  };
}

/** `SystemAllocator`: one `ArrayBuffer` per allocation. */
export function systemAllocator(): Subject<DataPtr> {
  const a = new SystemAllocator({ capacityBytes: 256 * KiB });
  const other = new SystemAllocator();
  return {
    target: a,
    knownGaps: [
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
    releaseIsIdempotent: true,
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => orUndefined(() => a.allocate(n)),
    free: (p) => p.release(),
    countedBytes: (_p, n) => n,
    bytes: hostBytes,
    bytesInUse: () => a.stats(),
    validate: () => a.validate(),
    state: () => ({ stats: a.stats(), count: a.allocationCount }),
    capacityBytes: 256 * KiB,
    maxRequestBytes: 40 * KiB,
    foreign: () => other.allocate(64),
    close: () => {},
  };
}

/** `BuddyAllocator`: addresses in pools of a backing allocator. */
export function buddyAllocator(): Subject<{ addr: number; n: number }> {
  const options = {
    initialPoolByteLength: 64 * KiB,
    maxPoolByteLength: 64 * KiB,
    minBlockByteLength: 256,
  };
  const b = new BuddyAllocator({
    ...options,
    backing: new SystemAllocator({ capacityBytes: 256 * KiB }),
  });
  return {
    target: b,
    knownGaps: [
      "tryAllocate",
      "recordStream",
      "synchronize",
      "emptyCache",
      "snapshot",
      "resetPeakStats",
      "resetAccumulatedStats",
      "validate",
      "memorySummary",
    ],
    allocate: (n) => ({ addr: b.alloc(n), n }),
    tryAllocate: (n) => orUndefined(() => ({ addr: b.alloc(n), n })),
    free: (h) => b.free(h.addr),
    freeRaw: (v) => b.free(v as number),
    countedBytes: (h) => b.byteLengthOf(h.addr),
    bytes: (h) => b.bytes(h.addr, h.n),
    bytesInUse: () => b.stats().allocatedBytes,
    allocations: () => b.stats().allocations,
    reservedBytes: () => b.reservedBytes,
    validate: () => b.checkIntegrity(),
    emptyCache: () => void b.trim(),
    state: () => b.stats(),
    capacityBytes: 256 * KiB,
    maxRequestBytes: 40 * KiB,
    foreign: () => ({ addr: 32, n: 64 }),
    close: () => {},
  };
}

/** `SharedHeap`: offsets in a `SharedArrayBuffer` that Workers share. */
export function sharedHeap(): Subject<{ off: number; n: number }> {
  const heap = SharedHeap.create(1 * MiB);
  return {
    target: heap,
    knownGaps: [
      "allocate",
      "tryAllocate",
      "recordStream",
      "synchronize",
      "emptyCache",
      "snapshot",
      "resetPeakStats",
      "resetAccumulatedStats",
      "validate",
      "memorySummary",
    ],
    allocate: (n) => ({ off: heap.alloc(n), n }),
    tryAllocate: (n) => {
      const off = heap.tryAlloc(n);
      return off === undefined ? undefined : { off, n };
    },
    free: (h) => heap.free(h.off),
    freeRaw: (v) => heap.free(v as number),
    countedBytes: (h) => heap.usableByteLength(h.off),
    bytes: (h) => heap.bytes(h.off, h.n),
    bytesInUse: () => {
      const s = heap.stats();
      return { current: s.bytesInUse };
    },
    validate: () => heap.checkIntegrity(),
    state: () => heap.stats(),
    capacityBytes: 1 * MiB,
    maxRequestBytes: 40 * KiB,
    extraParameters: [
      {
        name: "alloc(64, alignment)",
        optional: true,
        call: (v) => heap.alloc(64, v as number),
      },
    ],
    foreign: () => ({ off: 32, n: 64 }),
    close: () => heap.close(),
  };
}

/** `SharedHeapAllocator`: ref-counted `DataPtr`s in a `SharedHeap`. */
export function sharedHeapAllocator(): Subject<DataPtr> {
  const heap = SharedHeap.create(1 * MiB);
  const a = new SharedHeapAllocator(heap);
  const otherHeap = SharedHeap.create(256 * KiB);
  const other = new SharedHeapAllocator(otherHeap);
  return {
    target: a,
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
      "stats",
      "memorySummary",
    ],
    releaseIsIdempotent: true,
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => orUndefined(() => a.allocate(n)),
    free: (p) => p.release(),
    countedBytes: (p) => heap.usableByteLength(p.byteOffset - 64),
    bytes: hostBytes,
    bytesInUse: () => ({ current: heap.stats().bytesInUse }),
    validate: () => heap.checkIntegrity(),
    state: () => heap.stats(),
    capacityBytes: 1 * MiB,
    maxRequestBytes: 40 * KiB,
    foreign: () => other.allocate(64),
    close: () => {
      heap.close();
      otherHeap.close();
    },
  };
}
