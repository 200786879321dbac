/**
 * {@linkcode CachingAllocatorAdapter}: a {@linkcode CachingAllocator} behind
 * core's {@linkcode Allocator} interface, so storage and registries can use
 * it.
 *
 * @module
 */

import {
  type Allocator,
  AllocatorBase,
  DataPtr,
  type Deleter,
  describeValue,
  type Device,
  InvalidArgumentError,
  type Stream,
} from "@allot/core";
import { CachedBlock, CachingAllocator } from "./caching_allocator.ts";
import { checkStream } from "./_check.ts";

const releaseBlock: Deleter<CachedBlock> = (block: CachedBlock): void => {
  block.release();
};

/**
 * Serves core's {@linkcode Allocator} interface from a
 * {@linkcode CachingAllocator}: `allocate()` returns a {@linkcode DataPtr}
 * whose memory is the segment's memory and whose byte offset is the segment's
 * offset plus the block's; releasing it frees the block. The context is the
 * {@linkcode CachedBlock}, so `recordStream` stays reachable through
 * `getContext()`. Zero-byte requests give a pointer that owns nothing, as in
 * PyTorch.
 *
 * @typeParam M Type of the segment memory.
 *
 * @example
 * ```ts
 * import { CachingAllocator, CachingAllocatorAdapter } from "@allot/caching";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const caching = new CachingAllocator(new MockSegmentSource());
 * const allocator = new CachingAllocatorAdapter(caching);
 * {
 *   using ptr = allocator.allocate(100);
 *   assert.equal(ptr.byteLength, 100);
 *   assert.equal(caching.allocatedBytes, 256); // one 256-byte block
 * }
 * assert.equal(caching.allocatedBytes, 0);
 * ```
 */
export class CachingAllocatorAdapter<M = unknown>
  extends AllocatorBase<M, CachedBlock<M>>
  implements Allocator<M, CachedBlock<M>> {
  /** The caching allocator behind the interface. */
  readonly caching: CachingAllocator<M>;
  /** The stream new blocks are allocated on. */
  readonly stream: Stream | undefined;

  /**
   * Wraps a caching allocator.
   *
   * @param caching The allocator.
   * @param stream Stream for every allocation; the default stream when omitted.
   */
  constructor(caching: CachingAllocator<M>, stream?: Stream) {
    super();
    if (!(caching instanceof CachingAllocator)) {
      throw new InvalidArgumentError(
        `Invalid caching: must be a CachingAllocator, received ${
          describeValue(caching)
        }`,
        { name: "caching", value: caching, limit: "CachingAllocator" },
      );
    }
    this.caching = caching;
    this.stream = stream === undefined ? undefined : checkStream(stream);
  }

  /** The device of the caching allocator. */
  get device(): Device {
    return this.caching.device;
  }

  /**
   * Allocates `byteLength` bytes as an owning pointer.
   *
   * @param byteLength Bytes.
   * @returns The pointer; release it to free the block.
   * @throws {InvalidArgumentError} For a bad size.
   * @throws {CachingOutOfMemoryError} When the device is full.
   */
  allocate(byteLength: number): DataPtr<M, CachedBlock<M>> {
    if (byteLength === 0) {
      return new DataPtr<M, CachedBlock<M>>(
        null as unknown as M,
        0,
        0,
        this.caching.device,
      );
    }
    const block = this.caching.allocate(
      byteLength,
      this.stream === undefined ? undefined : { stream: this.stream },
    );
    return new DataPtr(
      block.memory,
      block.byteOffset,
      byteLength,
      block.allocator.device,
      {
        context: block,
        deleter: releaseBlock as Deleter<CachedBlock<M>>,
      },
    );
  }

  /**
   * Frees a context from `rawAllocate`: a block of this adapter's caching
   * allocator.
   *
   * @param context The block.
   * @throws {InvalidArgumentError} For anything but a block of this
   * adapter's caching allocator; nothing is freed.
   * @throws {DoubleFreeError} When the block was freed already.
   */
  override rawDeallocate(context: CachedBlock<M>): void {
    if (
      !(context instanceof CachedBlock) || context.allocator !== this.caching
    ) {
      throw new InvalidArgumentError(
        `Cannot free ${
          describe(context)
        }: it is not a block of this adapter's ${this.caching.label}`,
        { name: "context", value: context },
      );
    }
    this.caching.free(context);
  }

  /**
   * The deleter that frees a context from `rawAllocate`.
   *
   * @returns A function that releases a {@linkcode CachedBlock}.
   */
  override rawDeleter(): Deleter<CachedBlock<M>> {
    return releaseBlock as Deleter<CachedBlock<M>>;
  }
}

function describe(value: unknown): string {
  if (value instanceof CachedBlock) return `${value}`;
  if (value === null || value === undefined) return String(value);
  if (typeof value === "object") {
    const name = Object.getPrototypeOf(value)?.constructor?.name;
    return typeof name === "string" && name !== "Object"
      ? `a ${name}`
      : "an object";
  }
  if (typeof value === "function") return "a function";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  return `${typeof value} ${String(value)}`;
}
