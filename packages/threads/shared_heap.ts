/**
 * {@linkcode SharedHeap}: one heap inside shared memory that several Workers
 * allocate from and free to at once.
 *
 * @module
 */

import {
  AllotError,
  describeValue,
  DoubleFreeError,
  InvalidArgumentError,
  JUNK_BYTE,
  optionOr,
  OutOfMemoryError,
  validateAlignment,
  validateByteLength,
  validateFlag,
  validateInteger,
  validateObject,
  type WasmMemory,
} from "@allot/core";
import {
  type BlockSnapshot,
  finishSnapshot,
  formatStatsSummary,
  type MemorySnapshot,
  type MemorySummaryOptions,
  type SegmentSnapshot,
  segmentTotals,
  type StatValues,
  validateOptionKeys,
} from "@allot/core";
import {
  A_ALLOC_UNITS,
  A_ALLOC_UNITS_HI,
  A_ALLOCS,
  A_ALLOCS_HI,
  A_COUNTERS,
  A_FREED_UNITS,
  A_FREED_UNITS_HI,
  A_FREES,
  A_FREES_HI,
  A_GEN,
  A_LARGE_HITS,
  A_LARGE_MISSES,
  A_LIMIT_BLOCKS,
  A_LIMIT_FREED_UNITS,
  A_LIMIT_FREES,
  A_LIMIT_UNITS,
  A_LOCK_SLEEPS,
  A_LOCK_WAITS,
  A_LOCKS,
  A_PAGES_RETURNED,
  A_PAGES_TAKEN,
  A_REMOTE_FREES,
  A_SLABS_TAKEN,
  A_SPANS_ADOPTED,
  A_STATE,
  A_TOKEN,
  ARENA_ATTACHED,
  ARENA_FREE,
  ARENA_RECLAIMING,
  ARENA_WORDS,
  binOf,
  BINS,
  CLASS_OF,
  CLASS_RECIPROCALS,
  CLASS_SIZES,
  F_RESET,
  H_ARENA_END,
  H_ARENAS,
  H_ATTACHED,
  H_BIN_MASK,
  H_BINS,
  H_BYTE_LENGTH,
  H_CACHE_POOL,
  H_FREE_PAGES,
  H_HEAP_ID,
  H_LOCK,
  H_MAGIC,
  H_META,
  H_PAGE_BASE,
  H_PAGES,
  H_PEAK_BLOCKS,
  H_PEAK_BYTES,
  H_PEAK_LOCK,
  H_RETURNS,
  H_STATE,
  H_VERSION,
  H_WAITERS,
  HEADER_BYTES,
  K_CACHED,
  K_FREE,
  K_LARGE,
  K_NONE,
  K_RETURNED,
  K_SLAB,
  M_AGE,
  M_KIND,
  M_LEN,
  M_NEXT,
  M_OWNER,
  M_PREV,
  M_START,
  M_TAIL,
  MAGIC,
  MAX_ARENAS,
  MAX_SMALL,
  META_WORDS,
  OWNER_ABANDONED,
  OWNER_ADOPTING,
  PAGE,
  PAGE_SHIFT,
  R_BUDGET,
  R_PAGES,
  RETURN_WORDS,
  RETURNS_CLOSED,
  RETURNS_EMPTY,
  S_BUMP,
  S_CAP,
  S_CLASS,
  S_FREE,
  S_OWNER,
  S_REMOTE,
  S_SIZE,
  S_STACK,
  S_STATES,
  S_USED,
  SLAB_BYTES,
  SLAB_HEADER,
  SLAB_PAGES,
  STATE_CLOSED,
  STATE_OPEN,
  TOTAL_CARRY,
  VERSION,
} from "./_layout.ts";
import {
  ForeignHeapError,
  HeapBusyError,
  HeapClosedError,
  HeapOverlapError,
  NotSharedMemoryError,
} from "./errors.ts";
import { SpanCache } from "./_span_cache.ts";
import { OWNED_BLOCK, OWNED_SPAN, ownedBlocks } from "./_owned_blocks.ts";

/** Largest alignment a shared heap serves: one page. */
export const SHARED_MAX_ALIGNMENT: number = PAGE;
/** Largest byte range a shared heap may end at: offsets are 31-bit. */
export const SHARED_MAX_BYTE_END: number = 0x7fffffff;
const MIN_PAGES = SLAB_PAGES;

/** Memory a shared heap can live in. */
export type SharedMemory = SharedArrayBuffer | WasmMemory;

/** Options of {@linkcode SharedHeap.create}. */
export interface SharedHeapOptions {
  /**
   * Where the heap starts in the memory (a multiple of 8). Its header goes
   * at the next multiple of 64 (a cache line), which
   * {@linkcode SharedHeap.byteOffset} reports.
   *
   * @default {0}
   */
  byteOffset?: number;
  /**
   * Bytes of the memory the heap takes, header and page metadata included.
   *
   * @default {the rest of the memory, up to 2 GiB}
   */
  byteLength?: number;
  /**
   * How long a call waits for the shared core lock before it throws
   * {@linkcode HeapBusyError}, in milliseconds. Threads that may block
   * (Workers, Deno's and Node's main threads) sleep in `Atomics.wait`; a
   * browser's main thread spins for this long.
   *
   * @default {2000}
   */
  lockTimeoutMs?: number;
  /**
   * Debug mode for hunting a bug: this handle checks the heap's integrity
   * (under the core lock) after every allocation, free and reclaim, and
   * fills a block with `JUNK_BYTE` before freeing it (slow). Views cannot
   * be detached (they share the heap's memory): a stale view reads junk.
   * Handles attached from this heap's descriptor are strict too.
   *
   * @default {false}
   */
  strict?: boolean;
}

/**
 * What a Worker needs to attach to a heap: post it with `postMessage` (the
 * shared memory is shared, not copied).
 */
export interface SharedHeapDescriptor {
  /** Always `"allot.shared-heap"`. */
  readonly kind: "allot.shared-heap";
  /** The shared memory. */
  readonly memory: SharedMemory;
  /** Where the heap starts in it. */
  readonly byteOffset: number;
  /** The heap's random identifier, checked on attach. */
  readonly heapId: number;
  /** Lock wait limit of the attached handle, in milliseconds. */
  readonly lockTimeoutMs?: number;
  /** Whether the attached handle runs in strict mode (see `SharedHeapOptions`). */
  readonly strict?: boolean;
}

/** Figures of a shared heap, summed over every arena. All values are bytes or counts. */
export interface SharedHeapStats {
  /** Bytes of the page area (what allocations can use). */
  byteLength: number;
  /**
   * Bytes of live blocks (block sizes: slab class or whole pages): current,
   * peak, allocated (sum of all allocations) and freed (sum of all frees)
   * since creation or the last reset, summed over every thread.
   */
  allocatedBytes: StatValues;
  /** Live blocks; `allocated` counts allocations, `freed` frees. */
  allocations: StatValues;
  /** @deprecated Use `allocations.current`; removed in the next minor version. */
  allocationCount: number;
  /** Bytes of pages held by slabs and large blocks. */
  reservedBytes: number;
  /** Bytes of free pages in the shared core. */
  freeBytes: number;
  /** @deprecated Use `allocatedBytes`; removed in the next minor version. */
  bytesInUse: number;
  /** @deprecated Use `reservedBytes`; removed in the next minor version. */
  bytesReserved: number;
  /** Arenas attached now (one per live handle). */
  arenas: number;
}

/** One arena in {@linkcode SharedHeap.arenas}. */
export interface ArenaInfo {
  /** The arena's index (0 to 63). */
  arena: number;
  /** `"attached"` or `"reclaiming"`. */
  state: "attached" | "reclaiming";
  /** Whether this is the calling handle's own arena. */
  self: boolean;
}

/** A block that an arena holds. */
export interface HeldBlock {
  /** Absolute byte offset of the block in the memory. */
  byteOffset: number;
  /** Usable bytes of the block. */
  byteLength: number;
}

/** Options of {@linkcode SharedHeap.reclaim}. */
export interface ReclaimOptions {
  /**
   * Offsets of the dead arena's blocks that are still in use elsewhere (for
   * example handed to another Worker): they stay live and can be freed later
   * from any thread.
   *
   * @default {[]}
   */
  keep?: Iterable<number>;
}

/** What {@linkcode SharedHeap.reclaim} did. */
export interface ReclaimReport {
  /** The reclaimed arena. */
  arena: number;
  /** Blocks freed. */
  freed: HeldBlock[];
  /** Blocks kept live, as asked. */
  kept: HeldBlock[];
}

const CAN_BLOCK: boolean = (() => {
  try {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
    return true;
  } catch {
    return false;
  }
})();

const SAB_BYTE_LENGTH = typeof SharedArrayBuffer === "undefined"
  ? undefined
  : Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, "byteLength")!
    .get!;
const WASM_MEMORY_BUFFER = Object.getOwnPropertyDescriptor(
  WebAssembly.Memory.prototype,
  "buffer",
)!.get!;

/**
 * The true byte length of a shared buffer, read through the built-in getter
 * (a subclass that overrides `byteLength` cannot size the heap's views).
 */
function sabByteLength(buffer: SharedArrayBuffer): number {
  return SAB_BYTE_LENGTH!.call(buffer) as number;
}

function sharedBuffer(memory: unknown): SharedArrayBuffer {
  let buffer: unknown;
  let wasm = false;
  try {
    wasm = memory instanceof WebAssembly.Memory;
    // the built-in getters: a look-alike (`Object.create` of the prototype)
    // or a proxy throws, and is not shared memory
    buffer = wasm ? WASM_MEMORY_BUFFER.call(memory) : memory;
    SAB_BYTE_LENGTH?.call(buffer);
  } catch {
    buffer = undefined;
  }
  if (
    typeof SharedArrayBuffer === "undefined" ||
    !(buffer instanceof SharedArrayBuffer)
  ) {
    const what = wasm
      ? "a WebAssembly.Memory made without shared: true"
      : buffer instanceof ArrayBuffer
      ? "an ArrayBuffer"
      : describeValue(memory);
    throw new NotSharedMemoryError(
      `Cannot place a shared heap: the memory must be a SharedArrayBuffer or a shared WebAssembly.Memory, received ${what}`,
      { name: "memory", value: memory, limit: "SharedArrayBuffer" },
    );
  }
  return buffer;
}

function randomId(): number {
  const word = new Uint32Array(1);
  crypto.getRandomValues(word);
  return (word[0] & 0x7fffffff) | 1;
}

/** An open heap found in a memory by {@linkcode _openHeapOverlapping}. */
interface _OpenHeap {
  heapId: number;
  start: number;
  end: number;
  attached: number;
}

/**
 * The first open heap with handles attached whose bytes meet `[start, end)`,
 * found by reading every 64-byte line of the memory for a header (a heap's
 * header starts on a line and records its length; a header is believed only
 * when its geometry is the one create() writes at that place, so a copy of
 * a header elsewhere is not). Heaps of every agent that shares the memory
 * are seen, since their headers are in it; two create() calls racing in two
 * agents are not (neither header is written when the other looks).
 */
function _openHeapOverlapping(
  i32: Int32Array,
  start: number,
  end: number,
): _OpenHeap | undefined {
  const last = Math.min(i32.length * 4, SHARED_MAX_BYTE_END) - HEADER_BYTES;
  for (let at = 0; at <= last; at += 64) {
    const w = at >> 2;
    if (i32[w + H_MAGIC] !== MAGIC) continue;
    const length = i32[w + H_BYTE_LENGTH];
    const pages = i32[w + H_PAGES];
    if (
      Atomics.load(i32, w + H_MAGIC) !== MAGIC ||
      i32[w + H_VERSION] !== VERSION ||
      Atomics.load(i32, w + H_STATE) !== STATE_OPEN ||
      i32[w + H_META] !== at + HEADER_BYTES || !(length > 0) ||
      at + length > i32.length * 4 || pages < MIN_PAGES ||
      i32[w + H_PAGE_BASE] !== pageBaseOf(at, pages)
    ) continue;
    const attached = Atomics.load(i32, w + H_ATTACHED);
    if (attached > 0 && at < end && start < at + length) {
      return {
        heapId: i32[w + H_HEAP_ID],
        start: at,
        end: at + length,
        attached,
      };
    }
  }
  return undefined;
}

function blockList(found: HeldBlock[]): HeldBlock[] {
  return found.sort((a, b) => a.byteOffset - b.byteOffset);
}

/**
 * A heap whose whole state lives in shared memory, so that every Worker that
 * attaches allocates from it and frees to it at once, like mimalloc:
 *
 * - Each handle owns an **arena**. Blocks up to 8 KiB come from the arena's
 *   64 KiB **slabs** (24 size classes, 64-byte granularity): allocation and
 *   a free by the owner are plain reads and writes on the arena's own slab
 *   (no `Atomics` call), with a state byte per block that catches double
 *   frees; a free from another thread clears it with a compare-exchange.
 *   Two threads freeing one block at the same instant are caught in strict
 *   mode only (it takes the compare-exchange path for the owner too).
 * - A free from **another** thread pushes the block on the slab's remote
 *   list with one compare-exchange; the owner takes the whole list back in
 *   one exchange when its slab runs dry. No lock on either path.
 * - Slabs and blocks over 8 KiB come from the **shared core**: 4 KiB pages,
 *   segregated free spans with coalescing, behind one lock word. Threads
 *   that may block wait with `Atomics.wait`; a browser's main thread spins
 *   (it may not block) and throws {@linkcode HeapBusyError} after
 *   `lockTimeoutMs`.
 * - Counts live in the arena table (one cache line per arena, written only
 *   by its owner), so {@linkcode SharedHeap.stats} sums them without a
 *   shared counter to fight over.
 *
 * A handle is for the thread that made it: create one with
 * {@linkcode SharedHeap.create} or, in a Worker, {@linkcode SharedHeap.attach}
 * from the {@linkcode SharedHeap.descriptor} posted to it. `detach()` gives
 * the arena back (blocks still live stay live and can be freed from any
 * thread). A Worker that is terminated never detaches: its blocks stay
 * unused (never handed out again) until {@linkcode SharedHeap.reclaim}
 * frees them, keeping those still in use elsewhere.
 *
 * Offsets are absolute byte offsets in the shared buffer. Alignment up to
 * 4096 bytes (64 by default).
 *
 * @example Allocate here, free in another arena
 * ```ts
 * import { SharedHeap } from "@allot/threads";
 * import assert from "node:assert/strict";
 *
 * using heap = SharedHeap.create(4 << 20);
 * using other = SharedHeap.attach(heap.descriptor()); // as a Worker would
 * const a = heap.alloc(100);
 * heap.bytes(a, 100).fill(7);
 * assert.equal(heap.stats().allocatedBytes.current, 128);
 * other.free(a); // a remote free: one compare-exchange
 * assert.equal(heap.stats().allocatedBytes.current, 0);
 * ```
 */
