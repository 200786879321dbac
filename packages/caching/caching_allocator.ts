/**
 * {@linkcode CachingAllocator}: PyTorch's CUDA caching allocator, made
 * device-agnostic over a {@linkcode SegmentSource}, and
 * {@linkcode CachedBlock}, the owning handle it hands out.
 *
 * @module
 */

import {
  acquireSegment,
  AllotError,
  collectByAge,
  COMPLETED_FENCE,
  DeferredFrees,
  describeValue,
  type Device,
  DoubleFreeError,
  type Fence,
  finishSnapshot,
  InvalidArgumentError,
  junkFill,
  type LeakDetector,
  PoolStats,
  releaseSegment,
  resizeSegment,
  segmentTotals,
  StatRecount,
  type Stream,
  UseAfterFreeError,
  validateAlignment,
  validateByteLength,
} from "@allot/core";
import type { Segment, SegmentSource } from "@allot/core";
import {
  _Block,
  _BlockPool,
  _Segment,
  ALLOCATED,
  FREE,
  PENDING,
} from "./_block_pool.ts";
import { checkStream } from "./_check.ts";
import { validateObject } from "@allot/core";
import { _anchorShapes } from "./_shape_anchors.ts";
import { CachingOutOfMemoryError } from "./errors.ts";
import {
  expandRoundupPower2Divisions,
  MIN_BLOCK_BYTE_LENGTH,
  roundSize,
  type RoundupPower2Divisions,
} from "./round_size.ts";
import {
  type BlockSnapshot,
  captureStack,
  type MemorySnapshot,
  type SegmentSnapshot,
  type TraceAction,
  TraceRecorder,
  type TraceRecorderOptions,
} from "./snapshot.ts";
import {
  formatMemorySummary,
  formatSize,
  type MemoryStats,
  type MemorySummaryOptions,
} from "./stats.ts";

const MiB = 1048576;

/**
 * The default stream (id 0): work on it is ordered with the allocator's own
 * calls, so its fences are always complete.
 */
export const DEFAULT_STREAM: Stream = Object.freeze({
  id: 0,
  fence: (): Fence => COMPLETED_FENCE,
});

/** Options of {@linkcode CachingAllocator}. Sizes are bytes. */
export interface CachingAllocatorOptions {
  /**
   * Block granule: every block size is a multiple of it (PyTorch's
   * `kMinBlockSize`). Raised to the source's alignment when that is larger.
   *
   * @default {512}
   */
  minBlockByteLength?: number;
  /**
   * Requests of at most this many bytes use the small pool (`kSmallSize`).
   *
   * @default {1048576}
   */
  smallRequestMaxByteLength?: number;
  /**
   * Segment size of the small pool (`kSmallBuffer`).
   *
   * @default {2097152}
   */
  smallSegmentByteLength?: number;
  /**
   * Segment size of the large pool for requests below
   * `ownSegmentMinByteLength` (`kLargeBuffer`).
   *
   * @default {20971520}
   */
  largeSegmentByteLength?: number;
  /**
   * Requests of at least this size get a segment of their own, rounded up to
   * `largeRoundByteLength` (`kMinLargeAlloc`).
   *
   * @default {10485760}
   */
  ownSegmentMinByteLength?: number;
  /**
   * Rounding of own segments (`kRoundLarge`).
   *
   * @default {2097152}
   */
  largeRoundByteLength?: number;
  /**
   * Power-of-two divisions for size rounding (see
   * {@linkcode RoundupPower2Divisions}); `0` rounds to the block granule only.
   *
   * @default {0}
   */
  roundupPower2Divisions?: RoundupPower2Divisions;
  /**
   * Blocks at least this large are never split, and serve only requests
   * within `maxNonSplitRoundingByteLength` of their size (`max_split_size`). At
   * least `largeSegmentByteLength`.
   *
   * @default {Infinity}
   */
  maxSplitByteLength?: number;
  /**
   * How much larger than a request an unsplittable block may be and still
   * serve it (`max_non_split_rounding_size`).
   *
   * @default {20971520}
   */
  maxNonSplitRoundingByteLength?: number;
  /**
   * Same as `maxSplitByteLength`.
   *
   * @deprecated Use `maxSplitByteLength`; removed in the next minor version.
   */
  maxSplitSize?: number;
  /**
   * Same as `maxNonSplitRoundingByteLength`.
   *
   * @deprecated Use `maxNonSplitRoundingByteLength`; removed in the next
   * minor version.
   */
  maxNonSplitRoundingSize?: number;
  /**
   * Share of the device's capacity this allocator may reserve, in (0, 1].
   *
   * @default {1}
   */
  memoryFraction?: number;
  /**
   * When reserved bytes pass this share of the allowed bytes (fraction times
   * capacity), a device allocation first frees the oldest unused cached
   * segments; 0 turns it off. In [0, 1).
   *
   * @default {0}
   */
  garbageCollectionThreshold?: number;
  /**
   * Record history from the start (`true` or recorder options).
   *
   * @default {false}
   */
  recordHistory?: boolean | TraceRecorderOptions;
  /**
   * Label for segments and reports.
   *
   * @default {"CachingAllocator"}
   */
  label?: string;
  /**
   * Reports blocks whose handle was garbage-collected without `release()`
   * (the block stays allocated: the detector only reports).
   *
   * @default {undefined}
   */
  leakDetector?: LeakDetector;
  /**
   * Expandable segments (PyTorch's `expandable_segments`, in spirit): where
   * the source can resize segments in place
   * ({@linkcode SegmentSource.tryResizeSegment}: resizable `ArrayBuffer`s,
   * the mock device), each pool keeps one segment per stream that grows at
   * its end instead of taking new segments, so a request that fits nowhere
   * extends the segment's free tail; `emptyCache()` and a full device shrink
   * free tails back. Requests of at least `ownSegmentMinByteLength` still get
   * segments of their own, never split, which a full device gets back whole;
   * once the device has been full (until `emptyCache()`), so do large
   * requests that no hole of the expandable segment holds. Ignored for a
   * source without `tryResizeSegment` (GPU buffers).
   *
   * @default {false}
   */
  expandableSegments?: boolean;
  /**
   * Debug mode for hunting a bug: freed blocks are filled with `JUNK_BYTE`
   * where the host can write the memory, and the allocator validates its
   * invariants after every allocation, free and cache operation (slow).
   *
   * @default {false}
   */
  strict?: boolean;
}

/** Options of one allocation. */
export interface AllocateOptions {
  /**
   * The stream that will use the block first; the block is reused only by
   * allocations on the same stream.
   *
   * @default {DEFAULT_STREAM}
   */
  stream?: Stream;
  /**
   * A tag for the block (a layer or kernel name): kept in its snapshot and
   * history entries. Without one, the tag of the enclosing
   * {@linkcode CachingAllocator.withTag} scope applies.
   *
   * @default {undefined}
   */
  tag?: string;
}

/** The block of a handle (`null` once released), or `undefined` for a non-handle. */
let blockOf: <M>(handle: CachedBlock<M>) => _Block<M> | null | undefined;
let detach: <M>(handle: CachedBlock<M>) => void;
/** Frees the live block `b` of `handle` (checked by the caller). */
let releaseHandle: <M>(handle: CachedBlock<M>, b: _Block<M>) => void;

/**
 * An owning handle to a block of a {@linkcode CachingAllocator}: a place in a
 * segment's memory. `release()` (or `using`) gives it back; reading `memory`
 * or `byteOffset` afterwards throws {@linkcode UseAfterFreeError}, and
 * releasing twice throws {@linkcode DoubleFreeError}.
 *
 * @typeParam M Type of the segment memory.
 *
 * @example
 * ```ts
 * import { CachingAllocator } from "@allot/caching";
 * import { MockSegmentSource, UseAfterFreeError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const allocator = new CachingAllocator(new MockSegmentSource());
 * const block = allocator.allocate(1000);
 * assert.equal(block.byteLength, 1000);
 * assert.equal(block.blockByteLength, 1024);
 * block.release();
 * assert.throws(() => block.memory, UseAfterFreeError);
 * ```
 */
export class CachedBlock<M = unknown> {
  /** The allocator that owns the block. */
  readonly allocator: CachingAllocator<M>;
  /** Bytes asked for. */
  readonly byteLength: number;
  #block: _Block<M> | null;
  // (No memory field: it is read through the live block. Every field
  // costs 8 bytes of garbage per allocation.)
  #byteOffset: number;
  #stream: Stream;

  static {
    blockOf = <M>(h: CachedBlock<M>): _Block<M> | null | undefined =>
      typeof h === "object" && h !== null && #block in h ? h.#block : undefined;
    detach = <M>(h: CachedBlock<M>): void => {
      h.#block = null;
    };
  }

  /**
   * Made by {@linkcode CachingAllocator.allocate}; not for direct use.
   *
   * @param allocator The owner.
   * @param block The internal block (its segment holds the memory).
   * @param byteOffset Byte offset in the memory.
   * @param byteLength Bytes asked for.
   * @param stream The allocation stream.
   */
  constructor(
    allocator: CachingAllocator<M>,
    block: _Block<M>,
    byteOffset: number,
    byteLength: number,
    stream: Stream,
  ) {
    this.allocator = allocator;
    this.#block = block;
    this.#byteOffset = byteOffset;
    this.byteLength = byteLength;
    this.#stream = stream;
  }

