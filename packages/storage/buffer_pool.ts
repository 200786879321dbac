/**
 * {@linkcode BufferPool}: free blocks kept by reserved size for reuse, with
 * {@linkcode PoolStats}.
 *
 * @module
 */

import {
  type Allocator,
  ContractViolationError,
  DataPtr,
  describeValue,
  DoubleFreeError,
  formatStatsSummary,
  hostBuffer,
  InvalidArgumentError,
  isHostMemory,
  type MemorySummaryOptions,
  optionOr,
  OutOfMemoryError,
  Stat,
  type StatValues,
  UseAfterFreeError,
  validateByteLength,
  validateOptionKeys,
} from "@allot/core";
import { AllocationStrategy } from "./allocation_strategy.ts";

/** Counts and bytes of a pool. Bytes are reserved bytes unless named. */
export interface PoolStats {
  /** Blocks handed out and not yet returned. */
  inUseHandles: number;
  /** Reserved bytes of the blocks handed out. */
  allocatedBytes: number;
  /** Bytes asked for by the requests those blocks serve. */
  requestedBytes: number;
  /** `allocatedBytes - requestedBytes`: what the strategy's rounding costs. */
  paddingBytes: number;
  /** Blocks kept for reuse. */
  freeHandles: number;
  /** Reserved bytes of the blocks kept for reuse. */
  freeBytes: number;
  /** Requests served by a new allocation. */
  allocations: number;
  /** Requests served by a kept block. */
  reuses: number;
  /** Bytes held from the allocator (in use plus free), as a `Stat`. */
  reserved: StatValues;
  /**
   * Bytes asked for by the requests the blocks in use serve (what
   * `requestedBytes` is now), with its peak and totals.
   */
  requested: StatValues;
}

/** Options of {@linkcode BufferPool}. */
export interface BufferPoolOptions {
  /**
   * How requests round to block sizes.
   *
   * @default {AllocationStrategy.pooled()}
   */
  strategy?: AllocationStrategy;
  /**
   * Most free bytes kept; blocks returned beyond it go back to the allocator.
   *
   * @default {Infinity}
   */
  maxFreeBytes?: number;
  /**
   * Debug mode for hunting memory bugs, off by default: fills every
   * recycled host block with `0xdd` and checks the fill when the block is
   * handed out again (a write through a stale reference throws
   * `UseAfterFreeError` naming the block and the first changed byte), and
   * checks the pool's own counters on every call. Costs a fill and a scan
   * per reuse.
   *
   * @default {false}
   */
  strict?: boolean;
}

/** The byte a strict pool writes into recycled host blocks. */
const JUNK = 0xdd;

/**
 * A pool of blocks from one allocator, kept by reserved size, like CubeCL's
 * `BufferPool`. `acquire` hands out a block (a kept one of the same reserved
 * size, or a new one); `recycle` takes it back for reuse; `cleanup` frees the
 * kept blocks. A block handed out is never handed out again until it was
 * recycled.
 *
 * Each `acquire` returns a fresh handle (a `DataPtr` over the allocator's
 * block, reserved length and context included); `recycle` invalidates
 * it, so a stale handle is refused even after its block was handed out
 * again. Releasing a handle directly frees its block to the allocator and
 * the pool forgets it.
 * For blocks that come back by themselves, use
 * {@linkcode ManagedBufferPool}.
 *
 * @typeParam M Memory type of the allocator.
 * @typeParam C Context type of the allocator.
 *
 * @example Recycle a block and get it back
 * ```ts
 * import { AllocationStrategy, BufferPool, Storage } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * using owner = Storage.allocate(0);
 * const pool = new BufferPool(owner.target.allocator, { strategy: AllocationStrategy.pooled() });
 * const a = pool.acquire(1000);
 * assert.equal(a.byteLength, 1024);
 * const place = a.byteOffset;
 * pool.recycle(a);
 * const b = pool.acquire(600);
 * assert.equal(b.byteOffset, place); // the same block, a fresh handle
 * assert.notEqual(b, a);
 * assert.equal(pool.stats().reuses, 1);
 * pool.recycle(b);
 * pool.cleanup();
 * assert.equal(pool.stats().reserved.current, 0);
 * ```
 */
