/**
 * {@linkcode BuddyAllocator}: power-of-two blocks in pools taken from a
 * backing allocator, split on allocate and merged with their buddy on free,
 * after Paddle's `BuddyAllocator`.
 *
 * @module
 */

import {
  type Allocator,
  AllocatorBase,
  ContractViolationError,
  DataPtr,
  type Deleter,
  describeValue,
  Device,
  DoubleFreeError,
  hostBuffer,
  type HostMemory,
  InvalidArgumentError,
  isHostMemory,
  optionOr,
  OutOfMemoryError,
  type Segment,
  type SegmentSource,
  type StatValues,
  UnsupportedOperationError,
  validateAlignment,
  validateByteLength,
  validateFlag,
  validateInteger,
  viewSpan,
} from "@allot/core";
import {
  type BlockSnapshot,
  finishSnapshot,
  formatStatsSummary,
  type MemorySnapshot,
  type MemorySummaryOptions,
  type SegmentSnapshot,
  segmentTotals,
  validateOptionKeys,
} from "@allot/core";
import { OWNED, OwnedMarks } from "./_owned_marks.ts";
import { HeapCorruptionError, SystemAllocator } from "@allot/cpu";

/** Options of {@linkcode BuddyAllocator}. */
export interface BuddyAllocatorOptions {
  /**
   * Byte length of the first pool, rounded up to a power of two; every pool
   * has this length. Requests longer than a pool go straight to the backing
   * allocator.
   *
   * @default {1 MiB}
   */
  initialPoolByteLength?: number;
  /**
   * Most bytes held in pools; the allocator grows by one pool at a time up to
   * this.
   *
   * @default {1 GiB}
   */
  maxPoolByteLength?: number;
  /**
   * Smallest block, a power of two; every block is aligned to it (relative
   * to the pool, whose offset the backing allocator must align as well).
   * The allocator keeps an order byte per minimum block of its pools
   * (0.39% at 256 bytes), plus its free lists.
   *
   * @default {256}
   */
  minBlockByteLength?: number;
  /**
   * Where pools come from: a core `Allocator` (pools are its pointers) or a
   * core `SegmentSource` (pools are its segments, such as `GPUBuffer`s).
   *
   * @default {new SystemAllocator()}
   */
  backing?: Allocator | SegmentSource;
  /**
   * Blocks a free leaves unmerged per order, for the next allocations of
   * that order to take back without a split (the quick lists). 0 merges
   * every freed block at once (eager merging: the classic buddy allocator's
   * placement, which uses up to 0.23 of peak live fewer bytes on the real
   * traces, at 1.1 to 1.5 times the time per operation).
   *
   * @default {32}
   */
  quickListLength?: number;
  /**
   * Debug mode for hunting a bug: checks the allocator's invariants
   * ({@linkcode BuddyAllocator.checkIntegrity}, O(blocks)) after each
   * allocation and free, and fills freed blocks of host pools with the junk
   * pattern `0x7fedbeef` (a NaN as f32). Views made before a free cannot be
   * detached (they share the pool's buffer): they read junk.
   *
   * @default {false}
   */
  strict?: boolean;
}

/** The figures of {@linkcode BuddyAllocator.stats}. */
export interface BuddyAllocatorStats {
  /**
   * Bytes of live blocks (power-of-two lengths, and direct large blocks: the
   * whole pointer the backing gave).
   */
  allocatedBytes: StatValues;
  /** Live blocks; `allocated` counts allocations, `freed` frees. */
  allocations: StatValues;
  /** Bytes held from the backing allocator (pools and large blocks). */
  reservedBytes: number;
  /** Number of pools held. */
  poolCount: number;
  /** Length of the largest free block in the pools. */
  largestFreeBytes: number;
}

const MAX_ORDER = 30;
// Entries a free stack may hold past twice its free blocks before
// `#compact` drops the stale ones.
const STACK_SLACK = 64;
// An order byte no block has (orders are -31 to 31, owned used blocks -63 to
// -33): marks a unit seen while `#compact` runs.
const SEEN = -128;
const clz32 = Math.clz32;
// Added to a free block's order byte while it waits in a quick list
// (k + 1 + QUICK: 33 to 63), so that no buddy merges with it and no verb
// takes it for live.
const QUICK = 32;
// Blocks a quick list holds at most (per order) by default; a free past it
// merges. Measured on the real traces (`bench/buddy_ab.ts`): 8, 32, 128 and
// 1024 are within noise of each other on time; 32 keeps the unmerged blocks
// few.
const QUICK_LENGTH = 32;
// The most `quickListLength` accepts.
const MAX_QUICK_LENGTH = 1 << 16;

function isSegmentSource(value: unknown): value is SegmentSource {
  return typeof (value as SegmentSource)?.tryAllocateSegment === "function";
}

/**
 * A buddy allocator: pools of `2^n` bytes from a backing allocator (the
 * {@linkcode SystemAllocator} by default), split into power-of-two blocks. A
 * request takes the smallest free block of at least its length (found in
 * O(1) with a bitmap over the orders) and splits it in halves down to the
 * request's order; a free block merges with its buddy while the buddy is
 * free. A freed block first waits, unmerged, in a quick list of its order
 * (at most `quickListLength`, 32 by default), and the next request of that
 * order takes it back without a split; a request that would split a larger
 * block merges those of lower orders first, and one that finds no free
 * block merges them all before it takes a new pool. Block metadata (an order byte per minimum-block unit, which also
 * marks the blocks a `DataPtr` owns, and free lists as stacks of units) sits
 * outside the pools, so pools may be GPU buffers too.
 *
 * `alloc` returns an address, a plain number (pool × pool length + offset);
 * `memoryOf`, `byteOffsetOf` and `view` turn it into a place. `allocate`
 * wraps the same in an owning {@linkcode DataPtr}.
 *
 * @typeParam M Type of the backing allocator's memory.
 *
 * @example Grow by pools, merge back
 * ```ts
 * import { BuddyAllocator } from "@allot/buddy";
 * import assert from "node:assert/strict";
 *
 * const buddy = new BuddyAllocator({
 *   initialPoolByteLength: 4096,
 *   maxPoolByteLength: 8192,
 *   minBlockByteLength: 64,
 * });
 * const a = buddy.alloc(3000); // a 4096-byte block: the whole first pool
 * const b = buddy.alloc(100);  // a second pool, split down to 128 bytes
 * assert.equal(buddy.poolCount, 2);
 * assert.equal(buddy.allocatedBytes, 4096 + 128);
 * buddy.view(b, Float32Array).fill(1); // 32 floats: the 128-byte block
 * buddy.free(b);
 * buddy.free(a);
 * assert.equal(buddy.largestFreeBytes, 4096);
 * ```
 */
