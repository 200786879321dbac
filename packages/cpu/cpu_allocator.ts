/**
 * {@linkcode CpuAllocator}: the core `Allocator` interface over a
 * {@linkcode CpuHeap}.
 *
 * @module
 */

import {
  AllocatorBase,
  DataPtr,
  type Deleter,
  describeValue,
  type Device,
  DoubleFreeError,
  hostBuffer,
  type HostMemory,
  InvalidArgumentError,
  optionOr,
  OutOfMemoryError,
  Stat,
  type StatValues,
  UseAfterFreeError,
  validateAlignment,
  validateByteLength,
} from "@allot/core";
import {
  formatStatsSummary,
  type MemorySummaryOptions,
  validateOptionKeys,
} from "@allot/core";
import {
  validateDevice,
  validateFlags,
  validateOptionalObject,
  validateOptions,
} from "./_options.ts";
import { checkViewSpan, elementBytes, isBuiltInView } from "./_view.ts";
import {
  CpuHeap,
  type CpuHeapOptions,
  MAX_ALIGNMENT,
  type TypedArrayConstructor,
} from "./heap.ts";
import { ownedOffsets } from "./_owned_offsets.ts";
import type { MemoryReporter } from "./memory_reporter.ts";
import { junkFill, zeroFill } from "./_fill.ts";

/** The deleter context of a {@linkcode CpuAllocator} pointer. */
export interface CpuAllocation {
  /** The heap the allocation lives in. */
  readonly heap: CpuHeap;
  /** Byte offset in the heap's memory. */
  readonly byteOffset: number;
  /** Bytes requested. */
  readonly byteLength: number;
  /** Whether the allocation was freed. */
  readonly released: boolean;
}

class Allocation implements CpuAllocation {
  released = false;
  constructor(
    readonly owner: CpuAllocator,
    readonly heap: CpuHeap,
    readonly byteOffset: number,
    readonly byteLength: number,
  ) {}
}

/** Options of {@linkcode CpuAllocator}. */
export interface CpuAllocatorOptions
  extends Omit<CpuHeapOptions, "byteOffset" | "maxByteLength"> {
  /**
   * The one heap to allocate from (it grows only as its own options allow).
   * When omitted, the allocator makes its own heaps: a first one of
   * `byteLength` bytes, then, when a request does not fit, more heaps of
   * twice the size (or the request's size), each a plain `ArrayBuffer` (or
   * `SharedArrayBuffer` with `shared`), until `maxByteLength` bytes in all.
   *
   * @default {its own heaps}
   */
  heap?: CpuHeap;
  /**
   * Most bytes the allocator's own heaps may hold in all (ignored with
   * `heap`).
   *
   * @default {Infinity: until the engine refuses a buffer}
   */
  maxByteLength?: number;
  /**
   * Fill fresh allocations with zeros (PyTorch's `zero_fill`).
   *
   * @default {false}
   */
  zeroFill?: boolean;
  /**
   * Fill fresh allocations (unless `zeroFill`) and freed bytes with the junk
   * pattern `0x7fedbeef` (a NaN as `f32`), so reads of uninitialised or freed
   * memory show up in tests.
   *
   * @default {false}
   */
  junkFill?: boolean;
  /**
   * Receives allocate, free and out-of-memory events.
   *
   * @default {undefined}
   */
  reporter?: MemoryReporter;
  /**
   * The device the pointers report.
   *
   * @default {Device.cpu()}
   */
  device?: Device;
  /**
   * Debug mode for hunting a bug: every heap checks all its invariants after
   * each call that changes it, freed bytes are junk-filled (as with
   * `junkFill`), and a pointer's view is refused once it was released. Views
   * made before a free cannot be detached (they share the heap's buffer):
   * they read junk.
   *
   * @default {false}
   */
  strict?: boolean;
}

/** Default initial heap length of a {@linkcode CpuAllocator}: 16 MiB. */
export const DEFAULT_HEAP_BYTE_LENGTH: number = 16 * 1024 * 1024;
const MAX_CHUNK_BYTE_LENGTH = 1024 * 1024 * 1024;