export class BufferPool<M = unknown, C = unknown> {
  /** The allocator blocks come from. */
  readonly allocator: Allocator<M, C>;
  /** The rounding strategy. */
  readonly strategy: AllocationStrategy;
  #maxFreeBytes: number;
  #free = new Map<number, DataPtr<M, C>[]>();
  // Handles handed out (one fresh DataPtr per acquire over the pooled
  // block) and the block and requested bytes of each; the blocks behind them.
  #inUse = new Map<DataPtr<M, C>, _Lease<M, C>>();
  #held = new Set<DataPtr<M, C>>();
  #freeSet = new Set<DataPtr<M, C>>();
  #freeHandles = 0;
  #freeBytes = 0;
  #allocations = 0;
  #reuses = 0;
  #reserved = new Stat();
  #requested = new Stat();
  #strict: boolean;

  /**
   * Creates an empty pool.
   *
   * @param allocator Where blocks come from.
   * @param options Strategy and free-byte limit.
   * @throws {InvalidArgumentError} When `maxFreeBytes` is negative.
   */
  constructor(allocator: Allocator<M, C>, options: BufferPoolOptions = {}) {
    if (
      typeof allocator !== "object" || allocator === null ||
      typeof allocator.allocate !== "function"
    ) {
      throw new InvalidArgumentError(
        `Cannot create a BufferPool: allocator must have allocate(), received ${
          describeValue(allocator)
        }`,
        { name: "allocator", value: allocator, limit: "Allocator" },
      );
    }
    if (typeof options !== "object" || options === null) {
      throw new InvalidArgumentError(
        `Cannot create a BufferPool: options must be an object, received ${
          describeValue(options)
        }`,
        { name: "options", value: options, limit: "BufferPoolOptions" },
      );
    }
    validateOptionKeys(
      options,
      ["strategy", "maxFreeBytes", "strict"],
      "BufferPool",
    );
    const strategy = optionOr(options.strategy, AllocationStrategy.pooled());
    if (
      typeof strategy !== "object" || strategy === null ||
      typeof strategy.reserve !== "function"
    ) {
      throw new InvalidArgumentError(
        `Cannot create a BufferPool: strategy must have reserve(), received ${
          describeValue(strategy)
        }`,
        { name: "strategy", value: strategy, limit: "AllocationStrategy" },
      );
    }
    const max = optionOr(options.maxFreeBytes, Infinity);
    if (max !== Infinity) validateByteLength(max, undefined, "maxFreeBytes");
    this.allocator = allocator;
    this.strategy = strategy;
    this.#maxFreeBytes = max;
    const strict = optionOr(options.strict, false);
    if (typeof strict !== "boolean") {
      throw new InvalidArgumentError(
        `Cannot create a BufferPool: strict must be a boolean, received ${
          describeValue(strict)
        }`,
        { name: "strict", value: strict, limit: "boolean" },
      );
    }
    this.#strict = strict;
  }

  /** Whether the pool runs in strict (debug) mode. */
  get strict(): boolean {
    return this.#strict;
  }

