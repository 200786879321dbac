/**
 * {@linkcode WatermarkAllocator}: PyTorch's MPS heap allocator for any device
 * behind a {@linkcode SegmentSource}: heaps by request size, private, shared
 * and scalar pools with best-fit reuse, low and high watermarks over a
 * recommended working-set size, garbage collection under memory pressure,
 * lifecycle callbacks, buffer metadata and fence-ordered frees. This file is
 * the public facade (arguments, buffers, events, stats, snapshots); the
 * policy it drives is `_watermark_policy.ts`, its options
 * `watermark_options.ts`.
 *
 * @module
 */

import {
  AllocatorBase,
  checkCopyArguments,
  DataPtr,
  type Deleter,
  describeValue,
  type Device,
  DoubleFreeError,
  type Fence,
  finishSnapshot,
  formatMemorySummary,
  InvalidArgumentError,
  type MemoryStats,
  type MemorySummaryOptions,
  type SegmentSource,
  type Stream,
  type SynchronizeOptions,
  TraceRecorder,
  type TraceRecorderOptions,
  UnsupportedOperationError,
  UseAfterFreeError,
  validateAbortSignal,
  validateByteLength,
  validateMemorySummaryOptions,
  validateObject,
  validateOptionKeys,
  validateSynchronizeOptions,
} from "@allot/core";
import type { _Block } from "./_block.ts";
import { _BufferEvents } from "./_buffer_events.ts";
import { _Handle } from "./_handle.ts";
import {
  _checkHighRatio,
  _checkLowRatio,
  _resolveWatermarkOptions,
} from "./_watermark_config.ts";
import { _WatermarkPolicy } from "./_watermark_policy.ts";
import { _watermarkSegments, _watermarkStats } from "./_watermark_report.ts";
import {
  _ASYNC_BUFFER_KEYS,
  _checkBufferRequest,
  _throwWatermarkOom,
} from "./_watermark_requests.ts";
import { _validateWatermark } from "./_watermark_validate.ts";
import { DebugVerbosity } from "./debug_verbosity.ts";
import type { BufferCallback, WatermarkBuffer } from "./watermark_buffer.ts";
import type {
  AllocateBufferAsyncOptions,
  AllocateBufferOptions,
  WatermarkAllocatorOptions,
} from "./watermark_options.ts";
import type { WatermarkSnapshot } from "./watermark_snapshot.ts";
import type { WatermarkStats } from "./watermark_stats.ts";

export type {
  AllocateBufferAsyncOptions,
  AllocateBufferOptions,
  HostViewFunction,
  WatermarkAllocatorOptions,
} from "./watermark_options.ts";

/**
 * PyTorch's MPS heap allocator, made for any device behind a
 * {@linkcode SegmentSource}.
 *
 * - **Heaps** are segments. Requests of at most 1 MiB go into 8 MiB heaps,
 *   below 10 MiB into 32 MiB heaps, below half the extra-large heap into an
 *   extra-large heap (1 GiB, or a sixteenth of a smaller recommended size)
 *   while not under memory pressure and while that heap would not reach the
 *   low watermark, and larger ones into a heap of their own rounded to 2 MiB
 *   (all configurable). When a class-sized heap would break the high
 *   watermark or the device refuses it, a heap of exactly the request is
 *   tried.
 * - **Pools**: private, shared (host-visible segments) and scalar, each with
 *   small and large heaps. A cached buffer is reused by best fit if it is at
 *   most `maxSlackByteLength` larger and at most twice the request (under memory
 *   pressure at most `largeRoundByteLength` larger, since carving an exact buffer
 *   costs nothing here); when the only fit is larger, the allocator makes a new buffer in a
 *   heap with room, or else releases the idle oversize buffer and carves the
 *   request from its heap (a heap of its own is released with it under
 *   pressure, or when the request belongs in a shared heap, so small buffers
 *   never pin a big heap).
 * - **Watermarks**: the high limit (`highWatermarkRatio` × recommended) is
 *   hard; the low limit is soft: at or above it, requests are under
 *   pressure: no extra-large heaps, narrow reuse slack, and cached buffers
 *   of the request's pool older than the average are collected (releasing
 *   heaps that become empty) until driver bytes fall below the low limit.
 *   Unlike MPS, small pools are collected too: a decoder's growing caches
 *   leave many cached small buffers of distinct sizes.
 * - **Order of attempts**: cached buffer, garbage collection under
 *   pressure, new buffer, `allocation-failed` callbacks then cached buffer or
 *   new buffer, release cached buffers of the pool, release all cached
 *   buffers; {@linkcode WatermarkAllocator.allocateBufferAsync} then waits
 *   for pending work and releases everything; then out of memory.
 * - **Events**: {@linkcode WatermarkAllocator.recordEvents} ties buffers to
 *   submitted work; a buffer freed while its work is pending returns to its
 *   pool only once the work completes.
 *
 * @typeParam M Type of the segment memory.
 *
 * @example Allocate, reuse and watch the stats
 * ```ts
 * import { WatermarkAllocator } from "@allot/watermark";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource({ capacityBytes: 1 << 30 });
 * const allocator = new WatermarkAllocator(device);
 * const a = allocator.allocateBuffer(1000);
 * assert.equal(a.requestedByteLength, 1000);
 * assert.equal(a.byteLength, 1024); // aligned to the device's 256 bytes
 * // one small heap: 128 KiB while the allocator holds little (up to 8 MiB)
 * assert.equal(allocator.stats().reservedBytes.current, 128 << 10);
 * a.release();
 * const b = allocator.allocateBuffer(1000);
 * assert.equal(b.id, a.id); // recycled
 * b.release();
 * allocator.emptyCache();
 * assert.equal(device.reservedBytes, 0);
 * ```
 */