  /**
   * The segment's memory (a `GPUBuffer`, an `ArrayBuffer`, ...).
   *
   * @throws {UseAfterFreeError} After release.
   */
  get memory(): M {
    const block = this.#block;
    if (block === null) this.#throwReleased("memory");
    return block.segment.raw.memory;
  }

  /**
   * Byte offset of the block in `memory`: the segment's offset plus the
   * block's offset in the segment.
   *
   * @throws {UseAfterFreeError} After release.
   */
  get byteOffset(): number {
    if (this.#block === null) this.#throwReleased("byteOffset");
    return this.#byteOffset;
  }

  /**
   * Bytes the block holds (the rounded size, at least `byteLength`).
   *
   * @throws {UseAfterFreeError} After release.
   */
  get blockByteLength(): number {
    const block = this.#block;
    if (block === null) this.#throwReleased("blockByteLength");
    return block.size;
  }

  /**
   * Virtual address of the block, as in snapshots.
   *
   * @throws {UseAfterFreeError} After release.
   */
  get address(): number {
    const block = this.#block;
    if (block === null) this.#throwReleased("address");
    return block.address;
  }

  /** The stream the block was allocated on. */
  get stream(): Stream {
    return this.#stream;
  }

  /** Whether the block was released. */
  get released(): boolean {
    return this.#block === null;
  }

  /**
   * Records that `stream` uses the block: once released, the block returns to
   * the pool only after the work submitted to `stream` so far is done.
   *
   * @param stream The other stream.
   * @throws {UseAfterFreeError} After release.
   */
  recordStream(stream: Stream): void {
    this.allocator.recordStream(this, stream);
  }

  /**
   * Gives the block back to its allocator.
   *
   * @throws {DoubleFreeError} When already released.
   */
  release(): void {
    const b = this.#block;
    if (b === null) this.allocator.free(this); // throws DoubleFreeError
    else {
      releaseHandle(this, b); // may throw (a stream's fence()): still live
      this.#block = null;
    }
  }

  /** Releases the block unless it was released already. */
  [Symbol.dispose](): void {
    const b = this.#block;
    if (b !== null) {
      releaseHandle(this, b);
      this.#block = null;
    }
  }

  /**
   * Short description.
   *
   * @returns Text such as `CachedBlock(mock:0, byteOffset=512, byteLength=1000)`.
   */
  toString(): string {
    return `CachedBlock(${this.allocator.device}, byteOffset=${this.#byteOffset}, byteLength=${this.byteLength}${
      this.#block === null ? ", released" : ""
    })`;
  }

  #throwReleased(what: string): never {
    throw new UseAfterFreeError(
      `Cannot read ${what} of ${this}: the block was released`,
    );
  }
}

function positive(
  value: number | undefined,
  fallback: number,
  name: string,
): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a positive integer, received ${
        describeValue(value)
      }`,
      { name, value, limit: Number.MAX_SAFE_INTEGER },
    );
  }
  return value;
}

function checkMultiple(value: number, granule: number, name: string): void {
  if (value % granule !== 0) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a multiple of the block granule ${granule}, received ${
        describeValue(value)
      }`,
      { name, value, limit: granule },
    );
  }
}

