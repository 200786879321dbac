/**
 * {@linkcode SystemAllocator}: one `ArrayBuffer` per allocation, the fallback
 * that pooling allocators take big chunks from.
 *
 * @module
 */

import {
  AllocatorBase,
  AllotError,
  DataPtr,
  type Deleter,
  type Device,
  DoubleFreeError,
  OutOfMemoryError,
  Stat,
  type StatValues,
  validateByteLength,
  validateCapacity,
} from "@allot/core";
import {
  formatStatsSummary,
  type MemorySummaryOptions,
  validateOptionKeys,
} from "@allot/core";
import {
  requireSharedArrayBuffer,
  validateDevice,
  validateFlags,
  validateOptionalObject,
  validateOptions,
} from "./_options.ts";
import type { MemoryReporter } from "./memory_reporter.ts";
import { junkFill } from "./_fill.ts";

/** The memory (and deleter context) of a {@linkcode SystemAllocator} pointer. */
export type SystemMemory = ArrayBuffer | SharedArrayBuffer;

/** Options of {@linkcode SystemAllocator}. */
export interface SystemAllocatorOptions {
  /**
   * Make `SharedArrayBuffer`s instead of `ArrayBuffer`s.
   *
   * @default {false}
   */
  shared?: boolean;
  /**
   * Most bytes live at once; a request past it throws
   * {@linkcode OutOfMemoryError}.
   *
   * @default {Infinity}
   */
  capacityBytes?: number;
  /**
   * Fill fresh buffers with the junk pattern `0x7fedbeef` instead of the
   * zeros JavaScript gives, and junk-fill freed buffers.
   *
   * @default {false}
   */
  junkFill?: boolean;
  /**
   * Debug mode for hunting a bug: {@linkcode SystemAllocator.validate} runs
   * on every allocation and free, freed buffers are junk-filled, and a
   * freed `ArrayBuffer` is detached so that every stale view of it reads
   * length 0 (a `SharedArrayBuffer` cannot be detached: it reads junk).
   *
   * @default {false}
   */
  strict?: boolean;
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

/**
 * The system allocator, like Paddle's `CPUAllocator` and Majel's
 * `cpu::SystemAllocator`: every allocation is its own `ArrayBuffer` (or
 * `SharedArrayBuffer`), zero-filled by JavaScript, freed when its pointer is
 * released (the garbage collector reclaims the bytes). Slow per call, so
 * pooling allocators use it for big chunks only. It tracks bytes in use,
 * refuses double frees and foreign buffers, and can enforce a capacity.
 *
 * @example A fallback with a capacity
 * ```ts
 * import { SystemAllocator } from "@allot/cpu";
 * import { OutOfMemoryError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const system = new SystemAllocator({ capacityBytes: 1 << 20 });
 * const chunk = system.allocate(768 * 1024);
 * assert.equal(chunk.memory.byteLength, 768 * 1024);
 * assert.throws(() => system.allocate(512 * 1024), OutOfMemoryError);
 * chunk.release();
 * assert.equal(system.allocatedBytes, 0);
 * ```
 */
export class SystemAllocator extends AllocatorBase<SystemMemory, SystemMemory> {
  /** The device of every pointer. */
  readonly device: Device;
  /** Most bytes live at once. */
  readonly capacityBytes: number;
  #shared: boolean;
  #junkFill: boolean;
  #strict: boolean;
  #reporter: MemoryReporter | undefined;
  #live = new Set<SystemMemory>();
  #bytes = new Stat();
  #deleter: Deleter<SystemMemory>;

  /**
   * Creates a system allocator.
   *
   * @param options Sharing, capacity, fill and reporting options.
   * @throws {InvalidArgumentError} For a negative or NaN capacity.
   */
  constructor(options: SystemAllocatorOptions = {}) {
    super();
    validateOptions(options);
    validateOptionKeys(options, [
      "shared",
      "capacityBytes",
      "junkFill",
      "strict",
      "reporter",
      "device",
    ], "SystemAllocator");
    const flags = validateFlags(options, "shared", "strict", "junkFill");
    requireSharedArrayBuffer(flags.shared, "SystemAllocator");
    const capacity = validateCapacity(options.capacityBytes);
    this.capacityBytes = capacity;
    this.#shared = flags.shared;
    this.#strict = flags.strict;
    this.#junkFill = flags.junkFill || this.#strict;
    this.#reporter = validateOptionalObject(options.reporter, "reporter");
    this.device = validateDevice(options.device);
    this.#deleter = (memory) => this.#free(memory);
  }

  /** Bytes in live allocations. */
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

  /** Number of live allocations. */
  get allocationCount(): number {
    return this.#live.size;
  }

  /**
   * Bytes: current, peak, allocated and freed.
   *
   * @returns A plain copy.
   */
  stats(): StatValues {
    return this.#bytes.values();
  }

