/**
 * {@linkcode GpuPlannedAllocator}: `@allot/caching`'s
 * {@linkcode StepPlannedPool} on a {@linkcode GpuSegmentSource}, with
 * queue-order reuse.
 *
 * @module
 */

import {
  type PlannedBlock,
  StepPlannedPool,
  type StepPlannedPoolStats,
  StepPoolGroup,
} from "@allot/caching";
import {
  describeValue,
  type Device,
  InvalidArgumentError,
  type MemorySnapshot,
  type MemorySummaryOptions,
  OutOfMemoryError,
  type SynchronizeOptions,
  validateByteLength,
  validateObject,
  validateOptionKeys,
  validateSynchronizeOptions,
} from "@allot/core";
import {
  _assertAlive,
  type _DeviceState,
  _deviceState,
  _lostError,
} from "./_device_state.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import type { GpuAllocation, GpuAllocationOwner } from "./gpu_allocation.ts";
import { _makeAllocation } from "./_make_allocation.ts";
import { _anchorShapes } from "./_shape_anchors.ts";
import { GpuAllocatorAdapter } from "./gpu_allocator_adapter.ts";
import {
  GpuSegmentSource,
  type GpuSegmentSourceOptions,
} from "./gpu_segment_source.ts";

/** Options of {@linkcode GpuPlannedAllocator}. */
export interface GpuPlannedAllocatorOptions {
  /**
   * Options of the segment source made for the allocator (label, budget).
   *
   * @default {{}}
   */
  source?: GpuSegmentSourceOptions;
  /**
   * Held bytes allowed per live byte of the recent steps before free
   * buffers are destroyed.
   *
   * @default {1.1}
   */
  maxHeldRatio?: number;
  /**
   * Debug mode for hunting a bug: the pool validates before and after
   * every call that changes it (see `StepPlannedPool`'s `strict`). GPU
   * memory is not junk-filled (that would take a queue write); a released
   * {@linkcode GpuAllocation} is refused whether strict or not.
   *
   * @default {false}
   */
  strict?: boolean;
  /**
   * A group whose pools' held bytes are bounded together: one allocator
   * (and pool) per buffer usage on one device, say. Pass the same group to
   * each and call the group's `endStep()` (it ends every pool's step) in
   * place of each allocator's {@linkcode GpuPlannedAllocator.endStep}. See
   * `StepPoolGroup` in `@allot/caching`.
   *
   * @default {undefined} (the pool bounds its held bytes alone)
   */
  group?: StepPoolGroup;
}

/**
 * GPU memory for a runtime that works in steps (an inference, a training
 * step, a decoded token): call {@linkcode GpuPlannedAllocator.endStep} at
 * each step's end and a step that repeats is served from one buffer laid out
 * for it (greedy by size), with no buffer made; other requests are served by
 * best fit inside exactly sized buffers. On TF.js 4.22's real WebGPU traces
 * it holds 1.00–1.15× the peak live bytes, where TF.js's own pool holds
 * 1.00–2.7× and onnxruntime-web's buckets 1.2–1.45×
 * (`packages/webgpu/bench/real_traces.ts`).
 *
 * A freed range may serve the next request at once ("queue-order" reuse):
 * WebGPU has one queue per device and runs its commands in order, so work
 * submitted later that writes the range runs after the work submitted
 * earlier that read it. Free a range only after the commands that use it
 * were submitted (or before they were encoded); memory the CPU maps is not
 * served here.
 *
 * @example A repeating step makes no buffer after the first ones
 * ```ts
 * import { GpuPlannedAllocator } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const allocator = new GpuPlannedAllocator(device);
 *   let made = 0;
 *   for (let step = 0; step < 4; step++) {
 *     const a = allocator.allocate(4096);
 *     const b = allocator.allocate(65536);
 *     a.release();
 *     b.release();
 *     allocator.endStep();
 *     if (step === 1) made = allocator.source.allocationCount;
 *   }
 *   assert.equal(allocator.source.allocationCount, made);
 *   device.destroy();
 * }
 * ```
 */
export class GpuPlannedAllocator {
  /** The WebGPU device. */
  readonly gpuDevice: GPUDevice;
  /** Where buffers come from. */
  readonly source: GpuSegmentSource;
  /** The pool itself, for its figures. */
  readonly pool: StepPlannedPool<GPUBuffer>;
  #adapter: GpuAllocatorAdapter | undefined;
  #owner: GpuAllocationOwner;
  #state: _DeviceState;

