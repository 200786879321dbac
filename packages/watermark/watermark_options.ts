/**
 * Options of {@linkcode WatermarkAllocator} and of one buffer request.
 *
 * @module
 */

import type { TraceRecorderOptions } from "@allot/core";

/**
 * Reads host bytes of a segment memory: `ArrayBuffer`, `SharedArrayBuffer`,
 * `WebAssembly.Memory`, or a memory with a `bytes` `Uint8Array` (the mock's
 * `backed` memory).
 */
export type HostViewFunction<M> = (
  memory: M,
  range: { byteOffset: number; byteLength: number },
) => Uint8Array | undefined;

/** Options of {@linkcode WatermarkAllocator}. */
export interface WatermarkAllocatorOptions<M = unknown> {
  /**
   * Recommended maximum working-set size in bytes (Metal's
   * `recommendedMaxWorkingSetSize`); the watermarks are ratios of it.
   *
   * @default {source.capacityBytes}
   */
  recommendedMaxBytes?: number;
  /**
   * Hard limit as a ratio of `recommendedMaxBytes`, in `[0, 2]`; 0 means no
   * limit.
   *
   * @default {1.7}
   */
  highWatermarkRatio?: number;
  /**
   * Soft limit as a ratio of `recommendedMaxBytes`, in `[0, high]`; 0
   * disables garbage collection. At or above it the allocator is under
   * memory pressure.
   *
   * @default {1.4 with unified memory, 1.0 otherwise (at most the high ratio)}
   */
  lowWatermarkRatio?: number;
  /**
   * Whether the device shares memory with the host; sets the default low
   * ratio and sends requests of at most `maxScalarByteLength` to the shared pool.
   *
   * @default {true}
   */
  unifiedMemory?: boolean;
  /**
   * Largest request that goes into small heaps.
   *
   * @default {1 MiB}
   */
  maxSmallByteLength?: number;
  /**
   * Requests below this (and above `maxSmallByteLength`) go into large heaps.
   *
   * @default {10 MiB}
   */
  minLargeByteLength?: number;
  /**
   * Largest size of a small heap. Heaps start smaller (see
   * `minSmallHeapByteLength`) and grow with the bytes the allocator holds.
   *
   * @default {8 MiB}
   */
  smallHeapByteLength?: number;
  /**
   * Largest size of a large heap (heaps start at `minLargeHeapByteLength`); also the default `maxSlackByteLength`.
   *
   * @default {32 MiB}
   */
  largeHeapByteLength?: number;
  /**
   * Largest size of an extra-large heap (heaps start at
   * `minXlargeHeapByteLength`), made for requests below half of the heap
   * while not under memory pressure.
   *
   * @default {1 GiB, or a sixteenth of a smaller recommended size rounded down to a power of two (at least `largeHeapByteLength`)}
   */
  xlargeHeapByteLength?: number;
  /**
   * Smallest small heap. A new heap of a class is the power of two at or
   * above an eighth of the bytes the allocator holds in heaps, between the
   * class's smallest and largest size: a workload that holds little gets
   * small heaps, and heap sizes grow geometrically to the largest size as
   * it holds more. Equal to `smallHeapByteLength`: every small heap is
   * that size (MPS). At most `smallHeapByteLength`.
   *
   * @default {128 KiB (at most smallHeapByteLength)}
   */
  minSmallHeapByteLength?: number;
  /**
   * Smallest large heap (see `minSmallHeapByteLength`); a request larger
   * than the heap gets a heap of its size. At most `largeHeapByteLength`.
   *
   * @default {2 MiB (at most largeHeapByteLength)}
   */
  minLargeHeapByteLength?: number;
  /**
   * Smallest extra-large heap (see `minSmallHeapByteLength`); a request of
   * half the heap or more gets a heap of its own. At most
   * `xlargeHeapByteLength`.
   *
   * @default {largeHeapByteLength (at most xlargeHeapByteLength)}
   */
  minXlargeHeapByteLength?: number;
  /**
   * Requests that get their own heap are rounded up to this (a power of
   * two).
   *
   * @default {2 MiB}
   */
  largeRoundByteLength?: number;
  /**
   * A cached buffer is reused for a smaller request only if it is at most
   * this many bytes larger (and at most twice the request; under memory
   * pressure at most `largeRoundByteLength` larger).
   *
   * @default {largeHeapByteLength}
   */
  maxSlackByteLength?: number;
  /**
   * On unified memory, requests of at most this many bytes go to the shared
   * small pool (MPS's `kMaxScalarAlloc`).
   *
   * @default {8}
   */
  maxScalarByteLength?: number;
  /**
   * Bytes the device has allocated in this process, including allocations
   * not made by this allocator (Metal's `currentAllocatedSize`). The high
   * watermark applies to it. Never less than this allocator's heaps: a call
   * that throws or returns no byte count (NaN, negative) counts those.
   *
   * @default {the bytes of this allocator's heaps}
   */
  driverAllocatedBytes?: () => number;
  /**
   * Bits of {@linkcode DebugVerbosity}.
   *
   * @default {DebugVerbosity.silent}
   */
  debugVerbosity?: number;
  /**
   * Where debug lines and callback errors go.
   *
   * @default {console.error}
   */
  logger?: (line: string) => void;
  /**
   * Record allocator events for `snapshot().history` (see
   * {@linkcode WatermarkAllocator.recordHistory}).
   *
   * @default {false}
   */
  recordHistory?: boolean | TraceRecorderOptions;
  /**
   * Reads the host bytes of a segment memory for shared buffers.
   *
   * @default {host memories and memories with a `bytes` Uint8Array}
   */
  hostView?: HostViewFunction<M>;
  /**
   * Debug mode for hunting a bug: {@linkcode WatermarkAllocator.validate}
   * runs before and after every call that changes the allocator (slow),
   * and a freed buffer is filled with `JUNK_BYTE` when its recorded work
   * has completed, where the host can write the memory (a view taken
   * earlier cannot be detached: it shares the heap's memory, and reads
   * junk).
   *
   * @default {false}
   */
  strict?: boolean;
}

/** Options of one buffer request. */
export interface AllocateBufferOptions {
  /**
   * `private` (device-only) or `shared` (host-visible).
   *
   * @default {"private"}
   */
  pool?: "private" | "shared";
}

/** Options of {@linkcode WatermarkAllocator.allocateBufferAsync}. */
export interface AllocateBufferAsyncOptions extends AllocateBufferOptions {
  /**
   * Stops the wait for pending work: the promise rejects with the signal's
   * reason and the wait changes nothing (the buffers stay pending until
   * their work completes; the cache is not emptied). Already aborted:
   * rejects before anything is done. Without it, work that never completes
   * makes the call wait forever.
   *
   * @default {undefined}
   */
  signal?: AbortSignal;
}
