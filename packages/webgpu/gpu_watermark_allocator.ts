/**
 * {@linkcode GpuWatermarkAllocator}: `@allot/watermark`'s MPS-style
 * allocator on a {@linkcode GpuSegmentSource}, with the device's queue as
 * the stream.
 *
 * @module
 */

import {
  _checkDevice,
  _checkOptions,
  _checkReuse,
  _checkStrict,
} from "./_validate_gpu.ts";
import {
  type Device,
  type MemorySummaryOptions,
  optionOr,
  OutOfMemoryError,
  type SynchronizeOptions,
  validateByteLength,
  validateOptionKeys,
  validateSynchronizeOptions,
} from "@allot/core";
import {
  WATERMARK_OPTION_KEYS,
  WatermarkAllocator,
  type WatermarkAllocatorOptions,
  type WatermarkBuffer,
  type WatermarkSnapshot,
  type WatermarkStats,
} from "@allot/watermark";
import { _assertAlive, _deviceState } from "./_device_state.ts";
import type { GpuAllocation, GpuAllocationOwner } from "./gpu_allocation.ts";
import { _makeAllocation } from "./_make_allocation.ts";
import { GpuAllocatorAdapter } from "./gpu_allocator_adapter.ts";
import { _QueueFrees } from "./_deferred_frees.ts";
import type { GpuReuse } from "./gpu_caching_allocator.ts";
import {
  GpuSegmentSource,
  type GpuSegmentSourceOptions,
} from "./gpu_segment_source.ts";
import { QueueStream } from "./queue_stream.ts";

const GPU_HEAP_BYTE_LENGTH = 32 * 1024 * 1024;

/** Options of {@linkcode GpuWatermarkAllocator}. */
export interface GpuWatermarkAllocatorOptions
  extends WatermarkAllocatorOptions<GPUBuffer> {
  /**
   * Options of the segment source made for the allocator.
   *
   * @default {{}}
   */
  source?: GpuSegmentSourceOptions;
  /**
   * When a freed range may serve a new request; see `GpuReuse`.
   *
   * @default {"after-fence"}
   */
  reuse?: GpuReuse;
}

/** Options of {@linkcode GpuWatermarkAllocator.allocate}. */
export interface GpuWatermarkAllocateOptions {
  /**
   * `"private"`, or `"shared"` (on WebGPU an ordinary storage buffer marked
   * shared, reached from the host through `GpuStaging`).
   *
   * @default {"private"}
   */
  pool?: "private" | "shared";
}

/**
 * PyTorch's MPS allocator over `GPUBuffer`s: heaps are segments of a
 * {@linkcode GpuSegmentSource}, buffers are {@linkcode GpuAllocation}s, the
 * watermarks default to WebGPU's lack of unified memory, and frees are
 * ordered by {@linkcode QueueStream} fences: a freed buffer is held until the
 * queue has finished the work submitted before the free. Heaps grow with
 * the bytes held (small ones from 128 KiB to 8 MiB, large ones from 2 MiB
 * to 32 MiB; `minSmallHeapByteLength` and `minLargeHeapByteLength`), and
 * none is larger than a large heap unless asked (`xlargeHeapByteLength`).
 *
 * @example A freed buffer waits for the queue
 * ```ts
 * import { GpuWatermarkAllocator } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const allocator = new GpuWatermarkAllocator(device);
 *   const a = allocator.allocate(4096);
 *   const where = a.offset;
 *   a.release();
 *   using b = allocator.allocate(4096);
 *   assert.notEqual(b.offset, where);
 *   await allocator.synchronize();
 *   using c = allocator.allocate(4096);
 *   assert.equal(c.offset, where);
 *   device.destroy();
 * }
 * ```
 */
export class GpuWatermarkAllocator {
  /** The WebGPU device. */
  readonly gpuDevice: GPUDevice;
  /** Where heaps come from. */
  readonly source: GpuSegmentSource;
  /** The device's queue. */
  readonly stream: QueueStream;
  /** The watermark allocator itself, for stats, callbacks and tuning. */
  readonly watermark: WatermarkAllocator<GPUBuffer>;
  /** When freed ranges come back. */
  readonly reuse: GpuReuse;
  #adapter: GpuAllocatorAdapter | undefined;
  #frees: _QueueFrees;
  #owner: GpuAllocationOwner;

  /**
   * Creates the source, the stream and the allocator.
   *
   * @param device The WebGPU device.
   * @param options Watermark options, source options and the reuse rule.
   * @throws {InvalidArgumentError} For an option out of range.
   */
  constructor(device: GPUDevice, options?: GpuWatermarkAllocatorOptions) {
    _checkDevice(device, "Cannot make a GpuWatermarkAllocator");
    // a copy: each option read once (a getter is not asked twice)
    const given = { ..._checkOptions(options) };
    options = given;
    _checkStrict(options.strict);
    validateOptionKeys(
      given,
      [...WATERMARK_OPTION_KEYS, "source", "reuse"],
      "GpuWatermarkAllocator",
    );
    this.gpuDevice = device;
    this.source = new GpuSegmentSource(device, options.source);
    this.stream = QueueStream.of(device);
    this.reuse = _checkReuse(options.reuse, "after-fence");
    // (the watermark allocator refuses keys it does not read: not these two)
    const { source: _source, reuse: _reuse, ...own } = given;
    this.watermark = new WatermarkAllocator(this.source, {
      unifiedMemory: false,
      // MPS makes heaps of up to 1 GiB for requests of 10 MiB and more, to
      // carve later ones from; a WebGPU buffer is memory the device commits
      // at once, so no heap here is larger than a large heap (32 MiB).
      ...own,
      xlargeHeapByteLength: optionOr(
        given.xlargeHeapByteLength,
        optionOr(given.largeHeapByteLength, GPU_HEAP_BYTE_LENGTH),
      ),
    });
    const release = (buffer: unknown) =>
      (buffer as WatermarkBuffer<GPUBuffer>).release();
    const frees = new _QueueFrees(this.stream, release);
    this.#frees = frees;
    this.#owner = this.reuse === "after-fence"
      ? {
        free: (buffer) =>
          frees.defer(
            buffer,
            (buffer as WatermarkBuffer<GPUBuffer>).byteLength,
          ),
      }
      : { free: release };
  }

