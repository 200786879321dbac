/**
 * The one declared layout of a shared heap's state inside its memory. Every
 * word below is an `Int32Array` index; nothing else reads the shared state.
 *
 * ```text
 * byteOffset ┌────────────────────────────┐ (64-byte aligned)
 *            │ header (144 words)         │ line 0: magic, id, state;
 *            │                            │ line 1: the lock alone;
 *            │                            │ lines 2-8: free pages, bins
 *            │ arena table (64 × 32 words)│ two 64-byte lines per arena
 *            │ return table (64 × 16 w.)  │ one return-list head a line
 *            │ page meta (8 words a page) │ kind, len, tail, start, next,
 *            │                            │ prev, owner, age of every
 *            │                            │ 4 KiB page (all 0: no span)
 * pageBase   ├────────────────────────────┤ (4096-aligned)
 *            │ pages: large spans and     │
 *            │ 64 KiB slabs (3328-byte    │
 *            │ header + equal blocks)     │
 *            └────────────────────────────┘
 * ```
 *
 * @module
 */

/** "alot": the first word of every heap header. */
export const MAGIC = 0x616c6f74;
/** Bumped when the layout changes. */
export const VERSION = 5;

/** Page: the unit of the shared core. */
export const PAGE_SHIFT = 12;
/** Bytes per page. */
export const PAGE = 1 << PAGE_SHIFT;
/** Pages per slab. */
export const SLAB_PAGES = 16;
/** Bytes per slab. */
export const SLAB_BYTES = SLAB_PAGES * PAGE;
/**
 * Bytes of a slab's header, before its first block: 16 words, the remote
 * list head on its own line, one state byte per block (1 live, 0 free), then
 * the owner's free stack of block indices (16 bits each), rounded to a
 * multiple of 256. The free stack keeps the owner's frees off the blocks'
 * own cache lines.
 */
export const SLAB_HEADER = 3328;
/** Most arenas (attached handles) a heap serves at once. */
export const MAX_ARENAS = 64;

// --- header words ---
// Line 0 (words 0-15): read by every call, written once.
export const H_MAGIC = 0;
export const H_VERSION = 1;
export const H_HEAP_ID = 2;
/** 1 open, 2 closed. */
export const H_STATE = 3;
export const H_PAGES = 6;
/** Absolute byte offset of page 0. */
export const H_PAGE_BASE = 7;
/** Absolute byte offset of the page meta records. */
export const H_META = 8;
export const H_BYTE_LENGTH = 11;
/**
 * One past the highest arena index ever claimed (raised with a
 * compare-exchange at attach): the stats sums stop there.
 */
export const H_ARENA_END = 12;
// Line 1 (words 16-31): the core lock alone, so that a thread spinning on
// it never pulls away the line the holder is updating, and lock traffic
// never evicts line 0 from the other threads' caches. The header starts on
// a 64-byte boundary (create rounds its offset up), so lines are lines.
/** 0 or the token of the arena that holds the core lock. */
export const H_LOCK = 16;
/** Threads blocked in `Atomics.wait` on the lock. */
export const H_WAITERS = 17;
/**
 * Float64 index (in a `Float64Array` over the buffer, relative to the
 * header's own float64 index) of the figures at the last
 * `resetAccumulatedStats()`: blocks ever allocated, bytes ever allocated,
 * live blocks, live bytes. Words 24-31 of line 1, written only by a reset
 * (under the peak lock).
 */
export const F_RESET = 12;
// Line 2 (words 32-47) and on: the core, written under its lock only.
export const H_FREE_PAGES = 32;
/** Bit b % 32 of word H_BIN_MASK + b / 32 set when bin b is not empty. */
export const H_BIN_MASK = 33;
/**
 * Pages of the span caches' total budget (a quarter of the heap) that no
 * arena holds: arenas take from it and give back with atomics, lock or not.
 */
export const H_CACHE_POOL = 36;
/** Arenas attached (or being reclaimed), changed with atomics; read as a hint. */
export const H_ATTACHED = 37;
/**
 * 0 or the token of the arena that holds the peak lock: taken only to raise
 * the peaks and hand out the arenas' quotas (see `A_LIMIT_BLOCKS`).
 */
