/**
 * {@linkcode WatermarkAllocator}: PyTorch's MPS heap allocator for any device
 * behind a {@linkcode SegmentSource}: heaps by request size, private, shared
 * and scalar pools with best-fit reuse, low and high watermarks over a
 * recommended working-set size, garbage collection under memory pressure,
 * lifecycle callbacks, buffer metadata and fence-ordered frees.
 *
 * @module
 */

import {
  acquireSegment,
  alignUp,
  AllocatorBase,
  AllotError,
  collectByAge,
  DataPtr,
  DeferredFrees,
  type Deleter,
  describeValue,
  type Device,
  DoubleFreeError,
  type Fence,
  finishSnapshot,
  hostBuffer,
  InvalidArgumentError,
  isHostMemory,
  junkFill,
  PoolStats,
  releaseSegment,
  type SegmentSource,
  segmentTotals,
  StatRecount,
  type Stream,
  UnsupportedOperationError,
  UseAfterFreeError,
  validateByteLength,
  validateObject,
} from "@allot/core";
import { _Block } from "./_block.ts";
import { _Handle, type _Owner } from "./_handle.ts";
import { _Heap } from "./_heap.ts";
import { _Pool } from "./_pool.ts";
import { DebugVerbosity } from "./debug_verbosity.ts";
import type {
  BufferCallback,
  BufferEvent,
  BufferEventType,
  PoolKind,
  ReleaseReason,
  WatermarkBuffer,
} from "./watermark_buffer.ts";
import type { WatermarkStats } from "./watermark_stats.ts";
import { WatermarkOutOfMemoryError } from "./watermark_out_of_memory_error.ts";
import type {
  WatermarkBlockSnapshot,
  WatermarkSegmentSnapshot,
  WatermarkSnapshot,
} from "./watermark_snapshot.ts";
import {
  formatMemorySummary,
  type MemoryStats,
  type MemorySummaryOptions,
  type TraceAction,
  TraceRecorder,
  type TraceRecorderOptions,
} from "@allot/core";

const MiB = 1024 * 1024;
/** The largest high watermark ratio, as in MPS: twice the recommended size. */
const MAX_RATIO = 2;

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
   * Size of a small heap.
   *
   * @default {8 MiB}
   */
  smallHeapByteLength?: number;
  /**
   * Size of a large heap; also the default `maxSlackByteLength`.
   *
   * @default {32 MiB}
   */
  largeHeapByteLength?: number;
  /**
   * Size of an extra-large heap, made for requests below half of it while
   * not under memory pressure.
   *
   * @default {1 GiB, or a sixteenth of a smaller recommended size rounded down to a power of two (at least `largeHeapByteLength`)}
   */
  xlargeHeapByteLength?: number;
  /**
   * Requests that get their own heap are rounded up to this.
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
   * watermark applies to it.
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

interface _Params<M> {
  size: number;
  requested: number;
  pool: _Pool<M>;
  pressure: boolean;
}

function defaultHostView(
  memory: unknown,
  range: { byteOffset: number; byteLength: number },
): Uint8Array | undefined {
  if (isHostMemory(memory)) {
    return new Uint8Array(
      hostBuffer(memory),
      range.byteOffset,
      range.byteLength,
    );
  }
  if (typeof memory === "object" && memory !== null && "bytes" in memory) {
    const bytes = (memory as { bytes: unknown }).bytes;
    if (bytes instanceof Uint8Array) {
      return bytes.subarray(
        range.byteOffset,
        range.byteOffset + range.byteLength,
      );
    }
  }
  return undefined;
}

function formatBytes(bytes: number): string {
  if (bytes === Infinity) return "unlimited";
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < MiB) return `${(bytes / 1024).toFixed(2)} KiB`;
  if (bytes < 1024 * MiB) return `${(bytes / MiB).toFixed(2)} MiB`;
  return `${(bytes / (1024 * MiB)).toFixed(2)} GiB`;
}

/**
 * 1 GiB, as in MPS, but at most a sixteenth of the recommended working set
 * (rounded down to a power of two, at least the large heap): one
 * extra-large heap pinned by a few live buffers must not hold a large share
 * of a small device.
 */
function defaultXlargeHeap(recommended: number, largeHeap: number): number {
  const GiB = 1024 * MiB;
  if (!Number.isFinite(recommended) || recommended >= 16 * GiB) return GiB;
  const share = 2 ** Math.floor(Math.log2(recommended / 16));
  return Math.max(largeHeap, Math.min(GiB, share));
}

