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
import { ForeignHeapError } from "./errors.ts";
import { SHARED_MAX_BYTE_END, SharedHeap } from "./shared_heap.ts";

/** Bytes in front of every allocation: magic, reference count, length, heap. */
export const SHARED_HEADER_BYTES: number = 64;
const BLOCK_MAGIC = 0x73686172; // "shar"
const W_MAGIC = 0, W_REFS = 1, W_LENGTH = 2, W_HEAP = 3;

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
 * assert.equal(heap.stats().allocationCount, 1); // b still holds it
 * b.release();
 * assert.equal(heap.stats().allocationCount, 0);
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
    const w = block >> 2, i32 = this.#i32;
    i32[w + W_LENGTH] = byteLength;
    i32[w + W_HEAP] = this.#heap.heapId;
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
      : this.#checkDescriptor(of, "count references of", true);
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
   * @throws {UseAfterFreeError} When the bytes were already freed.
   * @throws {InvalidArgumentError} When the descriptor is malformed.
   * @throws {ShapeError} When the view does not fit the storage.
   */
  receive<D extends Dtype>(
    descriptor: SharedBufferDescriptor<D>,
  ): Buffer<D> {
    const block = this.#checkDescriptor(descriptor, "receive");
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
    const ptr = this.#pointer(block, descriptor.byteLength);
    const storage = IntrusivePtr.make(new Storage(ptr, { allocator: this }));
    try {
      return new Buffer(storage, { dtype: descriptor.dtype, view });
    } catch (error) {
      // The descriptor's reference stays with the caller: undo ours.
      ptr.releaseContext();
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
   */
  discard(descriptor: SharedBufferDescriptor): void {
    this.#unref(this.#checkDescriptor(descriptor, "discard"));
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

  #unref(block: number): void {
    const w = (block >> 2) + W_REFS;
    const before = Atomics.sub(this.#i32, w, 1);
    if (before === 1) {
      Atomics.store(this.#i32, (block >> 2) + W_MAGIC, 0);
      this.#heap.free(block);
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
    const w = block >> 2, i32 = this.#i32;
    if (
      Atomics.load(i32, w + W_MAGIC) !== BLOCK_MAGIC ||
      Atomics.load(i32, w + W_REFS) <= 0
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
    return block;
  }
}
