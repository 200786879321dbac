/**
 * {@linkcode HostSegmentSource}: host `ArrayBuffer` segments for pooling
 * allocators (caching, watermark) that work on the CPU.
 *
 * @module
 */

import {
  type Device,
  optionOr,
  type Segment,
  SegmentLedger,
  type SegmentRequestOptions,
  type SegmentSource,
  validateAlignment,
  validateByteLength,
  validateCapacity,
  validateOptionKeys,
} from "@allot/core";
import {
  requireSharedArrayBuffer,
  validateDevice,
  validateFlags,
  validateOptions,
} from "./_options.ts";
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
    validateOptionKeys(options, [
      "shared",
      "capacityBytes",
      "alignment",
      "maxSegmentByteLength",
      "device",
    ], "HostSegmentSource");
    const { shared } = validateFlags(options, "shared");
    requireSharedArrayBuffer(shared, "HostSegmentSource");
    const capacity = validateCapacity(options.capacityBytes);
    this.capacityBytes = capacity;
    this.alignment = validateAlignment(optionOr(options.alignment, 64));
    this.maxSegmentByteLength = validateByteLength(
      optionOr(options.maxSegmentByteLength, 2 ** 32),
      Number.MAX_SAFE_INTEGER,
      "maxSegmentByteLength",
    );
    this.#shared = shared;
    this.device = validateDevice(options.device);
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
   * @param options `resizable: true` makes a resizable `ArrayBuffer` (a
   * growable `SharedArrayBuffer` when shared) that
   * {@linkcode HostSegmentSource.tryResizeSegment} can resize up to
   * `maxSegmentByteLength`; host memory is always host-visible.
   * @returns The segment, or `undefined` past the capacity or when the engine
   * cannot make the buffer.
   * @throws {InvalidArgumentError} For a length outside the limits, options
   * that are not an object, or a `resizable` or `hostVisible` that is not a
   * boolean.
   */
  tryAllocateSegment(
    byteLength: number,
    options?: SegmentRequestOptions,
  ): Segment<SystemMemory> | undefined {
    this.#ledger.checkRequest(byteLength, this.maxSegmentByteLength);
    if (options !== undefined) {
      validateOptions(options);
      validateOptionKeys(
        options,
        ["hostVisible", "label", "resizable"],
        "HostSegmentSource.tryAllocateSegment()",
      );
      validateFlags(options, "resizable", "hostVisible");
    }
    if (!this.#ledger.fits(byteLength, this.capacityBytes)) return undefined;
    let memory: SystemMemory;
    try {
      const max = options?.resizable === true
        ? { maxByteLength: this.maxSegmentByteLength }
        : undefined;
      memory = this.#shared
        ? new SharedArrayBuffer(byteLength, max)
        : new ArrayBuffer(byteLength, max);
    } catch {
      return undefined;
    }
    const segment = Object.freeze({ memory, byteOffset: 0, byteLength });
    this.#ledger.add(segment);
    return segment;
  }

  /**
   * Grows or shrinks a segment made with `resizable: true` in place, at its
   * end: the same `ArrayBuffer`, its bytes kept (a shared segment only
   * grows).
   *
   * @param segment A live segment of this source.
   * @param byteLength The new length, in `[1, maxSegmentByteLength]`.
   * @returns The segment with its new length, or `undefined` past the
   * capacity, for a fixed segment, a shared one asked to shrink, or when the
   * engine cannot commit the memory.
   * @throws {InvalidArgumentError} For a length outside the limits.
   * @throws {DoubleFreeError} When the segment is not live here.
   *
   * @example Grow a segment in place
   * ```ts
   * import { HostSegmentSource } from "@allot/cpu";
   * import assert from "node:assert/strict";
   *
   * const source = new HostSegmentSource({ capacityBytes: 1 << 20 });
   * const a = source.tryAllocateSegment(4096, { resizable: true })!;
   * new Uint8Array(a.memory)[0] = 7;
   * const b = source.tryResizeSegment(a, 8192)!;
   * assert.equal(b.memory, a.memory);
   * assert.equal(new Uint8Array(b.memory)[0], 7);
   * assert.equal(source.reservedBytes, 8192);
   * ```
   */
  tryResizeSegment(
    segment: Segment<SystemMemory>,
    byteLength: number,
  ): Segment<SystemMemory> | undefined {
    this.#ledger.checkRequest(byteLength, this.maxSegmentByteLength);
    const old = this.#ledger.bytesOf(segment);
    if (
      byteLength > old &&
      !this.#ledger.fits(byteLength - old, this.capacityBytes)
    ) return undefined;
    const memory = segment.memory;
    try {
      if (memory instanceof ArrayBuffer) {
        if (!memory.resizable) return undefined;
        memory.resize(byteLength);
      } else {
        if (!memory.growable || byteLength < memory.byteLength) {
          return undefined;
        }
        memory.grow(byteLength);
      }
    } catch {
      return undefined;
    }
    const resized = Object.freeze({ memory, byteOffset: 0, byteLength });
    this.#ledger.replace(segment, resized);
    return resized;
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