  /**
   * Allocates a new buffer of `byteLength` bytes.
   *
   * @param byteLength Number of bytes; 0 gives a pointer that owns nothing.
   * @returns An owning pointer whose memory is the whole buffer.
   * @throws {InvalidArgumentError} For a bad length.
   * @throws {OutOfMemoryError} Past `capacityBytes`, or when the engine
   * cannot make the buffer.
   */
  allocate(byteLength: number): DataPtr<SystemMemory, SystemMemory> {
    validateByteLength(byteLength);
    if (this.#strict) this.validate();
    if (byteLength === 0) {
      return new DataPtr(new ArrayBuffer(0), 0, 0, this.device);
    }
    const current = this.#bytes.current;
    let memory: SystemMemory | undefined;
    let cause: unknown;
    if (current + byteLength <= this.capacityBytes) {
      try {
        memory = this.#shared
          ? new SharedArrayBuffer(byteLength)
          : new ArrayBuffer(byteLength);
      } catch (error) {
        cause = error;
      }
    }
    if (memory === undefined) {
      this.#report("onOutOfMemory", byteLength);
      const free = this.capacityBytes - current;
      throw new OutOfMemoryError(
        `Cannot allocate ${byteLength} bytes: ${
          cause === undefined
            ? `${free} of ${this.capacityBytes} bytes free`
            : `the engine refused (${cause})`
        }, ${current} bytes in use`,
        {
          requestedBytes: byteLength,
          capacityBytes: this.capacityBytes,
          freeBytes: free,
          allocatedBytes: current,
          reservedBytes: current,
        },
        { cause },
      );
    }
    if (this.#junkFill) junkFill(memory, 0, byteLength);
    this.#live.add(memory);
    this.#bytes.increase(byteLength);
    this.#report("onAllocate", byteLength);
    if (this.#strict) this.validate();
    return new DataPtr(memory, 0, byteLength, this.device, {
      context: memory,
      deleter: this.#deleter,
    });
  }

  /**
   * The deleter of this allocator's contexts (the buffers).
   *
   * @returns The deleter `rawDeallocate` calls.
   */
  override rawDeleter(): Deleter<SystemMemory> {
    return this.#deleter;
  }

  #free(memory: SystemMemory): void {
    if (!this.#live.delete(memory)) {
      throw new DoubleFreeError(
        `Cannot free a buffer of ${
          (memory as ArrayBuffer)?.byteLength
        } bytes: it is not a live allocation of this SystemAllocator (freed already, or allocated elsewhere)`,
      );
    }
    const byteLength = memory.byteLength;
    if (this.#junkFill) junkFill(memory, 0, byteLength);
    this.#bytes.decrease(byteLength);
    this.#report("onFree", byteLength);
    if (this.#strict) {
      detach(memory);
      this.validate();
    }
  }

  /**
   * Checks that the live buffers add up to {@linkcode SystemAllocator.bytesInUse}
   * and that none was detached or resized behind the allocator's back.
   * Strict mode runs it on every call.
   *
   * @throws {AllotError} Naming the first broken invariant.
   *
   * @example
   * ```ts
   * import { SystemAllocator } from "@allot/cpu";
   *
   * const allocator = new SystemAllocator();
   * const ptr = allocator.allocate(64);
   * allocator.validate();
   * ptr.release();
   * ```
   */
  validate(): void {
    let bytes = 0;
    for (const memory of this.#live) {
      if (
        (memory as ArrayBuffer).detached === true || memory.byteLength === 0
      ) {
        throw new AllotError(
          "SystemAllocator is inconsistent: a live buffer was detached or emptied",
        );
      }
      bytes += memory.byteLength;
    }
    if (bytes !== this.#bytes.current) {
      throw new AllotError(
        `SystemAllocator is inconsistent: live buffers hold ${bytes} bytes, bytesInUse says ${this.#bytes.current}`,
      );
    }
  }

  /** Sets the peak of {@linkcode SystemAllocator.stats} to its current value. */
  resetPeakStats(): void {
    this.#bytes.resetPeak();
  }

  /**
   * Sets the `allocated` and `freed` totals of {@linkcode SystemAllocator.stats} to
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
      { allocatedBytes: this.stats(), allocationCount: this.allocationCount },
      options,
      "SystemAllocator",
    );
  }

  #report(
    event: "onAllocate" | "onFree" | "onOutOfMemory",
    byteLength: number,
  ): void {
    if (this.#reporter === undefined) return;
    try {
      // Read inside the try: a throwing getter must not undo what was done.
      const callback = this.#reporter[event];
      if (callback === undefined) return;
      callback.call(this.#reporter, {
        device: this.device,
        byteLength,
        byteOffset: event === "onOutOfMemory" ? -1 : 0,
        currentBytes: this.#bytes.current,
        peakBytes: this.#bytes.peak,
      });
    } catch {
      // A reporter must not change what the allocator did.
    }
  }
}

// Strict mode: a freed ArrayBuffer is detached, so every view of it reads
// length 0 (where the engine supports `transfer()`; otherwise it is only
// junk-filled).
function detach(memory: SystemMemory): void {
  const buffer = memory as ArrayBuffer & { transfer?: (n?: number) => unknown };
  if (
    typeof buffer.transfer === "function" &&
    !(memory instanceof SharedArrayBuffer)
  ) {
    buffer.transfer(0);
  }
}
