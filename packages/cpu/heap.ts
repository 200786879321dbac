/**
 * {@linkcode CpuHeap}: an O(1) two-level segregated-fit (TLSF) allocator
 * inside one linear memory, with its metadata kept outside the managed bytes.
 *
 * @module
 */

import {
  AllotError,
  describeValue,
  DoubleFreeError,
  type HostMemory,
  InvalidArgumentError,
  isHostMemory,
  optionOr,
  OutOfMemoryError,
  type StatValues,
  UnsupportedOperationError,
  UseAfterFreeError,
  validateAlignment,
  validateByteLength,
} from "@allot/core";
import {
  formatStatsSummary,
  type MemorySummaryOptions,
  validateOptionKeys,
} from "@allot/core";
import { validateFlags, validateOptions } from "./_options.ts";
import { claimMemory, releaseMemory } from "./_claims.ts";
import { junkFill } from "./_fill.ts";
import { checkViewSpan, elementBytes, isBuiltInView } from "./_view.ts";
import { SmallIndex } from "./_small_index.ts";
import { ownedOffsets } from "./_owned_offsets.ts";
import { generalFree } from "./_general_free.ts";
import { _realBuffer, _realByteLength, _wasmBuffer } from "./_real_length.ts";

/** Default alignment of a {@linkcode CpuHeap}: one cache line (AVX-512 width). */
export const DEFAULT_ALIGNMENT = 64;
/** Alignment of a {@linkcode CpuHeap} made with `mobile: true`, as on PyTorch mobile. */
export const MOBILE_ALIGNMENT = 16;
/** Largest alignment a single request may ask for: one WebAssembly page. */
export const MAX_ALIGNMENT = 65536;

// Two-level segregated fit: 32 second-level classes per power of two.
const SL_LOG2 = 5;
const SL_COUNT = 1 << SL_LOG2;
const SL_MASK = SL_COUNT - 1;
const FL_COUNT = 27; // sizes in units up to 2^31 - 1
const LIST_COUNT = FL_COUNT * SL_COUNT;
const MAX_UNITS = 0x7fffffff;
// The "compact" and "first-fit" placements (README, "Footprint") treat small
// requests apart, so that small blocks gather low in the region instead of
// pinning the holes large blocks need; large requests keep TLSF's good fit.
// "compact": a request of fewer than SMALL_UNITS units (16 KiB at the
// default alignment) takes the lower-addressed of its good fit among the
// small classes and the lowest free block of at least SMALL_UNITS units (the
// chunk index); 2^8 units had the lowest footprints of 2^6 .. 2^10 on every
// trace family measured. "first-fit": a request of fewer than FIRST_FIT_UNITS
// units (64 KiB) takes the lowest-addressed free block that fits: the lower
// of the lowest fitting block shorter than FIRST_FIT_UNITS (the small index,
// _small_index.ts, which holds those blocks instead of the size-class lists)
// and the lowest block of the chunk index, which holds the longer ones; 2^10
// units had lower footprints than 2^8 on every family, at 0.9x the speed.
const SMALL_LOG2 = 8;
const SMALL_UNITS = 1 << SMALL_LOG2;
const FIRST_FIT_UNITS = 1 << 10;
// Classes of blocks shorter than SMALL_UNITS: those below this index...
const SMALL_CLASSES = (SMALL_LOG2 - SL_LOG2 + 1) << SL_LOG2;
// ...which fill these first-level classes.
const SMALL_FL_MASK = (1 << (SMALL_CLASSES >>> SL_LOG2)) - 1;
// Bits per word of the chunk index's bitmaps (Int32Array): a chunk's bit is
// in word chunk >>> WORD_LOG2, that word's bit in word chunk >>> 2 * WORD_LOG2.
const WORD_LOG2 = 5;
// #lgLow when no large block is free, and when it must be searched again.
const LOW_NONE = -1;
const LOW_UNKNOWN = -2;
// 2^31 less one largest alignment: a byte length or unit index at most this
// rounds up to any granule or alignment and stays an int32, so the fast
// paths may use integer (`>>>`, `&`) arithmetic.
const INT_ROUNDING_LIMIT = 0x7fff0000;

// Block records: one Int32Array, STRIDE slots per record. A record is named
// by the index of its first slot (a multiple of STRIDE), in every link, list
// head, hash bucket and chunk index entry, so a field is `rec[b + R_SIZE]`:
// no multiplication, which V8's older optimizing compiler (Node 20) checks
// for overflow on every access (README, "Where the time goes").
// Ids stay int32 up to 2^28 records (8 GiB of records, far past any heap).
const R_START = 0; // first unit (absolute: unit i is byte i * granule)
const R_SIZE = 1; // length in units
const R_PPREV = 2; // physical previous record, -1 at the region start
const R_PNEXT = 3; // physical next record, -1 at the region end
const R_FPREV = 4; // free-list previous record of a free block
// A used block keeps its slack there instead: block bytes less requested
// bytes, in [0, granule] (a granule only for a request of 0 bytes), so the
// requested length needs no array of its own.
const R_SLACK = R_FPREV;
const R_FNEXT = 5; // free-list next record (also links unused records)
const R_STATE = 6; // 0 unused record, 1 free block, 2 used block
const R_ALIGN = 7; // alignment of a used block, in units
// A free block keeps its size class there instead (the list it is on), so
// taking it off its list or moving it needs no mappingIndex() of its size;
// NO_CLASS for a block of the first-fit placement's small index.
const R_CLASS = R_ALIGN;
const NO_CLASS = -1;
const STRIDE = 8; // slots per record
// (_small_index.ts has copies of R_START, R_SIZE, R_FPREV and R_FNEXT.)
// Live-block hash: Fibonacci hashing of a block's start unit (2^32 divided by
// the golden ratio, odd); the table doubles when it holds more blocks than
// buckets.
const HASH_MULTIPLIER = 0x9e3779b1;
const INITIAL_BUCKETS_LOG2 = 8;
// Records made at first (the array doubles when they run out).
const INITIAL_RECORDS = 64;
const UNUSED = 0;
const FREE = 1;
const USED = 2;

/**
 * Where a {@linkcode CpuHeap} places blocks: a trade of speed for footprint
 * (the highest byte used over the peak of live requested bytes). Figures from
 * the package README ("Choosing a placement"): the log-uniform trace (16 B -
 * 1 MiB, ~1,000 live), seed 42 / the mean of seeds 1-12, and alloc+free speed
 * against the default (paired medians, warm instances, Deno / Node). On
 * traces of similar lifetimes (tensor-shaped) all three give the same
 * footprint.
 *
 * - `"good-fit"` (the default): every request takes TLSF's good fit (the
 *   first block of the first size class that surely fits). Fastest, most
 *   fragmentation: 1.171x / 1.158x peak live.
 * - `"compact"`: a small request (under 256 granules, 16 KiB at the default
 *   alignment) takes the lower-addressed of its good fit among the small size
 *   classes and the lowest-addressed free block of at least 256 granules, so
 *   small blocks gather low and leave the holes large blocks need; large
 *   requests take TLSF's good fit. 1.133x / 1.113x peak live at 0.81 - 0.82x
 *   / 0.82 - 0.85x the default's speed.
 * - `"first-fit"`: a request under 1,024 granules (64 KiB at the default
 *   alignment) takes the lowest-addressed free block that fits (exact first
 *   fit, found through an index of the free blocks under 1,024 granules by
 *   address); larger requests take TLSF's good fit. The least memory: 1.117x
 *   / 1.089x peak live at 0.51 - 0.58x / 0.44 - 0.54x the default's speed.
 */
export type CpuHeapPlacement = "compact" | "first-fit" | "good-fit";

/**
 * Constructors that {@linkcode CpuHeap.view} accepts: a typed-array
 * constructor (its `length` argument counts elements) or `DataView` (no
 * `BYTES_PER_ELEMENT`; its `length` argument counts bytes).
 */
export type TypedArrayConstructor<T> = {
  new (
    buffer: ArrayBuffer | SharedArrayBuffer,
    byteOffset: number,
    length: number,
  ): T;
  readonly BYTES_PER_ELEMENT?: number;
};

/** Options of {@linkcode CpuHeap}. */
export interface CpuHeapOptions {
  /**
   * Default alignment in bytes, a power of two in `[8, 65536]`; also the
   * granule every block length is a multiple of.
   *
   * @default {64 (16 when `mobile` is set)}
   */
  alignment?: number;
  /**
   * Use PyTorch's mobile alignment of 16 bytes instead of 64.
   *
   * @default {false}
   */
  mobile?: boolean;
  /**
   * First byte of the memory the heap manages (rounded up to the alignment),
   * for example to leave a WebAssembly module's static data alone.
   *
   * @default {0}
   */
  byteOffset?: number;
  /**
   * Number of bytes managed from `byteOffset` (rounded down to the
   * alignment).
   *
   * @default {the rest of the memory}
   */
  byteLength?: number;
  /**
   * Growth limit: the heap may grow its managed region up to this many bytes
   * when a request does not fit. The memory must be growable (a resizable
   * `ArrayBuffer`, a growable `SharedArrayBuffer` or a `WebAssembly.Memory`).
   * When the heap makes its own memory from a byte length, it makes a
   * resizable one if this is larger than the initial length.
   *
   * @default {the initial byteLength: no growth}
   */
  maxByteLength?: number;
  /**
   * When the heap makes its own memory, make a `SharedArrayBuffer` so Workers
   * can share it.
   *
   * @default {false}
   */
  shared?: boolean;
  /**
   * Where blocks go: `"good-fit"` (fastest, most memory), `"compact"` (about
   * 3% less memory at about 0.8x the speed) or `"first-fit"` (about 5% less
   * memory at about 0.5x the speed) on traces of mixed lifetimes; see
   * {@linkcode CpuHeapPlacement} for the measured figures. Any other value is
   * refused with an `InvalidArgumentError` that names it.
   *
   * @example First fit reuses the lowest hole that fits
   * ```ts
   * import { CpuHeap } from "@allot/cpu";
   * import assert from "node:assert/strict";
   *
   * for (const placement of ["good-fit", "first-fit"] as const) {
   *   const heap = new CpuHeap(1 << 20, { placement });
   *   const hole = heap.alloc(6464); // 101 granules of 64 bytes
   *   heap.alloc(64);
   *   heap.free(hole);
   *   // Good fit rounds 101 granules up to a size class the hole is not in.
   *   assert.equal(heap.alloc(6464), placement === "first-fit" ? 0 : 6528);
   * }
   * assert.throws(() => new CpuHeap(4096, { placement: "best" as "compact" }));
   * ```
   *
   * @default {"good-fit"}
   */
  placement?: CpuHeapPlacement;
  /**
   * Debug mode for hunting a bug: checks every invariant
   * ({@linkcode CpuHeap.checkIntegrity}, O(blocks)) after each call that
   * changes the heap and fills freed bytes with a junk pattern (`0x7fedbeef`,
   * a NaN as f32), so a stale view reads junk rather than plausible data.
   * Views cannot be detached here: they share the heap's one buffer.
   *
   * @default {false}
   */
  strict?: boolean;
}

/** The figures of {@linkcode CpuHeap.stats}. All byte figures are bytes. */
export interface CpuHeapStats {
  /** Bytes the callers asked for, in live blocks. */
  requestedBytes: StatValues;
  /** Bytes in live blocks (requests rounded up to the alignment). */
  allocatedBytes: StatValues;
  /** Live blocks. `allocated` counts allocations, `freed` counts frees. */
  allocations: StatValues;
  /** Bytes managed by the heap (grows when the heap grows). */
  reservedBytes: number;
  /** Bytes not in live blocks. */
  freeBytes: number;
  /** The largest request of default alignment that would succeed now. */
  largestFreeBytes: number;
  /** Number of free regions. */
  freeRegions: number;
  /** Highest byte ever used, relative to the region start (the footprint). */
  highWaterBytes: number;
  /** Requests refused for lack of memory. */
  outOfMemoryCount: number;
  /** Times the managed region grew. */
  growCount: number;
}

/** One block of {@linkcode CpuHeap.snapshot}. */
export interface CpuHeapBlock {
  /** Byte offset of the block in the memory. */
  byteOffset: number;
  /** Byte length of the block. */
  byteLength: number;
  /** Whether the block is free. */
  free: boolean;
  /** Bytes the caller asked for (0 for free blocks). */
  requestedBytes: number;
}

