// Internal block and pool structures of the caching allocator.

import type { Segment, Stream } from "@allot/core";

/** Block states. */
export const FREE = 0;
export const ALLOCATED = 1;
export const PENDING = 2;

/**
 * One device segment as the allocator sees it. An expandable segment grows
 * and shrinks at its end (its `raw` record and `byteLength` change; its
 * virtual address range is reserved up to the allocator's largest block).
 */
export class _Segment<M> {
  head: _Block<M>;
  constructor(
    readonly id: number,
    readonly address: number,
    public raw: Segment<M>,
    public byteLength: number,
    readonly small: boolean,
    readonly stream: Stream,
    readonly expandable: boolean = false,
  ) {
    this.head = undefined as unknown as _Block<M>;
  }
}

/** A range of a segment: free (in a pool), allocated, or pending free. */
export class _Block<M> {
  segment: _Segment<M>;
  offset = 0;
  size = 0;
  address = 0;
  requested = 0;
  state: number = FREE;
  streamId = 0;
  prev: _Block<M> | null = null;
  next: _Block<M> | null = null;
  streamUses: Stream[] | null = null;
  /** Fences a pending block still waits for (see DeferredFrees). */
  waitingFences = 0;
  /** Allocation counter when the block last entered a pool (GC age). */
  stamp = 0;
  stack: string | undefined = undefined;
  /** Tag given at allocation, if any. */
  tag: string | undefined = undefined;
  /** Id in the allocator's id table (`allocateId`), -1 when it has none. */
  id: number = -1;
  /** Index of its bin while in a pool, else -1. */
  bin: number = -1;
  constructor(segment: _Segment<M>) {
    this.segment = segment;
  }
}

// ---- Free-block pool: segregated bins with an exact best fit ----
//
// Blocks are binned by size: up to 16 KiB one bin per 512 bytes (exact for
// the default granule); above, every power of two is cut into 8 equal bins
// (TLSF's two-level mapping). Bins are closed at the top, (lo, hi], so a
// power-of-two segment sits at the top of its bin and a split that takes
// less than a sixteenth of it leaves the rest in the same bin, where it is
// re-keyed in place. A bin holds its blocks sorted by (size, address), and a
// bitmap with a summary word finds the first non-empty bin at or after an
// index in a few integer operations. Bins are ordered by size, so the order
// of (bin, position) is the order of (size, address), and best fit is: the
// first block of the request's own bin that is large enough, else the first
// block of the next non-empty bin. That is exactly the lower bound of one
// array sorted by (size, address), found without touching the other blocks.
// One set of bins per stream.

/** Bins up to 16 KiB: one per 512 bytes. */
const LINEAR_BINS = 32;
/** log2 of the sub-bins per power of two above 16 KiB. */
const SUB_BITS = 3;
/** log2 of the first (size - 1) outside the linear bins (16 KiB). */
const FIRST_OCTAVE = 14;
/** Bins in all: up to sizes of 2^53. */
const BIN_COUNT = LINEAR_BINS + (53 - FIRST_OCTAVE) * (1 << SUB_BITS);
const WORDS = (BIN_COUNT + 31) >>> 5;

/** Index of the bin of a block of `size` bytes (non-decreasing in size). */
export function _binOf(size: number): number {
  const x = size - 1;
  if (x < 16384) return x >>> 9;
  if (x >= 2147483648) return binOfHuge(x);
  const f = 31 - Math.clz32(x);
  return LINEAR_BINS + ((f - FIRST_OCTAVE) << SUB_BITS) +
    ((x >>> (f - SUB_BITS)) & 7);
}

/** _binOf() beyond 32-bit integers (kept apart: the common case inlines). */
function binOfHuge(x: number): number {
  let f = Math.floor(Math.log2(x));
  if (2 ** f > x) f--;
  else if (2 ** (f + 1) <= x) f++;
  const sub = Math.floor(x / 2 ** (f - SUB_BITS)) - 8;
  return LINEAR_BINS + ((f - FIRST_OCTAVE) << SUB_BITS) + sub;
}

/** `_Block.bin` of a stream's designated victim (see `_StreamBins.dv`). */
const DV_BIN = -2;

/** Index of the lowest set bit of a non-zero 32-bit integer. */
function ctz(x: number): number {
  return 31 - Math.clz32(x & -x);
}

/** Whether `x` sorts before `y` by (size, address). */
function precedes<M>(x: _Block<M>, y: _Block<M>): boolean {
  return x.size < y.size || (x.size === y.size && x.address < y.address);
}

/** First index in `bin` whose block is not before (size, address). */
function position<M>(bin: _Block<M>[], size: number, address: number): number {
  let lo = 0, hi = bin.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const b = bin[mid];
    if (b.size < size || (b.size === size && b.address < address)) {
      lo = mid + 1;
    } else hi = mid;
  }
  return lo;
}

/**
 * The free blocks of one stream in one pool: the bins and their bitmap, and
 * one block kept out of them (dlmalloc's "designated victim").
 */
