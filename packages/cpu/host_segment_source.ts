/**
 * {@linkcode HostSegmentSource}: host `ArrayBuffer` segments for pooling
 * allocators (caching, watermark) that work on the CPU.
 *
 * @module
 */

import {
  Device,
  type Segment,
  SegmentLedger,
  type SegmentRequestOptions,
  type SegmentSource,
  validateAlignment,
  validateByteLength,
  validateCapacity,
} from "@allot/core";
import { validateOptions } from "./_options.ts";
import type { SystemMemory } from "./system_allocator.ts";

/** Options of {@linkcode HostSegmentSource}. */
export interface HostSegmentSourceOptions {
  /**
   * Make `SharedArrayBuffer` segments.
   *
   * @default {false}
   */
  shared?: boolean;
  /**
   * Most bytes in live segments; requests past it return `undefined`.
   *
   * @default {Infinity}
   */
  capacityBytes?: number;
  /**
   * Offset alignment that pools must keep inside a segment.
   *
   * @default {64}
   */
  alignment?: number;
  /**
   * Largest single segment.
   *
   * @default {2 ** 32}
   */
  maxSegmentByteLength?: number;
  /**
   * The device to report.
   *
   * @default {Device.cpu()}
   */
  device?: Device;
}

/**
 * A core {@linkcode SegmentSource} of host memory: each segment is a new
 * `ArrayBuffer` (or `SharedArrayBuffer`), so the caching and watermark
 * allocators can pool CPU memory. It counts live bytes, enforces an optional
 * capacity and refuses segments it did not make.
 *
 * @example A caching allocator's CPU device
 * ```ts
 * import { HostSegmentSource } from "@allot/cpu";
 * import assert from "node:assert/strict";
 *
 * const source = new HostSegmentSource({ capacityBytes: 1 << 20 });
 * const segment = source.tryAllocateSegment(1 << 19);
 * assert.ok(segment && segment.memory.byteLength === 1 << 19);
 * assert.equal(source.tryAllocateSegment(1 << 20), undefined);
 * source.freeSegment(segment);
 * assert.equal(source.reservedBytes, 0);
 * ```
 */
export class HostSegmentSource implements SegmentSource<SystemMemory> {
  /** The device reported. */
  readonly device: Device;
  /** Offset alignment inside segments. */
  readonly alignment: number;
  /** Largest single segment. */
  readonly maxSegmentByteLength: number;
  /** Most bytes in live segments. */
  readonly capacityBytes: number;
  #shared: boolean;
  #ledger = new SegmentLedger<SystemMemory>("this HostSegmentSource");

  /**
   * Creates a host segment source.
   *
   * @param options Sharing, capacity and limits.
   * @throws {InvalidArgumentError} For bad limits.
   */
  constructor(options: HostSegmentSourceOptions = {}) {
    validateOptions(options);
    const capacity = validateCapacity(options.capacityBytes);
    this.capacityBytes = capacity;
    this.alignment = validateAlignment(options.alignment ?? 64);
    this.maxSegmentByteLength = validateByteLength(
      options.maxSegmentByteLength ?? 2 ** 32,
      Number.MAX_SAFE_INTEGER,
      "maxSegmentByteLength",
    );
    this.#shared = options.shared ?? false;
    this.device = options.device ?? Device.cpu();
  }

  /** Bytes in live segments. */
  get reservedBytes(): number {
    return this.#ledger.reservedBytes;
  }

  /** Highest `reservedBytes` so far. */
  get peakReservedBytes(): number {
    return this.#ledger.peakReservedBytes;
  }

  /** Segments made so far. */
  get allocationCount(): number {
    return this.#ledger.allocationCount;
  }

  /** Segments freed so far. */
  get freeCount(): number {
    return this.#ledger.freeCount;
  }

  /** Number of live segments. */
  get liveSegmentCount(): number {
    return this.#ledger.liveSegmentCount;
  }

  /**
   * Makes a segment of exactly `byteLength` bytes.
   *
   * @param byteLength Bytes, in `[1, maxSegmentByteLength]`.
   * @param _options Ignored: host memory is always host-visible.
   * @returns The segment, or `undefined` past the capacity or when the engine
   * cannot make the buffer.
   * @throws {InvalidArgumentError} For a length outside the limits.
   */
  tryAllocateSegment(
    byteLength: number,
    _options?: SegmentRequestOptions,
  ): Segment<SystemMemory> | undefined {
    this.#ledger.checkRequest(byteLength, this.maxSegmentByteLength);
    if (!this.#ledger.fits(byteLength, this.capacityBytes)) return undefined;
    let memory: SystemMemory;
    try {
      memory = this.#shared
        ? new SharedArrayBuffer(byteLength)
        : new ArrayBuffer(byteLength);
    } catch {
      return undefined;
    }
    const segment = Object.freeze({ memory, byteOffset: 0, byteLength });
    this.#ledger.add(segment);
    return segment;
  }

  /**
   * Returns a segment.
   *
   * @param segment A live segment of this source.
   * @throws {DoubleFreeError} When the segment is not live here.
   */
  freeSegment(segment: Segment<SystemMemory>): void {
    this.#ledger.remove(segment);
  }
}