function checkFraction(value: number, name: string, max: number): number {
  const ok = typeof value === "number" && value >= 0 &&
    (max === 1 ? value <= 1 : value < 1) &&
    (name !== "memoryFraction" || value > 0);
  if (!ok) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a number in ${
        name === "memoryFraction" ? "(0, 1]" : "[0, 1)"
      }, received ${describeValue(value)}`,
      { name, value, limit: 1 },
    );
  }
  return value;
}

/**
 * A device-agnostic caching allocator with PyTorch's CUDA caching allocator
 * rules. It takes whole segments from a {@linkcode SegmentSource} and carves
 * blocks out of them:
 *
 * - sizes round up to 512 bytes (optionally to power-of-two divisions);
 * - requests up to 1 MiB come from 2 MiB segments (small pool), requests
 *   below 10 MiB from 20 MiB segments, larger ones from own segments rounded
 *   to 2 MiB (large pool);
 * - best fit among free blocks of the same stream; a block is split when the
 *   rest is worth keeping, and merged with free neighbours when freed; only
 *   whole free segments go back to the device;
 * - a block used on other streams ({@linkcode CachedBlock.recordStream})
 *   returns to the pool only when those streams' fences, taken when it was
 *   freed, are complete;
 * - when the device is full: free cached unsplit blocks and retry, then free
 *   the whole cache and retry ({@linkcode CachingAllocator.allocateAsync}
 *   first waits for pending fences), then throw
 *   {@linkcode CachingOutOfMemoryError}.
 *
 * @typeParam M Type of the segment memory.
 *
 * @example Reuse without device allocations
 * ```ts
 * import { CachingAllocator } from "@allot/caching";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource();
 * const allocator = new CachingAllocator(device);
 * for (let i = 0; i < 100; i++) {
 *   using block = allocator.allocate(64 * 1024);
 * }
 * assert.equal(device.allocationCount, 1); // one 2 MiB segment, reused
 * allocator.emptyCache();
 * assert.equal(device.reservedBytes, 0);
 * ```
 */
export class CachingAllocator<M = unknown> {
  /** The segment source. */
  readonly source: SegmentSource<M>;
  /** Label for segments and reports. */
  readonly label: string;
  /** Block granule in bytes. */
  readonly minBlockByteLength: number;
  /** Requests up to this size use the small pool. */
  readonly smallRequestMaxByteLength: number;
  /** Segment size of the small pool. */
  readonly smallSegmentByteLength: number;
  /** Segment size of the large pool. */
  readonly largeSegmentByteLength: number;
  /** Requests at least this large get their own segment. */
  readonly ownSegmentMinByteLength: number;
  /** Rounding of own segments. */
  readonly largeRoundByteLength: number;
  /** Blocks at least this large are never split. */
  readonly maxSplitByteLength: number;
  /** Slack an unsplittable block may have over a request. */
  readonly maxNonSplitRoundingByteLength: number;
  /** Largest block or segment: the source's limit, in whole granules. */
  readonly maxBlockByteLength: number;
  #source: SegmentSource<M>;
  #divisions: number[] | undefined;
  #fraction: number;
  #gcThreshold: number;
  #small = new _BlockPool<M>(true);
  #large = new _BlockPool<M>(false);
  // Expandable segments: the own segments' blocks, kept apart from the
  // large pool's expandable segment (same stats pool: large).
  #own = new _BlockPool<M>(false);
  #segments = new Set<_Segment<M>>();
  // _Block<unknown>: a callback parameter of M would make M invariant.
  #deferred = new DeferredFrees<_Block<unknown>>((b) =>
    this.#freeBlock(b as _Block<M>)
  );
  // Recycled block records, a stack that never shrinks: pop() to empty and
  // push() again would reallocate the array's store on every hit.
  #spare: _Block<M>[] = [];
  #spareCount = 0;
  #nextSegmentId = 1;
  #nextAddress = 0;
  #clock = 0;
  #history: TraceRecorder | null = null;
  // The id API: a block's id is its slot plus its slot's generation times
  // ID_SLOTS; a free bumps the generation, so a stale id never matches.
  #byId: (_Block<M> | undefined)[] = [];
  #slotGeneration: number[] = [];
  // Free slots, a FIFO ring (an array that shrinks and grows would
  // reallocate its store: garbage on every hit).
  #freeSlots = new Int32Array(1024);
  #freeHead = 0;
  #freeCount = 0;
  #tag: string | undefined = undefined;
  #strict = false;
  // Sizes in (0, #intRoundMax] round up with integer operations (0 when
  // power-of-two divisions are set: those round otherwise).
  #intRoundMax = 0;
  #granuleMask = 0;
  // Whether history or strict mode watch the hot path (one test there).
  #watched = false;
  #leaks: LeakDetector | undefined;
  #segmentOptions: { label: string; resizable?: boolean };
  #expandable = false;
  // Whether the device refused a segment (expandable segments only).
  #pressured = false;
  // The expandable segment of each stream, per pool (small, large).
  #growing: [Map<number, _Segment<M>>, Map<number, _Segment<M>>] = [
    new Map(),
    new Map(),
  ];

  #stats = new PoolStats();

  /**
   * Creates an allocator over a segment source.
   *
   * @param source Where segments come from.
   * @param options Pool sizes, rounding, split limits, memory fraction, GC.
   * @throws {InvalidArgumentError} For an option out of range.
   */
  constructor(source: SegmentSource<M>, options: CachingAllocatorOptions = {}) {
    _anchorShapes("caching");
    validateObject(source, "source");
    validateObject(options, "options");
    this.source = this.#source = source;
    this.label = options.label ?? "CachingAllocator";
    const requested = validateAlignment(
      options.minBlockByteLength ?? MIN_BLOCK_BYTE_LENGTH,
      2 ** 30,
      "minBlockByteLength",
    );
    const granule = Math.max(
      requested,
      validateAlignment(source.alignment, 2 ** 30, "source.alignment"),
    );
    this.minBlockByteLength = granule;
    const smallMax = positive(
      options.smallRequestMaxByteLength,
      MiB,
      "smallRequestMaxByteLength",
    );
    const smallSegment = positive(
      options.smallSegmentByteLength,
      2 * MiB,
      "smallSegmentByteLength",
    );
    const largeSegment = positive(
      options.largeSegmentByteLength,
      20 * MiB,
      "largeSegmentByteLength",
    );
    const ownMin = positive(
      options.ownSegmentMinByteLength,
      10 * MiB,
      "ownSegmentMinByteLength",
    );
    const largeRound = positive(
      options.largeRoundByteLength,
      2 * MiB,
      "largeRoundByteLength",
    );
    checkMultiple(smallSegment, granule, "smallSegmentByteLength");
    checkMultiple(largeSegment, granule, "largeSegmentByteLength");
    checkMultiple(largeRound, granule, "largeRoundByteLength");
    if (smallSegment < smallMax) {
      throw new InvalidArgumentError(
        `Invalid smallSegmentByteLength: must be at least smallRequestMaxByteLength ${smallMax}, received ${smallSegment}`,
        {
          name: "smallSegmentByteLength",
          value: smallSegment,
          limit: smallMax,
        },
      );
    }
    if (ownMin > largeSegment || ownMin <= smallMax) {
      throw new InvalidArgumentError(
        `Invalid ownSegmentMinByteLength: must be in (${smallMax}, ${largeSegment}], received ${
          describeValue(ownMin)
        }`,
        {
          name: "ownSegmentMinByteLength",
          value: ownMin,
          limit: [smallMax, largeSegment],
        },
      );
    }
    const maxSplit = options.maxSplitByteLength ?? options.maxSplitSize ??
      Infinity;
    if (
      !(maxSplit === Infinity || Number.isSafeInteger(maxSplit)) ||
      maxSplit < largeSegment
    ) {
      throw new InvalidArgumentError(
        `Invalid maxSplitByteLength: must be an integer of at least largeSegmentByteLength ${largeSegment}, or Infinity, received ${
          describeValue(maxSplit)
        }`,
        { name: "maxSplitByteLength", value: maxSplit, limit: largeSegment },
      );
    }
    const nonSplit = options.maxNonSplitRoundingByteLength ??
      options.maxNonSplitRoundingSize ?? 20 * MiB;
    validateByteLength(
      nonSplit,
      Number.MAX_SAFE_INTEGER,
      "maxNonSplitRoundingByteLength",
    );
    this.smallRequestMaxByteLength = smallMax;
    this.smallSegmentByteLength = smallSegment;
    this.largeSegmentByteLength = largeSegment;
    this.ownSegmentMinByteLength = ownMin;
    this.largeRoundByteLength = largeRound;
    this.maxSplitByteLength = maxSplit;
    this.maxNonSplitRoundingByteLength = nonSplit;
    const divisions = options.roundupPower2Divisions ?? 0;
    const expanded = expandRoundupPower2Divisions(divisions);
    this.#divisions = expanded.some((d) => d > 1) ? expanded : undefined;
    this.#fraction = checkFraction(
      options.memoryFraction ?? 1,
      "memoryFraction",
      1,
    );
    this.#gcThreshold = checkFraction(
      options.garbageCollectionThreshold ?? 0,
      "garbageCollectionThreshold",
      0,
    );
    this.maxBlockByteLength =
      Math.floor(source.maxSegmentByteLength / granule) *
      granule;
    this.#granuleMask = granule - 1;
    this.#intRoundMax = this.#divisions !== undefined
      ? 0
      : Math.min(this.maxBlockByteLength, 2 ** 30);
    this.#segmentOptions = { label: this.label };
    this.#leaks = options.leakDetector;
    this.#strict = options.strict === true;
    this.#watched = this.#strict;
    this.#expandable = options.expandableSegments === true &&
      typeof source.tryResizeSegment === "function";
    const history = options.recordHistory ?? false;
    if (history !== false) {
      this.recordHistory(history === true ? {} : history);
    }
  }

  /** The device the segments live on. */
  get device(): Device {
    return this.#source.device;
  }

  /**
   * Whether segments grow in place (the `expandableSegments` option, and a
   * source that can resize segments).
   */
  get expandableSegments(): boolean {
    return this.#expandable;
  }

  /**
   * Same as `maxSplitByteLength`.
   *
   * @deprecated Use `maxSplitByteLength`; removed in the next minor version.
   */
  get maxSplitSize(): number {
    return this.maxSplitByteLength;
  }

  /**
   * Same as `maxNonSplitRoundingByteLength`.
   *
   * @deprecated Use `maxNonSplitRoundingByteLength`; removed in the next
   * minor version.
   */
  get maxNonSplitRoundingSize(): number {
    return this.maxNonSplitRoundingByteLength;
  }

  /** Share of the device capacity this allocator may reserve. */
  get memoryFraction(): number {
    return this.#fraction;
  }

  /** Bytes this allocator may reserve: fraction times capacity. */
  get allowedBytes(): number {
    return this.#fraction * this.#source.capacityBytes;
  }

  /** Bytes of blocks handed out now (rounded sizes). */
  get allocatedBytes(): number {
    return this.#stats.allocatedBytes;
  }

  /** Bytes of segments held now. */
  get reservedBytes(): number {
    return this.#stats.reservedBytes;
  }

  /** Blocks freed by callers that still wait for fences. */
  get pendingFreeCount(): number {
    return this.#deferred.count;
  }

  /**
   * Sets the share of the device capacity this allocator may reserve. Segments
   * already held are kept.
   *
   * @param fraction A number in (0, 1].
   * @throws {InvalidArgumentError} When out of range.
   */
  setMemoryFraction(fraction: number): void {
    this.#fraction = checkFraction(fraction, "memoryFraction", 1);
  }

  /**
   * The block size a request rounds to.
   *
   * @param byteLength Bytes asked for.
   * @returns The rounded size.
   * @throws {InvalidArgumentError} For a size that is not a non-negative
   * integer or rounds above {@linkcode CachingAllocator.maxBlockByteLength}.
   *
   * @example
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource());
   * assert.equal(allocator.roundSize(1), 512);
   * assert.equal(allocator.roundSize(513), 1024);
   * ```
   */
  roundSize(byteLength: number): number {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new InvalidArgumentError(
        `Cannot allocate: byteLength must be a non-negative integer, received ${
          describeValue(byteLength)
        }`,
        {
          name: "byteLength",
          value: byteLength,
          limit: this.maxBlockByteLength,
        },
      );
    }
    const size = roundSize(
      byteLength,
      this.minBlockByteLength,
      this.#divisions,
    );
    if (size > this.maxBlockByteLength) {
      throw new InvalidArgumentError(
        `Cannot allocate ${byteLength} bytes: rounded to ${size}, above the largest segment ${this.maxBlockByteLength} of ${this.device}`,
        {
          name: "byteLength",
          value: byteLength,
          limit: this.maxBlockByteLength,
        },
      );
    }
    return size;
  }

  /** roundSize() for what the integer fast path leaves out. */
  #roundSizeSlow(byteLength: number): number {
    const g = this.minBlockByteLength;
    if (
      this.#divisions === undefined && Number.isSafeInteger(byteLength) &&
      byteLength >= 0 && byteLength <= this.maxBlockByteLength
    ) {
      return byteLength <= g ? g : Math.ceil(byteLength / g) * g;
    }
    return this.roundSize(byteLength);
  }

  /**
   * Allocates a block. Serves it from the cache when it can; otherwise takes a
   * segment from the device, after freeing cached segments if the device is
   * full. Does not wait for fences: see
   * {@linkcode CachingAllocator.allocateAsync}.
   *
   * @param byteLength Bytes; 0 gives a block of the minimum size.
   * @param options The stream that uses the block.
   * @returns The owning handle.
   * @throws {InvalidArgumentError} For a bad size or stream.
   * @throws {CachingOutOfMemoryError} When the device cannot hold the block.
   * @throws {SegmentSourceError} When the device threw.
   */
  allocate(byteLength: number, options?: AllocateOptions): CachedBlock<M> {
    // The common case of roundSize() in integer operations.
    // (typeof first: a comparison would call an object's valueOf.)
    const size = typeof byteLength === "number" && byteLength > 0 &&
        byteLength <= this.#intRoundMax && (byteLength | 0) === byteLength
      ? (byteLength + this.#granuleMask) & ~this.#granuleMask
      : this.#roundSizeSlow(byteLength);
    if (options !== undefined) validateObject(options, "options");
    const stream = options === undefined || options.stream === undefined
      ? DEFAULT_STREAM
      : this.#checkStream(options.stream);
    const tag = options === undefined || options.tag === undefined
      ? this.#tag
      : checkTag(options.tag);
    if (this.#deferred.count > 0) this.#deferred.poll();
    const pool = size <= this.smallRequestMaxByteLength
      ? this.#small
      : this.#expandable
      ? this.#poolFor(size)
      : this.#large;
    const block = this.#getFreeBlock(pool, stream.id, size) ??
      this.#allocSlow(pool, size, stream);
    if (block === undefined) this.#throwOom(byteLength, size, stream, tag);
    return this.#allocFound(block, pool, size, byteLength, stream, tag);
  }

  /**
   * Allocates a block like {@linkcode CachingAllocator.allocate}, but before
   * giving up waits for every pending fence, frees the whole cache and retries.
   *
   * @param byteLength Bytes.
   * @param options The stream that uses the block.
   * @returns The owning handle.
   * @throws {InvalidArgumentError} For a bad size or stream.
   * @throws {CachingOutOfMemoryError} When the device cannot hold the block.
   * @throws {SegmentSourceError} When the device threw.
   *
   * @example Wait for a fence instead of failing
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { ManualStream, MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource({ capacityBytes: 2 ** 21 }));
   * const copy = new ManualStream();
   * const a = allocator.allocate(2 ** 20);
   * a.recordStream(copy);
   * a.release(); // waits for `copy`
   * assert.throws(() => allocator.allocate(2 ** 21));
   * setTimeout(() => copy.completeAll(), 1);
   * using b = await allocator.allocateAsync(2 ** 21);
   * assert.equal(b.blockByteLength, 2 ** 21);
   * ```
   */
  async allocateAsync(
    byteLength: number,
    options?: AllocateOptions,
  ): Promise<CachedBlock<M>> {
    const size = this.roundSize(byteLength);
    if (options !== undefined) validateObject(options, "options");
    const stream = this.#checkStream(options?.stream);
    const tag = options?.tag === undefined ? this.#tag : checkTag(options.tag);
    if (this.#deferred.count > 0) this.#deferred.poll();
    const pool = size <= this.smallRequestMaxByteLength
      ? this.#small
      : this.#expandable
      ? this.#poolFor(size)
      : this.#large;
    let block = this.#getFreeBlock(pool, stream.id, size) ??
      this.#allocSlow(pool, size, stream);
    while (block === undefined && this.#deferred.count > 0) {
      await this.synchronize();
      block = this.#getFreeBlock(pool, stream.id, size) ??
        this.#allocSlow(pool, size, stream);
    }
    if (block === undefined) this.#throwOom(byteLength, size, stream, tag);
    return this.#allocFound(block, pool, size, byteLength, stream, tag);
  }

  /**
   * Allocates a block like {@linkcode CachingAllocator.allocate} but makes no
   * object: returns the block's id, a number, for runtimes that keep
   * offsets themselves. Look the block up with
   * {@linkcode CachingAllocator.blockByteOffset} and
   * {@linkcode CachingAllocator.blockMemory}; free it with
   * {@linkcode CachingAllocator.freeById}. A freed id is refused until its
   * slot has been reused 1,024 times (after 256 other ids each time).
   * The block lives on the default stream and is not watched by a leak
   * detector.
   *
   * @param byteLength Bytes; 0 gives a block of the minimum size.
   * @returns The block id, a non-negative safe integer.
   * @throws {InvalidArgumentError} For a bad size.
   * @throws {CachingOutOfMemoryError} When the device cannot hold the block.
   * @throws {SegmentSourceError} When the device threw.
   *
   * @example Offsets without handles
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource());
   * const a = allocator.allocateId(1000);
   * const b = allocator.allocateId(1000);
   * assert.equal(allocator.blockMemory(a), allocator.blockMemory(b));
   * assert.equal(allocator.blockByteOffset(b) - allocator.blockByteOffset(a), 1024);
   * allocator.freeById(a);
   * allocator.freeById(b);
   * assert.equal(allocator.allocatedBytes, 0);
   * ```
   */
  allocateId(byteLength: number): number {
    // The common case of roundSize() in integer operations.
    // (typeof first: a comparison would call an object's valueOf.)
    const size = typeof byteLength === "number" && byteLength > 0 &&
        byteLength <= this.#intRoundMax && (byteLength | 0) === byteLength
      ? (byteLength + this.#granuleMask) & ~this.#granuleMask
      : this.#roundSizeSlow(byteLength);
    if (this.#deferred.count > 0) this.#deferred.poll();
    const pool = size <= this.smallRequestMaxByteLength
      ? this.#small
      : this.#expandable
      ? this.#poolFor(size)
      : this.#large;
    const found = this.#getFreeBlock(pool, 0, size) ??
      this.#allocSlow(pool, size, DEFAULT_STREAM);
    if (found === undefined) {
      this.#throwOom(byteLength, size, DEFAULT_STREAM, this.#tag);
    }
    // A free slot is reused only while FREE_SLOT_RESERVE others wait, so a
    // stale id matches again only after many allocations.
    let slot: number;
    if (this.#freeCount > FREE_SLOT_RESERVE) {
      const ring = this.#freeSlots;
      slot = ring[this.#freeHead];
      this.#freeHead = (this.#freeHead + 1) & (ring.length - 1);
      this.#freeCount--;
    } else {
      slot = this.#byId.length;
      if (slot >= ID_SLOTS) {
        this.#throwIdsFull(byteLength);
      }
      this.#byId.push(undefined);
      this.#slotGeneration.push(0);
    }
    const b = this.#take(found, pool, size, byteLength, this.#tag);
    this.#byId[slot] = b;
    b.slot = slot;
    b.byId = true;
    return (this.#slotGeneration[slot] << ID_SLOT_BITS) | slot;
  }

  /**
   * Byte offset of a block allocated by id, in its segment's memory.
   *
   * @param id An id from {@linkcode CachingAllocator.allocateId}.
   * @returns The byte offset.
   * @throws {UseAfterFreeError} When the id is not of a live block.
   */
  blockByteOffset(id: number): number {
    const b = this.#blockById(id, "read the offset of");
    return b.segment.raw.byteOffset + b.offset;
  }

  /**
   * Byte length of a block allocated by id (the rounded size it holds).
   *
   * @param id An id from {@linkcode CachingAllocator.allocateId}.
   * @returns The block's byte length.
   * @throws {UseAfterFreeError} When the id is not of a live block.
   */
  blockByteLength(id: number): number {
    return this.#blockById(id, "read the length of").size;
  }

  /**
   * Memory of a block allocated by id (its segment's memory).
   *
   * @param id An id from {@linkcode CachingAllocator.allocateId}.
   * @returns The memory.
   * @throws {UseAfterFreeError} When the id is not of a live block.
   */
  blockMemory(id: number): M {
    return this.#blockById(id, "read the memory of").segment.raw.memory;
  }

  /**
   * Frees a block allocated by id.
   *
   * @param id An id from {@linkcode CachingAllocator.allocateId}.
   * @throws {DoubleFreeError} When the id is not of a live block (freed
   * already, never given, or a block of the handle API); nothing changes.
   */
  freeById(id: number): void {
    const b = this.#lookUp(id);
    if (b === undefined) {
      throw new DoubleFreeError(
        `Cannot free block id ${
          describeValue(id)
        }: it is not a live block of this ${this.label} allocated by id`,
      );
    }
    this.#freeSlot(b);
    this.#release(null, b);
  }

  #throwIdsFull(byteLength: number): never {
    throw new InvalidArgumentError(
      `Cannot allocate ${byteLength} bytes by id: ${ID_SLOTS} blocks have ids already`,
      { name: "byteLength", value: byteLength, limit: ID_SLOTS },
    );
  }

  #lookUp(id: number): _Block<M> | undefined {
    // ids are below 2^30: integer tests and bit operations suffice
    if (typeof id !== "number" || (id | 0) !== id || id < 0) return undefined;
    const slot = id & (ID_SLOTS - 1);
    const b = this.#byId[slot];
    if (
      b === undefined || !b.byId || b.state !== ALLOCATED ||
      id >>> ID_SLOT_BITS !== this.#slotGeneration[slot]
    ) return undefined;
    return b;
  }

  #blockById(id: number, what: string): _Block<M> {
    const b = this.#lookUp(id);
    if (b === undefined) {
      throw new UseAfterFreeError(
        `Cannot ${what} block id ${
          describeValue(id)
        }: it is not a live block of this ${this.label} allocated by id`,
      );
    }
    return b;
  }

  #freeSlot(b: _Block<M>): void {
    const slot = b.slot;
    this.#byId[slot] = undefined;
    this.#slotGeneration[slot] = (this.#slotGeneration[slot] + 1) &
      (ID_GENERATIONS - 1);
    let ring = this.#freeSlots;
    if (this.#freeCount === ring.length) {
      const grown = new Int32Array(ring.length * 2);
      for (let i = 0; i < this.#freeCount; i++) {
        grown[i] = ring[(this.#freeHead + i) & (ring.length - 1)];
      }
      this.#freeSlots = ring = grown;
      this.#freeHead = 0;
    }
    ring[(this.#freeHead + this.#freeCount) & (ring.length - 1)] = slot;
    this.#freeCount++;
    b.slot = -1;
    b.byId = false;
  }

  /**
   * Runs `fn` with `tag` as the tag of every allocation inside it that gives
   * none of its own (scopes nest; the previous tag is restored after `fn`,
   * also when it throws).
   *
   * @typeParam T What `fn` returns.
   * @param tag The tag, such as a layer name.
   * @param fn The scope.
   * @returns What `fn` returned.
   * @throws {InvalidArgumentError} When `tag` is not a string.
   *
   * @example
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource(), { recordHistory: true });
   * const block = allocator.withTag("conv1", () => allocator.allocate(4096));
   * const entry = allocator.snapshot().history.find((e) => e.action === "alloc");
   * assert.equal(entry?.tag, "conv1");
   * block.release();
   * ```
   */
  withTag<T>(tag: string, fn: () => T): T {
    checkTag(tag);
    if (typeof fn !== "function") {
      throw new InvalidArgumentError(
        `Cannot run with tag ${
          JSON.stringify(tag)
        }: fn must be a function, received ${describeValue(fn)}`,
        { name: "fn", value: fn, limit: "function" },
      );
    }
    const outer = this.#tag;
    this.#tag = tag;
    try {
      return fn();
    } finally {
      this.#tag = outer;
    }
  }

  /**
   * Frees a block (same as `block.release()`). A block used on other streams
   * waits for their fences before it can be reused.
   *
   * @param block A block of this allocator.
   * @throws {DoubleFreeError} When the block was freed already or belongs to
   * another allocator.
   */
  free(block: CachedBlock<M>): void {
    const b = blockOf(block);
    if (b === undefined || block.allocator !== this) {
      throw new DoubleFreeError(
        `Cannot free ${
          b === undefined ? describeValue(block) : block
        }: it is not a block of this ${this.label}`,
      );
    }
    if (b === null) {
      throw new DoubleFreeError(`Cannot free ${block}: it was already freed`);
    }
    this.#release(block, b);
    detach(block);
  }

  static {
    releaseHandle = <M>(h: CachedBlock<M>, b: _Block<M>): void =>
      h.allocator.#release(h, b);
  }

  #release(block: CachedBlock<M> | null, b: _Block<M>): void {
    let fences: Fence[] | null = null;
    let streamIds: number[] | null = null;
    if (b.streamUses !== null) {
      // Take fences before changing anything: a stream may throw.
      for (const stream of b.streamUses) {
        const fence = stream.fence();
        if (!completedOrThrew(fence)) {
          (fences ??= []).push(fence);
          (streamIds ??= []).push(stream.id);
        }
      }
    }
    if (block !== null) this.#leaks?.forget(block);
    b.streamUses = null;
    const small = b.segment.small;
    this.#stats.freed(small, b.size);
    if (b.size >= this.maxSplitByteLength) {
      this.#stats.oversizeAllocation(-1);
    }
    if (this.#history !== null) {
      this.#record(
        "free_requested",
        b.address,
        b.size,
        b.requested,
        b.streamId,
        b.tag,
      );
    }
    if (fences !== null) {
      b.state = PENDING;
      this.#deferred.defer(b, streamIds!, fences);
      // Still active: allocation moved to pending free.
      this.#stats.pending(small, b.size);
    } else {
      this.#freeBlock(b);
    }
    if (this.#watched && this.#strict) this.#strictCheck();
  }

  /**
   * Records that `stream` uses `block` (PyTorch's `recordStream`). When the
   * block is freed, it waits for a fence of every recorded stream.
   *
   * @param block A live block of this allocator.
   * @param stream The stream.
   * @throws {UseAfterFreeError} When the block was freed.
   * @throws {InvalidArgumentError} When `stream` is not a stream.
   *
   * @example
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { ManualStream, MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource());
   * const copy = new ManualStream();
   * const a = allocator.allocate(4096);
   * const address = a.address;
   * allocator.recordStream(a, copy);
   * a.release();
   * using b = allocator.allocate(4096); // a is not reusable yet
   * assert.notEqual(b.address, address);
   * copy.completeAll();
   * using c = allocator.allocate(4096);
   * assert.equal(c.address, address);
   * ```
   */
  recordStream(block: CachedBlock<M>, stream: Stream): void {
    const b = blockOf(block);
    if (b === undefined || block.allocator !== this) {
      throw new InvalidArgumentError(
        `Cannot record a stream on ${
          b === undefined ? describeValue(block) : block
        }: it is not a block of this ${this.label}`,
        { name: "block", value: block },
      );
    }
    if (b === null) {
      throw new UseAfterFreeError(
        `Cannot record a stream on ${block}: the block was released`,
      );
    }
    const s = this.#checkStream(stream);
    if (s.id === b.streamId) return;
    const uses = b.streamUses;
    if (uses === null) b.streamUses = [s];
    else if (!uses.some((u) => u.id === s.id)) uses.push(s);
  }

  /**
   * Waits for every pending fence, then returns the blocks that waited on them
   * to the pool.
   *
   * @returns Resolves when the blocks pending at the call are back in the pool.
   */
  async synchronize(): Promise<void> {
    this.#stats.numSyncAllStreams++;
    // A rejected fence also ends: its work will never run.
    await this.#deferred.synchronize();
    if (this.#strict) this.#strictCheck();
  }

  /**
   * Returns every whole free segment to the device (PyTorch's `empty_cache`).
   * Blocks still waiting for fences stay; `await synchronize()` first to
   * include them.
   */
  emptyCache(): void {
    this.#pressured = false;
    this.#releaseCachedBlocks();
    if (this.#strict) this.#strictCheck();
  }

  /** Sets every peak to its current value. */
  resetPeakStats(): void {
    this.#stats.resetPeak();
  }

  /** Sets every allocated and freed total, and the counters, to zero. */
  resetAccumulatedStats(): void {
    this.#stats.resetAccumulated();
  }

  /**
   * The stats now, as plain data (see {@linkcode MemoryStats}).
   *
   * @returns A copy of the stats.
   *
   * @example
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource());
   * const a = allocator.allocate(1000);
   * a.release();
   * const stats = allocator.memoryStats();
   * assert.equal(stats.allocatedBytes.all.peak, 1024);
   * assert.equal(stats.reservedBytes.smallPool.current, 2 ** 21);
   * assert.equal(stats.numDeviceAlloc, 1);
   * ```
   */
  memoryStats(): MemoryStats {
    return this.#stats.memoryStats(this.maxSplitByteLength);
  }

  /**
   * A text table of the stats, like `torch.cuda.memory_summary()`.
   *
   * @param options Title and abbreviation.
   * @returns The table.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    validateObject(options, "options");
    return formatMemorySummary(this.memoryStats(), {
      title: `${this.label} on ${this.device}`,
      ...options,
    });
  }

  /**
   * Starts (or restarts, dropping old events) or stops history recording.
   *
   * @param options Recorder options, or `false` to stop.
   */
  recordHistory(options: TraceRecorderOptions | false = {}): void {
    if (options !== false) validateObject(options, "options");
    this.#history = options === false ? null : new TraceRecorder(options);
    this.#watched = this.#strict || this.#history !== null;
  }

  /**
   * Every segment with its blocks, and the recorded history: plain data that
   * `JSON.stringify` can write. See the README for the format.
   *
   * @returns The snapshot.
   *
   * @example
   * ```ts
   * import { CachingAllocator } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new CachingAllocator(new MockSegmentSource(), { recordHistory: true });
   * using a = allocator.allocate(1000);
   * const snapshot = JSON.parse(JSON.stringify(allocator.snapshot()));
   * assert.equal(snapshot.segments.length, 1);
   * assert.deepEqual(snapshot.segments[0].blocks.map((b: { state: string }) => b.state), ["active_allocated", "inactive"]);
   * assert.deepEqual(snapshot.history.map((e: { action: string }) => e.action), ["segment_alloc", "alloc", "snapshot"]);
   * ```
   */
  snapshot(): MemorySnapshot {
    const segments: SegmentSnapshot[] = [];
    for (const seg of this.#segments) {
      const blocks: BlockSnapshot[] = [];
      for (let b: _Block<M> | null = seg.head; b !== null; b = b.next) {
        const entry: BlockSnapshot = {
          address: b.address,
          offset: b.offset,
          byteLength: b.size,
          requestedByteLength: b.state === FREE ? 0 : b.requested,
          state: b.state === FREE
            ? "inactive"
            : b.state === ALLOCATED
            ? "active_allocated"
            : "active_pending_free",
        };
        if (b.stack !== undefined && b.state !== FREE) entry.stack = b.stack;
        if (b.tag !== undefined && b.state !== FREE) entry.tag = b.tag;
        blocks.push(entry);
      }
      segments.push({
        id: seg.id,
        address: seg.address,
        byteLength: seg.byteLength,
        stream: seg.stream.id,
        pool: seg.small ? "small" : "large",
        ...segmentTotals(blocks),
        memoryByteOffset: seg.raw.byteOffset,
        blocks,
      });
    }
    return finishSnapshot(
      String(this.device),
      this.label,
      segments,
      this.#history,
    );
  }

  /**
   * Checks every internal invariant: blocks tile their segments, no two free
   * neighbours, the pools hold exactly the free blocks in order, pending
   * blocks wait, and every stat equals a recount. For tests.
   *
   * @throws {AllotError} Naming the first broken invariant.
   */
  validate(): void {
    const fail = (what: string): never => {
      throw new AllotError(`${this.label} is inconsistent: ${what}`);
    };
    const c = new StatRecount();
    let freeSmall = 0, freeLarge = 0, pending = 0;
    const pendingSet = new Set<_Block<unknown>>();
    this.#deferred.forEach((b) => pendingSet.add(b));
    for (const seg of this.#segments) {
      const small = seg.small;
      const pool = this.#poolOf(seg);
      c.segment(small, seg.byteLength);
      if (seg.byteLength >= this.maxSplitByteLength) c.oversizeSegments++;
      if (seg.head.prev !== null) fail(`segment ${seg.id} head has a prev`);
      let offset = 0;
      const split = seg.head.next !== null;
      for (let b: _Block<M> | null = seg.head; b !== null; b = b.next) {
        if (b.segment !== seg) {
          fail(`block at ${b.address} names another segment`);
        }
        if (b.offset !== offset) {
          fail(`segment ${seg.id} has a gap or overlap at ${offset}`);
        }
        if (b.address !== seg.address + b.offset) {
          fail(`bad address ${b.address}`);
        }
        if (b.size <= 0 || b.size % this.minBlockByteLength !== 0) {
          fail(
            `block size ${b.size} is not a positive multiple of the granule`,
          );
        }
        if (b.streamId !== seg.stream.id) {
          fail(`block stream differs from segment`);
        }
        if (b.next !== null && b.next.prev !== b) fail(`broken links`);
        offset += b.size;
        if (b.state === FREE) {
          if (b.next !== null && b.next.state === FREE) {
            fail(`two free neighbours at ${b.address}`);
          }
          if (!pool.has(b)) fail(`free block ${b.address} not in pool`);
          if (seg.small) freeSmall++;
          else freeLarge++;
          if (split) c.inactiveSplitBlock(small, b.size);
        } else if (b.state === ALLOCATED) {
          c.allocatedBlock(small, b.size, b.requested);
          if (b.size >= this.maxSplitByteLength) c.oversizeAllocations++;
        } else {
          if (!pendingSet.has(b)) fail(`pending block not in pending list`);
          if (b.waitingFences <= 0) fail(`pending block waits for no fence`);
          pending++;
          c.activeBlock(small, b.size, b.requested);
        }
      }
      if (offset !== seg.byteLength) {
        fail(`segment ${seg.id} blocks do not tile it`);
      }
    }
    if (freeSmall !== this.#small.count) fail(`small pool size`);
    if (freeLarge !== this.#large.count + this.#own.count) {
      fail(`large pool size`);
    }
    if (pending !== this.#deferred.count || pending !== pendingSet.size) {
      fail(`pending list size`);
    }
    for (const pool of this.#pools()) {
      const bs = pool.all();
      if (bs.length !== pool.count) fail(`pool count`);
      for (let i = 1; i < bs.length; i++) {
        const a = bs[i - 1], b = bs[i];
        const ordered = a.streamId < b.streamId ||
          (a.streamId === b.streamId &&
            (a.size < b.size || (a.size === b.size && a.address < b.address)));
        if (!ordered) fail(`pool out of order at ${i}`);
      }
      for (const b of bs) {
        if (b.state !== FREE || !this.#segments.has(b.segment)) {
          fail(`pool holds a non-free block`);
        }
        if (b.segment.small !== pool.small) fail(`block in the wrong pool`);
      }
    }
    this.#stats.verify(c, this.label);
  }

  // ---- internals ----

  #poolOf(seg: _Segment<M>): _BlockPool<M> {
    return seg.small
      ? this.#small
      : this.#expandable && !seg.expandable
      ? this.#own
      : this.#large;
  }

  #pools(): _BlockPool<M>[] {
    return this.#expandable
      ? [this.#small, this.#large, this.#own]
      : [this.#small, this.#large];
  }

  /** The pool a request of `size` rounded bytes is served from. */
  #poolFor(size: number): _BlockPool<M> {
    return size <= this.smallRequestMaxByteLength
      ? this.#small
      : this.#expandable && size >= this.ownSegmentMinByteLength
      ? this.#own
      : this.#large;
  }

  #checkStream(stream: Stream | undefined): Stream {
    return stream === undefined ? DEFAULT_STREAM : checkStream(stream);
  }

  #record(
    action: TraceAction,
    address: number,
    size: number,
    requested: number,
    stream: number,
    tag?: string,
  ): void {
    this.#history!.record(action, address, size, requested, stream, tag);
  }

  #newBlock(segment: _Segment<M>): _Block<M> {
    if (this.#spareCount === 0) return new _Block(segment);
    const b = this.#spare[--this.#spareCount];
    b.segment = segment;
    return b;
  }

  #recycle(b: _Block<M>): void {
    b.prev = b.next = null;
    b.streamUses = null;
    b.waitingFences = 0;
    b.stack = undefined;
    b.tag = undefined;
    if (b.slot >= 0) this.#freeSlot(b);
    if (this.#spareCount < 1024) {
      if (this.#spareCount === this.#spare.length) this.#spare.push(b);
      else this.#spare[this.#spareCount] = b;
      this.#spareCount++;
    }
  }

  #getFreeBlock(
    pool: _BlockPool<M>,
    streamId: number,
    size: number,
  ): _Block<M> | undefined {
    this.#clock++;
    if (pool.count === 0) return undefined;
    const b = pool.lowerBound(streamId, size);
    if (b === undefined) return undefined;
    const maxSplit = this.maxSplitByteLength;
    if (size < maxSplit && b.size >= maxSplit) return undefined;
    if (
      size >= maxSplit && b.size >= size + this.maxNonSplitRoundingByteLength
    ) {
      return undefined;
    }
    if (pool === this.#own && b.size - size >= this.largeRoundByteLength) {
      // Expandable segments: an own segment serves only a request of about
      // its size (split, it would pin its rest).
      return undefined;
    }
    return b; // still in the pool: #allocFound re-keys or removes it
  }

  #allocFound(
    b: _Block<M>,
    pool: _BlockPool<M>,
    size: number,
    requested: number,
    stream: Stream,
    tag: string | undefined,
  ): CachedBlock<M> {
    b = this.#take(b, pool, size, requested, tag);
    const raw = b.segment.raw;
    const handle = new CachedBlock<M>(
      this,
      b,
      raw.byteOffset + b.offset,
      requested,
      stream,
    );
    if (this.#leaks !== undefined) {
      this.#leaks.watch(handle, {
        label: `${this.label} block of ${requested} bytes on ${this.device}`,
        byteLength: b.size,
      });
    }
    return handle;
  }

  /** Carves `size` bytes from free block `b`: the allocated block. */
  #take(
    b: _Block<M>,
    pool: _BlockPool<M>,
    size: number,
    requested: number,
    tag: string | undefined,
  ): _Block<M> {
    // (Under pressure a large request may be served from an own segment.)
    if (this.#expandable) pool = this.#poolOf(b.segment);
    const small = pool.small;
    const alreadySplit = b.prev !== null || b.next !== null;
    const remaining = b.size - size;
    const split = pool.small
      ? remaining >= this.minBlockByteLength
      : size < this.maxSplitByteLength &&
        remaining > this.smallRequestMaxByteLength &&
        (b.segment.expandable || !this.#expandable);
    if (split) {
      const rest = b;
      const seg = rest.segment;
      b = this.#newBlock(seg);
      b.offset = rest.offset;
      b.address = rest.address;
      b.size = size;
      b.streamId = rest.streamId;
      b.prev = rest.prev;
      if (b.prev !== null) b.prev.next = b;
      else seg.head = b;
      b.next = rest;
      rest.prev = b;
      pool.resize(rest, rest.size - size, rest.address + size);
      rest.offset += size;
      rest.stamp = this.#clock;
      if (alreadySplit) this.#stats.splitTaken(small, size, 0);
      else this.#stats.split(small, 1, rest.size);
    } else {
      pool.remove(b);
      if (alreadySplit) this.#stats.splitTaken(small, b.size, 1);
    }
    b.state = ALLOCATED;
    b.requested = requested;
    b.tag = tag;
    const bytes = b.size;
    this.#stats.allocated(
      small,
      bytes,
      requested,
      this.#deferred.count !== 0,
    );
    if (bytes >= this.maxSplitByteLength) this.#stats.oversizeAllocation(1);
    if (this.#watched) this.#watchTake(b);
    return b;
  }

  /** History and strict mode after #take (kept apart: the hit is short). */
  #watchTake(b: _Block<M>): void {
    if (this.#history !== null) {
      this.#record("alloc", b.address, b.size, b.requested, b.streamId, b.tag);
      if (this.#history.captureStack) b.stack = captureStack();
    }
    if (this.#strict) this.#strictCheck(b);
  }

  /** Strict mode: validates; `b`, if given, must be an allocated block. */
  #strictCheck(b?: _Block<M>): void {
    this.validate();
    if (b !== undefined && b.state !== ALLOCATED) {
      throw new AllotError(
        `${this.label} is inconsistent: block not allocated`,
      );
    }
  }

  #freeBlock(b: _Block<M>): void {
    const seg = b.segment;
    const pool = this.#poolOf(seg);
    const originalSize = b.size, requested = b.requested;
    const wasPending = b.state === PENDING;
    if (this.#watched) this.#watchFree(b);
    // The merged block lives on in a free neighbour when there is one
    // (already in the pool: re-keyed in place), else in b (inserted).
    let splitBlocks = 0, splitBytes = 0;
    const prev = b.prev, next = b.next;
    const prevFree = prev !== null && prev.state === FREE;
    const nextFree = next !== null && next.state === FREE;
    let survivor: _Block<M>;
    if (prevFree) {
      survivor = prev;
      splitBlocks--;
      splitBytes -= prev.size;
      let size = prev.size + b.size;
      prev.next = next;
      if (next !== null) next.prev = prev;
      if (nextFree) {
        pool.remove(next);
        splitBlocks--;
        splitBytes -= next.size;
        size += next.size;
        prev.next = next.next;
        if (next.next !== null) next.next.prev = prev;
        this.#recycle(next);
      }
      this.#recycle(b);
      prev.stamp = this.#clock;
      pool.resize(prev, size, prev.address);
    } else if (nextFree) {
      survivor = next;
      splitBlocks--;
      splitBytes -= next.size;
      pool.resize(next, next.size + b.size, b.address);
      next.offset = b.offset;
      next.prev = prev;
      if (prev !== null) prev.next = next;
      else seg.head = next;
      this.#recycle(b);
      next.stamp = this.#clock;
    } else {
      survivor = b;
      b.state = FREE;
      b.requested = 0;
      b.stack = undefined;
      b.tag = undefined;
      b.stamp = this.#clock;
      pool.insert(b);
    }
    if (survivor.prev !== null || survivor.next !== null) {
      splitBlocks++;
      splitBytes += survivor.size;
    }
    this.#stats.inactive(
      seg.small,
      originalSize,
      requested,
      wasPending,
      splitBlocks,
      splitBytes,
    );
  }

  /** Strict mode and history when #freeBlock frees `b`. */
  #watchFree(b: _Block<M>): void {
    const seg = b.segment;
    if (this.#strict) {
      junkFill(seg.raw.memory, seg.raw.byteOffset + b.offset, b.size);
    }
    if (this.#history !== null) {
      this.#record(
        "free_completed",
        b.address,
        b.size,
        b.requested,
        b.streamId,
        b.tag,
      );
    }
  }

  #allocSlow(
    pool: _BlockPool<M>,
    size: number,
    stream: Stream,
  ): _Block<M> | undefined {
    if (this.#gcThreshold > 0) this.#garbageCollect();
    let b = this.#allocBlock(pool, size, stream, false);
    if (b !== undefined) return b;
    if (this.#releaseAvailableCachedBlocks(pool, size, stream.id)) {
      b = this.#allocBlock(pool, size, stream, false);
      if (b !== undefined) return b;
    }
    // Expandable segments: the device is full, so from now on large requests
    // that the expandable segment cannot serve from its holes get segments
    // of their own, which a full device gets back whole (grown, the
    // segment would pin them in place).
    if (this.#expandable) this.#pressured = true;
    this.#releaseCachedBlocks();
    return this.#allocBlock(pool, size, stream, true);
  }

  #segmentSizeFor(pool: _BlockPool<M>, size: number): number {
    let s = pool.small
      ? this.smallSegmentByteLength
      : size < this.ownSegmentMinByteLength
      ? this.largeSegmentByteLength
      : Math.ceil(size / this.largeRoundByteLength) * this.largeRoundByteLength;
    if (s > this.maxBlockByteLength) s = this.maxBlockByteLength;
    return s < size ? size : s;
  }

  #allocBlock(
    pool: _BlockPool<M>,
    size: number,
    stream: Stream,
    isRetry: boolean,
  ): _Block<M> | undefined {
    if (isRetry) this.#stats.numAllocRetries++;
    if (
      this.#expandable && (pool.small || size < this.ownSegmentMinByteLength)
    ) {
      if (pool.small || !this.#pressured) {
        return this.#growBlock(pool, size, stream);
      }
      const own = this.#getFreeBlock(this.#own, stream.id, size);
      if (own !== undefined) return own;
      pool = this.#own;
    }
    const full = this.#expandable
      ? Math.ceil(size / this.minBlockByteLength) * this.minBlockByteLength
      : this.#segmentSizeFor(pool, size);
    const allowed = this.allowedBytes;
    const reserved = this.#stats.reservedBytes;
    let raw = undefined;
    let segSize = full;
    if (reserved + full <= allowed) raw = this.#trySegment(full, size, pool);
    if (raw === undefined && full > size) {
      // A device too small or too full for a whole segment: take just enough.
      // (PyTorch fails here; on small devices this keeps large requests
      // possible.)
      const granule = pool.small
        ? this.minBlockByteLength
        : this.largeRoundByteLength;
      let tight = Math.ceil(size / granule) * granule;
      if (tight > full) tight = full;
      if (tight < full && reserved + tight <= allowed) {
        segSize = tight;
        raw = this.#trySegment(tight, size, pool);
      }
      if (raw === undefined && tight !== size && reserved + size <= allowed) {
        segSize = size;
        raw = this.#trySegment(size, size, pool);
      }
    }
    if (raw === undefined) return undefined;
    return this.#addSegment(raw, segSize, pool, stream, false);
  }

  /** A new segment's one free block, in the pool; stats and history. */
  #addSegment(
    raw: Segment<M>,
    segSize: number,
    pool: _BlockPool<M>,
    stream: Stream,
    expandable: boolean,
  ): _Block<M> {
    const seg = new _Segment<M>(
      this.#nextSegmentId++,
      this.#nextAddress,
      raw,
      segSize,
      pool.small,
      stream,
      expandable,
    );
    // An expandable segment keeps the address range it may grow into.
    this.#nextAddress += expandable ? this.maxBlockByteLength : segSize;
    this.#segments.add(seg);
    const b = this.#newBlock(seg);
    b.offset = 0;
    b.address = seg.address;
    b.size = segSize;
    b.streamId = stream.id;
    b.state = FREE;
    b.requested = 0;
    b.prev = b.next = null;
    b.stamp = this.#clock;
    seg.head = b;
    pool.insert(b); // #allocFound takes it from the pool like a cached one
    this.#stats.reserved(pool.small, 1, segSize);
    if (segSize >= this.maxSplitByteLength) this.#stats.oversizeSegment(1);
    this.#stats.numDeviceAlloc++;
    if (this.#history !== null) {
      this.#record("segment_alloc", seg.address, segSize, 0, stream.id);
    }
    return b;
  }

  /**
   * Expandable segments: a free block of at least `size` bytes at the end of
   * the stream's segment of `pool`, grown in place (its free tail extended,
   * or a new tail), or a new expandable segment when there is none.
   */
  #growBlock(
    pool: _BlockPool<M>,
    size: number,
    stream: Stream,
  ): _Block<M> | undefined {
    const growing = this.#growing[pool.small ? 0 : 1];
    const seg = growing.get(stream.id);
    const allowed = this.allowedBytes;
    const reserved = this.#stats.reservedBytes;
    // Grow in steps of a small segment or of the large rounding, down to the
    // block granule when the device is that full.
    const step = pool.small
      ? this.smallSegmentByteLength
      : this.largeRoundByteLength;
    if (seg === undefined) {
      let raw: Segment<M> | undefined;
      let segSize = Math.min(
        Math.ceil(size / step) * step,
        this.maxBlockByteLength,
      );
      this.#segmentOptions.resizable = true;
      try {
        if (reserved + segSize <= allowed) {
          raw = this.#trySegment(segSize, size, pool);
        }
        if (raw === undefined && segSize > size && reserved + size <= allowed) {
          segSize = size;
          raw = this.#trySegment(size, size, pool);
        }
      } finally {
        this.#segmentOptions.resizable = undefined;
      }
      if (raw === undefined) return undefined;
      const b = this.#addSegment(raw, segSize, pool, stream, true);
      growing.set(stream.id, b.segment);
      return b;
    }
    let tail = seg.head;
    while (tail.next !== null) tail = tail.next;
    const need = tail.state === FREE ? size - tail.size : size;
    const room = this.maxBlockByteLength - seg.byteLength;
    if (need > room) return undefined;
    let grow = Math.min(Math.ceil(need / step) * step, room);
    let raw: Segment<M> | undefined;
    if (reserved + grow <= allowed) {
      raw = resizeSegment(this.#source, seg.raw, seg.byteLength + grow, size);
    }
    if (raw === undefined && grow > need && reserved + need <= allowed) {
      grow = need;
      raw = resizeSegment(this.#source, seg.raw, seg.byteLength + grow, size);
    }
    if (raw === undefined) return undefined;
    const at = seg.byteLength;
    seg.raw = raw;
    seg.byteLength += grow;
    let b: _Block<M>;
    if (tail.state === FREE) {
      b = tail;
      pool.resize(b, b.size + grow, b.address);
      if (b.prev !== null) {
        this.#stats.split(pool.small, 0, grow);
      }
    } else {
      b = this.#newBlock(seg);
      b.offset = at;
      b.address = seg.address + at;
      b.size = grow;
      b.streamId = stream.id;
      b.state = FREE;
      b.requested = 0;
      b.prev = tail;
      b.next = null;
      tail.next = b;
      pool.insert(b);
      this.#stats.split(pool.small, 1, grow);
    }
    b.stamp = this.#clock;
    this.#stats.reserved(pool.small, 0, grow);
    if (this.#history !== null) {
      this.#record("segment_map", seg.address + at, grow, 0, stream.id);
    }
    return b;
  }

  /** Gives the free tail of expandable segment `seg` back to the device. */
  #shrinkSegment(seg: _Segment<M>): void {
    let tail = seg.head;
    while (tail.next !== null) tail = tail.next;
    if (tail.state !== FREE || tail.prev === null) return;
    const raw = resizeSegment(
      this.#source,
      seg.raw,
      seg.byteLength - tail.size,
      0,
    );
    if (raw === undefined) return;
    const pool = this.#poolOf(seg);
    const bytes = tail.size;
    pool.remove(tail);
    tail.prev.next = null;
    seg.raw = raw;
    seg.byteLength -= bytes;
    this.#stats.splitTaken(seg.small, bytes, 1);
    this.#stats.unreserved(seg.small, 0, bytes);
    if (this.#history !== null) {
      this.#record("segment_unmap", tail.address, bytes, 0, seg.stream.id);
    }
    this.#recycle(tail);
  }

  /**
   * Asks the source for a segment labelled with this allocator's label, the
   * pool and the `withTag()` scope it is made in (GPU buffers carry it, so
   * a device error names them).
   */
  #trySegment(
    segSize: number,
    size: number,
    pool: _BlockPool<M>,
  ): ReturnType<SegmentSource<M>["tryAllocateSegment"]> {
    const where = pool.small ? "small pool" : "large pool";
    const tag = this.#tag === undefined ? "" : `, tag ${this.#tag}`;
    this.#segmentOptions.label = `${this.label} ${where}${tag}`;
    return acquireSegment(this.#source, segSize, size, this.#segmentOptions);
  }

  /** Returns a whole free segment (in its pool) to the device. */
  #releaseBlock(b: _Block<M>): void {
    const seg = b.segment;
    const pool = this.#poolOf(seg);
    pool.remove(b);
    this.#segments.delete(seg);
    if (seg.expandable) {
      const growing = this.#growing[seg.small ? 0 : 1];
      if (growing.get(seg.stream.id) === seg) growing.delete(seg.stream.id);
    }
    this.#stats.unreserved(seg.small, 1, seg.byteLength);
    if (seg.byteLength >= this.maxSplitByteLength) {
      this.#stats.oversizeSegment(-1);
    }
    this.#stats.numDeviceFree++;
    if (this.#history !== null) {
      this.#record(
        "segment_free",
        seg.address,
        seg.byteLength,
        0,
        seg.stream.id,
      );
    }
    this.#recycle(b);
    releaseSegment(
      this.#source,
      seg.raw,
      `segment ${seg.id} of ${seg.byteLength} bytes`,
    );
  }

  #releaseAvailableCachedBlocks(
    pool: _BlockPool<M>,
    size: number,
    streamId: number,
  ): boolean {
    const maxSplit = this.maxSplitByteLength;
    if (maxSplit === Infinity) return false;
    const key = size < maxSplit ? maxSplit : size;
    // The slow path: work on a flat copy of the pool.
    const blocks = pool.all();
    let i = 0;
    while (
      i < blocks.length &&
      (blocks[i].streamId < streamId ||
        (blocks[i].streamId === streamId && blocks[i].size < key))
    ) i++;
    if (i === blocks.length || blocks[i].streamId !== streamId) {
      if (i === 0) return false;
      let released = 0;
      i--;
      while (
        released < key && i >= 0 && blocks[i].size >= maxSplit &&
        blocks[i].streamId === streamId
      ) {
        const b = blocks[i--];
        if (b.prev === null && b.next === null) {
          released += b.size;
          this.#releaseBlock(b);
        }
      }
      return released >= key;
    }
    const b = blocks[i];
    if (b.prev !== null || b.next !== null) return false;
    this.#releaseBlock(b);
    return true;
  }

  #releaseCachedBlocks(): void {
    if (this.#deferred.count > 0) this.#deferred.poll();
    for (const pool of this.#pools()) {
      const blocks = pool.all();
      for (let i = blocks.length - 1; i >= 0; i--) {
        const b = blocks[i];
        if (b.prev === null && b.next === null) this.#releaseBlock(b);
      }
      pool.prune(); // streams that hold nothing more keep no bins
    }
    for (const growing of this.#growing) {
      for (const seg of growing.values()) this.#shrinkSegment(seg);
    }
  }

  #garbageCollect(): void {
    const allowed = this.allowedBytes;
    if (!Number.isFinite(allowed)) return;
    const threshold = this.#gcThreshold * allowed;
    const reserved = this.#stats.reservedBytes;
    if (reserved <= threshold) return;
    const candidates: _Block<M>[] = [], ages: number[] = [];
    const sizes: number[] = [];
    for (const pool of this.#pools().reverse()) {
      for (const b of pool.all()) {
        if (b.prev === null && b.next === null) {
          candidates.push(b);
          ages.push(this.#clock - b.stamp);
          sizes.push(b.size);
        }
      }
    }
    collectByAge(candidates, ages, sizes, reserved - threshold, (b) => {
      this.#releaseBlock(b);
      return true;
    });
  }

  #throwOom(
    requested: number,
    size: number,
    stream: Stream,
    tag: string | undefined,
  ): never {
    this.#stats.numOoms++;
    const source = this.#source;
    const capacity = source.capacityBytes;
    const deviceReserved = (source as { reservedBytes?: unknown })
      .reservedBytes;
    const used = typeof deviceReserved === "number"
      ? deviceReserved
      : this.reservedBytes;
    const free = Math.max(0, capacity - used);
    const allocated = this.allocatedBytes;
    const reserved = this.reservedBytes;
    const unallocated = reserved - allocated;
    let pendingBytes = 0;
    this.#deferred.forEach((b) => {
      pendingBytes += b.size;
    });
    let largest = 0;
    for (const pool of this.#pools()) {
      for (const b of pool.all()) if (b.size > largest) largest = b.size;
    }
    if (this.#history !== null) {
      this.#record("oom", free, size, requested, stream.id, tag);
    }
    const allowed = this.allowedBytes;
    let message = `Cannot allocate ${requested} bytes: tried to allocate ${
      formatSize(size)
    } on ${this.device}, which ${
      Number.isFinite(capacity)
        ? `has a total capacity of ${formatSize(capacity)} of which ${
          formatSize(free)
        } is free`
        : "reports no capacity limit but refused the segment"
    }`;
    if (this.#fraction < 1) {
      message += `; this allocator may reserve ${
        formatSize(allowed)
      } (memory fraction ${this.#fraction})`;
    }
    message += `; of the allocated memory ${
      formatSize(allocated)
    } is allocated by this allocator, and ${
      formatSize(unallocated)
    } is reserved by this allocator but unallocated`;
    if (pendingBytes > 0) {
      message += `; ${
        formatSize(pendingBytes)
      } is freed but waits for fences of other streams (await synchronize() or use allocateAsync())`;
    }
    // Pending blocks count as reserved but unallocated: the cache itself
    // holds only the rest.
    const cached = unallocated - pendingBytes;
    if (pendingBytes > 0 && cached < size) {
      message += cached + pendingBytes >= size
        ? `; the memory is only waiting on fences, not fragmented: it returns once that work completes`
        : "";
    } else if (cached >= size) {
      message +=
        `; reserved but unallocated memory is large, so fragmentation is the likely cause: free long-lived blocks early, call emptyCache(), or set maxSplitByteLength to keep large blocks whole`;
    }
    throw new CachingOutOfMemoryError(message, {
      requestedBytes: size,
      requestedByteLength: requested,
      capacityBytes: capacity,
      freeBytes: free,
      largestFreeBytes: largest,
      allocatedBytes: allocated,
      reservedBytes: reserved,
      allowedBytes: allowed,
      pendingFreeBytes: pendingBytes,
    });
  }
}

/** A fence that throws counts as not complete: DeferredFrees reports it. */
function completedOrThrew(fence: Fence): boolean {
  try {
    return fence.completed === true;
  } catch {
    return false;
  }
}

function checkTag(tag: unknown): string {
  if (typeof tag !== "string") {
    throw new InvalidArgumentError(
      `Invalid tag: must be a string, received ${typeof tag}`,
      { name: "tag", value: tag },
    );
  }
  return tag;
}

// An id is `generation * ID_SLOTS + slot`, below 2^30 so that it stays a
// small integer (no heap number per id): 2^20 slots, 2^10 generations.
const ID_SLOT_BITS = 20;
const ID_SLOTS = 2 ** ID_SLOT_BITS;
const ID_GENERATIONS = 2 ** 10;
const FREE_SLOT_RESERVE = 256;
