/**
 * {@linkcode SharedHeapAllocator}: the core `Allocator` over a
 * {@linkcode SharedHeap}, with a reference count in shared memory in front
 * of every allocation, so that a `Buffer` crosses to another Worker as a
 * small descriptor and both sides hold the same bytes.
 *
 * @module
 */

import {
  AllocatorBase,
  DataPtr,
  describeValue,
  Device,
  DoubleFreeError,
  IntrusivePtr,
  InvalidArgumentError,
  UseAfterFreeError,
  validateByteLength,
} from "@allot/core";
import {
  Buffer,
  BufferView,
  type Dtype,
  dtypeInfo,
  Storage,
} from "@allot/storage";
import { ForeignHeapError, HeapClosedError } from "./errors.ts";
import {
  SHARED_MAX_BYTE_END,
  SharedHeap,
  type SharedHeapStats,
} from "./shared_heap.ts";
import type { MemorySnapshot, MemorySummaryOptions } from "@allot/core";
import { ownedBlocks } from "./_owned_blocks.ts";

/**
 * Bytes in front of every allocation: magic, reference count, length, heap,
 * the allocation's nonce and the bits of the descriptors in flight.
 */
export const SHARED_HEADER_BYTES: number = 64;
const BLOCK_MAGIC = 0x73686172; // "shar"
const W_MAGIC = 0, W_REFS = 1, W_LENGTH = 2, W_HEAP = 3, W_NONCE = 4;
/** First word of the in-flight bitmap: one bit per descriptor not yet taken. */
const W_TICKETS = 5;
const TICKET_WORDS = (SHARED_HEADER_BYTES >> 2) - W_TICKETS;
/** Most descriptors of one allocation in flight at once. */
export const SHARED_MAX_IN_FLIGHT: number = TICKET_WORDS * 32;

// Nonces of allocations: a xorshift stream seeded at random, so that a
// descriptor of a freed block never matches the block's next allocation.
let nonceState = crypto.getRandomValues(new Uint32Array(1))[0] | 1;
function nextNonce(): number {
  let x = nonceState;
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  nonceState = x;
  return (x & 0x7fffffff) | 1;
}

/**
 * A {@linkcode Buffer} in flight between Workers: post it with
 * `postMessage` (a few numbers and the shared memory, which is not copied).
 * It holds one reference to the bytes until
 * {@linkcode SharedHeapAllocator.receive} takes it over (or
 * {@linkcode SharedHeapAllocator.discard} drops it).
 *
 * @typeParam D The element type.
 */
export interface SharedBufferDescriptor<D extends Dtype = Dtype> {
  /** Always `"allot.shared-buffer"`. */
  readonly kind: "allot.shared-buffer";
  /** The heap the bytes live in. */
  readonly heapId: number;
  /** Absolute byte offset of the allocation's header. */
  readonly block: number;
  /** Bytes of the storage. */
  readonly byteLength: number;
  /** Element type. */
  readonly dtype: D;
  /** Shape of the view. */
  readonly shape: readonly number[];
  /** Strides of the view, in elements. */
  readonly strides: readonly number[];
  /** Offset of the view, in elements. */
  readonly offset: number;
  /** The allocation's nonce: a descriptor of a freed block is refused. */
  readonly nonce: number;
  /**
   * This descriptor's slot among the allocation's descriptors in flight:
   * receiving or discarding takes it, so a second receive is refused.
   */
  readonly ticket: number;
}

/**
 * The core `Allocator` over one handle of a {@linkcode SharedHeap}. Every
 * allocation carries a reference count in the shared memory (a 64-byte
 * header in front of the data): {@linkcode SharedHeapAllocator.share} adds a
 * reference and describes a `Buffer`; {@linkcode SharedHeapAllocator.receive}
 * in another Worker rebuilds a `Buffer` over the same bytes. Whichever side
 * releases last frees the block, exactly once (an atomic decrement decides).
 *
 * @example Hand a tensor to another handle without a copy
 * ```ts
 * import { SharedHeap, SharedHeapAllocator } from "@allot/threads";
 * import { Buffer } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * using heap = SharedHeap.create(4 << 20);
 * using workerHeap = SharedHeap.attach(heap.descriptor()); // in a Worker
 * const here = new SharedHeapAllocator(heap);
 * const there = new SharedHeapAllocator(workerHeap);
 *
 * const a = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3], allocator: here });
 * const message = here.share(a); // postMessage(message)
 * const b = there.receive(message); // in the Worker
 * assert.deepEqual([...b.toData()], [1, 2, 3, 4, 5, 6]);
 * b.set([0, 0], 9); // the same bytes
 * assert.equal(a.get([0, 0]), 9);
 * a.release();
 * assert.equal(heap.stats().allocations.current, 1); // b still holds it
 * b.release();
 * assert.equal(heap.stats().allocations.current, 0);
 * ```
 */