function positiveOption(
  options: Record<string, unknown>,
  name: string,
  fallback: number,
): number {
  const value = options[name] ?? fallback;
  if (
    typeof value !== "number" || !Number.isSafeInteger(value) || value < 1
  ) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a positive integer, received ${
        describeValue(value)
      }`,
      { name, value, limit: 1 },
    );
  }
  return value;
}

/**
 * PyTorch's MPS heap allocator, made for any device behind a
 * {@linkcode SegmentSource}.
 *
 * - **Heaps** are segments. Requests of at most 1 MiB go into 8 MiB heaps,
 *   below 10 MiB into 32 MiB heaps, below half the extra-large heap into an
 *   extra-large heap (1 GiB, or a sixteenth of a smaller recommended size)
 *   while not under memory pressure and while that heap would not reach the
 *   low watermark, and larger ones into a heap of their own rounded to 2 MiB
 *   (all configurable). When a class-sized heap would break the high
 *   watermark or the device refuses it, a heap of exactly the request is
 *   tried.
 * - **Pools**: private, shared (host-visible segments) and scalar, each with
 *   small and large heaps. A cached buffer is reused by best fit if it is at
 *   most `maxSlackByteLength` larger and at most twice the request (under memory
 *   pressure at most `largeRoundByteLength` larger, since carving an exact buffer
 *   costs nothing here); when the only fit is larger, the allocator makes a new buffer in a
 *   heap with room, or else releases the idle oversize buffer and carves the
 *   request from its heap (a heap of its own is released with it under
 *   pressure, or when the request belongs in a shared heap, so small buffers
 *   never pin a big heap).
 * - **Watermarks**: the high limit (`highWatermarkRatio` × recommended) is
 *   hard; the low limit is soft: at or above it, requests are under
 *   pressure: no extra-large heaps, narrow reuse slack, and cached buffers
 *   of the request's pool older than the average are collected (releasing
 *   heaps that become empty) until driver bytes fall below the low limit.
 *   Unlike MPS, small pools are collected too: a decoder's growing caches
 *   leave many cached small buffers of distinct sizes.
 * - **Order of attempts**: cached buffer, garbage collection under
 *   pressure, new buffer, `allocation-failed` callbacks then cached buffer or
 *   new buffer, release cached buffers of the pool, release all cached
 *   buffers; {@linkcode WatermarkAllocator.allocateBufferAsync} then waits
 *   for pending work and releases everything; then out of memory.
 * - **Events**: {@linkcode WatermarkAllocator.recordEvents} ties buffers to
 *   submitted work; a buffer freed while its work is pending returns to its
 *   pool only once the work completes.
 *
 * @typeParam M Type of the segment memory.
 *
 * @example Allocate, reuse and watch the stats
 * ```ts
 * import { WatermarkAllocator } from "@allot/watermark";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource({ capacityBytes: 1 << 30 });
 * const allocator = new WatermarkAllocator(device);
 * const a = allocator.allocateBuffer(1000);
 * assert.equal(a.requestedByteLength, 1000);
 * assert.equal(a.byteLength, 1024); // aligned to the device's 256 bytes
 * assert.equal(allocator.stats().reservedBytes.current, 8 << 20); // one small heap
 * a.release();
 * const b = allocator.allocateBuffer(1000);
 * assert.equal(b.id, a.id); // recycled
 * b.release();
 * allocator.emptyCache();
 * assert.equal(device.reservedBytes, 0);
 * ```
 */
export class WatermarkAllocator<M = unknown>
  extends AllocatorBase<M | null, WatermarkBuffer<M>> {
  /** The device of the segment source. */
  readonly device: Device;
  /** Offset and size alignment of buffers. */
  readonly alignment: number;
  /** Whether the device shares memory with the host. */
  readonly unifiedMemory: boolean;
  #source: SegmentSource<M>;
  #recommended: number;
  #highRatio = 0;
  #lowRatio = 0;
  #highLimit = Infinity;
  #lowLimit = Infinity;
  #maxSmall: number;
  #minLarge: number;
  #smallHeap: number;
  #largeHeap: number;
  #xlargeHeap: number;
  #roundLarge: number;
  #maxSlack: number;
  #maxScalar: number;
  #driverFn: (() => number) | undefined;
  #verbosity: number;
  #logger: (line: string) => void;
  #hostView: HostViewFunction<M>;
  #pools: {
    privateSmall: _Pool<M>;
    privateLarge: _Pool<M>;
    sharedSmall: _Pool<M>;
    sharedLarge: _Pool<M>;
    scalar: _Pool<M>;
  };
  #poolList: _Pool<M>[];
  #live = new Map<_Handle<M>, _Block<M>>();
  #pendingCount = 0;
  // _Block<unknown>: a callback parameter of M would make M invariant.
  #deferred = new DeferredFrees<_Block<unknown>>((b) => {
    const block = b as _Block<M>;
    // (a callback may have freed it already)
    if (block.heap.pool.pendingFree.delete(block)) {
      this.#pendingCount--;
      this.#released++;
      this.#makeCached(block, true);
    }
  });
  #released = 0;
  #callbacks: BufferCallback[] = [];
  #owner: _Owner<M>;
  // The figures of @allot/core's MemoryStats, per small and large pool
  // (heaps are segments; the scalar pool is small).
  #stats = new PoolStats();
  #numAllocations = 0;
  #numRecycles = 0;
  #numReleases = 0;
  #numGc = 0;
  #numGcReleased = 0;
  #freeDeleter: Deleter<WatermarkBuffer<M>>;
  #history: TraceRecorder | null = null;
  #nextAddress = 0;
  #strict: boolean;

  /**
   * Creates an allocator over a segment source.
   *
   * @param source Where heaps come from.
   * @param options Watermarks, heap sizes, debugging.
   * @throws {InvalidArgumentError} For a ratio out of range, a low ratio
   * above the high one, or a size that is not a positive integer.
   */
  constructor(
    source: SegmentSource<M>,
    options: WatermarkAllocatorOptions<M> = {},
  ) {
    super();
    validateObject(source, "source");
    validateObject(options, "options");
    this.#source = source;
    this.device = source.device;
    this.alignment = source.alignment;
    this.unifiedMemory = options.unifiedMemory ?? true;
    const o = options as Record<string, unknown>;
    const recommended = options.recommendedMaxBytes ?? source.capacityBytes;
    if (
      typeof recommended !== "number" || !(recommended > 0) ||
      (recommended !== Infinity && !Number.isSafeInteger(recommended))
    ) {
      throw new InvalidArgumentError(
        `Invalid recommendedMaxBytes: must be a positive integer or Infinity, received ${
          describeValue(recommended)
        }`,
        { name: "recommendedMaxBytes", value: recommended, limit: 1 },
      );
    }
    this.#recommended = recommended;
    this.#maxSmall = positiveOption(o, "maxSmallByteLength", MiB);
    this.#minLarge = positiveOption(o, "minLargeByteLength", 10 * MiB);
    this.#smallHeap = positiveOption(o, "smallHeapByteLength", 8 * MiB);
    this.#largeHeap = positiveOption(o, "largeHeapByteLength", 32 * MiB);
    this.#xlargeHeap = positiveOption(
      o,
      "xlargeHeapByteLength",
      defaultXlargeHeap(recommended, this.#largeHeap),
    );
    this.#roundLarge = positiveOption(o, "largeRoundByteLength", 2 * MiB);
    this.#maxSlack = positiveOption(o, "maxSlackByteLength", this.#largeHeap);
    this.#maxScalar = positiveOption(o, "maxScalarByteLength", 8);
    if (this.#smallHeap < this.#maxSmall) {
      throw new InvalidArgumentError(
        `Invalid smallHeapByteLength: must be at least maxSmallByteLength (${this.#maxSmall}), received ${this.#smallHeap}`,
        {
          name: "smallHeapByteLength",
          value: this.#smallHeap,
          limit: this.#maxSmall,
        },
      );
    }
    if (this.#largeHeap < this.#minLarge) {
      throw new InvalidArgumentError(
        `Invalid largeHeapByteLength: must be at least minLargeByteLength (${this.#minLarge}), received ${this.#largeHeap}`,
        {
          name: "largeHeapByteLength",
          value: this.#largeHeap,
          limit: this.#minLarge,
        },
      );
    }
    this.#driverFn = options.driverAllocatedBytes;
    this.#verbosity = options.debugVerbosity ?? DebugVerbosity.silent;
    this.#logger = options.logger ?? ((line) => console.error(line));
    this.#hostView = options.hostView ?? defaultHostView;
    this.#strict = options.strict === true;
    const high = options.highWatermarkRatio ?? 1.7;
    this.#checkHigh(high, 0);
    const defaultLow = this.unifiedMemory ? 1.4 : 1.0;
    const low = options.lowWatermarkRatio ??
      (high === 0 ? defaultLow : Math.min(defaultLow, high));
    this.#checkLow(low, high);
    this.#setRatios(high, low);
    this.#pools = {
      privateSmall: new _Pool("private", true),
      privateLarge: new _Pool("private", false),
      sharedSmall: new _Pool("shared", true),
      sharedLarge: new _Pool("shared", false),
      scalar: new _Pool("scalar", true),
    };
    this.#poolList = Object.values(this.#pools);
    this.#owner = {
      free: (handle) => this.free(handle),
      isLive: (handle) => this.#live.has(handle),
      view: (block) => this.#viewOf(block),
    };
    this.#freeDeleter = (buffer) => this.free(buffer);
    const history = options.recordHistory ?? false;
    if (history !== false) this.recordHistory(history === true ? {} : history);
  }

  // ---------------------------------------------------------------- limits

  /** The recommended maximum working-set size in bytes. */
  get recommendedMaxBytes(): number {
    return this.#recommended;
  }

  /** The high watermark ratio (0: no limit). */
  get highWatermarkRatio(): number {
    return this.#highRatio;
  }

  /** The low watermark ratio (0: no garbage collection). */
  get lowWatermarkRatio(): number {
    return this.#lowRatio;
  }

  /** The hard limit on driver bytes; `Infinity` when disabled. */
  get highWatermarkLimit(): number {
    return this.#highLimit;
  }

  /** The soft limit on driver bytes; `Infinity` when disabled. */
  get lowWatermarkLimit(): number {
    return this.#lowLimit;
  }

  /**
   * Bytes left below the low watermark limit: 0 means memory pressure;
   * `Infinity` when the low watermark is disabled. (MPS reports MiB.)
   */
  get lowWatermarkValue(): number {
    if (this.#lowRatio === 0) return Infinity;
    return Math.max(0, this.#lowLimit - this.driverAllocatedBytes);
  }

  /** Bytes of this allocator's heaps (MPS "total allocated memory"). */
  get totalAllocatedBytes(): number {
    return this.#stats.reservedBytes;
  }

  /** Bytes of buffers in use (MPS "current allocated memory"). */
  get currentAllocatedBytes(): number {
    return this.#stats.activeBytes;
  }

  /** Bytes the device reports for this process (see the options). */
  get driverAllocatedBytes(): number {
    return this.#driverFn ? this.#driverFn() : this.#stats.reservedBytes;
  }

  /**
   * Sets the high watermark ratio: the hard limit becomes `ratio` ×
   * `recommendedMaxBytes` (0: no limit).
   *
   * @param ratio In `[0, 2]`, and at least the low ratio unless 0.
   * @throws {InvalidArgumentError} Out of range or below the low ratio;
   * nothing changes.
   */
  setHighWatermarkRatio(ratio: number): void {
    this.#checkHigh(ratio, this.#lowRatio);
    this.#setRatios(ratio, this.#lowRatio);
  }

  /**
   * Sets the low watermark ratio: memory pressure starts at `ratio` ×
   * `recommendedMaxBytes` (0: never).
   *
   * @param ratio In `[0, high]` (or `[0, 2]` when the high limit is off).
   * @throws {InvalidArgumentError} Out of range; nothing changes.
   */
  setLowWatermarkRatio(ratio: number): void {
    this.#checkLow(ratio, this.#highRatio);
    this.#setRatios(this.#highRatio, ratio);
  }

  /**
   * Limits this allocator to `fraction` × `recommendedMaxBytes`, like
   * `torch.mps.set_per_process_memory_fraction`: sets the high watermark
   * ratio, and lowers the low ratio to it when it was higher.
   *
   * @param fraction In `[0, 2]`; 0 removes the limit.
   * @throws {InvalidArgumentError} Out of range; nothing changes.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1000 << 20 }));
   * allocator.setPerProcessMemoryFraction(0.5);
   * assert.equal(allocator.highWatermarkLimit, 500 << 20);
   * assert.equal(allocator.lowWatermarkRatio, 0.5);
   * ```
   */
  setPerProcessMemoryFraction(fraction: number): void {
    this.#checkHigh(fraction, 0);
    const low = fraction !== 0 && this.#lowRatio > fraction
      ? fraction
      : this.#lowRatio;
    this.#setRatios(fraction, low);
  }

  #checkHigh(ratio: number, low: number): void {
    if (
      typeof ratio !== "number" || !(ratio >= 0 && ratio <= MAX_RATIO)
    ) {
      throw new InvalidArgumentError(
        `Invalid high watermark ratio: must be in [0, ${MAX_RATIO}], received ${
          describeValue(ratio)
        }`,
        { name: "highWatermarkRatio", value: ratio, limit: [0, MAX_RATIO] },
      );
    }
    if (ratio !== 0 && low > ratio) {
      throw new InvalidArgumentError(
        `Invalid high watermark ratio: must be at least the low watermark ratio ${low}, received ${ratio}`,
        { name: "highWatermarkRatio", value: ratio, limit: low },
      );
    }
  }

  #checkLow(ratio: number, high: number): void {
    const upper = high === 0 ? MAX_RATIO : high;
    if (typeof ratio !== "number" || !(ratio >= 0 && ratio <= upper)) {
      throw new InvalidArgumentError(
        `Invalid low watermark ratio: must be in [0, ${upper}] (at most the high watermark ratio), received ${
          describeValue(ratio)
        }`,
        { name: "lowWatermarkRatio", value: ratio, limit: [0, upper] },
      );
    }
  }

  #setRatios(high: number, low: number): void {
    this.#highRatio = high;
    this.#lowRatio = low;
    this.#highLimit = high === 0 ? Infinity : Math.floor(
      high * this.#recommended,
    );
    this.#lowLimit = low === 0 ? Infinity : Math.floor(low * this.#recommended);
    if (Number.isNaN(this.#highLimit)) this.#highLimit = Infinity;
    if (this.#verbosity & DebugVerbosity.profiling) {
      this.#logger(
        `High watermark memory allocation limit: ${
          formatBytes(this.#highLimit)
        }, low watermark limit: ${formatBytes(this.#lowLimit)}`,
      );
    }
  }

  // ------------------------------------------------------------- callbacks

  /**
   * Registers a lifecycle callback. Callbacks run in registration order; one
   * that throws is reported to the logger and does not stop the allocator.
   *
   * @param callback Receives every {@linkcode BufferEvent}.
   * @returns A function that removes the callback.
   *
   * @example Free memory when an allocation fails
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 64 << 20 }), {
   *   highWatermarkRatio: 1, lowWatermarkRatio: 1,
   * });
   * const cache = [allocator.allocateBuffer(40 << 20)];
   * const remove = allocator.addCallback((event) => {
   *   if (event.type === "allocation-failed") cache.pop()?.release();
   * });
   * const big = allocator.allocateBuffer(40 << 20); // the callback made room
   * remove();
   * big.release();
   * ```
   */
  addCallback(callback: BufferCallback): () => void {
    if (typeof callback !== "function") {
      throw new InvalidArgumentError(
        `Cannot add callback: must be a function, received ${typeof callback}`,
        { name: "callback", value: callback },
      );
    }
    this.#callbacks = [...this.#callbacks, callback];
    return () => {
      this.removeCallback(callback);
    };
  }

  /**
   * Removes a callback registered with `addCallback`.
   *
   * @param callback The callback.
   * @returns Whether it was registered.
   */
  removeCallback(callback: BufferCallback): boolean {
    const i = this.#callbacks.indexOf(callback);
    if (i < 0) return false;
    this.#callbacks = this.#callbacks.filter((_, j) => j !== i);
    return true;
  }

  #emit(
    type: BufferEventType,
    block: _Block<M> | undefined,
    pool: _Pool<M>,
    byteLength: number,
    reason?: ReleaseReason,
  ): void {
    const callbacks = this.#callbacks;
    if (callbacks.length === 0) return;
    const event: BufferEvent = Object.freeze({
      type,
      bufferId: block ? block.id : 0,
      byteLength: block ? block.byteLength : byteLength,
      requestedByteLength: block ? block.requestedByteLength : byteLength,
      pool: pool.kind,
      heapId: block ? block.heap.id : 0,
      ...(reason ? { reason } : {}),
    });
    for (const callback of callbacks) {
      try {
        callback(event);
      } catch (error) {
        this.#logger(
          `Buffer callback failed on ${type} event: ${
            error instanceof Error ? error.message : String(error)
          }`,
        );
      }
    }
  }

  #log(bit: number, pool: _Pool<M> | undefined, line: () => string): void {
    const v = this.#verbosity;
    if (!(v & bit)) return;
    if ((v & DebugVerbosity.largeOnly) && pool && pool.small) return;
    this.#logger(line());
  }

  // ------------------------------------------------------------ allocation

  /**
   * Allocates a buffer, following the order of attempts in the class doc.
   *
   * @param byteLength Bytes, at least 1 and at most the largest segment.
   * @param options The pool.
   * @returns A live buffer.
   * @throws {InvalidArgumentError} For a bad size or pool; nothing changes.
   * @throws {WatermarkOutOfMemoryError} When every attempt failed.
   * @throws {SegmentSourceError} When the segment source threw.
   */
  allocateBuffer(
    byteLength: number,
    options: AllocateBufferOptions = {},
  ): WatermarkBuffer<M> {
    const buffer = this.tryAllocateBuffer(byteLength, options);
    if (buffer === undefined) this.#throwOom(byteLength, options);
    return buffer;
  }

  /**
   * Like {@linkcode WatermarkAllocator.allocateBuffer}, but returns
   * `undefined` when out of memory.
   *
   * @param byteLength Bytes, at least 1.
   * @param options The pool.
   * @returns A live buffer, or `undefined`.
   * @throws {InvalidArgumentError} For a bad size or pool.
   * @throws {SegmentSourceError} When the segment source threw.
   */
  tryAllocateBuffer(
    byteLength: number,
    options: AllocateBufferOptions = {},
  ): WatermarkBuffer<M> | undefined {
    const kind = this.#validateRequest(byteLength, options);
    const block = this.#tryAllocate(byteLength, kind);
    if (block === undefined) {
      this.#failed(byteLength);
      return undefined;
    }
    return block.handle as _Handle<M>;
  }

  /**
   * Allocates like {@linkcode WatermarkAllocator.allocateBuffer}; when every
   * attempt failed, waits for the work of buffers pending free, releases all
   * cached buffers and tries once more.
   *
   * @param byteLength Bytes, at least 1.
   * @param options The pool.
   * @returns A live buffer.
   * @throws {InvalidArgumentError} For a bad size or pool.
   * @throws {WatermarkOutOfMemoryError} When even that failed.
   *
   * @example Wait for the device to finish with memory
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { ManualStream, MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 64 << 20 }), {
   *   highWatermarkRatio: 1, lowWatermarkRatio: 1,
   * });
   * const stream = new ManualStream();
   * const a = allocator.allocateBuffer(40 << 20);
   * allocator.recordEvents([a], stream);
   * a.release(); // pending: the stream still uses it
   * assert.equal(allocator.tryAllocateBuffer(40 << 20, { pool: "shared" }), undefined);
   * const waiting = allocator.allocateBufferAsync(40 << 20, { pool: "shared" });
   * stream.completeAll();
   * const b = await waiting;
   * assert.equal(b.shared, true);
   * b.release();
   * ```
   */
  async allocateBufferAsync(
    byteLength: number,
    options: AllocateBufferOptions = {},
  ): Promise<WatermarkBuffer<M>> {
    const kind = this.#validateRequest(byteLength, options);
    let block = this.#tryAllocate(byteLength, kind);
    if (block === undefined) {
      const waiting = this.#deferred.count;
      if (waiting > 0) {
        this.#stats.numSyncAllStreams++;
        if (this.#verbosity !== 0) {
          this.#log(
            DebugVerbosity.profiling,
            undefined,
            () =>
              `Waiting for the fences of ${waiting} buffers before releasing every cached buffer`,
          );
        }
        // A rejected or throwing fence also ends: its work will never run.
        await this.#deferred.synchronize();
      }
      this.freeInactiveBuffers();
      this.#releaseCachedBuffers("release-cached");
      block = this.#tryAllocate(byteLength, kind);
    }
    if (block === undefined) {
      this.#failed(byteLength);
      this.#throwOom(byteLength, options);
    }
    return block.handle as _Handle<M>;
  }

  /**
   * Allocates a buffer from the scalar pool and writes `value` into it, like
   * MPS's `allocScalarBufferWithValue`.
   *
   * @param value The bytes of the constant (for example `Float32Array.of(2)`).
   * @returns A live shared buffer holding the value.
   * @throws {InvalidArgumentError} For an empty value or one larger than
   * `maxSmallByteLength`.
   * @throws {UnsupportedOperationError} When the segment memory has no host
   * bytes (the buffer stays cached).
   * @throws {WatermarkOutOfMemoryError} When out of memory.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1 << 30, backed: true }));
   * using scalar = allocator.allocScalarBufferWithValue(Float32Array.of(2.5));
   * assert.equal(scalar.pool, "scalar");
   * assert.equal(new Float32Array(scalar.sharedView()!.slice().buffer)[0], 2.5);
   * ```
   */
  allocScalarBufferWithValue(value: ArrayBufferView): WatermarkBuffer<M> {
    if (!ArrayBuffer.isView(value)) {
      throw new InvalidArgumentError(
        `Cannot allocate a scalar buffer: value must be an ArrayBufferView, received ${typeof value}`,
        { name: "value", value },
      );
    }
    const byteLength = value.byteLength;
    if (byteLength < 1 || byteLength > this.#maxSmall) {
      throw new InvalidArgumentError(
        `Cannot allocate a scalar buffer of ${byteLength} bytes: must be in [1, ${this.#maxSmall}]`,
        { name: "value.byteLength", value: byteLength, limit: this.#maxSmall },
      );
    }
    const block = this.#tryAllocate(byteLength, "scalar");
    if (block === undefined) {
      this.#failed(byteLength);
      this.#throwOom(byteLength, { pool: "shared" });
    }
    const handle = block.handle as _Handle<M>;
    const view = this.#viewOf(block);
    if (view === undefined) {
      this.free(handle);
      throw new UnsupportedOperationError(
        `Cannot write a scalar of ${byteLength} bytes: the segment memory of ${this.device} has no host bytes`,
      );
    }
    view.set(new Uint8Array(value.buffer, value.byteOffset, byteLength));
    return handle;
  }

  /**
   * Allocates `byteLength` bytes from the private pool as an owning
   * {@linkcode DataPtr} whose context is the buffer; releasing the pointer
   * frees the buffer. A zero-byte request gives a pointer that owns nothing.
   *
   * @param byteLength Bytes.
   * @returns An owning pointer.
   * @throws {InvalidArgumentError} For a bad size.
   * @throws {WatermarkOutOfMemoryError} When out of memory.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1 << 30 }));
   * {
   *   using ptr = allocator.allocate(100);
   *   assert.equal(ptr.byteLength, 100);
   *   assert.equal(allocator.currentAllocatedBytes, 256);
   * }
   * assert.equal(allocator.currentAllocatedBytes, 0);
   * ```
   */
  allocate(byteLength: number): DataPtr<M | null, WatermarkBuffer<M>> {
    validateByteLength(byteLength, this.#source.maxSegmentByteLength);
    if (byteLength === 0) return new DataPtr(null, 0, 0, this.device);
    const buffer = this.allocateBuffer(byteLength);
    return new DataPtr(
      buffer.memory,
      buffer.byteOffset,
      byteLength,
      this.device,
      { context: buffer, deleter: this.#freeDeleter },
    );
  }

  /**
   * The deleter of contexts from `rawAllocate`: frees the buffer.
   *
   * @returns The deleter.
   */
  override rawDeleter(): Deleter<WatermarkBuffer<M>> {
    return this.#freeDeleter;
  }

  /**
   * Copies bytes between two pointers whose memories have host bytes.
   *
   * @param dest Destination pointer.
   * @param src Source pointer.
   * @param byteLength Bytes; at most both lengths.
   * @throws {InvalidArgumentError} When `byteLength` exceeds a pointer.
   * @throws {UseAfterFreeError} When a pointer was released.
   * @throws {UnsupportedOperationError} When a memory has no host bytes.
   */
  override copyData(
    dest: DataPtr<M | null, WatermarkBuffer<M>>,
    src: DataPtr<M | null, WatermarkBuffer<M>>,
    byteLength: number,
  ): void {
    const limit = Math.min(dest.byteLength, src.byteLength);
    if (
      !Number.isSafeInteger(byteLength) || byteLength < 0 || byteLength > limit
    ) {
      throw new InvalidArgumentError(
        `Cannot copy ${
          describeValue(byteLength)
        } bytes: must be an integer in [0, ${limit}]`,
        { name: "byteLength", value: byteLength, limit },
      );
    }
    if (dest.released || src.released) {
      throw new UseAfterFreeError(
        `Cannot copy ${byteLength} bytes: a pointer was released`,
      );
    }
    if (byteLength === 0) return;
    const range = { byteLength };
    const d = this.#hostView(dest.memory as M, {
      ...range,
      byteOffset: dest.byteOffset,
    });
    const s = this.#hostView(src.memory as M, {
      ...range,
      byteOffset: src.byteOffset,
    });
    if (d === undefined || s === undefined) {
      throw new UnsupportedOperationError(
        `Cannot copy ${byteLength} bytes: the memory of ${this.device} has no host bytes`,
      );
    }
    d.set(s);
  }

  #validateRequest(
    byteLength: number,
    options: AllocateBufferOptions,
  ): "private" | "shared" {
    validateObject(options, "options");
    const max = this.#source.maxSegmentByteLength;
    validateByteLength(byteLength, max);
    if (byteLength === 0) {
      throw new InvalidArgumentError(
        "Cannot allocate 0 bytes: a buffer must be at least 1 byte, received 0",
        { name: "byteLength", value: 0, limit: 1 },
      );
    }
    if (alignUp(byteLength, this.alignment) > max) {
      throw new InvalidArgumentError(
        `Cannot allocate ${byteLength} bytes: after alignment to ${this.alignment} it exceeds the largest segment of ${max} bytes`,
        { name: "byteLength", value: byteLength, limit: max },
      );
    }
    const kind = options.pool ?? "private";
    if (kind !== "private" && kind !== "shared") {
      throw new InvalidArgumentError(
        `Cannot allocate ${byteLength} bytes: pool must be "private" or "shared", received ${
          describeValue(kind)
        }`,
        { name: "pool", value: kind, limit: ["private", "shared"] },
      );
    }
    return kind;
  }

  #getPool(
    requested: number,
    size: number,
    kind: PoolKind,
  ): _Pool<M> {
    const p = this.#pools;
    if (kind === "scalar") return p.scalar;
    if (requested <= this.#maxScalar && this.unifiedMemory) {
      return p.sharedSmall;
    }
    if (size <= this.#maxSmall) {
      return kind === "shared" ? p.sharedSmall : p.privateSmall;
    }
    return kind === "shared" ? p.sharedLarge : p.privateLarge;
  }

  #tryAllocate(requested: number, kind: PoolKind): _Block<M> | undefined {
    this.#check();
    const block = this.#tryAllocateChecked(requested, kind);
    this.#check();
    return block;
  }

  #tryAllocateChecked(
    requested: number,
    kind: PoolKind,
  ): _Block<M> | undefined {
    this.freeInactiveBuffers();
    const size = alignUp(requested, this.alignment);
    const pool = this.#getPool(requested, size, kind);
    const params: _Params<M> = {
      size,
      requested,
      pool,
      pressure: this.lowWatermarkValue <= 0,
    };
    let block = this.#getFreeBuffer(params);
    let recycled = block !== undefined;
    if (block === undefined) {
      if (params.pressure && size < pool.availableBytes) {
        this.#garbageCollect(params);
      }
      block = this.#allocBuffer(params);
      if (block === undefined) {
        this.#emit("allocation-failed", undefined, pool, requested);
        this.freeInactiveBuffers();
        block = this.#getFreeBuffer(params);
        recycled = block !== undefined;
        block ??= this.#allocBuffer(params);
      }
      if (block === undefined && this.#releaseAvailableCached(params)) {
        block = this.#allocBuffer(params);
      }
      if (block === undefined) {
        this.#releaseCachedBuffers("release-cached");
        this.#stats.numAllocRetries++;
        block = this.#allocBuffer(params);
      }
    }
    if (block === undefined) return undefined;
    block.state = "active";
    block.useCount++;
    block.requestedByteLength = requested;
    this.#stats.allocated(
      pool.small,
      block.byteLength,
      requested,
      this.#pendingCount !== 0,
    );
    if (!block.heap.isSplit) this.#stats.oversizeAllocation(1);
    const handle = new _Handle(block, this.#owner);
    block.handle = handle;
    this.#live.set(handle, block);
    if (this.#history !== null) {
      this.#record(
        "alloc",
        block.heap.address + block.offset,
        block.byteLength,
        requested,
      );
    }
    if (recycled) {
      this.#numRecycles++;
      if (this.#verbosity !== 0) {
        this.#log(
          DebugVerbosity.recycles,
          pool,
          () =>
            `Reusing ${pool.kind} buffer #${block.id} of size ${
              formatBytes(block.byteLength)
            } (requested: ${formatBytes(requested)}, use#: ${block.useCount})`,
        );
      }
      this.#emit("recycled", block, pool, block.byteLength);
    } else {
      this.#numAllocations++;
      if (this.#verbosity !== 0) {
        this.#log(
          DebugVerbosity.allocations,
          pool,
          () =>
            `Allocated ${pool.kind} buffer #${block.id} of size ${
              formatBytes(block.byteLength)
            } from heap #${block.heap.id} (requested: ${
              formatBytes(requested)
            }, total: ${formatBytes(this.#stats.reservedBytes)})`,
        );
      }
      this.#emit("allocated", block, pool, block.byteLength);
    }
    return block;
  }

  #getFreeBuffer(params: _Params<M>): _Block<M> | undefined {
    const pool = params.pool;
    if (this.#lowRatio > 0) {
      pool.epoch++; // ages every cached buffer of the pool by one
    }
    const block = pool.bestFit(params.size);
    if (block === undefined) return undefined;
    // At most the request again (MPS allows a whole large heap), and at most
    // `largeRoundByteLength` under pressure: carving an exact buffer costs nothing.
    const slack = Math.min(
      this.#maxSlack,
      params.size,
      params.pressure ? this.#roundLarge : Infinity,
    );
    if (block.byteLength > params.size + slack) {
      // Keep using heap capacity: a heap with room gets a new buffer;
      // otherwise the idle oversize buffer is released to make room in its
      // heap for the smaller one. A heap of its own is released with it
      // under pressure, or when the request belongs in a shared heap, so
      // that small buffers do not pin a big heap.
      if (pool.findHeap(params.size) === undefined) {
        const own = !block.heap.isSplit;
        this.#releaseBlock(
          block,
          own && (params.pressure || params.size < this.#minLarge),
          "oversize",
        );
        params.pressure = false;
      }
      return undefined;
    }
    pool.removeAvailable(block);
    this.#inactiveSplit(block, -1);
    return block;
  }

  /** A cached buffer of a shared heap: one more (1) or fewer (-1). */
  #inactiveSplit(block: _Block<M>, sign: 1 | -1): void {
    if (!block.heap.isSplit) return;
    const small = block.heap.pool.small;
    if (sign > 0) this.#stats.split(small, 1, block.byteLength);
    else this.#stats.splitTaken(small, block.byteLength, 1);
  }

  #allocBuffer(params: _Params<M>): _Block<M> | undefined {
    const pool = params.pool;
    const heap = pool.findHeap(params.size) ?? this.#createHeap(params);
    if (heap === undefined) return undefined;
    const offset = heap.take(params.size);
    if (offset < 0) throw new Error("internal: heap has no room");
    const block = new _Block(heap, offset, params.size, params.requested);
    heap.blocks.add(block);
    pool.allocatedBytes += params.size;
    return block;
  }

  #createHeap(params: _Params<M>): _Heap<M> | undefined {
    const size = params.size;
    const maxSegment = this.#source.maxSegmentByteLength;
    let heapSize: number;
    let isSplit = true;
    if (size <= this.#maxSmall) heapSize = this.#smallHeap;
    else if (size < this.#minLarge) heapSize = this.#largeHeap;
    else if (
      size < this.#xlargeHeap / 2 && !params.pressure &&
      this.driverAllocatedBytes + this.#xlargeHeap < this.#lowLimit
    ) {
      heapSize = this.#xlargeHeap;
    } else {
      heapSize = alignUp(size, this.#roundLarge);
      isSplit = false;
    }
    heapSize = Math.max(
      size,
      Math.min(alignUp(heapSize, this.alignment), maxSegment),
    );
    const candidates: [number, boolean][] = [[heapSize, isSplit]];
    if (heapSize > size) candidates.push([size, false]);
    const driver = this.driverAllocatedBytes;
    const pool = params.pool;
    for (const [byteLength, split] of candidates) {
      if (driver + byteLength > this.#highLimit) continue;
      const segment = acquireSegment(this.#source, byteLength, size, {
        hostVisible: pool.hostVisible,
        label: `allot watermark ${pool.name} heap`,
      });
      if (segment === undefined) continue;
      const heap = new _Heap(segment, pool, split, this.#nextAddress);
      this.#nextAddress += byteLength;
      if (this.#history !== null) {
        this.#record("segment_alloc", heap.address, byteLength, 0);
      }
      pool.heaps.add(heap);
      this.#stats.reserved(pool.small, 1, byteLength);
      this.#stats.numDeviceAlloc++;
      if (!split) this.#stats.oversizeSegment(1);
      if (this.#verbosity !== 0) {
        this.#log(
          DebugVerbosity.allocations,
          pool,
          () =>
            `Allocated ${pool.name} heap #${heap.id} of size ${
              formatBytes(byteLength)
            } (#heaps: ${pool.heaps.size}, driver allocated: ${
              formatBytes(this.driverAllocatedBytes)
            })`,
        );
      }
      return heap;
    }
    return undefined;
  }

  #failed(byteLength: number): void {
    this.#stats.numOoms++;
    if (this.#history !== null) {
      const free = Math.max(
        0,
        Math.min(this.#highLimit, this.#source.capacityBytes) -
          this.driverAllocatedBytes,
      );
      this.#record(
        "oom",
        Number.isFinite(free) ? free : 0,
        alignUp(byteLength, this.alignment),
        byteLength,
      );
    }
  }

  #throwOom(byteLength: number, options: AllocateBufferOptions): never {
    const size = alignUp(byteLength, this.alignment);
    const allocated = this.#stats.reservedBytes;
    const other = Math.max(0, this.driverAllocatedBytes - allocated);
    const max = this.#highLimit;
    const pool = options.pool ?? "private";
    const limit = max === Infinity ? "" : `, max allowed: ${formatBytes(max)}`;
    throw new WatermarkOutOfMemoryError(
      `Cannot allocate ${
        formatBytes(size)
      } on the ${pool} pool: out of memory (allocated: ${
        formatBytes(allocated)
      }, other allocations: ${formatBytes(other)}${limit}, requested: ${
        formatBytes(byteLength)
      })`,
      {
        requestedBytes: size,
        allocatedBytes: allocated,
        otherBytes: other,
        maxAllowedBytes: max,
      },
    );
  }

  // --------------------------------------------------------- free, release

  /**
   * Frees a buffer. It returns to its pool now, or once the work recorded
   * on it completes (see {@linkcode WatermarkAllocator.recordEvents}).
   *
   * @param buffer A live buffer of this allocator.
   * @throws {DoubleFreeError} When the buffer was already released.
   * @throws {InvalidArgumentError} When the buffer is not from this
   * allocator.
   */
  free(buffer: WatermarkBuffer<M>): void {
    const block = this.#blockOf(buffer, "free");
    this.#check();
    this.#live.delete(buffer as _Handle<M>);
    this.#stats.freed(block.heap.pool.small, block.byteLength);
    if (!block.heap.isSplit) this.#stats.oversizeAllocation(-1);
    if (this.#history !== null) {
      this.#record(
        "free_requested",
        block.heap.address + block.offset,
        block.byteLength,
        block.requestedByteLength,
      );
    }
    block.handle = undefined;
    block.shape = [];
    if (block.idle()) this.#makeCached(block, false);
    else {
      this.#stats.pending(block.heap.pool.small, block.byteLength);
      block.state = "pending-free";
      block.heap.pool.pendingFree.add(block);
      this.#pendingCount++;
      this.#deferred.defer(block, block.fenceKeys, block.fences);
    }
    this.#check();
  }

  #makeCached(block: _Block<M>, wasPending: boolean): void {
    const pool = block.heap.pool;
    if (this.#strict) {
      const segment = block.heap.segment;
      junkFill(
        segment.memory,
        segment.byteOffset + block.offset,
        block.byteLength,
      );
    }
    block.state = "cached";
    block.cachedEpoch = pool.epoch;
    block.fences = [];
    block.fenceKeys = [];
    pool.addAvailable(block);
    this.#stats.inactive(
      pool.small,
      block.byteLength,
      block.requestedByteLength,
      wasPending,
      0,
      0,
    );
    this.#inactiveSplit(block, 1);
    if (this.#history !== null) {
      this.#record(
        "free_completed",
        block.heap.address + block.offset,
        block.byteLength,
        block.requestedByteLength,
      );
    }
    this.#emit("freed", block, pool, block.byteLength);
  }

  /**
   * Waits for the work recorded on every buffer pending free (a rejected or
   * throwing fence also ends: its work will never run), then returns those
   * buffers to their pools.
   *
   * @returns Resolves when the buffers pending at the call are back.
   */
  async synchronize(): Promise<void> {
    this.#stats.numSyncAllStreams++;
    await this.#deferred.synchronize();
    this.#check();
  }

  /**
   * Returns to their pools the freed buffers whose recorded work has
   * completed. Allocation does this by itself first.
   *
   * @returns The number of buffers that returned to their pools.
   */
  freeInactiveBuffers(): number {
    if (this.#pendingCount === 0) return 0;
    const before = this.#released;
    this.#deferred.poll();
    this.#check();
    return this.#released - before;
  }

  /**
   * Releases every cached buffer and every empty heap to the device. Buffers
   * in use or pending free stay.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const device = new MockSegmentSource({ capacityBytes: 1 << 30 });
   * const allocator = new WatermarkAllocator(device);
   * allocator.allocateBuffer(4 << 20).release();
   * assert.equal(device.reservedBytes, 32 << 20);
   * allocator.emptyCache();
   * assert.equal(device.reservedBytes, 0);
   * ```
   */
  emptyCache(): void {
    this.freeInactiveBuffers();
    this.#releaseCachedBuffers("empty-cache");
    this.#check();
  }

  #releaseBlock(
    block: _Block<M>,
    removeEmptyHeap: boolean,
    reason: ReleaseReason,
  ): void {
    const heap = block.heap;
    const pool = heap.pool;
    pool.removeAvailable(block);
    this.#inactiveSplit(block, -1);
    block.state = "released";
    heap.blocks.delete(block);
    heap.give(block.offset, block.byteLength);
    pool.allocatedBytes -= block.byteLength;
    this.#numReleases++;
    if (this.#verbosity !== 0) {
      this.#log(
        DebugVerbosity.releases,
        pool,
        () =>
          `Released buffer #${block.id} of size ${
            formatBytes(block.byteLength)
          } from heap #${heap.id} (${reason}, use#: ${block.useCount}, gc#: ${
            pool.epoch - block.cachedEpoch
          })`,
      );
    }
    try {
      if (removeEmptyHeap && heap.blocks.size === 0) this.#releaseHeap(heap);
    } finally {
      this.#emit("released", block, pool, block.byteLength, reason);
    }
  }

  #releaseHeap(heap: _Heap<M>): void {
    // A callback may have released it already, re-entering the allocator.
    if (!heap.pool.heaps.has(heap)) return;
    releaseSegment(
      this.#source,
      heap.segment,
      `heap #${heap.id} of ${heap.byteLength} bytes`,
    );
    heap.pool.heaps.delete(heap);
    this.#stats.unreserved(heap.pool.small, 1, heap.byteLength);
    this.#stats.numDeviceFree++;
    if (!heap.isSplit) this.#stats.oversizeSegment(-1);
    if (this.#history !== null) {
      this.#record("segment_free", heap.address, heap.byteLength, 0);
    }
    if (this.#verbosity !== 0) {
      this.#log(
        DebugVerbosity.releases,
        heap.pool,
        () =>
          `Released heap #${heap.id} of size ${
            formatBytes(heap.byteLength)
          } (driver allocated: ${formatBytes(this.driverAllocatedBytes)})`,
      );
    }
  }

  #releaseAvailableCached(params: _Params<M>): boolean {
    const pool = params.pool;
    if (pool.availableCount === 0) return false;
    const fit = pool.bestFit(params.size);
    if (fit !== undefined) {
      this.#releaseBlock(fit, true, "release-cached");
      return true;
    }
    let released = 0;
    while (released < params.size && pool.availableCount > 0) {
      const block = pool.largest()!;
      released += block.byteLength;
      this.#releaseBlock(block, true, "release-cached");
    }
    return released >= params.size;
  }

  #releaseCachedBuffers(reason: ReleaseReason): void {
    if (this.#verbosity !== 0) {
      this.#log(
        DebugVerbosity.profiling,
        undefined,
        () =>
          `Releasing cached buffers (allocated: ${
            formatBytes(this.#stats.reservedBytes)
          }, driver allocated: ${formatBytes(this.driverAllocatedBytes)})`,
      );
    }
    for (const pool of this.#poolList) {
      while (pool.availableCount > 0) {
        this.#releaseBlock(
          pool.largest()!,
          true,
          reason,
        );
      }
      for (const heap of [...pool.heaps]) {
        if (heap.blocks.size === 0) this.#releaseHeap(heap);
      }
    }
  }

  #garbageCollect(params: _Params<M>): void {
    const driver = this.driverAllocatedBytes;
    if (driver < this.#lowLimit) return;
    const pool = params.pool;
    if (pool.availableCount === 0) return;
    const epoch = pool.epoch;
    const candidates = pool.availableList();
    this.#numGc++;
    const { releasedBytes: reclaimed, releasedCount: freedCount } =
      collectByAge(
        candidates,
        candidates.map((b) => epoch - b.cachedEpoch),
        candidates.map((b) => b.byteLength),
        driver - this.#lowLimit,
        (block) => {
          if (block.state !== "cached") return false; // taken by a callback
          this.#releaseBlock(block, true, "garbage-collection");
          return true;
        },
        { stopAtTarget: true },
      );
    this.#numGcReleased += freedCount;
    if (this.#verbosity !== 0) {
      this.#log(
        DebugVerbosity.releases,
        pool,
        () =>
          `Garbage collected ${freedCount} buffers from the ${pool.name} pool (reclaimed: ${
            formatBytes(reclaimed)
          }, #cached: ${pool.availableCount})`,
      );
    }
  }

  // ---------------------------------------------------------------- events

  /**
   * Records that `buffers` are used by the work submitted so far: by a fence,
   * or by a stream's next fence. A buffer freed before its work completes
   * returns to its pool only afterwards.
   *
   * @param buffers Live buffers of this allocator.
   * @param work A fence, or a stream whose `fence()` is taken once.
   * @returns Whether any event was recorded (`false` for an empty list).
   * @throws {InvalidArgumentError} For a buffer of another allocator;
   * nothing is recorded.
   * @throws {UseAfterFreeError} For a released buffer; nothing is recorded.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { ManualStream, MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1 << 30 }));
   * const stream = new ManualStream();
   * const a = allocator.allocateBuffer(256);
   * allocator.recordEvents([a], stream);
   * a.release();
   * assert.notEqual(allocator.allocateBuffer(256).id, a.id); // a is still in use
   * stream.completeAll();
   * assert.equal(allocator.allocateBuffer(256).id, a.id);
   * ```
   */
  recordEvents(
    buffers: readonly WatermarkBuffer<M>[],
    work: Fence | Stream,
  ): boolean {
    if (!Array.isArray(buffers)) {
      throw new InvalidArgumentError(
        `Cannot record events: buffers must be an array, received ${
          describeValue(buffers)
        }`,
        { name: "buffers", value: buffers, limit: "array" },
      );
    }
    const blocks = buffers.map((b) => this.#blockOf(b, "record events on"));
    if (
      typeof work !== "object" || work === null ||
      (typeof (work as Stream).fence !== "function" &&
        typeof (work as Fence).wait !== "function")
    ) {
      throw new InvalidArgumentError(
        `Cannot record events: work must be a Fence or a Stream, received ${
          describeValue(work)
        }`,
        { name: "work", value: work },
      );
    }
    if (blocks.length === 0) return false;
    const fence = typeof (work as Stream).fence === "function"
      ? (work as Stream).fence()
      : work as Fence;
    const key = typeof (work as Stream).fence === "function"
      ? (work as Stream).id
      : fenceKey(fence);
    for (const block of blocks) {
      if (!block.fences.includes(fence)) {
        block.fences.push(fence);
        block.fenceKeys.push(key);
      }
    }
    this.#check();
    return true;
  }

  /**
   * Waits until the work recorded on `buffers` has completed, then returns
   * finished buffers pending free to their pools.
   *
   * @param buffers Live buffers of this allocator.
   * @returns Whether it had to wait for anything.
   * @throws {InvalidArgumentError} For a buffer of another allocator.
   * @throws {UseAfterFreeError} For a released buffer.
   */
  async waitForEvents(
    buffers: readonly WatermarkBuffer<M>[],
  ): Promise<boolean> {
    const blocks = buffers.map((b) => this.#blockOf(b, "wait for events on"));
    const fences: Fence[] = [];
    for (const block of blocks) {
      for (const fence of block.fences) {
        if (!fence.completed) fences.push(fence);
      }
    }
    if (fences.length === 0) return false;
    await Promise.all(fences.map((f) => f.wait().catch(() => {})));
    this.freeInactiveBuffers();
    return true;
  }

  #blockOf(buffer: WatermarkBuffer<M>, what: string): _Block<M> {
    const block = this.#live.get(buffer as _Handle<M>);
    if (block !== undefined) return block;
    if (buffer instanceof _Handle && buffer.belongsTo(this.#owner)) {
      if (what === "free") {
        throw new DoubleFreeError(
          `Cannot free buffer #${buffer.id}: it was already released`,
        );
      }
      throw new UseAfterFreeError(
        `Cannot ${what} buffer #${buffer.id}: the buffer was released`,
      );
    }
    throw new InvalidArgumentError(
      `Cannot ${what} buffer ${
        describeValue(buffer)
      }: it is not a buffer of this allocator`,
      { name: "buffer", value: buffer },
    );
  }

  #viewOf(block: _Block<M>): Uint8Array | undefined {
    const segment = block.heap.segment;
    return this.#hostView(segment.memory, {
      byteOffset: segment.byteOffset + block.offset,
      byteLength: block.requestedByteLength,
    });
  }

  // ----------------------------------------------------------------- stats

  /**
   * The allocator's figures in the shared stats vocabulary.
   *
   * @returns A plain object; it does not change afterwards.
   */
  stats(): WatermarkStats {
    let cached = 0, pending = 0;
    for (const pool of this.#poolList) {
      cached += pool.availableBytes;
      for (const b of pool.pendingFree) pending += b.byteLength;
    }
    return {
      allocatedBytes: this.#stats.figure("activeBytes").all,
      requestedBytes: this.#stats.figure("requestedBytes").all,
      reservedBytes: this.#stats.figure("reservedBytes").all,
      heaps: this.#stats.figure("segment").all,
      cachedBytes: cached,
      pendingFreeBytes: pending,
      driverAllocatedBytes: this.driverAllocatedBytes,
      recommendedMaxBytes: this.#recommended,
      highWatermarkRatio: this.#highRatio,
      lowWatermarkRatio: this.#lowRatio,
      highWatermarkLimit: this.#highLimit,
      lowWatermarkLimit: this.#lowLimit,
      lowWatermarkValue: this.lowWatermarkValue,
      numAllocations: this.#numAllocations,
      numRecycles: this.#numRecycles,
      numReleases: this.#numReleases,
      numGarbageCollections: this.#numGc,
      numGarbageCollected: this.#numGcReleased,
      numAllocationFailures: this.#stats.numOoms,
    };
  }

  /** Sets every peak to its current value. */
  resetPeakStats(): void {
    this.#stats.resetPeak();
  }

  /**
   * Sets every allocated and freed total, and the counters of
   * {@linkcode WatermarkAllocator.memoryStats}, to zero.
   */
  resetAccumulatedStats(): void {
    this.#stats.resetAccumulated();
  }

  /**
   * The stats in `@allot/core`'s vocabulary (PyTorch's
   * `memory_stats()`), so one report serves both allocators. Heaps are
   * segments; small and large pools are the pools of small and large
   * heaps (the scalar pool is small); `inactiveSplit` counts cached buffers
   * in shared heaps; `oversize…` count heaps of their own and their buffers;
   * `maxSplitByteLength` is the request size from which buffers get heaps of their
   * own.
   *
   * @returns A plain object.
   *
   * @example A text report like `torch.mps` users know from CUDA
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1 << 30 }));
   * using buffer = allocator.allocateBuffer(1000);
   * const stats = allocator.memoryStats();
   * assert.equal(stats.allocatedBytes.smallPool.current, 1024);
   * assert.equal(stats.reservedBytes.all.current, 8 << 20);
   * assert.match(allocator.memorySummary(), /Allocated memory/);
   * ```
   */
  memoryStats(): MemoryStats {
    return this.#stats.memoryStats(this.#xlargeHeap / 2);
  }

  /**
   * {@linkcode WatermarkAllocator.memoryStats} as `@allot/core`'s text
   * table (PyTorch's `memory_summary()` layout).
   *
   * @param options Title and abbreviation.
   * @returns The table.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    validateObject(options, "options");
    return formatMemorySummary(this.memoryStats(), {
      title: `WatermarkAllocator on ${this.device}`,
      ...options,
    });
  }

  /**
   * Starts (or restarts, emptied) or stops recording allocator events in a
   * ring buffer, in `@allot/core`'s `TraceEntry` format; `snapshot()`
   * returns them as `history`.
   *
   * @param options Ring size and stack capture, or `false` to stop.
   */
  recordHistory(options: TraceRecorderOptions | false = {}): void {
    if (options !== false) validateObject(options, "options");
    this.#history = options === false ? null : new TraceRecorder(options);
  }

  #record(
    action: TraceAction,
    address: number,
    byteLength: number,
    requested: number,
  ): void {
    this.#history!.record(action, address, byteLength, requested, 0);
  }

  /**
   * Every heap with its buffers and free ranges, in `@allot/core`'s
   * snapshot format (heaps are segments, every stream id is 0), plus pool
   * kinds, buffer ids, shapes and the stats.
   *
   * @returns A plain, JSON-ready object.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1 << 30 }), { recordHistory: true });
   * const a = allocator.allocateBuffer(1000);
   * const [heap] = allocator.snapshot().segments;
   * assert.equal(heap.byteLength, 8 << 20);
   * assert.deepEqual(heap.blocks.map((b) => b.state), ["active_allocated", "inactive"]);
   * a.release();
   * assert.deepEqual(
   *   allocator.snapshot().history.map((e) => e.action),
   *   ["segment_alloc", "alloc", "snapshot", "free_requested", "free_completed", "snapshot"],
   * );
   * ```
   */
  snapshot(): WatermarkSnapshot {
    const segments: WatermarkSegmentSnapshot[] = [];
    for (const pool of this.#poolList) {
      for (const heap of pool.heaps) {
        const blocks: WatermarkBlockSnapshot[] = [];
        for (const b of heap.blocks) {
          const state = b.state === "active"
            ? "active_allocated"
            : b.state === "pending-free"
            ? "active_pending_free"
            : "inactive";
          blocks.push({
            address: heap.address + b.offset,
            offset: b.offset,
            byteLength: b.byteLength,
            requestedByteLength: b.state === "cached"
              ? 0
              : b.requestedByteLength,
            state,
            bufferId: b.id,
            cached: b.state === "cached",
            shape: [...b.shape],
          });
        }
        for (const r of heap.freeRanges()) {
          blocks.push({
            address: heap.address + r.offset,
            offset: r.offset,
            byteLength: r.byteLength,
            requestedByteLength: 0,
            state: "inactive",
            bufferId: 0,
            cached: false,
            shape: [],
          });
        }
        blocks.sort((a, b) => a.offset - b.offset);
        segments.push({
          id: heap.id,
          address: heap.address,
          byteLength: heap.byteLength,
          stream: 0,
          pool: pool.small ? "small" : "large",
          ...segmentTotals(blocks),
          memoryByteOffset: heap.segment.byteOffset,
          blocks,
          kind: pool.kind,
          split: heap.isSplit,
        });
      }
    }
    segments.sort((a, b) => a.address - b.address);
    return {
      ...finishSnapshot(
        String(this.device),
        "WatermarkAllocator",
        segments,
        this.#history,
      ),
      stats: this.stats(),
    };
  }

  // ------------------------------------------------------------- integrity

  /**
   * Checks every internal invariant: each heap belongs to its pool and is
   * tiled exactly by its buffers and its free ranges (sorted, merged, no
   * overlap), each buffer's state matches where it is listed (live handles,
   * pending frees, cached buckets), and every stat equals a recount. Strict
   * mode runs it on every call; tests call it after each step.
   *
   * @throws {AllotError} Naming the first broken invariant.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource());
   * const buffer = allocator.allocateBuffer(100);
   * allocator.validate();
   * buffer.release();
   * allocator.validate();
   * ```
   */
  validate(): void {
    const fail = (what: string): never => {
      throw new AllotError(`WatermarkAllocator is inconsistent: ${what}`);
    };
    const deferred = new Set<_Block<unknown>>();
    this.#deferred.forEach((b) => deferred.add(b));
    const c = new StatRecount();
    let pending = 0, live = 0;
    for (const pool of this.#poolList) {
      let poolBytes = 0, cachedBytes = 0, cachedCount = 0;
      for (const heap of pool.heaps) {
        const h = `heap #${heap.id} (${pool.name})`;
        if (heap.pool !== pool) fail(`${h} is listed in another pool`);
        const n = heap.byteLength;
        if (!Number.isSafeInteger(n) || n <= 0) {
          fail(`${h} has byteLength ${describeValue(n)}`);
        }
        c.segment(pool.small, n);
        if (!heap.isSplit) c.oversizeSegments++;
        const ranges: [number, number, string][] = [];
        let largest = 0, prevEnd = -1;
        for (const r of heap.freeRanges()) {
          if (!(r.byteLength > 0)) fail(`${h} has an empty free range`);
          if (r.offset <= prevEnd) {
            fail(
              `${h} has free ranges out of order or unmerged at ${r.offset}`,
            );
          }
          prevEnd = r.offset + r.byteLength;
          largest = Math.max(largest, r.byteLength);
          ranges.push([r.offset, r.byteLength, "free range"]);
        }
        if (largest !== heap.largestFree) {
          fail(
            `${h} says its largest free range is ${heap.largestFree}, counted ${largest}`,
          );
        }
        for (const b of heap.blocks) {
          const what = `buffer #${b.id} in ${h}`;
          if (b.heap !== heap) fail(`${what} names another heap`);
          ranges.push([b.offset, b.byteLength, `buffer #${b.id}`]);
          poolBytes += b.byteLength;
          if (b.offset % this.alignment !== 0) {
            fail(`${what} is at unaligned offset ${b.offset}`);
          }
          const small = pool.small;
          if (b.state === "active") {
            const handle = b.handle as _Handle<M> | undefined;
            if (handle === undefined || this.#live.get(handle) !== b) {
              fail(`${what} is active but has no live handle`);
            }
            live++;
            c.allocatedBlock(small, b.byteLength, b.requestedByteLength);
            if (!heap.isSplit) c.oversizeAllocations++;
          } else if (b.state === "pending-free") {
            if (!pool.pendingFree.has(b) || !deferred.has(b)) {
              fail(`${what} is pending free but not waiting`);
            }
            pending++;
            c.activeBlock(small, b.byteLength, b.requestedByteLength);
          } else if (b.state === "cached") {
            if (b.availableIndex < 0) fail(`${what} is cached but not listed`);
            cachedBytes += b.byteLength;
            cachedCount++;
            if (heap.isSplit) c.inactiveSplitBlock(small, b.byteLength);
          } else fail(`${what} is ${b.state} but still in its heap`);
          if (b.state !== "cached" && b.availableIndex !== -1) {
            fail(`${what} is listed as cached`);
          }
        }
        ranges.sort((a, b) => a[0] - b[0]);
        let end = 0;
        for (const [offset, byteLength, what] of ranges) {
          if (offset !== end) {
            fail(
              `${h}: ${what} at ${offset} ${
                offset < end ? "overlaps" : "leaves a gap after"
              } byte ${end}`,
            );
          }
          end = offset + byteLength;
        }
        if (end !== n) fail(`${h} of ${n} bytes is tiled up to byte ${end}`);
      }
      for (const b of pool.pendingFree) {
        if (
          b.state !== "pending-free" || !b.heap.blocks.has(b) ||
          b.heap.pool !== pool
        ) {
          fail(`buffer #${b.id} waits in ${pool.name} but is ${b.state}`);
        }
      }
      for (const b of pool.availableList()) {
        if (
          b.state !== "cached" || b.heap.pool !== pool ||
          !pool.heaps.has(b.heap)
        ) {
          fail(
            `buffer #${b.id} is listed as cached in ${pool.name} but is ${b.state}`,
          );
        }
      }
      if (poolBytes !== pool.allocatedBytes) {
        fail(
          `${pool.name} pool says ${pool.allocatedBytes} bytes in buffers, counted ${poolBytes}`,
        );
      }
      if (
        cachedBytes !== pool.availableBytes ||
        cachedCount !== pool.availableCount
      ) {
        fail(
          `${pool.name} pool says ${pool.availableCount} cached buffers of ${pool.availableBytes} bytes, counted ${cachedCount} of ${cachedBytes}`,
        );
      }
    }
    if (live !== this.#live.size) {
      fail(`${this.#live.size} live handles for ${live} active buffers`);
    }
    if (pending !== this.#pendingCount) {
      fail(`pending count ${this.#pendingCount}, counted ${pending}`);
    }
    this.#stats.verify(c, "WatermarkAllocator");
  }

  /** Strict mode: validates (before and after each call that changes state). */
  #check(): void {
    if (this.#strict) this.validate();
  }
}

// Fences of one stream complete in order, so DeferredFrees reads only the
// oldest per stream. A bare fence has no stream: it gets a queue of its own
// (a key below every stream id).
const fenceKeys = new WeakMap<Fence, number>();
let nextFenceKey = -1;
function fenceKey(fence: Fence): number {
  let key = fenceKeys.get(fence);
  if (key === undefined) fenceKeys.set(fence, key = nextFenceKey--);
  return key;
}