export class SharedHeap {
  #buffer: SharedArrayBuffer;
  #memory: SharedMemory;
  #i32: Int32Array;
  #f64: Float64Array;
  /** Each arena's live blocks and bytes, as one peak share read them. */
  #liveScratch: Int32Array = new Int32Array(MAX_ARENAS * 4);
  #u8: Uint8Array;
  #u16: Uint16Array;
  #base: number; // byteOffset of the header
  #pages: number;
  #pageBase: number;
  #pageBytes: number; // bytes of the page area
  #meta: number; // word index of the first meta array
  #arenaWord: number;
  #arena: number;
  #token: number;
  #timeoutMs: number;
  #open = true;
  #strict: boolean;
  #stateWord: number;
  // Owner-only slab lists per class (absolute byte offsets).
  #slabs: number[][] = CLASS_SIZES.map(() => []);
  #cur: Int32Array = new Int32Array(CLASS_SIZES.length);
  // Owner-only: one empty slab per class kept back from the core (0: none).
  #spare: Int32Array = new Int32Array(CLASS_SIZES.length);
  // Owner-only cache of freed large spans, by bin (first pages).
  #cache: SpanCache;
  // Pages of the caches' total budget this arena holds (owner-only mirror
  // of its R_BUDGET word): its span cache never holds more.
  #cacheLimit = 0;
  // The budget of all the arenas' caches together (a quarter of the heap),
  // and the bound of a return list.
  #cacheTotal: number;
  #returnLimit: number;