  /**
   * Creates the source and the pool.
   *
   * @param device The WebGPU device.
   * @param options Source options and the held-bytes ratio.
   * @throws {InvalidArgumentError} For an option out of range, or a
   * `group` that is not a `StepPoolGroup` (nothing made).
   */
  constructor(device: GPUDevice, options: GpuPlannedAllocatorOptions = {}) {
    _anchorShapes("planned");
    validateObject(options, "options");
    validateOptionKeys(
      options,
      ["source", "maxHeldRatio", "strict", "group"],
      "GpuPlannedAllocator",
    );
    const group = options.group;
    if (group !== undefined && !StepPoolGroup._is(group)) {
      throw new InvalidArgumentError(
        `Invalid group: must be a StepPoolGroup, received ${
          describeValue(group)
        }`,
        { name: "group", value: group },
      );
    }
    this.gpuDevice = device;
    this.source = new GpuSegmentSource(device, options.source);
    const pool = new StepPlannedPool(this.source, {
      maxHeldRatio: options.maxHeldRatio,
      strict: options.strict,
      group,
    });
    this.pool = pool;
    this.#state = _deviceState(device);
    // (a handle's release() refuses nothing and calls this only while
    // the device is not lost: the device's state is the handle's too)
    this.#owner = {
      free: (token) => pool.free(token as PlannedBlock<GPUBuffer>),
    };
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
   * @returns The owning handle.
   * @throws {InvalidArgumentError} For a bad size or one above the device's
   * `maxBufferSize`.
   * @throws {OutOfMemoryError} When the budget cannot hold it.
   * @throws {DeviceLostError} When the device was lost.
   */
  allocate(byteLength: number): GpuAllocation {
    if (this.#state.lost) {
      validateByteLength(byteLength, this.source.maxSegmentByteLength);
      _assertAlive(this.gpuDevice, `allocate ${byteLength} bytes`);
    }
    // (the pool checks the size against the same limit)
    let block: PlannedBlock<GPUBuffer>;
    try {
      block = this.pool.allocate(byteLength);
    } catch (error) {
      // the device lost inside the call (a buffer destroyed to make room
      // lost it): the source's refusal came as a SegmentSourceError
      if (!this.#state.lost || error instanceof DeviceLostError) throw error;
      const lost = _lostError(
        this.gpuDevice,
        this.#state,
        `allocate ${byteLength} bytes`,
      );
      (lost as { cause?: unknown }).cause = error;
      throw lost;
    }
    return _makeAllocation(
      this.gpuDevice,
      block.memory,
      block.byteOffset,
      byteLength,
      this.#owner,
      block,
    );
  }

  /** Marks the end of a step (see {@linkcode StepPlannedPool.endStep}). */
  endStep(): void {
    // (the state `lost` reads, without the two getters in between)
    if (!this.#state.lost) this.pool.endStep();
  }

  /**
   * Destroys free buffers until at most `targetByteLength` bytes are held,
   * for a runtime told that memory is short.
   *
   * @param targetByteLength Bytes to get down to (0: every free buffer).
   * @returns The bytes held afterwards.
   * @throws {InvalidArgumentError} For a negative or non-integer target.
   */
  trim(targetByteLength = 0): number {
    if (this.lost) {
      validateByteLength(
        targetByteLength,
        Number.MAX_SAFE_INTEGER,
        "targetByteLength",
      );
      return 0;
    }
    return this.pool.trim(targetByteLength);
  }

  /**
   * Waits for the work submitted to the device's queue so far (the work
   * that used blocks freed before the call), for a caller that then
   * touches their memory outside the queue. Blocks need no wait to be
   * reused: a freed range is served again at once (queue order). Resolves
   * at once when the device was lost.
   *
   * Without a signal, a queue that never finishes its work makes it wait
   * forever.
   *
   * @param options A signal that stops the wait: the promise rejects with
   * its reason and nothing changes.
   * @returns Resolves when the queue's work submitted before the call is
   * done.
   * @throws {InvalidArgumentError} (as a rejection) For options that are
   * not an object, or a `signal` that is not an `AbortSignal`.
   * @throws {UseAfterFreeError} (as a rejection) Once the pool was disposed.
   */
  async synchronize(options?: SynchronizeOptions): Promise<void> {
    const signal = validateSynchronizeOptions(options);
    signal?.throwIfAborted();
    await this.pool.synchronize(options);
    if (this.lost) return;
    const done = this.gpuDevice.queue.onSubmittedWorkDone();
    if (signal === undefined) return await done;
    // (aborted while the pool was awaited: the listener below would never
    // hear it)
    signal.throwIfAborted();
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      done.then(() => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      }, (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      });
    });
  }

  /** Destroys every free buffer (`trim(0)`). */
  emptyCache(): void {
    this.trim(0);
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
   * Allocates like {@linkcode GpuPlannedAllocator.allocate}, but returns `undefined`
   * where it would throw out of memory. A bad request, or a lost device,
   * still throws.
   *
   * @param byteLength Bytes; 0 gives an ordinary 0-byte allocation.
   * @returns The owning handle, or `undefined` when the memory is full.
   * @throws {InvalidArgumentError} For a bad size.
   * @throws {DeviceLostError} When the device was lost.
   */
  tryAllocate(byteLength: number): GpuAllocation | undefined {
    try {
      return this.allocate(byteLength);
    } catch (error) {
      if (error instanceof OutOfMemoryError) return undefined;
      throw error;
    }
  }

  /**
   * The pool's figures (the same as `pool.stats()`).
   *
   * @returns A plain copy.
   */
  stats(): StepPlannedPoolStats {
    return this.pool.stats();
  }

  /**
   * A text table of the stats, in the layout of
   * `torch.cuda.memory_summary()` (the same as `pool.memorySummary()`).
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return this.pool.memorySummary(options);
  }

  /**
   * Checks every internal invariant (the same as `pool.validate()`).
   *
   * @throws {AllotError} Naming the first broken invariant.
   */
  validate(): void {
    this.pool.validate();
  }

  /** Sets every peak of the stats to its current value. */
  resetPeakStats(): void {
    this.pool.resetPeakStats();
  }

  /** Sets the `allocated` and `freed` totals of the stats to 0. */
  resetAccumulatedStats(): void {
    this.pool.resetAccumulatedStats();
  }

  /**
   * A picture of the pool's buffers and blocks (the same as
   * `pool.snapshot()`), in `torch.cuda.memory_snapshot()`'s shape.
   *
   * @returns The snapshot (plain data).
   */
  snapshot(): MemorySnapshot {
    return this.pool.snapshot();
  }
}