class _StreamBins<M> {
  /**
   * The designated victim: the block last inserted or moved out of its bin
   * by a resize (in the common cases the free rest of a segment, which every
   * split off its front shrinks and every merge back grows, and a block
   * freed and soon taken again). It sits in no bin, so those re-keys cost
   * two field writes and its removal one; best fit compares it with the
   * bins' answer, so the choice stays the exact lower bound. Its `bin` is
   * {@linkcode DV_BIN}.
   */
  dv: _Block<M> | null = null;
  readonly bins: (_Block<M>[] | null)[] = Array.from(
    { length: BIN_COUNT },
    () => null,
  );
  readonly words: Int32Array = new Int32Array(WORDS);
  summary = 0;
  count = 0;
  constructor(readonly streamId: number) {}

  /** First non-empty bin at or after `i`, else -1. */
  next(i: number): number {
    if (i >= BIN_COUNT) return -1;
    let w = i >>> 5;
    const m = this.words[w] & (-1 << (i & 31));
    if (m !== 0) return (w << 5) + ctz(m);
    const s = this.summary & (-2 << w);
    if (s === 0) return -1;
    w = ctz(s);
    return (w << 5) + ctz(this.words[w]);
  }

  lowerBound(size: number): _Block<M> | undefined {
    const v0 = this.dv;
    // (The victim alone: the bins are empty.)
    if (this.count === 1 && v0 !== null) {
      return v0.size >= size ? v0 : undefined;
    }
    const i = _binOf(size);
    const bin = this.bins[i];
    let b: _Block<M> | undefined;
    if (bin !== null && bin.length > 0 && bin[bin.length - 1].size >= size) {
      b = bin[bin[0].size >= size ? 0 : position(bin, size, -1)];
    } else {
      const j = this.next(i + 1);
      b = j < 0 ? undefined : this.bins[j]![0];
    }
    const v = this.dv;
    return v === null || v.size < size || (b !== undefined && precedes(b, v))
      ? b
      : v;
  }

  /** Puts a block in bin `i`, in order. */
  #put(block: _Block<M>, i: number): void {
    let bin = this.bins[i];
    if (bin === null) bin = this.bins[i] = [];
    const n = bin.length;
    if (n === 0) {
      bin.push(block);
      this.words[i >>> 5] |= 1 << (i & 31);
      this.summary |= 1 << (i >>> 5);
    } else if (precedes(bin[n - 1], block)) {
      bin.push(block);
    } else {
      // Shift by hand: splice() allocates its result array.
      const at = position(bin, block.size, block.address);
      bin.push(bin[n - 1]);
      for (let j = n - 1; j > at; j--) bin[j] = bin[j - 1];
      bin[at] = block;
    }
    block.bin = i;
  }

  /** Takes the block at index `at` out of its bin. */
  #take(block: _Block<M>, at: number): void {
    const i = block.bin;
    const bin = this.bins[i]!;
    const n = bin.length;
    for (let j = at + 1; j < n; j++) bin[j - 1] = bin[j];
    bin.pop();
    if (n === 1) {
      const w = i >>> 5;
      const word = this.words[w] & ~(1 << (i & 31));
      this.words[w] = word;
      if (word === 0) this.summary &= ~(1 << w);
    }
    block.bin = -1;
  }

  /** Index of a block in its bin, or -1 when the block is not here. */
  #find(block: _Block<M>): number {
    const i = block.bin;
    if (i < 0) return -1;
    const bin = this.bins[i];
    if (bin === null) return -1;
    const n = bin.length;
    if (n === 1) return bin[0] === block ? 0 : -1;
    const at = position(bin, block.size, block.address);
    return at < n && bin[at] === block ? at : -1;
  }

  insert(block: _Block<M>): void {
    // It becomes the designated victim; the previous one goes to its bin
    // (one put, as putting the new block there would cost).
    const old = this.dv;
    this.dv = block;
    block.bin = DV_BIN;
    if (old !== null) this.#put(old, _binOf(old.size));
    this.count++;
  }

  has(block: _Block<M>): boolean {
    if (block === this.dv) return block.bin === DV_BIN;
    return this.#find(block) >= 0 && _binOf(block.size) === block.bin;
  }

  remove(block: _Block<M>): void {
    if (block === this.dv) {
      this.dv = null;
      block.bin = -1;
      this.count--;
      return;
    }
    const at = this.#find(block);
    if (at < 0) throw new Error("Internal error: block not in its pool");
    this.#take(block, at);
    this.count--;
  }

  resize(block: _Block<M>, size: number, address: number): void {
    if (block === this.dv) {
      block.size = size;
      block.address = address;
      return;
    }
    const at = this.#find(block);
    if (at < 0) throw new Error("Internal error: block not in its pool");
    const i = block.bin;
    const j = _binOf(size);
    if (i !== j) {
      // It leaves its bin: it becomes the designated victim, and the
      // previous one goes to its bin (one take and one put, as a move
      // between bins would cost).
      this.#take(block, at);
      block.size = size;
      block.address = address;
      const old = this.dv;
      this.dv = block;
      block.bin = DV_BIN;
      if (old !== null) this.#put(old, _binOf(old.size));
      return;
    }
    // Same bin: move it within the bin until it is in order again.
    block.size = size;
    block.address = address;
    const bin = this.bins[i]!;
    const n = bin.length;
    if (n === 1) return;
    let k = at;
    while (k > 0 && precedes(block, bin[k - 1])) {
      bin[k] = bin[k - 1];
      k--;
    }
    if (k === at) {
      while (k < n - 1 && precedes(bin[k + 1], block)) {
        bin[k] = bin[k + 1];
        k++;
      }
    }
    bin[k] = block;
  }
}

