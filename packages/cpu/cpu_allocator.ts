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
  Device,
  DoubleFreeError,
  type HostMemory,
  OutOfMemoryError,
  Stat,
  type StatValues,
  validateAlignment,
  validateByteLength,
} from "@allot/core";
import {
  CpuHeap,
  type CpuHeapOptions,
  MAX_ALIGNMENT,
  type TypedArrayConstructor,
} from "./heap.ts";
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
    readonly heap: CpuHeap,
    readonly byteOffset: number,
    readonly byteLength: number,
  ) {}
}

/** Options of {@linkcode CpuAllocator}. */
export interface CpuAllocatorOptions extends CpuHeapOptions {
  /**
   * The heap to allocate from. When omitted, the allocator makes one over a
   * new resizable `ArrayBuffer` of `byteLength` bytes growing up to
   * `maxByteLength` (the other heap options apply to it).
   *
   * @default {a new heap}
   */
  heap?: CpuHeap;
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
}

/** Default initial heap length of a {@linkcode CpuAllocator}: 16 MiB. */
export const DEFAULT_HEAP_BYTE_LENGTH = 16 * 1024 * 1024;
/** Default growth limit of a {@linkcode CpuAllocator}'s own heap: 1 GiB. */
export const DEFAULT_HEAP_MAX_BYTE_LENGTH = 1024 * 1024 * 1024;

/**
 * The CPU allocator, like PyTorch's `DefaultCPUAllocator` over `alloc_cpu`:
 * it hands out {@linkcode DataPtr}s into one {@linkcode CpuHeap}, each
 * carrying (memory, byteOffset, byteLength) and the device `cpu`, aligned to
 * 64 bytes (16 on the mobile setting). Optional zero-fill, junk-fill and a
 * {@linkcode MemoryReporter}. The raw interface is enabled: `rawAllocate`
 * returns a {@linkcode CpuAllocation} that `rawDeallocate` frees.
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
 *   assert.equal(allocator.bytesInUse, 400);
 * }
 * assert.equal(allocator.bytesInUse, 0);
 * ```
 */
export class CpuAllocator extends AllocatorBase<HostMemory, CpuAllocation> {
  /** The device of every pointer. */
  readonly device: Device;
  /** The heap the allocator allocates from. */
  readonly heap: CpuHeap;
  #zeroFill: boolean;
  #junkFill: boolean;
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
    this.device = options.device ?? Device.cpu();
    if (options.heap !== undefined) {
      this.heap = options.heap;
    } else {
      const byteLength = options.byteLength ?? DEFAULT_HEAP_BYTE_LENGTH;
      this.heap = new CpuHeap(byteLength, {
        ...options,
        byteLength: undefined,
        maxByteLength: options.maxByteLength ??
          Math.max(byteLength, DEFAULT_HEAP_MAX_BYTE_LENGTH),
      });
    }
    this.#zeroFill = options.zeroFill ?? false;
    this.#junkFill = options.junkFill ?? false;
    this.#reporter = options.reporter;
    this.#deleter = (context) => this.#free(context);
  }

  /** Bytes handed out and not freed (as requested). */
  get bytesInUse(): number {
    return this.#bytes.current;
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
    const heap = this.heap;
    if (byteLength === 0) {
      validateByteLength(byteLength);
      if (alignment !== undefined) validateAlignment(alignment, MAX_ALIGNMENT);
      return new DataPtr(heap.memory, heap.byteOffset, 0, this.device);
    }
    let byteOffset: number;
    try {
      byteOffset = heap.alloc(byteLength, alignment);
    } catch (error) {
      if (error instanceof OutOfMemoryError) {
        this.#report("onOutOfMemory", byteLength, -1);
      }
      throw error;
    }
    if (this.#zeroFill) zeroFill(heap.buffer, byteOffset, byteLength);
    else if (this.#junkFill) junkFill(heap.buffer, byteOffset, byteLength);
    this.#bytes.increase(byteLength);
    if (this.#reporter !== undefined) {
      this.#report("onAllocate", byteLength, byteOffset);
    }
    return new DataPtr(heap.memory, byteOffset, byteLength, this.device, {
      context: new Allocation(heap, byteOffset, byteLength),
      deleter: this.#deleter,
    });
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
   */
  view<T>(
    ptr: DataPtr<HostMemory, CpuAllocation>,
    type: TypedArrayConstructor<T>,
  ): T {
    const byteOffset = ptr.byteOffset;
    return this.heap.view(
      byteOffset,
      Math.floor(ptr.byteLength / type.BYTES_PER_ELEMENT),
      type,
    );
  }

  #free(context: CpuAllocation): void {
    if (!(context instanceof Allocation) || context.heap !== this.heap) {
      throw new DoubleFreeError(
        `Cannot free ${
          context?.byteLength ?? "an"
        } bytes at byte offset ${context?.byteOffset}: the allocation belongs to another heap`,
      );
    }
    if (context.released) {
      throw new DoubleFreeError(
        `Cannot free ${context.byteLength} bytes at byte offset ${context.byteOffset}: already freed`,
      );
    }
    const { byteOffset, byteLength } = context;
    if (this.#junkFill) junkFill(this.heap.buffer, byteOffset, byteLength);
    this.heap.free(byteOffset);
    context.released = true;
    this.#bytes.decrease(byteLength);
    if (this.#reporter !== undefined) {
      this.#report("onFree", byteLength, byteOffset);
    }
  }

  #report(
    event: "onAllocate" | "onFree" | "onOutOfMemory",
    byteLength: number,
    byteOffset: number,
  ): void {
    const callback = this.#reporter?.[event];
    if (callback === undefined) return;
    try {
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
