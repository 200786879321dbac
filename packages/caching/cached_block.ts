/**
 * {@linkcode CachedBlock}: the owning handle a {@linkcode CachingAllocator}
 * hands out (memory, byte offset, stream; `release()` or `using` gives it
 * back, and a released handle refuses every read).
 *
 * @module
 */

import {
  InvalidArgumentError,
  type Stream,
  UseAfterFreeError,
} from "@allot/core";
import { _Block } from "./_block_pool.ts";
import type { CachingAllocator } from "./caching_allocator.ts";

/** The block of a handle (`null` once released), or `undefined` for a non-handle. */
export let _blockOf: <M>(
  handle: CachedBlock<M>,
) => _Block<M> | null | undefined;
/** Marks a handle released (its block is `null` from now on). */
export let _detach: <M>(handle: CachedBlock<M>) => void;
/** Frees the live block `b` of `handle` (checked by the caller). */
let releaseHandle: <M>(handle: CachedBlock<M>, b: _Block<M>) => void;

/**
 * Sets the function a handle's `release()` calls (the allocator's, set
 * once when its class is defined).
 */
export function _setReleaseHandle(
  fn: <M>(handle: CachedBlock<M>, b: _Block<M>) => void,
): void {
  releaseHandle = fn;
}

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
    _blockOf = <M>(h: CachedBlock<M>): _Block<M> | null | undefined =>
      typeof h === "object" && h !== null && #block in h ? h.#block : undefined;
    _detach = <M>(h: CachedBlock<M>): void => {
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
   * @throws {InvalidArgumentError} When `block` is not a block of a
   * caching allocator (a handle made outside the allocator).
   */
  constructor(
    allocator: CachingAllocator<M>,
    block: _Block<M>,
    byteOffset: number,
    byteLength: number,
    stream: Stream,
  ) {
    if (!(block instanceof _Block)) throwForged();
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

function throwForged(): never {
  throw new InvalidArgumentError(
    "Cannot make a CachedBlock: only a CachingAllocator makes them (allocate())",
    { name: "block", value: undefined, limit: "a block of a CachingAllocator" },
  );
}