/**
 * The internal state of a heap was found inconsistent by
 * {@linkcode CpuHeap.checkIntegrity}.
 *
 * @example
 * ```ts
 * import { CpuHeap, HeapCorruptionError } from "@allot/cpu";
 * import assert from "node:assert/strict";
 *
 * const heap = new CpuHeap(1 << 16);
 * heap.free(heap.alloc(256));
 * try {
 *   heap.validate(); // O(blocks): for tests and bug hunts
 * } catch (error) {
 *   // a bug in the heap, never the caller's doing: report it
 *   assert.ok(error instanceof HeapCorruptionError);
 *   throw error;
 * }
 * ```
 */
export class HeapCorruptionError extends AllotError {}

// A fresh buffer of `byteLength` bytes (growable up to `max`): typed errors
// when the engine has no SharedArrayBuffer or refuses the bytes.
function newBuffer(
  byteLength: number,
  max: number,
  shared: boolean,
): ArrayBuffer | SharedArrayBuffer {
  if (shared && typeof SharedArrayBuffer === "undefined") {
    throw new UnsupportedOperationError(
      `Cannot make a shared heap of ${byteLength} bytes: SharedArrayBuffer is not available here (a browser page must be cross-origin isolated)`,
    );
  }
  const options = max > byteLength ? { maxByteLength: max } : undefined;
  try {
    return shared
      ? new SharedArrayBuffer(byteLength, options)
      : new ArrayBuffer(byteLength, options);
  } catch (error) {
    throw new OutOfMemoryError(
      `Cannot make a heap of ${byteLength} bytes: the engine refused ${
        shared ? "a SharedArrayBuffer" : "an ArrayBuffer"
      } of that length`,
      { requestedBytes: byteLength, capacityBytes: max },
      { cause: error },
    );
  }
}

function mappingIndex(units: number): number {
  if (units < SL_COUNT) return units;
  const t = 31 - Math.clz32(units);
  return ((t - SL_LOG2 + 1) << SL_LOG2) | ((units >>> (t - SL_LOG2)) & SL_MASK);
}

// Index of the first class whose every block is at least `units` long.
function searchIndex(units: number): number {
  if (units < SL_COUNT) return units;
  const t = 31 - Math.clz32(units);
  const rounded = units + (1 << (t - SL_LOG2)) - 1;
  if (rounded > MAX_UNITS) return LIST_COUNT;
  return mappingIndex(rounded);
}

function ctz(x: number): number {
  return 31 - Math.clz32(x & -x);
}

/**
 * An O(1) allocator inside one linear memory: a plain or resizable
 * `ArrayBuffer`, a `SharedArrayBuffer` or a `WebAssembly.Memory`. It is a
 * two-level segregated fit (TLSF) allocator: free blocks sit in 27 × 32 size
 * classes found with two bitmaps and `Math.clz32`, a free block merges with its
 * free neighbours at once, and the block records live in an `Int32Array`
 * outside the managed bytes, so the memory holds nothing but user data.
 *
 * `alloc` returns a byte offset into {@linkcode CpuHeap.memory}; the hot path
 * allocates no objects. Make typed-array views on demand with
 * {@linkcode CpuHeap.view}, which always reads the current buffer.
 *
 * A request that fits in the largest free region always succeeds (no false
 * out-of-memory): when the constant-time search misses, the heap scans the one
 * size class that may still hold a fitting block.
 *
 * Growth: with `maxByteLength`, a request that does not fit grows the memory.
 * A resizable `ArrayBuffer` or growable `SharedArrayBuffer` keeps its identity,
 * and views made before stay valid. A `WebAssembly.Memory` replaces its
 * buffer, which detaches an `ArrayBuffer`'s old views: after a growth
 * {@linkcode CpuHeap.generation} increases, and views must be made again with
 * {@linkcode CpuHeap.view}. Keep (heap, byteOffset), not views, across
 * allocations.
 *
 * @example Allocate, view, free
 * ```ts
 * import { CpuHeap } from "@allot/cpu";
 * import assert from "node:assert/strict";
 *
 * const heap = new CpuHeap(1 << 20);
 * const a = heap.alloc(1000);
 * assert.equal(a % 64, 0);
 * const floats = heap.view(a, Float32Array); // 250 elements
 * floats.fill(1.5);
 * heap.free(a);
 * assert.equal(heap.allocatedBytes, 0);
 * assert.equal(heap.largestFreeBytes, 1 << 20);
 * ```
 */
export class CpuHeap {
  // Offsets a CpuAllocator owns: refused by free/realloc/resizeInPlace
  // (see _owned_offsets.ts); null while no allocator uses this heap.
  // One bit per granule (indexed by byteOffset >>> #shift), grown on demand.
  #owned: Uint32Array | null = null;

  static {
    ownedOffsets.mark = (heap, byteOffset) => {
      const unit = byteOffset >>> heap.#shift;
      let owned = heap.#owned;
      if (owned === null || (unit >>> 5) >= owned.length) {
        const grown = new Uint32Array(
          Math.max(64, (unit >>> 5) + 1, (owned?.length ?? 0) * 2),
        );
        if (owned !== null) grown.set(owned);
        heap.#owned = owned = grown;
      }
      owned[unit >>> 5] |= 1 << (unit & 31);
    };
    // For the differential test of free()'s written-out path: the same
    // free through #release.
    generalFree.free = (heap, byteOffset) => {
      const inline = heap.#inlineFree;
      heap.#inlineFree = false;
      try {
        heap.free(byteOffset);
      } finally {
        heap.#inlineFree = inline;
      }
    };
    ownedOffsets.unmark = (heap, byteOffset) => {
      const unit = byteOffset >>> heap.#shift;
      const owned = heap.#owned!;
      const bit = 1 << (unit & 31);
      const word = owned[unit >>> 5];
      owned[unit >>> 5] = word & ~bit;
      return (word & bit) !== 0;
    };
  }

  /** The memory the heap manages. */
  readonly memory: HostMemory;
  /** Default alignment in bytes, also the granule of every block length. */
  readonly alignment: number;
  /** Largest byte length the managed region may grow to. */
  readonly maxByteLength: number;
  /** Where blocks go (see {@linkcode CpuHeapPlacement}). */
  readonly placement: CpuHeapPlacement;

  #shift: number;
  #granuleMask: number;
  #isWasm: boolean;
  #buffer: ArrayBuffer | SharedArrayBuffer;
  #generation = 0;
  #startUnit: number;
  #endUnit: number;
  #maxEndUnit: number;

  #rec: Int32Array;
  #recCount = 0;
  #unusedHead = -1;
  #last = -1; // physically last record

  #heads = new Int32Array(LIST_COUNT).fill(-1);
  // Chunk index (compact and first-fit placements): the record of the free
  // block of at least #largeUnits units whose last unit lies in each chunk,
  // with stale entries dropped lazily; one bit per chunk, one per 32-chunk
  // word.
  #lgRecs = new Int32Array(0);
  #lgBits = new Int32Array(0);
  #lgWords = new Int32Array(0);
  #lgLow = LOW_NONE; // lowest chunk with a live entry
  #lgLowRec = -1; // its record while #lgLow >= 0
  #lgFrom = 0; // while LOW_UNKNOWN: no live entry lies below this word
  // First-fit placement: the free blocks shorter than FIRST_FIT_UNITS, by
  // address.
  #small = new SmallIndex();
  // Small requests are shorter than this many units; blocks of at least
  // #largeUnits (of class #largeClass and above) are in the chunk index.
  // SMALL_UNITS for compact, FIRST_FIT_UNITS for first-fit; for good-fit 0
  // and LIST_COUNT (no small requests, no large blocks indexed).
  #smallUnits = SMALL_UNITS;
  #largeUnits = SMALL_UNITS;
  #largeClass = SMALL_CLASSES;
  // FIRST_FIT_UNITS for the first-fit placement, whose free blocks shorter
  // than that live in the small index instead of the size-class lists; else 0.
  #smallFree = 0;
  // Whether free() takes its written-out path (good fit and compact; first
  // fit's small index needs #release). A field of its own so that the
  // differential test can send a free through #release (_general_free.ts).
  #inlineFree = true;
  #flBitmap = 0;
  #slBitmap = new Int32Array(FL_COUNT);
  #freeRegions = 0;

  // Start unit -> record of every used block: a chained hash table whose
  // chains run through the free-list link of used records (unused by them).
  #buckets = new Int32Array(1 << INITIAL_BUCKETS_LOG2).fill(-1);
  #bucketShift = 32 - INITIAL_BUCKETS_LOG2;
  #liveCount = 0;

  // Stats as plain numbers (cheaper on the hot paths than Stat objects):
  // current, peak and cumulative total of requested bytes, block bytes and
  // blocks; what was freed is total - current.
  #reqNow = 0;
  #reqPeak = 0;
  #reqTotal = 0;
  #usedNow = 0;
  #usedPeak = 0;
  #usedTotal = 0;
  #liveNow = 0;
  #livePeak = 0;
  #liveTotal = 0;
  #highWater = 0;
  #ooms = 0;
  #grows = 0;
  #largestCache = -1;
  #disposed = false;
  #growing = false; // inside the memory's grow or resize

