/**
 * {@linkcode MemoryReporter}: the allocation callbacks of PyTorch's
 * `ProfiledCPUMemoryReporter`, and {@linkcode ProfiledMemoryReporter}, which
 * keeps the figures.
 *
 * @module
 */

import type { Device } from "@allot/core";
import {
  describeValue,
  InvalidArgumentError,
  Stat,
  type StatValues,
  validateOptionKeys,
} from "@allot/core";
import { validateOptions } from "./_options.ts";

/** What a {@linkcode MemoryReporter} hears about one event. */
export interface MemoryReport {
  /** The device of the allocator. */
  device: Device;
  /** Bytes of the allocation, the free, or the failed request. */
  byteLength: number;
  /** Byte offset of the allocation in its memory (-1 for a failed request). */
  byteOffset: number;
  /** Bytes the allocator has handed out after the event. */
  currentBytes: number;
  /** Highest `currentBytes` so far. */
  peakBytes: number;
}

/**
 * Callbacks an allocator calls on every allocation, free and out-of-memory,
 * like PyTorch's `ProfiledCPUMemoryReporter` (`New`, `Delete`, `OutOfMemory`).
 * Every callback is optional. A reporter that throws does not change what the
 * allocator did.
 */
export interface MemoryReporter {
  /**
   * Called after an allocation.
   *
   * @param report The allocation and the figures after it.
   */
  onAllocate?(report: MemoryReport): void;
  /**
   * Called after a free.
   *
   * @param report The freed allocation and the figures after it.
   */
  onFree?(report: MemoryReport): void;
  /**
   * Called when a request cannot be served, before the error is thrown.
   *
   * @param report The failed request and the figures at that time.
   */
  onOutOfMemory?(report: MemoryReport): void;
}

/** Options of {@linkcode ProfiledMemoryReporter}. */
export interface ProfiledMemoryReporterOptions {
  /**
   * Receives one line per event, such as `allocate 1024 B at 64 (current
   * 1024 B, peak 1024 B)`.
   *
   * @default {undefined}
   */
  log?: (line: string) => void;
}

/**
 * A {@linkcode MemoryReporter} that keeps PyTorch's profiled figures: bytes
 * allocated now and at peak, allocation and free counts, failed requests.
 *
 * @example Watch an allocator
 * ```ts
 * import { CpuAllocator, ProfiledMemoryReporter } from "@allot/cpu";
 * import assert from "node:assert/strict";
 *
 * const reporter = new ProfiledMemoryReporter();
 * const allocator = new CpuAllocator({ byteLength: 4096, maxByteLength: 4096, reporter });
 * allocator.allocate(1000).release();
 * assert.equal(reporter.bytes.peak, 1000);
 * assert.equal(reporter.bytes.current, 0);
 * assert.throws(() => allocator.allocate(1 << 20));
 * assert.equal(reporter.outOfMemoryCount, 1);
 * ```
 */
export class ProfiledMemoryReporter implements MemoryReporter {
  /** Bytes handed out: current, peak, allocated, freed. */
  readonly bytes: Stat = new Stat();
  /** Live allocations: current, peak, allocated (count), freed (count). */
  readonly allocations: Stat = new Stat();
  #ooms = 0;
  #lastFailed = 0;
  #log: ((line: string) => void) | undefined;

  /**
   * Creates a reporter.
   *
   * @param options An optional log sink.
   */
  constructor(options: ProfiledMemoryReporterOptions = {}) {
    validateOptions(options);
    validateOptionKeys(options, ["log"], "ProfiledMemoryReporter");
    const log = options.log;
    if (log !== undefined && typeof log !== "function") {
      throw new InvalidArgumentError(
        `Invalid log: must be a function, received ${describeValue(log)}`,
        { name: "log", value: log, limit: "function" },
      );
    }
    this.#log = log;
  }

  /** Number of failed requests. */
  get outOfMemoryCount(): number {
    return this.#ooms;
  }

  /** Bytes of the last failed request (0 if none). */
  get lastFailedByteLength(): number {
    return this.#lastFailed;
  }

  /**
   * Records an allocation.
   *
   * @param report The event.
   */
  onAllocate(report: MemoryReport): void {
    this.bytes.increase(report.byteLength);
    this.allocations.increase(1);
    this.#log?.(
      `allocate ${report.byteLength} B at ${report.byteOffset} on ${report.device} (current ${report.currentBytes} B, peak ${report.peakBytes} B)`,
    );
  }

  /**
   * Records a free.
   *
   * @param report The event.
   */
  onFree(report: MemoryReport): void {
    this.bytes.decrease(report.byteLength);
    this.allocations.decrease(1);
    this.#log?.(
      `free ${report.byteLength} B at ${report.byteOffset} on ${report.device} (current ${report.currentBytes} B, peak ${report.peakBytes} B)`,
    );
  }

  /**
   * Records a failed request.
   *
   * @param report The event.
   */
  onOutOfMemory(report: MemoryReport): void {
    this.#ooms++;
    this.#lastFailed = report.byteLength;
    this.#log?.(
      `out of memory: ${report.byteLength} B on ${report.device} (current ${report.currentBytes} B, peak ${report.peakBytes} B)`,
    );
  }

  /**
   * The figures as plain values.
   *
   * @returns Bytes and allocation stats, and the failure count.
   */
  values(): {
    bytes: StatValues;
    allocations: StatValues;
    outOfMemoryCount: number;
  } {
    return {
      bytes: this.bytes.values(),
      allocations: this.allocations.values(),
      outOfMemoryCount: this.#ooms,
    };
  }
}