export const H_PEAK_LOCK = 38;
/** Highest count of live blocks since creation or the last peak reset. */
export const H_PEAK_BLOCKS = 39;
/** Highest bytes of live blocks since creation or the last peak reset. */
export const H_PEAK_BYTES = 40;
/** Bin heads (page index, -1 when empty): four bins per power of two. */
export const H_BINS = 48;
export const BINS = 96;
/**
 * The arena table: two 64-byte lines per arena, the first its state and the
 * figures its owner writes on each allocation, the second its contention
 * counters.
 */
export const H_ARENAS = 144;
export const ARENA_WORDS = 32;
/**
 * The return table: one 64-byte line per arena holding the head of its
 * return list, the large spans other arenas freed (pushed with one
 * compare-exchange, taken back by the owner with one exchange). Its own
 * lines, so remote pushes never touch the owner's hot arena line.
 */
export const H_RETURNS = H_ARENAS + MAX_ARENAS * ARENA_WORDS;
export const RETURN_WORDS = 16;
/** Return list head: empty. Else the first page + 1, linked by M_NEXT. */
export const RETURNS_EMPTY = 0;
/** Return list head: the owner left (detached or reclaimed); no pushes. */
export const RETURNS_CLOSED = -1;
/** Word of a return line: pages on the list (approximate while pushes land). */
export const R_PAGES = 1;
/**
 * Word of a return line: pages of the cache budget the arena holds (its
 * span cache never holds more; written by the owner, read by reclaim).
 */
export const R_BUDGET = 2;
/** Header, arena table and return table, in bytes. */
export const HEADER_BYTES = (H_RETURNS + MAX_ARENAS * RETURN_WORDS) * 4;

export const STATE_OPEN = 1;
export const STATE_CLOSED = 2;

// --- arena words ---
/** 0 free, 1 attached, 2 being reclaimed. */
export const A_STATE = 0;
export const A_TOKEN = 1;
export const A_GEN = 2;
/**
 * Blocks this arena's handle allocated: `A_ALLOCS + 2^30 * A_ALLOCS_HI`
 * (owner-only plain writes; the low word is carried into the high one under
 * the peak lock once it passes 2^30). Kept across detach and a later claim
 * of the slot, so the sums over every slot are the heap's totals.
 */
export const A_ALLOCS = 3;
/** The bytes of those blocks, in 64-byte units (every block size is a multiple). */
export const A_ALLOC_UNITS = 4;
/**
 * Blocks this arena's handle freed (its own or, as a remote free, another
 * arena's), and their 64-byte units: live figures are allocations less
 * frees, summed over every slot.
 */
export const A_FREES = 5;
export const A_FREED_UNITS = 6;
export const A_ALLOCS_HI = 7;
export const A_ALLOC_UNITS_HI = 8;
export const A_FREES_HI = 9;
export const A_FREED_UNITS_HI = 10;
/**
 * The arena's limits, in the low words' terms: it may allocate without a
 * word to anyone while `A_ALLOCS <= A_LIMIT_BLOCKS + (A_FREES -
 * A_LIMIT_FREES)` (and the same in units), that is while its live figures
 * stay within the quota a peak share gave it. The quotas of all arenas sum
 * to at most the heap's peaks, so the heap cannot pass a peak unseen. The
 * owner compares only `A_ALLOCS` with `A_LIMIT_BLOCKS` on an allocation;
 * past it, it credits its frees since and, still past it, shares the peaks
 * out again under the peak lock.
 */
export const A_LIMIT_BLOCKS = 12;
export const A_LIMIT_UNITS = 13;
/** `A_FREES` and `A_FREED_UNITS` when the limits were last set. */
export const A_LIMIT_FREES = 14;
export const A_LIMIT_FREED_UNITS = 15;
/** Low words of the totals stay below this; the excess carries. */
export const TOTAL_CARRY = 0x40000000;
// Contention counters, on the arena's second line but for `A_LARGE_HITS`
// (owner-only plain increments; read by `_counters.ts` for benchmarks and
// tests; zeroed when the slot is claimed).
export const A_REMOTE_FREES = 16;
/** Shared core lock acquisitions by this arena. */
export const A_LOCKS = 17;
/** Acquisitions that found the lock held (the slow path). */
export const A_LOCK_WAITS = 18;
/** Times this arena slept in `Atomics.wait` on the lock. */
export const A_LOCK_SLEEPS = 19;
/**
 * Large allocations served from the arena's own span cache (no lock): on
 * the first line, beside the figures the same allocation writes.
 */