/**
 * The CPU allocator, like PyTorch's `DefaultCPUAllocator` over `alloc_cpu`:
 * it hands out {@linkcode DataPtr}s into {@linkcode CpuHeap}s, each carrying
 * (memory, byteOffset, byteLength) and the device `cpu`, aligned to 64 bytes
 * (16 on the mobile setting). Optional zero-fill, junk-fill and a
 * {@linkcode MemoryReporter}. The raw interface is enabled: `rawAllocate`
 * returns a {@linkcode CpuAllocation} that `rawDeallocate` frees.
 *
 * Unless given one heap, it grows by adding heaps (never by moving one), so
 * every pointer's memory stays a plain `ArrayBuffer` that V8 makes fast
 * views of, and no pointer ever moves.
 *
 * @example Allocate, view and release
 * ```ts
 * import { CpuAllocator } from "@allot/cpu";
 * import assert from "node:assert/strict";
 *
 * const allocator = new CpuAllocator({ byteLength: 1 << 20, zeroFill: true });
 * {
 *   using ptr = allocator.allocate(400);
 *   assert.equal(ptr.byteOffset % 64, 0);
 *   const floats = allocator.view(ptr, Float32Array);
 *   assert.equal(floats.length, 100);
 *   floats[0] = 1;
 *   assert.equal(allocator.allocatedBytes, 400);
 * }
 * assert.equal(allocator.allocatedBytes, 0);
 * ```
 */
export class CpuAllocator extends AllocatorBase<HostMemory, CpuAllocation> {
  /** The device of every pointer. */
  readonly device: Device;
  /** Most bytes the allocator's own heaps may hold in all. */
  readonly maxByteLength: number;
  #heaps: CpuHeap[];
  #own: boolean;
  #heapOptions: CpuHeapOptions;
  #zeroFill: boolean;
  #junkFill: boolean;
  #strict: boolean;
  #reporter: MemoryReporter | undefined;
  #bytes = new Stat();
  #deleter: Deleter<CpuAllocation>;