  /**
   * Creates a heap over a memory, or over a new `ArrayBuffer` of the given
   * byte length.
   *
   * @param memory The memory to manage, or a byte length for a new one.
   * @param options Alignment, managed range and growth limit.
   * @throws {InvalidArgumentError} For a bad alignment, range or growth limit.
   */
  constructor(memory: HostMemory | number, options: CpuHeapOptions = {}) {
    validateOptions(options);
    validateOptionKeys(options, CPU_HEAP_OPTION_KEYS, "CpuHeap");
    const flags = validateFlags(options, "mobile", "shared", "strict");
    const alignment = validateAlignment(
      optionOr(
        options.alignment,
        flags.mobile ? MOBILE_ALIGNMENT : DEFAULT_ALIGNMENT,
      ),
      MAX_ALIGNMENT,
    );
    if (alignment < 8) {
      throw new InvalidArgumentError(
        `Invalid alignment: must be at least 8, received ${alignment}`,
        { name: "alignment", value: alignment, limit: 8 },
      );
    }
    this.alignment = alignment;
    const placement = optionOr(options.placement, "good-fit");
    if (
      placement !== "compact" && placement !== "good-fit" &&
      placement !== "first-fit"
    ) {
      throw new InvalidArgumentError(
        `Invalid placement: must be "good-fit", "compact" or "first-fit", received ${
          describeValue(placement)
        }`,
        { name: "placement", value: placement },
      );
    }
    this.placement = placement;
    if (placement === "good-fit") {
      this.#smallUnits = 0;
      this.#largeClass = LIST_COUNT;
    } else if (placement === "first-fit") {
      this.#smallUnits = FIRST_FIT_UNITS;
      this.#largeUnits = FIRST_FIT_UNITS;
      this.#largeClass = mappingIndex(FIRST_FIT_UNITS);
      this.#smallFree = FIRST_FIT_UNITS;
      this.#inlineFree = false;
    }
    this.#shift = 31 - Math.clz32(alignment);
    this.#granuleMask = alignment - 1;
    const maxUnitBytes = MAX_UNITS * alignment;
    // Read once: a getter answering the buffer's check one value and the
    // heap's growth limit another would make two different heaps.
    const maxOption = options.maxByteLength;
    if (typeof memory === "number") {
      validateByteLength(memory, maxUnitBytes, "byteLength");
      const max = optionOr(maxOption, memory);
      validateByteLength(max, maxUnitBytes, "maxByteLength");
      if (max < memory) {
        throw new InvalidArgumentError(
          `Invalid maxByteLength: must be at least the byteLength ${memory}, received ${max}`,
          { name: "maxByteLength", value: max, limit: memory },
        );
      }
      memory = newBuffer(memory, max, flags.shared);
    } else if (!isHostMemory(memory)) {
      throw new InvalidArgumentError(
        `Invalid memory: must be an ArrayBuffer, SharedArrayBuffer or WebAssembly.Memory, received ${
          Object.prototype.toString.call(memory)
        }`,
        { name: "memory", value: memory },
      );
    }
    this.memory = memory;
    this.#isWasm = !(memory instanceof ArrayBuffer) &&
      !(typeof SharedArrayBuffer !== "undefined" &&
        memory instanceof SharedArrayBuffer);
    // The engine's own length, not a subclass's byteLength (or a
    // WebAssembly.Memory subclass's buffer): the heap hands out what it reads.
    this.#buffer = _realBuffer(memory);
    const bufferLength = _realByteLength(this.#buffer);
    const begin = validateByteLength(
      optionOr(options.byteOffset, 0),
      bufferLength,
      "byteOffset",
    );
    const startUnit = Math.ceil(begin / alignment);
    const length = validateByteLength(
      optionOr(options.byteLength, bufferLength - begin),
      bufferLength - begin,
      "byteLength",
    );
    const endUnit = Math.floor((begin + length) / alignment);
    this.#startUnit = startUnit;
    this.#endUnit = Math.max(startUnit, endUnit);
    const initialBytes = (this.#endUnit - startUnit) * alignment;
    const maxBytes = optionOr(maxOption, initialBytes);
    validateByteLength(maxBytes, maxUnitBytes, "maxByteLength");
    if (maxBytes > initialBytes) {
      const growable = this.#isWasm ||
        (this.#buffer as ArrayBuffer).resizable === true ||
        (this.#buffer as SharedArrayBuffer).growable === true;
      if (!growable) {
        throw new InvalidArgumentError(
          `Invalid maxByteLength: the memory cannot grow (not resizable), received ${maxBytes} for ${initialBytes} managed bytes`,
          { name: "maxByteLength", value: maxBytes, limit: initialBytes },
        );
      }
      if (
        !this.#isWasm &&
        begin + maxBytes > (this.#buffer as ArrayBuffer).maxByteLength
      ) {
        const limit = (this.#buffer as ArrayBuffer).maxByteLength - begin;
        throw new InvalidArgumentError(
          `Invalid maxByteLength: must be at most ${limit} (the buffer's maxByteLength past byteOffset), received ${maxBytes}`,
          { name: "maxByteLength", value: maxBytes, limit },
        );
      }
    }
    this.maxByteLength = Math.max(initialBytes, maxBytes);
    this.#maxEndUnit = startUnit + Math.floor(this.maxByteLength / alignment);
    claimMemory(
      memory,
      startUnit * alignment,
      this.#maxEndUnit * alignment,
      this,
    );
    if (flags.strict) _makeStrict(this);
    this.#rec = new Int32Array(INITIAL_RECORDS * STRIDE);
    this.#lgResize(this.#chunkCount());
    if (this.#endUnit > startUnit) {
      const b = this.#newRecord();
      const rec = this.#rec;
      rec[b + R_START] = startUnit;
      rec[b + R_SIZE] = this.#endUnit - startUnit;
      rec[b + R_PPREV] = -1;
      rec[b + R_PNEXT] = -1;
      this.#last = b;
      this.#insertFree(b);
    }
  }

  /**
   * The current buffer of the memory. For a `WebAssembly.Memory` this is a
   * new object after each growth; read it again rather than keeping it.
   */
  get buffer(): ArrayBuffer | SharedArrayBuffer {
    if (this.#isWasm) this.#refreshBuffer();
    return this.#buffer;
  }

  /**
   * Increases each time the memory's buffer object is replaced (a
   * `WebAssembly.Memory` that grew); views made at an older generation must be
   * made again.
   */
  get generation(): number {
    if (this.#isWasm) this.#refreshBuffer();
    return this.#generation;
  }

  /** Byte offset of the first managed byte. */
  get byteOffset(): number {
    return this.#startUnit * this.alignment;
  }

  /** Bytes managed now (the reserved bytes). */
  get byteLength(): number {
    return (this.#endUnit - this.#startUnit) * this.alignment;
  }

  /** Bytes in live blocks, including rounding to the alignment. */
  get allocatedBytes(): number {
    return this.#usedNow;
  }

  /**
   * Same as `allocatedBytes`.
   *
   * @deprecated Use `allocatedBytes` (one name per figure across allot); removed in the next minor version.
   */
  get bytesInUse(): number {
    return this.allocatedBytes;
  }

  /** Bytes the callers asked for, in live blocks. */
  get requestedBytes(): number {
    return this.#reqNow;
  }

  /** Bytes not in live blocks. */
  get freeBytes(): number {
    return this.byteLength - this.#usedNow;
  }

  /** Number of live blocks. */
  get allocationCount(): number {
    return this.#liveNow;
  }

  /** Number of free regions. */
  get freeRegionCount(): number {
    return this.#freeRegions;
  }

  /** Highest byte ever used, relative to the region start. */
  get highWaterBytes(): number {
    return this.#highWater;
  }

  /**
   * Length of the largest free region: the largest request of default
   * alignment that succeeds now (without growth). Exact; it reads the bitmaps
   * and scans only the list of the highest non-empty size class, and is
   * cached until the next change.
   */
  get largestFreeBytes(): number {
    if (this.#largestCache >= 0) return this.#largestCache;
    let largest = 0;
    if (this.#flBitmap !== 0) {
      const fl = 31 - Math.clz32(this.#flBitmap);
      const sl = 31 - Math.clz32(this.#slBitmap[fl]);
      const rec = this.#rec;
      for (
        let b = this.#heads[(fl << SL_LOG2) | sl];
        b >= 0;
        b = rec[b + R_FNEXT]
      ) {
        const size = rec[b + R_SIZE];
        if (size > largest) largest = size;
      }
    } else if (this.#smallFree !== 0) largest = this.#small.largest(this.#rec);
    this.#largestCache = largest * this.alignment;
    return this.#largestCache;
  }

  /**
   * Allocates `byteLength` bytes and returns their byte offset in
   * {@linkcode CpuHeap.memory}. Zero bytes still get a distinct block of one
   * granule.
   *
   * @param byteLength Number of bytes.
   * @param alignment A power of two up to 65536; the heap's alignment when
   * omitted.
   * @returns The byte offset of the block, a multiple of the alignment.
   * @throws {InvalidArgumentError} For a bad length or alignment.
   * @throws {OutOfMemoryError} When no free region fits, even after growth;
   * it states the request, the free bytes and the largest free region.
   */
  alloc(byteLength: number, alignment?: number): number {
    // Fast path, written out by hand so that it compiles to one function:
    // default alignment, a length below 2 GiB, a good-fit block at hand.
    if (
      alignment === undefined && typeof byteLength === "number" &&
      (byteLength >>> 0) === byteLength && byteLength <= INT_ROUNDING_LIMIT
    ) {
      const units = byteLength === 0 ? 1 : (byteLength + this.#granuleMask) >>
        this.#shift;
      let idx = units;
      if (units >= SL_COUNT) {
        const t = 31 - Math.clz32(units);
        const rounded = units + (1 << (t - SL_LOG2)) - 1;
        const t2 = 31 - Math.clz32(rounded);
        idx = ((t2 - SL_LOG2 + 1) << SL_LOG2) |
          ((rounded >>> (t2 - SL_LOG2)) & SL_MASK);
      }
      let b = -1;
      if (units < this.#smallUnits) {
        b = this.#smallFree !== 0
          ? this.#firstFit(units)
          : this.#findSmall(idx);
      } else {
        const sl = this.#slBitmap;
        let fl = idx >> SL_LOG2;
        let bits = sl[fl] & (-1 << (idx & SL_MASK));
        if (bits === 0) {
          const flBits = this.#flBitmap & (-1 << (fl + 1));
          if (flBits !== 0) {
            fl = 31 - Math.clz32(flBits & -flBits);
            bits = sl[fl];
          }
        }
        if (bits !== 0) {
          b = this.#heads[(fl << SL_LOG2) | (31 - Math.clz32(bits & -bits))];
        }
      }
      carve: if (b >= 0) {
        const rec = this.#rec;
        const start = rec[b + R_START];
        const size = rec[b + R_SIZE];
        let u = b;
        if (size === units) {
          this.#removeFree(b);
        } else {
          // Carve the block off the front of b; b keeps the rest, and its
          // list unless the class changes. The new block's record comes off
          // the unused list; with none there, the general path makes more
          // (no call from here: one fewer inlining candidate, see README).
          u = this.#unusedHead;
          if (u < 0) break carve;
          this.#unusedHead = rec[u + R_FNEXT];
          const prev = rec[b + R_PPREV];
          rec[u + R_START] = start;
          rec[u + R_SIZE] = units;
          rec[u + R_PPREV] = prev;
          rec[u + R_PNEXT] = b;
          if (prev >= 0) rec[prev + R_PNEXT] = u;
          rec[b + R_PPREV] = u;
          const rest = size - units;
          if (rest < this.#smallFree) {
            // First-fit placement: the rest is small.
            if (size >= this.#smallFree) {
              this.#resizeFree(b, start + units, rest);
            } else {
              // It keeps its end, so its small index entry.
              rec[b + R_START] = start + units;
              rec[b + R_SIZE] = rest;
              this.#largestCache = -1;
              this.#small.resized(
                rec,
                start + size - 1 - this.#startUnit,
                size,
                rest,
              );
            }
          } else {
            const from = rec[b + R_CLASS];
            const to = mappingIndex(rest);
            rec[b + R_START] = start + units;
            rec[b + R_SIZE] = rest;
            if (from === to) this.#largestCache = -1;
            else {
              // The end stays: so does the chunk index entry, while large.
              this.#relink(b, from, to);
              if (b === this.#lgLowRec && to < SMALL_CLASSES) this.#lgDrop();
            }
          }
        }
        rec[u + R_STATE] = USED;
        rec[u + R_ALIGN] = 1; // in units: the heap's own alignment
        rec[u + R_SLACK] = units * this.alignment - byteLength;
        this.#liveSet(start, u);
        const g = this.alignment;
        const req = this.#reqNow + byteLength;
        this.#reqNow = req;
        this.#reqTotal += byteLength;
        if (req > this.#reqPeak) this.#reqPeak = req;
        const bytes = units * g;
        const used = this.#usedNow + bytes;
        this.#usedNow = used;
        this.#usedTotal += bytes;
        if (used > this.#usedPeak) this.#usedPeak = used;
        const live = this.#liveNow + 1;
        this.#liveNow = live;
        this.#liveTotal++;
        if (live > this.#livePeak) this.#livePeak = live;
        const hw = (start + units - this.#startUnit) * g;
        if (hw > this.#highWater) this.#highWater = hw;
        return start * g;
      }
    }
    const offset = this.tryAlloc(byteLength, alignment);
    if (offset === undefined) throw this.#outOfMemory(byteLength, alignment);
    return offset;
  }

  /**
   * Like {@linkcode CpuHeap.alloc}, but returns `undefined` when memory runs
   * out.
   *
   * @param byteLength Number of bytes.
   * @param alignment A power of two up to 65536.
   * @returns The byte offset, or `undefined` when out of memory.
   * @throws {InvalidArgumentError} For a bad length or alignment.
   */
  tryAlloc(byteLength: number, alignment?: number): number | undefined {
    if (this.#disposed) this.#refuseDisposed("allocate");
    if (
      typeof byteLength !== "number" || (byteLength >>> 0) !== byteLength ||
      byteLength > 0x7fffffff
    ) {
      validateByteLength(byteLength);
    }
    let a = 1;
    if (alignment !== undefined && alignment !== this.alignment) {
      if (
        typeof alignment !== "number" ||
        alignment <= 0 || alignment > MAX_ALIGNMENT ||
        (alignment & (alignment - 1)) !== 0 || (alignment | 0) !== alignment
      ) {
        this.#badAlignment(byteLength, alignment);
      }
      if (alignment > this.alignment) a = alignment >>> this.#shift;
    }
    let units = byteLength <= INT_ROUNDING_LIMIT
      ? (byteLength + this.alignment - 1) >>> this.#shift
      : Math.ceil(byteLength / this.alignment);
    if (units === 0) units = 1;
    if (units + a - 1 > MAX_UNITS) {
      this.#ooms++;
      return undefined;
    }
    let b = this.#find(units, a);
    if (b < 0) {
      if (!this.#grow(units, a) || (b = this.#find(units, a)) < 0) {
        this.#ooms++;
        return undefined;
      }
    }
    return this.#take(b, units, a, byteLength);
  }

  /**
   * Frees the block at `byteOffset` and merges it with its free neighbours.
   *
   * @param byteOffset A byte offset returned by this heap and not yet freed.
   * @throws {InvalidArgumentError} When `byteOffset` is not a non-negative
   * integer.
   * @throws {DoubleFreeError} When no live block of this heap starts at
   * `byteOffset` (freed twice, or never allocated here); nothing changes.
   */
  free(byteOffset: number): void {
    if (this.#owned !== null) this.#refuseOwned(byteOffset, "free");
    // The live-block lookup is written here rather than in a helper (free is
    // its only caller): Node 20's optimizing compiler charges every inlined
    // helper's bytecode to one budget per function (920 bytes), and a
    // helper left over is a real call.
    const unit = typeof byteOffset === "number" &&
        (byteOffset >>> 0) === byteOffset &&
        (byteOffset & this.#granuleMask) === 0
      ? (byteOffset >>> this.#shift) | 0
      : this.#rec[this.#lookupSlow(byteOffset, "free") + R_START];
    // Take the block off its hash chain.
    const rec = this.#rec;
    const h = Math.imul(unit, HASH_MULTIPLIER) >>> this.#bucketShift;
    let b = this.#buckets[h];
    if (b >= 0 && rec[b + R_START] === unit) {
      this.#buckets[h] = rec[b + R_FNEXT];
    } else {
      let chain = b;
      b = -1;
      while (chain >= 0) {
        const next = rec[chain + R_FNEXT];
        if (next >= 0 && rec[next + R_START] === unit) {
          rec[chain + R_FNEXT] = rec[next + R_FNEXT];
          b = next;
          break;
        }
        chain = next;
      }
      // Throws: no live block starts there.
      if (b < 0) this.#lookupSlow(byteOffset, "free");
    }
    this.#liveCount--;
    const size = rec[b + R_SIZE];
    const bytes = size * this.alignment;
    this.#reqNow -= bytes - rec[b + R_SLACK];
    this.#usedNow -= bytes;
    this.#liveNow--;
    if (!this.#inlineFree) {
      // First fit: its small index too (#release).
      this.#release(b);
      return;
    }
    // Good fit and compact: #release written out with its list moves, so
    // that a free makes no call but on compact's chunk index, whatever the
    // caller's inlining budget (README, "Fast paths"): a merge moves the kept
    // neighbour to the list of its new class only when the class changes.
    const prev = rec[b + R_PPREV];
    const next = rec[b + R_PNEXT];
    const prevFree = prev >= 0 && rec[prev + R_STATE] === FREE;
    const nextFree = next >= 0 && rec[next + R_STATE] === FREE;
    const heads = this.#heads;
    const sl = this.#slBitmap;
    if (!prevFree && !nextFree) {
      const idx = mappingIndex(size);
      const head = heads[idx];
      rec[b + R_STATE] = FREE;
      rec[b + R_CLASS] = idx;
      rec[b + R_FPREV] = -1;
      rec[b + R_FNEXT] = head;
      if (head >= 0) rec[head + R_FPREV] = b;
      else {
        const fl = idx >>> SL_LOG2;
        sl[fl] |= 1 << (idx & SL_MASK);
        this.#flBitmap |= 1 << fl;
      }
      heads[idx] = b;
      this.#freeRegions++;
      this.#largestCache = -1;
      // Compact: a large block goes in the chunk index (good fit's
      // #largeClass is past every class).
      if (idx >= this.#largeClass) {
        this.#lgPut(
          (rec[b + R_START] + size - 1 - this.#startUnit) >>> SMALL_LOG2,
          b,
        );
      }
      return;
    }
    // The neighbour that keeps its record: the previous block when free,
    // else the next; b's record (and the next one's, merged into the
    // previous) goes to the unused list.
    let keep = next;
    let total = size;
    if (prevFree) {
      keep = prev;
      total += rec[prev + R_SIZE];
      let after = next;
      if (nextFree) {
        // Take the next block off its list.
        const fp = rec[next + R_FPREV];
        const fn = rec[next + R_FNEXT];
        if (fn >= 0) rec[fn + R_FPREV] = fp;
        if (fp >= 0) rec[fp + R_FNEXT] = fn;
        else {
          const idx = rec[next + R_CLASS];
          heads[idx] = fn;
          if (fn < 0) {
            const fl = idx >>> SL_LOG2;
            const bits = sl[fl] & ~(1 << (idx & SL_MASK));
            sl[fl] = bits;
            if (bits === 0) this.#flBitmap &= ~(1 << fl);
          }
        }
        this.#freeRegions--;
        total += rec[next + R_SIZE];
        after = rec[next + R_PNEXT];
        rec[next + R_STATE] = UNUSED;
        rec[next + R_FNEXT] = this.#unusedHead;
        this.#unusedHead = next;
      }
      rec[prev + R_PNEXT] = after;
      if (after >= 0) rec[after + R_PPREV] = prev;
      else this.#last = prev;
    } else {
      total += rec[next + R_SIZE];
      rec[next + R_START] = rec[b + R_START];
      rec[next + R_PPREV] = prev;
      if (prev >= 0) rec[prev + R_PNEXT] = next;
    }
    rec[b + R_STATE] = UNUSED;
    rec[b + R_FNEXT] = this.#unusedHead;
    this.#unusedHead = b;
    rec[keep + R_SIZE] = total;
    this.#largestCache = -1;
    const from = rec[keep + R_CLASS];
    const to = mappingIndex(total);
    // Compact: the chunk index, when the kept block is large now (good fit's
    // #largeClass is past every class). Only a large block can be the cached
    // lowest, and a merged block only grows: one test covers every case.
    if (to >= this.#largeClass) {
      this.#lgMerged(keep, keep === prev, from);
    }
    if (from === to) return;
    // Move the kept block from list `from` to list `to`.
    const fp = rec[keep + R_FPREV];
    const fn = rec[keep + R_FNEXT];
    if (fn >= 0) rec[fn + R_FPREV] = fp;
    if (fp >= 0) rec[fp + R_FNEXT] = fn;
    else {
      heads[from] = fn;
      if (fn < 0) {
        const fl = from >>> SL_LOG2;
        const bits = sl[fl] & ~(1 << (from & SL_MASK));
        sl[fl] = bits;
        if (bits === 0) this.#flBitmap &= ~(1 << fl);
      }
    }
    const head = heads[to];
    rec[keep + R_CLASS] = to;
    rec[keep + R_FPREV] = -1;
    rec[keep + R_FNEXT] = head;
    if (head >= 0) rec[head + R_FPREV] = keep;
    else {
      const fl = to >>> SL_LOG2;
      sl[fl] |= 1 << (to & SL_MASK);
      this.#flBitmap |= 1 << fl;
    }
    heads[to] = keep;
  }

  /**
   * Byte length usable at `byteOffset`: the request rounded up to the
   * alignment.
   *
   * @param byteOffset A live block's byte offset.
   * @returns The usable byte length.
   * @throws {UseAfterFreeError} When no live block starts at `byteOffset`.
   */
  usableByteLength(byteOffset: number): number {
    const b = this.#lookup(byteOffset, "read");
    return this.#rec[b + R_SIZE] * this.alignment;
  }

  /**
   * Whether a live block of this heap starts at `byteOffset`.
   *
   * @param byteOffset Any number.
   * @returns `true` for the offset of a live block.
   */
  owns(byteOffset: number): boolean {
    return Number.isInteger(byteOffset) &&
      byteOffset % this.alignment === 0 &&
      this.#liveGet(byteOffset / this.alignment) >= 0;
  }

  /**
   * Resizes the block at `byteOffset` without moving it, when the block or
   * its free next neighbour has room.
   *
   * @param byteOffset A live block's byte offset.
   * @param byteLength The new byte length.
   * @returns `true` when resized; `false` (nothing changed) when it must move.
   * @throws {InvalidArgumentError} For a bad length.
   * @throws {UseAfterFreeError} When no live block starts at `byteOffset`.
   */
  resizeInPlace(byteOffset: number, byteLength: number): boolean {
    if (this.#owned !== null) this.#refuseOwned(byteOffset, "resize");
    const b = this.#lookup(byteOffset, "resize");
    validateByteLength(byteLength);
    let units = Math.ceil(byteLength / this.alignment);
    if (units === 0) units = 1;
    const rec = this.#rec;
    const size = rec[b + R_SIZE];
    const g = this.alignment;
    const oldRequested = this.#requested(b);
    if (units <= size) {
      if (units < size) {
        this.#giveTail(b, size - units);
        rec[b + R_SIZE] = units;
        this.#usedNow -= (size - units) * g;
      }
    } else {
      const next = rec[b + R_PNEXT];
      if (next < 0 || rec[next + R_STATE] !== FREE) return false;
      const nextSize = rec[next + R_SIZE];
      const more = units - size;
      if (more > nextSize) return false;
      this.#removeFree(next);
      if (more === nextSize) {
        const after = rec[next + R_PNEXT];
        rec[b + R_PNEXT] = after;
        if (after >= 0) rec[after + R_PPREV] = b;
        else this.#last = b;
        this.#freeRecord(next);
      } else {
        rec[next + R_START] += more;
        rec[next + R_SIZE] = nextSize - more;
        this.#insertFree(next);
      }
      rec[b + R_SIZE] = units;
      this.#addUsed(more * g);
      this.#bumpHighWater(rec[b + R_START] + units);
    }
    this.#reqNow -= oldRequested;
    this.#addRequested(byteLength);
    // #giveTail may have replaced the records array: read it again.
    this.#rec[b + R_SLACK] = units * g - byteLength;
    return true;
  }

  /**
   * Changes the length of the block at `byteOffset`, in place when it can
   * (shrinking, or growing into a free next neighbour), otherwise by
   * allocating a new block with the same alignment, copying and freeing the
   * old one.
   *
   * @param byteOffset A live block's byte offset.
   * @param byteLength The new byte length.
   * @returns The byte offset of the block, new or unchanged.
   * @throws {InvalidArgumentError} For a bad length.
   * @throws {UseAfterFreeError} When no live block starts at `byteOffset`.
   * @throws {OutOfMemoryError} When the block must move and no region fits;
   * the old block is unchanged.
   */
  realloc(byteOffset: number, byteLength: number): number {
    if (this.resizeInPlace(byteOffset, byteLength)) return byteOffset;
    const b = this.#lookup(byteOffset, "resize");
    const alignment = this.#rec[b + R_ALIGN] * this.alignment;
    const oldLength = this.#requested(b);
    const to = this.alloc(byteLength, alignment);
    const buffer = this.buffer;
    const bytes = new Uint8Array(buffer);
    bytes.copyWithin(
      to,
      byteOffset,
      byteOffset + Math.min(oldLength, byteLength),
    );
    this.free(byteOffset);
    return to;
  }

  /**
   * A typed-array view of the live block at `byteOffset`, over the current
   * buffer: as many elements as fit in the bytes that were requested. Views of
   * a `WebAssembly.Memory` go stale when it grows; make them again when
   * {@linkcode CpuHeap.generation} changes.
   *
   * @typeParam T The typed array type.
   * @param byteOffset A live block's byte offset.
   * @param type The typed-array constructor, such as `Float32Array`.
   * @returns A view of the block.
   * @throws {UseAfterFreeError} When no live block starts at `byteOffset`,
   * or the memory no longer holds the bytes (detached, transferred or shrunk
   * outside the heap).
   * @throws {InvalidArgumentError} When `type` is not a constructor, or
   * makes a view that is not of the block's bytes (a subclass that lies about
   * its element size or ignores its arguments).
   *
   * @example View as floats
   * ```ts
   * import { CpuHeap } from "@allot/cpu";
   * import assert from "node:assert/strict";
   *
   * const heap = new CpuHeap(4096);
   * const at = heap.alloc(16);
   * heap.view(at, Float32Array).set([1, 2, 3, 4]);
   * assert.equal(heap.view(at, Float32Array)[3], 4);
   * heap.free(at);
   * assert.throws(() => heap.view(at, Float32Array));
   * ```
   */
  view<T>(byteOffset: number, type: TypedArrayConstructor<T>): T {
    const b = this.#lookup(byteOffset, "view");
    const length = Math.floor(this.#requested(b) / elementBytes(type));
    const buffer = this.#isWasm ? this.buffer : this.#buffer;
    try {
      const view = new type(buffer, byteOffset, length);
      // A caller's own type may lie about its element size, ignore its
      // arguments or free the block: what it made is checked.
      if (isBuiltInView(type)) return view;
      this.#checkView(view, type, buffer, byteOffset);
      return view;
    } catch (error) {
      if (error instanceof AllotError) throw error;
      throw this.#viewError(error, buffer, byteOffset, this.#requested(b));
    }
  }

  // What a caller's view type made: a view of the block's requested bytes
  // at most, of a block still live (the constructor may have freed it).
  #checkView(
    view: unknown,
    type: unknown,
    buffer: ArrayBuffer | SharedArrayBuffer,
    byteOffset: number,
  ): void {
    const b = this.#lookup(byteOffset, "view");
    checkViewSpan(view, type, buffer, byteOffset, this.#requested(b));
  }

  /**
   * A `Uint8Array` over the first `byteLength` bytes of the live block at
   * `byteOffset`, over the current buffer.
   *
   * @param byteOffset A live block's byte offset.
   * @param byteLength Number of bytes, at most the block's usable length
   * ({@linkcode CpuHeap.usableByteLength}).
   * @returns The bytes.
   * @throws {UseAfterFreeError} When no live block starts at `byteOffset`,
   * or the memory no longer holds the bytes (detached, transferred or shrunk
   * outside the heap).
   * @throws {InvalidArgumentError} When `byteLength` is not an integer or
   * reaches past the block.
   */
  bytes(byteOffset: number, byteLength: number): Uint8Array {
    const b = this.#lookup(byteOffset, "view");
    const usable = this.#rec[b + R_SIZE] * this.alignment;
    if (
      typeof byteLength !== "number" || (byteLength >>> 0) !== byteLength ||
      byteLength > usable
    ) {
      validateByteLength(byteLength, usable, "byteLength");
    }
    const buffer = this.#isWasm ? this.buffer : this.#buffer;
    try {
      return new Uint8Array(buffer, byteOffset, byteLength);
    } catch (error) {
      throw this.#viewError(error, buffer, byteOffset, byteLength);
    }
  }

  /**
   * Whether {@linkcode CpuHeap.dispose} was called.
   */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Gives up the memory: the heap refuses every later call with an
   * `InvalidArgumentError`, and another heap may now manage the same bytes.
   * Live blocks are forgotten (their bytes belong to the next owner). Calling
   * it again does nothing.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    releaseMemory(this.memory, this);
    // Empty every structure the fast paths read, so they all fall through to
    // the slow paths, which refuse.
    this.#heads.fill(-1);
    this.#slBitmap.fill(0);
    this.#flBitmap = 0;
    this.#lgRecs.fill(-1);
    this.#lgBits.fill(0);
    this.#lgWords.fill(0);
    this.#lgLow = LOW_NONE;
    this.#lgLowRec = -1;
    this.#small.clear();
    this.#buckets.fill(-1);
    this.#liveCount = 0;
    this.#maxEndUnit = this.#endUnit;
  }

  /** Same as {@linkcode CpuHeap.dispose}, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  // A raw call on a block a CpuAllocator owns: refused, nothing changes.
  #refuseOwned(byteOffset: number, what: string): void {
    // Only a granule-aligned uint32 can be a block start; anything else is
    // left to the call's own checks.
    if (
      typeof byteOffset === "number" && (byteOffset >>> 0) === byteOffset &&
      (byteOffset & this.#granuleMask) === 0 &&
      ((this.#owned![byteOffset >>> this.#shift >>> 5] ?? 0) &
          (1 << ((byteOffset >>> this.#shift) & 31))) !== 0
    ) {
      throw new DoubleFreeError(
        `Cannot ${what} byte offset ${byteOffset}: the block is owned by a live DataPtr (or raw context) of a CpuAllocator; release it through that allocator`,
      );
    }
  }

  /**
   * Grows the managed region by at least `byteLength` bytes, within
   * `maxByteLength`.
   *
   * @param byteLength Bytes to add (rounded up to the alignment).
   * @returns `true` when the heap grew.
   * @throws {InvalidArgumentError} For a bad length.
   */
  grow(byteLength: number): boolean {
    if (this.#disposed) this.#refuseDisposed("grow");
    validateByteLength(byteLength);
    const units = Math.ceil(byteLength / this.alignment);
    if (units === 0) return true;
    return this.#growTo(this.#endUnit + units);
  }

  /**
   * The figures of the heap, read in O(1).
   *
   * @returns A plain copy of the stats.
   */
  stats(): CpuHeapStats {
    return this.#accumulated(this.#rawStats());
  }

  /**
   * Sets every peak to its current value and the high-water mark to the highest live byte.
   *
   * @deprecated Use {@linkcode CpuHeap.resetPeakStats} (the same); removed in 0.3.0.
   */
  resetPeaks(): void {
    this.#reqPeak = this.#reqNow;
    this.#usedPeak = this.#usedNow;
    this.#livePeak = this.#liveNow;
    let hw = 0;
    const rec = this.#rec;
    for (let b = this.#last; b >= 0; b = rec[b + R_PPREV]) {
      if (rec[b + R_STATE] === USED) {
        hw = rec[b + R_START] + rec[b + R_SIZE] -
          this.#startUnit;
        break;
      }
    }
    this.#highWater = hw * this.alignment;
  }

  /**
   * Every block in address order, for pictures and debugging (O(blocks)).
   *
   * @returns The blocks.
   */
  snapshot(): CpuHeapBlock[] {
    if (this.#disposed) this.#refuseDisposed("snapshot");
    const out: CpuHeapBlock[] = [];
    const rec = this.#rec;
    let b = this.#last;
    while (b >= 0 && rec[b + R_PPREV] >= 0) {
      b = rec[b + R_PPREV];
    }
    for (; b >= 0; b = rec[b + R_PNEXT]) {
      const free = rec[b + R_STATE] === FREE;
      out.push({
        byteOffset: rec[b + R_START] * this.alignment,
        byteLength: rec[b + R_SIZE] * this.alignment,
        free,
        requestedBytes: free ? 0 : this.#requested(b),
      });
    }
    return out;
  }

  /**
   * Checks every internal invariant (O(blocks), plus O(region / 16 KiB) for
   * the indexes of the compact and first-fit placements): blocks tile the
   * region, no two free blocks touch, each free block is in the list of its
   * class (or, with first-fit, a short one in the small index, whose bounds
   * are exact), the bitmaps match the lists, the stats match the blocks, and
   * the chunk index holds every large free block and finds the lowest.
   *
   * @throws {HeapCorruptionError} When an invariant does not hold.
   * @deprecated Use {@linkcode CpuHeap.validate} (the same); removed in 0.3.0.
   */
  checkIntegrity(): void {
    if (this.#disposed) this.#refuseDisposed("check");
    const rec = this.#rec;
    const fail = (why: string): never => {
      throw new HeapCorruptionError(`Heap is corrupt: ${why}`);
    };
    let b = this.#last;
    let blocks = 0;
    while (b >= 0 && rec[b + R_PPREV] >= 0) {
      b = rec[b + R_PPREV];
      if (++blocks > this.#recCount) fail("physical list has a cycle");
    }
    let at = this.#startUnit;
    let used = 0, usedCount = 0, free = 0, freeCount = 0, requested = 0;
    let prevFree = false;
    let prev = -1;
    const small: number[] = []; // small index blocks: record, last unit
    for (; b >= 0; b = rec[b + R_PNEXT]) {
      if (rec[b + R_PPREV] !== prev) fail(`block ${b} has a wrong previous`);
      if (rec[b + R_START] !== at) {
        fail(`block ${b} starts at unit ${rec[b + R_START]}, expected ${at}`);
      }
      if (rec[b + R_SIZE] <= 0) fail(`block ${b} has size ${rec[b + R_SIZE]}`);
      const state = rec[b + R_STATE];
      if (state === FREE) {
        if (prevFree) fail(`free blocks touch at unit ${at}`);
        free += rec[b + R_SIZE];
        freeCount++;
        if (rec[b + R_SIZE] < this.#smallFree) {
          small.push(b, this.#lastUnit(b));
          if (rec[b + R_CLASS] !== NO_CLASS) {
            fail(`small free block ${b} records class ${rec[b + R_CLASS]}`);
          }
        } else {
          let found = false;
          const idx = mappingIndex(rec[b + R_SIZE]);
          for (let f = this.#heads[idx]; f >= 0; f = rec[f + R_FNEXT]) {
            if (f === b) found = true;
          }
          if (!found) fail(`free block ${b} is not in list ${idx}`);
          if (rec[b + R_CLASS] !== idx) {
            fail(
              `free block ${b} records class ${rec[b + R_CLASS]}, not ${idx}`,
            );
          }
        }
      } else if (state === USED) {
        used += rec[b + R_SIZE];
        usedCount++;
        requested += this.#requested(b);
        const slack = rec[b + R_SLACK];
        if (slack < 0 || slack > this.alignment) {
          fail(`used block ${b} has slack ${slack}`);
        }
        if (this.#liveGet(rec[b + R_START]) !== b) {
          fail(`used block ${b} is not in the live map`);
        }
        if (rec[b + R_START] % rec[b + R_ALIGN] !== 0) {
          fail(`used block ${b} is misaligned`);
        }
      } else fail(`block ${b} has state ${state}`);
      prevFree = state === FREE;
      at += rec[b + R_SIZE];
      prev = b;
    }
    if (prev !== this.#last) fail("last block is wrong");
    if (at !== this.#endUnit) fail(`blocks end at ${at}, not ${this.#endUnit}`);
    let listed = 0;
    for (let idx = 0; idx < LIST_COUNT; idx++) {
      const fl = idx >>> SL_LOG2, sl = idx & SL_MASK;
      const bit = (this.#slBitmap[fl] >>> sl) & 1;
      const head = this.#heads[idx];
      if ((head >= 0) !== (bit === 1)) fail(`bitmap of list ${idx} is wrong`);
      if (
        ((this.#flBitmap >>> fl) & 1) !== (this.#slBitmap[fl] !== 0 ? 1 : 0)
      ) {
        fail(`first-level bitmap of ${fl} is wrong`);
      }
      for (let f = head, before = -1; f >= 0; f = rec[f + R_FNEXT]) {
        if (rec[f + R_STATE] !== FREE) fail(`list ${idx} holds ${f}`);
        if (rec[f + R_FPREV] !== before) {
          fail(`free block ${f} of list ${idx} has a wrong previous`);
        }
        if (++listed > this.#recCount) fail("a free list has a cycle");
        before = f;
      }
    }
    if (this.#smallFree !== 0) this.#small.check(rec, small, fail);
    if (listed + small.length / 2 !== freeCount) {
      fail(`${listed} listed free blocks, ${freeCount} in memory`);
    }
    if (freeCount !== this.#freeRegions) fail("free region count is wrong");
    // Every free block of a large class is in the chunk index.
    let large = 0;
    let lowest = -1;
    for (let idx = this.#largeClass; idx < LIST_COUNT; idx++) {
      for (let f = this.#heads[idx]; f >= 0; f = rec[f + R_FNEXT]) {
        large++;
        if (this.#lgRecs[this.#endChunk(f)] !== f) {
          fail(`free block ${f} is not in the chunk index`);
        }
        if (
          lowest < 0 ||
          rec[f + R_START] < rec[lowest + R_START]
        ) {
          lowest = f;
        }
      }
    }
    let indexed = 0;
    for (let c = 0; c < this.#lgBits.length * 32; c++) {
      const used = c < this.#lgRecs.length && this.#lgRecs[c] >= 0;
      if (((this.#lgBits[c >>> 5] >>> (c & 31)) & 1) !== (used ? 1 : 0)) {
        fail(`chunk index bit ${c} is wrong`);
      }
      if (used) indexed++;
    }
    for (let w = 0; w < this.#lgWords.length * 32; w++) {
      const set = w < this.#lgBits.length && this.#lgBits[w] !== 0;
      if (((this.#lgWords[w >>> 5] >>> (w & 31)) & 1) !== (set ? 1 : 0)) {
        fail(`chunk index word bit ${w} is wrong`);
      }
    }
    // Stale entries (dropped lazily) may remain beyond the live ones.
    if (indexed < large) fail(`${indexed} indexed large blocks, ${large} free`);
    const low = this.#lgLowest();
    if (
      (low < 0 ? -1 : this.#lgRecs[low]) !== lowest ||
      (low >= 0 && this.#lgLowRec !== lowest)
    ) {
      fail("lowest large block is wrong");
    }
    const g = this.alignment;
    if (used * g !== this.#usedNow) fail("allocated bytes are wrong");
    if (usedCount !== this.#liveNow) fail("allocation count is wrong");
    if (usedCount !== this.#liveCount) fail("live map size is wrong");
    if (requested !== this.#reqNow) {
      fail("requested bytes are wrong");
    }
    if (free + used !== this.#endUnit - this.#startUnit) {
      fail("sizes do not add up");
    }
  }

  // ---- internals -------------------------------------------------------

  // Bytes the caller asked for in used block `b`.
  #requested(b: number): number {
    return this.#rec[b + R_SIZE] * this.alignment - this.#rec[b + R_SLACK];
  }

  #refuseDisposed(what: string): never {
    throw new InvalidArgumentError(
      `Cannot ${what}: this CpuHeap was disposed`,
      { name: "heap", value: "disposed" },
    );
  }

  // A view constructor threw: a typed error when the memory no longer holds
  // the block (detached, transferred or shrunk outside the heap); else the
  // constructor's own error (a user class's), unchanged.
  #viewError(
    error: unknown,
    buffer: ArrayBuffer | SharedArrayBuffer,
    byteOffset: number,
    byteLength: number,
  ): unknown {
    const have = _realByteLength(buffer);
    if (byteOffset + byteLength <= have) return error;
    return new UseAfterFreeError(
      `Cannot view byte offset ${byteOffset}: the heap's memory holds ${have} bytes (detached, transferred or shrunk outside the heap), the block needs bytes up to ${
        byteOffset + byteLength
      }`,
      { cause: error },
    );
  }

  #refreshBuffer(): void {
    const buffer = _wasmBuffer(this.memory as WebAssembly.Memory);
    if (buffer !== this.#buffer) {
      this.#buffer = buffer;
      this.#generation++;
    }
  }

  #badAlignment(byteLength: number, alignment: number): never {
    if (
      !(Number.isInteger(alignment) && alignment > 0 &&
        (alignment & (alignment - 1)) === 0)
    ) {
      throw new InvalidArgumentError(
        `Cannot allocate ${byteLength} bytes: alignment must be a power of two up to ${MAX_ALIGNMENT}, received ${
          describeValue(alignment)
        }`,
        { name: "alignment", value: alignment, limit: MAX_ALIGNMENT },
      );
    }
    throw new InvalidArgumentError(
      `Cannot allocate ${byteLength} bytes: alignment must be at most ${MAX_ALIGNMENT}, received ${
        describeValue(alignment)
      }`,
      { name: "alignment", value: alignment, limit: MAX_ALIGNMENT },
    );
  }

  #outOfMemory(byteLength: number, alignment?: number): OutOfMemoryError {
    const free = this.freeBytes;
    const largest = this.largestFreeBytes;
    const growth = this.maxByteLength > this.byteLength
      ? `, may grow to ${this.maxByteLength}`
      : "";
    return new OutOfMemoryError(
      `Cannot allocate ${byteLength} bytes${
        alignment !== undefined ? ` aligned to ${alignment}` : ""
      }: ${free} bytes free, largest free region ${largest} bytes, ${this.allocatedBytes} of ${this.byteLength} bytes in use${growth}`,
      {
        requestedBytes: byteLength,
        capacityBytes: this.byteLength,
        freeBytes: free,
        largestFreeBytes: largest,
        allocatedBytes: this.allocatedBytes,
        reservedBytes: this.byteLength,
      },
    );
  }

  #lookup(byteOffset: number, what: string): number {
    // Fast path: a uint32 offset (no floating-point modulo or division).
    if (typeof byteOffset === "number" && (byteOffset >>> 0) === byteOffset) {
      const g = this.alignment;
      if ((byteOffset & (g - 1)) === 0) {
        const b = this.#liveGet(byteOffset >>> this.#shift);
        if (b >= 0) return b;
      }
    }
    return this.#lookupSlow(byteOffset, what);
  }

  #lookupSlow(byteOffset: number, what: string): number {
    if (this.#disposed) this.#refuseDisposed(what);
    const g = this.alignment;
    if (
      typeof byteOffset !== "number" || !(byteOffset >= 0) ||
      !Number.isSafeInteger(byteOffset)
    ) {
      throw new InvalidArgumentError(
        `Cannot ${what} byte offset ${
          describeValue(byteOffset)
        }: must be a non-negative integer`,
        { name: "byteOffset", value: byteOffset, limit: 0 },
      );
    }
    const b = byteOffset % g === 0 && byteOffset / g <= MAX_UNITS
      ? this.#liveGet(byteOffset / g)
      : -1;
    if (b < 0) {
      const begin = this.#startUnit * g, end = this.#endUnit * g;
      const where = byteOffset < begin || byteOffset >= end
        ? `it is outside this heap's range [${begin}, ${end})`
        : "no live block of this heap starts there (freed already, or never allocated here)";
      const message = `Cannot ${what} byte offset ${
        String(byteOffset)
      }: ${where}`;
      throw what === "free"
        ? new DoubleFreeError(message)
        : new UseAfterFreeError(message);
    }
    return b;
  }

  #liveSet(unit: number, b: number): void {
    if (++this.#liveCount > this.#buckets.length) this.#rehash();
    const h = Math.imul(unit, HASH_MULTIPLIER) >>> this.#bucketShift;
    this.#rec[b + R_FNEXT] = this.#buckets[h];
    this.#buckets[h] = b;
  }

  #liveGet(unit: number): number {
    const rec = this.#rec;
    let b =
      this.#buckets[Math.imul(unit, HASH_MULTIPLIER) >>> this.#bucketShift];
    while (b >= 0 && rec[b + R_START] !== unit) {
      b = rec[b + R_FNEXT];
    }
    return b;
  }

  #rehash(): void {
    const old = this.#buckets;
    const buckets = new Int32Array(old.length * 2).fill(-1);
    const shift = this.#bucketShift - 1;
    const rec = this.#rec;
    for (let i = 0; i < old.length; i++) {
      for (let b = old[i]; b >= 0;) {
        const next = rec[b + R_FNEXT];
        const h = Math.imul(rec[b + R_START], HASH_MULTIPLIER) >>>
          shift;
        rec[b + R_FNEXT] = buckets[h];
        buckets[h] = b;
        b = next;
      }
    }
    this.#buckets = buckets;
    this.#bucketShift = shift;
  }

  #newRecord(): number {
    if (this.#unusedHead < 0) this.#moreRecords();
    const b = this.#unusedHead;
    this.#unusedHead = this.#rec[b + R_FNEXT];
    return b;
  }

  // Puts every record the array has room for and that was never used on
  // the unused list (doubling the array when it is full): `alloc()`'s fast
  // path takes records only from that list. Amortized O(1) per record.
  #moreRecords(): void {
    if (this.#recCount * STRIDE >= this.#rec.length) {
      const rec = new Int32Array(this.#rec.length * 2);
      rec.set(this.#rec);
      this.#rec = rec;
    }
    const rec = this.#rec;
    const end = rec.length / STRIDE;
    for (let i = end - 1; i >= this.#recCount; i--) {
      const b = i * STRIDE;
      rec[b + R_STATE] = UNUSED;
      rec[b + R_FNEXT] = this.#unusedHead;
      this.#unusedHead = b;
    }
    this.#recCount = end;
  }

  #freeRecord(b: number): void {
    this.#rec[b + R_STATE] = UNUSED;
    this.#rec[b + R_FNEXT] = this.#unusedHead;
    this.#unusedHead = b;
  }

  #insertFree(b: number): void {
    const size = this.#rec[b + R_SIZE];
    if (size < this.#smallFree) {
      this.#smallLink(b, this.#lastUnit(b), size);
      return;
    }
    const idx = mappingIndex(size);
    this.#link(b, idx);
    if (idx >= this.#largeClass) this.#lgPut(this.#endChunk(b), b);
  }

  #removeFree(b: number): void {
    const idx = this.#rec[b + R_CLASS];
    if (idx === NO_CLASS) this.#smallRemove(b);
    else this.#unlink(b, idx);
    if (b === this.#lgLowRec) this.#lgDrop();
  }

  // Last unit of block `b`, from the region start.
  #lastUnit(b: number): number {
    return this.#rec[b + R_START] + this.#rec[b + R_SIZE] - 1 -
      this.#startUnit;
  }

  // Lists free block `b` of `size` units, ending at `last`, in the small
  // index (first-fit placement, a block shorter than FIRST_FIT_UNITS).
  #smallLink(b: number, last: number, size: number): void {
    this.#rec[b + R_STATE] = FREE;
    this.#rec[b + R_CLASS] = NO_CLASS;
    this.#small.link(this.#rec, b, last, size);
    this.#freeRegions++;
    this.#largestCache = -1;
  }

  // Takes free block `b` off the small index (kept out of #removeFree, whose
  // bytecode alloc's inlining budget holds with #unlink's only this way).
  #smallRemove(b: number): void {
    this.#smallUnlink(b, this.#lastUnit(b), this.#rec[b + R_SIZE]);
  }

  // Takes free block `b`, listed as `size` units ending at `last`, off the
  // small index.
  #smallUnlink(b: number, last: number, size: number): void {
    this.#small.unlink(this.#rec, b, last, size);
    this.#freeRegions--;
    this.#largestCache = -1;
  }

  // Pushes free block `b` on list `idx` (the chunk index is the caller's).
  #link(b: number, idx: number): void {
    const rec = this.#rec;
    const head = this.#heads[idx];
    rec[b + R_STATE] = FREE;
    rec[b + R_CLASS] = idx;
    rec[b + R_FPREV] = -1;
    rec[b + R_FNEXT] = head;
    if (head >= 0) rec[head + R_FPREV] = b;
    else {
      const fl = idx >>> SL_LOG2;
      this.#slBitmap[fl] |= 1 << (idx & SL_MASK);
      this.#flBitmap |= 1 << fl;
    }
    this.#heads[idx] = b;
    this.#freeRegions++;
    this.#largestCache = -1;
  }

  // Takes free block `b` off list `idx` (the chunk index is the caller's).
  #unlink(b: number, idx: number): void {
    const rec = this.#rec;
    const prev = rec[b + R_FPREV];
    const next = rec[b + R_FNEXT];
    if (next >= 0) rec[next + R_FPREV] = prev;
    if (prev >= 0) rec[prev + R_FNEXT] = next;
    else {
      this.#heads[idx] = next;
      if (next < 0) {
        const fl = idx >>> SL_LOG2;
        const bits = this.#slBitmap[fl] & ~(1 << (idx & SL_MASK));
        this.#slBitmap[fl] = bits;
        if (bits === 0) this.#flBitmap &= ~(1 << fl);
      }
    }
    this.#freeRegions--;
    this.#largestCache = -1;
  }

  // Moves free block `b` from list `from` to list `to` (its size changed; it
  // stays free, so its state and the free-region count stay too).
  #relink(b: number, from: number, to: number): void {
    const rec = this.#rec;
    const prev = rec[b + R_FPREV];
    const next = rec[b + R_FNEXT];
    if (next >= 0) rec[next + R_FPREV] = prev;
    if (prev >= 0) rec[prev + R_FNEXT] = next;
    else {
      this.#heads[from] = next;
      if (next < 0) {
        const fl = from >>> SL_LOG2;
        const bits = this.#slBitmap[fl] & ~(1 << (from & SL_MASK));
        this.#slBitmap[fl] = bits;
        if (bits === 0) this.#flBitmap &= ~(1 << fl);
      }
    }
    const head = this.#heads[to];
    rec[b + R_CLASS] = to;
    rec[b + R_FPREV] = -1;
    rec[b + R_FNEXT] = head;
    if (head >= 0) rec[head + R_FPREV] = b;
    else {
      const fl = to >>> SL_LOG2;
      this.#slBitmap[fl] |= 1 << (to & SL_MASK);
      this.#flBitmap |= 1 << fl;
    }
    this.#heads[to] = b;
    this.#largestCache = -1;
  }

  // Chunk of the chunk index that the last unit of block `b` lies in. A block
  // keyed by its end stays put when alloc carves its front off.
  #endChunk(b: number): number {
    return (this.#rec[b + R_START] + this.#rec[b + R_SIZE] - 1 -
      this.#startUnit) >>> SMALL_LOG2;
  }

  #lgResize(chunks: number): void {
    if (this.#largeClass === LIST_COUNT) chunks = 1; // good-fit: no index
    if (this.#smallFree !== 0) this.#small.resize(chunks << SMALL_LOG2);
    if (chunks <= this.#lgRecs.length) return;
    const recs = new Int32Array(chunks).fill(-1);
    recs.set(this.#lgRecs);
    const bits = new Int32Array((chunks + 31) >>> 5);
    bits.set(this.#lgBits);
    const words = new Int32Array((bits.length + 31) >>> 5);
    words.set(this.#lgWords);
    this.#lgRecs = recs;
    this.#lgBits = bits;
    this.#lgWords = words;
  }

  #lgPut(chunk: number, rec: number): void {
    this.#lgRecs[chunk] = rec;
    const w = chunk >>> 5;
    const had = this.#lgBits[w];
    this.#lgBits[w] = had | (1 << (chunk & 31));
    if (had === 0) this.#lgWords[w >>> 5] |= 1 << (w & 31);
    const low = this.#lgLow;
    if (low === LOW_NONE || (low >= 0 && chunk <= low)) {
      this.#lgLow = chunk;
      this.#lgLowRec = rec;
    } else if (low === LOW_UNKNOWN && w >>> 5 < this.#lgFrom) {
      this.#lgFrom = w >>> 5;
    }
  }

  // The cached lowest block left its chunk or the large classes (callers
  // check that it is the cached one): the next lookup searches again, from
  // its bitmap word on, as every other live entry lies above it.
  #lgDrop(): void {
    this.#lgFrom = this.#lgLow >>> (2 * WORD_LOG2);
    this.#lgLow = LOW_UNKNOWN;
    this.#lgLowRec = -1;
  }

  #lgRemove(chunk: number): void {
    this.#lgRecs[chunk] = -1;
    const w = chunk >>> 5;
    const bits = this.#lgBits[w] & ~(1 << (chunk & 31));
    this.#lgBits[w] = bits;
    if (bits === 0) this.#lgWords[w >>> 5] &= ~(1 << (w & 31));
  }

  // The lowest chunk whose entry is a free block of a large class ending in
  // it, dropping the stale entries below it (entries are dropped lazily:
  // the blocks that leave a chunk or a large class are not removed).
  #lgLowest(): number {
    const low = this.#lgLow;
    return low !== LOW_UNKNOWN ? low : this.#lgFind();
  }

  #lgFind(): number {
    const rec = this.#rec;
    for (;;) {
      const low = this.#lgSearch();
      if (low < 0) {
        this.#lgLow = LOW_NONE;
        return LOW_NONE;
      }
      const b = this.#lgRecs[low];
      if (
        rec[b + R_STATE] === FREE && rec[b + R_SIZE] >= this.#largeUnits &&
        this.#endChunk(b) === low
      ) {
        this.#lgLow = low;
        this.#lgLowRec = b;
        return low;
      }
      this.#lgRemove(low);
    }
  }

  #lgSearch(): number {
    const words = this.#lgWords;
    for (let i = this.#lgFrom; i < words.length; i++) {
      const top = words[i];
      if (top !== 0) {
        const w = (i << 5) | (31 - Math.clz32(top & -top));
        const bits = this.#lgBits[w];
        return (w << 5) | (31 - Math.clz32(bits & -bits));
      }
    }
    return -1;
  }

  #chunkCount(): number {
    return ((this.#endUnit - this.#startUnit) >>> SMALL_LOG2) + 1;
  }

  // A free block for a request whose search index `idx` is of a small
  // request (fewer than SMALL_UNITS units with its alignment slack): the
  // lower-addressed of the good fit among the small classes and the lowest
  // free block of at least SMALL_UNITS units; -1 when neither exists.
  #findSmall(idx: number): number {
    const sl = this.#slBitmap;
    let fl = idx >>> SL_LOG2;
    let bits = fl < SMALL_CLASSES >>> SL_LOG2
      ? sl[fl] & (-1 << (idx & SL_MASK))
      : 0;
    if (bits === 0) {
      const flBits = this.#flBitmap & SMALL_FL_MASK & (-1 << (fl + 1));
      if (flBits !== 0) {
        fl = 31 - Math.clz32(flBits & -flBits);
        bits = sl[fl];
      }
    }
    const low = this.#lgLowest();
    if (bits === 0) return low < 0 ? -1 : this.#lgLowRec;
    const b = this.#heads[(fl << SL_LOG2) | (31 - Math.clz32(bits & -bits))];
    // Free blocks do not overlap, so the large block ends below b exactly
    // when its chunk is at most b's (b reads no other record).
    return low >= 0 && low <= this.#endChunk(b) ? this.#lgLowRec : b;
  }

  // The lowest-addressed free block of at least `need` units, for a small
  // request of the first-fit placement (fewer than FIRST_FIT_UNITS units with its
  // alignment slack): the lower of the lowest fitting small block and the
  // lowest large block (which fits any small request); -1 when neither
  // exists.
  #firstFit(need: number): number {
    const rec = this.#rec;
    const low = this.#lgLowest() < 0 ? -1 : this.#lgLowRec;
    const lowStart = low < 0 ? MAX_UNITS : rec[low + R_START];
    // A small block found at or below the chunk of the large block's start
    // lies below it: one above would start after the large block's end, at
    // least FIRST_FIT_UNITS units on, in a later chunk.
    const b = this.#small.find(rec, need, lowStart - this.#startUnit);
    return b >= 0 ? b : low;
  }

  // Changes the size of free block `b` (and its start), moving it to the
  // list of its new class only when the class changes.
  #resizeFree(b: number, start: number, size: number): void {
    const rec = this.#rec;
    const from = rec[b + R_CLASS];
    if (from === NO_CLASS || size < this.#smallFree) {
      this.#resizeSmall(b, start, size);
      return;
    }
    const oldEnd = rec[b + R_START] + rec[b + R_SIZE];
    const to = mappingIndex(size);
    if (from !== to) {
      rec[b + R_START] = start;
      rec[b + R_SIZE] = size;
      this.#relink(b, from, to);
    } else {
      rec[b + R_START] = start;
      rec[b + R_SIZE] = size;
      this.#largestCache = -1;
    }
    // Keyed by its end: a large block that kept its end keeps its entry.
    if (
      b === this.#lgLowRec && (to < SMALL_CLASSES || start + size !== oldEnd)
    ) this.#lgDrop();
    if (
      to >= this.#largeClass &&
      (from < SMALL_CLASSES || start + size !== oldEnd)
    ) {
      this.#lgPut((start + size - 1 - this.#startUnit) >>> SMALL_LOG2, b);
    }
  }

  // #resizeFree of the first-fit placement where the block is small before or
  // after: a small block that keeps its end keeps its small index entry.
  #resizeSmall(b: number, start: number, size: number): void {
    const rec = this.#rec;
    const oldSize = rec[b + R_SIZE];
    const last = start + size - 1 - this.#startUnit;
    if (oldSize < this.#smallFree) {
      const oldLast = rec[b + R_START] + oldSize - 1 - this.#startUnit;
      rec[b + R_START] = start;
      rec[b + R_SIZE] = size;
      if (size < this.#smallFree && last === oldLast) {
        this.#small.resized(rec, last, oldSize, size);
        this.#largestCache = -1;
        return;
      }
      this.#smallUnlink(b, oldLast, oldSize);
    } else {
      this.#unlink(b, rec[b + R_CLASS]);
      if (b === this.#lgLowRec) this.#lgDrop();
      rec[b + R_START] = start;
      rec[b + R_SIZE] = size;
    }
    this.#insertFree(b);
  }

  // Finds a free block that holds `units` at an alignment of `a` units.
  #find(units: number, a: number): number {
    const need = units + a - 1;
    let idx = searchIndex(need);
    if (need < this.#smallUnits) {
      const b = this.#smallFree !== 0
        ? this.#firstFit(need)
        : this.#findSmall(idx);
      if (b >= 0) return b;
    }
    if (idx < LIST_COUNT) {
      let fl = idx >>> SL_LOG2;
      let bits = this.#slBitmap[fl] & (-1 << (idx & SL_MASK));
      if (bits === 0) {
        const flBits = fl + 1 < 32 ? this.#flBitmap & (-1 << (fl + 1)) : 0;
        if (flBits !== 0) {
          fl = ctz(flBits);
          bits = this.#slBitmap[fl];
        }
      }
      if (bits !== 0) return this.#heads[(fl << SL_LOG2) | ctz(bits)];
    } else idx = LIST_COUNT;
    // Good fit missed: scan the blocks below `idx` that may hold a fit (in
    // the first-fit placement small ones are in the small index).
    const rec = this.#rec;
    if (units < this.#smallFree) {
      const b = this.#small.findAligned(rec, units, a);
      if (b >= 0) return b;
    }
    for (let i = mappingIndex(units); i < idx; i++) {
      const fl = i >>> SL_LOG2;
      if (((this.#slBitmap[fl] >>> (i & SL_MASK)) & 1) === 0) {
        if (this.#slBitmap[fl] >>> (i & SL_MASK) === 0) i |= SL_MASK; // skip empty rest
        continue;
      }
      for (let b = this.#heads[i]; b >= 0; b = rec[b + R_FNEXT]) {
        const start = rec[b + R_START];
        const aligned = a > 1 ? Math.ceil(start / a) * a : start;
        if (aligned + units <= start + rec[b + R_SIZE]) return b;
      }
    }
    return -1;
  }

  #take(b: number, units: number, a: number, byteLength: number): number {
    let rec = this.#rec;
    let start = rec[b + R_START];
    let size = rec[b + R_SIZE];
    if (a > 1) {
      const aligned = start <= INT_ROUNDING_LIMIT
        ? (start + a - 1) & -a
        : Math.ceil(start / a) * a;
      const gap = aligned - start;
      if (gap > 0) {
        // The gap stays a free block; carve the rest off as a new record.
        const nb = this.#newRecord();
        rec = this.#rec;
        const next = rec[b + R_PNEXT];
        this.#resizeFree(b, start, gap);
        rec[nb + R_START] = aligned;
        rec[nb + R_SIZE] = size - gap;
        rec[nb + R_PPREV] = b;
        rec[nb + R_PNEXT] = next;
        if (next >= 0) rec[next + R_PPREV] = nb;
        else this.#last = nb;
        rec[b + R_PNEXT] = nb;
        b = nb;
        start = aligned;
        size -= gap;
        if (size > units) this.#splitTail(b, units, size - units);
        return this.#mark(b, start, units, a, byteLength);
      }
    }
    if (size === units) {
      this.#removeFree(b);
      return this.#mark(b, start, units, a, byteLength);
    }
    // Carve the block off the front of free block b, which keeps the rest
    // (and its list, unless its class changes).
    const u = this.#newRecord();
    rec = this.#rec;
    const prev = rec[b + R_PPREV];
    rec[u + R_START] = start;
    rec[u + R_SIZE] = units;
    rec[u + R_PPREV] = prev;
    rec[u + R_PNEXT] = b;
    if (prev >= 0) rec[prev + R_PNEXT] = u;
    rec[b + R_PPREV] = u;
    this.#resizeFree(b, start + units, size - units);
    return this.#mark(u, start, units, a, byteLength);
  }

  #mark(
    b: number,
    start: number,
    units: number,
    a: number,
    byteLength: number,
  ): number {
    const rec = this.#rec;
    rec[b + R_STATE] = USED;
    rec[b + R_ALIGN] = a;
    rec[b + R_SLACK] = units * this.alignment - byteLength;
    this.#liveSet(start, b);
    this.#addRequested(byteLength);
    this.#addUsed(units * this.alignment);
    const live = ++this.#liveNow;
    this.#liveTotal++;
    if (live > this.#livePeak) this.#livePeak = live;
    const hw = (start + units - this.#startUnit) * this.alignment;
    if (hw > this.#highWater) this.#highWater = hw;
    return start * this.alignment;
  }

  #addRequested(bytes: number): void {
    const now = this.#reqNow += bytes;
    this.#reqTotal += bytes;
    if (now > this.#reqPeak) this.#reqPeak = now;
  }

  #addUsed(bytes: number): void {
    const now = this.#usedNow += bytes;
    this.#usedTotal += bytes;
    if (now > this.#usedPeak) this.#usedPeak = now;
  }

  #bumpHighWater(endUnit: number): void {
    const hw = (endUnit - this.#startUnit) * this.alignment;
    if (hw > this.#highWater) this.#highWater = hw;
  }

  // Cuts a free block of `tail` units off the end of used-to-be block `b`
  // (whose next neighbour is not free) and shrinks `b` to `keep` units.
  #splitTail(b: number, keep: number, tail: number): void {
    const nb = this.#newRecord();
    const rec = this.#rec;
    const next = rec[b + R_PNEXT];
    rec[nb + R_START] = rec[b + R_START] + keep;
    rec[nb + R_SIZE] = tail;
    rec[nb + R_PPREV] = b;
    rec[nb + R_PNEXT] = next;
    if (next >= 0) rec[next + R_PPREV] = nb;
    else this.#last = nb;
    rec[b + R_PNEXT] = nb;
    rec[b + R_SIZE] = keep;
    this.#insertFree(nb);
  }

  // Gives the last `tail` units of used block `b` back, merging with a free
  // next neighbour. The caller updates b's size.
  #giveTail(b: number, tail: number): void {
    const rec = this.#rec;
    const next = rec[b + R_PNEXT];
    if (next >= 0 && rec[next + R_STATE] === FREE) {
      this.#removeFree(next);
      rec[next + R_START] -= tail;
      rec[next + R_SIZE] += tail;
      this.#insertFree(next);
    } else {
      this.#splitTail(b, rec[b + R_SIZE] - tail, tail);
    }
  }

  // Marks used block `b` free and merges it with free neighbours, keeping a
  // neighbour's list when its class does not change: free()'s path for the
  // first-fit placement (good fit and compact write it out in free()), and
  // the reference of free()'s differential test. Inlined into free with
  // #insertFree and #link under Node 20's inlining budget, so an unmerged
  // block makes no call and a merge one: #absorb.
  #release(b: number): void {
    const rec = this.#rec;
    const prev = rec[b + R_PPREV];
    const next = rec[b + R_PNEXT];
    const prevFree = prev >= 0 && rec[prev + R_STATE] === FREE;
    const nextFree = next >= 0 && rec[next + R_STATE] === FREE;
    if (!prevFree && !nextFree) {
      this.#insertFree(b);
      return;
    }
    // The neighbour that keeps its record (and its list, while its class
    // holds): the previous block when free, else the next.
    let keep = next;
    let start = rec[b + R_START];
    let size = rec[b + R_SIZE];
    if (prevFree) {
      keep = prev;
      start = rec[prev + R_START];
      size += rec[prev + R_SIZE];
      let after = next;
      if (nextFree) {
        this.#removeFree(next);
        size += rec[next + R_SIZE];
        after = rec[next + R_PNEXT];
        this.#freeRecord(next);
      }
      rec[prev + R_PNEXT] = after;
      if (after >= 0) rec[after + R_PPREV] = prev;
      else this.#last = prev;
    } else {
      size += rec[next + R_SIZE];
      rec[next + R_PPREV] = prev;
      if (prev >= 0) rec[prev + R_PNEXT] = next;
    }
    this.#absorb(keep, b, start, size);
  }

  // Free block `keep` takes the place of the block of record `b` too: it
  // becomes `size` units from `start`, and `b`'s record is unused. One call
  // for #release (whose inlining budget holds the unmerged case), with
  // #freeRecord, #resizeFree and #relink inlined in it.
  #absorb(keep: number, b: number, start: number, size: number): void {
    this.#freeRecord(b);
    this.#resizeFree(keep, start, size);
  }

  // Compact's chunk index after free() merged into free block `keep`, large
  // now (#resizeFree's upkeep): a block that grew at its end (`grewAtEnd`:
  // the previous one kept) goes in again under its new last unit, its old
  // entry dropped lazily; one that kept its end goes in only if it was small
  // (`from`). A next block merged into the previous one leaves nothing to
  // do: the previous one takes its end, so its entry, and its place as the
  // cached lowest.
  #lgMerged(keep: number, grewAtEnd: boolean, from: number): void {
    if (grewAtEnd) {
      if (keep === this.#lgLowRec) this.#lgDrop();
    } else if (from >= SMALL_CLASSES) return;
    this.#lgPut(this.#endChunk(keep), keep);
  }

  // Grows so that a request of `units` at alignment `a` fits.
  #grow(units: number, a: number): boolean {
    if (this.#endUnit >= this.#maxEndUnit) return false;
    const rec = this.#rec;
    const last = this.#last;
    const tailFree = last >= 0 && rec[last + R_STATE] === FREE
      ? rec[last + R_SIZE]
      : 0;
    const need = units + a - 1 - tailFree;
    const minEnd = this.#endUnit + Math.max(need, 1);
    if (minEnd > this.#maxEndUnit) return false;
    const doubled = this.#endUnit + (this.#endUnit - this.#startUnit);
    return this.#growTo(
      Math.min(this.#maxEndUnit, Math.max(minEnd, doubled)),
      minEnd,
    );
  }

  // Grows the region end to `endUnit` (or, if that fails, to `minEnd`).
  #growTo(endUnit: number, minEnd = endUnit): boolean {
    if (endUnit > this.#maxEndUnit || this.#growing) return false;
    // The memory's resize may run user code (a subclass) that calls back
    // into this heap: a growth from there is refused (it recursed, trying
    // each size at every level), and a dispose from there wins.
    this.#growing = true;
    let grown: boolean;
    try {
      grown = this.#growMemory(endUnit * this.alignment) ||
        (minEnd !== endUnit &&
          this.#growMemory((endUnit = minEnd) * this.alignment));
    } finally {
      this.#growing = false;
    }
    if (!grown || this.#disposed) return false;
    const oldEnd = this.#endUnit;
    const delta = endUnit - oldEnd;
    this.#lgResize(
      ((endUnit - this.#startUnit) >>> SMALL_LOG2) + 1,
    );
    const last = this.#last;
    if (last >= 0 && this.#rec[last + R_STATE] === FREE) {
      this.#removeFree(last);
      this.#rec[last + R_SIZE] += delta;
      this.#insertFree(last);
    } else {
      const nb = this.#newRecord();
      const rec = this.#rec;
      rec[nb + R_START] = oldEnd;
      rec[nb + R_SIZE] = delta;
      rec[nb + R_PPREV] = last;
      rec[nb + R_PNEXT] = -1;
      if (last >= 0) rec[last + R_PNEXT] = nb;
      this.#last = nb;
      this.#insertFree(nb);
    }
    this.#endUnit = endUnit;
    this.#grows++;
    return true;
  }

  #growMemory(byteEnd: number): boolean {
    try {
      if (this.#isWasm) {
        const memory = this.memory as WebAssembly.Memory;
        const have = _realByteLength(_realBuffer(memory));
        if (byteEnd > have) memory.grow(Math.ceil((byteEnd - have) / 65536));
        this.#refreshBuffer();
      } else if (this.#buffer instanceof ArrayBuffer) {
        if (byteEnd > _realByteLength(this.#buffer)) {
          this.#buffer.resize(byteEnd);
        }
      } else {
        const sab = this.#buffer as SharedArrayBuffer;
        if (byteEnd > _realByteLength(sab)) sab.grow(byteEnd);
      }
      // A memory that grew less than asked (a subclass's resize, or one that
      // only claims a larger byteLength) did not grow enough: managing bytes
      // it lacks would hand them out.
      return _realByteLength(this.#buffer) >= byteEnd;
    } catch {
      return false;
    }
  }

  // ---- the allocator contract's verbs (issue #15): same meaning as in
  // every allot allocator ----

  /** `allocated`/`freed` at the last `resetAccumulatedStats()`. */
  #accBase: readonly number[] | undefined = undefined;

  /**
   * Allocates `byteLength` bytes (the contract's name of
   * {@linkcode CpuHeap.alloc}; a 0-byte request gets an ordinary block).
   *
   * @param byteLength Number of bytes.
   * @param alignment A power of two up to 65536; the heap's alignment when
   * omitted.
   * @returns The byte offset of the block, a multiple of the alignment.
   * @throws {InvalidArgumentError} For a bad length or alignment.
   * @throws {OutOfMemoryError} When no free region fits, even after growth.
   */
  allocate(byteLength: number, alignment?: number): number {
    return this.alloc(byteLength, alignment);
  }

  /**
   * Allocates like {@linkcode CpuHeap.allocate}, but returns `undefined`
   * where it would throw out of memory (the contract's name of
   * {@linkcode CpuHeap.tryAlloc}).
   *
   * @param byteLength Number of bytes.
   * @param alignment A power of two up to 65536.
   * @returns The byte offset, or `undefined` when out of memory.
   * @throws {InvalidArgumentError} For a bad length or alignment.
   */
  tryAllocate(byteLength: number, alignment?: number): number | undefined {
    return this.tryAlloc(byteLength, alignment);
  }

  /**
   * Checks every internal invariant (the contract's name of
   * {@linkcode CpuHeap.checkIntegrity}).
   *
   * @throws {HeapCorruptionError} When an invariant does not hold.
   */
  validate(): void {
    this.checkIntegrity();
  }

  /**
   * Sets every peak to its current value (the contract's name of
   * {@linkcode CpuHeap.resetPeaks}).
   */
  resetPeakStats(): void {
    this.resetPeaks();
  }

  /**
   * Sets the `allocated` and `freed` totals of every figure of
   * {@linkcode CpuHeap.stats} to 0; `current` and `peak` stay.
   */
  resetAccumulatedStats(): void {
    const s = this.#rawStats();
    this.#accBase = [
      s.requestedBytes.allocated,
      s.requestedBytes.freed,
      s.allocatedBytes.allocated,
      s.allocatedBytes.freed,
      s.allocations.allocated,
      s.allocations.freed,
    ];
  }

  /**
   * A text table of {@linkcode CpuHeap.stats}, in the layout of
   * `torch.cuda.memory_summary()`.
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return formatStatsSummary(this.stats(), options, "CpuHeap");
  }

  /** The stats before `resetAccumulatedStats()` takes its baseline off. */
  #rawStats(): CpuHeapStats {
    return {
      requestedBytes: statValues(this.#reqNow, this.#reqPeak, this.#reqTotal),
      allocatedBytes: statValues(
        this.#usedNow,
        this.#usedPeak,
        this.#usedTotal,
      ),
      allocations: statValues(this.#liveNow, this.#livePeak, this.#liveTotal),
      reservedBytes: this.byteLength,
      freeBytes: this.freeBytes,
      largestFreeBytes: this.largestFreeBytes,
      freeRegions: this.#freeRegions,
      highWaterBytes: this.#highWater,
      outOfMemoryCount: this.#ooms,
      growCount: this.#grows,
    };
  }

  /** {@linkcode CpuHeap.stats} with the accumulated baseline taken off. */
  #accumulated(s: CpuHeapStats): CpuHeapStats {
    const b = this.#accBase;
    if (b === undefined) return s;
    s.requestedBytes.allocated -= b[0];
    s.requestedBytes.freed -= b[1];
    s.allocatedBytes.allocated -= b[2];
    s.allocatedBytes.freed -= b[3];
    s.allocations.allocated -= b[4];
    s.allocations.freed -= b[5];
    return s;
  }
}

// Strict mode: wraps the calls that change a heap so that each checks every
// invariant after it ran, and junk-fills the bytes a free or a shrink gives
// back (realloc frees through the wrapped free).
function _makeStrict(heap: CpuHeap): void {
  const proto = CpuHeap.prototype;
  const checked = <A extends unknown[], R>(
    f: (this: CpuHeap, ...args: A) => R,
  ) =>
  (...args: A): R => {
    const result = f.apply(heap, args);
    heap.checkIntegrity();
    return result;
  };
  const free = checked(proto.free);
  const resizeInPlace = checked(proto.resizeInPlace);
  Object.defineProperties(heap, {
    alloc: { value: checked(proto.alloc) },
    tryAlloc: { value: checked(proto.tryAlloc) },
    resizeInPlace: {
      value: (byteOffset: number, byteLength: number): boolean => {
        const before = heap.owns(byteOffset)
          ? heap.usableByteLength(byteOffset)
          : 0;
        const done = resizeInPlace(byteOffset, byteLength);
        const after = heap.usableByteLength(byteOffset);
        // A shrink gives its tail back: junk, as a free's bytes are.
        if (done && after < before) {
          junkFill(heap.buffer, byteOffset + after, before - after);
        }
        return done;
      },
    },
    realloc: { value: checked(proto.realloc) },
    grow: { value: checked(proto.grow) },
    free: {
      value: (byteOffset: number): void => {
        const length = heap.owns(byteOffset)
          ? heap.usableByteLength(byteOffset)
          : 0;
        free(byteOffset);
        if (length > 0) junkFill(heap.buffer, byteOffset, length);
      },
    },
  });
}

function statValues(current: number, peak: number, total: number): StatValues {
  return { current, peak, allocated: total, freed: total - current };
}

/** The keys of `CpuHeapOptions` (unknown keys are refused). */
export const CPU_HEAP_OPTION_KEYS: readonly string[] = Object.freeze([
  "alignment",
  "mobile",
  "byteOffset",
  "byteLength",
  "maxByteLength",
  "shared",
  "placement",
  "strict",
]);