/**
 * Free blocks of one pool, ordered by (stream id, size, address): PyTorch's
 * `BlockComparatorSize`. Best fit (the lower bound of a stream and size) and
 * every insert and removal cost a bin lookup and a search within one bin of
 * blocks of nearly the same size, however many blocks the pool holds.
 */
export class _BlockPool<M> {
  /** Bins of each stream that ever had a free block here. */
  readonly #streams = new Map<number, _StreamBins<M>>();
  #last: _StreamBins<M>;
  #count = 0;
  constructor(readonly small: boolean) {
    this.#last = new _StreamBins<M>(0);
    this.#streams.set(0, this.#last);
  }

  /** Number of free blocks. */
  get count(): number {
    return this.#count;
  }

  #bins(streamId: number): _StreamBins<M> | undefined {
    const last = this.#last;
    if (last.streamId === streamId) return last;
    const bins = this.#streams.get(streamId);
    if (bins !== undefined) this.#last = bins;
    return bins;
  }

  /**
   * The smallest block of stream `streamId` at least `size` large (lowest
   * address first), else `undefined`.
   */
  lowerBound(streamId: number, size: number): _Block<M> | undefined {
    const bins = this.#bins(streamId);
    return bins === undefined || bins.count === 0
      ? undefined
      : bins.lowerBound(size);
  }

  /** Adds a free block (its key must not change while it is here). */
  insert(block: _Block<M>): void {
    let bins = this.#bins(block.streamId);
    if (bins === undefined) {
      bins = new _StreamBins<M>(block.streamId);
      this.#streams.set(block.streamId, bins);
      this.#last = bins;
    }
    bins.insert(block);
    this.#count++;
  }

  /**
   * Changes the size and address of a block in the pool, keeping the order
   * (in place when it stays in its bin: the common case of a split
   * remainder or a merge survivor).
   *
   * @throws {Error} When the block is not in the pool.
   */
  resize(block: _Block<M>, size: number, address: number): void {
    if (!this.resizeAlone(block, size, address)) {
      this.#resize(block, size, address);
    }
  }

  /**
   * {@linkcode _BlockPool.resize} in its common cases, the designated
   * victim of the last stream used, or a block alone in its bin that stays
   * there (the rest of a split, the survivor of a merge); whether it
   * applied. Kept short, so that it inlines into the split and the merge.
   */
  resizeAlone(block: _Block<M>, size: number, address: number): boolean {
    const last = this.#last;
    if (last.dv === block) {
      block.size = size;
      block.address = address;
      return true;
    }
    const i = block.bin;
    if (last.streamId !== block.streamId || i < 0 || _binOf(size) !== i) {
      return false;
    }
    const bin = last.bins[i];
    if (bin === null || bin.length !== 1 || bin[0] !== block) return false;
    block.size = size;
    block.address = address;
    return true;
  }

  #resize(block: _Block<M>, size: number, address: number): void {
    const bins = this.#bins(block.streamId);
    if (bins === undefined) {
      throw new Error("Internal error: block not in its pool");
    }
    bins.resize(block, size, address);
  }

  /** Whether the block is in the pool. */
  has(block: _Block<M>): boolean {
    const bins = this.#bins(block.streamId);
    return bins !== undefined && bins.has(block);
  }

  /**
   * Takes a block out (before its size or address changes, when it is to
   * go back in with {@linkcode _BlockPool.insert}).
   *
   * @throws {Error} When the block is not in the pool.
   */
  remove(block: _Block<M>): void {
    const bins = this.#bins(block.streamId);
    if (bins === undefined) {
      throw new Error("Internal error: block not in its pool");
    }
    bins.remove(block);
    this.#count--;
  }

  /** Number of streams with bins (the default stream always has them). */
  get streamCount(): number {
    return this.#streams.size;
  }

  /** Drops the bins of streams other than the default that hold no block. */
  prune(): void {
    for (const [id, bins] of this.#streams) {
      if (id !== 0 && bins.count === 0) this.#streams.delete(id);
    }
    this.#last = this.#streams.get(0)!;
  }

  /** Every free block in (stream id, size, address) order (a copy). */
  all(): _Block<M>[] {
    const out: _Block<M>[] = [];
    const ids = [...this.#streams.keys()].sort((a, b) => a - b);
    for (const id of ids) {
      const { bins, dv } = this.#streams.get(id)!;
      const first = out.length;
      for (const bin of bins) {
        if (bin !== null) { for (const b of bin) out.push(b); }
      }
      if (dv !== null) {
        let at = first;
        while (at < out.length && precedes(out[at], dv)) at++;
        out.splice(at, 0, dv);
      }
    }
    return out;
  }
}