export const A_LARGE_HITS = 11;
/** Large allocations that went to the shared core. */
export const A_LARGE_MISSES = 21;
/** Pages taken from the core (slabs and large spans). */
export const A_PAGES_TAKEN = 22;
/** Pages given back to the core (slabs, large spans, cache flushes). */
export const A_PAGES_RETURNED = 23;
/** Slabs taken from the core. */
export const A_SLABS_TAKEN = 24;
/** Large spans taken back from the arena's return list. */
export const A_SPANS_ADOPTED = 25;
/** First counter word; counters run to the end of the arena's words. */
export const A_COUNTERS = A_REMOTE_FREES;
export const ARENA_FREE = 0;
export const ARENA_ATTACHED = 1;
export const ARENA_RECLAIMING = 2;

// --- page meta: eight words per page, one 32-byte record ---
export const M_KIND = 0;
export const M_LEN = 1;
/**
 * On the last page of a free span: its first page + 1 (0: none, so that a
 * zeroed record is a valid "no span").
 */
export const M_TAIL = 2;
/** On every page of a slab: the slab's first page + 1 (0: not a slab's). */
export const M_START = 3;
export const M_NEXT = 4;
export const M_PREV = 5;
/** On the first page of a large span: the token of its allocating arena. */
export const M_OWNER = 6;
/**
 * On the first page of a span its arena keeps cached: the age stamp of the
 * span (owner-only, like the `M_NEXT` / `M_PREV` links of its cache list).
 */
export const M_AGE = 7;
export const META_WORDS = 8;

export const K_NONE = 0;
export const K_FREE = 1;
export const K_LARGE = 2;
export const K_SLAB = 3;
/** A large span its arena freed and keeps for reuse without the lock. */
export const K_CACHED = 4;
/** A large span another arena freed, on its owner's return list. */
export const K_RETURNED = 5;

// --- slab header words (relative to the slab's first word) ---
export const S_CLASS = 0;
export const S_SIZE = 1;
export const S_CAP = 2;
/** Blocks below this index were handed out at least once. */
export const S_BUMP = 3;
/** Owner-only free stack depth (block indices at S_STACK). */
export const S_FREE = 4;
/** Blocks not in the owner's free list (live or remote-freed). */
export const S_USED = 5;
/** Remote free list head, pushed with compare-exchange (its own line). */
export const S_REMOTE = 16;
/** Owner token, or ABANDONED / ADOPTING. */
export const S_OWNER = 7;
/** Byte offset of the block state bytes in the slab header. */
export const S_STATES = 128;
/** Byte offset of the owner's free stack (Uint16 block indices). */
export const S_STACK = 1152;
export const OWNER_ABANDONED = -1;
export const OWNER_ADOPTING = -2;

/** Block sizes of the slab classes: 64 B to 8 KiB, four per doubling. */
export const CLASS_SIZES: readonly number[] = (() => {
  const sizes: number[] = [];
  for (let s = 64; s <= 512; s += 64) sizes.push(s);
  for (let base = 512; base < 8192; base *= 2) {
    for (let i = 1; i <= 4; i++) sizes.push(base + (base / 4) * i);
  }
  return sizes;
})();
/**
 * `ceil(2^20 / (size / 64))` of each class: the block index of a byte
 * offset `r` in a slab is `((r >>> 6) * CLASS_RECIPROCALS[cls]) >>> 20`
 * (exact for every offset of a slab, a multiply instead of a division).
 */
export const CLASS_RECIPROCALS: Int32Array = Int32Array.from(
  CLASS_SIZES,
  (size) => Math.ceil((1 << 20) / (size >> 6)),
);
/** Largest block a slab serves; larger requests take whole pages. */
export const MAX_SMALL = 8192;
/** Class of a request of `n` bytes (alignment <= 64): `CLASS_OF[(n + 63) >> 6]`. */
export const CLASS_OF: Uint8Array = (() => {
  const table = new Uint8Array((MAX_SMALL >> 6) + 1);
  let c = 0;
  for (let i = 0; i < table.length; i++) {
    while (CLASS_SIZES[c] < i * 64) c++;
    table[i] = c;
  }
  return table;
})();

/** Bin of a span of `len` pages: exact below 4, then four per power of two. */
export function binOf(len: number): number {
  if (len < 4) return len;
  const l = 31 - Math.clz32(len);
  return 4 * (l - 1) + ((len >>> (l - 2)) & 3);
}
