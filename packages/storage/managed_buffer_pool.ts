/**
 * {@linkcode ManagedBufferPool}: a pool whose buffers return their memory by
 * themselves when released.
 *
 * @module
 */

import {
  type Allocator,
  AllocatorBase,
  DataPtr,
  describeValue,
  type Device,
  IntrusivePtr,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import {
  formatStatsSummary,
  type MemorySummaryOptions,
  validateOptionKeys,
} from "@allot/core";
import { _checkBackend, Buffer, type BufferOptions } from "./buffer.ts";
import type { BufferBackend } from "./buffer_backend.ts";
import { _checkOptions, BufferView, type Shape } from "./buffer_view.ts";
import { type Dtype, dtypeInfo } from "./dtype.ts";
import { Storage } from "./storage.ts";
import {
  BufferPool,
  type BufferPoolOptions,
  type PoolStats,
} from "./buffer_pool.ts";

let returnBlock: (
  pool: ManagedBufferPool<unknown, unknown> | undefined,
  block: DataPtr<unknown, unknown>,
) => void;

/** Options of {@linkcode ManagedBufferPool}. */
export interface ManagedBufferPoolOptions extends BufferPoolOptions {
  /**
   * Backend given to buffers from {@linkcode ManagedBufferPool.alloc}.
   *
   * @default {undefined}
   */
  backend?: BufferBackend;
}

/**
 * A {@linkcode BufferPool} behind the {@linkcode Allocator} interface, like
 * CubeCL's `ManagedBufferPool`: each pointer it hands out carries a recycler
 * as its deleter, so when the pointer is released (when the last
 * {@linkcode Buffer} of its storage goes) its block returns to the pool by
 * itself. The recycler holds the pool only through a `WeakRef`: blocks do
 * not keep the pool alive, and a block released after the pool was disposed
 * or collected goes straight back to the allocator.
 *
 * Use {@linkcode ManagedBufferPool.alloc}, or pass the pool as the
 * `allocator` of any `Buffer` or `Storage`. (A storage keeps its allocator,
 * so storages made the second way do keep the pool alive; storages from
 * `alloc` keep only a weak handle, which allocates from the pool while it
 * lives and from the backing allocator after.)
 *
 * @typeParam M Memory type of the backing allocator.
 * @typeParam C Context type of the backing allocator.
 *
 * @example Released buffers come back for reuse
 * ```ts
 * import { AllocationStrategy, ManagedBufferPool, Storage } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * using owner = Storage.allocate(0);
 * using pool = new ManagedBufferPool(owner.target.allocator, { strategy: AllocationStrategy.pooled() });
 * const a = pool.alloc("f32", [100]);
 * const storage = a.storage.data.memory;
 * a.release();
 * assert.equal(pool.stats().freeHandles, 1);
 * using b = pool.alloc("f32", [120]);
 * assert.equal(b.storage.data.memory, storage);
 * assert.equal(pool.stats().reuses, 1);
 * ```
 */
export class ManagedBufferPool<M = unknown, C = unknown>
  extends AllocatorBase<M, DataPtr<M, C>> {
  /** The device of the backing allocator. */
  readonly device: Device;
  #pool: BufferPool<M, C>;
  #backend: BufferBackend | undefined;
  #recycle: (block: DataPtr<M, C>) => void;
  #facade: Allocator;
  #closed = false;

  static {
    returnBlock = (pool, block) => {
      if (pool === undefined) {
        block.release();
      } else if (pool.#closed) {
        pool.#pool.recycle(block);
        pool.#pool.cleanup();
      } else {
        pool.#pool.recycle(block);
      }
    };
  }

  /**
   * Creates an empty pool over `allocator`.
   *
   * @param allocator Where blocks come from.
   * @param options Strategy, free-byte limit and backend.
   * @throws {InvalidArgumentError} For options that are not an object, an
   * unknown option key or a bad option value.
   */
  constructor(
    allocator: Allocator<M, C>,
    options: ManagedBufferPoolOptions = {},
  ) {
    super();
    if (typeof options !== "object" || options === null) {
      throw new InvalidArgumentError(
        `Cannot create a ManagedBufferPool: options must be an object, received ${
          describeValue(options)
        }`,
        { name: "options", value: options, limit: "ManagedBufferPoolOptions" },
      );
    }
    validateOptionKeys(
      options,
      ["strategy", "maxFreeBytes", "strict", "backend"],
      "ManagedBufferPool",
    );
    const { backend: _backend, ...poolOptions } = options;
    this.#pool = new BufferPool(allocator, poolOptions);
    _checkBackend(options.backend);
    this.device = allocator.device;
    this.#backend = options.backend;
    const ref = new WeakRef(this);
    this.#recycle = makeRecycler(ref);
    this.#facade = new WeakPoolAllocator(ref, allocator);
  }

  /** The rounding strategy. */
  get strategy(): BufferPool<M, C>["strategy"] {
    return this.#pool.strategy;
  }

  /** Whether `dispose` ran: new requests are refused, returns are freed. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Hands out `byteLength` bytes of a pooled block; releasing the pointer
   * returns the block to the pool.
   *
   * @param byteLength Requested bytes.
   * @returns An owning pointer of exactly `byteLength` bytes.
   * @throws {InvalidArgumentError} When `byteLength` is invalid.
   * @throws {UseAfterFreeError} After `dispose`.
   */
  allocate(byteLength: number): DataPtr<M, DataPtr<M, C>> {
    if (this.#closed) {
      throw new UseAfterFreeError(
        `Cannot allocate ${
          describeValue(byteLength)
        } bytes: the pool was disposed`,
      );
    }
    const block = this.#pool.acquire(byteLength);
    return new DataPtr(
      block.memory,
      block.byteOffset,
      byteLength,
      this.device,
      {
        context: block,
        deleter: this.#recycle,
      },
    );
  }

  /**
   * A contiguous buffer from the pool (not initialised).
   *
   * @param dtype The element type.
   * @param shape The shape.
   * @param options Backend (defaults to the pool's).
   * @returns The buffer; releasing its last view returns the block.
   * @throws {ShapeError} When the shape is invalid.
   */
  alloc<D extends Dtype>(
    dtype: D,
    shape: Shape,
    options: Pick<BufferOptions, "backend"> = {},
  ): Buffer<D> {
    _checkOptions(options, "options", ["backend"], "ManagedBufferPool.alloc()");
    _checkBackend(options.backend);
    const view = BufferView.contiguous(shape);
    const bytes = view.length * dtypeInfo(dtype).bytesPerElement;
    const storage = IntrusivePtr.make(
      new Storage(this.allocate(bytes), { allocator: this.#facade }),
    );
    return new Buffer(storage, {
      dtype,
      view,
      backend: options.backend ?? this.#backend,
    });
  }

  /**
   * Counts and bytes now.
   *
   * @returns A fresh snapshot.
   */
  stats(): PoolStats {
    return this.#pool.stats();
  }

  /**
   * Frees the kept blocks to the allocator.
   *
   * @returns The bytes freed.
   * @deprecated Use {@linkcode ManagedBufferPool.emptyCache} (the same); removed in 0.3.0.
   */
  cleanup(): number {
    return this.#pool.cleanup();
  }

  /**
   * Frees the kept blocks and closes the pool: blocks still in use go
   * straight to the allocator when released.
   */
  dispose(): void {
    this.#closed = true;
    this.#pool.cleanup();
  }

  // ---- the allocator contract's verbs (issue #15) ----

  /**
   * Frees the kept blocks to the allocator: the contract's name of
   * {@linkcode ManagedBufferPool.cleanup} (the same).
   *
   * @returns The bytes freed.
   */
  emptyCache(): number {
    return this.cleanup();
  }

  /** Sets the peaks of the pool's stats to their current values. */
  resetPeakStats(): void {
    this.#pool.resetPeakStats();
  }

  /** Sets the totals and counts of the pool's stats to 0. */
  resetAccumulatedStats(): void {
    this.#pool.resetAccumulatedStats();
  }

  /**
   * Checks the pool's books (see `BufferPool.validate`).
   *
   * @throws {ContractViolationError} When the books disagree.
   */
  validate(): void {
    this.#pool.validate();
  }

  /**
   * A text table of {@linkcode ManagedBufferPool.stats}, in the layout of
   * `torch.cuda.memory_summary()`.
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return formatStatsSummary(this.stats(), options, "ManagedBufferPool");
  }

  /** Same as {@linkcode ManagedBufferPool.dispose}. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * The deleter of every pointer a pool hands out. Defined outside the class
 * so that it captures only the `WeakRef`, never the pool.
 */
function makeRecycler<M, C>(
  ref: WeakRef<ManagedBufferPool<M, C>>,
): (block: DataPtr<M, C>) => void {
  return (block) =>
    returnBlock(
      ref.deref() as ManagedBufferPool<unknown, unknown> | undefined,
      block,
    );
}

/**
 * The allocator recorded in storages from `alloc()`: the pool while it
 * lives, the backing allocator after. Holds the pool only weakly.
 */
class WeakPoolAllocator<M, C> extends AllocatorBase<M, unknown> {
  readonly device: Device;
  #ref: WeakRef<ManagedBufferPool<M, C>>;
  #backing: Allocator<M, C>;

  constructor(ref: WeakRef<ManagedBufferPool<M, C>>, backing: Allocator<M, C>) {
    super();
    this.device = backing.device;
    this.#ref = ref;
    this.#backing = backing;
  }

  allocate(byteLength: number): DataPtr<M, unknown> {
    const pool = this.#ref.deref();
    return pool === undefined || pool.closed
      ? this.#backing.allocate(byteLength)
      : pool.allocate(byteLength);
  }

  override copyData(
    dest: DataPtr<M, unknown>,
    src: DataPtr<M, unknown>,
    byteLength: number,
  ): void {
    this.#backing.copyData(
      dest as DataPtr<M, C>,
      src as DataPtr<M, C>,
      byteLength,
    );
  }
}