export class BuddyAllocator<M = unknown> extends AllocatorBase<M, number> {
  /** The device of the backing allocator. */
  readonly device: Device;
  /** Byte length of every pool (a power of two). */
  readonly poolByteLength: number;
  /** Most bytes held in pools. */
  readonly maxPoolByteLength: number;
  /** Smallest block and the alignment of every block. */
  readonly minBlockByteLength: number;
  /** Blocks a free leaves unmerged per order (0: every free merges). */
  readonly quickListLength: number;
  /** Where pools come from. */
  readonly backing: Allocator<M> | SegmentSource<M>;
  #obtain: (byteLength: number) => DataPtr<M>;

  #minShift: number;
  #poolShift: number; // log2(units per pool)
  #maxOrder: number;
  #poolPtrs: (DataPtr<M> | undefined)[] = [];
  // The ArrayBuffer (or SharedArrayBuffer) and byte offset of each pool
  // whose memory is one, for fast views.
  #poolBuffers: (ArrayBuffer | SharedArrayBuffer | undefined)[] = [];
  // Per pool: its byte offset in its memory minus its first address, so a
  // block's byte offset is `#poolBase[pool] + address`.
  #poolBase: number[] = [];
  #poolCount = 0;
  // Per minimum-block unit: a free block's start holds order + 1 (plus
  // QUICK while it waits in a quick list), a used block's start
  // -(order + 1) (less OWNED while a DataPtr owns it), anything else 0.
  #order = new Int8Array(0);
  // Free lists, one stack of units per order. A merge does not unlink the
  // buddy it absorbs (that would need links per unit): it zeroes its order,
  // and `alloc` skips such stale entries when it pops; a unit freed again
  // may be pushed while a stale entry of it is still in the stack. Each
  // stack stays bounded: a push that leaves it STACK_SLACK entries past
  // twice its free blocks has `#compact` drop its stale and repeated entries
  // (amortized O(1): only merges and trims make stale entries), so it never
  // holds more than twice the most free blocks it had, plus the slack.
  #stacks: number[][] = Array.from({ length: MAX_ORDER + 1 }, () => []);
  // Free blocks per order, and a bitmap of the orders with any.
  #free = new Int32Array(MAX_ORDER + 1);
  #bits = 0;
  // Quick lists, one per order: blocks freed and not merged, handed back
  // (last freed first) to the next allocations of their order, so a
  // runtime that frees and allocates the same sizes over and over neither
  // splits nor merges. Exact (no stale entries), at most `quickListLength`
  // each.
  // A request that must split merges those of lower orders first, one that
  // finds no free block merges them all (`#flushQuick`) before it takes a
  // new pool, and so do `trim`, `snapshot` and `largestFreeBytes`.
  #quick: number[][] = Array.from({ length: MAX_ORDER + 1 }, () => []);
  #large = new Map<number, DataPtr<M>>();
  // Every pointer held from the backing allocator (pools and large blocks),
  // with the bytes of it in use (a pool's length, a large block's length),
  // and the same pointers by memory, to refuse one that overlaps them.
  #held = new Map<DataPtr<M>, number>();
  #heldIn = new Map<unknown, Set<DataPtr<M>>>();
  #nextLarge = -1;
  // Addresses a live DataPtr from `allocate` owns: only its deleter frees
  // them (a raw free would let the address be reused under the pointer).
  // A pool block's mark is in its order byte (-(order + 1) - OWNED).
  #owned: OwnedMarks;
  #ownedDeleter: Deleter<number>;
  // Stats as plain numbers (cheaper on the hot path than Stat objects).
  #allocatedBytes = 0;
  #usedPeak = 0;
  #bytesFreed = 0;
  #liveCount = 0;
  #livePeak = 0;
  #freeCount = 0;
  #largeBytes = 0;
  #deleter: Deleter<number>;