  /**
   * Hands out a block of at least `byteLength` bytes (exactly
   * `strategy.reserve(byteLength)`).
   *
   * @param byteLength Requested bytes.
   * @returns A fresh handle of the block (the block's place, device and
   * context, or the block itself when it has no context); give it back with
   * `recycle`, which invalidates it.
   * @throws {InvalidArgumentError} When `byteLength` is invalid.
   * @deprecated Use {@linkcode BufferPool.allocate} (the same); removed in 0.3.0.
   */
  acquire(byteLength: number): DataPtr<M, C> {
    validateByteLength(byteLength);
    const reserved = this.strategy.reserve(byteLength);
    if (!Number.isSafeInteger(reserved) || reserved < byteLength) {
      throw new ContractViolationError(
        `Cannot acquire ${byteLength} bytes: the strategy reserved ${
          describeValue(reserved)
        }, less than asked`,
      );
    }
    if (this.#strict) this.#validate();
    const list = this.#free.get(reserved);
    let block = list?.pop();
    if (block !== undefined) {
      this.#freeSet.delete(block);
      this.#freeHandles--;
      this.#freeBytes -= reserved;
      this.#reuses++;
      if (this.#strict) this.#checkJunk(block);
    } else {
      block = this.#checkedAllocate(reserved);
      this.#reserved.increase(block.byteLength);
      this.#allocations++;
    }
    // A fresh handle per acquire: a stale handle of an earlier acquire of
    // the same block is not handed out, so its recycle is refused.
    const pooled = block;
    const handle = new DataPtr<M, C>(
      block.memory,
      block.byteOffset,
      block.byteLength,
      block.device,
      // Released directly, the handle frees its block to the allocator (a
      // null context would skip the deleter: the block stands in for it).
      {
        context: (block.getContext() ?? block) as C,
        deleter: () => pooled.release(),
      },
    );
    this.#held.add(block);
    this.#inUse.set(handle, { block, requested: byteLength });
    this.#requested.increase(byteLength);
    return handle;
  }

  /** Allocates a block and refuses one that breaks the allocator contract. */
  #checkedAllocate(reserved: number): DataPtr<M, C> {
    const block = this.allocator.allocate(reserved);
    let why: string | undefined;
    if (!DataPtr.isDataPtr(block)) why = "not a DataPtr";
    else if (block.released) why = "already released";
    else if (block.byteLength !== reserved) {
      why = `${block.byteLength} bytes long`;
    } else if (this.#held.has(block) || this.#freeSet.has(block)) {
      why = "a block the pool already holds";
    }
    if (why === undefined) return block;
    if (
      DataPtr.isDataPtr(block) && !this.#held.has(block) &&
      !this.#freeSet.has(block)
    ) {
      try {
        block.release();
      } catch {
        // The contract is already broken; the refusal below says so.
      }
    }
    throw new ContractViolationError(
      `Cannot acquire ${reserved} bytes: the allocator returned ${why}`,
    );
  }

  /**
   * Takes a block back for reuse (or frees it, beyond `maxFreeBytes`).
   *
   * @param handle A handle from `acquire` not yet recycled (recycling
   * invalidates it).
   * @throws {DoubleFreeError} When the handle is not handed out by this pool
   * now (recycled already, even if its block was acquired again since).
   * @throws {UseAfterFreeError} When the handle was released directly.
   * @deprecated Use {@linkcode BufferPool.free} (the same); removed in 0.3.0.
   */
  recycle(handle: DataPtr<M, C>): void {
    const lease = this.#inUse.get(handle);
    if (lease === undefined) {
      if (!DataPtr.isDataPtr(handle)) {
        // no handle of this verb's kind at all
        throw new InvalidArgumentError(
          `Cannot recycle ${describeValue(handle)}: it is not a DataPtr`,
          { name: "handle", value: handle, limit: "a DataPtr" },
        );
      }
      throw new DoubleFreeError(
        `Cannot recycle ${
          DataPtr.isDataPtr(handle) ? String(handle) : describeValue(handle)
        }: it is not handed out by this pool`,
      );
    }
    if (this.#strict) this.#validate();
    this.#inUse.delete(handle);
    this.#requested.decrease(lease.requested);
    const block = lease.block;
    this.#held.delete(block);
    if (handle.released) {
      this.#reserved.decrease(handle.byteLength);
      throw new UseAfterFreeError(
        `Cannot recycle ${handle}: it was released directly`,
      );
    }
    handle.releaseContext(); // invalidates the handle, frees nothing
    const reserved = block.byteLength;
    if (this.#freeBytes + reserved > this.#maxFreeBytes) {
      this.#reserved.decrease(reserved);
      block.release();
      return;
    }
    if (this.#strict) _fill(block, JUNK);
    let list = this.#free.get(reserved);
    if (list === undefined) this.#free.set(reserved, list = []);
    list.push(block);
    this.#freeSet.add(block);
    this.#freeHandles++;
    this.#freeBytes += reserved;
  }

  /**
   * Frees every kept block to the allocator.
   *
   * @returns The bytes freed.
   * @deprecated Use {@linkcode BufferPool.emptyCache} (the same); removed in 0.3.0.
   */
  cleanup(): number {
    if (this.#strict) this.#validate();
    const freed = this.#freeBytes;
    const lists = [...this.#free.values()];
    // The books are settled first, so a deleter that throws leaves them
    // right; every block is still released, and the first error rethrown.
    this.#free.clear();
    this.#freeSet.clear();
    this.#reserved.decrease(freed);
    this.#freeHandles = 0;
    this.#freeBytes = 0;
    let failure: { error: unknown } | undefined;
    for (const list of lists) {
      for (const block of list) {
        try {
          block.release();
        } catch (error) {
          failure ??= { error };
        }
      }
    }
    if (failure !== undefined) throw failure.error;
    return freed;
  }

  /**
   * Checks the pool's books: free lists against the free counters, reserved
   * bytes against in-use plus free. Runs on every call in strict mode.
   *
   * @throws {ContractViolationError} When the books disagree (a bug, or a
   * block freed behind the pool's back).
   */
  validate(): void {
    this.#validate();
  }

  #validate(): void {
    let handles = 0, bytes = 0;
    for (const [size, list] of this.#free) {
      for (const block of list) {
        if (block.released || block.byteLength !== size) {
          throw new ContractViolationError(
            `BufferPool is corrupt: a free block of the ${size}-byte list is ${
              block.released ? "released" : `${block.byteLength} bytes`
            }`,
          );
        }
        if (this.#held.has(block)) {
          throw new ContractViolationError(
            `BufferPool is corrupt: ${block} is both free and in use`,
          );
        }
      }
      handles += list.length;
      bytes += size * list.length;
    }
    if (handles !== this.#freeSet.size) {
      throw new ContractViolationError(
        `BufferPool is corrupt: free lists hold ${handles} blocks, the free set ${this.#freeSet.size}`,
      );
    }
    let inUse = 0;
    for (const block of this.#inUse.keys()) {
      if (!block.released) inUse += block.byteLength;
    }
    if (
      handles !== this.#freeHandles || bytes !== this.#freeBytes ||
      bytes > this.#maxFreeBytes
    ) {
      throw new ContractViolationError(
        `BufferPool is corrupt: free lists hold ${handles} blocks, ${bytes} bytes; counters say ${this.#freeHandles}, ${this.#freeBytes} (limit ${this.#maxFreeBytes})`,
      );
    }
    if (inUse + bytes > this.#reserved.current) {
      throw new ContractViolationError(
        `BufferPool is corrupt: ${inUse} bytes in use and ${bytes} free exceed the ${this.#reserved.current} reserved`,
      );
    }
  }

  #checkJunk(block: DataPtr<M, C>): void {
    const bytes = _hostBytes(block);
    if (bytes === undefined) return;
    const at = bytes.findIndex((b) => b !== JUNK);
    if (at < 0) return;
    // The block is corrupt: it leaves the pool.
    this.#reserved.decrease(block.byteLength);
    block.release();
    throw new UseAfterFreeError(
      `Cannot reuse ${block}: byte ${at} was written after the block was recycled (0x${
        bytes[at].toString(16)
      }, expected 0x${JUNK.toString(16)})`,
    );
  }

  /**
   * Whether `block` is handed out by this pool now.
   *
   * @param block A pointer.
   * @returns `true` between `acquire` and `recycle`.
   */
  owns(block: DataPtr<M, C>): boolean {
    return this.#inUse.has(block);
  }

  /**
   * Counts and bytes now.
   *
   * @returns A fresh snapshot.
   */
  stats(): PoolStats {
    let allocatedBytes = 0, requestedBytes = 0;
    for (const [block, lease] of this.#inUse) {
      const requested = lease.requested;
      if (block.released) {
        // released directly: it went back to the allocator
        this.#inUse.delete(block);
        this.#held.delete(lease.block);
        this.#reserved.decrease(block.byteLength);
        this.#requested.decrease(requested);
        continue;
      }
      allocatedBytes += block.byteLength;
      requestedBytes += requested;
    }
    return {
      inUseHandles: this.#inUse.size,
      allocatedBytes,
      requestedBytes,
      paddingBytes: allocatedBytes - requestedBytes,
      freeHandles: this.#freeHandles,
      freeBytes: this.#freeBytes,
      allocations: this.#allocations,
      reuses: this.#reuses,
      reserved: this.#reserved.values(),
      requested: this.#requested.values(),
    };
  }

  // ---- the allocator contract's verbs (issue #15) ----

  /**
   * Hands out a block of at least `byteLength` bytes: the contract's name of
   * {@linkcode BufferPool.acquire} (the same). 0 bytes gives an ordinary
   * handle.
   *
   * @param byteLength Requested bytes.
   * @returns A fresh handle of the block; give it back with `free`.
   * @throws {InvalidArgumentError} When `byteLength` is invalid.
   * @throws {OutOfMemoryError} When the allocator is out of memory.
   */
  allocate(byteLength: number): DataPtr<M, C> {
    return this.acquire(byteLength);
  }

  /**
   * Like {@linkcode BufferPool.allocate}, but returns `undefined` where the
   * allocator throws out of memory.
   *
   * @param byteLength Requested bytes.
   * @returns A fresh handle, or `undefined` when the memory is full.
   * @throws {InvalidArgumentError} When `byteLength` is invalid.
   */
  tryAllocate(byteLength: number): DataPtr<M, C> | undefined {
    try {
      return this.acquire(byteLength);
    } catch (error) {
      if (error instanceof OutOfMemoryError) return undefined;
      throw error;
    }
  }

  /**
   * Takes a block back: the contract's name of
   * {@linkcode BufferPool.recycle} (the same).
   *
   * @param handle A handle from `allocate` not yet freed.
   * @throws {InvalidArgumentError} When `handle` is no `DataPtr`.
   * @throws {DoubleFreeError} When the handle is not handed out by this pool
   * now.
   * @throws {UseAfterFreeError} When the handle was released directly.
   */
  free(handle: DataPtr<M, C>): void {
    this.recycle(handle);
  }

  /**
   * Frees every kept block to the allocator: the contract's name of
   * {@linkcode BufferPool.cleanup} (the same).
   *
   * @returns The bytes freed.
   */
  emptyCache(): number {
    return this.cleanup();
  }

  /** Sets the peaks of `reserved` and `requested` to their current values. */
  resetPeakStats(): void {
    this.stats(); // (settles the handles released directly first)
    this.#reserved.resetPeak();
    this.#requested.resetPeak();
  }

  /**
   * Sets the `allocated` and `freed` totals of `reserved` and `requested`,
   * and the `allocations` and `reuses` counts, to 0.
   */
  resetAccumulatedStats(): void {
    this.#reserved.resetAccumulated();
    this.#requested.resetAccumulated();
    this.#allocations = 0;
    this.#reuses = 0;
  }

  /**
   * A text table of {@linkcode BufferPool.stats}, in the layout of
   * `torch.cuda.memory_summary()`.
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return formatStatsSummary(this.stats(), options, "BufferPool");
  }
}

/** A handle handed out: its pooled block and the bytes asked for. */
interface _Lease<M, C> {
  block: DataPtr<M, C>;
  requested: number;
}

function _hostBytes(block: DataPtr): Uint8Array | undefined {
  const memory = block.memory;
  if (!isHostMemory(memory)) return undefined;
  return new Uint8Array(hostBuffer(memory), block.byteOffset, block.byteLength);
}

function _fill(block: DataPtr, value: number): void {
  _hostBytes(block)?.fill(value);
}
