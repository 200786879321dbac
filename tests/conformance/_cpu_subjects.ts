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
import {
  NO_FENCES,
  NO_STREAMS,
  NOTHING_CACHED,
  orUndefined,
  SELF_FREEING,
  type Subject,
} from "./_contract.ts";

/** Full stream N/A: no streams, no fences. */
const NO_ASYNC = { recordStream: NO_STREAMS, synchronize: NO_FENCES } as const;

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
    knownGaps: [],
    notApplicable: { ...NO_ASYNC, emptyCache: NOTHING_CACHED },
    allocate: (n) => ({ off: heap.allocate(n), n }),
    tryAllocate: (n) => {
      const off = heap.tryAllocate(n);
      return off === undefined ? undefined : { off, n };
    },
    free: (h) => heap.free(h.off),
    freeRaw: (v) => heap.free(v as number),
    countedBytes: (_h, n) => n,
    bytes: (h) => heap.bytes(h.off, h.n),
    bytesInUse: () => heap.stats().requestedBytes,
    allocations: () => heap.stats().allocations,
    resetPeakStats: () => heap.resetPeakStats(),
    resetAccumulatedStats: () => heap.resetAccumulatedStats(),
    validate: () => heap.validate(),
    state: () => ({ stats: heap.stats(), snapshot: heap.snapshot() }),
    capacityBytes: 256 * KiB,
    maxRequestBytes: 40 * KiB,
    extraParameters: [
      {
        name: "allocate(64, alignment)",
        optional: true,
        call: (v) => heap.allocate(64, v as number),
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
    knownGaps: [],
    notApplicable: {
      ...NO_ASYNC,
      free: SELF_FREEING,
      snapshot: "its heaps' `snapshot()` (`allocator.heaps`)",
    },
    releaseIsIdempotent: true,
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => a.tryAllocate(n),
    free: (p) => p.release(),
    countedBytes: (_p, n) => n,
    bytes: hostBytes,
    bytesInUse: () => a.stats(),
    reservedBytes: undefined,
    validate: () => a.validate(),
    emptyCache: () => void a.emptyCache(),
    resetPeakStats: () => a.resetPeakStats(),
    resetAccumulatedStats: () => a.resetAccumulatedStats(),
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
    knownGaps: [],
    notApplicable: {
      ...NO_ASYNC,
      free: SELF_FREEING,
      emptyCache: "nothing is cached: each buffer goes back to the engine",
      snapshot: "one `ArrayBuffer` per allocation: no layout to picture",
    },
    releaseIsIdempotent: true,
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => a.tryAllocate(n),
    free: (p) => p.release(),
    countedBytes: (_p, n) => n,
    bytes: hostBytes,
    bytesInUse: () => a.stats(),
    validate: () => a.validate(),
    resetPeakStats: () => a.resetPeakStats(),
    resetAccumulatedStats: () => a.resetAccumulatedStats(),
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
    knownGaps: [],
    notApplicable: NO_ASYNC,
    allocate: (n) => ({ addr: b.alloc(n), n }),
    tryAllocate: (n) => orUndefined(() => ({ addr: b.alloc(n), n })),
    free: (h) => b.free(h.addr),
    freeRaw: (v) => b.free(v as number),
    countedBytes: (h) => b.byteLengthOf(h.addr),
    bytes: (h) => b.bytes(h.addr, h.n),
    bytesInUse: () => b.stats().allocatedBytes,
    allocations: () => b.stats().allocations,
    reservedBytes: () => b.reservedBytes,
    validate: () => b.validate(),
    emptyCache: () => void b.emptyCache(),
    resetPeakStats: () => b.resetPeakStats(),
    resetAccumulatedStats: () => b.resetAccumulatedStats(),
    state: () => ({ stats: b.stats(), snapshot: b.snapshot() }),
    capacityBytes: 256 * KiB,
    maxRequestBytes: 40 * KiB,
    foreign: () => ({ addr: 32, n: 64 }),
    // (a negative address is a large block's)
    handleKind: [-1],
    close: () => {},
  };
}

/** `SharedHeap`: offsets in a `SharedArrayBuffer` that Workers share. */
export function sharedHeap(): Subject<{ off: number; n: number }> {
  const heap = SharedHeap.create(1 * MiB);
  return {
    target: heap,
    knownGaps: [],
    notApplicable: NO_ASYNC,
    allocate: (n) => ({ off: heap.allocate(n), n }),
    tryAllocate: (n) => {
      const off = heap.tryAllocate(n);
      return off === undefined ? undefined : { off, n };
    },
    free: (h) => heap.free(h.off),
    freeRaw: (v) => heap.free(v as number),
    countedBytes: (h) => heap.usableByteLength(h.off),
    bytes: (h) => heap.bytes(h.off, h.n),
    bytesInUse: () => heap.stats().allocatedBytes,
    allocations: () => heap.stats().allocations,
    validate: () => heap.validate(),
    emptyCache: () => heap.emptyCache(),
    resetPeakStats: () => heap.resetPeakStats(),
    resetAccumulatedStats: () => heap.resetAccumulatedStats(),
    state: () => ({ stats: heap.stats(), snapshot: heap.snapshot() }),
    capacityBytes: 1 * MiB,
    maxRequestBytes: 40 * KiB,
    extraParameters: [
      {
        name: "allocate(64, alignment)",
        optional: true,
        call: (v) => heap.allocate(64, v as number),
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
    knownGaps: [],
    notApplicable: { ...NO_ASYNC, free: SELF_FREEING },
    releaseIsIdempotent: true,
    allocate: (n) => a.allocate(n),
    tryAllocate: (n) => a.tryAllocate(n),
    free: (p) => p.release(),
    countedBytes: (p) => heap.usableByteLength(p.byteOffset - 64),
    bytes: hostBytes,
    bytesInUse: () => a.stats().allocatedBytes,
    allocations: () => a.stats().allocations,
    validate: () => a.validate(),
    emptyCache: () => a.emptyCache(),
    resetPeakStats: () => a.resetPeakStats(),
    resetAccumulatedStats: () => a.resetAccumulatedStats(),
    state: () => ({ stats: a.stats(), snapshot: a.snapshot() }),
    capacityBytes: 1 * MiB,
    maxRequestBytes: 40 * KiB,
    foreign: () => other.allocate(64),
    close: () => {
      heap.close();
      otherHeap.close();
    },
  };
}