  /**
   * Creates a buddy allocator. No pool is taken until the first request.
   *
   * @param options Pool sizes, minimum block and backing allocator.
   * @throws {InvalidArgumentError} For bad sizes, a backing that is neither
   * an `Allocator` nor a `SegmentSource`, or a `strict` that is not a
   * boolean.
   */
  constructor(options: BuddyAllocatorOptions = {}) {
    super();
    if (typeof options !== "object" || options === null) {
      throw new InvalidArgumentError(
        `Invalid options: must be an object, received ${
          describeValue(options)
        }`,
        { name: "options", value: options },
      );
    }
    validateOptionKeys(options, [
      "initialPoolByteLength",
      "maxPoolByteLength",
      "minBlockByteLength",
      "backing",
      "strict",
      "quickListLength",
    ], "BuddyAllocator");
    const min = validateAlignment(
      optionOr(options.minBlockByteLength, 256),
      1 << 20,
      "minBlockByteLength",
    );
    const initial = validateByteLength(
      optionOr(options.initialPoolByteLength, 1 << 20),
      2 ** MAX_ORDER,
      "initialPoolByteLength",
    );
    let pool = min;
    while (pool < initial) pool *= 2;
    const max = validateByteLength(
      optionOr(options.maxPoolByteLength, 2 ** 30),
      Number.MAX_SAFE_INTEGER,
      "maxPoolByteLength",
    );
    if (max < pool) {
      throw new InvalidArgumentError(
        `Invalid maxPoolByteLength: must be at least the pool length ${pool}, received ${max}`,
        { name: "maxPoolByteLength", value: max, limit: pool },
      );
    }
    const poolUnits = pool / min;
    if (Math.floor(max / pool) * poolUnits > 2 ** 31 - 1) {
      throw new InvalidArgumentError(
        `Invalid maxPoolByteLength: at most 2^31 - 1 blocks of ${min} bytes, received ${max}`,
        { name: "maxPoolByteLength", value: max, limit: (2 ** 31 - 1) * min },
      );
    }
    this.minBlockByteLength = min;
    this.quickListLength = validateInteger(
      optionOr(options.quickListLength, QUICK_LENGTH),
      0,
      MAX_QUICK_LENGTH,
      "quickListLength",
    );
    this.poolByteLength = pool;
    this.maxPoolByteLength = max;
    this.#minShift = 31 - Math.clz32(min);
    this.#poolShift = 31 - Math.clz32(poolUnits);
    this.#maxOrder = this.#poolShift;
    const backing = options.backing === undefined
      ? new SystemAllocator()
      : options.backing;
    if (
      !isSegmentSource(backing) &&
      typeof (backing as Allocator)?.allocate !== "function"
    ) {
      throw new InvalidArgumentError(
        `Invalid backing: must be an Allocator (with allocate()) or a SegmentSource (with tryAllocateSegment()), received ${
          Object.prototype.toString.call(backing)
        }`,
        { name: "backing", value: backing },
      );
    }
    if (!Device.isDevice(backing.device)) {
      throw new InvalidArgumentError(
        `Invalid backing: its device must be a Device, received ${
          describeValue(backing.device)
        }`,
        { name: "backing", value: backing },
      );
    }
    this.backing = backing as Allocator<M> | SegmentSource<M>;
    this.device = backing.device;
    if (isSegmentSource(backing)) {
      const source = backing as SegmentSource<M>;
      const release = (segment: Segment<M>) => source.freeSegment(segment);
      this.#obtain = (byteLength) => {
        const segment = source.tryAllocateSegment(byteLength);
        if (segment === undefined) {
          throw new OutOfMemoryError(
            `Cannot allocate a segment of ${byteLength} bytes: the segment source is out of memory`,
            { requestedBytes: byteLength },
          );
        }
        if (typeof segment !== "object" || segment === null) {
          throw new ContractViolationError(
            `Cannot use a segment of ${byteLength} bytes: the segment source returned ${
              describeValue(segment)
            }`,
          );
        }
        try {
          return new DataPtr(
            segment.memory,
            segment.byteOffset,
            segment.byteLength,
            source.device,
            { context: segment, deleter: release },
          );
        } catch (error) {
          // A segment that does not fit its memory: give it back (if the
          // source refuses even that, the contract violation is still the
          // error to report).
          try {
            source.freeSegment(segment);
          } catch {
            // Reported below, as the cause's sibling: nothing more to do.
          }
          throw new ContractViolationError(
            `Cannot use a segment of ${byteLength} bytes: the segment source returned one outside its memory (${
              error instanceof Error ? error.message : String(error)
            })`,
            { cause: error },
          );
        }
      };
    } else {
      const allocator = backing as Allocator<M>;
      this.#obtain = (byteLength) =>
        allocator.allocate(byteLength) as DataPtr<M>;
    }
    const strict = validateFlag(options.strict, "strict", false);
    this.#deleter = (address) => this.free(address);
    const owned = this.#owned = new OwnedMarks(min, () => this.#order);
    this.#ownedDeleter = (address) => {
      if (!owned.unmark(address)) {
        throw new DoubleFreeError(
          `Cannot free address ${
            describeValue(address)
          } through a DataPtr deleter: no live DataPtr of this buddy allocator owns it`,
        );
      }
      this.free(address);
    };
    if (strict) _makeStrict(this, owned);
  }

  /** Number of pools held. */
  get poolCount(): number {
    return this.#poolCount;
  }

  /** Bytes of live blocks: Paddle's `Used`. */
  get allocatedBytes(): number {
    return this.#allocatedBytes;
  }

  /**
   * Same as `allocatedBytes`.
   *
   * @deprecated Use `allocatedBytes` (one name per figure across allot); removed in the next minor version.
   */
  get usedBytes(): number {
    return this.allocatedBytes;
  }

  /** Bytes held from the backing allocator. */
  get reservedBytes(): number {
    return this.#poolCount * this.poolByteLength + this.#largeBytes;
  }

  /**
   * Length of the largest free block in the pools, once the blocks waiting
   * in the quick lists are merged (reading it merges them: at most
   * `quickListLength` blocks per order).
   */
  get largestFreeBytes(): number {
    this.#flushQuick();
    return this.#bits === 0
      ? 0
      : this.minBlockByteLength * 2 ** (31 - Math.clz32(this.#bits));
  }

  /**
   * The figures, read in O(1) (once the quick lists are merged, as for
   * {@linkcode BuddyAllocator.largestFreeBytes}).
   *
   * @returns A plain copy of the stats.
   */
  stats(): BuddyAllocatorStats {
    const base = this.#accBase;
    return {
      allocatedBytes: {
        current: this.#allocatedBytes,
        peak: this.#usedPeak,
        // Every byte allocated is live or freed (and so for counts).
        allocated: this.#allocatedBytes + this.#bytesFreed - base[0],
        freed: this.#bytesFreed - base[1],
      },
      allocations: {
        current: this.#liveCount,
        peak: this.#livePeak,
        allocated: this.#liveCount + this.#freeCount - base[2],
        freed: this.#freeCount - base[3],
      },
      reservedBytes: this.reservedBytes,
      poolCount: this.#poolCount,
      largestFreeBytes: this.largestFreeBytes,
    };
  }

  /**
   * Checks every invariant (O(blocks)): the blocks of each pool tile it at
   * their natural alignment, no two free buddies of one order are left
   * unmerged, and the free counts, order bitmap and stats match the blocks.
   *
   * @throws {HeapCorruptionError} When an invariant does not hold.
   * @deprecated Use {@linkcode BuddyAllocator.validate} (the same); removed in 0.3.0.
   */
  checkIntegrity(): void {
    const fail = (why: string): never => {
      throw new HeapCorruptionError(`Buddy allocator is corrupt: ${why}`);
    };
    const order = this.#order;
    const free = new Int32Array(MAX_ORDER + 1);
    const quick = new Int32Array(MAX_ORDER + 1);
    let used = 0, live = 0, pools = 0;
    for (let i = 0; i < this.#poolPtrs.length; i++) {
      const first = i << this.#poolShift;
      const end = first + (1 << this.#poolShift);
      if (this.#poolPtrs[i] === undefined) {
        for (let g = first; g < end && g < order.length; g++) {
          if (order[g] !== 0) fail(`unit ${g} of an absent pool is marked`);
        }
        continue;
      }
      pools++;
      let g = first;
      while (g < end) {
        const o = order[g];
        if (o === 0) fail(`unit ${g} starts no block`);
        const k = _orderOf(o);
        if (k > this.#maxOrder || (g & ((1 << k) - 1)) !== 0) {
          fail(`block at unit ${g} has a bad order ${k}`);
        }
        for (let u = g + 1; u < g + (1 << k); u++) {
          if (order[u] !== 0) fail(`unit ${u} inside a block is marked`);
        }
        if (o > QUICK) {
          quick[k]++;
        } else if (o > 0) {
          free[k]++;
          if (k < this.#maxOrder && order[g ^ (1 << k)] === o) {
            fail(`free buddies at units ${g} and ${g ^ (1 << k)} not merged`);
          }
        } else {
          used += this.minBlockByteLength * 2 ** k;
          live++;
        }
        g += 1 << k;
      }
    }
    if (pools !== this.#poolCount) fail("pool count is wrong");
    for (let k = 0; k <= MAX_ORDER; k++) {
      if (free[k] !== this.#free[k]) fail(`free count of order ${k} is wrong`);
      if (((this.#bits >>> k) & 1) !== (free[k] > 0 ? 1 : 0)) {
        fail(`order bitmap bit ${k} is wrong`);
      }
    }
    if (used + this.#largeBytes !== this.#allocatedBytes) {
      fail("used bytes are wrong");
    }
    if (live + this.#large.size !== this.#liveCount) {
      fail("live count is wrong");
    }
    if (this.#held.size !== this.#poolCount + this.#large.size) {
      fail("pointers held from the backing allocator are miscounted");
    }
    // Every free block is in its order's stack, and the stacks are bounded
    // (by twice the most free blocks they held at a push, plus the slack: at
    // most twice the blocks of their order the metadata covers).
    for (let k = 0; k <= MAX_ORDER; k++) {
      const stack = this.#stacks[k];
      if (stack.length > 2 * (order.length >>> k) + STACK_SLACK) {
        fail(`stack of order ${k} holds ${stack.length} entries`);
      }
      const listed = new Set<number>();
      for (const g of stack) if (order[g] === k + 1) listed.add(g);
      if (listed.size !== free[k]) {
        fail(`${free[k] - listed.size} free blocks of order ${k} not listed`);
      }
      // The quick list of order k holds each of its blocks once, and no
      // other unit.
      const list = this.#quick[k];
      if (list.length === 0 && quick[k] === 0) continue;
      const held = new Set(list);
      if (list.length > this.quickListLength || held.size !== list.length) {
        fail(`quick list of order ${k} holds ${list.length} entries`);
      }
      if (list.length !== quick[k]) {
        fail(`quick list of order ${k} lists ${list.length} of ${quick[k]}`);
      }
      for (const g of list) {
        if (order[g] !== k + 1 + QUICK) {
          fail(
            `quick list of order ${k} lists unit ${g}, not one of its blocks`,
          );
        }
      }
    }
  }

  /**
   * Allocates a block of at least `byteLength` bytes.
   *
   * @param byteLength Number of bytes; 0 takes a minimum block.
   * @returns The block's address for `free`, `memoryOf` and `byteOffsetOf`.
   * @throws {InvalidArgumentError} For a bad length.
   * @throws {OutOfMemoryError} When no block is free, the pools are at their
   * maximum, or the backing allocator refuses.
   * @throws {UnsupportedOperationError} When the backing allocator hands out
   * a pool not aligned to `minBlockByteLength` (the pool is given back).
   * @throws {ContractViolationError} When the backing allocator hands out
   * something that is not a live `DataPtr` of the length asked for, or one
   * this allocator holds already.
   */
  alloc(byteLength: number): number {
    // The hot path stays small (TurboFan inlines it into its callers); the
    // rare paths are methods of their own.
    if (
      typeof byteLength !== "number" || (byteLength >>> 0) !== byteLength ||
      byteLength > this.poolByteLength
    ) {
      return this.#allocOther(byteLength);
    }
    // Order k: 2^k minimum blocks hold the request (0 bytes: one).
    const k = 32 - clz32(((byteLength || 1) - 1) >> this.#minShift);
    const quick = this.#quick[k];
    const g = quick.length !== 0 ? quick.pop()! : this.#take(k, byteLength);
    this.#order[g] = -(k + 1);
    const bytes = this.minBlockByteLength << k;
    const used = this.#allocatedBytes + bytes;
    this.#allocatedBytes = used;
    if (used > this.#usedPeak) this.#usedPeak = used;
    const live = ++this.#liveCount;
    if (live > this.#livePeak) this.#livePeak = live;
    return g * this.minBlockByteLength;
  }

  // Takes a free block of order k from the free stacks (splitting a larger
  // one) when its quick list is empty; returns its unit. Before it splits,
  // it merges the quick lists of the orders below k (their blocks may merge
  // into one of order k: splitting a larger block instead leaves them
  // scattered, measured at up to 1.4x the highest byte used of eager
  // merging on the real traces); with no free block of order k or more, it
  // merges all of them, and then takes a new pool if it must.
  #take(k: number, byteLength: number): number {
    let bits = this.#bits & (-1 << k);
    if ((bits & (1 << k)) === 0) {
      this.#flushQuick(bits === 0 ? MAX_ORDER + 1 : k);
      bits = this.#bits & (-1 << k);
    }
    if (bits === 0) bits = this.#refill(byteLength, k);
    // The lowest order j >= k with a free block.
    const j = 31 - clz32(bits & -bits);
    const order = this.#order;
    // Pop list j, skipping stale entries (blocks a merge took away, or
    // taken already through another entry). Each free block of order j has
    // an entry in the stack: the loop ends before the stack does.
    const stack = this.#stacks[j];
    let g: number;
    while (order[g = stack.pop()!] !== j + 1) {
      if (g === undefined) _unlisted(j);
    }
    if (--this.#free[j] === 0) this.#bits &= ~(1 << j);
    if (j > k) this.#split(g, j, k);
    return g;
  }

  // Merges every block of the quick lists of orders below `below` (all by
  // default) with its free buddies.
  #flushQuick(below = MAX_ORDER + 1): void {
    const quick = this.#quick;
    for (let k = 0; k < below; k++) {
      const list = quick[k];
      while (list.length !== 0) this.#release(list.pop()!, k);
    }
  }

  // alloc() of a length that is not a small integer: refused, or a large
  // block straight from the backing allocator.
  #allocOther(byteLength: number): number {
    // A valid length that missed the fast path is longer than a pool.
    validateByteLength(byteLength);
    return this.#allocLarge(byteLength);
  }

  // A new pool, when no free block has order k or more: the bits of
  // the orders >= k with free blocks.
  #refill(byteLength: number, k: number): number {
    this.#addPool(byteLength);
    return this.#bits & (-1 << k);
  }

  // Splits the block at unit g from order j down to order k: the upper
  // halves become free blocks.
  #split(g: number, j: number, k: number): void {
    while (j > k) {
      j--;
      this.#pushFree(g + (1 << j), j);
    }
  }

  /**
   * Frees the block at `address` and merges it with its free buddies.
   *
   * @param address An address from `alloc`, not yet freed.
   * @throws {InvalidArgumentError} When `address` is not an integer.
   * @throws {DoubleFreeError} When no live block has that address; nothing
   * changes.
   */
  free(address: number): void {
    const order = this.#order;
    let g: number, o: number;
    // #unit's fast check: an aligned uint32 (the only numbers g * min can
    // equal) at a live block's start, which holds a negative order, one no
    // live DataPtr owns (-1 to -OWNED + 1; owned ones are below -OWNED).
    if (
      typeof address !== "number" ||
      (g = address >>> this.#minShift) * this.minBlockByteLength !== address ||
      g >= order.length || (o = order[g]) >= 0 || o < -OWNED
    ) {
      g = this.#freeOther(address);
      if (g < 0) return;
      o = order[g];
    }
    const k = -o - 1;
    const bytes = this.minBlockByteLength << k;
    this.#allocatedBytes -= bytes;
    this.#bytesFreed += bytes;
    this.#liveCount--;
    this.#freeCount++;
    const quick = this.#quick[k];
    if (quick.length < this.quickListLength) {
      order[g] = k + 1 + QUICK;
      quick.push(g);
    } else {
      this.#release(g, k);
    }
  }

  // Makes the block at unit g (order k) free, merged with its free buddies.
  #release(g: number, k: number): void {
    const order = this.#order;
    order[g] = 0;
    const free = this.#free;
    const maxOrder = this.#maxOrder;
    // Merge while the buddy is a free block of the same order (blocks of a
    // pool never reach past it: pools start at multiples of 2^maxOrder units).
    let block = g;
    while (k < maxOrder) {
      const buddy = block ^ (1 << k);
      if (order[buddy] !== k + 1) break;
      order[buddy] = 0; // its stack entry goes stale
      if (--free[k] === 0) this.#bits &= ~(1 << k);
      block &= ~(1 << k);
      k++;
    }
    this.#pushFree(block, k);
  }

  // free() off the fast path: frees a large block (and returns -1), or
  // returns the unit of a live block in a pool, or throws.
  #freeOther(address: number): number {
    if (typeof address === "number" && address < 0) {
      if (this.#owned.large.has(address)) _refuseOwned(address);
      this.#freeLarge(address);
      return -1;
    }
    const g = this.#unitSlow(address, "free");
    // A block a live DataPtr owns: only its deleter frees it.
    if (this.#order[g] < -OWNED) _refuseOwned(address);
    return g;
  }

  // Makes `block` a free block of order k.
  #pushFree(block: number, k: number): void {
    this.#order[block] = k + 1;
    const free = ++this.#free[k];
    if (free === 1) this.#bits |= 1 << k;
    if (this.#stacks[k].push(block) > 2 * free + STACK_SLACK) {
      this.#compact(k);
    }
  }

  // Drops the stale and repeated entries of stack k: what is left is one
  // entry per free block of order k, in the order they were pushed.
  #compact(k: number): void {
    const order = this.#order;
    const stack = this.#stacks[k];
    const listed = k + 1;
    let n = 0;
    for (let i = 0; i < stack.length; i++) {
      const g = stack[i];
      if (order[g] !== listed) continue;
      order[g] = SEEN; // a second entry of g is now skipped
      stack[n++] = g;
    }
    stack.length = n;
    for (let i = 0; i < n; i++) order[stack[i]] = listed;
  }

  /**
   * The memory the block at `address` lives in.
   *
   * @param address A live block's address.
   * @returns The pool's (or large block's) memory.
   * @throws {DoubleFreeError} When no live block has that address.
   */
  memoryOf(address: number): M {
    if (typeof address === "number" && address < 0) {
      return this.#largePtr(address, "read").memory;
    }
    const g = this.#unit(address, "read");
    return this.#poolPtrs[g >>> this.#poolShift]!.memory;
  }

  /**
   * Byte offset of the block at `address` in its memory.
   *
   * @param address A live block's address.
   * @returns The byte offset.
   * @throws {DoubleFreeError} When no live block has that address.
   */
  byteOffsetOf(address: number): number {
    if (typeof address === "number" && address < 0) {
      return this.#largePtr(address, "read").byteOffset;
    }
    const g = this.#unit(address, "read");
    const mask = (1 << this.#poolShift) - 1;
    return this.#poolPtrs[g >>> this.#poolShift]!.byteOffset +
      (g & mask) * this.minBlockByteLength;
  }

  /**
   * Usable byte length of the block at `address` (its power-of-two length).
   *
   * @param address A live block's address.
   * @returns The block length.
   * @throws {DoubleFreeError} When no live block has that address.
   */
  byteLengthOf(address: number): number {
    if (typeof address === "number" && address < 0) {
      return this.#largePtr(address, "read").byteLength;
    }
    const g = this.#unit(address, "read");
    // A used block's order byte: -(k + 1), less OWNED while a DataPtr owns
    // it.
    return this.minBlockByteLength * 2 ** ((-this.#order[g] - 1) % OWNED);
  }

  /**
   * A typed-array view of the whole block at `address` (its power-of-two
   * length), for host memories.
   *
   * @typeParam T The typed array type.
   * @param address A live block's address.
   * @param type The typed-array constructor.
   * @returns The view.
   * @throws {InvalidArgumentError} When `type` is not a constructor whose
   * `BYTES_PER_ELEMENT` is 1, 2, 4 or 8 (or absent), or does not make a view
   * of the block.
   * @throws {DoubleFreeError} When no live block has that address, also
   * when the constructor freed the block.
   * @throws {UnsupportedOperationError} When the pools are not host memory.
   */
  view<T>(
    address: number,
    type: {
      new (
        buffer: ArrayBuffer | SharedArrayBuffer,
        byteOffset: number,
        length: number,
      ): T;
      readonly BYTES_PER_ELEMENT?: number;
    },
  ): T {
    if (!_isConstructor(type)) {
      throw new InvalidArgumentError(
        `Invalid view type: must be a typed-array constructor or DataView, received ${
          describeValue(type)
        }`,
        { name: "type", value: type, limit: "a typed-array constructor" },
      );
    }
    const buffer = this.#hostBuffer(address);
    const byteOffset = this.byteOffsetOf(address);
    const limit = this.byteLengthOf(address);
    const holder = this.#holderOf(address);
    // DataView (no BYTES_PER_ELEMENT) counts bytes.
    const size = type.BYTES_PER_ELEMENT ?? 1;
    if (size !== 1 && size !== 2 && size !== 4 && size !== 8) {
      throw new InvalidArgumentError(
        `Invalid view type: its BYTES_PER_ELEMENT must be 1, 2, 4 or 8, received ${
          describeValue(size)
        }`,
        { name: "type", value: type, limit: [1, 2, 4, 8] },
      );
    }
    const view = new type(buffer, byteOffset, Math.floor(limit / size));
    // The type is the caller's: a constructor that ignores its arguments or
    // a subclass that lies about its element size must not hand out a view
    // past the block.
    const span = viewSpan(view);
    if (
      span === undefined || span.buffer !== buffer ||
      span.byteOffset !== byteOffset || span.byteLength > limit
    ) {
      throw new InvalidArgumentError(
        `Invalid view type: it must make a view of the ${limit}-byte block at byte offset ${byteOffset}, made ${
          span === undefined
            ? describeValue(view)
            : `one of ${span.byteLength} bytes at byte offset ${span.byteOffset}`
        }`,
        { name: "type", value: type, limit },
      );
    }
    // ... nor, having freed the block (a constructor may call back into
    // this allocator), hand out a view of freed memory, or of a smaller
    // block allocated again at the address, or of a pool trim() gave back.
    if (
      this.byteLengthOf(address) < span.byteLength ||
      this.#holderOf(address) !== holder
    ) {
      throw new DoubleFreeError(
        `Cannot view address ${address}: the view type freed the block, and the address now names another block`,
      );
    }
    return view;
  }

  // What holds a live block's bytes: its pool's pointer, or its own as a
  // large block. The same holder at the same address means the same memory
  // and byte offset (a pool given back and taken again is another pointer).
  #holderOf(address: number): DataPtr<M> | undefined {
    return address < 0
      ? this.#large.get(address)
      : this.#poolPtrs[(address / this.minBlockByteLength) >>> this.#poolShift];
  }

  #hostBuffer(address: number): ArrayBuffer | SharedArrayBuffer {
    const memory = this.memoryOf(address);
    if (!isHostMemory(memory)) {
      throw new UnsupportedOperationError(
        `Cannot view address ${address}: the pools are not host memory`,
      );
    }
    return hostBuffer(memory as HostMemory);
  }

  /**
   * A `Uint8Array` over `byteLength` bytes of the block at `address`, for
   * host memories; the fast way to view a block.
   *
   * @param address A live block's address.
   * @param byteLength Number of bytes, at most the block's length
   * ({@linkcode BuddyAllocator.byteLengthOf}).
   * @returns The bytes.
   * @throws {InvalidArgumentError} When `byteLength` is not an integer or
   * reaches past the block.
   * @throws {DoubleFreeError} When no live block has that address.
   * @throws {UnsupportedOperationError} When the pools are not host memory.
   */
  bytes(address: number, byteLength: number): Uint8Array {
    if (
      typeof address === "number" && typeof byteLength === "number" &&
      (byteLength >>> 0) === byteLength
    ) {
      const g = address >>> this.#minShift;
      const order = this.#order;
      const min = this.minBlockByteLength;
      // A used block's start holds -(order + 1); blocks in pools are at
      // most a pool long (< 2^31 bytes), so `min << k` stays an int32.
      // `g * min` equals only an aligned uint32 address.
      const o = g < order.length ? order[g] : 0;
      // -(k + 1), less OWNED while a DataPtr owns the block.
      const k = o < 0 ? (-o - 1) & (OWNED - 1) : -1;
      if (g * min === address && k >= 0 && byteLength <= min << k) {
        const pool = g >>> this.#poolShift;
        const buffer = this.#poolBuffers[pool];
        if (buffer !== undefined) {
          return new Uint8Array(
            buffer,
            this.#poolBase[pool] + address,
            byteLength,
          );
        }
      }
    }
    return this.#bytesSlow(address, byteLength);
  }

  // bytes() off the fast path: checks everything, throws or makes the view.
  #bytesSlow(address: number, byteLength: number): Uint8Array {
    const limit = this.byteLengthOf(address);
    validateByteLength(byteLength, limit, "byteLength");
    return new Uint8Array(
      this.#hostBuffer(address),
      this.byteOffsetOf(address),
      byteLength,
    );
  }

  /**
   * Allocates an owning pointer to a block.
   *
   * @param byteLength Number of bytes.
   * @returns A pointer whose context is the block's address.
   * @throws {InvalidArgumentError} For a bad length.
   * @throws {OutOfMemoryError} When the request cannot be served.
   */
  allocate(byteLength: number): DataPtr<M, number> {
    const address = this.alloc(byteLength);
    const ptr = new _OwnedPtr(
      this.memoryOf(address),
      this.byteOffsetOf(address),
      byteLength,
      this.device,
      { context: address, deleter: this.#ownedDeleter },
      this.#owned,
    );
    this.#owned.mark(address);
    return ptr;
  }

  /**
   * Whether `ptr` is a live pointer that this allocator's `allocate` gave
   * out (its deleter is this allocator's).
   *
   * @param ptr Any value.
   * @returns `true` for a live pointer from this allocator.
   */
  ownsPointer(ptr: unknown): boolean {
    return DataPtr.isDataPtr(ptr) && !ptr.released &&
      ptr.getDeleter() === this.#ownedDeleter;
  }

  /**
   * The deleter of this allocator's contexts (addresses).
   *
   * @returns The deleter `rawDeallocate` calls.
   */
  override rawDeleter(): Deleter<number> {
    return this.#deleter;
  }

  /**
   * Gives fully free pools back to the backing allocator.
   *
   * @returns Bytes given back.
   */
  trim(): number {
    this.#flushQuick();
    let freed = 0;
    const order = this.#order;
    const maxOrder = this.#maxOrder;
    for (let i = 0; i < this.#poolPtrs.length; i++) {
      const ptr = this.#poolPtrs[i];
      const g = i << this.#poolShift;
      if (ptr === undefined || order[g] !== maxOrder + 1) continue;
      order[g] = 0; // its stack entry goes stale
      if (--this.#free[maxOrder] === 0) this.#bits &= ~(1 << maxOrder);
      this.#poolPtrs[i] = undefined;
      this.#poolBuffers[i] = undefined;
      this.#poolCount--;
      this.#unhold(ptr);
      ptr.release();
      freed += this.poolByteLength;
    }
    return freed;
  }

  #unit(address: number, what: string): number {
    if (
      typeof address === "number" && (address >>> 0) === address &&
      (address & (this.minBlockByteLength - 1)) === 0
    ) {
      const g = address >>> this.#minShift;
      if (g < this.#order.length && this.#order[g] < 0) return g;
    }
    return this.#unitSlow(address, what);
  }

  #unitSlow(address: number, what: string): number {
    const min = this.minBlockByteLength;
    if (!Number.isSafeInteger(address)) {
      throw new InvalidArgumentError(
        `Cannot ${what} address ${
          describeValue(address)
        }: must be an integer (an address from alloc())`,
        { name: "address", value: address, limit: "a safe integer" },
      );
    }
    const g = address / min;
    if (address % min !== 0 || g >= this.#order.length || this.#order[g] >= 0) {
      throw new DoubleFreeError(
        `Cannot ${what} address ${address}: no live block of this buddy allocator has it (freed already, or allocated elsewhere; live blocks start at multiples of ${min} below ${
          this.#order.length * min
        })`,
      );
    }
    return g;
  }

  #freeSlot(): number {
    const slot = this.#poolPtrs.indexOf(undefined);
    return slot >= 0 ? slot : this.#poolPtrs.length;
  }

  #addPool(byteLength: number): void {
    const pool = this.poolByteLength;
    if ((this.#poolCount + 1) * pool > this.maxPoolByteLength) {
      throw this.#outOfMemory(byteLength);
    }
    // Metadata first: if the engine refuses it, no pool is taken (a larger
    // metadata array alone changes nothing).
    let ptr: DataPtr<M>;
    try {
      const units = (this.#freeSlot() + 1) << this.#poolShift;
      if (units > this.#order.length) this.#grow(units);
      ptr = this.#obtain(pool);
    } catch (error) {
      if (error instanceof ContractViolationError) throw error;
      throw this.#outOfMemory(byteLength, error);
    }
    this.#checkObtained(ptr, pool, pool, "pool");
    const poolOffset = ptr.byteOffset;
    if (poolOffset % this.minBlockByteLength !== 0) {
      _giveBack(ptr);
      throw new UnsupportedOperationError(
        `Cannot use a pool at byte offset ${poolOffset}: the backing allocator must align pools to ${this.minBlockByteLength} bytes`,
      );
    }
    // The backing allocator may have re-entered this allocator (taking
    // pools, or the slot picked above): pick the slot, and check the
    // maximum, again.
    const index = this.#freeSlot();
    const units = (index + 1) << this.#poolShift;
    try {
      if ((this.#poolCount + 1) * pool > this.maxPoolByteLength) {
        throw this.#outOfMemory(byteLength);
      }
      if (units > this.#order.length) this.#grow(units);
    } catch (error) {
      _giveBack(ptr);
      throw error instanceof OutOfMemoryError
        ? error
        : this.#outOfMemory(byteLength, error);
    }
    this.#hold(ptr, pool);
    this.#poolPtrs[index] = ptr;
    const memory = ptr.memory as unknown;
    this.#poolBuffers[index] = memory instanceof ArrayBuffer ||
        (typeof SharedArrayBuffer !== "undefined" &&
          memory instanceof SharedArrayBuffer)
      ? memory
      : undefined;
    this.#poolBase[index] = ptr.byteOffset - index * this.poolByteLength;
    this.#poolCount++;
    this.#pushFree(index << this.#poolShift, this.#maxOrder);
  }

  // Makes the metadata cover at least `units` units: one order byte per
  // unit, doubling each time.
  #grow(units: number): void {
    const maxUnits = Math.floor(this.maxPoolByteLength / this.poolByteLength) <<
      this.#poolShift;
    const capacity = Math.min(
      Math.max(units, this.#order.length * 2),
      maxUnits,
    );
    const order = new Int8Array(capacity);
    order.set(this.#order);
    this.#order = order;
  }

  // Refuses what a lying backing allocator handed out: not a pointer, a
  // released one, one shorter than asked for, or one this allocator holds
  // already (it would overlap a live pool or block). Gives it back where
  // that is safe.
  //
  // `used` is how many of its bytes the allocator will use (a pool's length;
  // undefined for a large block: the whole pointer): they must not overlap
  // the bytes in use of a pointer held already, or two live blocks would
  // share memory.
  #checkObtained(
    ptr: DataPtr<M>,
    byteLength: number,
    used: number | undefined,
    what: string,
  ): void {
    let why: string | undefined;
    if (!DataPtr.isDataPtr(ptr)) {
      why = `returned ${describeValue(ptr)}, not a DataPtr`;
    } else if (ptr.released) {
      why = `returned a released pointer`;
    } else if (this.#held.has(ptr)) {
      why = `returned a pointer it handed out before, still held`;
    } else if (ptr.byteLength < byteLength) {
      why = `returned ${ptr.byteLength} bytes`;
      _giveBack(ptr);
    } else {
      const length = used ?? ptr.byteLength;
      const other = this.#overlapping(ptr, length);
      if (other !== undefined) {
        why = `returned bytes ${ptr.byteOffset} to ${
          ptr.byteOffset + length
        } of a memory whose bytes ${other.byteOffset} to ${
          other.byteOffset + this.#held.get(other)!
        } it handed out before, still held`;
        _giveBack(ptr);
      }
    }
    if (why !== undefined) {
      throw new ContractViolationError(
        `Cannot use a ${what} of ${byteLength} bytes: the backing allocator ${why}`,
      );
    }
  }

  // A held pointer whose bytes in use overlap `used` bytes of `ptr`.
  #overlapping(ptr: DataPtr<M>, used: number): DataPtr<M> | undefined {
    const same = this.#heldIn.get(ptr.memory);
    if (same === undefined || used === 0) return undefined;
    const start = ptr.byteOffset, end = start + used;
    for (const other of same) {
      const length = this.#held.get(other)!;
      if (
        length > 0 && other.byteOffset < end &&
        start < other.byteOffset + length
      ) {
        return other;
      }
    }
    return undefined;
  }

  #hold(ptr: DataPtr<M>, used: number): void {
    this.#held.set(ptr, used);
    const same = this.#heldIn.get(ptr.memory);
    if (same === undefined) this.#heldIn.set(ptr.memory, new Set([ptr]));
    else same.add(ptr);
  }

  #unhold(ptr: DataPtr<M>): void {
    this.#held.delete(ptr);
    const same = this.#heldIn.get(ptr.memory)!;
    same.delete(ptr);
    if (same.size === 0) this.#heldIn.delete(ptr.memory);
  }

  #outOfMemory(byteLength: number, cause?: unknown): OutOfMemoryError {
    const largest = this.largestFreeBytes;
    const reserved = this.reservedBytes;
    return new OutOfMemoryError(
      `Cannot allocate ${byteLength} bytes: largest free block ${largest} bytes, ${this.#allocatedBytes} bytes used, ${this.#poolCount} pools of ${this.poolByteLength} bytes held (at most ${this.maxPoolByteLength} bytes)${
        cause === undefined ? "" : `, the backing allocator refused: ${cause}`
      }`,
      {
        requestedBytes: byteLength,
        capacityBytes: this.maxPoolByteLength,
        freeBytes: reserved - this.#allocatedBytes,
        largestFreeBytes: largest,
        allocatedBytes: this.#allocatedBytes,
        reservedBytes: reserved,
      },
      { cause },
    );
  }

  #allocLarge(byteLength: number): number {
    let ptr: DataPtr<M>;
    try {
      ptr = this.#obtain(byteLength);
    } catch (error) {
      if (error instanceof ContractViolationError) throw error;
      throw this.#outOfMemory(byteLength, error);
    }
    this.#checkObtained(ptr, byteLength, undefined, "block");
    // The block is the whole pointer (byteLengthOf, bytes() and view() let
    // the caller use it all): the stats count all of it too.
    const held = ptr.byteLength;
    this.#hold(ptr, held);
    const address = this.#nextLarge * this.minBlockByteLength;
    this.#nextLarge--;
    this.#large.set(address, ptr);
    this.#largeBytes += held;
    this.#allocatedBytes += held;
    if (this.#allocatedBytes > this.#usedPeak) {
      this.#usedPeak = this.#allocatedBytes;
    }
    if (++this.#liveCount > this.#livePeak) this.#livePeak = this.#liveCount;
    return address;
  }

  #largePtr(address: number, what: string): DataPtr<M> {
    if (!Number.isSafeInteger(address)) this.#unitSlow(address, what);
    const ptr = this.#large.get(address);
    if (ptr === undefined) {
      throw new DoubleFreeError(
        `Cannot ${what} address ${address}: no live large block of this buddy allocator has it (freed already, or allocated elsewhere)`,
      );
    }
    return ptr;
  }

  #freeLarge(address: number): void {
    const ptr = this.#largePtr(address, "free");
    const byteLength = this.#held.get(ptr)!;
    this.#large.delete(address);
    this.#unhold(ptr);
    this.#largeBytes -= byteLength;
    this.#allocatedBytes -= byteLength;
    this.#bytesFreed += byteLength;
    this.#liveCount--;
    this.#freeCount++;
    ptr.release();
  }

  // ---- the allocator contract's verbs (issue #15) ----

  /** The totals at the last `resetAccumulatedStats()`. */
  #accBase: readonly number[] = [0, 0, 0, 0];

  /**
   * Gives fully free pools back to the backing allocator: the contract's
   * name of {@linkcode BuddyAllocator.trim}.
   *
   * @returns Bytes given back.
   */
  emptyCache(): number {
    return this.trim();
  }

  /**
   * Checks every invariant: the contract's name of
   * {@linkcode BuddyAllocator.checkIntegrity}.
   *
   * @throws {HeapCorruptionError} When an invariant does not hold.
   */
  validate(): void {
    this.checkIntegrity();
  }

  /** Sets every peak of {@linkcode BuddyAllocator.stats} to its current value. */
  resetPeakStats(): void {
    this.#usedPeak = this.#allocatedBytes;
    this.#livePeak = this.#liveCount;
  }

  /**
   * Sets the `allocated` and `freed` totals of
   * {@linkcode BuddyAllocator.stats} to 0; `current` and `peak` stay.
   */
  resetAccumulatedStats(): void {
    this.#accBase = [
      this.#allocatedBytes + this.#bytesFreed,
      this.#bytesFreed,
      this.#liveCount + this.#freeCount,
      this.#freeCount,
    ];
  }

  /**
   * A text table of {@linkcode BuddyAllocator.stats}, in the layout of
   * `torch.cuda.memory_summary()`.
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return formatStatsSummary(this.stats(), options, "BuddyAllocator");
  }

  /**
   * Every pool with its blocks in address order (free ones `inactive`), and
   * each large block as a segment of its own, in core's snapshot format
   * (`requestedByteLength` is the block's length: the allocator keeps no
   * other). O(blocks).
   *
   * @returns The snapshot (no history: the allocator records none).
   */
  snapshot(): MemorySnapshot {
    this.#flushQuick();
    const segments: SegmentSnapshot[] = [];
    const order = this.#order, unit = this.minBlockByteLength;
    const pools = this.#poolPtrs;
    for (let i = 0; i < pools.length; i++) {
      const ptr = pools[i];
      if (ptr === undefined) continue;
      const first = i << this.#poolShift, end = first + (1 << this.#poolShift);
      const blocks: BlockSnapshot[] = [];
      for (let g = first; g < end;) {
        const o = order[g];
        if (o === 0) break; // (corrupt: validate() says where)
        const k = _orderOf(o);
        const byteLength = unit * 2 ** k;
        blocks.push({
          address: g * unit,
          offset: (g - first) * unit,
          byteLength,
          requestedByteLength: o < 0 ? byteLength : 0,
          state: o < 0 ? "active_allocated" : "inactive",
        });
        g += 2 ** k;
      }
      segments.push({
        id: i,
        address: first * unit,
        byteLength: this.poolByteLength,
        stream: 0,
        pool: "small",
        ...segmentTotals(blocks),
        memoryByteOffset: ptr.byteOffset,
        blocks,
      });
    }
    let id = pools.length;
    for (const [address, ptr] of this.#large) {
      const byteLength = this.#held.get(ptr) ?? ptr.byteLength;
      const blocks: BlockSnapshot[] = [{
        address,
        offset: 0,
        byteLength,
        requestedByteLength: byteLength,
        state: "active_allocated",
      }];
      segments.push({
        id: id++,
        address,
        byteLength,
        stream: 0,
        pool: "large",
        ...segmentTotals(blocks),
        memoryByteOffset: ptr.byteOffset,
        blocks,
      });
    }
    return finishSnapshot(
      String(this.device),
      "BuddyAllocator",
      segments,
      null,
    );
  }
}

// Strict mode: wraps the calls that change an allocator so that each checks
// every invariant after it ran, and junk-fills host blocks a free gives back.
function _makeStrict<M>(
  buddy: BuddyAllocator<M>,
  owned: OwnedMarks,
): void {
  const proto = BuddyAllocator.prototype as BuddyAllocator<M>;
  const alloc = proto.alloc, free = proto.free, trim = proto.trim;
  Object.defineProperties(buddy, {
    alloc: {
      value: (byteLength: number): number => {
        const address = alloc.call(buddy, byteLength);
        buddy.checkIntegrity();
        return address;
      },
    },
    free: {
      value: (address: number): void => {
        // Refused before the junk fill: a refused call changes nothing.
        if (owned.has(address)) _refuseOwned(address);
        let junk: Uint8Array | undefined;
        try {
          junk = buddy.bytes(address, buddy.byteLengthOf(address));
        } catch {
          // Not a live host block: free() says why, or there is no view.
        }
        // Filled while still ours: a large block goes back to the backing
        // allocator, which may hand its bytes out again at once.
        if (junk !== undefined) junkFill(junk);
        free.call(buddy, address);
        buddy.checkIntegrity();
      },
    },
    trim: {
      value: (): number => {
        const freed = trim.call(buddy);
        buddy.checkIntegrity();
        return freed;
      },
    },
  });
}

// The order of the block whose start holds order byte `o` (not 0): k + 1 if
// free, k + 1 + QUICK in a quick list, -(k + 1) if used, -(k + 1) - OWNED
// while a DataPtr owns it.
function _orderOf(o: number): number {
  return (o < -OWNED ? -o - OWNED : o > QUICK ? o - QUICK : Math.abs(o)) - 1;
}

// An empty stack while its order counts free blocks: a corrupt allocator
// (never otherwise; the pop loop would not end).
function _unlisted(order: number): never {
  throw new HeapCorruptionError(
    `Buddy allocator is corrupt: a free block of order ${order} is not listed`,
  );
}

// A raw free of a block a live DataPtr owns: refused, nothing changes.
function _refuseOwned(address: number): never {
  throw new DoubleFreeError(
    `Cannot free address ${address}: it is owned by a live DataPtr (release the DataPtr instead, or take the address with releaseContext() first)`,
  );
}

// The DataPtr `allocate` returns: giving up its context with releaseContext()
// hands the address to the caller, who then frees it with the raw verb.
class _OwnedPtr<M> extends DataPtr<M, number> {
  #owned: OwnedMarks;

  constructor(
    memory: M,
    byteOffset: number,
    byteLength: number,
    device: Device,
    ownership: { context: number; deleter: Deleter<number> },
    owned: OwnedMarks,
  ) {
    super(memory, byteOffset, byteLength, device, ownership);
    this.#owned = owned;
  }

  override releaseContext(): number | null {
    const context = super.releaseContext();
    if (context !== null) this.#owned.unmark(context);
    return context;
  }
}

// Gives back a pointer the allocator refuses; a deleter that throws does not
// hide the refusal, which is the error the caller gets.
function _giveBack(ptr: DataPtr<unknown>): void {
  try {
    ptr.release();
  } catch {
    // The backing allocator's own failure, on memory we never used.
  }
}

// Whether `value` can be called with `new` (without calling it).
function _isConstructor(value: unknown): boolean {
  if (typeof value !== "function") return false;
  try {
    Reflect.construct(String, [], value);
    return true;
  } catch {
    return false;
  }
}

// PyTorch's junk pattern: 0x7fedbeef (little-endian bytes), a NaN as f32.
function junkFill(bytes: Uint8Array): void {
  for (let i = 0; i < bytes.length; i++) {
    bytes[i] = JUNK_BYTES[(bytes.byteOffset + i) & 3];
  }
}

const JUNK_BYTES = [0xef, 0xbe, 0xed, 0x7f];
