/**
 * {@linkcode StepPlannedPool}: best fit with splitting and coalescing over
 * exactly sized segments, plus a plan for steps that repeat. At each step
 * boundary (`endStep()`) the allocations of the step just finished are laid
 * out once in one arena by greedy-by-size (TFLite's arena planner,
 * onnxruntime's memory patterns); in the next step each request is placed at
 * its planned offset when that range is free, so a repeating step runs at
 * its lower bound with no segment made. Anything else (a new shape, a step
 * that differs) falls back to best fit, and the next boundary plans again.
 * Requests of at most 512 bytes that the plan does not place share small
 * segments of their own, so a small block that outlives its step does not
 * pin a large free range (a KV cache grown each step needs it).
 *
 * @module
 */

import {
  acquireSegment,
  alignUp,
  AllotError,
  ContractViolationError,
  describeValue,
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
  releaseSegment,
  type Segment,
  type SegmentSource,
  SegmentSourceError,
  type SynchronizeOptions,
  UnsupportedOperationError,
  UseAfterFreeError,
  validateAlignment,
  validateByteLength,
  validateFlag,
  validateSynchronizeOptions,
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
import { type _PlanItem, _PlanMemo } from "./_step_plan.ts";
import { _fastPlan, _key, _KEY0, type _Plan } from "./_step_plan_record.ts";
import {
  _before,
  _insertSorted,
  _place,
  _removeSorted,
} from "./_planned_free_index.ts";
import { validateObject } from "@allot/core";
import { _heldRatio } from "./_held_ratio.ts";
import { _PeakWindow } from "./_peak_window.ts";
import { _anchorShapes } from "./_shape_anchors.ts";
import { _makeStrictPlannedPool } from "./_strict_planned_pool.ts";
import { StepPoolGroup } from "./step_pool_group.ts";

/** Options of {@linkcode StepPlannedPool}. */
export interface StepPlannedPoolOptions {
  /**
   * Before a new segment is made, whole free segments are given back while
   * held bytes would exceed this many times the live bytes.
   *
   * @default {1.1}
   */
  maxHeldRatio?: number;
  /**
   * A group whose pools' held bytes are bounded together (one pool per
   * WebGPU usage on one device); call the group's `endStep()` then.
   *
   * @default {undefined}
   */
  group?: StepPoolGroup;
  /**
   * Debug mode for hunting a bug: {@linkcode StepPlannedPool.validate} runs
   * before and after every call that changes the pool (slow), and a freed
   * block is filled with `JUNK_BYTE` where the host can write the memory.
   *
   * @default {false}
   */
  strict?: boolean;
}

/** A segment of a {@linkcode StepPlannedPool}. */
class _Seg<M> {
  /** The pool while the segment is held, `null` once given back. */
  pool: object | null;
  constructor(
    pool: object,
    readonly segment: Segment<M>,
    readonly size: number,
    public arena: boolean,
    public lastUsed: number,
    readonly small = false,
  ) {
    this.pool = pool;
    this.memory = segment.memory;
    this.base = segment.byteOffset;
  }
  /** The segment's memory and offset (what each block reads, at hand). */
  readonly memory: M;
  readonly base: number;
  liveBlocks = 0;
  first!: PlannedBlock<M>;
}

/**
 * A block handed out by a {@linkcode StepPlannedPool}.
 *
 * @example
 * ```ts
 * import { PlannedBlock, StepPlannedPool } from "@allot/caching";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const pool = new StepPlannedPool(new MockSegmentSource({ capacityBytes: 1 << 20 }));
 * const block = pool.allocate(1000);
 * assert.ok(block instanceof PlannedBlock);
 * assert.equal(block.requestedByteLength, 1000);
 * assert.ok(block.byteLength >= 1000); // the request aligned up
 * pool.free(block);
 * ```
 */
export class PlannedBlock<M = unknown> {
  /** The segment's memory (a `GPUBuffer`, an `ArrayBuffer`, ...). */
  readonly memory: M;
  /** Offset of the block in `memory`. */
  readonly byteOffset: number;
  /** Bytes of the block (the request aligned up). */
  readonly byteLength: number;
  /** Bytes asked for (0 for a free range). */
  requestedByteLength = 0;
  /** @internal */
  _seg: _Seg<M>;
  /** @internal offset inside the segment */
  _offset: number;
  /** @internal */
  _free = true;
  /** @internal */
  _prev: PlannedBlock<M> | undefined;
  /** @internal */
  _next: PlannedBlock<M> | undefined;
  /** @internal step and index of the allocation in that step */
  _step: number = -1;
  /** @internal */
  _item: number = -1;
  /** @internal when the block entered the free index */
  _seq = 0;

  #brand = true;

  /** @internal Whether `value` is a block made by a pool (not a look-alike). */
  static _is(value: unknown): value is PlannedBlock {
    return typeof value === "object" && value !== null && #brand in value;
  }

  /** @internal */
  constructor(seg: _Seg<M>, offset: number, size: number) {
    this._seg = seg;
    this._offset = offset;
    this.memory = seg.memory;
    this.byteOffset = seg.base + offset;
    this.byteLength = size;
  }
}

/**
 * Plans kept, keyed by their requests (onnxruntime keeps a memory pattern
 * per input shape): steps that vary (sequence lengths, a growing KV cache)
 * and come back find their plan again.
 */
const _PLANS = 64;

/** Extra arena bytes (per byte) a plan may take to keep its pins. */
const _PIN_SLACK = 0.01;

/** A plan larger than the arena by at most this (per byte) stays inside it. */
const _ARENA_SLACK = 0.01;

/** Unfollowed plans counted at most: at most 2^5 steps between plans. */
const _MAX_BACKOFF = 6;

/**
 * Planned requests a request may skip to find its match (see `#place`),
 * and requests in a row the plan may lack before the step leaves it.
 */
const _RESYNC = 64;
/** See `_RESYNC`. */
const _LOST = 4;

/** Requests a step's records have room for at first (they double). */
const _REC0 = 64;

/** Steps whose peak live bytes bound the bytes kept. */
const _WINDOW = 64;

/**
 * At a step's end, held bytes above the ratio give back the free segments
 * no step of the window used; those used lately go back only while held
 * bytes are more than `_TRIM_BAND` above the ratio (hysteresis): work that
 * repeats in cycles finds its segments again in its next cycle (a segment
 * given back at a step's end just above the ratio was missed by the next
 * cycle and made again, once a pass). Where segments are made, `#grow`
 * keeps held bytes within the ratio (least recently used go first).
 */
const _IDLE_STEPS = _WINDOW;
/** See `_IDLE_STEPS`. */
const _TRIM_BAND = 0.05;

/**
 * Requests of at most this many bytes (a scalar, a shape, a uniform) that
 * the plan leaves out of the arena share segments of `_SMALL_SEGMENT`
 * bytes, apart from larger blocks: best fit would put them in the
 * remainders of large free segments, and one that outlives its step then
 * pins a segment a growing block needed (a KV cache grown each step).
 */
const _SMALL = 512;
/** Keys of steps left unplanned kept at most (it starts over past them). */
const _SKIPPED = 1024;
/** Sizes `#grew` keeps at most (it starts over past them). */
const _GREW = 1024;
/** See `_SMALL`. */
const _SMALL_SEGMENT = 2048;

/** Steps looked at to tell work that does not repeat (see `#heap`). */
const _HEAP_STEPS = 6;
/** See `_HEAP_STEPS`. */
const _HEAP_MASK = (1 << _HEAP_STEPS) - 1;

/**
 * Before the first plan, the free bytes (per byte asked) a best fit may
 * leave in the block it splits: more and the request gets its own segment.
 */
const _TIGHT_SLACK = 0.5;

/**
 * A pool for runtimes whose work comes in steps (an inference, a training
 * step, a decoded token): best fit inside exactly sized segments, a plan
 * that lays a repeating step out once, and segments given back when held
 * bytes run above live ones.
 *
 * @example A repeating step is served from one planned arena
 * ```ts
 * import { StepPlannedPool } from "@allot/caching";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const source = new MockSegmentSource({ capacityBytes: 1 << 24 });
 * const pool = new StepPlannedPool(source);
 * for (let step = 0; step < 3; step++) {
 *   const a = pool.allocate(4096);
 *   const b = pool.allocate(8192);
 *   pool.free(a);
 *   const c = pool.allocate(4096);
 *   pool.free(b);
 *   pool.free(c);
 *   pool.endStep();
 * }
 * assert.equal(pool.reservedBytes, 12288);
 * assert.equal(pool.requestedBytes, 0);
 * ```
 */
export class StepPlannedPool<M = unknown> {
  /** Where segments come from. */
  readonly source: SegmentSource<M>;
  /** Held bytes allowed per live byte before free segments are given back. */
  readonly maxHeldRatio: number;
  #align: number;
  /**
   * The plan the arena follows on the fast path, `undefined` off it. On it
   * the arena's block list and free index are not kept: the arena's live
   * blocks are exactly this step's planned items (in `#fastLive`), each at
   * its planned offset, and a request of the plan is one array read plus a
   * check that the items planned to be freed before it were freed.
   */
  #fast: _Plan | undefined;
  #fastLive: (PlannedBlock<M> | undefined)[] = [];
  /** how many of `#fast.freeOrder` are known freed, from the start */
  #freedPrefix = 0;
  #group: StepPoolGroup | undefined;
  #disposed = false;
  /** calls into the source under way (public calls are refused then) */
  #inSource = 0;
  #segs = new Set<_Seg<M>>();
  /** free blocks by size, ascending */
  #free: PlannedBlock<M>[] = [];
  /** free blocks of the segments for small requests, by size */
  #freeSmall: PlannedBlock<M>[] = [];
  #arena: _Seg<M> | undefined;
  /** free blocks of the arena by offset, ascending */
  #arenaFree: PlannedBlock<M>[] = [];
  /** the plan the current step follows, and the last plans made */
  #plan: _Plan | undefined;
  #plans: _Plan[] = [];
  /** layouts laid out lately, by their input (see `_PlanMemo`) */
  #memo = new _PlanMemo();
  /** the latest kept plan per key of its first requests (see `_key`) */
  #byKey = new Map<number, _Plan>();
  /**
   * The step's requests so far (`#recCount` of them): sizes, and the ops
   * that made and freed them (Infinity while live). Typed arrays reused
   * from step to step: a step's end resets a count, nothing is allocated
   * or trimmed.
   */
  #recCount = 0;
  #recSize: Float64Array<ArrayBuffer> = new Float64Array(_REC0);
  #recStart: Float64Array<ArrayBuffer> = new Float64Array(_REC0);
  #recEnd: Float64Array<ArrayBuffer> = new Float64Array(_REC0);
  /** the key of the step's first `#keyCount` requests (`#prefixKey`) */
  #keyCount = 0;
  #keyValue = _KEY0;
  /** where each request of the step went in the arena (-1: elsewhere) */
  #recAt: Float64Array<ArrayBuffer> = new Float64Array(_REC0);
  #atCount = 0;
  #op = 0;
  #misses = 0;
  /** whether this step's requests left every kept plan */
  #diverged = false;
  /**
   * The plan item of this step's next request less its index (requests
   * the step skipped, less those the plan lacks; see `#place`), and the
   * requests in a row the plan lacked.
   */
  #skew = 0;
  #lost = 0;
  /** fresh plans unfollowed in a row, steps since the last plan */
  #unfollowed = 0;
  #sincePlan = 0;
  #plannedLast = false;
  #step = 0;
  #live = 0;
  #held = 0;
  /**
   * Bytes of the live blocks (their sizes, aligned): what the pool's own
   * bound is taken from (a pool of 4-byte requests in 256-byte blocks
   * cannot hold within a ratio of the bytes asked for)
   */
  #blockBytes = 0;
  /** peak live bytes of the current step and of the last steps */
  #stepPeak = 0;
  /** peak block bytes of the current step and of the last steps */
  #stepPeakBlocks = 0;
  #fastSteps = 0;
  #followedBits = 0;
  /** Steps that made requests, counted to `_HEAP_STEPS`. */
  #counted = 0;
  /**
   * Whether one of the pool's last `_HEAP_STEPS` steps left its plan (work
   * that does not repeat step to step, or not yet): the arena then serves
   * as a heap. A small request the plan does not place takes the best
   * fitting free arena range before a small segment is made; where a new
   * segment would take held bytes past the bound, a small request too
   * takes a free arena range, else a range of a free large segment (a
   * segment trimmed to make room for another is made again later: on
   * TF.js conv+GRU training this made 1,639 segments over 7 warm passes);
   * and such spills are placed by best fit, off the fast path (counting
   * which of the plan's later requests a range overlaps costs a pass over
   * the plan per request, and the plan is no guide to a step that leaves
   * it).
   */
  #heap = false;
  /** the arena bytes the last step took (see `_giveBack`) */
  #lastNeed = 0;
  /** the bound (`#bound`) of each of the last steps' peaks */
  #window = new _PeakWindow(_WINDOW);
  #peakLive = 0;
  #peakHeld = 0;
  #created = 0;
  #replans = 0;
  #released = 0;
  /** blocks put in the free index so far (orders blocks of equal size) */
  #indexed = 0;
  /** requests of the fast plan that wait for live blocks it did not place */
  #waits = new Map<number, PlannedBlock<M>[]>();
  /** blocks earlier steps left in the arena when the fast path began */
  #fastOld: PlannedBlock<M>[] = [];
  /** the step the arena was made at */
  #arenaSince = 0;
  /** the largest outgrown segment `#dropOutgrown` gave back, and when */
  #outgrown = 0;
  #outgrownStep = -1;
  /** keys (`#prefixKey` of all their requests) of steps left unplanned */
  #skipped = new Set<number>();
  /** sizes asked for, and segments made, where a request crept up */
  #grew = new Set<number>();

  /**
   * Creates an empty pool.
   *
   * @param source Where segments come from.
   * @param options The held-bytes ratio.
   * @throws {InvalidArgumentError} For a ratio below 1 or not finite, a
   * `group` that is not a {@linkcode StepPoolGroup}, a `strict` that is not
   * a boolean (the pool then joins no group).
   */
  constructor(source: SegmentSource<M>, options: StepPlannedPoolOptions = {}) {
    _anchorShapes("planned");
    validateObject(source, "source");
    validateObject(options, "options");
    validateOptionKeys(
      options,
      ["maxHeldRatio", "group", "strict"],
      "StepPlannedPool",
    );
    const ratio = _heldRatio(options.maxHeldRatio);
    this.source = source;
    this.maxHeldRatio = ratio;
    this.#align = validateAlignment(
      source.alignment,
      2 ** 30,
      "source.alignment",
    );
    const strict = validateFlag(options.strict, "strict", false);
    const group = options.group;
    if (group !== undefined) {
      if (!StepPoolGroup._is(group)) {
        throw new InvalidArgumentError(
          `Invalid group: must be a StepPoolGroup, received ${
            describeValue(group)
          }`,
          { name: "group", value: group },
        );
      }
      this.#group = group;
      group._join(this);
    }
    if (strict === true) _makeStrictPlannedPool(this);
  }

  /** Bytes asked for by blocks live now. */
  get requestedBytes(): number {
    return this.#live;
  }

  /**
   * Same as `requestedBytes`.
   *
   * @deprecated Use `requestedBytes` (one name per figure across allot); removed in the next minor version.
   */
  get liveBytes(): number {
    return this.requestedBytes;
  }
  /** Bytes of the segments held now. */
  get reservedBytes(): number {
    return this.#held;
  }

  /**
   * Same as `reservedBytes`.
   *
   * @deprecated Use `reservedBytes` (one name per figure across allot); removed in the next minor version.
   */
  get heldBytes(): number {
    return this.reservedBytes;
  }
  /** Highest `requestedBytes` so far. */
  get peakRequestedBytes(): number {
    return this.#peakLive;
  }

  /**
   * Same as `peakRequestedBytes`.
   *
   * @deprecated Use `peakRequestedBytes` (one name per figure across allot); removed in the next minor version.
   */
  get peakLiveBytes(): number {
    return this.peakRequestedBytes;
  }
  /** Highest `reservedBytes` so far. */
  get peakReservedBytes(): number {
    return this.#peakHeld;
  }

  /**
   * Same as `peakReservedBytes`.
   *
   * @deprecated Use `peakReservedBytes` (one name per figure across allot); removed in the next minor version.
   */
  get peakHeldBytes(): number {
    return this.peakReservedBytes;
  }
  /** Segments made so far. */
  get segmentsCreated(): number {
    return this.#created;
  }
  /** Segments given back so far. */
  get segmentsReleased(): number {
    return this.#released;
  }
  /** Segments held now. */
  get segmentCount(): number {
    return this.#segs.size;
  }
  /** Steps laid out again because they did not follow the plan. */
  get replanCount(): number {
    return this.#replans;
  }
  /**
   * Steps whose requests all came from their plan on the fast path (one
   * array read per request, no search, no segment made).
   */
  get fastStepCount(): number {
    return this.#fastSteps;
  }
  /** Steps ended so far. */
  get stepCount(): number {
    return this.#step;
  }
  /** Bytes of the planned arena (0 when there is none). */
  get arenaByteLength(): number {
    return this.#arena?.size ?? 0;
  }

  /**
   * Allocates `byteLength` bytes.
   *
   * @param byteLength Bytes; 0 gives an ordinary block (of one alignment unit).
   * @returns The block.
   * @throws {InvalidArgumentError} For a size that is not an integer in
   * [0, `source.maxSegmentByteLength`].
   * @throws {SegmentSourceError} When the source throws, or hands out a
   * segment shorter than asked or misaligned (given back, the pool's blocks
   * unchanged), or throws while a free segment is given back (the segment
   * is counted as given back).
   * @throws {OutOfMemoryError} When the source refuses a segment even after
   * every free segment was given back.
   * @throws {ContractViolationError} When called by the pool's segment
   * source while the pool makes or gives back a segment (the pool
   * unchanged).
   * @throws {UseAfterFreeError} After {@linkcode StepPlannedPool.dispose}.
   */
  allocate(byteLength: number): PlannedBlock<M> {
    const block = this.tryAllocate(byteLength);
    if (block === undefined) {
      throw new OutOfMemoryError(
        `Cannot allocate ${byteLength} bytes: the segment source refused ${
          alignUp(byteLength, this.#align)
        } bytes with ${this.#held} bytes held and ${this.#live} live`,
        {
          requestedBytes: byteLength,
          capacityBytes: this.source.capacityBytes,
          allocatedBytes: this.#live,
          reservedBytes: this.#held,
        },
      );
    }
    return block;
  }

  /**
   * Allocates like {@linkcode StepPlannedPool.allocate} but returns
   * `undefined` when the source has no memory left.
   *
   * @param byteLength Bytes; 0 gives an ordinary block (of one alignment unit).
   * @returns The block, or `undefined`.
   * @throws {InvalidArgumentError} For a bad size.
   * @throws {SegmentSourceError} See {@linkcode StepPlannedPool.allocate}.
   * @throws {ContractViolationError} When called by the pool's segment
   * source while the pool makes or gives back a segment (the pool
   * unchanged).
   * @throws {UseAfterFreeError} After {@linkcode StepPlannedPool.dispose}.
   */
  tryAllocate(byteLength: number): PlannedBlock<M> | undefined {
    if (this.#disposed || this.#inSource !== 0) {
      this.#refuse(`allocate ${describeValue(byteLength)} bytes`);
    }
    const max = this.source.maxSegmentByteLength;
    if (
      // (the type first: a symbol or a bigint would throw a TypeError)
      !(Number.isSafeInteger(byteLength) && byteLength >= 0 &&
        byteLength <= max)
    ) {
      _badSize(byteLength, max);
    }
    // (a power of two: the division is exact, and no float remainder; a
    // 0-byte request gets an ordinary block of one alignment unit)
    const size = byteLength === 0
      ? this.#align
      : Math.ceil(byteLength / this.#align) * this.#align;
    const item = this.#recCount;
    if (item === 0 && this.#plans.length > 0) this.#startStep(size);
    // the fast path: the planned offset, once the items planned to leave
    // the range before this one have left; anything else (another plan, a
    // range still taken, no plan) goes to `#allocateSlow`, out of line
    const fast = this.#fast;
    let block: PlannedBlock<M> | undefined;
    if (
      fast !== undefined && item < fast.count && size === fast.sizes[item]
    ) {
      const at = fast.offsets[item];
      if (
        at >= 0 &&
        (fast.need[item] <= this.#freedPrefix ||
          this.#advanceFreed(fast, fast.need[item])) &&
        (fast.guard[item] === 0 || this.#waited(item))
      ) {
        block = new PlannedBlock(this.#arena!, at, size);
        fast.state[item] = 1;
        this.#fastLive[item] = block;
      }
    }
    if (block === undefined) {
      block = this.#allocateSlow(item, size);
      if (block === undefined) return undefined;
    }
    block._free = false;
    block.requestedByteLength = byteLength;
    block._step = this.#step;
    block._item = item;
    if (item === this.#recSize.length) this.#growRec();
    this.#recSize[item] = size;
    this.#recStart[item] = this.#op++;
    this.#recEnd[item] = Infinity;
    this.#recCount = item + 1;
    const seg = block._seg;
    seg.liveBlocks++;
    seg.lastUsed = this.#step;
    const live = this.#live += byteLength;
    const blocks = this.#blockBytes += size;
    if (this.#group !== undefined) this.#group._live(byteLength);
    if (live > this.#stepPeak) this.#stepPeak = live;
    // (apart: resetPeakStats() can take the peak below the step's)
    if (live > this.#peakLive) this.#peakLive = live;
    if (blocks > this.#stepPeakBlocks) this.#stepPeakBlocks = blocks;
    return block;
  }

  /** At a step's first request: the plan it picks, and the fast path. */
  #startStep(size: number): void {
    this.#pick(size);
    this.#enterFast();
  }

  /**
   * A request `tryAllocate`'s fast path did not place: on the fast path
   * still when a kept plan expected it (see `#switchFast`), else the
   * checked path (`#place`); `undefined` when the source has no memory.
   */
  #allocateSlow(item: number, size: number): PlannedBlock<M> | undefined {
    // a request the plan says outlives the step stays out of the arena
    let arenaOk = true;
    let fast = this.#fast;
    if (
      fast !== undefined && (item >= fast.count || size !== fast.sizes[item])
    ) fast = this.#switchFast(item, size);
    if (fast !== undefined) {
      // (else the arena's list is rebuilt and the request takes the
      // checked path below)
      const at = fast.offsets[item];
      if (at < 0) arenaOk = false;
      else if (
        (fast.need[item] <= this.#freedPrefix ||
          this.#advanceFreed(fast, fast.need[item])) &&
        (fast.guard[item] === 0 || this.#waited(item))
      ) {
        const block = new PlannedBlock(this.#arena!, at, size);
        fast.state[item] = 1;
        this.#fastLive[item] = block;
        return block;
      } else this.#settle();
    }
    const block = this.#place(item, size, arenaOk);
    if (block === undefined) return undefined;
    // (the fast path records no offset: its plan has it, see `#fillAt`)
    this.#fillAt(item);
    this.#pushAt(block._seg === this.#arena ? block._offset : -1);
    return block;
  }

  /**
   * A request off the fast path: its planned range when the step follows
   * the plan, else best fit (a small request in the small segments first),
   * else a new segment; `undefined` when the source has no memory left.
   */
  #place(
    item: number,
    size: number,
    arenaOk: boolean,
  ): PlannedBlock<M> | undefined {
    let block: PlannedBlock<M> | undefined;
    const plan = this.#plan;
    if (arenaOk && plan !== undefined) {
      if (!this.#diverged) {
        // the step follows the plan while each request is the planned one.
        // A request that is not the next planned one is matched with a
        // later planned request of its size (the step skipped some: a
        // training step after the first makes no optimizer state), else
        // taken as one the plan lacks; the step leaves the plan (best fit
        // for the rest) after `_LOST` of those in a row. A planned range
        // still taken (a block that outlived its step) is one miss: the
        // requests after it still go where the plan put them
        let p = plan;
        let j = item + this.#skew;
        if (this.#skew === 0 && j < p.count && size !== p.sizes[j]) {
          p = this.#switch(item, size) ?? p;
        }
        if (j >= p.count || size !== p.sizes[j]) {
          // (the planned request in this one's place outlived its step: a
          // request a little larger, a grown copy of a cache, likely
          // outlives its step too, and stays out of the arena)
          if (j < p.count && p.offsets[j] < 0 && size > _SMALL) {
            arenaOk = false;
          }
          j = this.#resync(p, j, size);
          this.#misses++;
        }
        if (j >= 0) {
          this.#skew = j - item;
          this.#lost = 0;
          const at = p.offsets[j];
          if (at >= 0) block = this.#carve(at, size);
          else arenaOk = false;
        } else {
          this.#skew--;
          if (++this.#lost >= _LOST) this.#diverged = true;
        }
        if (block === undefined && arenaOk) this.#misses++;
      } else this.#misses++;
    }
    // before the first plan, a request does not split a free block more
    // than twice its size: it may outlive the step (optimizer state made
    // mid-step) and would pin the rest of a freed activation segment once
    // the arena is made; it gets its own segment instead (a pool that never
    // marks a step never has an arena: it keeps this rule, with held bytes
    // still bounded by #grow's trim)
    const tight = this.#arena === undefined;
    if (block === undefined && size <= _SMALL) {
      // a small request the plan did not place: a free range of the small
      // segments, else a new small segment while one fits in the bounds
      // (a small block left in the arena past its step pins it: the arena
      // cannot grow or move while the block lives), else the arena
      block = this.#bestFit(size, false) ??
        (this.#heap ? this.#arenaFit(size) : undefined) ??
        this.#exactHole(size) ??
        (this.#roomForSmall() ? this.#grow(size) : undefined);
    }
    return block ?? this.#bestFit(size, arenaOk, tight) ?? this.#grow(size) ??
      this.#bestFit(size, true, false, true);
  }

  /**
   * Gives a block back; its range merges with free neighbours.
   *
   * @param block A live block of this pool.
   * @throws {DoubleFreeError} When the block is already free (also once
   * its segment was given back).
   * @throws {DoubleFreeError} When the block is another pool's.
   * @throws {InvalidArgumentError} When the value is no `PlannedBlock`.
   * @throws {ContractViolationError} When called by the pool's segment
   * source while the pool makes or gives back a segment (the pool
   * unchanged).
   * @throws {UseAfterFreeError} After {@linkcode StepPlannedPool.dispose}.
   */
  free(block: PlannedBlock<M>): void {
    if (this.#disposed || this.#inSource !== 0) this.#refuse("free a block");
    if (
      !PlannedBlock._is(block) || block._seg.pool !== this || block._free
    ) this.#refuseFree(block);
    if (block._step === this.#step) this.#recEnd[block._item] = this.#op++;
    this.#live -= block.requestedByteLength;
    this.#freedBytes += block.requestedByteLength;
    this.#blockBytes -= block.byteLength;
    if (this.#group !== undefined) {
      this.#group._live(-block.requestedByteLength);
    }
    block.requestedByteLength = 0;
    block._free = true;
    const seg = block._seg;
    seg.liveBlocks--;
    const fast = this.#fast;
    if (fast !== undefined && seg === this.#arena) {
      // on the fast path a live arena block is an item of this step or a
      // block an earlier step left there (in `#fastOld`, dropped when the
      // list is rebuilt)
      if (block._step === this.#step) {
        fast.state[block._item] = 2;
        this.#fastLive[block._item] = undefined;
      }
      return;
    }
    this.#coalesce(block, seg);
  }

  /**
   * Off the fast path: the freed block's range, as a free range of the
   * pool's own, merged with its free neighbours and indexed.
   */
  #coalesce(block: PlannedBlock<M>, seg: _Seg<M>): void {
    // the free range is the pool's own object, never the caller's handle:
    // ranges are moved and resized as they merge and split, and a freed
    // handle keeps saying what it was
    if (seg.arena) {
      this.#coalesceArena(block, seg);
      return;
    }
    let merged: PlannedBlock<M>;
    const prev = block._prev;
    if (prev !== undefined && prev._free) {
      this.#unindex(prev);
      merged = this.#join(prev, block);
    } else {
      merged = new PlannedBlock(seg, block._offset, block.byteLength);
      const after = block._next;
      merged._next = after;
      if (after !== undefined) after._prev = merged;
      this.#link(prev, merged);
    }
    block._prev = block._next = undefined;
    const next = merged._next;
    if (next !== undefined && next._free) {
      this.#unindex(next);
      merged = this.#join(merged, next);
    }
    this.#index(merged);
  }

  /**
   * `#coalesce` in the arena, whose free ranges are indexed by offset: a
   * free range merged into the one before it keeps that one's entry, and a
   * new range merged with the one after it takes that one's entry (no free
   * range starts between them), so a free is at most one removal.
   */
  #coalesceArena(block: PlannedBlock<M>, seg: _Seg<M>): void {
    const prev = block._prev, next = block._next;
    const after = next !== undefined && next._free;
    let merged: PlannedBlock<M>;
    if (prev !== undefined && prev._free) {
      merged = this.#join(prev, block);
      if (after) this.#unindex(next);
    } else {
      merged = new PlannedBlock(seg, block._offset, block.byteLength);
      merged._next = next;
      if (next !== undefined) next._prev = merged;
      this.#link(prev, merged);
      if (after) this.#arenaFree[this.#arenaSlot(next._offset)] = merged;
      else this.#index(merged);
    }
    block._prev = block._next = undefined;
    if (after) this.#join(merged, next);
  }

  /** The index in `#arenaFree` of the free range that starts at `at`. */
  #arenaSlot(at: number): number {
    const free = this.#arenaFree;
    let lo = 0, hi = free.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (free[mid]._offset < at) lo = mid + 1;
      else hi = mid;
    }
    if (free[lo]?._offset !== at) {
      throw _inconsistent(`the arena free index lost the block at ${at}`);
    }
    return lo;
  }

  /**
   * Marks a step boundary: plans the next step from the one just finished
   * when that step did not follow the current plan, and gives back free
   * segments the step did not use.
   *
   * @throws {SegmentSourceError} When the source throws or lies while the
   * new plan's arena is made or segments are given back: the step is ended
   * all the same, and the next one is served by best fit.
   * @throws {ContractViolationError} When called by the pool's segment
   * source while the pool makes or gives back a segment (the pool
   * unchanged).
   * @throws {UseAfterFreeError} After {@linkcode StepPlannedPool.dispose}.
   */
  endStep(): void {
    if (this.#disposed || this.#inSource !== 0) this.#refuse("end a step");
    try {
      this.#endStep();
    } finally {
      // a source that throws while the step is planned or trimmed (a
      // SegmentSourceError) still ends the step
      this.#step++;
      this.#recCount = 0;
      this.#atCount = 0;
      this.#keyCount = 0;
      this.#op = 0;
      this.#misses = 0;
      this.#diverged = false;
      this.#skew = 0;
      this.#lost = 0;
    }
  }

  #endStep(): void {
    const count = this.#recCount;
    const fast = this.#fast;
    if (fast !== undefined) {
      if (count === fast.count && this.#misses === 0) this.#fastSteps++;
      if (this.#arena!.liveBlocks > 0) this.#settle();
    }
    const followed = count > 0 && this.#misses === 0 &&
      count === this.#plan?.count;
    if (count > 0) {
      // which of the last 32 steps that made requests followed a plan
      this.#followedBits = (this.#followedBits << 1) | (followed ? 1 : 0);
      if (this.#counted < _HEAP_STEPS) this.#counted++;
      this.#heap = this.#counted >= _HEAP_STEPS &&
        _bits(this.#followedBits & _HEAP_MASK) < _HEAP_STEPS;
      if (followed) {
        this.#unfollowed = 0;
        this.#sincePlan = 0;
        this.#plannedLast = false;
      } else this.#leftPlan(count);
    }
    // what the next step takes of the arena if it repeats this one
    const plan = this.#plan;
    this.#lastNeed = plan !== undefined &&
        (followed || (this.#plannedLast && count > 0))
      ? plan.size
      : this.#stepPeakBlocks;
    const window = this.#window;
    window.push(this.#bound(this.#stepPeak, this.#stepPeakBlocks));
    this.#stepPeak = this.#live;
    this.#stepPeakBlocks = this.#blockBytes;
    // free segments are kept while held bytes stay within the ratio of the
    // recent steps' peak, so steps that vary reuse them instead of making
    // new ones; above it, those no step of the window used go, then (far
    // above it) the least recently used (see `_IDLE_STEPS`)
    const limit = window.max;
    if (this.#held > limit) {
      this.#trimFree(limit, _IDLE_STEPS);
      if (this.#held > limit * (1 + _TRIM_BAND)) this.#trimFree(limit);
    }
  }

  /**
   * At the end of a step that made requests and did not follow the plan
   * made for it: whether (and then) it is planned (out of `#endStep`, whose
   * steady state is a step that followed its plan).
   */
  #leftPlan(count: number): void {
    // a step that differs from the plan made for it: once two fresh
    // plans in a row went unfollowed, planning work backs off (steps that
    // never repeat, such as a growing KV cache, plan once every few
    // steps); a step that follows its plan resets it, and so does a
    // workload whose recent plans came back (the same varying steps run
    // again: each gets its plan)
    if (this.#plannedLast && this.#unfollowed < _MAX_BACKOFF) {
      this.#unfollowed++;
    }
    if (this.#unfollowed >= 2 && _bits(this.#followedBits) >= 2) {
      this.#unfollowed = 0;
    }
    const interval = this.#unfollowed < 2 ? 1 : 1 << (this.#unfollowed - 1);
    this.#plannedLast = ++this.#sincePlan >= interval;
    if (!this.#plannedLast && count > 1) {
      // a step whose requests were seen in a step that went unplanned
      // (backing off) repeats: it is planned now, whatever the back-off,
      // so its next run follows a plan (a pass over varying steps that
      // comes back settles in one pass, not a few)
      const key = this.#prefixKey(count) ^ count;
      const seen = this.#skipped;
      if (seen.has(key)) this.#plannedLast = true;
      else {
        if (seen.size >= _SKIPPED) seen.clear();
        seen.add(key);
      }
    }
    // a step a kept plan was made for left it for where blocks were, not
    // for what it asked: it is planned again (around the blocks left in
    // the arena) twice at most
    if (this.#plannedLast && this.#remadeTwice(count)) {
      this.#plannedLast = false;
    }
    if (this.#plannedLast) {
      this.#replan(count);
      this.#replans++;
      this.#sincePlan = 0;
    }
  }

  /**
   * Gives whole free segments back (free ones outside the arena first,
   * largest first, then the arena when it is free) until held bytes are at
   * most `targetByteLength`. For a runtime told by its host that memory is
   * short.
   *
   * @param targetByteLength Held bytes to get down to (0: everything free).
   * @returns The bytes held afterwards.
   * @throws {InvalidArgumentError} For a target that is not an integer in
   * [0, `Number.MAX_SAFE_INTEGER`] (the pool unchanged).
   * @throws {SegmentSourceError} When the source throws while a segment is
   * given back (that segment counted as given back, the rest kept).
   * @throws {ContractViolationError} When called by the pool's segment
   * source while the pool makes or gives back a segment (the pool
   * unchanged).
   * @throws {UseAfterFreeError} After {@linkcode StepPlannedPool.dispose}.
   */
  trim(targetByteLength = 0): number {
    if (this.#disposed || this.#inSource !== 0) this.#refuse("trim");
    validateByteLength(
      targetByteLength,
      Number.MAX_SAFE_INTEGER,
      "targetByteLength",
    );
    this.#settle();
    const free = [...this.#segs].filter((s) => s.liveBlocks === 0)
      .sort((a, b) => Number(a.arena) - Number(b.arena) || b.size - a.size);
    for (const seg of free) {
      if (this.#held <= targetByteLength) break;
      this.#release(seg);
    }
    return this.#held;
  }

  /**
   * @internal For a {@linkcode StepPoolGroup} over its bound: whole free
   * segments outside the arena back, largest first, down to
   * `targetByteLength`; then the arena when it is free and idle (more than
   * `maxHeldRatio` times the largest plan the last steps made or took up;
   * at a step's end, the plan the step followed or was planned into).
   *
   * @param targetByteLength Held bytes to get down to.
   * @param idleSteps Only segments unused for more than this many steps
   * (the group's step end: see `_IDLE_STEPS`); -1 for any.
   * @param stepEnd Whether every pool's step just ended.
   * @returns The bytes held afterwards.
   */
  _giveBack(
    targetByteLength: number,
    idleSteps: number = -1,
    stepEnd = false,
  ): number {
    // (not while this pool is inside its source: another pool its source
    // called grew, and this pool is half way through a request)
    if (this.#inSource !== 0) return this.#held;
    const before = this.#step - idleSteps;
    const free = [...this.#segs].filter((s) =>
      s.liveBlocks === 0 && !s.arena && s.lastUsed < before
    ).sort((a, b) => b.size - a.size);
    for (const seg of free) {
      if (this.#held <= targetByteLength) return this.#held;
      this.#release(seg);
    }
    const arena = this.#arena;
    if (
      this.#held > targetByteLength && arena !== undefined &&
      arena.liveBlocks === 0 && arena.lastUsed < before
    ) {
      // (at a step's end, what the next step takes if it repeats the last:
      // a plan only picked by the step's first request, then left, does
      // not keep a large arena that other pools' growth needs)
      let used = stepEnd ? this.#lastNeed : 0;
      if (!stepEnd) {
        for (const p of this.#plans) {
          if (p.used >= this.#step - 1 && p.size > used) used = p.size;
        }
      }
      if (arena.size > this.maxHeldRatio * used) {
        this.#settle();
        this.#release(arena);
      }
    }
    return this.#held;
  }

  /**
   * Gives every whole free segment back (`trim(0)`).
   *
   * @throws {ContractViolationError} When called by the pool's segment
   * source while the pool makes or gives back a segment (the pool
   * unchanged).
   * @throws {UseAfterFreeError} After {@linkcode StepPlannedPool.dispose}.
   */
  emptyCache(): void {
    this.trim(0);
  }

  /**
   * Resolves once every block freed so far is back in the pool: at once,
   * since the pool reuses a freed range at once (queue order: nothing
   * waits on a fence). The same verb as the caching allocator's, with the
   * same options.
   *
   * @param options A signal: an aborted one rejects with its reason, and
   * nothing changes.
   * @returns Resolves when the blocks freed so far are back in the pool.
   * @throws {InvalidArgumentError} (as a rejection) For options that are
   * not an object, or a `signal` that is not an `AbortSignal`.
   * @throws {ContractViolationError} (as a rejection) When called by the
   * pool's segment source while the pool makes or gives back a segment.
   * @throws {UseAfterFreeError} (as a rejection) After
   * {@linkcode StepPlannedPool.dispose}.
   */
  synchronize(options?: SynchronizeOptions): Promise<void> {
    try {
      if (this.#disposed || this.#inSource !== 0) this.#refuse("synchronize");
      validateSynchronizeOptions(options)?.throwIfAborted();
    } catch (error) {
      return Promise.reject(error);
    }
    return Promise.resolve();
  }

  /** Whether {@linkcode StepPlannedPool.dispose} ran. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Gives every segment back to the source and leaves the pool's group (a
   * runtime that makes pools per session drops them this way: the group no
   * longer holds the pool). Refused while blocks are live: free them first.
   * The group's `requestedBytes` and `reservedBytes` then count the pool no
   * more; its peaks are kept. Later calls but `dispose` throw
   * {@linkcode UseAfterFreeError}; a second `dispose` does nothing.
   *
   * @throws {UnsupportedOperationError} While blocks are live (the pool
   * unchanged).
   * @throws {ContractViolationError} When called by the pool's segment
   * source while the pool makes or gives back a segment (the pool
   * unchanged).
   * @throws {SegmentSourceError} The first error the source threw while a
   * segment was given back, once every segment was given back and the pool
   * disposed all the same.
   */
  dispose(): void {
    if (this.#disposed) return;
    if (this.#inSource !== 0) this.#refuse("dispose");
    if (this.#live > 0) {
      let blocks = 0;
      for (const seg of this.#segs) blocks += seg.liveBlocks;
      throw new UnsupportedOperationError(
        `Cannot dispose the pool: ${blocks} blocks (${this.#live} bytes) are still live; free them first`,
      );
    }
    this.#disposed = true;
    this.#group?._leave(this);
    this.#group = undefined;
    this.#settle();
    let error: unknown;
    let failed = false;
    for (const seg of [...this.#segs]) {
      try {
        this.#release(seg);
      } catch (e) {
        if (!failed) error = e;
        failed = true;
      }
    }
    this.#plan = undefined;
    this.#plans.length = 0;
    this.#byKey.clear();
    this.#free.length = 0;
    this.#freeSmall.length = 0;
    this.#arenaFree.length = 0;
    if (failed) throw error;
  }

  /** Same as {@linkcode StepPlannedPool.dispose}. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Throws the error of a `free` of anything but a live block of this pool. */
  #refuseFree(block: PlannedBlock<M>): never {
    if (!PlannedBlock._is(block) || block._seg.pool !== this) {
      if (
        PlannedBlock._is(block) && block._free && block._seg.pool === null
      ) {
        // (a segment is given back only when none of its blocks is live)
        throw new DoubleFreeError(
          `Block at offset ${block.byteOffset} (${block.byteLength} bytes) was already freed, and its segment given back`,
        );
      }
      if (PlannedBlock._is(block)) {
        throw new DoubleFreeError(
          `Block at offset ${block.byteOffset} (${block.byteLength} bytes) is not a block of this pool`,
        );
      }
      throw new InvalidArgumentError(
        `Invalid block ${describeValue(block)}: not a live block of this pool`,
        { name: "block", value: block, limit: "a live block of this pool" },
      );
    }
    throw new DoubleFreeError(
      `Block at offset ${block.byteOffset} (${block.byteLength} bytes) was already freed`,
    );
  }

  #refuse(what: string): never {
    if (this.#inSource !== 0) {
      // a source that calls back into the pool while it makes or gives
      // back a segment would find the pool half way through a request
      throw new ContractViolationError(
        `Cannot ${what}: a segment source called back into the pool while the pool (or another pool of its group, for it) made or gave back a segment`,
      );
    }
    throw new UseAfterFreeError(`Cannot ${what}: the pool was disposed`);
  }

  /**
   * Checks the pool's invariants: blocks tile each segment with no overlap
   * and no two free neighbours, the indexes hold exactly the free blocks,
   * and live and held bytes equal a recount.
   *
   * @throws {AllotError} Naming the first broken invariant.
   */
  validate(): void {
    let held = 0, live = 0, blocks = 0, freeCount = 0, arenaFree = 0;
    for (const seg of this.#segs) {
      held += seg.size;
      if (seg === this.#arena && this.#fast !== undefined) {
        const [l, b] = this.#validateFast(seg);
        live += l;
        blocks += b;
        continue;
      }
      let at = 0, liveBlocks = 0;
      for (let b: PlannedBlock<M> | undefined = seg.first; b; b = b._next) {
        if (b._seg !== seg || b._offset !== at) {
          throw _inconsistent(`block tiling broken at ${at}`);
        }
        if (b._free) {
          freeCount++;
          if (seg.arena) arenaFree++;
          if (b._next?._free) {
            throw _inconsistent("two free neighbours not merged");
          }
        } else {
          liveBlocks++;
          live += b.requestedByteLength;
          blocks += b.byteLength;
        }
        at += b.byteLength;
      }
      if (at !== seg.size) {
        throw _inconsistent(`segment covers ${at} of ${seg.size} bytes`);
      }
      if (liveBlocks !== seg.liveBlocks) {
        throw _inconsistent("live block count wrong");
      }
    }
    if (held !== this.#held) {
      throw _inconsistent(`held ${this.#held} != recount ${held}`);
    }
    if (live !== this.#live) {
      throw _inconsistent(`live ${this.#live} != recount ${live}`);
    }
    if (blocks !== this.#blockBytes) {
      throw _inconsistent(
        `block bytes ${this.#blockBytes} != recount ${blocks}`,
      );
    }
    if (freeCount - arenaFree !== this.#free.length + this.#freeSmall.length) {
      throw _inconsistent("free index wrong");
    }
    if (arenaFree !== this.#arenaFree.length) {
      throw _inconsistent("arena index wrong");
    }
    for (const list of [this.#free, this.#freeSmall]) {
      for (let i = 1; i < list.length; i++) {
        if (!_before(list[i - 1], list[i], true)) {
          throw _inconsistent("free index unsorted");
        }
      }
    }
    for (const b of this.#freeSmall) {
      if (!b._seg.small) throw _inconsistent("small index holds a large block");
    }
    for (const b of this.#free) {
      if (b._seg.small) throw _inconsistent("size index holds a small block");
    }
  }

  /** Checks the arena on the fast path; returns its live and block bytes. */
  #validateFast(seg: _Seg<M>): [number, number] {
    const fast = this.#fast!;
    const blocks = this.#fastLive.filter((b) => b !== undefined)
      .concat(this.#fastOld.filter((b) => !b._free))
      .sort((a, b) => a._offset - b._offset);
    let end = 0, live = 0, bytes = 0;
    for (const b of blocks) {
      if (b._seg !== seg || b._free || b._offset < end) {
        throw _inconsistent(
          `fast arena block at ${b._offset} overlaps or is free`,
        );
      }
      if (b._step === this.#step && fast.state[b._item] !== 1) {
        throw _inconsistent(`fast arena block at ${b._offset} is not live`);
      }
      end = b._offset + b.byteLength;
      live += b.requestedByteLength;
      bytes += b.byteLength;
    }
    if (end > seg.size) throw _inconsistent("fast arena block past the arena");
    if (blocks.length !== seg.liveBlocks) {
      throw _inconsistent("live block count wrong");
    }
    return [live, bytes];
  }

  #layOut(
    items: _PlanItem[],
    arena: _Seg<M> | undefined,
  ): { offsets: Float64Array; size: number } {
    const plan = this.#memo.plan(items, this.#align);
    if (
      arena === undefined || arena.liveBlocks === 0 || plan.size <= arena.size
    ) {
      return plan;
    }
    // blocks outlived the step inside the arena, and it cannot move: plan
    // around them inside it; what does not fit is left to best fit
    return this.#memo.plan(items, this.#align, arena.size);
  }

  #replan(count: number): void {
    this.#settle();
    const items: _PlanItem[] = [];
    const index: number[] = [];
    const arena = this.#arena;
    const pins = arena !== undefined ? this.#pins(count, arena) : undefined;
    for (let i = 0; i < count; i++) {
      if (this.#recEnd[i] === Infinity) continue;
      const pin = pins?.[i];
      items.push({
        size: this.#recSize[i],
        start: this.#recStart[i],
        end: this.#recEnd[i],
        fixed: pin !== undefined && pin >= 0 ? pin : undefined,
      });
      index.push(i);
    }
    const fixedFrom = items.length;
    if (arena !== undefined && arena.liveBlocks > 0) {
      for (let b: PlannedBlock<M> | undefined = arena.first; b; b = b._next) {
        if (!b._free) {
          items.push({
            size: b.byteLength,
            start: -1,
            end: Infinity,
            fixed: b._offset,
          });
        }
      }
    }
    let plan = this.#layOut(items, arena);
    if (
      pins !== undefined &&
      items.some((it, k) => k < fixedFrom && it.fixed !== undefined) &&
      // (no plan is smaller than the bytes live at once: a pinned plan
      // within the slack of that needs no free one to compare with)
      (arena!.liveBlocks > 0 ||
        plan.size > _peakBytes(items) * (1 + _PIN_SLACK))
    ) {
      // pins are worth a little room, not more: a plan laid out freely that
      // is smaller by more than _PIN_SLACK is taken instead
      const free = items.map((it, k) =>
        k < fixedFrom ? { size: it.size, start: it.start, end: it.end } : it
      );
      const loose = this.#layOut(free, arena);
      if (loose.size * (1 + _PIN_SLACK) < plan.size) plan = loose;
      if (
        arena!.liveBlocks > 0 && plan.size > arena!.size &&
        loose.size <= arena!.size
      ) {
        // pins from a plan made for a larger arena (one given back since)
        // reach past this one, which blocks that outlived their step keep:
        // it cannot be given back, so the plan is laid out inside it
        plan = loose;
      }
    }
    if (
      arena !== undefined && plan.size > arena.size &&
      plan.size <= arena.size * (1 + _ARENA_SLACK) &&
      this.#step - this.#arenaSince > _WINDOW
    ) {
      // once the arena served a window of steps, a plan a little larger is
      // laid out inside it (what does not fit is left to best fit): a
      // larger arena gives back every free segment, which the blocks that
      // outlive their steps then miss, a segment each
      plan = this.#memo.plan(items, this.#align, arena.size);
    }
    if (fixedFrom === items.length && fixedFrom > 0) {
      // the layout the step got in the arena (its blocks never overlapped)
      // when smaller: greedy-by-size is no lower bound, and a step that
      // skipped some of its plan's requests can come out larger
      const at = this.#recAt, atCount = this.#atCount;
      let top = 0;
      for (let k = 0; k < fixedFrom && top >= 0; k++) {
        const o = index[k] < atCount ? at[index[k]] : -1;
        top = o < 0 ? -1 : Math.max(top, o + items[k].size);
      }
      if (top >= 0 && alignUp(top, this.#align) < plan.size) {
        plan = {
          offsets: Float64Array.from(index, (i) => at[i]),
          size: alignUp(top, this.#align),
        };
      }
    }
    const offsets = new Float64Array(count).fill(-1);
    for (let k = 0; k < fixedFrom; k++) offsets[index[k]] = plan.offsets[k];
    const made = _fastPlan(
      offsets,
      this.#recSize.slice(0, count),
      this.#recStart,
      this.#recEnd,
      plan.size,
    );
    made.used = this.#step;
    const prior = count > 0 ? this.#byKey.get(made.keys[count - 1]) : undefined;
    if (prior !== undefined && prior.count === count) {
      made.remade = prior.remade;
    }
    this.#plan = made;
    this.#keep(made);
    if (plan.size === 0) return;
    const current = this.#arena;
    if (current !== undefined && plan.size <= current.size) return;
    // the plan is followed once its arena is made (a source that throws
    // or refuses leaves the step to best fit)
    this.#plan = undefined;
    if (current !== undefined) this.#release(current);
    for (const seg of [...this.#segs]) {
      if (seg.liveBlocks === 0) this.#release(seg);
    }
    if (this.#make(plan.size, true) !== undefined) this.#plan = made;
  }

  /**
   * Offsets for the first requests of a step about to be planned: those
   * the kept plans gave the same first requests (the plan kept under each
   * run of them has the say), as far as they do not collide under
   * this step's lifetimes (the check here is what keeps the plan sound,
   * wherever the offsets came from). Plans that start alike then put their
   * common first blocks in the same places, so a step that leaves one for
   * another midway stays on the fast path.
   */
  #pins(count: number, arena: _Seg<M>): Float64Array {
    const rec = this.#recSize, start = this.#recStart, end = this.#recEnd;
    const pins = new Float64Array(count).fill(-1);
    // blocks that outlived their step in the arena stay where they are
    const kept: PlannedBlock<M>[] = [];
    if (arena.liveBlocks > 0) {
      for (let b: PlannedBlock<M> | undefined = arena.first; b; b = b._next) {
        if (!b._free) kept.push(b);
      }
    }
    const taken: number[] = [];
    let key = _KEY0;
    for (let i = 0; i < count; i++) {
      key = _key(key, rec[i]);
      const plan = this.#byKey.get(key);
      if (plan === undefined || plan.count <= i || plan.sizes[i] !== rec[i]) {
        break;
      }
      const at = plan.offsets[i];
      if (at < 0 || end[i] === Infinity) continue;
      const top = at + rec[i];
      for (const b of kept) {
        if (b._offset < top && at < b._offset + b.byteLength) return pins;
      }
      // j started before i: they collide when j is live at i's start (one
      // freed by then never collides with a later request: it goes)
      let live = 0;
      for (let r = 0; r < taken.length; r++) {
        const j = taken[r];
        if (end[j] <= start[i]) continue;
        taken[live++] = j;
        if (pins[j] < top && at < pins[j] + rec[j]) return pins;
      }
      taken.length = live;
      pins[i] = at;
      taken.push(i);
    }
    return pins;
  }

  /**
   * At a request the current plan did not expect: the latest kept plan
   * whose requests so far were this step's (carving checks every range, so
   * a switch can never overlap blocks; it only decides where they go).
   */
  #switch(item: number, size: number): _Plan | undefined {
    const rec = this.#recSize;
    const plan = this.#byKey.get(_key(this.#prefixKey(item), size));
    if (
      plan === undefined || plan === this.#plan || plan.count <= item ||
      plan.size > (this.#arena?.size ?? 0) || plan.sizes[item] !== size
    ) return undefined;
    for (let k = 0; k < item; k++) {
      if (plan.sizes[k] !== rec[k]) return undefined;
    }
    plan.used = this.#step;
    this.#plan = plan;
    return plan;
  }

  /**
   * Keeps a new plan under the keys of its first requests; past `_PLANS`,
   * the least recently used plan goes.
   */
  #keep(plan: _Plan): void {
    const plans = this.#plans;
    plans.push(plan);
    const keys = plan.keys;
    // a key stays with its plan while that plan put the first requests
    // where this one does; else this one takes it over
    let other: _Plan | undefined;
    let agree = 0;
    for (let i = 0; i < plan.count; i++) {
      const had = this.#byKey.get(keys[i]);
      if (had === plan) continue;
      if (had !== undefined) {
        if (had !== other) {
          other = had;
          agree = 0;
        }
        while (
          agree <= i && agree < had.count &&
          had.offsets[agree] === plan.offsets[agree]
        ) agree++;
        if (agree > i) continue;
      }
      this.#byKey.set(keys[i], plan);
    }
    if (plans.length <= _PLANS) return;
    let old = 0;
    for (let i = 1; i < plans.length; i++) {
      if (plans[i].used < plans[old].used) old = i;
    }
    const gone = plans[old];
    plans.splice(old, 1);
    for (let i = 0; i < gone.count; i++) {
      if (this.#byKey.get(gone.keys[i]) === gone) {
        this.#byKey.delete(gone.keys[i]);
      }
    }
  }

  /**
   * At a step's first request: the arena takes the fast path for the plan
   * picked when it has no live block (it is then one free range); else it
   * leaves it.
   */
  #enterFast(): void {
    const plan = this.#plan, arena = this.#arena;
    if (plan === undefined || arena === undefined || plan.size > arena.size) {
      this.#settle();
      return;
    }
    plan.state.fill(0);
    if (plan.guarded) {
      plan.guard.fill(0);
      plan.guarded = false;
    }
    if (this.#waits.size !== 0) this.#waits.clear();
    this.#freedPrefix = 0;
    if (this.#fast === undefined) {
      // blocks earlier steps left in the arena stay; the plan's requests
      // over their ranges wait for their free
      const old = this.#fastOld;
      old.length = 0;
      for (let b: PlannedBlock<M> | undefined = arena.first; b; b = b._next) {
        if (b._free) this.#unindex(b);
        else {
          old.push(b);
          this.#guard(plan, 0, b);
        }
      }
    } else {
      // still on the fast path at a step's first request (the previous
      // first request of this step failed: out of memory, or the source
      // threw): the guards were just cleared, the blocks left are guarded
      // again
      for (const b of this.#fastOld) if (!b._free) this.#guard(plan, 0, b);
    }
    this.#fast = plan;
  }

  /** Makes the plan's requests from `from` on over `block`'s range wait for its free. */
  #guard(plan: _Plan, from: number, block: PlannedBlock<M>): void {
    const lo = block._offset, hi = lo + block.byteLength;
    for (let j = from; j < plan.count; j++) {
      const at = plan.offsets[j];
      if (at < 0 || at >= hi || at + plan.sizes[j] <= lo) continue;
      plan.guard[j] = 1;
      plan.guarded = true;
      const list = this.#waits.get(j);
      if (list === undefined) this.#waits.set(j, [block]);
      else list.push(block);
    }
  }

  /**
   * A request the fast plan did not expect: the fast path goes on with a
   * kept plan that expected the step's requests so far (see `#switch`) and
   * put every live arena block where it is; else it is left.
   */
  #switchFast(item: number, size: number): _Plan | undefined {
    const old = this.#fast!;
    this.#fillAt(item);
    const next = this.#switch(item, size);
    if (next === undefined) {
      this.#settle();
      return undefined;
    }
    // what is not live in the arena does not hold its planned range
    const state = next.state;
    for (let i = 0; i < item; i++) state[i] = old.state[i] === 1 ? 1 : 2;
    state.fill(0, item);
    if (next.guarded) {
      next.guard.fill(0);
      next.guarded = false;
    }
    if (this.#waits.size !== 0) this.#waits.clear();
    // a live block where the new plan does not put it: the new plan's
    // requests over its range wait for its free
    const live = this.#fastLive;
    for (let l = 0; l < item; l++) {
      const b = live[l];
      if (
        b !== undefined &&
        (b._offset !== next.offsets[l] || b.byteLength !== next.sizes[l])
      ) {
        this.#guard(next, item, b);
      }
    }
    for (const b of this.#fastOld) if (!b._free) this.#guard(next, item, b);
    this.#fast = next;
    this.#freedPrefix = 0;
    return next;
  }

  /** Whether the live blocks a request waits for (see `#switchFast`) were freed. */
  #waited(item: number): boolean {
    for (const b of this.#waits.get(item)!) if (!b._free) return false;
    return true;
  }

  /**
   * Whether kept plans for exactly the requests of this step were made
   * twice already (counted on the plan kept under its key).
   */
  #remadeTwice(count: number): boolean {
    const rec = this.#recSize;
    const plan = this.#byKey.get(this.#prefixKey(count));
    if (plan === undefined || plan.count !== count) return false;
    for (let i = 0; i < count; i++) if (plan.sizes[i] !== rec[i]) return false;
    return ++plan.remade > 2;
  }

  /**
   * The first item of `plan` from `from` on (within `_RESYNC` items) that
   * asks for `size` bytes and whose planned range is free now, or -1 (a
   * block the plan kept out of the arena, one that outlived its step, is
   * what a later step skips: optimizer state or weights made once).
   */
  #resync(plan: _Plan, from: number, size: number): number {
    const end = Math.min(plan.count, from + _RESYNC);
    for (let k = from; k < end; k++) {
      if (plan.sizes[k] !== size) continue;
      const at = plan.offsets[k];
      if (at >= 0 && this.#isFree(at, size)) return k;
    }
    return -1;
  }

  /** Whether `[at, at + size)` of the arena is free (off the fast path). */
  #isFree(at: number, size: number): boolean {
    const block = this.#freeFrom(at);
    return block !== undefined && block._offset + block.byteLength >= at + size;
  }

  /** The free arena block that starts last at or before `at`, if any. */
  #freeFrom(at: number): PlannedBlock<M> | undefined {
    const free = this.#arenaFree;
    let lo = 0, hi = free.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (free[mid]._offset <= at) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? undefined : free[lo - 1];
  }

  /**
   * The key (`_key`) of the step's first `count` requests, extended from
   * the last one asked for (a step's switches ask in order: one pass over
   * its requests in all).
   */
  #prefixKey(count: number): number {
    if (count < this.#keyCount) this.#keyCount = 0;
    const rec = this.#recSize;
    let k = this.#keyCount, key = k === 0 ? _KEY0 : this.#keyValue;
    for (; k < count; k++) key = _key(key, rec[k]);
    this.#keyCount = k;
    return this.#keyValue = key;
  }

  /**
   * Records where the step's requests before `item` went in the arena (see
   * `#recAt`) for those served on the fast path: its plan's offsets (the
   * fast path records none itself, and leaves its plan only through
   * `#switchFast` and `#settle`, which call this first).
   */
  #fillAt(item: number): void {
    const fast = this.#fast;
    for (let k = this.#atCount; k < item; k++) {
      this.#pushAt(fast?.offsets[k] ?? -1);
    }
  }

  /** Records where the step's next request went (see `#recAt`). */
  #pushAt(offset: number): void {
    const k = this.#atCount;
    if (k === this.#recAt.length) this.#recAt = _grown(this.#recAt);
    this.#recAt[k] = offset;
    this.#atCount = k + 1;
  }

  /** Doubles the room of the step's records (see `#recCount`). */
  #growRec(): void {
    this.#recSize = _grown(this.#recSize);
    this.#recStart = _grown(this.#recStart);
    this.#recEnd = _grown(this.#recEnd);
  }

  /** Whether the first `need` items of the plan's free order were freed. */
  #advanceFreed(fast: _Plan, need: number): boolean {
    const order = fast.freeOrder, state = fast.state;
    let k = this.#freedPrefix;
    while (k < need && state[order[k]] === 2) k++;
    this.#freedPrefix = k;
    return k >= need;
  }

  /**
   * Leaves the fast path: rebuilds the arena's block list (its live blocks
   * and the free ranges between them, indexed) for the checked path.
   */
  #settle(): void {
    if (this.#fast === undefined) return;
    this.#fillAt(this.#recCount);
    this.#fast = undefined;
    const arena = this.#arena!;
    const live: PlannedBlock<M>[] = [];
    const list = this.#fastLive;
    for (let i = 0; i < list.length; i++) {
      const b = list[i];
      if (b !== undefined) live.push(b);
    }
    list.length = 0;
    for (const b of this.#fastOld) if (!b._free) live.push(b);
    this.#fastOld.length = 0;
    this.#waits.clear();
    live.sort((a, b) => a._offset - b._offset);
    let prev: PlannedBlock<M> | undefined;
    let at = 0;
    const append = (b: PlannedBlock<M>) => {
      this.#link(prev, b);
      b._next = undefined;
      prev = b;
    };
    for (const b of live) {
      if (b._offset > at) {
        const gap = new PlannedBlock(arena, at, b._offset - at);
        append(gap);
        this.#index(gap);
      }
      append(b);
      at = b._offset + b.byteLength;
    }
    if (at < arena.size) {
      const gap = new PlannedBlock(arena, at, arena.size - at);
      append(gap);
      this.#index(gap);
    }
  }

  /** At a step's first request: the latest plan that starts with it. */
  #pick(size: number): void {
    let plan = this.#plan;
    if (plan === undefined || plan.sizes[0] !== size) {
      plan = this.#byKey.get(_key(_KEY0, size));
      if (
        plan === undefined || plan.sizes[0] !== size ||
        plan.size > (this.#arena?.size ?? 0)
      ) return;
      this.#plan = plan;
    }
    plan.used = this.#step;
  }

  #make(size: number, arena: boolean, small = false): _Seg<M> | undefined {
    // a source that throws, or hands out less than asked or a misaligned
    // segment, is refused with a SegmentSourceError (the pool unchanged)
    let segment: Segment<M> | undefined;
    this.#inSource++;
    try {
      segment = acquireSegment(this.source, size, size);
    } finally {
      this.#inSource--;
    }
    if (segment === undefined) return undefined;
    this.#checkNew(segment, size);
    const seg = new _Seg(this, segment, size, arena, this.#step, small);
    const block = new PlannedBlock(seg, 0, size);
    seg.first = block;
    this.#segs.add(seg);
    this.#created++;
    this.#held += size;
    if (this.#held > this.#peakHeld) this.#peakHeld = this.#held;
    if (arena) {
      this.#arena = seg;
      this.#arenaSince = this.#step;
    }
    this.#index(block);
    return seg;
  }

  /**
   * Refuses a segment that overlaps one the pool holds (a source that
   * handed the same memory out twice: blocks of both would overlap). It is
   * not given back: that would give back the memory of the one held.
   */
  #checkNew(segment: Segment<M>, size: number): void {
    const { memory, byteOffset } = segment;
    const end = byteOffset + segment.byteLength;
    for (const seg of this.#segs) {
      const held = seg.segment;
      if (
        held.memory === memory &&
        byteOffset < held.byteOffset + held.byteLength &&
        held.byteOffset < end
      ) {
        throw new SegmentSourceError(
          `Cannot allocate ${size} bytes: the segment source of ${this.source.device} returned a segment (bytes ${byteOffset} to ${end}) that overlaps one the pool holds (bytes ${held.byteOffset} to ${
            held.byteOffset + held.byteLength
          } of the same memory)`,
        );
      }
    }
  }

  /**
   * Gives free segments outside the arena back until held <= limit: those
   * unused for more than `idleSteps` steps (-1: any); those smaller than
   * `below` first, then the least recently used.
   */
  #trimFree(limit: number, idleSteps = -1, below = 0): void {
    if (this.#held <= limit) return;
    const before = this.#step - idleSteps;
    const free = [...this.#segs].filter((s) =>
      s.liveBlocks === 0 && !s.arena && s.lastUsed < before
    ).sort((a, b) =>
      Number(b.size < below) - Number(a.size < below) ||
      a.lastUsed - b.lastUsed || b.size - a.size
    );
    for (const seg of free) {
      if (this.#held <= limit) break;
      this.#release(seg);
    }
  }

  #release(seg: _Seg<M>): void {
    this.#unindex(seg.first);
    this.#segs.delete(seg);
    seg.pool = null;
    if (seg === this.#arena) this.#arena = undefined;
    this.#held -= seg.size;
    this.#heldFreed += seg.size;
    this.#released++;
    // the pool lets the segment go even when the source throws (typed)
    this.#inSource++;
    try {
      releaseSegment(
        this.source,
        seg.segment,
        `a ${seg.size}-byte ${seg.arena ? "arena " : ""}segment`,
      );
    } finally {
      this.#inSource--;
    }
  }

  /**
   * The held bytes the pool keeps itself within, for a peak of `live`
   * bytes asked for in blocks of `blocks` bytes: `maxHeldRatio` times the
   * bytes asked for, at least the blocks' bytes, plus one segment for
   * small requests (a pool of a few 4-byte uploads in 256-byte blocks
   * cannot keep within a ratio of the bytes asked for: trimmed to it, it
   * gave back and made a segment each step).
   */
  #bound(live: number, blocks: number): number {
    const ratio = this.maxHeldRatio * live;
    const least = blocks + _SMALL_SEGMENT;
    return ratio > least ? ratio : least;
  }

  /**
   * Whether a segment for small requests fits within the pool's bound and
   * its group's with nothing given back.
   */
  #roomForSmall(): boolean {
    const room = alignUp(_SMALL_SEGMENT, this.#align);
    return this.#held + room <= this.#limit(room) + room &&
      (this.#group?._fits(room) ?? true);
  }

  /** Held bytes allowed before a segment of `size` bytes is made. */
  #limit(size: number): number {
    // the peak of this step and of the last ones (all time when no step
    // was ever marked), so a pool without marks does not churn segments
    // (the bound of a maximum is the maximum of the bounds)
    const now = this.#bound(
      Math.max(this.#live + size, this.#stepPeak),
      Math.max(this.#blockBytes + size, this.#stepPeakBlocks),
    );
    const window = this.#window.max;
    return (now > window ? now : window) - size;
  }

  #grow(size: number): PlannedBlock<M> | undefined {
    const limit = this.#limit(size);
    // a request a little larger than a free segment that cannot hold it (a
    // block that grows each step, such as a KV cache made by
    // concatenation): such segments held its earlier, smaller generations,
    // which will not come back in this run of growth
    const below = size > _SMALL ? this.#creeping(size) : 0;
    // free segments too small for the request go first (they could not
    // serve it), then the least recently used
    if (this.#held > limit) this.#trimFree(limit, -1, size);
    // the outgrown ones go back before the new segment is made, even
    // within the bound; growth is taken as confirmed, and a segment with
    // room made for it, once the smaller block was itself a request that
    // crept up (a new shape a little larger than a free block gets an
    // exact segment)
    let creeping = false;
    if (below > 0) {
      this.#dropOutgrown(size);
      const grew = this.#grew;
      creeping = grew.has(below);
      if (grew.size >= _GREW) grew.clear();
      grew.add(size);
    }
    const group = this.#group;
    if (group !== undefined) {
      // other pools give segments back now: their sources must not call
      // back into this pool, half way through a request (the request's
      // index in the step is taken: a nested one would share it, and the
      // step's plan would be made from wrong lifetimes)
      this.#inSource++;
      try {
        group._makeRoom(this, size);
      } finally {
        this.#inSource--;
      }
    }
    const small = size <= _SMALL;
    // (a small request would make a shared segment of `_SMALL_SEGMENT`
    // bytes: over the bound when that one is; see `#heap` for the small
    // ones)
    const room = small
      ? Math.max(size, alignUp(_SMALL_SEGMENT, this.#align))
      : size;
    const over = this.#held + room > limit + size ||
      !(group?._fits(room) ?? true);
    if (over && this.#arena !== undefined && (!small || this.#heap)) {
      // a segment now would take held bytes past the bound: a block the
      // plan left out of the arena (one that outlives its step: state an
      // optimizer or a model carries to the next step, made while the
      // previous generation still lives) takes a free range of the arena
      // instead, where the rest of the step's plan needs it least. Kept
      // apart, the arena's peak and the carried blocks' peak add up,
      // though they come at different times of the step
      const spill = this.#spill(size);
      if (spill !== undefined) return spill;
    }
    if (over && small && this.#heap) {
      // a small request over the bound: a range of a free large segment
      // (trimmed to make room, it would be made again; see `#heap`)
      const block = this.#bestFit(size, false, false, true);
      if (block !== undefined) return block;
    }
    // requests that creep up (a cache grown by concatenation: each step a
    // little larger than a block just freed) get a segment with room for the
    // next few, while held bytes stay in bounds; others an exact one
    let want = size;
    if (small) {
      // small requests share segments of their own: a small block that
      // outlives its step never pins a large free range (within the
      // group's bound too: else an exact segment)
      const room = Math.max(size, alignUp(_SMALL_SEGMENT, this.#align));
      if (
        this.#held + room <= limit + size &&
        (this.#group?._fits(room) ?? true)
      ) want = room;
    } else {
      const roomy = _roomy(size, this.#align);
      if (roomy > size && this.#held + roomy <= limit + size && creeping) {
        want = roomy;
      }
    }
    let seg = this.#make(want, false, small);
    if (seg === undefined && want > size) seg = this.#make(size, false, small);
    if (below > 0 && seg !== undefined) this.#grew.add(seg.size);
    if (seg === undefined) {
      this.trim(0);
      seg = this.#make(size, false, small);
      if (seg === undefined) return undefined;
    }
    this.#unindex(seg.first);
    return seg.size > size ? this.#split(seg.first, 0, size) : seg.first;
  }

  /**
   * A block of `size` bytes in a free range of the arena for a request the
   * plan did not place there (see `#grow`), or `undefined` when no free
   * range holds it. Of the free ranges (each at its low or high end) the
   * one the rest of the step's plan overlaps with the fewest requests
   * wins, then the smallest range. On the fast path the block joins the
   * blocks the plan did not place (`#fastOld`), and the plan's later
   * requests over it wait for its free (see `#guard`): the step stays on
   * the fast path where they do not meet.
   */
  #spill(size: number): PlannedBlock<M> | undefined {
    const arena = this.#arena!;
    const fast = this.#fast;
    // (work that does not repeat takes the best fit off the fast path, and
    // a small block on it: the plan is no guide to a step that leaves it,
    // and counting the plan's later requests a range meets costs a sort of
    // the rest of the plan per request)
    const plan = this.#heap && size <= _SMALL
      ? undefined
      : fast ?? (this.#diverged || this.#heap ? undefined : this.#plan);
    const from = this.#recCount + (fast !== undefined ? 1 : this.#skew + 1);
    // the free ranges: indexed off the fast path; on it, the gaps between
    // the arena's live blocks
    const gaps: number[] = [];
    if (fast === undefined) {
      for (const b of this.#arenaFree) {
        if (b.byteLength >= size) gaps.push(b._offset, b.byteLength);
      }
    } else {
      // (live arena blocks never overlap: their starts and their ends,
      // each sorted on its own, pair up)
      const fastLive = this.#fastLive, old = this.#fastOld;
      let n = 0;
      const starts = new Float64Array(fastLive.length + old.length);
      const ends = new Float64Array(starts.length);
      for (const b of fastLive) {
        if (b !== undefined) {
          starts[n] = b._offset, ends[n++] = b._offset + b.byteLength;
        }
      }
      for (const b of old) {
        if (!b._free) {
          starts[n] = b._offset, ends[n++] = b._offset + b.byteLength;
        }
      }
      const lo = starts.subarray(0, n).sort(), hi = ends.subarray(0, n).sort();
      let at = 0;
      for (let k = 0; k < n; k++) {
        if (lo[k] - at >= size) gaps.push(at, lo[k] - at);
        if (hi[k] > at) at = hi[k];
      }
      if (arena.size - at >= size) gaps.push(at, arena.size - at);
    }
    // the ranges the rest of the plan takes in the arena: their starts and
    // ends, each sorted (a range meets [at, top) when it starts below top
    // and does not end by at)
    let los = _NONE, his = _NONE;
    if (plan !== undefined) {
      const offsets = plan.offsets, sizes = plan.sizes;
      const first = from < 0 ? 0 : from;
      los = new Float64Array(plan.count - first);
      his = new Float64Array(plan.count - first);
      let n = 0;
      for (let j = first; j < plan.count; j++) {
        const o = offsets[j];
        if (o >= 0) los[n] = o, his[n++] = o + sizes[j];
      }
      los = los.subarray(0, n).sort();
      his = his.subarray(0, n).sort();
    }
    // the fewest overlaps, then the smallest range, then the lowest; in a
    // range its high end, then its low end
    let best = -1, bestHits = Infinity, bestGap = Infinity;
    for (let g = 0; g < gaps.length; g += 2) {
      const lo = gaps[g], gap = gaps[g + 1];
      if (bestHits === 0 && gap >= bestGap) continue;
      const high = lo + gap - size;
      let hits = _overlaps(los, his, high, high + size), at = high;
      if (hits !== 0) {
        const low = _overlaps(los, his, lo, lo + size);
        if (low < hits) hits = low, at = lo;
      }
      if (hits < bestHits || (hits === bestHits && gap < bestGap)) {
        best = at;
        bestHits = hits;
        bestGap = gap;
      }
    }
    if (best < 0) return undefined;
    if (fast === undefined) {
      return this.#split(this.#freeFrom(best)!, best, size, true);
    }
    const block = new PlannedBlock(arena, best, size);
    // (live: its planned range, if any, is not counted free until it is)
    fast.state[from - 1] = 1;
    this.#fastOld.push(block);
    this.#guard(fast, from, block);
    return block;
  }

  /**
   * Gives back the whole free segments outside the arena that are a little
   * smaller than `size` (within a quarter: see `#creeping`).
   */
  #dropOutgrown(size: number): void {
    const from = size - (size >> 2);
    for (const seg of [...this.#segs]) {
      if (
        seg.liveBlocks === 0 && !seg.arena && !seg.small && seg.size >= from &&
        seg.size < size
      ) {
        if (this.#outgrownStep !== this.#step || seg.size > this.#outgrown) {
          this.#outgrown = seg.size;
          this.#outgrownStep = this.#step;
        }
        this.#release(seg);
      }
    }
  }

  /**
   * The size of a free block outside the arena a little smaller than
   * `size` (within a quarter; the largest), or 0.
   */
  #creeping(size: number): number {
    const from = size - (size >> 2);
    // the largest free block below `size` (the generation just outgrown)
    const free = this.#free;
    let lo = 0, hi = free.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (free[mid].byteLength < size) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0 && free[lo - 1].byteLength >= from) {
      return free[lo - 1].byteLength;
    }
    // (the other blocks of a generation that grew find theirs gone)
    return this.#outgrownStep === this.#step && this.#outgrown >= from &&
        this.#outgrown < size
      ? this.#outgrown
      : 0;
  }

  /** Takes the best fitting free block, outside the arena when one fits. */
  #bestFit(
    size: number,
    arenaOk: boolean,
    tight = false,
    anywhere = false,
  ): PlannedBlock<M> | undefined {
    // a small request looks in the small segments only, but where the
    // source refused a segment (`anywhere`) it takes any free range
    const small = size <= _SMALL;
    let block = _fit(small ? this.#freeSmall : this.#free, size);
    if (block === undefined && small && anywhere) {
      block = _fit(this.#free, size);
    }
    if (
      tight && !small && block !== undefined &&
      block.byteLength - size > size * _TIGHT_SLACK
    ) return undefined;
    if (block === undefined) return arenaOk ? this.#arenaFit(size) : undefined;
    this.#unindex(block);
    return this.#split(block, block._offset, size);
  }

  /** The best fitting free range of the arena (off the fast path). */
  #arenaFit(size: number): PlannedBlock<M> | undefined {
    let block: PlannedBlock<M> | undefined;
    for (const b of this.#arenaFree) {
      if (b.byteLength >= size && (!block || b.byteLength < block.byteLength)) {
        block = b;
      }
    }
    if (block === undefined) return undefined;
    return this.#split(block, block._offset, size, true);
  }

  /**
   * A free range of a large segment of exactly `size` bytes, taken whole
   * (a hole already there: taking it splits nothing), or `undefined`.
   */
  #exactHole(size: number): PlannedBlock<M> | undefined {
    const block = _fit(this.#free, size);
    if (block === undefined || block.byteLength !== size) return undefined;
    this.#unindex(block);
    return this.#split(block, block._offset, size);
  }

  /** Takes `[at, at + size)` of the arena when that range is free. */
  #carve(at: number, size: number): PlannedBlock<M> | undefined {
    const block = this.#freeFrom(at);
    if (block === undefined || block._offset + block.byteLength < at + size) {
      return undefined;
    }
    return this.#split(block, at, size, true);
  }

  /**
   * Cuts `[at, at + size)` out of the free `block`, unindexed (or, for an
   * arena block, `indexed`: its entry, sorted by offset, stays where it is
   * for the rest it becomes); indexes the rest.
   */
  #split(
    block: PlannedBlock<M>,
    at: number,
    size: number,
    indexed = false,
  ): PlannedBlock<M> {
    const seg = block._seg;
    const start = block._offset;
    const end = start + block.byteLength;
    // always a new object: a stale handle of a freed block stays free
    const used = new PlannedBlock(seg, at, size);
    const prev = block._prev, next = block._next;
    let left = prev, right = next;
    let spare: PlannedBlock<M> | undefined = block;
    if (at > start) {
      _place(spare, start, at - start);
      left = spare;
      spare = undefined;
      if (!indexed) this.#index(left);
    }
    if (at + size < end) {
      right = spare ?? new PlannedBlock(seg, at + size, end - at - size);
      // (the arena's entry moves up within the range it had: no other free
      // range starts there, so the offset order holds)
      if (spare !== undefined) _place(spare, at + size, end - at - size);
      if (!indexed || spare === undefined) this.#index(right);
      if (right !== next) {
        right._next = next;
        if (next) next._prev = right;
      }
    } else if (indexed && spare !== undefined) this.#unindex(spare);
    if (left !== prev) {
      left!._prev = prev;
      if (prev) prev._next = left;
      else seg.first = left!;
    }
    used._prev = left;
    if (left) left._next = used;
    else seg.first = used;
    used._next = right;
    if (right) right._prev = used;
    return used;
  }

  #link(prev: PlannedBlock<M> | undefined, block: PlannedBlock<M>): void {
    block._prev = prev;
    if (prev === undefined) block._seg.first = block;
    else prev._next = block;
  }

  /** Merges two adjacent free blocks (both unindexed) into `a`. */
  #join(a: PlannedBlock<M>, b: PlannedBlock<M>): PlannedBlock<M> {
    _place(a, a._offset, a.byteLength + b.byteLength);
    a._next = b._next;
    if (b._next) b._next._prev = a;
    return a;
  }

  #index(block: PlannedBlock<M>): void {
    const seg = block._seg;
    if (seg.arena) _insertSorted(this.#arenaFree, block, false);
    else {
      block._seq = ++this.#indexed;
      _insertSorted(seg.small ? this.#freeSmall : this.#free, block, true);
    }
  }

  #unindex(block: PlannedBlock<M>): void {
    const seg = block._seg;
    if (seg.arena) _removeSorted(this.#arenaFree, block, false);
    else _removeSorted(seg.small ? this.#freeSmall : this.#free, block, true);
  }

  // ---- the allocator contract's verbs (issue #15) ----

  /** Requested bytes freed so far (the `freed` total of `requestedBytes`). */
  #freedBytes = 0;
  /** Segment bytes given back so far. */
  #heldFreed = 0;
  /** The totals at the last `resetAccumulatedStats()`. */
  #accBase: readonly number[] = [0, 0, 0, 0];

  /**
   * The pool's figures in the shared stats vocabulary: requested and
   * reserved bytes as `StatValues` (current, peak, allocated, freed), and
   * the segment and step counts.
   *
   * @returns A plain copy.
   */
  stats(): StepPlannedPoolStats {
    const b = this.#accBase;
    return {
      requestedBytes: {
        current: this.#live,
        peak: this.#peakLive,
        allocated: this.#live + this.#freedBytes - b[0],
        freed: this.#freedBytes - b[1],
      },
      reservedBytes: {
        current: this.#held,
        peak: this.#peakHeld,
        allocated: this.#held + this.#heldFreed - b[2],
        freed: this.#heldFreed - b[3],
      },
      segmentCount: this.#segs.size,
      segmentsCreated: this.#created,
      segmentsReleased: this.#released,
      stepCount: this.#step,
      replanCount: this.#replans,
      fastStepCount: this.#fastSteps,
      arenaByteLength: this.arenaByteLength,
    };
  }

  /**
   * A text table of {@linkcode StepPlannedPool.stats}, in the layout of
   * `torch.cuda.memory_summary()`.
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return formatStatsSummary(this.stats(), options, "StepPlannedPool");
  }

  /** Sets the peaks of requested and reserved bytes to their current values. */
  resetPeakStats(): void {
    this.#peakLive = this.#live;
    this.#peakHeld = this.#held;
  }

  /**
   * Sets the `allocated` and `freed` totals of
   * {@linkcode StepPlannedPool.stats} to 0; `current` and `peak` stay.
   */
  resetAccumulatedStats(): void {
    this.#accBase = [
      this.#live + this.#freedBytes,
      this.#freedBytes,
      this.#held + this.#heldFreed,
      this.#heldFreed,
    ];
  }

  // ---- snapshot (issue #15): added at the end, reads the state only ----

  /** Snapshot ids and virtual addresses of the segments, given at first sight. */
  #snapIds = new WeakMap<_Seg<M>, [number, number]>();
  #snapNext = 0;
  #snapAddress = 0;

  /**
   * A picture of the pool in `torch.cuda.memory_snapshot()`'s shape (core's
   * `MemorySnapshot`): every held segment in the order it was made, its
   * blocks in offset order tiling it, live ones `active_allocated` and free
   * ranges `inactive` (the planned arena of a fast step included: its free
   * ranges are the gaps between its live blocks).
   *
   * @returns The snapshot (plain data).
   */
  snapshot(): MemorySnapshot {
    const segments: SegmentSnapshot[] = [];
    for (const seg of this.#segs) {
      let ids = this.#snapIds.get(seg);
      if (ids === undefined) {
        ids = [this.#snapNext++, this.#snapAddress];
        this.#snapAddress += seg.size;
        this.#snapIds.set(seg, ids);
      }
      const [id, address] = ids;
      const live: PlannedBlock<M>[] = [];
      if (seg === this.#arena && this.#fast !== undefined) {
        for (const b of this.#fastLive) if (b !== undefined) live.push(b);
        for (const b of this.#fastOld) if (!b._free) live.push(b);
        live.sort((x, y) => x._offset - y._offset);
      } else {
        for (let b: PlannedBlock<M> | undefined = seg.first; b; b = b._next) {
          if (!b._free) live.push(b);
        }
      }
      const blocks: BlockSnapshot[] = [];
      const gap = (from: number, to: number) => {
        if (to > from) {
          blocks.push({
            address: address + from,
            offset: from,
            byteLength: to - from,
            requestedByteLength: 0,
            state: "inactive",
          });
        }
      };
      let at = 0;
      for (const b of live) {
        gap(at, b._offset);
        blocks.push({
          address: address + b._offset,
          offset: b._offset,
          byteLength: b.byteLength,
          requestedByteLength: b.requestedByteLength,
          state: "active_allocated",
        });
        at = b._offset + b.byteLength;
      }
      gap(at, seg.size);
      segments.push({
        id,
        address,
        byteLength: seg.size,
        stream: 0,
        pool: seg.small ? "small" : "large",
        ...segmentTotals(blocks),
        memoryByteOffset: seg.base,
        blocks,
      });
    }
    return finishSnapshot("segment-source", "StepPlannedPool", segments, null);
  }
}

/** What {@linkcode StepPlannedPool.stats} returns. */
export interface StepPlannedPoolStats {
  /** Bytes asked for by live blocks. */
  requestedBytes: StatValues;
  /** Bytes of the segments held. */
  reservedBytes: StatValues;
  /** Segments held now. */
  segmentCount: number;
  /** Segments made so far. */
  segmentsCreated: number;
  /** Segments given back so far. */
  segmentsReleased: number;
  /** Steps ended so far. */
  stepCount: number;
  /** Steps laid out again because they did not follow the plan. */
  replanCount: number;
  /** Steps served wholly on the fast path. */
  fastStepCount: number;
  /** Bytes of the planned arena (0 when there is none). */
  arenaByteLength: number;
}

/** The smallest block of `free` (sorted by size) of at least `size` bytes. */
function _fit<M>(
  free: PlannedBlock<M>[],
  size: number,
): PlannedBlock<M> | undefined {
  let lo = 0, hi = free.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (free[mid].byteLength < size) lo = mid + 1;
    else hi = mid;
  }
  return free[lo];
}

/**
 * The most bytes the items hold at once (their lives are op indices, from
 * -1 on): no layout of them is smaller.
 */
function _peakBytes(items: readonly _PlanItem[]): number {
  let last = 0;
  for (const it of items) {
    if (it.start > last) last = it.start;
    if (it.end !== Infinity && it.end > last) last = it.end;
  }
  const delta = new Float64Array(last + 3);
  for (const it of items) {
    delta[it.start + 1] += it.size;
    if (it.end !== Infinity) delta[it.end + 1] -= it.size;
  }
  let now = 0, peak = 0;
  for (let t = 0; t < delta.length; t++) {
    now += delta[t];
    if (now > peak) peak = now;
  }
  return peak;
}

/**
 * How many of the ranges whose starts are `los` and ends `his` (each
 * sorted) meet `[at, top)`: those starting below `top`, less those ending
 * by `at` (they start below it too). Two binary searches, where a pass over
 * the ranges per free range made the spills of a step that leaves its plan
 * quadratic in its requests.
 */
function _overlaps(
  los: Float64Array,
  his: Float64Array,
  at: number,
  top: number,
): number {
  return _below(los, top) - _below(his, at + 1);
}

/** How many of `sorted` are below `x`. */
function _below(sorted: Float64Array, x: number): number {
  let lo = 0, hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** No ranges (see `#spill`). */
const _NONE = new Float64Array(0);

/** Throws the error of a size that is not an integer in [0, `max`]. */
function _badSize(byteLength: number, max: number): never {
  validateByteLength(byteLength, max);
  // (not reached: the inline check refuses exactly what this refuses)
  throw new InvalidArgumentError(
    `Invalid byteLength: must be an integer in [0, ${max}]`,
    { name: "byteLength", value: byteLength, limit: max },
  );
}

/** A copy of `a` with twice the room. */
function _grown(a: Float64Array): Float64Array<ArrayBuffer> {
  const b = new Float64Array(a.length * 2);
  b.set(a);
  return b;
}

/** Set bits of a 32-bit integer. */
function _bits(x: number): number {
  let n = 0;
  for (; x !== 0; x &= x - 1) n++;
  return n;
}

/** `size` rounded up to a quarter of its power of two (aligned). */
function _roomy(size: number, align: number): number {
  const quarter = Math.max(align, 2 ** Math.floor(Math.log2(size)) / 4);
  return Math.ceil(size / quarter) * quarter;
}

/** What {@linkcode StepPlannedPool.validate} throws for a broken invariant. */
function _inconsistent(what: string): AllotError {
  return new AllotError(`StepPlannedPool is inconsistent: ${what}`);
}