  private constructor(
    memory: SharedMemory,
    byteOffset: number,
    timeoutMs: number,
    strict: boolean,
  ) {
    this.#memory = memory;
    this.#buffer = sharedBuffer(memory);
    const length = sabByteLength(this.#buffer);
    this.#i32 = new Int32Array(this.#buffer, 0, length >> 2);
    this.#u8 = new Uint8Array(this.#buffer);
    this.#f64 = new Float64Array(this.#buffer, 0, length >> 3);
    this.#u16 = new Uint16Array(this.#buffer, 0, length >> 1);
    this.#base = byteOffset;
    const h = byteOffset >> 2;
    this.#stateWord = h + H_STATE;
    this.#pages = this.#i32[h + H_PAGES];
    this.#pageBase = this.#i32[h + H_PAGE_BASE];
    this.#pageBytes = this.#pages * PAGE;
    this.#meta = this.#i32[h + H_META] >> 2;
    this.#timeoutMs = timeoutMs;
    this.#cacheTotal = this.#pages >> 2;
    this.#returnLimit = Math.min(16384, this.#pages >> 4);
    this.#cache = new SpanCache(this.#i32, this.#meta);
    this.#arena = -1;
    this.#token = 0;
    this.#arenaWord = 0;
    this.#strict = strict;
    if (strict) this.#makeStrict();
  }

  /**
   * Places a new heap in shared memory (or in a new `SharedArrayBuffer` of
   * `memory` bytes) and returns the creator's handle, which owns arena 0.
   * Only {@linkcode SharedHeap.close} by this handle closes the heap.
   *
   * @param memory A `SharedArrayBuffer`, a shared `WebAssembly.Memory`, or a
   * byte length for a new `SharedArrayBuffer`.
   * @param options Where the heap sits and the lock wait limit.
   * @returns The creator's handle.
   * @throws {NotSharedMemoryError} When the memory is not shared.
   * @throws {InvalidArgumentError} When the range is misaligned, out of the
   * memory, past 2 GiB, or too small for one slab (about 80 KiB).
   * @throws {HeapOverlapError} When an open heap with handles attached
   * (made here or in any Worker sharing the memory) manages any of the
   * bytes; nothing is written. Two create() calls racing in two Workers over
   * one range are not detected.
   *
   * @example
   * ```ts
   * import { SharedHeap } from "@allot/threads";
   * import assert from "node:assert/strict";
   *
   * const memory = new WebAssembly.Memory({ initial: 64, maximum: 64, shared: true });
   * using heap = SharedHeap.create(memory);
   * const offset = heap.alloc(1 << 16, 4096);
   * assert.equal(offset % 4096, 0);
   * heap.free(offset);
   * ```
   */
  static create(
    memory: SharedMemory | number,
    options: SharedHeapOptions = {},
  ): SharedHeap {
    const fresh = typeof memory === "number";
    if (typeof memory === "number") {
      validateInteger(memory, 1, SHARED_MAX_BYTE_END, "byteLength");
      memory = newSharedBuffer(memory);
    }
    validateObject(options, "options");
    validateOptionKeys(
      options,
      ["byteOffset", "byteLength", "lockTimeoutMs", "strict"],
      "SharedHeap",
    );
    const buffer = sharedBuffer(memory);
    const bufferLength = sabByteLength(buffer);
    const byteOffset = optionOr(options.byteOffset, 0);
    validateInteger(byteOffset, 0, bufferLength, "byteOffset");
    if (byteOffset % 8 !== 0) {
      throw new InvalidArgumentError(
        `Invalid byteOffset: must be a multiple of 8, received ${byteOffset}`,
        { name: "byteOffset", value: byteOffset, limit: 8 },
      );
    }
    const room = Math.min(bufferLength, SHARED_MAX_BYTE_END) - byteOffset;
    const byteLength = optionOr(options.byteLength, Math.max(room, 0));
    validateInteger(byteLength, 0, Math.max(room, 0), "byteLength");
    const timeoutMs = validateTimeout(options.lockTimeoutMs);
    const strict = validateStrict(options.strict);
    const end = byteOffset + byteLength;
    // The header starts on a cache line, so that its read-mostly line, its
    // lock line and each arena's line are distinct 64-byte lines (`+ 0`
    // turns a -0 offset into 0).
    const base = Math.ceil(byteOffset / 64) * 64 + 0;
    const metaStart = base + HEADER_BYTES;
    const pages = pagesOf(base, end);
    if (pages < MIN_PAGES) {
      const need = pageBaseOf(base, MIN_PAGES) + MIN_PAGES * PAGE - byteOffset;
      throw new InvalidArgumentError(
        `Invalid byteLength: a shared heap needs at least ${need} bytes, received ${byteLength}`,
        { name: "byteLength", value: byteLength, limit: need },
      );
    }
    const i32 = new Int32Array(buffer, 0, bufferLength >> 2);
    const h = base >> 2;
    // A heap still open with handles attached whose range meets this one: a
    // new header and free page records there would hand its arenas and
    // pages out a second time. A new buffer holds no heap.
    const other = fresh ? undefined : _openHeapOverlapping(i32, base, end);
    if (other !== undefined) {
      throw new HeapOverlapError(
        `Cannot place a shared heap at bytes [${base}, ${end}): heap ${other.heapId} is open at bytes [${other.start}, ${other.end}) of this memory with ${other.attached} handles attached (close() it first, or place the heap elsewhere)`,
        {
          name: "byteOffset",
          value: base,
          limit: `outside [${other.start}, ${other.end})`,
        },
      );
    }
    i32.fill(0, h, h + (HEADER_BYTES >> 2));
    // Zero page records are "no span": a new SharedArrayBuffer is zero
    // already, so a heap in one made here touches no record up front.
    const meta = metaStart >> 2;
    if (!fresh) i32.fill(0, meta, meta + META_WORDS * pages);
    i32[h + H_PAGES] = pages;
    i32[h + H_PAGE_BASE] = pageBaseOf(base, pages);
    i32[h + H_META] = metaStart;
    i32[h + H_BYTE_LENGTH] = end - base;
    i32.fill(-1, h + H_BINS, h + H_BINS + BINS);
    i32[h + H_HEAP_ID] = randomId();
    i32[h + H_VERSION] = VERSION;
    i32[h + H_STATE] = STATE_OPEN;
    const heap = new SharedHeap(memory, base, timeoutMs, strict);
    heap.#makeFree(0, pages);
    i32[h + H_FREE_PAGES] = pages;
    i32[h + H_CACHE_POOL] = pages >> 2;
    Atomics.store(i32, h + H_MAGIC, MAGIC);
    heap.#claimArena();
    return heap;
  }

  /**
   * Attaches to a heap from its descriptor (in a Worker, from the message
   * that carried it) and claims an arena for this handle.
   *
   * @param descriptor What {@linkcode SharedHeap.descriptor} returned.
   * @returns A handle for this thread.
   * @throws {NotSharedMemoryError} When the descriptor's memory is not shared.
   * @throws {ForeignHeapError} When the memory holds no heap at that offset,
   * or another heap than `heapId`.
   * @throws {HeapClosedError} When the owner closed the heap.
   * @throws {InvalidArgumentError} When all 64 arenas are attached.
   */
  static attach(descriptor: SharedHeapDescriptor): SharedHeap {
    if (typeof descriptor !== "object" || descriptor === null) {
      throw new InvalidArgumentError(
        `Cannot attach: the descriptor must be an object, received ${
          describeValue(descriptor)
        }`,
        { name: "descriptor", value: descriptor },
      );
    }
    // each field is read once: a getter answering another memory later
    // would have this handle run over memory that was never checked
    const memory = descriptor.memory;
    const buffer = sharedBuffer(memory);
    const bufferLength = sabByteLength(buffer);
    const byteOffset = descriptor.byteOffset;
    const heapId = descriptor.heapId;
    if (
      !Number.isSafeInteger(byteOffset) || byteOffset < 0 ||
      byteOffset % 8 !== 0 || byteOffset + HEADER_BYTES > bufferLength
    ) {
      throw new ForeignHeapError(
        `Cannot attach: no shared heap at byteOffset ${
          describeValue(byteOffset)
        } of a ${bufferLength}-byte memory`,
      );
    }
    const i32 = new Int32Array(buffer, byteOffset, HEADER_BYTES >> 2);
    if (Atomics.load(i32, H_MAGIC) !== MAGIC) {
      throw new ForeignHeapError(
        `Cannot attach: no shared heap at byteOffset ${byteOffset} (no allot header there)`,
      );
    }
    if (i32[H_VERSION] !== VERSION) {
      throw new ForeignHeapError(
        `Cannot attach: the heap at byteOffset ${byteOffset} has layout version ${
          i32[H_VERSION]
        }, this build reads version ${VERSION} only`,
      );
    }
    // The geometry words must be what create() wrote for this place: a
    // header copied into a smaller memory, or corrupted, would send every
    // call past the memory's end or over another heap's pages.
    const length = i32[H_BYTE_LENGTH], pages = i32[H_PAGES];
    if (
      !(length > 0) || byteOffset + length > bufferLength ||
      byteOffset + length > SHARED_MAX_BYTE_END ||
      pages < MIN_PAGES || pages !== pagesOf(byteOffset, byteOffset + length) ||
      i32[H_PAGE_BASE] !== pageBaseOf(byteOffset, pages) ||
      i32[H_META] !== byteOffset + HEADER_BYTES
    ) {
      throw new ForeignHeapError(
        `Cannot attach: the heap header at byteOffset ${byteOffset} describes ${length} bytes with ${pages} pages, which a ${bufferLength}-byte memory cannot hold or create() never wrote (a corrupted or copied header)`,
      );
    }
    if (i32[H_HEAP_ID] !== heapId) {
      throw new ForeignHeapError(
        `Cannot attach: the descriptor names heap ${
          describeValue(heapId)
        }, the memory holds heap ${i32[H_HEAP_ID]}`,
      );
    }
    if (Atomics.load(i32, H_STATE) !== STATE_OPEN) {
      throw new HeapClosedError(
        `Cannot attach to heap ${heapId}: its owner closed it`,
      );
    }
    const heap = new SharedHeap(
      memory,
      byteOffset,
      validateTimeout(descriptor.lockTimeoutMs),
      validateStrict(descriptor.strict),
    );
    heap.#claimArena();
    return heap;
  }

  /** Whether this handle runs in strict mode (see `SharedHeapOptions`). */
  get strict(): boolean {
    return this.#strict;
  }

  /** The heap's random identifier (the same in every handle). */
  get heapId(): number {
    return this.#i32[(this.#base >> 2) + H_HEAP_ID];
  }

  /** This handle's arena (0 for the creator), or -1 after detach. */
  get arena(): number {
    return this.#arena;
  }

  /** The shared buffer (for views: `new Float32Array(heap.buffer, offset, n)`). */
  get buffer(): SharedArrayBuffer {
    return this.#buffer;
  }

  /** The memory the heap was placed in. */
  get memory(): SharedMemory {
    return this.#memory;
  }

  /** Where the heap's header starts in the buffer. */
  get byteOffset(): number {
    return this.#base;
  }

  /** Bytes of the buffer the heap takes, header and metadata included. */
  get byteLength(): number {
    return this.#i32[(this.#base >> 2) + H_BYTE_LENGTH];
  }

  /** Whether this handle can allocate: attached, and the heap is open. */
  get isOpen(): boolean {
    return this.#open &&
      Atomics.load(this.#i32, (this.#base >> 2) + H_STATE) === STATE_OPEN;
  }

  /**
   * What a Worker needs to attach: post it with `postMessage`.
   *
   * @returns The descriptor.
   */
  descriptor(): SharedHeapDescriptor {
    return {
      kind: "allot.shared-heap",
      memory: this.#memory,
      byteOffset: this.#base,
      heapId: this.heapId,
      lockTimeoutMs: this.#timeoutMs,
      strict: this.#strict,
    };
  }

  /**
   * Allocates `byteLength` bytes aligned to `alignment`. Zero bytes give the
   * smallest block (64 bytes).
   *
   * @param byteLength Number of bytes.
   * @param alignment A power of two up to 4096 (64 when omitted).
   * @returns The absolute byte offset of the block in the buffer.
   * @throws {InvalidArgumentError} For a bad length or alignment.
   * @throws {OutOfMemoryError} When no free pages are left.
   * @throws {HeapClosedError} After detach or close.
   * @throws {HeapBusyError} When the core lock stays held too long.
   */
  alloc(byteLength: number, alignment?: number): number {
    // Fast path, written out so that it compiles to one function: the
    // default alignment, a block at hand in this arena's current slab or
    // span cache. Plain reads and writes only: every word it touches is
    // this arena's alone (a slab's stack and bump, a cached span's record).
    if (
      (alignment === undefined || alignment === 64) &&
      typeof byteLength === "number" &&
      (byteLength >>> 0) === byteLength && this.#open &&
      this.#i32[this.#stateWord] === STATE_OPEN
    ) {
      const i32 = this.#i32, a = this.#arenaWord;
      if (byteLength <= MAX_SMALL) {
        const cls = CLASS_OF[(byteLength + 63) >> 6];
        const slab = this.#cur[cls];
        if (slab !== 0) {
          const s = slab >> 2;
          const top = i32[s + S_FREE];
          let k = -1;
          if (top !== 0) {
            k = this.#u16[((slab + S_STACK) >> 1) + top - 1];
            i32[s + S_FREE] = top - 1;
          } else if (i32[s + S_BUMP] < i32[s + S_CAP]) k = i32[s + S_BUMP]++;
          if (k >= 0) {
            i32[s + S_USED]++;
            const size = CLASS_SIZES[cls];
            // Only the owner marks a block live; frees clear it.
            this.#u8[slab + S_STATES + k] = 1;
            // The figures: plain writes to this arena's own line, and a
            // compare with its limits (see `A_LIMIT_BLOCKS`).
            const an = i32[a + A_ALLOCS] + 1;
            const ay = i32[a + A_ALLOC_UNITS] + (size >> 6);
            i32[a + A_ALLOCS] = an;
            i32[a + A_ALLOC_UNITS] = ay;
            if (an > i32[a + A_LIMIT_BLOCKS] || ay > i32[a + A_LIMIT_UNITS]) {
              this.#overLimit();
            }
            return slab + SLAB_HEADER + k * size;
          }
        }
      } else if (byteLength <= SHARED_MAX_BYTE_END) {
        const pages = (byteLength + PAGE - 1) >>> PAGE_SHIFT;
        // A span of the request's own bin that fits (the same size freed
        // before), else one of the first two bins whose every span fits
        // (at most about 1.5x the request).
        const top = 31 - Math.clz32(pages);
        let bin = pages;
        if (pages >= 4) bin = 4 * (top - 1) + ((pages >>> (top - 2)) & 3);
        const cache = this.#cache;
        let page = cache.takeFit(bin, pages);
        if (page < 0) {
          if (pages >= 4 && (pages & ((1 << (top - 2)) - 1)) !== 0) bin++;
          page = cache.take(bin, bin + 2 < BINS ? bin + 2 : BINS);
        }
        if (page >= 0) {
          const w = this.#meta + (page << 3);
          // A plain store: a cached span is this arena's alone, and the
          // offset reaches another thread only through a message or an
          // atomic write, which publishes this store too.
          i32[w + M_KIND] = K_LARGE;
          i32[w + M_AGE] = 0; // not owned (the stamp of its cached life)
          i32[a + A_LARGE_HITS]++;
          const an = i32[a + A_ALLOCS] + 1;
          const ay = i32[a + A_ALLOC_UNITS] + (i32[w + M_LEN] << 6);
          i32[a + A_ALLOCS] = an;
          i32[a + A_ALLOC_UNITS] = ay;
          if (an > i32[a + A_LIMIT_BLOCKS] || ay > i32[a + A_LIMIT_UNITS]) {
            this.#overLimit();
          }
          return this.#pageBase + (page << PAGE_SHIFT);
        }
      }
    }
    const offset = this.tryAlloc(byteLength, alignment);
    if (offset === undefined) this.#throwOom(byteLength);
    return offset;
  }

  /**
   * Like {@linkcode SharedHeap.alloc}, but returns `undefined` when no
   * memory is left (invalid arguments still throw).
   *
   * @param byteLength Number of bytes.
   * @param alignment A power of two up to 4096 (64 when omitted).
   * @returns The absolute byte offset, or `undefined`.
   */
  tryAlloc(byteLength: number, alignment?: number): number | undefined {
    if (
      !(typeof byteLength === "number" && byteLength >= 0 &&
        byteLength <= SHARED_MAX_BYTE_END && Number.isInteger(byteLength))
    ) validateByteLength(byteLength, SHARED_MAX_BYTE_END);
    if (alignment === undefined) alignment = 64;
    else if (alignment !== 64) {
      validateAlignment(alignment, SHARED_MAX_ALIGNMENT);
    }
    this.#checkOpen("allocate");
    if (byteLength <= MAX_SMALL && alignment <= 256) {
      let cls = CLASS_OF[(byteLength + 63) >> 6];
      if (alignment > 64) {
        while (cls < CLASS_SIZES.length && CLASS_SIZES[cls] % alignment) cls++;
      }
      if (cls < CLASS_SIZES.length) return this.#allocSmall(cls);
    }
    return this.#allocLarge(byteLength);
  }

  /**
   * Frees a block from any handle of this heap (any thread). A block of
   * another arena goes on that slab's remote list, without a lock.
   *
   * @param byteOffset What `alloc` returned (in any handle).
   * @throws {InvalidArgumentError} When the offset is not a non-negative
   * integer.
   * @throws {DoubleFreeError} When no live block of this heap starts there
   * (freed already, never allocated here, or inside a block).
   * @throws {HeapClosedError} After detach or close.
   */
  free(byteOffset: number): void {
    // Fast path, written out: a block of this arena freed by this arena.
    // The state byte (small) or kind word (large) is checked and cleared
    // with a plain read and write, no compare-exchange: only a free racing
    // with another thread's free of the same block could slip past, and
    // that race is a double free the caller already committed (strict mode
    // takes the checked path below and catches it). Sequential double
    // frees, from any thread, are caught either way.
    const rel = typeof byteOffset === "number"
      ? byteOffset - this.#pageBase
      : -1;
    if (
      (rel >>> 0) === rel && rel < this.#pageBytes && this.#open &&
      this.#i32[this.#stateWord] === STATE_OPEN
    ) {
      const i32 = this.#i32, a = this.#arenaWord;
      const page = rel >>> PAGE_SHIFT;
      const start = i32[this.#meta + (page << 3) + M_START];
      if (start !== 0) {
        const slab = this.#pageBase + ((start - 1) << PAGE_SHIFT),
          s = slab >> 2;
        // A plain read: only this handle ever sets or clears its own token.
        if (i32[s + S_OWNER] === this.#token) {
          const cls = i32[s + S_CLASS], size = CLASS_SIZES[cls];
          const r = byteOffset - slab - SLAB_HEADER;
          const k = ((r >>> 6) * CLASS_RECIPROCALS[cls]) >>> 20;
          const state = slab + S_STATES + k;
          if (
            r >= 0 && k * size === r && k < i32[s + S_CAP] &&
            this.#u8[state] === 1
          ) {
            this.#u8[state] = 0;
            const fn = i32[a + A_FREES] + 1;
            const fy = i32[a + A_FREED_UNITS] + (size >> 6);
            i32[a + A_FREES] = fn;
            i32[a + A_FREED_UNITS] = fy;
            if ((fn | fy) >= TOTAL_CARRY) this.#carry();
            const top = i32[s + S_FREE];
            this.#u16[((slab + S_STACK) >> 1) + top] = k;
            i32[s + S_FREE] = top + 1;
            if (--i32[s + S_USED] === 0) this.#maybeRelease(slab);
            return;
          }
        }
      } else if ((rel & (PAGE - 1)) === 0) {
        const w = this.#meta + (page << 3);
        if (
          i32[w + M_OWNER] === this.#token && i32[w + M_KIND] === K_LARGE &&
          i32[w + M_AGE] !== OWNED_SPAN && this.#cacheTotal !== 0
        ) {
          // The owner keeps the span for its next large block: no lock.
          i32[w + M_KIND] = K_CACHED;
          const fn = i32[a + A_FREES] + 1;
          const fy = i32[a + A_FREED_UNITS] + (i32[w + M_LEN] << 6);
          i32[a + A_FREES] = fn;
          i32[a + A_FREED_UNITS] = fy;
          if ((fn | fy) >= TOTAL_CARRY) this.#carry();
          const cache = this.#cache;
          cache.put(page);
          if (cache.pages > this.#cacheLimit) this.#overBudget();
          return;
        }
      }
    }
    this.#freeChecked(byteOffset);
  }

  /**
   * Any block, from any arena: every check, and compare-exchanges that
   * catch two threads freeing one block at once.
   */
  #freeChecked(byteOffset: number): void {
    this.#checkOpen("free");
    if (typeof byteOffset !== "number") {
      this.#throwNotBlock(byteOffset, "not a number");
    }
    const rel = byteOffset - this.#pageBase;
    if (
      !(rel >= 0 && rel < this.#pages * PAGE) || !Number.isInteger(byteOffset)
    ) this.#throwNotBlock(byteOffset, "outside the page area");
    const i32 = this.#i32, m = this.#meta;
    const page = rel >> PAGE_SHIFT;
    // Only the pages of a live slab name their slab's first page (others
    // hold 0), so this one read tells small from large.
    const start = i32[m + (page << 3) + M_START];
    if (start !== 0) {
      return this.#freeSmall(this.#pageBase + (start - 1) * PAGE, byteOffset);
    }
    if ((rel & (PAGE - 1)) === 0) return this.#freeLarge(page, byteOffset);
    this.#throwNotBlock(byteOffset, "not the start of a block");
  }

  /**
   * Usable bytes of a live block (its slab class or whole pages).
   *
   * @param byteOffset A live block.
   * @returns The block's usable length.
   * @throws {InvalidArgumentError} When the offset is not a live block.
   */
  usableByteLength(byteOffset: number): number {
    const found = this.#find(byteOffset);
    if (found === undefined) {
      this.#throwNotBlock(byteOffset, "not live", "measure");
    }
    return found;
  }

  /**
   * A byte view of the first `byteLength` bytes of a live block (no copy).
   * The view cannot reach past the block: use `heap.buffer` for raw access.
   *
   * @param byteOffset A live block (what `alloc` returned, in any handle).
   * @param byteLength Number of bytes, at most the block's usable length.
   * @returns The view.
   * @throws {InvalidArgumentError} When the offset is not a live block, or
   * the length is not an integer in `[0, usableByteLength(byteOffset)]`.
   */
  bytes(byteOffset: number, byteLength: number): Uint8Array {
    const usable = this.#find(byteOffset);
    if (usable === undefined) {
      this.#throwNotBlock(byteOffset, "not live", "view");
    }
    validateInteger(byteLength, 0, usable, "byteLength");
    return this.#u8.subarray(byteOffset, byteOffset + byteLength);
  }

  /**
   * Figures summed over every arena's counters (each written only by its
   * owner, so the sum is exact once the threads are quiet).
   *
   * @returns The stats.
   */
  stats(): SharedHeapStats {
    const i32 = this.#i32, h = this.#base >> 2;
    let allocs = 0, allocUnits = 0, frees = 0, freedUnits = 0, arenas = 0;
    for (let a = 0; a < MAX_ARENAS; a++) {
      const w = h + H_ARENAS + a * ARENA_WORDS;
      allocs += i32[w + A_ALLOCS] + i32[w + A_ALLOCS_HI] * TOTAL_CARRY;
      allocUnits += i32[w + A_ALLOC_UNITS] +
        i32[w + A_ALLOC_UNITS_HI] * TOTAL_CARRY;
      frees += i32[w + A_FREES] + i32[w + A_FREES_HI] * TOTAL_CARRY;
      freedUnits += i32[w + A_FREED_UNITS] +
        i32[w + A_FREED_UNITS_HI] * TOTAL_CARRY;
      if (Atomics.load(i32, w + A_STATE) !== ARENA_FREE) arenas++;
    }
    const blocks = allocs - frees, bytes = (allocUnits - freedUnits) * 64;
    const f = this.#f64, r = (this.#base >> 3) + F_RESET;
    const free = Atomics.load(i32, h + H_FREE_PAGES) * PAGE;
    return {
      byteLength: this.#pages * PAGE,
      allocatedBytes: {
        current: bytes,
        peak: Math.max(bytes, Atomics.load(i32, h + H_PEAK_BYTES)),
        allocated: allocUnits * 64 - f[r + 1],
        freed: freedUnits * 64 - f[r + 3],
      },
      allocations: {
        current: blocks,
        peak: Math.max(blocks, Atomics.load(i32, h + H_PEAK_BLOCKS)),
        allocated: allocs - f[r],
        freed: frees - f[r + 2],
      },
      allocationCount: blocks,
      reservedBytes: this.#pages * PAGE - free,
      freeBytes: free,
      arenas,
      bytesInUse: bytes,
      bytesReserved: this.#pages * PAGE - free,
    };
  }

  /**
   * The arenas attached now (or being reclaimed). A Worker that was
   * terminated stays here until {@linkcode SharedHeap.reclaim}.
   *
   * @returns One entry per arena.
   */
  arenas(): ArenaInfo[] {
    const out: ArenaInfo[] = [];
    for (let a = 0; a < MAX_ARENAS; a++) {
      const state = Atomics.load(this.#i32, this.#arenaAt(a) + A_STATE);
      if (state === ARENA_FREE) continue;
      out.push({
        arena: a,
        state: state === ARENA_ATTACHED ? "attached" : "reclaiming",
        self: a === this.#arena,
      });
    }
    return out;
  }

  /**
   * The live blocks an attached arena allocated, found by walking the pages
   * (a report for a Worker that died: what it held).
   *
   * @param arena An arena index from {@linkcode SharedHeap.arenas}.
   * @returns The blocks, by offset.
   * @throws {InvalidArgumentError} When the arena is not attached.
   */
  blocksOf(arena: number): HeldBlock[] {
    const token = this.#attachedToken(arena, "list the blocks of");
    const found: HeldBlock[] = [];
    this.#walkOwned(token, (block) => found.push(block));
    return blockList(found);
  }

  /**
   * Frees the blocks of an arena whose Worker is gone (terminated without
   * `detach()`), except those in `keep`, which stay live and can be freed
   * later from any thread. The arena's slabs are then abandoned (freed when
   * their last block goes) and its slot can be attached again.
   *
   * Only call it for an arena whose thread has stopped (after the Worker's
   * `exit` or `terminate()`): the heap cannot tell a dead thread from a slow
   * one. When that thread died while holding the shared core lock, the core
   * may be half-updated: this throws {@linkcode HeapBusyError} and changes
   * nothing.
   *
   * @param arena The dead Worker's arena.
   * @param options Offsets still in use elsewhere.
   * @returns What was freed and what was kept.
   * @throws {InvalidArgumentError} When the arena is this handle's own, or not
   * attached, or `keep` holds an offset that is not one of the arena's live
   * blocks, or iterating `keep` detached the arena's handle (and attached
   * another in its slot); nothing changes.
   * @throws {HeapClosedError} When this handle is detached (also by iterating
   * `keep`); nothing changes.
   * @throws {HeapBusyError} When the dead arena holds the core lock, or the
   * core lock stays held by another thread past the time limit; nothing
   * changes (the arena can be reclaimed later).
   */
  reclaim(arena: number, options: ReclaimOptions = {}): ReclaimReport {
    this.#checkOpen("reclaim");
    validateObject(options, "options");
    // a misspelt `keep` freed the blocks it should have kept
    validateOptionKeys(options, ["keep"], "SharedHeap.reclaim()");
    const token = this.#attachedToken(arena, "reclaim");
    if (arena === this.#arena) {
      throw new InvalidArgumentError(
        `Cannot reclaim arena ${arena}: it is this handle's own (detach it instead)`,
        { name: "arena", value: arena, limit: "another handle's arena" },
      );
    }
    const keep = keepSet(options.keep);
    // `keep` is the caller's iterable: its code may have detached this
    // handle, or the arena's handle and attached another in its slot.
    this.#checkOpen("reclaim");
    if (this.#attachedToken(arena, "reclaim") !== token) {
      throw new InvalidArgumentError(
        `Cannot reclaim arena ${arena}: it was detached and attached again while keep was read (by another handle now); nothing changed`,
        { name: "arena", value: arena, limit: "the arena as it was called" },
      );
    }
    const i32 = this.#i32, aw = this.#arenaAt(arena);
    // (Token 0: the Worker died claiming the slot, before it had a token;
    // a free lock reads 0 too and is not its.)
    if (
      token !== 0 && Atomics.load(i32, (this.#base >> 2) + H_LOCK) === token
    ) {
      throw new HeapBusyError(
        `Cannot reclaim arena ${arena}: it died holding the shared core lock, the core state is unknown`,
        arena,
      );
    }
    if (
      Atomics.compareExchange(
        i32,
        aw + A_STATE,
        ARENA_ATTACHED,
        ARENA_RECLAIMING,
      ) !== ARENA_ATTACHED
    ) {
      throw new InvalidArgumentError(
        `Cannot reclaim arena ${arena}: another handle is reclaiming it`,
        { name: "arena", value: arena, limit: "attached" },
      );
    }
    const freed: HeldBlock[] = [], kept: HeldBlock[] = [];
    const slabs = new Set<number>();
    const large: number[] = [];
    let blocks = 0, bytes = 0;
    // All or nothing: the walk and every change to the core happen under one
    // hold of the core lock, taken before anything changes (a busy core, or
    // a keep offset that is not one of the arena's blocks, changes nothing
    // and the arena can be reclaimed later); the slab work after it never
    // fails (a busy core leaves an emptied slab abandoned, never ownerless).
    this.#lockOrReattach(aw, "reclaim");
    try {
      this.#walkLocked(token, (block, slab) => {
        if (keep.has(block.byteOffset)) kept.push(block);
        else {
          freed.push(block);
          if (slab === 0) large.push(block.byteOffset);
        }
        if (slab !== 0) slabs.add(slab);
      }, slabs);
      if (kept.length !== keep.size) {
        const found = new Set(kept.map((b) => b.byteOffset));
        const stray = [...keep].find((o) => !found.has(o));
        throw new InvalidArgumentError(
          `Cannot reclaim arena ${arena}: keep holds ${stray}, not the offset of one of its live blocks`,
          { name: "keep", value: stray, limit: "a live block of the arena" },
        );
      }
    } catch (error) {
      this.#unlock();
      Atomics.store(i32, aw + A_STATE, ARENA_ATTACHED);
      throw error;
    }
    try {
      // Spans the dead arena kept cached or had returned: back to the core.
      this.#releaseReturnsLocked(
        arena,
        Atomics.exchange(i32, this.#returnsAt(arena), RETURNS_CLOSED),
      );
      for (let p = 0; p < this.#pages;) {
        const w = this.#meta + (p << 3), len = i32[w + M_LEN];
        if (i32[w + M_KIND] === K_CACHED && i32[w + M_OWNER] === token) {
          this.#releaseSpan(p);
        }
        p += len > 0 ? len : 1;
      }
      for (const offset of large) {
        const page = (offset - this.#pageBase) >> PAGE_SHIFT;
        const w = this.#meta + (page << 3);
        // Freed by another thread meanwhile (a hand-off left out of `keep`):
        // that free released it already.
        if (
          Atomics.compareExchange(i32, w + M_KIND, K_LARGE, K_NONE) === K_LARGE
        ) {
          i32[w + M_AGE] = 0; // a dead owner's mark goes with its span
          bytes += i32[w + M_LEN] * PAGE;
          blocks++;
          this.#releaseSpan(page);
        }
      }
    } finally {
      this.#unlock();
    }
    // Small blocks: clear their bits and put them on the slab's own list.
    const freedSet = new Set(freed.map((b) => b.byteOffset));
    for (const slab of slabs) {
      const s = slab >> 2;
      const size = i32[s + S_SIZE];
      this.#collect(slab);
      const stack = (slab + S_STACK) >> 1;
      let top = i32[s + S_FREE], used = i32[s + S_USED];
      const bump = i32[s + S_BUMP];
      for (let k = 0; k < bump; k++) {
        if (!freedSet.has(slab + SLAB_HEADER + k * size)) continue;
        // A compare-exchange: a block another thread frees meanwhile (a
        // hand-off left out of `keep`) is on the remote list, not twice here.
        if (
          Atomics.compareExchange(this.#u8, slab + S_STATES + k, 1, 0) !== 1 &&
          Atomics.compareExchange(
              this.#u8,
              slab + S_STATES + k,
              OWNED_BLOCK,
              0,
            ) !== OWNED_BLOCK
        ) continue;
        this.#u16[stack + top++] = k;
        used--;
        blocks++;
        bytes += size;
      }
      i32[s + S_FREE] = top;
      i32[s + S_USED] = used;
      Atomics.store(i32, s + S_OWNER, OWNER_ABANDONED);
      this.#settleAbandoned(slab);
    }
    // The dead arena's frees: under the peak lock, which every writer of
    // another arena's figures holds.
    this.#lockPeaks();
    try {
      i32[aw + A_FREES] += blocks;
      i32[aw + A_FREED_UNITS] += bytes >> 6;
      this.#carryLocked(aw);
    } finally {
      this.#unlockPeaks();
    }
    // Its cache is empty now: its budget goes back to the pool.
    Atomics.add(
      i32,
      (this.#base >> 2) + H_CACHE_POOL,
      Atomics.exchange(i32, this.#returnsAt(arena) + R_BUDGET, 0),
    );
    Atomics.sub(i32, (this.#base >> 2) + H_ATTACHED, 1);
    Atomics.store(i32, aw + A_STATE, ARENA_FREE);
    return { arena, freed: blockList(freed), kept: blockList(kept) };
  }

  /**
   * Gives this handle's arena back: its empty slabs return to the core, the
   * others are abandoned (their live blocks stay live and are freed from any
   * handle; the slab goes back when the last one is freed). Afterwards this
   * handle refuses every call. Idempotent.
   *
   * @throws {HeapBusyError} When cached spans must go back to the core and
   * its lock stays held by another thread past the time limit: the handle
   * stays attached (it can still allocate and free), and a later `detach()`
   * finishes the work.
   */
  detach(): void {
    if (!this.#open) return;
    const i32 = this.#i32;
    // Closed first: a free from another arena that comes later goes to the
    // core; one that came before is on the list taken here.
    this.#adoptReturns(
      Atomics.exchange(i32, this.#returnsAt(this.#arena), RETURNS_CLOSED),
    );
    this.#flushCache(0);
    this.#trimBudget(0);
    for (let c = 0; c < CLASS_SIZES.length; c++) {
      for (const slab of this.#slabs[c]) {
        Atomics.store(i32, (slab >> 2) + S_OWNER, OWNER_ABANDONED);
        this.#settleAbandoned(slab);
      }
      this.#slabs[c] = [];
      this.#cur[c] = 0;
      this.#spare[c] = 0;
    }
    Atomics.sub(i32, (this.#base >> 2) + H_ATTACHED, 1);
    Atomics.store(i32, this.#arenaWord + A_STATE, ARENA_FREE);
    this.#open = false;
    this.#arena = -1;
  }

  /**
   * Closes the heap for every handle (only the creator, arena 0, may):
   * later calls in any thread throw {@linkcode HeapClosedError}. Blocks still
   * live are abandoned with the memory. Detaches this handle.
   *
   * @throws {InvalidArgumentError} When this handle is not the creator's.
   */
  close(): void {
    if (!this.#open) return;
    if (this.#arena !== 0) {
      throw new InvalidArgumentError(
        `Cannot close the heap from arena ${this.#arena}: only its creator (arena 0) may`,
        { name: "arena", value: this.#arena, limit: 0 },
      );
    }
    Atomics.store(this.#i32, (this.#base >> 2) + H_STATE, STATE_CLOSED);
    this.detach();
  }

  /** Detaches this handle (see {@linkcode SharedHeap.detach}). */
  [Symbol.dispose](): void {
    this.detach();
  }

  /**
   * Walks the core and every slab and throws on the first broken invariant
   * (for tests). Call it while the other threads are quiet.
   *
   * @throws {AllotError} Naming the broken invariant.
   */
  checkIntegrity(): void {
    const i32 = this.#i32, m = this.#meta, n = this.#pages;
    let p = 0, free = 0;
    let prevFree = false;
    while (p < n) {
      const kind = i32[m + (p << 3) + M_KIND], len = i32[m + (p << 3) + M_LEN];
      if (kind === K_NONE || len <= 0 || p + len > n) {
        throw _inconsistent(`Page ${p}: kind ${kind}, length ${len}: no span`);
      }
      if (kind === K_FREE) {
        if (prevFree) throw _inconsistent(`Page ${p}: two free spans in a row`);
        if (i32[m + ((p + len - 1) << 3) + M_TAIL] !== p + 1) {
          throw _inconsistent(`Page ${p}: free span tail does not point back`);
        }
        free += len;
      }
      if (kind === K_SLAB) {
        const s = (this.#pageBase + p * PAGE) >> 2;
        const size = i32[s + S_SIZE];
        if (CLASS_SIZES[i32[s + S_CLASS]] !== size) {
          throw _inconsistent(`Slab at page ${p}: class and size disagree`);
        }
      }
      prevFree = kind === K_FREE;
      p += len;
    }
    if (free !== i32[(this.#base >> 2) + H_FREE_PAGES]) {
      throw _inconsistent(
        `Free pages counted ${free}, header says ${
          i32[(this.#base >> 2) + H_FREE_PAGES]
        }`,
      );
    }
  }

  // Strict mode: the calls that change the heap are wrapped on this handle
  // so that each checks the heap's integrity (under the core lock, so that
  // other threads' span changes are not seen half done) after it ran, and a
  // block is junk-filled while it is still this caller's, before its free.
  #makeStrict(): void {
    const proto = SharedHeap.prototype;
    const check = (): void => {
      this.#lock("check integrity");
      try {
        this.checkIntegrity();
      } finally {
        this.#unlock();
      }
    };
    const tryAlloc = proto.tryAlloc;
    const reclaim = proto.reclaim;
    Object.defineProperties(this, {
      // alloc's fast path would skip the check: strict goes through tryAlloc.
      alloc: {
        value: (byteLength: number, alignment?: number): number => {
          const offset = this.tryAlloc(byteLength, alignment);
          if (offset === undefined) this.#throwOom(byteLength);
          return offset;
        },
      },
      tryAlloc: {
        value: (byteLength: number, alignment?: number): number | undefined => {
          const offset = tryAlloc.call(this, byteLength, alignment);
          check();
          return offset;
        },
      },
      free: {
        value: (byteOffset: number): void => {
          // Junk only a block this call will free: not through a closed heap,
          // not a block a DataPtr owns.
          const length = this.isOpen ? this.#find(byteOffset) : undefined;
          if (length !== undefined && this.#isOwned(byteOffset)) {
            this.#throwOwned(byteOffset);
          }
          if (length !== undefined) {
            this.#u8.fill(JUNK_BYTE, byteOffset, byteOffset + length);
          }
          // The checked path: compare-exchanges catch racing double frees.
          this.#freeChecked(byteOffset);
          check();
        },
      },
      reclaim: {
        value: (arena: number, options?: ReclaimOptions): ReclaimReport => {
          const report = reclaim.call(this, arena, options);
          check();
          return report;
        },
      },
    });
  }

  // --- arenas ---

  #claimArena(): void {
    const i32 = this.#i32;
    for (let a = 0; a < MAX_ARENAS; a++) {
      const w = this.#arenaAt(a);
      if (
        Atomics.compareExchange(
          i32,
          w + A_STATE,
          ARENA_FREE,
          ARENA_ATTACHED,
        ) ===
          ARENA_FREE
      ) {
        const gen = (Atomics.add(i32, w + A_GEN, 1) + 1) & 0xffffff;
        this.#token = (gen << 6) | a;
        Atomics.store(i32, w + A_TOKEN, this.#token);
        i32.fill(0, w + A_COUNTERS, w + ARENA_WORDS);
        i32[w + A_LARGE_HITS] = 0;
        Atomics.compareExchange(
          i32,
          this.#returnsAt(a),
          RETURNS_CLOSED,
          RETURNS_EMPTY,
        );
        Atomics.add(i32, (this.#base >> 2) + H_ATTACHED, 1);
        // The figures' sums stop at the highest slot ever claimed.
        const end = (this.#base >> 2) + H_ARENA_END;
        for (let e = Atomics.load(i32, end); e <= a;) {
          const was = Atomics.compareExchange(i32, end, e, a + 1);
          if (was === e) break;
          e = was;
        }
        this.#arena = a;
        this.#arenaWord = w;
        return;
      }
    }
    throw new InvalidArgumentError(
      `Cannot attach: all ${MAX_ARENAS} arenas are attached (detach or reclaim one)`,
      { name: "arenas", value: MAX_ARENAS + 1, limit: MAX_ARENAS },
    );
  }

  // --- the figures (issue #15): totals and peaks over every thread ---

  /** Counts a block of `size` bytes this arena just allocated. */
  #count(size: number): void {
    const i32 = this.#i32, a = this.#arenaWord;
    const an = i32[a + A_ALLOCS] + 1;
    const ay = i32[a + A_ALLOC_UNITS] + (size >> 6);
    i32[a + A_ALLOCS] = an;
    i32[a + A_ALLOC_UNITS] = ay;
    if (an > i32[a + A_LIMIT_BLOCKS] || ay > i32[a + A_LIMIT_UNITS]) {
      this.#overLimit();
    }
  }

  /** Counts a block of `size` bytes this arena just freed. */
  #uncount(size: number): void {
    const i32 = this.#i32, a = this.#arenaWord;
    const fn = i32[a + A_FREES] + 1;
    const fy = i32[a + A_FREED_UNITS] + (size >> 6);
    i32[a + A_FREES] = fn;
    i32[a + A_FREED_UNITS] = fy;
    if ((fn | fy) >= TOTAL_CARRY) this.#carry();
  }

  /**
   * After an allocation past this arena's limits: credits the frees made
   * since the limits were set (plain writes: a share that lands at the same
   * instant may be lost, leaving the arena its previous quota until the next
   * share), and when the arena is still past them (its live figures over its
   * quota) shares the peaks out again, under the peak lock. Low words near
   * 2^30 are carried first, under the lock.
   */
  #overLimit(): void {
    const i32 = this.#i32, a = this.#arenaWord;
    if ((i32[a + A_ALLOCS] | i32[a + A_ALLOC_UNITS]) >= TOTAL_CARRY) {
      this.#carry();
    }
    const fn = i32[a + A_FREES], fy = i32[a + A_FREED_UNITS];
    const ln = i32[a + A_LIMIT_BLOCKS] + fn - i32[a + A_LIMIT_FREES];
    const ly = i32[a + A_LIMIT_UNITS] + fy - i32[a + A_LIMIT_FREED_UNITS];
    i32[a + A_LIMIT_BLOCKS] = ln;
    i32[a + A_LIMIT_UNITS] = ly;
    i32[a + A_LIMIT_FREES] = fn;
    i32[a + A_LIMIT_FREED_UNITS] = fy;
    if (i32[a + A_ALLOCS] > ln || i32[a + A_ALLOC_UNITS] > ly) {
      this.#sharePeaks(false);
    }
  }

  /** Carries this arena's low words that reached 2^30. */
  #carry(): void {
    this.#lockPeaks();
    try {
      this.#carryLocked(this.#arenaWord);
    } finally {
      this.#unlockPeaks();
    }
  }

  /**
   * With the peak lock held: moves 2^30 from each low word of arena word
   * `w` that reached it to its high word, and the limits with them.
   */
  #carryLocked(w: number): void {
    const i32 = this.#i32;
    for (
      const [lo, hi, limit] of [
        [A_ALLOCS, A_ALLOCS_HI, A_LIMIT_BLOCKS],
        [A_ALLOC_UNITS, A_ALLOC_UNITS_HI, A_LIMIT_UNITS],
        [A_FREES, A_FREES_HI, A_LIMIT_FREES],
        [A_FREED_UNITS, A_FREED_UNITS_HI, A_LIMIT_FREED_UNITS],
      ]
    ) {
      while (i32[w + lo] >= TOTAL_CARRY) {
        i32[w + lo] -= TOTAL_CARRY;
        i32[w + hi]++;
        i32[w + limit] -= TOTAL_CARRY;
      }
    }
  }

  /** {@linkcode SharedHeap.#shareLocked} under the peak lock. */
  #sharePeaks(reset: boolean): void {
    this.#lockPeaks();
    try {
      this.#shareLocked(reset);
    } finally {
      this.#unlockPeaks();
    }
  }

  /**
   * With the peak lock held: sums every arena's live figures, raises the
   * peaks to them (sets them, for a reset), and gives each attached arena
   * an equal part of the room left below the peaks as its quota (its
   * limits). The quotas then sum to the peaks, so no arena can take the heap
   * past a peak without coming here: the peaks are exact whenever the
   * threads' calls are ordered (by messages or `Atomics.wait`), and a call
   * racing with this one can slip past by at most its own block.
   */
  #shareLocked(reset: boolean): void {
    const i32 = this.#i32, h = this.#base >> 2;
    const end = Math.min(Atomics.load(i32, h + H_ARENA_END), MAX_ARENAS);
    const seen = this.#liveScratch;
    let cn = 0, cy = 0, attached = 0;
    for (let a = 0; a < end; a++) {
      const w = h + H_ARENAS + a * ARENA_WORDS;
      const an = i32[w + A_ALLOCS], ay = i32[w + A_ALLOC_UNITS];
      const fn = i32[w + A_FREES], fy = i32[w + A_FREED_UNITS];
      seen[4 * a] = an;
      seen[4 * a + 1] = ay;
      seen[4 * a + 2] = fn;
      seen[4 * a + 3] = fy;
      cn += an - fn +
        (i32[w + A_ALLOCS_HI] - i32[w + A_FREES_HI]) * TOTAL_CARRY;
      cy += ay - fy +
        (i32[w + A_ALLOC_UNITS_HI] - i32[w + A_FREED_UNITS_HI]) * TOTAL_CARRY;
      if (i32[w + A_STATE] === ARENA_ATTACHED) attached++;
    }
    let pn = i32[h + H_PEAK_BLOCKS], py = i32[h + H_PEAK_BYTES] / 64;
    if (reset || cn > pn) pn = cn;
    if (reset || cy > py) py = cy;
    // (plain stores: the lock's release publishes them)
    i32[h + H_PEAK_BLOCKS] = pn;
    i32[h + H_PEAK_BYTES] = py * 64;
    const shareN = attached === 0 ? 0 : Math.floor((pn - cn) / attached);
    const shareY = attached === 0 ? 0 : Math.floor((py - cy) / attached);
    for (let a = 0; a < end; a++) {
      const w = h + H_ARENAS + a * ARENA_WORDS;
      const mine = i32[w + A_STATE] === ARENA_ATTACHED;
      i32[w + A_LIMIT_BLOCKS] = seen[4 * a] + (mine ? shareN : 0);
      i32[w + A_LIMIT_UNITS] = seen[4 * a + 1] + (mine ? shareY : 0);
      i32[w + A_LIMIT_FREES] = seen[4 * a + 2];
      i32[w + A_LIMIT_FREED_UNITS] = seen[4 * a + 3];
    }
  }

  /**
   * Takes the peak lock. Its holders only sum and write a few words, so it
   * spins (sleeping 1 ms at a time where the thread may block); a holder
   * that keeps it past the time limit died in it, and the lock is taken
   * from it.
   */
  #lockPeaks(): void {
    const i32 = this.#i32, w = (this.#base >> 2) + H_PEAK_LOCK;
    const token = this.#token;
    if (Atomics.compareExchange(i32, w, 0, token) === 0) return;
    let deadline = 0;
    for (let spin = 1;; spin++) {
      const holder = Atomics.load(i32, w);
      if (holder === 0) {
        if (Atomics.compareExchange(i32, w, 0, token) === 0) return;
        continue;
      }
      if ((spin & 255) !== 0) continue;
      const now = Date.now();
      if (deadline === 0) deadline = now + this.#timeoutMs;
      else if (now > deadline) {
        if (Atomics.compareExchange(i32, w, holder, token) === holder) return;
      }
      if (CAN_BLOCK) Atomics.wait(i32, w, holder, 1);
    }
  }

  #unlockPeaks(): void {
    Atomics.store(this.#i32, (this.#base >> 2) + H_PEAK_LOCK, 0);
  }

  #arenaAt(a: number): number {
    return (this.#base >> 2) + H_ARENAS + a * ARENA_WORDS;
  }

  #returnsAt(a: number): number {
    return (this.#base >> 2) + H_RETURNS + a * RETURN_WORDS;
  }

  #attachedToken(arena: number, what: string): number {
    validateInteger(arena, 0, MAX_ARENAS - 1, "arena");
    const w = this.#arenaAt(arena);
    if (Atomics.load(this.#i32, w + A_STATE) !== ARENA_ATTACHED) {
      throw new InvalidArgumentError(
        `Cannot ${what} arena ${arena}: it is not attached`,
        { name: "arena", value: arena, limit: "attached" },
      );
    }
    return Atomics.load(this.#i32, w + A_TOKEN);
  }

  /** Calls `fn` for every live block of `token`'s slabs and large spans. */
  #walkOwned(
    token: number,
    fn: (block: HeldBlock, slab: number) => void,
    slabs?: Set<number>,
  ): void {
    this.#lock("walk");
    try {
      this.#walkLocked(token, fn, slabs);
    } finally {
      this.#unlock();
    }
  }

  /** {@linkcode SharedHeap.#walkOwned} with the core lock held. */
  #walkLocked(
    token: number,
    fn: (block: HeldBlock, slab: number) => void,
    slabs?: Set<number>,
  ): void {
    const i32 = this.#i32, m = this.#meta, n = this.#pages;
    {
      for (let p = 0; p < n;) {
        const kind = i32[m + (p << 3) + M_KIND],
          len = i32[m + (p << 3) + M_LEN];
        const offset = this.#pageBase + p * PAGE;
        if (kind === K_LARGE && i32[m + (p << 3) + M_OWNER] === token) {
          fn({ byteOffset: offset, byteLength: len * PAGE }, 0);
        } else if (
          kind === K_SLAB &&
          Atomics.load(i32, (offset >> 2) + S_OWNER) === token
        ) {
          const s = offset >> 2, size = i32[s + S_SIZE];
          const bump = i32[s + S_BUMP];
          slabs?.add(offset);
          for (let k = 0; k < bump; k++) {
            if (this.#u8[offset + S_STATES + k] !== 0) {
              fn({
                byteOffset: offset + SLAB_HEADER + k * size,
                byteLength: size,
              }, offset);
            }
          }
        }
        p += len > 0 ? len : 1;
      }
    }
  }

  // --- small blocks ---

  #allocSmall(cls: number): number | undefined {
    const i32 = this.#i32;
    let slab = this.#cur[cls];
    if (slab !== 0) {
      const s = slab >> 2;
      let k: number;
      const top = i32[s + S_FREE];
      if (top !== 0) {
        k = this.#u16[((slab + S_STACK) >> 1) + top - 1];
        i32[s + S_FREE] = top - 1;
      } else if (i32[s + S_BUMP] < i32[s + S_CAP]) {
        k = i32[s + S_BUMP]++;
      } else {
        slab = this.#refill(cls);
        if (slab === 0) return undefined;
        return this.#allocSmall(cls);
      }
      i32[s + S_USED]++;
      const size = CLASS_SIZES[cls];
      // Only the owner marks a block live; frees clear it with a
      // compare-exchange, so a plain store suffices here.
      this.#u8[slab + S_STATES + k] = 1;
      this.#count(size);
      return slab + SLAB_HEADER + k * size;
    }
    if (this.#refill(cls) === 0) return undefined;
    return this.#allocSmall(cls);
  }

  /** Makes `#cur[cls]` a slab with a block to give; 0 when out of memory. */
  #refill(cls: number): number {
    const i32 = this.#i32;
    const list = this.#slabs[cls];
    for (let i = 0; i < list.length; i++) {
      const slab = list[i], s = slab >> 2;
      if (Atomics.load(i32, s + S_REMOTE) !== 0) this.#collect(slab);
      if (i32[s + S_FREE] !== 0 || i32[s + S_BUMP] < i32[s + S_CAP]) {
        this.#cur[cls] = slab;
        return slab;
      }
    }
    // The header is written under the core lock, by #takePages: the
    // walkers (snapshot, checkIntegrity, reclaim) read every K_SLAB
    // header under that lock, so none may be published half set.
    let page = this.#takePages(SLAB_PAGES, K_SLAB, cls);
    if (page < 0 && this.#couldFit(SLAB_PAGES) && this.#giveBack()) {
      page = this.#takePages(SLAB_PAGES, K_SLAB, cls);
    }
    if (page < 0) return 0;
    const slab = this.#pageBase + page * PAGE;
    list.push(slab);
    this.#cur[cls] = slab;
    return slab;
  }

  /** Owner: takes the slab's remote list into its own list. */
  #collect(slab: number): void {
    const i32 = this.#i32, s = slab >> 2;
    let r = Atomics.exchange(i32, s + S_REMOTE, 0);
    if (r === 0) return;
    const u16 = this.#u16, stack = (slab + S_STACK) >> 1;
    const size = i32[s + S_SIZE];
    let top = i32[s + S_FREE], n = 0;
    while (r !== 0) {
      const next = i32[r >> 2];
      u16[stack + top++] = ((r - slab - SLAB_HEADER) / size) | 0;
      n++;
      r = next;
    }
    i32[s + S_FREE] = top;
    i32[s + S_USED] -= n;
  }

  #freeSmall(slab: number, block: number): void {
    const i32 = this.#i32, s = slab >> 2;
    const size = i32[s + S_SIZE];
    const rel = block - slab - SLAB_HEADER;
    const k = (rel / size) | 0;
    if (rel < 0 || k * size !== rel || k >= i32[s + S_CAP]) {
      this.#throwNotBlock(block, `not a block start in a ${size}-byte slab`);
    }
    const was = Atomics.compareExchange(this.#u8, slab + S_STATES + k, 1, 0);
    if (was === OWNED_BLOCK) this.#throwOwned(block);
    if (was !== 1) {
      throw new DoubleFreeError(
        `Cannot free ${block}: the block is not live (freed twice, or never allocated)`,
      );
    }
    this.#uncount(size);
    // A plain read: only this handle ever sets or clears its own token.
    if (i32[s + S_OWNER] === this.#token) {
      const top = i32[s + S_FREE];
      this.#u16[((slab + S_STACK) >> 1) + top] = k;
      i32[s + S_FREE] = top + 1;
      if (--i32[s + S_USED] === 0) this.#maybeRelease(slab);
      return;
    }
    i32[this.#arenaWord + A_REMOTE_FREES]++;
    let head: number;
    do {
      head = Atomics.load(i32, s + S_REMOTE);
      i32[block >> 2] = head;
    } while (Atomics.compareExchange(i32, s + S_REMOTE, head, block) !== head);
    // Read the owner again after the push: a detach or reclaim that
    // abandoned the slab meanwhile either saw this push or is seen here.
    if (Atomics.load(i32, s + S_OWNER) === OWNER_ABANDONED) {
      this.#settleAbandoned(slab);
    }
  }

  /**
   * Owner: gives an empty slab back unless it is the class's only one or
   * its spare. One empty slab per class is kept back, so that a class whose
   * use swings around a slab boundary does not take a slab from the core
   * and give it back on every swing (two lock round trips each).
   */
  #maybeRelease(slab: number): void {
    const cls = this.#i32[(slab >> 2) + S_CLASS];
    const list = this.#slabs[cls];
    if (list.length < 2) return;
    const spare = this.#spare[cls];
    if (
      spare === 0 || spare === slab || this.#i32[(spare >> 2) + S_USED] !== 0
    ) {
      this.#spare[cls] = slab;
      return;
    }
    this.#releaseSlab(cls, slab);
  }

  /** Owner: takes an empty slab off its class list and frees its pages. */
  #releaseSlab(cls: number, slab: number): boolean {
    // The lock first: a free that empties a slab is done already, and a
    // busy core only keeps the empty slab in the list for later.
    if (this.#tryLock() !== 0) return false;
    const list = this.#slabs[cls];
    list.splice(list.indexOf(slab), 1);
    if (this.#cur[cls] === slab) this.#cur[cls] = list[list.length - 1];
    if (this.#spare[cls] === slab) this.#spare[cls] = 0;
    this.#releaseSpan((slab - this.#pageBase) >> PAGE_SHIFT);
    this.#unlock();
    return true;
  }

  /**
   * Whether `pages` could fit once `#giveBack` ran: the
   * core's free pages, this arena's cache and spare slabs and every return
   * list together are enough. A request that cannot fit anyway fails without
   * emptying the caches (a refused call changes nothing).
   */
  #couldFit(pages: number): boolean {
    const i32 = this.#i32;
    let total = Atomics.load(i32, (this.#base >> 2) + H_FREE_PAGES) +
      this.#cache.pages;
    for (let cls = 0; cls < CLASS_SIZES.length; cls++) {
      if (this.#spare[cls] !== 0) total += SLAB_PAGES;
    }
    for (let arena = 0; arena < MAX_ARENAS && total < pages; arena++) {
      if (Atomics.load(i32, this.#returnsAt(arena)) > 0) {
        total += Math.max(
          0,
          Atomics.load(i32, this.#returnsAt(arena) + R_PAGES),
        );
      }
    }
    return total >= pages;
  }

  /**
   * Owner, when the core is out of pages: gives back every cached span and
   * spare empty slab.
   *
   * @returns Whether anything went back.
   */
  #giveBack(): boolean {
    this.#takeReturns();
    let any = this.#cache.spans !== 0;
    // Spans other arenas' owners have not taken back yet: any thread may.
    for (let arena = 0; arena < MAX_ARENAS; arena++) {
      if (Atomics.load(this.#i32, this.#returnsAt(arena)) <= 0) continue;
      this.#lock("allocate");
      const released = this.#releaseReturnsLocked(arena, this.#takeList(arena));
      this.#unlock();
      if (released) any = true;
    }
    this.#trimBudget(0);
    for (let cls = 0; cls < CLASS_SIZES.length; cls++) {
      const spare = this.#spare[cls];
      this.#spare[cls] = 0;
      if (
        spare !== 0 && this.#slabs[cls].length >= 2 &&
        this.#i32[(spare >> 2) + S_USED] === 0
      ) {
        if (this.#releaseSlab(cls, spare)) any = true;
      }
    }
    return any;
  }

  /**
   * Any thread: an abandoned slab takes its remote frees in and goes back
   * to the core when empty. One thread at a time (compare-exchange on the
   * owner word); a push that lands meanwhile is taken by the next round.
   */
  #settleAbandoned(slab: number): void {
    const i32 = this.#i32, s = slab >> 2;
    for (;;) {
      if (
        Atomics.compareExchange(
          i32,
          s + S_OWNER,
          OWNER_ABANDONED,
          OWNER_ADOPTING,
        ) !== OWNER_ABANDONED
      ) return;
      this.#collect(slab);
      // The lock before the owner word changes: with the core busy the slab
      // stays abandoned (the next free into it settles it), never ownerless.
      if (i32[s + S_USED] === 0 && this.#tryLock() === 0) {
        Atomics.store(i32, s + S_OWNER, 0);
        this.#releaseSpan((slab - this.#pageBase) >> PAGE_SHIFT);
        this.#unlock();
        return;
      }
      Atomics.store(i32, s + S_OWNER, OWNER_ABANDONED);
      if (Atomics.load(i32, s + S_REMOTE) === 0) return;
    }
  }

  // --- large blocks ---

  #allocLarge(byteLength: number): number | undefined {
    const i32 = this.#i32, a = this.#arenaWord;
    const pages = Math.max(1, Math.ceil(byteLength / PAGE));
    {
      // Lock-free reuse of a span this arena allocated and some arena
      // freed: one of the request's own bin that fits, else the first two
      // bins whose every span fits (at most about 1.5x the request).
      const fit = binOf(pages);
      const bin = pages >= 4 && binBase(fit) !== pages ? fit + 1 : fit;
      const cache = this.#cache;
      let page = cache.takeFit(fit, pages);
      if (page < 0) page = cache.take(bin, Math.min(bin + 2, BINS));
      if (page < 0 && this.#takeReturns()) {
        page = cache.takeFit(fit, pages);
        if (page < 0) page = cache.take(bin, Math.min(bin + 2, BINS));
      }
      if (page >= 0) {
        const w = this.#meta + (page << 3);
        const len = i32[w + M_LEN];
        Atomics.store(i32, w + M_KIND, K_LARGE);
        i32[w + M_AGE] = 0; // not owned (the stamp of its cached life)
        i32[a + A_LARGE_HITS]++;
        this.#count(len * PAGE);
        return this.#pageBase + page * PAGE;
      }
    }
    i32[a + A_LARGE_MISSES]++;
    // More arenas attached since the budget grew: give the excess back.
    if (this.#cacheLimit > this.#fairShare()) {
      this.#trimBudget(this.#fairShare());
    }
    let page = this.#takePages(pages, K_LARGE);
    if (page < 0 && this.#couldFit(pages) && this.#giveBack()) {
      page = this.#takePages(pages, K_LARGE);
    }
    if (page < 0) return undefined;
    i32[this.#meta + (page << 3) + M_AGE] = 0; // not owned
    this.#count(pages * PAGE);
    return this.#pageBase + page * PAGE;
  }

  #freeLarge(page: number, byteOffset: number): void {
    const i32 = this.#i32, w = this.#meta + (page << 3), a = this.#arenaWord;
    if (
      Atomics.load(i32, w + M_KIND) === K_LARGE &&
      Atomics.load(i32, w + M_AGE) === OWNED_SPAN
    ) this.#throwOwned(byteOffset);
    const owner = i32[w + M_OWNER];
    if (owner !== this.#token && this.#returnLarge(page, owner)) {
      i32[a + A_REMOTE_FREES]++;
      return;
    }
    if (
      i32[w + M_OWNER] === this.#token && this.#cacheTotal !== 0 &&
      Atomics.compareExchange(i32, w + M_KIND, K_LARGE, K_CACHED) === K_LARGE
    ) {
      // The owner keeps the span for its next large block: no lock.
      this.#uncount(i32[w + M_LEN] * PAGE);
      this.#cache.put(page);
      if (this.#cache.pages > this.#cacheLimit) this.#overBudget();
      return;
    }
    this.#lock("free");
    const kind = i32[w + M_KIND];
    if (
      kind !== K_LARGE ||
      Atomics.compareExchange(i32, w + M_KIND, K_LARGE, K_NONE) !== K_LARGE
    ) {
      this.#unlock();
      if (kind !== K_SLAB) {
        throw new DoubleFreeError(
          `Cannot free ${byteOffset}: the block is not live (freed twice, or never allocated)`,
        );
      }
      this.#throwNotBlock(byteOffset, "a slab header, not a block");
    }
    const len = i32[w + M_LEN];
    this.#releaseSpan(page);
    this.#unlock();
    this.#uncount(len * PAGE);
  }

  /**
   * Another arena's large span: back on its owner's return list with one
   * compare-exchange, no lock, when the owner is attached.
   *
   * @returns Whether the span was freed here; false leaves it to the
   * locked path (owner gone, or the block not live: that path throws).
   */
  #returnLarge(page: number, owner: number): boolean {
    const i32 = this.#i32, w = this.#meta + (page << 3);
    const arena = owner & 63, aw = this.#arenaAt(arena);
    if (
      this.#cacheTotal === 0 || Atomics.load(i32, aw + A_TOKEN) !== owner ||
      Atomics.load(i32, aw + A_STATE) !== ARENA_ATTACHED
    ) return false;
    const len = i32[w + M_LEN];
    if (
      Atomics.compareExchange(i32, w + M_KIND, K_LARGE, K_RETURNED) !== K_LARGE
    ) return false;
    this.#uncount(len * PAGE);
    const r = this.#returnsAt(arena);
    for (;;) {
      const head = Atomics.load(i32, r);
      if (head === RETURNS_CLOSED) {
        // The owner left meanwhile: the span goes to the core. A busy core
        // refuses the free as if it never started.
        const holder = this.#tryLock();
        if (holder !== 0) {
          Atomics.store(i32, w + M_KIND, K_LARGE);
          // (the free did not happen: its count is taken back)
          const a = this.#arenaWord;
          i32[a + A_FREES]--;
          i32[a + A_FREED_UNITS] -= len << 6;
          throw new HeapBusyError(
            `Cannot free ${
              this.#pageBase + page * PAGE
            }: the shared core lock stayed held by arena ${
              holder & 63
            } for ${this.#timeoutMs} ms`,
            holder & 63,
          );
        }
        this.#releaseSpan(page);
        this.#unlock();
        return true;
      }
      i32[w + M_NEXT] = head;
      if (Atomics.compareExchange(i32, r, head, page + 1) === head) break;
    }
    // A list its owner does not take (it allocates no large blocks now)
    // stays bounded: past the cache limit, the pusher gives it to the core.
    // (With the core busy the list stays over its bound for a while: the
    // free is done.)
    if (
      Atomics.add(i32, r + R_PAGES, len) + len > this.#returnLimit &&
      this.#tryLock() === 0
    ) {
      this.#releaseReturnsLocked(arena, this.#takeList(arena));
      this.#unlock();
    }
    return true;
  }

  /**
   * Any thread: takes arena `arena`'s return list unless it is empty or
   * closed.
   *
   * @returns The list head (a page + 1), or 0.
   */
  #takeList(arena: number): number {
    const i32 = this.#i32, r = this.#returnsAt(arena);
    for (;;) {
      const head = Atomics.load(i32, r);
      if (head <= 0) return 0;
      if (Atomics.compareExchange(i32, r, head, RETURNS_EMPTY) === head) {
        return head;
      }
    }
  }

  /**
   * Any thread, under the core lock: gives the spans of a taken return list
   * to the core.
   *
   * @returns Whether any span went back.
   */
  #releaseReturnsLocked(arena: number, head: number): boolean {
    if (head <= 0) return false;
    const i32 = this.#i32;
    let pages = 0;
    while (head > 0) {
      const page = head - 1;
      head = i32[this.#meta + (page << 3) + M_NEXT];
      pages += i32[this.#meta + (page << 3) + M_LEN];
      this.#releaseSpan(page);
    }
    Atomics.sub(i32, this.#returnsAt(arena) + R_PAGES, pages);
    return true;
  }

  /**
   * Owner: takes its return list into the cache.
   *
   * @returns Whether any span came back.
   */
  #takeReturns(): boolean {
    // A plain read as a hint (an Atomics call costs as much as a cache
    // hit): a push it misses is taken at the next miss, or by #giveBack.
    if (this.#i32[this.#returnsAt(this.#arena)] <= 0) return false;
    return this.#adoptReturns(this.#takeList(this.#arena));
  }

  /** Owner: puts the spans of a taken return list in its cache. */
  #adoptReturns(head: number): boolean {
    const i32 = this.#i32, token = this.#token, a = this.#arenaWord;
    let any = false, pages = 0;
    while (head > 0) {
      const page = head - 1, w = this.#meta + (page << 3);
      head = i32[w + M_NEXT];
      const len = i32[w + M_LEN];
      pages += len;
      i32[w + M_OWNER] = token;
      Atomics.store(i32, w + M_KIND, K_CACHED);
      this.#cache.put(page);
      i32[a + A_SPANS_ADOPTED]++;
      any = true;
    }
    Atomics.sub(i32, this.#returnsAt(this.#arena) + R_PAGES, pages);
    if (this.#cache.pages > this.#cacheLimit) this.#overBudget();
    return any;
  }

  /**
   * Owner: the cache outgrew its budget. The budget grows from the pool, to
   * twice what the cache holds, up to a fair share of the total (all of it
   * for a lone arena, 1/N of it for N arenas; growing only as needed leaves
   * the pool to arenas that attach later); what still does not fit goes
   * back, oldest first, down to half the budget; a budget over the fair
   * share shrinks to it.
   */
  #overBudget(): void {
    const share = this.#fairShare();
    const want = Math.min(share, this.#cache.pages * 2);
    if (this.#cacheLimit < want) this.#reserve(want - this.#cacheLimit);
    // After a free (done already): a busy core leaves the spans cached
    // for now instead of failing the free.
    if (this.#cache.pages > this.#cacheLimit) {
      this.#flushCache(this.#cacheLimit >> 1, false);
    }
    if (this.#cacheLimit > share) this.#trimBudget(share, false);
  }

  /** The caches' total budget over the arenas attached now (a plain read: a hint). */
  #fairShare(): number {
    const n = this.#i32[(this.#base >> 2) + H_ATTACHED];
    return n > 1 ? Math.floor(this.#cacheTotal / n) : this.#cacheTotal;
  }

  /** Owner: takes up to `want` pages of budget from the pool. */
  #reserve(want: number): void {
    const i32 = this.#i32, p = (this.#base >> 2) + H_CACHE_POOL;
    for (;;) {
      const free = Atomics.load(i32, p);
      const got = free < want ? free : want;
      if (got <= 0) return;
      if (Atomics.compareExchange(i32, p, free, free - got) === free) {
        this.#setBudget(this.#cacheLimit + got);
        return;
      }
    }
  }

  /**
   * Owner: shrinks its budget to `pages`, flushing the cache down to it
   * first, so that the cache never holds more than the budget it has.
   */
  #trimBudget(pages: number, wait = true): void {
    this.#flushCache(pages, wait);
    // What a busy core kept in the cache keeps its budget.
    const target = Math.max(pages, this.#cache.pages);
    const extra = this.#cacheLimit - target;
    if (extra <= 0) return;
    this.#setBudget(target);
    Atomics.add(this.#i32, (this.#base >> 2) + H_CACHE_POOL, extra);
  }

  #setBudget(pages: number): void {
    this.#cacheLimit = pages;
    Atomics.store(this.#i32, this.#returnsAt(this.#arena) + R_BUDGET, pages);
  }

  /**
   * Gives cached spans back to the core, oldest first, down to `keep`
   * pages. With `wait` false, a busy core leaves the cache as it is.
   */
  #flushCache(keep: number, wait = true): void {
    const cache = this.#cache;
    if (cache.pages <= keep) return;
    if (wait) this.#lock("free");
    else if (this.#tryLock() !== 0) return;
    while (cache.pages > keep) {
      const page = cache.takeOldest();
      if (page < 0) break; // only if the index was corrupted: never loop
      this.#releaseSpan(page);
    }
    this.#unlock();
  }

  #find(byteOffset: number): number | undefined {
    if (typeof byteOffset !== "number") return undefined;
    const rel = byteOffset - this.#pageBase;
    if (
      !Number.isInteger(byteOffset) || !(rel >= 0 && rel < this.#pages * PAGE)
    ) return undefined;
    const i32 = this.#i32, m = this.#meta;
    const page = rel >> PAGE_SHIFT;
    const start = i32[m + (page << 3) + M_START] - 1;
    if (
      start >= 0 && start <= page && page < start + SLAB_PAGES &&
      i32[m + (start << 3) + M_KIND] === K_SLAB
    ) {
      const slab = this.#pageBase + start * PAGE, s = slab >> 2;
      const size = i32[s + S_SIZE], r = byteOffset - slab - SLAB_HEADER;
      const k = (r / size) | 0;
      if (r < 0 || k * size !== r || k >= i32[s + S_CAP]) return undefined;
      return Atomics.load(this.#u8, slab + S_STATES + k) ? size : undefined;
    }
    if ((rel & (PAGE - 1)) === 0 && i32[m + (page << 3) + M_KIND] === K_LARGE) {
      return i32[m + (page << 3) + M_LEN] * PAGE;
    }
    return undefined;
  }

  // --- the shared core: page spans behind one lock ---

  /**
   * Takes `pages` pages from the core for a large span or (`kind` K_SLAB)
   * a slab of class `cls`, whose header it writes before the lock goes.
   *
   * @returns The first page, or -1 when no free span fits.
   */
  #takePages(pages: number, kind: number, cls = 0): number {
    this.#lock("allocate");
    const i32 = this.#i32, m = this.#meta;
    const h = this.#base >> 2;
    // Good fit in O(1): the first non-empty bin whose every span fits; else
    // a span of the request's own bin that fits (found by a walk: only when
    // every larger bin is empty, near the end of the memory).
    const fit = binOf(pages);
    const bin = pages >= 4 && binBase(fit) !== pages ? fit + 1 : fit;
    let found = this.#firstBin(bin);
    if (found < 0 && bin !== fit) {
      for (
        let p = i32[h + H_BINS + fit];
        p !== -1;
        p = i32[m + (p << 3) + M_NEXT]
      ) {
        if (i32[m + (p << 3) + M_LEN] >= pages) {
          found = p;
          break;
        }
      }
    }
    if (found < 0) {
      this.#unlock();
      return -1;
    }
    const len = i32[m + (found << 3) + M_LEN];
    this.#unlink(found);
    if (len > pages) this.#makeFree(found + pages, len - pages);
    if (kind === K_SLAB) {
      // The header before the page records that make the pages a slab, all
      // before the unlock: the walkers read it under this lock, and the
      // lock-free readers (a free's or `bytes()`'s lookup) find the slab by
      // its records only after the owner word's store.
      const s = (this.#pageBase + found * PAGE) >> 2, size = CLASS_SIZES[cls];
      i32.fill(0, s, s + (SLAB_HEADER >> 2));
      i32[s + S_CLASS] = cls;
      i32[s + S_SIZE] = size;
      i32[s + S_CAP] = Math.floor((SLAB_BYTES - SLAB_HEADER) / size);
      Atomics.store(i32, s + S_OWNER, this.#token);
      i32[this.#arenaWord + A_SLABS_TAKEN]++;
      for (let p = found; p < found + pages; p++) {
        i32[m + (p << 3) + M_START] = found + 1;
      }
    }
    i32[m + (found << 3) + M_KIND] = kind;
    i32[m + (found << 3) + M_LEN] = pages;
    i32[m + (found << 3) + M_OWNER] = this.#token;
    i32[h + H_FREE_PAGES] -= pages;
    i32[this.#arenaWord + A_PAGES_TAKEN] += pages;
    this.#unlock();
    return found;
  }

  /** Under the lock: frees a used span and merges it with free neighbours. */
  #releaseSpan(page: number): void {
    const i32 = this.#i32, m = this.#meta, n = this.#pages;
    let len = i32[m + (page << 3) + M_LEN];
    i32[(this.#base >> 2) + H_FREE_PAGES] += len;
    i32[this.#arenaWord + A_PAGES_RETURNED] += len;
    if (i32[m + (page << 3) + M_KIND] === K_SLAB) {
      for (let p = page; p < page + len; p++) i32[m + (p << 3) + M_START] = 0;
    }
    i32[m + (page << 3) + M_KIND] = K_NONE;
    const next = page + len;
    if (next < n && i32[m + (next << 3) + M_KIND] === K_FREE) {
      this.#unlink(next);
      len += i32[m + (next << 3) + M_LEN];
      i32[m + (next << 3) + M_KIND] = K_NONE;
    }
    if (page > 0) {
      const t = i32[m + ((page - 1) << 3) + M_TAIL] - 1;
      if (
        t >= 0 && t < page && i32[m + (t << 3) + M_KIND] === K_FREE &&
        t + i32[m + (t << 3) + M_LEN] === page
      ) {
        this.#unlink(t);
        len += i32[m + (t << 3) + M_LEN];
        page = t;
      }
    }
    this.#makeFree(page, len);
  }

  /** Under the lock: marks a span free and links it at its bin's head. */
  #makeFree(page: number, len: number): void {
    const i32 = this.#i32, m = this.#meta;
    const h = this.#base >> 2;
    i32[m + (page << 3) + M_KIND] = K_FREE;
    i32[m + (page << 3) + M_LEN] = len;
    i32[m + ((page + len - 1) << 3) + M_TAIL] = page + 1;
    const bin = binOf(len);
    const head = i32[h + H_BINS + bin];
    i32[m + (page << 3) + M_NEXT] = head;
    i32[m + (page << 3) + M_PREV] = -1;
    if (head !== -1) i32[m + (head << 3) + M_PREV] = page;
    i32[h + H_BINS + bin] = page;
    i32[h + H_BIN_MASK + (bin >> 5)] |= 1 << (bin & 31);
  }

  /** Under the lock: the head of the first non-empty bin >= `bin`, or -1. */
  #firstBin(bin: number): number {
    const i32 = this.#i32, h = this.#base >> 2;
    for (let word = bin >> 5; word < BINS >> 5; word++) {
      let mask = i32[h + H_BIN_MASK + word];
      if (word === bin >> 5) mask &= -1 << (bin & 31);
      if (mask !== 0) {
        return i32[h + H_BINS + word * 32 + (31 - Math.clz32(mask & -mask))];
      }
    }
    return -1;
  }

  #unlink(page: number): void {
    const i32 = this.#i32, m = this.#meta;
    const h = this.#base >> 2;
    const next = i32[m + (page << 3) + M_NEXT],
      prev = i32[m + (page << 3) + M_PREV];
    const bin = binOf(i32[m + (page << 3) + M_LEN]);
    if (prev !== -1) i32[m + (prev << 3) + M_NEXT] = next;
    else {
      i32[h + H_BINS + bin] = next;
      if (next === -1) i32[h + H_BIN_MASK + (bin >> 5)] &= ~(1 << (bin & 31));
    }
    if (next !== -1) i32[m + (next << 3) + M_PREV] = prev;
  }

  /** {@linkcode SharedHeap.#lock}; when busy, sets the arena back to attached first. */
  #lockOrReattach(arenaWord: number, what: string): void {
    try {
      this.#lock(what);
    } catch (error) {
      Atomics.store(this.#i32, arenaWord + A_STATE, ARENA_ATTACHED);
      throw error;
    }
  }

  #lock(what: string): void {
    const holder = this.#tryLock();
    if (holder !== 0) {
      throw new HeapBusyError(
        `Cannot ${what}: the shared core lock stayed held by arena ${
          holder & 63
        } for ${this.#timeoutMs} ms`,
        holder & 63,
      );
    }
  }

  /**
   * Takes the core lock, waiting up to the time limit.
   *
   * @returns 0, or the holder's token when the wait timed out (nothing
   * taken): for work that follows a change already made (a free), which
   * must not report a failure it did not have.
   */
  #tryLock(): number {
    const i32 = this.#i32, w = (this.#base >> 2) + H_LOCK;
    if (Atomics.compareExchange(i32, w, 0, this.#token) === 0) {
      i32[this.#arenaWord + A_LOCKS]++;
      return 0;
    }
    const holder = this.#lockSlow(w);
    if (holder !== 0) return holder;
    i32[this.#arenaWord + A_LOCKS]++;
    i32[this.#arenaWord + A_LOCK_WAITS]++;
    return 0;
  }

  #lockSlow(w: number): number {
    const i32 = this.#i32, token = this.#token;
    for (let spin = 0; spin < 2000; spin++) {
      if (
        Atomics.load(i32, w) === 0 &&
        Atomics.compareExchange(i32, w, 0, token) === 0
      ) return 0;
    }
    const deadline = Date.now() + this.#timeoutMs;
    const waiters = (this.#base >> 2) + H_WAITERS;
    for (;;) {
      const holder = Atomics.load(i32, w);
      if (holder === 0) {
        if (Atomics.compareExchange(i32, w, 0, token) === 0) return 0;
        continue;
      }
      if (Date.now() > deadline) return holder;
      if (CAN_BLOCK) {
        Atomics.add(i32, waiters, 1);
        i32[this.#arenaWord + A_LOCK_SLEEPS]++;
        Atomics.wait(i32, w, holder, 5);
        Atomics.sub(i32, waiters, 1);
      }
    }
  }

  #unlock(): void {
    const i32 = this.#i32, h = this.#base >> 2;
    Atomics.store(i32, h + H_LOCK, 0);
    if (Atomics.load(i32, h + H_WAITERS) !== 0) {
      Atomics.notify(i32, h + H_LOCK, 1);
    }
  }

  #checkOpen(what: string): void {
    if (!this.#open) {
      throw new HeapClosedError(`Cannot ${what}: this handle was detached`);
    }
    if (this.#i32[this.#stateWord] !== STATE_OPEN) {
      throw new HeapClosedError(
        `Cannot ${what}: the heap's owner closed heap ${this.heapId}`,
      );
    }
  }

  // --- blocks a DataPtr owns (SharedHeapAllocator's) ---
  // A small block's state byte is OWNED_BLOCK instead of 1; a large span's
  // first page record holds OWNED_SPAN in M_AGE (0 while live and not
  // owned; the word is the age stamp only while the span is cached). Both
  // live in the shared memory: every handle, in every Worker, sees them.

  /** Whether the live block at `byteOffset` (found by `#find`) is owned. */
  #isOwned(byteOffset: number): boolean {
    const i32 = this.#i32, rel = byteOffset - this.#pageBase;
    const page = rel >> PAGE_SHIFT, w = this.#meta + (page << 3);
    const start = i32[w + M_START];
    if (start !== 0) {
      const slab = this.#pageBase + (start - 1) * PAGE;
      const k =
        ((byteOffset - slab - SLAB_HEADER) / i32[(slab >> 2) + S_SIZE]) |
        0;
      return Atomics.load(this.#u8, slab + S_STATES + k) === OWNED_BLOCK;
    }
    return Atomics.load(i32, w + M_AGE) === OWNED_SPAN;
  }

  /** Marks a live block owned (`owned` true) or not owned; false: not live. */
  #setOwned(byteOffset: number, owned: boolean): boolean {
    const i32 = this.#i32;
    if (!this.#open || i32[this.#stateWord] !== STATE_OPEN) {
      this.#checkOpen(owned ? "own" : "free");
    }
    const rel = byteOffset - this.#pageBase;
    if (!((rel >>> 0) === rel && rel < this.#pageBytes)) return false;
    const page = rel >>> PAGE_SHIFT, w = this.#meta + (page << 3);
    const start = i32[w + M_START];
    if (start !== 0) {
      // Only the pages of a live slab name their slab's first page.
      const slab = this.#pageBase + ((start - 1) << PAGE_SHIFT), s = slab >> 2;
      const cls = i32[s + S_CLASS], size = CLASS_SIZES[cls];
      const r = byteOffset - slab - SLAB_HEADER;
      const k = ((r >>> 6) * CLASS_RECIPROCALS[cls]) >>> 20;
      if (r < 0 || k * size !== r || k >= i32[s + S_CAP]) return false;
      const state = slab + S_STATES + k, u8 = this.#u8;
      if (owned) {
        // A plain read and write: a block just allocated reaches another
        // thread only through a message or an atomic write after this.
        if (u8[state] !== 1) return false;
        u8[state] = OWNED_BLOCK;
        return true;
      }
      const from = OWNED_BLOCK;
      return Atomics.compareExchange(
        u8,
        state,
        from,
        1,
      ) === from;
    }
    if (
      (rel & (PAGE - 1)) !== 0 || Atomics.load(i32, w + M_KIND) !== K_LARGE
    ) return false;
    const from = owned ? 0 : OWNED_SPAN;
    return Atomics.compareExchange(
      i32,
      w + M_AGE,
      from,
      owned ? OWNED_SPAN : 0,
    ) === from;
  }

  #throwOwned(byteOffset: number): never {
    throw new DoubleFreeError(
      `Cannot free ${byteOffset}: the block is owned by a live DataPtr of a SharedHeapAllocator (release that pointer instead); nothing was freed`,
    );
  }

  static {
    ownedBlocks.mark = (heap, byteOffset) => {
      if (!heap.#setOwned(byteOffset, true)) {
        throw new DoubleFreeError(
          `Cannot own ${byteOffset}: the block is not live or already owned`,
        );
      }
    };
    ownedBlocks.free = (heap, byteOffset) => {
      if (!heap.#setOwned(byteOffset, false)) {
        throw new DoubleFreeError(
          `Cannot free ${byteOffset}: the block is not an owned live block (freed twice?)`,
        );
      }
      heap.free(byteOffset);
    };
  }

  #throwNotBlock(byteOffset: number, why: string, what = "free"): never {
    if (
      what === "free" && Number.isSafeInteger(byteOffset) && byteOffset >= 0
    ) {
      // an offset (the verb's kind of handle) of no block this heap holds
      throw new DoubleFreeError(
        `Cannot free ${byteOffset}: not a block of heap ${this.heapId} (${why})`,
      );
    }
    throw new InvalidArgumentError(
      `Cannot ${what} ${
        describeValue(byteOffset)
      }: not a block of heap ${this.heapId} (${why}; pages are [${this.#pageBase}, ${
        this.#pageBase + this.#pages * PAGE
      }))`,
      {
        name: "byteOffset",
        value: byteOffset,
        limit: [this.#pageBase, this.#pageBase + this.#pages * PAGE],
      },
    );
  }

  #throwOom(byteLength: number): never {
    const stats = this.stats();
    throw new OutOfMemoryError(
      `Cannot allocate ${byteLength} bytes: ${stats.freeBytes} bytes of free pages left in a ${stats.byteLength}-byte shared heap`,
      {
        requestedBytes: byteLength,
        capacityBytes: stats.byteLength,
        freeBytes: stats.freeBytes,
        allocatedBytes: stats.allocatedBytes.current,
        reservedBytes: stats.reservedBytes,
      },
    );
  }

  // ---- the allocator contract's verbs (issue #15) ----

  /**
   * Allocates `byteLength` bytes: the contract's name of
   * {@linkcode SharedHeap.alloc} (the same; 0 bytes gives an ordinary block).
   *
   * @param byteLength Number of bytes.
   * @param alignment A power of two up to 4096 (64 when omitted).
   * @returns The byte offset of the block in `buffer`.
   * @throws {InvalidArgumentError} For a bad length or alignment.
   * @throws {OutOfMemoryError} When the heap is full.
   * @throws {HeapClosedError} After detach or close.
   */
  allocate(byteLength: number, alignment?: number): number {
    return this.alloc(byteLength, alignment);
  }

  /**
   * Like {@linkcode SharedHeap.allocate}, but returns `undefined` when the
   * heap is full: the contract's name of {@linkcode SharedHeap.tryAlloc}.
   *
   * @param byteLength Number of bytes.
   * @param alignment A power of two up to 4096 (64 when omitted).
   * @returns The byte offset, or `undefined`.
   * @throws {InvalidArgumentError} For a bad length or alignment.
   * @throws {HeapClosedError} After detach or close.
   */
  tryAllocate(byteLength: number, alignment?: number): number | undefined {
    return this.tryAlloc(byteLength, alignment);
  }

  /**
   * Walks the core and every slab and throws on the first broken invariant:
   * the contract's name of {@linkcode SharedHeap.checkIntegrity}. Call it
   * while the other threads are quiet.
   *
   * @throws {Error} Naming the broken invariant.
   */
  validate(): void {
    this.checkIntegrity();
  }

  /**
   * Gives the page spans this handle's arena keeps cached back to the shared
   * core, where every thread can take them (each thread empties its own
   * cache: the caches of the others are theirs). Live blocks stay.
   *
   * @throws {HeapClosedError} After detach or close.
   * @throws {HeapBusyError} When the core's lock is not had in time.
   */
  emptyCache(): void {
    this.#checkOpen("empty the cache");
    this.#flushCache(0);
  }

  /**
   * A text table of {@linkcode SharedHeap.stats}, in the layout of
   * `torch.cuda.memory_summary()`.
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    const {
      bytesInUse: _u,
      bytesReserved: _r,
      allocationCount: _c,
      ...figures
    } = this.stats();
    return formatStatsSummary(figures, options, `SharedHeap ${this.heapId}`);
  }

  /**
   * Sets every peak of {@linkcode SharedHeap.stats} to its current value,
   * for every thread's figures (exact while the other threads are quiet).
   *
   * @throws {HeapClosedError} After detach or close.
   */
  resetPeakStats(): void {
    this.#checkOpen("reset the peaks");
    this.#sharePeaks(true);
  }

  /**
   * Sets `allocated` and `freed` of {@linkcode SharedHeap.stats} to zero
   * (current stays), for every thread's figures (exact while the other
   * threads are quiet).
   *
   * @throws {HeapClosedError} After detach or close.
   */
  resetAccumulatedStats(): void {
    this.#checkOpen("reset the totals");
    const i32 = this.#i32, h = this.#base >> 2;
    this.#lockPeaks();
    try {
      const totals = [0, 0, 0, 0];
      const words = [
        [A_ALLOCS, A_ALLOCS_HI],
        [A_ALLOC_UNITS, A_ALLOC_UNITS_HI],
        [A_FREES, A_FREES_HI],
        [A_FREED_UNITS, A_FREED_UNITS_HI],
      ];
      for (let a = 0; a < MAX_ARENAS; a++) {
        const w = h + H_ARENAS + a * ARENA_WORDS;
        for (let k = 0; k < 4; k++) {
          const [lo, hi] = words[k];
          totals[k] += i32[w + lo] + i32[w + hi] * TOTAL_CARRY;
        }
      }
      const f = this.#f64, r = (this.#base >> 3) + F_RESET;
      f[r] = totals[0];
      f[r + 1] = totals[1] * 64;
      f[r + 2] = totals[2];
      f[r + 3] = totals[3] * 64;
    } finally {
      this.#unlockPeaks();
    }
  }

  /**
   * A picture of the heap in `torch.cuda.memory_snapshot()`'s shape
   * (core's `MemorySnapshot`): one segment per slab (pool `"small"`: its
   * blocks after the slab's header, live ones `active_allocated`) and one
   * per large span (pool `"large"`: `active_allocated` when live,
   * `inactive` while an arena keeps it cached), in address order; free
   * pages of the core are no segment. Taken under the core lock; exact
   * while the other threads are quiet. Addresses are byte offsets in
   * `buffer`.
   *
   * @returns The snapshot (plain data).
   * @throws {HeapClosedError} After detach or close.
   * @throws {HeapBusyError} When the core's lock is not had in time.
   */
  snapshot(): MemorySnapshot {
    this.#checkOpen("snapshot");
    const segments: SegmentSnapshot[] = [];
    this.#lock("snapshot");
    try {
      const i32 = this.#i32, m = this.#meta, n = this.#pages;
      for (let p = 0; p < n;) {
        const kind = i32[m + (p << 3) + M_KIND];
        const len = i32[m + (p << 3) + M_LEN];
        const at = this.#pageBase + p * PAGE;
        if (kind === K_SLAB) {
          const s = at >> 2, size = i32[s + S_SIZE], cap = i32[s + S_CAP];
          const blocks: BlockSnapshot[] = [];
          for (let k = 0; k < cap; k++) {
            const live = this.#u8[at + S_STATES + k] !== 0;
            blocks.push({
              address: at + SLAB_HEADER + k * size,
              offset: k * size,
              byteLength: size,
              requestedByteLength: live ? size : 0,
              state: live ? "active_allocated" : "inactive",
            });
          }
          segments.push(this.#segment(at + SLAB_HEADER, "small", blocks));
        } else if (
          kind === K_LARGE || kind === K_CACHED || kind === K_RETURNED
        ) {
          const live = kind === K_LARGE;
          segments.push(this.#segment(at, "large", [{
            address: at,
            offset: 0,
            byteLength: len * PAGE,
            requestedByteLength: live ? len * PAGE : 0,
            state: live ? "active_allocated" : "inactive",
          }]));
        }
        p += len > 0 ? len : 1;
      }
    } finally {
      this.#unlock();
    }
    return finishSnapshot(
      `cpu:shared`,
      `SharedHeap ${this.heapId}`,
      segments,
      null,
    );
  }

  #segment(
    at: number,
    pool: "small" | "large",
    blocks: BlockSnapshot[],
  ): SegmentSnapshot {
    let byteLength = 0;
    for (const b of blocks) byteLength += b.byteLength;
    return {
      id: at,
      address: at,
      byteLength,
      stream: 0,
      pool,
      ...segmentTotals(blocks),
      memoryByteOffset: at,
      blocks,
    };
  }
}

/** Pages of a heap whose header is at `base` and which ends at `end`. */
function pagesOf(base: number, end: number): number {
  let pages = Math.floor(
    (end - base - HEADER_BYTES - PAGE) / (PAGE + META_WORDS * 4),
  );
  while (pages > 0 && pageBaseOf(base, pages) + pages * PAGE > end) pages--;
  return Math.max(pages, 0);
}

/** Byte offset of page 0 of a heap at `base` with `pages` pages. */
function pageBaseOf(base: number, pages: number): number {
  return Math.ceil((base + HEADER_BYTES + META_WORDS * 4 * pages) / PAGE) *
    PAGE;
}

/** Smallest span length of a bin (inverse of `binOf` on bin bases). */
function binBase(bin: number): number {
  if (bin < 4) return bin;
  const l = (bin >> 2) + 1;
  return (4 + (bin & 3)) << (l - 2);
}

// The offsets of ReclaimOptions.keep: an iterable of integers.
// A fresh SharedArrayBuffer: typed errors when the engine has none (a page
// that is not cross-origin isolated) or refuses the bytes.
function newSharedBuffer(byteLength: number): SharedArrayBuffer {
  if (typeof SharedArrayBuffer === "undefined") {
    throw new NotSharedMemoryError(
      `Cannot make a shared heap of ${byteLength} bytes: SharedArrayBuffer is not available here (a browser page must be cross-origin isolated); pass a shared WebAssembly.Memory or run where it is`,
      { name: "memory", value: byteLength, limit: "SharedArrayBuffer" },
    );
  }
  try {
    return new SharedArrayBuffer(byteLength);
  } catch (error) {
    throw new OutOfMemoryError(
      `Cannot make a shared heap of ${byteLength} bytes: the engine refused a SharedArrayBuffer of that length`,
      { requestedBytes: byteLength },
      { cause: error },
    );
  }
}

function keepSet(keep: unknown): Set<number> {
  if (keep === undefined || keep === null) return new Set();
  if (
    typeof keep !== "object" ||
    typeof (keep as Iterable<number>)[Symbol.iterator] !== "function"
  ) {
    throw new InvalidArgumentError(
      `Invalid keep: must be an iterable of byte offsets, received ${
        describeValue(keep)
      }`,
      { name: "keep", value: keep, limit: "Iterable<number>" },
    );
  }
  const out = new Set<number>();
  for (const offset of keep as Iterable<unknown>) {
    validateInteger(
      offset as number,
      0,
      SHARED_MAX_BYTE_END,
      "keep[i] (a byte offset)",
    );
    out.add(offset as number);
  }
  return out;
}

function validateStrict(value: unknown): boolean {
  return validateFlag(value, "strict", false);
}

function validateTimeout(value: number | undefined): number {
  if (value === undefined) return 2000;
  if (typeof value !== "number" || !(value >= 0) || !Number.isFinite(value)) {
    throw new InvalidArgumentError(
      `Invalid lockTimeoutMs: must be a finite non-negative number, received ${
        describeValue(value)
      }`,
      { name: "lockTimeoutMs", value, limit: 0 },
    );
  }
  return value;
}

/** What {@linkcode SharedHeap.checkIntegrity} throws for a broken invariant. */
function _inconsistent(what: string): AllotError {
  return new AllotError(`SharedHeap is inconsistent: ${what}`);
}