export class WatermarkAllocator<M = unknown>
  extends AllocatorBase<M | null, WatermarkBuffer<M>> {
  /** The device of the segment source. */
  readonly device: Device;
  /** Offset and size alignment of buffers. */
  readonly alignment: number;
  /** Whether the device shares memory with the host. */
  readonly unifiedMemory: boolean;
  // The policy: pools, heaps, pending frees, stats, history.
  #p: _WatermarkPolicy<M>;
  #freeDeleter: Deleter<WatermarkBuffer<M>>;

  /**
   * Creates an allocator over a segment source.
   *
   * @param source Where heaps come from.
   * @param options Watermarks, heap sizes, debugging.
   * @throws {InvalidArgumentError} For a ratio out of range, a low ratio
   * above the high one, or a size that is not a positive integer.
   */
  constructor(
    source: SegmentSource<M>,
    options: WatermarkAllocatorOptions<M> = {},
  ) {
    super();
    validateOptionKeys(options, WATERMARK_OPTION_KEYS, "WatermarkAllocator");
    const config = _resolveWatermarkOptions(source, options);
    this.device = source.device;
    this.alignment = config.alignment;
    this.unifiedMemory = config.unifiedMemory;
    const p = this.#p = new _WatermarkPolicy(
      source,
      config,
      new _BufferEvents<M>(config.verbosity, config.logger),
    );
    p.owner = {
      free: (handle) => this.free(handle),
      isLive: (handle) => p.live.has(handle),
      view: (block) => p.viewOf(block),
    };
    p.validate = () => this.validate();
    this.#freeDeleter = (buffer) => this.free(buffer);
    if (config.recordHistory !== false) {
      this.recordHistory(config.recordHistory);
    }
  }

  // ---------------------------------------------------------------- limits

  /** The recommended maximum working-set size in bytes. */
  get recommendedMaxBytes(): number {
    return this.#p.recommended;
  }

  /** The high watermark ratio (0: no limit). */
  get highWatermarkRatio(): number {
    return this.#p.highRatio;
  }

  /** The low watermark ratio (0: no garbage collection). */
  get lowWatermarkRatio(): number {
    return this.#p.lowRatio;
  }

  /** The hard limit on driver bytes; `Infinity` when disabled. */
  get highWatermarkLimit(): number {
    return this.#p.highLimit;
  }

  /** The soft limit on driver bytes; `Infinity` when disabled. */
  get lowWatermarkLimit(): number {
    return this.#p.lowLimit;
  }

  /**
   * Bytes left below the low watermark limit: 0 means memory pressure;
   * `Infinity` when the low watermark is disabled. (MPS reports MiB.)
   */
  get lowWatermarkValue(): number {
    return this.#p.lowWatermarkValue;
  }

  /** Bytes of this allocator's heaps (MPS "total allocated memory"). */
  get totalAllocatedBytes(): number {
    return this.#p.stats.reservedBytes;
  }

  /** Bytes of buffers in use (MPS "current allocated memory"). */
  get currentAllocatedBytes(): number {
    return this.#p.stats.activeBytes;
  }

  /** Bytes the device reports for this process (see the options). */
  get driverAllocatedBytes(): number {
    return this.#p.driverAllocatedBytes;
  }

  /**
   * Sets the high watermark ratio: the hard limit becomes `ratio` ×
   * `recommendedMaxBytes` (0: no limit).
   *
   * @param ratio In `[0, 2]`, and at least the low ratio unless 0.
   * @throws {InvalidArgumentError} Out of range or below the low ratio;
   * nothing changes.
   */
  setHighWatermarkRatio(ratio: number): void {
    _checkHighRatio(ratio, this.#p.lowRatio);
    this.#p.setRatios(ratio, this.#p.lowRatio);
  }

  /**
   * Sets the low watermark ratio: memory pressure starts at `ratio` ×
   * `recommendedMaxBytes` (0: never).
   *
   * @param ratio In `[0, high]` (or `[0, 2]` when the high limit is off).
   * @throws {InvalidArgumentError} Out of range; nothing changes.
   */
  setLowWatermarkRatio(ratio: number): void {
    _checkLowRatio(ratio, this.#p.highRatio);
    this.#p.setRatios(this.#p.highRatio, ratio);
  }

  /**
   * Limits this allocator to `fraction` × `recommendedMaxBytes`, like
   * `torch.mps.set_per_process_memory_fraction`: sets the high watermark
   * ratio, and lowers the low ratio to it when it was higher.
   *
   * @param fraction In `[0, 2]`; 0 removes the limit.
   * @throws {InvalidArgumentError} Out of range; nothing changes.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1000 << 20 }));
   * allocator.setPerProcessMemoryFraction(0.5);
   * assert.equal(allocator.highWatermarkLimit, 500 << 20);
   * assert.equal(allocator.lowWatermarkRatio, 0.5);
   * ```
   */
  setPerProcessMemoryFraction(fraction: number): void {
    _checkHighRatio(fraction, 0);
    const low = fraction !== 0 && this.#p.lowRatio > fraction
      ? fraction
      : this.#p.lowRatio;
    this.#p.setRatios(fraction, low);
  }

  // ------------------------------------------------------------- callbacks

  /**
   * Registers a lifecycle callback. Callbacks run in registration order; one
   * that throws is reported to the logger and does not stop the allocator.
   *
   * @param callback Receives every {@linkcode BufferEvent}.
   * @returns A function that removes the callback.
   *
   * @example Free memory when an allocation fails
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 64 << 20 }), {
   *   highWatermarkRatio: 1, lowWatermarkRatio: 1,
   * });
   * const cache = [allocator.allocateBuffer(40 << 20)];
   * const remove = allocator.addCallback((event) => {
   *   if (event.type === "allocation-failed") cache.pop()?.release();
   * });
   * const big = allocator.allocateBuffer(40 << 20); // the callback made room
   * remove();
   * big.release();
   * ```
   */
  addCallback(callback: BufferCallback): () => void {
    this.#p.events.add(callback);
    return () => {
      this.removeCallback(callback);
    };
  }

  /**
   * Removes a callback registered with `addCallback`.
   *
   * @param callback The callback.
   * @returns Whether it was registered.
   */
  removeCallback(callback: BufferCallback): boolean {
    return this.#p.events.remove(callback);
  }

  // ------------------------------------------------------------ allocation

  /**
   * Allocates a buffer, following the order of attempts in the class doc.
   *
   * @param byteLength Bytes, at least 1 and at most the largest segment.
   * @param options The pool.
   * @returns A live buffer.
   * @throws {InvalidArgumentError} For a bad size or pool; nothing changes.
   * @throws {WatermarkOutOfMemoryError} When every attempt failed.
   * @throws {SegmentSourceError} When the segment source threw.
   */
  allocateBuffer(
    byteLength: number,
    options: AllocateBufferOptions = {},
  ): WatermarkBuffer<M> {
    // the pool is read once: the out-of-memory message re-read it (a
    // getter's second answer threw a raw error, or named another pool)
    const kind = _checkBufferRequest(this.#p, byteLength, options);
    const buffer = this.#tryAllocate(byteLength, kind);
    if (buffer === undefined) {
      _throwWatermarkOom(this.#p, byteLength, { pool: kind });
    }
    return buffer;
  }

  /**
   * Like {@linkcode WatermarkAllocator.allocateBuffer}, but returns
   * `undefined` when out of memory.
   *
   * @param byteLength Bytes; 0 gives an ordinary buffer.
   * @param options The pool.
   * @returns A live buffer, or `undefined`.
   * @throws {InvalidArgumentError} For a bad size or pool.
   * @throws {SegmentSourceError} When the segment source threw.
   */
  tryAllocateBuffer(
    byteLength: number,
    options: AllocateBufferOptions = {},
  ): WatermarkBuffer<M> | undefined {
    return this.#tryAllocate(
      byteLength,
      _checkBufferRequest(this.#p, byteLength, options),
    );
  }

  #tryAllocate(
    byteLength: number,
    kind: "private" | "shared",
  ): WatermarkBuffer<M> | undefined {
    const block = this.#p.tryAllocate(byteLength, kind);
    if (block === undefined) {
      this.#p.failed(byteLength);
      return undefined;
    }
    return block.handle as _Handle<M>;
  }

  /**
   * Allocates like {@linkcode WatermarkAllocator.allocateBuffer}; when every
   * attempt failed, waits for the work of buffers pending free, releases all
   * cached buffers and tries once more.
   *
   * Without a signal, work that never completes makes it wait forever.
   *
   * @param byteLength Bytes; 0 gives an ordinary buffer.
   * @param options The pool, and a signal that stops the wait: the promise
   * rejects with the signal's reason, the buffers pending free stay pending
   * and the cache is not emptied (what the attempts before the wait did,
   * as {@linkcode WatermarkAllocator.allocateBuffer} does, stays done; the
   * wait is counted in `numSyncAllStreams`). Already aborted: rejects
   * before anything is done.
   * @returns A live buffer.
   * @throws {InvalidArgumentError} For a bad size, pool or signal.
   * @throws {WatermarkOutOfMemoryError} When even that failed.
   *
   * @example Wait for the device to finish with memory
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { ManualStream, MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 64 << 20 }), {
   *   highWatermarkRatio: 1, lowWatermarkRatio: 1,
   * });
   * const stream = new ManualStream();
   * const a = allocator.allocateBuffer(40 << 20);
   * allocator.recordEvents([a], stream);
   * a.release(); // pending: the stream still uses it
   * assert.equal(allocator.tryAllocateBuffer(40 << 20, { pool: "shared" }), undefined);
   * const waiting = allocator.allocateBufferAsync(40 << 20, { pool: "shared" });
   * stream.completeAll();
   * const b = await waiting;
   * assert.equal(b.shared, true);
   * b.release();
   * ```
   */
  async allocateBufferAsync(
    byteLength: number,
    options: AllocateBufferAsyncOptions = {},
  ): Promise<WatermarkBuffer<M>> {
    const kind = _checkBufferRequest(
      this.#p,
      byteLength,
      options,
      _ASYNC_BUFFER_KEYS,
    );
    // read once: a getter cannot hand the wait another signal
    const signal = validateAbortSignal(
      options.signal,
      `Cannot allocate ${byteLength} bytes`,
    );
    // already aborted: rejects before anything is done
    signal?.throwIfAborted();
    let block = this.#p.tryAllocate(byteLength, kind);
    if (block === undefined) {
      const waiting = this.#p.deferred.count;
      if (waiting > 0) {
        this.#p.stats.numSyncAllStreams++;
        if (this.#p.events.verbosity !== 0) {
          this.#p.events.log(
            DebugVerbosity.profiling,
            undefined,
            () =>
              `Waiting for the fences of ${waiting} buffers before releasing every cached buffer`,
          );
        }
        // A rejected or throwing fence also ends: its work will never run.
        // aborted: rejects with the reason; the buffers stay pending and
        // the cache is not emptied
        await this.#p.deferred.synchronize(
          signal === undefined ? undefined : { signal },
        );
      }
      this.freeInactiveBuffers();
      this.#p.releaseCachedBuffers("release-cached");
      block = this.#p.tryAllocate(byteLength, kind);
    }
    if (block === undefined) {
      this.#p.failed(byteLength);
      // the pool read at the call (a getter may answer otherwise now)
      _throwWatermarkOom(this.#p, byteLength, { pool: kind });
    }
    return block.handle as _Handle<M>;
  }

  /**
   * Allocates a buffer from the scalar pool and writes `value` into it, like
   * MPS's `allocScalarBufferWithValue`.
   *
   * @param value The bytes of the constant (for example `Float32Array.of(2)`).
   * @returns A live shared buffer holding the value.
   * @throws {InvalidArgumentError} For an empty value, one larger than
   * `maxSmallByteLength`, one whose bytes cannot be read, or a `hostView`
   * option that returns no `Uint8Array` of the value's size (the buffer is
   * freed).
   * @throws {UnsupportedOperationError} When the segment memory has no host
   * bytes (the buffer stays cached).
   * @throws {WatermarkOutOfMemoryError} When out of memory.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1 << 30, backed: true }));
   * using scalar = allocator.allocScalarBufferWithValue(Float32Array.of(2.5));
   * assert.equal(scalar.pool, "scalar");
   * assert.equal(new Float32Array(scalar.sharedView()!.slice().buffer)[0], 2.5);
   * ```
   */
  allocScalarBufferWithValue(value: ArrayBufferView): WatermarkBuffer<M> {
    if (!ArrayBuffer.isView(value)) {
      throw new InvalidArgumentError(
        `Cannot allocate a scalar buffer: value must be an ArrayBufferView, received ${typeof value}`,
        { name: "value", value },
      );
    }
    // Copy the bytes first, each property read once: a view with lying
    // getters is refused before anything is allocated, and a callback that
    // detaches or rewrites the value during the allocation changes nothing.
    let bytes: Uint8Array;
    try {
      bytes = new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
        .slice();
    } catch (error) {
      if (!(error instanceof RangeError || error instanceof TypeError)) {
        throw error;
      }
      throw new InvalidArgumentError(
        `Cannot allocate a scalar buffer: value's buffer, byteOffset and byteLength do not describe readable bytes (${error.message})`,
        { name: "value", value },
      );
    }
    const byteLength = bytes.byteLength;
    if (byteLength < 1 || byteLength > this.#p.maxSmall) {
      throw new InvalidArgumentError(
        `Cannot allocate a scalar buffer of ${byteLength} bytes: must be in [1, ${this.#p.maxSmall}]`,
        {
          name: "value.byteLength",
          value: byteLength,
          limit: this.#p.maxSmall,
        },
      );
    }
    const block = this.#p.tryAllocate(byteLength, "scalar");
    if (block === undefined) {
      this.#p.failed(byteLength);
      _throwWatermarkOom(this.#p, byteLength, { pool: "shared" });
    }
    const handle = block.handle as _Handle<M>;
    let view: Uint8Array | undefined;
    try {
      view = this.#p.viewOf(block);
    } catch (error) {
      this.free(handle);
      throw error;
    }
    if (view === undefined) {
      this.free(handle);
      throw new UnsupportedOperationError(
        `Cannot write a scalar of ${byteLength} bytes: the segment memory of ${this.device} has no host bytes`,
      );
    }
    view.set(bytes);
    return handle;
  }

  /**
   * Allocates `byteLength` bytes from the private pool as an owning
   * {@linkcode DataPtr} whose context is the buffer; releasing the pointer
   * frees the buffer. A zero-byte request gives a pointer that owns nothing.
   *
   * @param byteLength Bytes.
   * @returns An owning pointer.
   * @throws {InvalidArgumentError} For a bad size.
   * @throws {WatermarkOutOfMemoryError} When out of memory.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1 << 30 }));
   * {
   *   using ptr = allocator.allocate(100);
   *   assert.equal(ptr.byteLength, 100);
   *   assert.equal(allocator.currentAllocatedBytes, 256);
   * }
   * assert.equal(allocator.currentAllocatedBytes, 0);
   * ```
   */
  allocate(byteLength: number): DataPtr<M | null, WatermarkBuffer<M>> {
    validateByteLength(byteLength, this.#p.maxSegment);
    if (byteLength === 0) return new DataPtr(null, 0, 0, this.device);
    const buffer = this.allocateBuffer(byteLength);
    return new DataPtr(
      buffer.memory,
      buffer.byteOffset,
      byteLength,
      this.device,
      { context: buffer, deleter: this.#freeDeleter },
    );
  }

  /**
   * The deleter of contexts from `rawAllocate`: frees the buffer.
   *
   * @returns The deleter.
   */
  override rawDeleter(): Deleter<WatermarkBuffer<M>> {
    return this.#freeDeleter;
  }

  /**
   * Copies bytes between two pointers whose memories have host bytes.
   *
   * @param dest Destination pointer.
   * @param src Source pointer.
   * @param byteLength Bytes; at most both lengths.
   * @throws {InvalidArgumentError} When `byteLength` exceeds a pointer.
   * @throws {UseAfterFreeError} When a pointer was released.
   * @throws {UnsupportedOperationError} When a memory has no host bytes.
   */
  override copyData(
    dest: DataPtr<M | null, WatermarkBuffer<M>>,
    src: DataPtr<M | null, WatermarkBuffer<M>>,
    byteLength: number,
  ): void {
    // a brand check: `{}` was accepted (a NaN limit), `null` threw TypeError
    checkCopyArguments(dest, src, byteLength);
    if (byteLength === 0) return;
    const d = this.#hostRange(dest, byteLength, "dest");
    const s = this.#hostRange(src, byteLength, "src");
    if (d === undefined || s === undefined) {
      throw new UnsupportedOperationError(
        `Cannot copy ${byteLength} bytes: the memory of ${this.device} has no host bytes`,
      );
    }
    d.set(s);
  }

  /**
   * The first `byteLength` bytes of `ptr` through the `hostView` option;
   * a range that leaves its memory is refused (it was copied short, or
   * threw `RangeError`).
   */
  #hostRange(
    ptr: DataPtr<M | null, WatermarkBuffer<M>>,
    byteLength: number,
    name: string,
  ): Uint8Array | undefined {
    let view: unknown = null; // a hostView that throws: refused below
    try {
      view = this.#p.hostView(ptr.memory as M, {
        byteOffset: ptr.byteOffset,
        byteLength,
      });
    } catch {
      // an ArrayBuffer view past its buffer throws RangeError
    }
    if (view === undefined) return undefined;
    if (!(view instanceof Uint8Array) || view.byteLength !== byteLength) {
      throw new InvalidArgumentError(
        `Cannot copy ${byteLength} bytes: the ${name} range [${ptr.byteOffset}, ${
          ptr.byteOffset + byteLength
        }) leaves its memory`,
        { name, value: ptr.byteOffset + byteLength, limit: byteLength },
      );
    }
    return view;
  }

  // --------------------------------------------------------- free, release

  /**
   * Frees a buffer. It returns to its pool now, or once the work recorded
   * on it completes (see {@linkcode WatermarkAllocator.recordEvents}).
   *
   * @param buffer A live buffer of this allocator.
   * @throws {DoubleFreeError} When the buffer was already released, or is
   * another allocator's.
   * @throws {InvalidArgumentError} When the value is no buffer at all.
   */
  free(buffer: WatermarkBuffer<M>): void {
    this.#p.free(buffer as _Handle<M>, this.#blockOf(buffer, "free"));
  }

  /**
   * Waits for the work recorded on every buffer pending free (a rejected or
   * throwing fence also ends: its work will never run), then returns those
   * buffers to their pools.
   *
   * Without a signal, a fence that never completes makes it wait forever.
   *
   * @param options A signal that stops the wait: the promise rejects with
   * its reason and nothing changes (the buffers stay pending until their
   * work completes).
   * @returns Resolves when the buffers pending at the call are back.
   * @throws {InvalidArgumentError} (as a rejection) For bad options.
   */
  async synchronize(options?: SynchronizeOptions): Promise<void> {
    // refused or already aborted: not counted, nothing changes
    validateSynchronizeOptions(options)?.throwIfAborted();
    this.#p.stats.numSyncAllStreams++;
    await this.#p.deferred.synchronize(options);
    this.#p.check();
  }

  /**
   * Returns to their pools the freed buffers whose recorded work has
   * completed. Allocation does this by itself first.
   *
   * @returns The number of buffers that returned to their pools.
   */
  freeInactiveBuffers(): number {
    return this.#p.freeInactiveBuffers();
  }

  /**
   * Releases every cached buffer and every empty heap to the device. Buffers
   * in use or pending free stay.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const device = new MockSegmentSource({ capacityBytes: 1 << 30 });
   * const allocator = new WatermarkAllocator(device);
   * allocator.allocateBuffer(4 << 20).release();
   * // a large heap: 2 MiB to 32 MiB by what is held, at least the request
   * assert.equal(device.reservedBytes, 4 << 20);
   * allocator.emptyCache();
   * assert.equal(device.reservedBytes, 0);
   * ```
   */
  emptyCache(): void {
    this.freeInactiveBuffers();
    this.#p.releaseCachedBuffers("empty-cache");
    this.#p.check();
  }

  // ---------------------------------------------------------------- events

  /**
   * Records that `buffers` are used by the work submitted so far: by a fence,
   * or by a stream's next fence. A buffer freed before its work completes
   * returns to its pool only afterwards.
   *
   * @param buffers Live buffers of this allocator.
   * @param work A fence, or a stream whose `fence()` is taken once.
   * @returns Whether any event was recorded (`false` for an empty list).
   * @throws {InvalidArgumentError} For a buffer of another allocator;
   * nothing is recorded.
   * @throws {UseAfterFreeError} For a released buffer; nothing is recorded.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { ManualStream, MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1 << 30 }));
   * const stream = new ManualStream();
   * const a = allocator.allocateBuffer(256);
   * allocator.recordEvents([a], stream);
   * a.release();
   * assert.notEqual(allocator.allocateBuffer(256).id, a.id); // a is still in use
   * stream.completeAll();
   * assert.equal(allocator.allocateBuffer(256).id, a.id);
   * ```
   */
  recordEvents(
    buffers: readonly WatermarkBuffer<M>[],
    work: Fence | Stream,
  ): boolean {
    const blocks = this.#blocksOf(buffers, "record events on");
    // Each member of `work` is read once: what is checked is what is called.
    const fenceOf = typeof work === "object" && work !== null
      ? _member(work, "fence")
      : undefined;
    if (
      typeof fenceOf !== "function" &&
      (typeof work !== "object" || work === null ||
        typeof _member(work, "wait") !== "function")
    ) {
      throw new InvalidArgumentError(
        `Cannot record events: work must be a Fence or a Stream, received ${
          describeValue(work)
        }`,
        { name: "work", value: work },
      );
    }
    if (blocks.length === 0) return false;
    let fence: Fence;
    let key: number;
    if (typeof fenceOf === "function") {
      // The id is read once, before fence() can change it; it keys the
      // stream's queue of fences, so it must be an integer.
      const id = _member(work, "id");
      if (!Number.isSafeInteger(id)) {
        throw new InvalidArgumentError(
          `Cannot record events: a stream's id must be a safe integer, received ${
            describeValue(id)
          }`,
          { name: "work.id", value: id },
        );
      }
      fence = fenceOf.call(work);
      key = id as number;
      if (
        typeof fence !== "object" || fence === null ||
        typeof _member(fence, "wait") !== "function"
      ) {
        throw new InvalidArgumentError(
          `Cannot record events: the stream's fence() must return a Fence, returned ${
            describeValue(fence)
          }`,
          { name: "work.fence()", value: fence },
        );
      }
      // fence() may have re-entered the allocator and freed a buffer.
      for (const block of blocks) {
        if (block.handle === undefined) {
          throw new UseAfterFreeError(
            `Cannot record events on buffer #${block.id}: the stream's fence() released it`,
          );
        }
      }
    } else {
      fence = work as Fence;
      key = fenceKey(fence);
    }
    for (const block of blocks) {
      if (!block.fences.includes(fence)) {
        block.fences.push(fence);
        block.fenceKeys.push(key);
      }
    }
    this.#p.check();
    return true;
  }

  /**
   * Waits until the work recorded on `buffers` has completed, then returns
   * finished buffers pending free to their pools.
   *
   * @param buffers Live buffers of this allocator.
   * @returns Whether it had to wait for anything.
   * @throws {InvalidArgumentError} For a buffer of another allocator.
   * @throws {UseAfterFreeError} For a released buffer.
   */
  async waitForEvents(
    buffers: readonly WatermarkBuffer<M>[],
  ): Promise<boolean> {
    const blocks = this.#blocksOf(buffers, "wait for events on");
    const fences: Fence[] = [];
    for (const block of blocks) {
      for (const fence of block.fences) {
        // a `completed` that throws is waited for, like a wait() that throws
        let done = false;
        try {
          done = fence.completed === true;
        } catch {
          done = false;
        }
        if (!done) fences.push(fence);
      }
    }
    if (fences.length === 0) return false;
    // A fence whose wait() throws, rejects or returns no promise also ends.
    const ignore = () => {};
    await Promise.all(
      fences.map((f) =>
        Promise.resolve().then(() => f.wait()).then(ignore, ignore)
      ),
    );
    this.freeInactiveBuffers();
    return true;
  }

  /** The blocks of an array of buffers, each element read once. */
  #blocksOf(
    buffers: readonly WatermarkBuffer<M>[],
    what: string,
  ): _Block<M>[] {
    if (!Array.isArray(buffers)) {
      throw new InvalidArgumentError(
        `Cannot ${what} buffers: buffers must be an array, received ${
          describeValue(buffers)
        }`,
        { name: "buffers", value: buffers, limit: "array" },
      );
    }
    const blocks: _Block<M>[] = [];
    const length = buffers.length;
    for (let i = 0; i < length; i++) {
      blocks.push(this.#blockOf(buffers[i], what));
    }
    return blocks;
  }

  #blockOf(buffer: WatermarkBuffer<M>, what: string): _Block<M> {
    const block = this.#p.live.get(buffer as _Handle<M>);
    if (block !== undefined) return block;
    if (_Handle._is(buffer) && buffer.belongsTo(this.#p.owner)) {
      if (what === "free") {
        throw new DoubleFreeError(
          `Cannot free buffer #${buffer.id}: it was already released`,
        );
      }
      throw new UseAfterFreeError(
        `Cannot ${what} buffer #${buffer.id}: the buffer was released`,
      );
    }
    if (_Handle._is(buffer) && what === "free") {
      // a buffer of another allocator: a handle this one does not hold
      throw new DoubleFreeError(
        `Cannot free buffer #${buffer.id}: it is not a buffer of this allocator`,
      );
    }
    throw new InvalidArgumentError(
      `Cannot ${what} buffer ${
        describeValue(buffer)
      }: it is not a buffer of this allocator`,
      { name: "buffer", value: buffer },
    );
  }

  // ----------------------------------------------------------------- stats

  /**
   * The allocator's figures in the shared stats vocabulary.
   *
   * @returns A plain object; it does not change afterwards.
   */
  stats(): WatermarkStats {
    return _watermarkStats(this.#p);
  }

  /** Sets every peak to its current value. */
  resetPeakStats(): void {
    this.#p.stats.resetPeak();
  }

  /**
   * Sets every allocated and freed total, and the counters of
   * {@linkcode WatermarkAllocator.memoryStats}, to zero.
   */
  resetAccumulatedStats(): void {
    this.#p.stats.resetAccumulated();
  }

  /**
   * The stats in `@allot/core`'s vocabulary (PyTorch's
   * `memory_stats()`), so one report serves both allocators. Heaps are
   * segments; small and large pools are the pools of small and large
   * heaps (the scalar pool is small); `inactiveSplit` counts cached buffers
   * in shared heaps; `oversize…` count heaps of their own and their buffers;
   * `maxSplitByteLength` is the request size from which buffers get heaps of their
   * own.
   *
   * @returns A plain object.
   *
   * @example A text report like `torch.mps` users know from CUDA
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1 << 30 }));
   * using buffer = allocator.allocateBuffer(1000);
   * const stats = allocator.memoryStats();
   * assert.equal(stats.allocatedBytes.smallPool.current, 1024);
   * assert.equal(stats.reservedBytes.all.current, 128 << 10); // a small heap
   * assert.match(allocator.memorySummary(), /Allocated memory/);
   * ```
   */
  memoryStats(): MemoryStats {
    return this.#p.stats.memoryStats(this.#p.xlargeHeap / 2);
  }

  /**
   * {@linkcode WatermarkAllocator.memoryStats} as `@allot/core`'s text
   * table (PyTorch's `memory_summary()` layout).
   *
   * @param options Title and abbreviation.
   * @returns The table.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    // checked before the spread: keys that cannot be read (a trap proxy)
    // threw a raw error from it
    validateMemorySummaryOptions(options);
    return formatMemorySummary(this.memoryStats(), {
      title: `WatermarkAllocator on ${this.device}`,
      ...options,
    });
  }

  /**
   * Starts (or restarts, emptied) or stops recording allocator events in a
   * ring buffer, in `@allot/core`'s `TraceEntry` format; `snapshot()`
   * returns them as `history`.
   *
   * @param options Ring size and stack capture, or `false` to stop.
   */
  recordHistory(options: TraceRecorderOptions | false = {}): void {
    if (options !== false) validateObject(options, "options");
    this.#p.history = options === false ? null : new TraceRecorder(options);
  }

  /**
   * Every heap with its buffers and free ranges, in `@allot/core`'s
   * snapshot format (heaps are segments, every stream id is 0), plus pool
   * kinds, buffer ids, shapes and the stats.
   *
   * @returns A plain, JSON-ready object.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource({ capacityBytes: 1 << 30 }), { recordHistory: true });
   * const a = allocator.allocateBuffer(1000);
   * const [heap] = allocator.snapshot().segments;
   * assert.equal(heap.byteLength, 128 << 10); // the smallest small heap
   * assert.deepEqual(heap.blocks.map((b) => b.state), ["active_allocated", "inactive"]);
   * a.release();
   * assert.deepEqual(
   *   allocator.snapshot().history.map((e) => e.action),
   *   ["segment_alloc", "alloc", "snapshot", "free_requested", "free_completed", "snapshot"],
   * );
   * ```
   */
  snapshot(): WatermarkSnapshot {
    return {
      ...finishSnapshot(
        String(this.device),
        "WatermarkAllocator",
        _watermarkSegments(this.#p),
        this.#p.history,
      ),
      stats: this.stats(),
    };
  }

  // ------------------------------------------------------------- integrity

  /**
   * Checks every internal invariant: each heap belongs to its pool and is
   * tiled exactly by its buffers and its free ranges (sorted, merged, no
   * overlap), each buffer's state matches where it is listed (live handles,
   * pending frees, cached buckets), and every stat equals a recount. Strict
   * mode runs it on every call; tests call it after each step.
   *
   * @throws {AllotError} Naming the first broken invariant.
   *
   * @example
   * ```ts
   * import { WatermarkAllocator } from "@allot/watermark";
   * import { MockSegmentSource } from "@allot/core";
   *
   * const allocator = new WatermarkAllocator(new MockSegmentSource());
   * const buffer = allocator.allocateBuffer(100);
   * allocator.validate();
   * buffer.release();
   * allocator.validate();
   * ```
   */
  validate(): void {
    _validateWatermark(this.#p);
  }

  /**
   * Records that `stream` uses `buffer` (PyTorch's `recordStream`): when the
   * buffer is freed, it waits for a fence of the stream. The contract's name
   * of `recordEvents([buffer], stream)`.
   *
   * @param buffer A live buffer of this allocator.
   * @param stream The stream (or a fence) that uses it.
   * @throws {InvalidArgumentError} When the buffer is not a buffer of this
   * allocator, or `stream` is neither a `Stream` nor a `Fence`.
   * @throws {UseAfterFreeError} When the buffer was released.
   */
  recordStream(buffer: WatermarkBuffer<M>, stream: Stream | Fence): void {
    this.recordEvents([buffer], stream);
  }
}

/**
 * A member of a stream or fence the caller passed, read once; a read that
 * throws (a proxy that traps) is refused with a typed error, not passed on.
 */
function _member(work: object, key: "fence" | "wait" | "id"): unknown {
  try {
    return (work as Record<string, unknown>)[key];
  } catch (error) {
    throw new InvalidArgumentError(
      `Cannot record events: the work's ${key} cannot be read (${
        error instanceof Error ? error.message : "a non-error was thrown"
      })`,
      { name: `work.${key}`, value: work },
      { cause: error },
    );
  }
}

// Fences of one stream complete in order, so DeferredFrees reads only the
// oldest per stream. A bare fence has no stream: it gets a queue of its own
// (a key below every stream id).
const fenceKeys = new WeakMap<Fence, number>();
let nextFenceKey = -1;
function fenceKey(fence: Fence): number {
  let key = fenceKeys.get(fence);
  if (key === undefined) fenceKeys.set(fence, key = nextFenceKey--);
  return key;
}

/** The keys of `WatermarkAllocatorOptions` (unknown keys are refused). */
export const WATERMARK_OPTION_KEYS: readonly string[] = Object.freeze([
  "recommendedMaxBytes",
  "highWatermarkRatio",
  "lowWatermarkRatio",
  "unifiedMemory",
  "maxSmallByteLength",
  "minLargeByteLength",
  "smallHeapByteLength",
  "largeHeapByteLength",
  "xlargeHeapByteLength",
  "minSmallHeapByteLength",
  "minLargeHeapByteLength",
  "minXlargeHeapByteLength",
  "largeRoundByteLength",
  "maxSlackByteLength",
  "maxScalarByteLength",
  "driverAllocatedBytes",
  "debugVerbosity",
  "logger",
  "recordHistory",
  "hostView",
  "strict",
]);
