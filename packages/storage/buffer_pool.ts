/**
 * {@linkcode BufferPool}: free blocks kept by reserved size for reuse, with
 * {@linkcode PoolStats}.
 *
 * @module
 */

import {
  type Allocator,
  type DataPtr,
  DoubleFreeError,
  Stat,
  type StatValues,
  UseAfterFreeError,
  validateByteLength,
} from "@allot/core";
import { AllocationStrategy } from "./allocation_strategy.ts";

/** Counts and bytes of a pool. Bytes are reserved bytes unless named. */
export interface PoolStats {
  /** Blocks handed out and not yet returned. */
  inUseHandles: number;
  /** Reserved bytes of the blocks handed out. */
  inUseBytes: number;
  /** Bytes asked for by the requests those blocks serve. */
  requestedBytes: number;
  /** `inUseBytes - requestedBytes`: what the strategy's rounding costs. */
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
}

/**
 * A pool of blocks from one allocator, kept by reserved size, like CubeCL's
 * `BufferPool`. `acquire` hands out a block (a kept one of the same reserved
 * size, or a new one); `recycle` takes it back for reuse; `cleanup` frees the
 * kept blocks. A block handed out is never handed out again until it was
 * recycled.
 *
 * The blocks are the allocator's own pointers, reserved length included.
 * Releasing one directly frees it to the allocator and the pool forgets it.
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
 * pool.recycle(a);
 * const b = pool.acquire(600);
 * assert.equal(b, a);
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
  #inUse = new Map<DataPtr<M, C>, number>();
  #freeHandles = 0;
  #freeBytes = 0;
  #allocations = 0;
  #reuses = 0;
  #reserved = new Stat();

  /**
   * Creates an empty pool.
   *
   * @param allocator Where blocks come from.
   * @param options Strategy and free-byte limit.
   * @throws {InvalidArgumentError} When `maxFreeBytes` is negative.
   */
  constructor(allocator: Allocator<M, C>, options: BufferPoolOptions = {}) {
    this.allocator = allocator;
    this.strategy = options.strategy ?? AllocationStrategy.pooled();
    const max = options.maxFreeBytes ?? Infinity;
    if (max !== Infinity) validateByteLength(max, undefined, "maxFreeBytes");
    this.#maxFreeBytes = max;
  }

  /**
   * Hands out a block of at least `byteLength` bytes (exactly
   * `strategy.reserve(byteLength)`).
   *
   * @param byteLength Requested bytes.
   * @returns A block; give it back with `recycle`.
   * @throws {InvalidArgumentError} When `byteLength` is invalid.
   */
  acquire(byteLength: number): DataPtr<M, C> {
    const reserved = this.strategy.reserve(byteLength);
    const list = this.#free.get(reserved);
    let block = list?.pop();
    if (block !== undefined) {
      this.#freeHandles--;
      this.#freeBytes -= reserved;
      this.#reuses++;
    } else {
      block = this.allocator.allocate(reserved);
      this.#reserved.increase(block.byteLength);
      this.#allocations++;
    }
    this.#inUse.set(block, byteLength);
    return block;
  }

  /**
   * Takes a block back for reuse (or frees it, beyond `maxFreeBytes`).
   *
   * @param block A block from `acquire` that is still handed out.
   * @throws {DoubleFreeError} When the block is not handed out by this pool.
   * @throws {UseAfterFreeError} When the block was released directly.
   */
  recycle(block: DataPtr<M, C>): void {
    if (!this.#inUse.has(block)) {
      throw new DoubleFreeError(
        `Cannot recycle ${block}: it is not handed out by this pool`,
      );
    }
    this.#inUse.delete(block);
    if (block.released) {
      this.#reserved.decrease(block.byteLength);
      throw new UseAfterFreeError(
        `Cannot recycle ${block}: it was released directly`,
      );
    }
    const reserved = block.byteLength;
    if (this.#freeBytes + reserved > this.#maxFreeBytes) {
      this.#reserved.decrease(reserved);
      block.release();
      return;
    }
    let list = this.#free.get(reserved);
    if (list === undefined) this.#free.set(reserved, list = []);
    list.push(block);
    this.#freeHandles++;
    this.#freeBytes += reserved;
  }

  /**
   * Frees every kept block to the allocator.
   *
   * @returns The bytes freed.
   */
  cleanup(): number {
    const freed = this.#freeBytes;
    for (const list of this.#free.values()) {
      for (const block of list) block.release();
    }
    this.#free.clear();
    this.#reserved.decrease(freed);
    this.#freeHandles = 0;
    this.#freeBytes = 0;
    return freed;
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
    let inUseBytes = 0, requestedBytes = 0;
    for (const [block, requested] of this.#inUse) {
      if (block.released) {
        // released directly: it went back to the allocator
        this.#inUse.delete(block);
        this.#reserved.decrease(block.byteLength);
        continue;
      }
      inUseBytes += block.byteLength;
      requestedBytes += requested;
    }
    return {
      inUseHandles: this.#inUse.size,
      inUseBytes,
      requestedBytes,
      paddingBytes: inUseBytes - requestedBytes,
      freeHandles: this.#freeHandles,
      freeBytes: this.#freeBytes,
      allocations: this.#allocations,
      reuses: this.#reuses,
      reserved: this.#reserved.values(),
    };
  }
}