  /**
   * Freed buffers waiting for their queue fence. They go back to their pool
   * at the first allocation after the fence completed, or at
   * {@linkcode GpuWatermarkAllocator.synchronize}.
   */
  get pendingFreeCount(): number {
    return this.#frees.count;
  }

  /** Bytes of freed buffers waiting for their queue fence. */
  get pendingFreeBytes(): number {
    return this.#frees.bytes;
  }

  /** The allot device (`webgpu:<index>`). */
  get device(): Device {
    return this.source.device;
  }

  /** Whether the device was lost. */
  get lost(): boolean {
    return this.source.lost;
  }

  /**
   * Allocates `byteLength` bytes.
   *
   * @param byteLength Bytes; 0 gives an ordinary 0-byte allocation.
   * @param options The pool.
   * @returns The owning handle.
   * @throws {InvalidArgumentError} For a bad size.
   * @throws {WatermarkOutOfMemoryError} Past the high watermark or the
   * device's memory.
   * @throws {DeviceLostError} When the device was lost.
   */
  allocate(
    byteLength: number,
    options: GpuWatermarkAllocateOptions = {},
  ): GpuAllocation {
    validateByteLength(byteLength, this.source.maxSegmentByteLength);
    if (_deviceState(this.gpuDevice).lost) {
      _assertAlive(this.gpuDevice, `allocate ${byteLength} bytes`);
    }
    if (this.#frees.count > 0) this.#frees.poll();
    const buffer = this.watermark.allocateBuffer(byteLength, options);
    return _makeAllocation(
      this.gpuDevice,
      buffer.memory,
      buffer.byteOffset,
      byteLength,
      this.#owner,
      buffer,
    );
  }

  /**
   * Waits for the queue, then returns every buffer waiting for it to its
   * pool.
   *
   * Without a signal, a queue that never finishes its work makes it wait
   * forever.
   *
   * @param options A signal that stops the wait: the promise rejects with
   * its reason and nothing changes (the buffers stay pending until their
   * work completes).
   * @returns Resolves when the pending buffers are back.
   * @throws {InvalidArgumentError} (as a rejection) For bad options.
   */
  async synchronize(options?: SynchronizeOptions): Promise<void> {
    // read once: a getter cannot hand the wait another signal
    const signal = validateSynchronizeOptions(options);
    signal?.throwIfAborted();
    await this.#frees.synchronize(
      signal === undefined ? undefined : { signal },
    );
    if (!this.lost) this.watermark.freeInactiveBuffers();
  }

  /** Releases every cached buffer and empty heap. */
  emptyCache(): void {
    if (!this.lost) this.watermark.emptyCache();
  }

  /**
   * The watermark allocator's figures.
   *
   * @returns The stats.
   */
  stats(): WatermarkStats {
    return this.watermark.stats();
  }

  /**
   * Core's `Allocator` over this allocator, for `@allot/storage`.
   *
   * @returns The adapter (one per allocator).
   */
  asAllocator(): GpuAllocatorAdapter {
    this.#adapter ??= new GpuAllocatorAdapter(this);
    return this.#adapter;
  }

  // ---- the allocator contract's verbs (issue #15) ----

  /**
   * Allocates like {@linkcode GpuWatermarkAllocator.allocate}, but returns `undefined`
   * where it would throw out of memory. A bad request, or a lost device,
   * still throws.
   *
   * @param byteLength Bytes; 0 gives an ordinary 0-byte allocation.
   * @param options The pool.
   * @returns The owning handle, or `undefined` when the memory is full.
   * @throws {InvalidArgumentError} For a bad size.
   * @throws {DeviceLostError} When the device was lost.
   */
  tryAllocate(
    byteLength: number,
    options: GpuWatermarkAllocateOptions = {},
  ): GpuAllocation | undefined {
    try {
      return this.allocate(byteLength, options);
    } catch (error) {
      if (error instanceof OutOfMemoryError) return undefined;
      throw error;
    }
  }

  /**
   * A text table of the stats, in the layout of
   * `torch.cuda.memory_summary()` (the same as `watermark.memorySummary()`).
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return this.watermark.memorySummary(options);
  }

  /**
   * Checks every internal invariant (the same as `watermark.validate()`).
   *
   * @throws {AllotError} Naming the first broken invariant.
   */
  validate(): void {
    this.watermark.validate();
  }

  /**
   * Every segment with its blocks, and the recorded history (the same as
   * `watermark.snapshot()`).
   *
   * @returns The snapshot.
   */
  snapshot(): WatermarkSnapshot {
    return this.watermark.snapshot();
  }

  /** Sets every peak of the stats to its current value. */
  resetPeakStats(): void {
    this.watermark.resetPeakStats();
  }

  /** Sets the `allocated` and `freed` totals of the stats to 0. */
  resetAccumulatedStats(): void {
    this.watermark.resetAccumulatedStats();
  }
}