export class SharedHeapAllocator
  extends AllocatorBase<SharedArrayBuffer, number> {
  /** The device: host memory (`cpu:0`). */
  readonly device: Device = Device.cpu();
  #heap: SharedHeap;
  #i32: Int32Array;
  #deleter: (block: number) => void;

  /**
   * Wraps a handle of a shared heap (use the handle of the calling thread).
   *
   * @param heap The heap handle.
   */
  constructor(heap: SharedHeap) {
    super();
    if (!(heap instanceof SharedHeap)) {
      throw new InvalidArgumentError(
        `Invalid heap: must be a SharedHeap, received ${describeValue(heap)}`,
        { name: "heap", value: heap, limit: "SharedHeap" },
      );
    }
    this.#heap = heap;
    this.#i32 = new Int32Array(heap.buffer, 0, heap.buffer.byteLength >> 2);
    this.#deleter = (block) => this.#unref(block);
  }

  /** The heap handle. */
  get heap(): SharedHeap {
    return this.#heap;
  }

  /**
   * Allocates `byteLength` bytes (64-byte aligned) with one reference.
   *
   * @param byteLength Number of bytes.
   * @returns An owning pointer into the shared buffer; its release drops the
   * reference.
   * @throws {InvalidArgumentError} When `byteLength` is out of range.
   * @throws {OutOfMemoryError} When the heap is full.
   */
  allocate(byteLength: number): DataPtr<SharedArrayBuffer, number> {
    validateByteLength(
      byteLength,
      SHARED_MAX_BYTE_END - SHARED_HEADER_BYTES,
    );
    const block = this.#heap.alloc(byteLength + SHARED_HEADER_BYTES);
    // One owner per block: a raw heap.free of it is refused from now on.
    ownedBlocks.mark(this.#heap, block);
    const w = block >> 2, i32 = this.#i32;
    i32[w + W_LENGTH] = byteLength;
    i32[w + W_HEAP] = this.#heap.heapId;
    i32[w + W_NONCE] = nextNonce();
    i32.fill(0, w + W_TICKETS, w + W_TICKETS + TICKET_WORDS);
    Atomics.store(i32, w + W_REFS, 1);
    Atomics.store(i32, w + W_MAGIC, BLOCK_MAGIC);
    return this.#pointer(block, byteLength);
  }

  /**
   * The shared reference count of a buffer's storage, or of a descriptor's.
   *
   * @param of A buffer made by a `SharedHeapAllocator`, or a descriptor.
   * @returns The count (0 once freed).
   * @throws {InvalidArgumentError} For a value that is neither, or a
   * descriptor whose block is not in the heap's memory.
   * @throws {ForeignHeapError} For a buffer or descriptor of another heap.
   */
  refCount(of: Buffer | SharedBufferDescriptor): number {
    const block = of instanceof Buffer
      ? this.#blockOf(of, "count references of")
      : this.#checkDescriptor(_readOnce(of), "count references of", true);
    if (block < 0) return 0;
    return Atomics.load(this.#i32, (block >> 2) + W_REFS);
  }

  /**
   * Describes `buffer` for another Worker and adds one shared reference,
   * which the descriptor holds until it is received or discarded. The buffer
   * stays usable here.
   *
   * @typeParam D The element type.
   * @param buffer A buffer whose storage came from a `SharedHeapAllocator`
   * of the same heap.
   * @returns The descriptor, to post.
   * @throws {ForeignHeapError} When the storage is not in this heap.
   * @throws {UseAfterFreeError} When the buffer was released.
   * @throws {InvalidArgumentError} When `SHARED_MAX_IN_FLIGHT` descriptors
   * of this storage are in flight already (none received or discarded).
   */
  share<D extends Dtype>(buffer: Buffer<D>): SharedBufferDescriptor<D> {
    if (!(buffer instanceof Buffer)) {
      throw new InvalidArgumentError(
        `Cannot share ${describeValue(buffer)}: not a Buffer`,
        { name: "buffer", value: buffer, limit: "Buffer" },
      );
    }
    if (buffer.released) {
      throw new UseAfterFreeError("Cannot share a released buffer");
    }
    const block = this.#blockOf(buffer, "share");
    const ticket = this.#takeTicket(block);
    Atomics.add(this.#i32, (block >> 2) + W_REFS, 1);
    const view = buffer.view;
    return {
      kind: "allot.shared-buffer",
      heapId: this.#heap.heapId,
      block,
      byteLength: buffer.storage.byteLength,
      dtype: buffer.dtype,
      shape: view.shape,
      strides: view.strides,
      offset: view.offset,
      nonce: this.#i32[(block >> 2) + W_NONCE],
      ticket,
    };
  }

  /**
   * Rebuilds a buffer over the bytes a descriptor names, taking over the
   * descriptor's reference (receive each descriptor once).
   *
   * @typeParam D The element type.
   * @param descriptor What {@linkcode SharedHeapAllocator.share} returned.
   * @returns A buffer over the same bytes; release it like any buffer.
   * @throws {ForeignHeapError} When the descriptor names another heap.
   * @throws {UseAfterFreeError} When the bytes were already freed (even if
   * the block was allocated again since).
   * @throws {DoubleFreeError} When the descriptor was already received or
   * discarded.
   * @throws {InvalidArgumentError} When the descriptor is malformed.
   * @throws {ShapeError} When the view does not fit the storage.
   * @throws {HeapClosedError} When this allocator's handle was detached or
   * the heap closed (the descriptor stays unreceived).
   */
  receive<D extends Dtype>(
    descriptor: SharedBufferDescriptor<D>,
  ): Buffer<D> {
    descriptor = _readOnce(descriptor);
    const block = this.#checkDescriptor(descriptor, "receive");
    this.#checkOpen("receive");
    dtypeInfo(descriptor.dtype);
    for (const name of ["shape", "strides"] as const) {
      const value = descriptor[name];
      if (!Array.isArray(value)) {
        throw new InvalidArgumentError(
          `Cannot receive: ${name} must be an array, received ${
            describeValue(value)
          }`,
          { name, value, limit: "array" },
        );
      }
    }
    const view = new BufferView([...descriptor.shape], {
      strides: [...descriptor.strides],
      offset: descriptor.offset,
    });
    this.#claimTicket(block, descriptor, "receive");
    const ptr = this.#pointer(block, descriptor.byteLength);
    try {
      const storage = IntrusivePtr.make(new Storage(ptr, { allocator: this }));
      return new Buffer(storage, { dtype: descriptor.dtype, view });
    } catch (error) {
      // The descriptor's reference stays with the caller: undo ours and
      // give its ticket back, so it can still be received or discarded.
      ptr.releaseContext();
      Atomics.or(
        this.#i32,
        (block >> 2) + W_TICKETS + (descriptor.ticket >> 5),
        1 << (descriptor.ticket & 31),
      );
      throw error;
    }
  }

  /**
   * Drops a descriptor's reference without making a buffer (a message that
   * will never be received). The last reference frees the bytes.
   *
   * @param descriptor The descriptor.
   * @throws {ForeignHeapError} When it names another heap.
   * @throws {UseAfterFreeError} When the bytes were already freed.
   * @throws {DoubleFreeError} When the descriptor was already received or
   * discarded.
   * @throws {HeapClosedError} When this allocator's handle was detached or
   * the heap closed (the descriptor keeps its reference).
   */
  discard(descriptor: SharedBufferDescriptor): void {
    descriptor = _readOnce(descriptor);
    const block = this.#checkDescriptor(descriptor, "discard");
    this.#checkOpen("discard");
    this.#claimTicket(block, descriptor, "discard");
    this.#unref(block);
  }

  /** A free slot in the block's in-flight bitmap, set (compare-exchange). */
  #takeTicket(block: number): number {
    const i32 = this.#i32, w = (block >> 2) + W_TICKETS;
    for (let k = 0; k < TICKET_WORDS; k++) {
      for (;;) {
        const bits = Atomics.load(i32, w + k);
        if (bits === -1) break;
        const bit = ~bits & (bits + 1);
        if (Atomics.compareExchange(i32, w + k, bits, bits | bit) === bits) {
          return k * 32 + (31 - Math.clz32(bit));
        }
      }
    }
    throw new InvalidArgumentError(
      `Cannot share shared block ${block}: ${SHARED_MAX_IN_FLIGHT} descriptors of it are in flight (receive or discard some first)`,
      {
        name: "descriptors in flight",
        value: SHARED_MAX_IN_FLIGHT + 1,
        limit: SHARED_MAX_IN_FLIGHT,
      },
    );
  }

  /** Clears the descriptor's slot; refuses a slot taken already. */
  #claimTicket(
    block: number,
    d: SharedBufferDescriptor,
    what: string,
  ): void {
    const w = (block >> 2) + W_TICKETS + (d.ticket >> 5);
    const bit = 1 << (d.ticket & 31);
    if ((Atomics.and(this.#i32, w, ~bit) & bit) === 0) {
      throw new DoubleFreeError(
        `Cannot ${what} the descriptor of shared block ${block} (ticket ${d.ticket}): it was already received or discarded`,
      );
    }
  }

  #pointer(
    block: number,
    byteLength: number,
  ): DataPtr<SharedArrayBuffer, number> {
    return new DataPtr(
      this.#heap.buffer,
      block + SHARED_HEADER_BYTES,
      byteLength,
      this.device,
      { context: block, deleter: this.#deleter },
    );
  }

  // A handle that cannot free refuses before the count drops: dropping it
  // and then failing to free would leak the block with no reference left.
  #checkOpen(what: string): void {
    if (!this.#heap.isOpen) {
      throw new HeapClosedError(
        `Cannot ${what} a shared buffer through a detached handle or a closed heap (heap ${this.#heap.heapId}): its shared reference count is unchanged`,
      );
    }
  }

  #unref(block: number): void {
    this.#checkOpen("release");
    const w = (block >> 2) + W_REFS;
    const before = Atomics.sub(this.#i32, w, 1);
    if (before === 1) {
      Atomics.store(this.#i32, (block >> 2) + W_MAGIC, 0);
      ownedBlocks.free(this.#heap, block);
    } else if (before <= 0) {
      Atomics.add(this.#i32, w, 1);
      throw new DoubleFreeError(
        `Cannot release shared block ${block}: its reference count was ${before}`,
      );
    }
  }

  #blockOf(buffer: Buffer, what: string): number {
    const data = buffer.storage.data;
    const block = data.byteOffset - SHARED_HEADER_BYTES;
    if (
      data.memory !== this.#heap.buffer || block < 0 ||
      Atomics.load(this.#i32, block >> 2) !== BLOCK_MAGIC ||
      this.#i32[(block >> 2) + W_HEAP] !== this.#heap.heapId
    ) {
      throw new ForeignHeapError(
        `Cannot ${what} ${buffer}: its storage was not allocated by a SharedHeapAllocator of heap ${this.#heap.heapId}`,
      );
    }
    return block;
  }

  // The block of a descriptor of this heap; -1 for a freed one when
  // `freedOk` (refCount), else UseAfterFreeError.
  #checkDescriptor(
    d: SharedBufferDescriptor,
    what: string,
    freedOk = false,
  ): number {
    if (
      typeof d !== "object" || d === null || d.kind !== "allot.shared-buffer"
    ) {
      throw new InvalidArgumentError(
        `Cannot ${what}: not a shared buffer descriptor, received ${
          describeValue(d)
        }`,
        { name: "descriptor", value: d, limit: "allot.shared-buffer" },
      );
    }
    if (d.heapId !== this.#heap.heapId) {
      throw new ForeignHeapError(
        `Cannot ${what} a buffer of heap ${
          describeValue(d.heapId)
        } in heap ${this.#heap.heapId}`,
      );
    }
    const block = d.block, end = this.#heap.buffer.byteLength;
    if (
      !Number.isSafeInteger(block) || block < 0 || block % 64 ||
      block + SHARED_HEADER_BYTES > end
    ) {
      throw new InvalidArgumentError(
        `Cannot ${what}: block ${
          describeValue(block)
        } is not in the heap's memory [0, ${end})`,
        { name: "block", value: block, limit: end },
      );
    }
    if (!Number.isSafeInteger(d.nonce)) {
      throw new InvalidArgumentError(
        `Cannot ${what}: nonce must be an integer, received ${
          describeValue(d.nonce)
        } (a descriptor made by share())`,
        { name: "nonce", value: d.nonce, limit: "integer" },
      );
    }
    const w = block >> 2, i32 = this.#i32;
    if (
      Atomics.load(i32, w + W_MAGIC) === BLOCK_MAGIC &&
      i32[w + W_HEAP] !== this.#heap.heapId
    ) {
      throw new ForeignHeapError(
        `Cannot ${what} shared block ${block}: it belongs to heap ${
          i32[w + W_HEAP]
        }, not heap ${this.#heap.heapId}`,
      );
    }
    if (
      Atomics.load(i32, w + W_MAGIC) !== BLOCK_MAGIC ||
      Atomics.load(i32, w + W_REFS) <= 0 ||
      i32[w + W_NONCE] !== d.nonce
    ) {
      if (freedOk) return -1;
      throw new UseAfterFreeError(
        `Cannot ${what} shared block ${block}: it was already freed`,
      );
    }
    if (i32[w + W_LENGTH] !== d.byteLength) {
      throw new InvalidArgumentError(
        `Cannot ${what} shared block ${block}: byteLength must be ${
          i32[w + W_LENGTH]
        }, received ${describeValue(d.byteLength)}`,
        { name: "byteLength", value: d.byteLength, limit: i32[w + W_LENGTH] },
      );
    }
    const ticket = d.ticket;
    if (
      !freedOk &&
      !(Number.isInteger(ticket) && ticket >= 0 &&
        ticket < SHARED_MAX_IN_FLIGHT)
    ) {
      throw new InvalidArgumentError(
        `Cannot ${what} shared block ${block}: ticket must be an integer in [0, ${SHARED_MAX_IN_FLIGHT}), received ${
          describeValue(ticket)
        }`,
        { name: "ticket", value: ticket, limit: SHARED_MAX_IN_FLIGHT },
      );
    }
    return block;
  }

  // ---- the allocator contract's verbs (issue #15) ----

  /**
   * The heap's figures (the same record as `heap.stats()`).
   *
   * @returns A plain copy.
   */
  stats(): SharedHeapStats {
    return this.#heap.stats();
  }

  /**
   * A text table of the heap's figures (see `SharedHeap.memorySummary`).
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return this.#heap.memorySummary(options);
  }

  /**
   * Checks the heap's invariants (see `SharedHeap.validate`).
   *
   * @throws {Error} Naming the broken invariant.
   */
  validate(): void {
    this.#heap.validate();
  }

  /**
   * Gives this thread's cached page spans back to the heap's shared core
   * (see `SharedHeap.emptyCache`).
   */
  emptyCache(): void {
    this.#heap.emptyCache();
  }

  /**
   * Sets every peak of the heap's figures to its current value (see
   * `SharedHeap.resetPeakStats`).
   */
  resetPeakStats(): void {
    this.#heap.resetPeakStats();
  }

  /**
   * Sets `allocated` and `freed` of the heap's figures to zero (see
   * `SharedHeap.resetAccumulatedStats`).
   */
  resetAccumulatedStats(): void {
    this.#heap.resetAccumulatedStats();
  }

  /**
   * The heap's picture (see `SharedHeap.snapshot`): each of this
   * allocator's blocks is a live block 64 bytes longer than its pointer
   * (the shared reference count in front).
   *
   * @returns The snapshot (plain data).
   */
  snapshot(): MemorySnapshot {
    return this.#heap.snapshot();
  }
}

// A descriptor's fields, each read once: what is checked is what is used (a
// getter answering a valid byteLength or ticket to the check and another
// value later would view past the block or clear a bit elsewhere in the
// memory). Anything but an object is returned as it is, for the checks to
// refuse.
function _readOnce<T>(d: T): T {
  if (typeof d !== "object" || d === null) return d;
  const {
    kind,
    heapId,
    block,
    byteLength,
    dtype,
    shape,
    strides,
    offset,
    nonce,
    ticket,
  } = d as unknown as SharedBufferDescriptor;
  return {
    kind,
    heapId,
    block,
    byteLength,
    dtype,
    shape,
    strides,
    offset,
    nonce,
    ticket,
  } as T;
}