  /**
   * Creates a CPU allocator.
   *
   * @param options Heap, fill and reporting options.
   * @throws {InvalidArgumentError} For bad heap options.
   */
  constructor(options: CpuAllocatorOptions = {}) {
    super();
    validateOptions(options);
    validateOptionKeys(options, [
      "alignment",
      "mobile",
      "byteLength",
      "shared",
      "placement",
      "heap",
      "maxByteLength",
      "zeroFill",
      "junkFill",
      "reporter",
      "device",
      "strict",
    ], "CpuAllocator");
    const flags = validateFlags(
      options,
      "mobile",
      "shared",
      "strict",
      "zeroFill",
      "junkFill",
    );
    this.device = validateDevice(options.device);
    this.#strict = flags.strict;
    this.#heapOptions = {
      alignment: options.alignment,
      mobile: flags.mobile,
      shared: flags.shared,
      placement: options.placement,
      strict: this.#strict,
    };
    if (options.heap !== undefined) {
      if (!(options.heap instanceof CpuHeap)) {
        throw new InvalidArgumentError(
          `Invalid heap: must be a CpuHeap, received ${
            describeValue(options.heap)
          }`,
          { name: "heap", value: options.heap },
        );
      }
      this.#heaps = [options.heap];
      this.#own = false;
      this.maxByteLength = options.heap.maxByteLength;
    } else {
      const byteLength = validateByteLength(
        optionOr(options.byteLength, DEFAULT_HEAP_BYTE_LENGTH),
      );
      const max = optionOr(options.maxByteLength, Infinity);
      if (max !== Infinity) validateByteLength(max, undefined, "maxByteLength");
      if (!(max >= byteLength)) {
        throw new InvalidArgumentError(
          `Invalid maxByteLength: must be at least the byteLength ${byteLength}, received ${max}`,
          { name: "maxByteLength", value: max, limit: byteLength },
        );
      }
      this.maxByteLength = max;
      this.#heaps = [new CpuHeap(byteLength, this.#heapOptions)];
      this.#own = true;
    }
    this.#zeroFill = flags.zeroFill;
    this.#junkFill = flags.junkFill || this.#strict;
    this.#reporter = validateOptionalObject(options.reporter, "reporter");
    this.#deleter = (context) => this.#free(context);
  }

  /** The first heap (the only one when the allocator was given a heap). */
  get heap(): CpuHeap {
    return this.#heaps[0];
  }

  /** Every heap of the allocator, oldest first (a copy, taken at each read). */
  get heaps(): readonly CpuHeap[] {
    return this.#heaps.slice();
  }

  /** Bytes held by the allocator's heaps. */
  get reservedBytes(): number {
    let total = 0;
    for (const heap of this.#heaps) total += heap.byteLength;
    return total;
  }

  /**
   * Gives back heaps (other than the first) that hold no allocation.
   *
   * @returns Bytes given back.
   */
  trim(): number {
    let freed = 0;
    this.#heaps = this.#heaps.filter((heap, i) => {
      if (i === 0 || !this.#own || heap.allocationCount > 0) return true;
      freed += heap.byteLength;
      return false;
    });
    return freed;
  }

  /** Bytes handed out and not freed (as requested). */
  get allocatedBytes(): number {
    return this.#bytes.current;
  }

  /**
   * Same as `allocatedBytes`.
   *
   * @deprecated Use `allocatedBytes` (one name per figure across allot); removed in the next minor version.
   */
  get bytesInUse(): number {
    return this.allocatedBytes;
  }

  /**
   * Requested bytes: current, peak, allocated and freed.
   *
   * @returns A plain copy.
   */
  stats(): StatValues {
    return this.#bytes.values();
  }

  /**
   * Allocates `byteLength` bytes in the heap.
   *
   * @param byteLength Number of bytes; 0 gives a pointer that owns nothing.
   * @param alignment A power of two up to 65536; the heap's alignment when
   * omitted.
   * @returns An owning pointer into the heap's memory.
   * @throws {InvalidArgumentError} For a bad length or alignment.
   * @throws {OutOfMemoryError} When the heap cannot serve the request.
   */
  allocate(
    byteLength: number,
    alignment?: number,
  ): DataPtr<HostMemory, CpuAllocation> {
    const heaps = this.#heaps;
    if (byteLength === 0) {
      validateByteLength(byteLength);
      if (alignment !== undefined) validateAlignment(alignment, MAX_ALIGNMENT);
      return new DataPtr(heaps[0].memory, heaps[0].byteOffset, 0, this.device);
    }
    // Newest heap first: it is the one with room, usually.
    let heap = heaps[heaps.length - 1];
    let byteOffset = heap.tryAlloc(byteLength, alignment);
    for (let i = heaps.length - 2; byteOffset === undefined && i >= 0; i--) {
      heap = heaps[i];
      byteOffset = heap.tryAlloc(byteLength, alignment);
    }
    if (byteOffset === undefined) {
      const added = this.#addHeap(byteLength, alignment);
      if (added !== undefined) {
        heap = added;
        byteOffset = heap.tryAlloc(byteLength, alignment);
      }
      if (byteOffset === undefined) {
        this.#report("onOutOfMemory", byteLength, -1);
        throw this.#outOfMemory(byteLength, alignment);
      }
    }
    ownedOffsets.mark(heap, byteOffset);
    const buffer = heap.buffer;
    if (this.#zeroFill) zeroFill(buffer, byteOffset, byteLength);
    else if (this.#junkFill) junkFill(buffer, byteOffset, byteLength);
    this.#bytes.increase(byteLength);
    if (this.#reporter !== undefined) {
      this.#report("onAllocate", byteLength, byteOffset);
    }
    return new DataPtr(heap.memory, byteOffset, byteLength, this.device, {
      context: new Allocation(this, heap, byteOffset, byteLength),
      deleter: this.#deleter,
    });
  }

  #addHeap(byteLength: number, alignment?: number): CpuHeap | undefined {
    if (!this.#own) return undefined;
    const last = this.#heaps[this.#heaps.length - 1];
    const g = last.alignment;
    const need = Math.ceil(byteLength / g) * g +
      Math.max(0, (alignment ?? g) - g);
    const room = this.maxByteLength - this.reservedBytes;
    const size = Math.min(
      Math.max(need, Math.min(last.byteLength * 2, MAX_CHUNK_BYTE_LENGTH)),
      room,
    );
    if (size < need) return undefined;
    let heap: CpuHeap;
    try {
      heap = new CpuHeap(size, this.#heapOptions);
    } catch {
      return undefined; // the engine refused the buffer
    }
    this.#heaps.push(heap);
    return heap;
  }

  #outOfMemory(byteLength: number, alignment?: number): OutOfMemoryError {
    let free = 0, largest = 0, used = 0;
    for (const heap of this.#heaps) {
      free += heap.freeBytes;
      used += heap.allocatedBytes;
      largest = Math.max(largest, heap.largestFreeBytes);
    }
    const reserved = this.reservedBytes;
    return new OutOfMemoryError(
      `Cannot allocate ${byteLength} bytes${
        alignment !== undefined ? ` aligned to ${alignment}` : ""
      }: ${free} bytes free, largest free region ${largest} bytes, ${used} of ${reserved} bytes in use in ${this.#heaps.length} heaps (at most ${this.maxByteLength} bytes)`,
      {
        requestedBytes: byteLength,
        capacityBytes: this.maxByteLength,
        freeBytes: free,
        largestFreeBytes: largest,
        allocatedBytes: used,
        reservedBytes: reserved,
      },
    );
  }

  /**
   * The deleter of this allocator's contexts.
   *
   * @returns The deleter `rawDeallocate` calls.
   */
  override rawDeleter(): Deleter<CpuAllocation> {
    return this.#deleter;
  }

  /**
   * A typed-array view of a pointer's bytes over the heap's current buffer.
   * For a `WebAssembly.Memory` heap, make views again after it grows.
   *
   * @typeParam T The typed array type.
   * @param ptr A live pointer of this allocator.
   * @param type The typed-array constructor, such as `Float32Array`.
   * @returns A view of `floor(byteLength / BYTES_PER_ELEMENT)` elements.
   * @throws {UseAfterFreeError} When the pointer was released.
   * @throws {InvalidArgumentError} When `ptr` is not a pointer of this
   * allocator, or `type` is not a constructor or makes a view that is not of
   * the pointer's bytes.
   */
  view<T>(
    ptr: DataPtr<HostMemory, CpuAllocation>,
    type: TypedArrayConstructor<T>,
  ): T {
    if (!DataPtr.isDataPtr(ptr)) {
      throw new InvalidArgumentError(
        `Cannot view ${
          describeValue(ptr)
        }: expected a DataPtr of this allocator from allocate()`,
        { name: "ptr", value: ptr },
      );
    }
    // The place comes from the allocation record, not from the pointer's
    // getters (a subclass may override them): a view never reaches past a
    // live allocation of this allocator.
    const at = ptr.byteOffset; // a released pointer: UseAfterFreeError
    const context = ptr.getContext();
    if (
      context instanceof Allocation && context.owner === this &&
      !context.released && !context.heap.disposed
    ) {
      return this.#viewOf(
        context.heap.memory,
        context.byteOffset,
        context.byteLength,
        type,
        context,
      );
    }
    if (context instanceof Allocation && context.owner === this) {
      throw new UseAfterFreeError(
        `Cannot view ${context.byteLength} bytes at byte offset ${context.byteOffset}: ${
          context.released
            ? "the allocation was freed (its deleter was called outside the pointer's release())"
            : "its heap was disposed (the bytes may belong to another heap now)"
        }`,
      );
    }
    if (context === null && this.#isEmpty(ptr)) {
      // allocate(0): no context, no bytes
      return this.#viewOf(this.#heaps[0].memory, at, 0, type, undefined);
    }
    throw new InvalidArgumentError(
      `Cannot view ${
        describeValue(ptr)
      }: expected a DataPtr of this allocator from allocate()`,
      { name: "ptr", value: ptr },
    );
  }

  #viewOf<T>(
    memory: HostMemory,
    byteOffset: number,
    byteLength: number,
    type: TypedArrayConstructor<T>,
    allocation: Allocation | undefined,
  ): T {
    const buffer = hostBuffer(memory);
    const length = Math.floor(byteLength / elementBytes(type));
    let view: T;
    try {
      view = new type(buffer, byteOffset, length);
    } catch (error) {
      throw this.#viewError(error, buffer, byteOffset, byteLength);
    }
    if (!isBuiltInView(type)) {
      // The type is the caller's: it may lie about its element size, ignore
      // its arguments or release the pointer.
      if (allocation?.released) {
        throw new UseAfterFreeError(
          `Cannot view byte offset ${byteOffset}: the view type released the pointer`,
        );
      }
      checkViewSpan(view, type, buffer, byteOffset, byteLength);
    }
    return view;
  }

  // The memory no longer holds the bytes (detached, transferred or shrunk
  // outside the allocator): a typed error; else the error of the
  // constructor itself.
  #viewError(
    error: unknown,
    buffer: ArrayBuffer | SharedArrayBuffer,
    byteOffset: number,
    byteLength: number,
  ): unknown {
    if (byteOffset + byteLength <= buffer.byteLength) return error;
    return new UseAfterFreeError(
      `Cannot view byte offset ${byteOffset}: the memory holds ${buffer.byteLength} bytes (detached, transferred or shrunk outside the allocator), the pointer needs bytes up to ${
        byteOffset + byteLength
      }`,
      { cause: error },
    );
  }

  // A zero-byte pointer of allocate(0) (no context): in the memory of the
  // first heap.
  #isEmpty(ptr: DataPtr<HostMemory, CpuAllocation>): boolean {
    return ptr.memory === this.#heaps[0].memory;
  }

  #free(context: CpuAllocation): void {
    if (!(context instanceof Allocation)) {
      throw new DoubleFreeError(
        `Cannot free ${
          describeValue(context)
        }: not an allocation of a CpuAllocator (a context from allocate() or rawAllocate())`,
      );
    }
    if (context.owner !== this) {
      throw new DoubleFreeError(
        `Cannot free ${context.byteLength} bytes at byte offset ${context.byteOffset}: the allocation belongs to another allocator`,
      );
    }
    if (context.released) {
      throw new DoubleFreeError(
        `Cannot free ${context.byteLength} bytes at byte offset ${context.byteOffset}: already freed`,
      );
    }
    const { byteOffset, byteLength } = context;
    const heap = context.heap;
    // Free first: a heap that refuses (disposed, its bytes now another
    // heap's) must not get junk written over them.
    const marked = ownedOffsets.unmark(heap, byteOffset);
    try {
      heap.free(byteOffset);
    } catch (error) {
      if (marked) ownedOffsets.mark(heap, byteOffset); // nothing changes
      throw error;
    }
    if (this.#junkFill) junkFill(heap.buffer, byteOffset, byteLength);
    context.released = true;
    this.#bytes.decrease(byteLength);
    if (this.#reporter !== undefined) {
      this.#report("onFree", byteLength, byteOffset);
    }
  }

  /** Sets the peak of {@linkcode CpuAllocator.stats} to its current value. */
  resetPeakStats(): void {
    this.#bytes.resetPeak();
  }

  /**
   * Sets the `allocated` and `freed` totals of {@linkcode CpuAllocator.stats} to
   * 0; `current` and `peak` stay.
   */
  resetAccumulatedStats(): void {
    this.#bytes.resetAccumulated();
  }

  /**
   * A text table of the stats, in the layout of `torch.cuda.memory_summary()`.
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return formatStatsSummary(
      { requestedBytes: this.stats(), reservedBytes: this.reservedBytes },
      options,
      "CpuAllocator",
    );
  }

  /**
   * Gives back heaps (other than the first) that hold no allocation: the
   * contract's name of {@linkcode CpuAllocator.trim}.
   *
   * @returns Bytes given back.
   */
  emptyCache(): number {
    return this.trim();
  }

  /**
   * Checks every heap's invariants and that the bytes in use equal the sum
   * over the heaps' live blocks.
   *
   * @throws {AllotError} Naming the first broken invariant.
   */
  validate(): void {
    for (const heap of this.#heaps) heap.validate();
  }

  #report(
    event: "onAllocate" | "onFree" | "onOutOfMemory",
    byteLength: number,
    byteOffset: number,
  ): void {
    if (this.#reporter === undefined) return;
    try {
      // Read inside the try: a throwing getter must not undo what was done.
      const callback = this.#reporter[event];
      if (callback === undefined) return;
      callback.call(this.#reporter, {
        device: this.device,
        byteLength,
        byteOffset,
        currentBytes: this.#bytes.current,
        peakBytes: this.#bytes.peak,
      });
    } catch {
      // A reporter must not change what the allocator did.
    }
  }
}
