/**
 * {@linkcode SegmentSource}: the raw device allocator that pooling allocators
 * (caching, watermark) take big segments from, and {@linkcode MockSegmentSource},
 * a device with a capacity limit for tests and trace replay.
 *
 * @module
 */

import { Device } from "./device.ts";
import { InvalidArgumentError } from "./errors.ts";
import { SegmentLedger } from "./segment_ledger.ts";
import { validateOptionKeys } from "./option_keys.ts";
import {
  describeValue,
  optionOr,
  validateAlignment,
  validateByteLength,
  validateCapacity,
  validateFlag,
  validateObject,
} from "./validate.ts";

/** One device allocation: a whole memory, or a range of one. */
export interface Segment<M = unknown> {
  /** The memory (a `GPUBuffer`, an `ArrayBuffer`, a mock id object, ...). */
  readonly memory: M;
  /** Byte offset of the segment in its memory (0 for a whole buffer). */
  readonly byteOffset: number;
  /** Byte length of the segment. */
  readonly byteLength: number;
}

/** Options of one segment request. */
export interface SegmentRequestOptions {
  /**
   * Ask for host-visible memory (mappable GPU buffers, or host memory the
   * device reads), as the watermark allocator's shared pool needs.
   *
   * @default {false}
   */
  hostVisible?: boolean;
  /**
   * A label for the device object, shown by debuggers.
   *
   * @default {undefined}
   */
  label?: string;
  /**
   * Ask for a segment that {@linkcode SegmentSource.tryResizeSegment} can
   * later grow or shrink in place (a resizable `ArrayBuffer`). A source that
   * cannot make one makes a fixed segment.
   *
   * @default {false}
   */
  resizable?: boolean;
}

/**
 * A raw device allocator in the manner of CubeCL's `ComputeStorage`: it makes
 * and frees whole segments and knows the device's limits. Pools sit on top.
 *
 * @typeParam M Type of the memory of a segment.
 */
export interface SegmentSource<M = unknown> {
  /** The device the segments live on. */
  readonly device: Device;
  /** Every block offset inside a segment must be a multiple of this. */
  readonly alignment: number;
  /** The largest segment the device can make, in bytes. */
  readonly maxSegmentByteLength: number;
  /** Total device memory in bytes, when known (`Infinity` otherwise). */
  readonly capacityBytes: number;
  /**
   * Makes a segment of exactly `byteLength` bytes.
   *
   * @param byteLength Bytes, in `[1, maxSegmentByteLength]`.
   * @param options Host visibility and label.
   * @returns The segment, or `undefined` when the device is out of memory.
   * @throws {InvalidArgumentError} For a length outside the device's limits.
   */
  tryAllocateSegment(
    byteLength: number,
    options?: SegmentRequestOptions,
  ): Segment<M> | undefined;
  /**
   * Returns a segment to the device.
   *
   * @param segment A segment from `tryAllocateSegment`.
   */
  freeSegment(segment: Segment<M>): void;
  /**
   * Optional: changes the length of a live segment in place, at its end,
   * keeping its memory and byte offset (and the bytes below the smaller of
   * the two lengths), as a resizable `ArrayBuffer` or a growing
   * `WebAssembly.Memory` can. Pooling allocators grow a segment with it
   * instead of taking a new one (PyTorch's expandable segments, in spirit).
   *
   * @param segment A live segment of this source.
   * @param byteLength The new length, in `[1, maxSegmentByteLength]`.
   * @returns The segment with its new length (the record passed in is no
   * longer live), or `undefined` when the device cannot (out of memory, or
   * the segment was not made resizable); then nothing changed.
   * @throws {InvalidArgumentError} For a length outside the device's limits.
   * @throws {DoubleFreeError} When the segment is not live here.
   */
  tryResizeSegment?(
    segment: Segment<M>,
    byteLength: number,
  ): Segment<M> | undefined;
}

/** The memory of a {@linkcode MockSegmentSource} segment. */
export interface MockMemory {
  /** Unique id of the device allocation. */
  readonly id: number;
  /** Host bytes behind the segment when the mock is `backed`. */
  readonly bytes: Uint8Array | undefined;
  /** Whether the segment was requested host-visible. */
  readonly hostVisible: boolean;
  /** Whether the segment was requested resizable. */
  readonly resizable?: boolean;
}

/** Options of {@linkcode MockSegmentSource}. */
export interface MockSegmentSourceOptions {
  /**
   * Device capacity in bytes; requests that would exceed it fail.
   *
   * @default {Infinity}
   */
  capacityBytes?: number;
  /**
   * Offset alignment inside segments.
   *
   * @default {256}
   */
  alignment?: number;
  /**
   * Largest single segment.
   *
   * @default {2 ** 40}
   */
  maxSegmentByteLength?: number;
  /**
   * Back each segment with a real `Uint8Array` so tests can check bytes.
   *
   * @default {false}
   */
  backed?: boolean;
  /**
   * The device to report.
   *
   * @default {Device.parse("mock:0")}
   */
  device?: Device;
}

/**
 * A fake device with a fixed capacity that counts its allocations: for model
 * tests and trace replay of pooling allocators. It can be told to fail or
 * throw on the next requests.
 *
 * @example
 * ```ts
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource({ capacityBytes: 1024 });
 * const a = device.tryAllocateSegment(768);
 * assert.ok(a);
 * assert.equal(device.tryAllocateSegment(512), undefined); // over capacity
 * device.freeSegment(a);
 * assert.equal(device.reservedBytes, 0);
 * assert.equal(device.allocationCount, 1);
 * ```
 */
export class MockSegmentSource implements SegmentSource<MockMemory> {
  /** The device reported. */
  readonly device: Device;
  /** Offset alignment inside segments. */
  readonly alignment: number;
  /** Largest single segment. */
  readonly maxSegmentByteLength: number;
  /** Device capacity in bytes. */
  capacityBytes: number;
  #backed: boolean;
  #nextId = 1;
  #ledger: SegmentLedger<MockMemory>;
  #failures = 0;
  #resizes = 0;
  #failNext = 0;
  #throwNext = 0;

  /**
   * Creates a mock device.
   *
   * @param options Capacity, alignment, limits and backing.
   */
  constructor(options: MockSegmentSourceOptions = {}) {
    validateObject(options, "options");
    validateOptionKeys(options, [
      "capacityBytes",
      "alignment",
      "maxSegmentByteLength",
      "backed",
      "device",
    ], "MockSegmentSource");
    const capacity = validateCapacity(options.capacityBytes);
    this.capacityBytes = capacity;
    this.alignment = validateAlignment(optionOr(options.alignment, 256));
    this.maxSegmentByteLength = validateByteLength(
      optionOr(options.maxSegmentByteLength, 2 ** 40),
      Number.MAX_SAFE_INTEGER,
      "maxSegmentByteLength",
    );
    this.#backed = validateFlag(options.backed, "backed", false);
    const device = options.device ?? new Device("mock", 0);
    if (!Device.isDevice(device)) {
      throw new InvalidArgumentError(
        `Invalid device: must be a Device, received ${describeValue(device)}`,
        { name: "device", value: device, limit: "Device" },
      );
    }
    this.device = device;
    this.#ledger = new SegmentLedger(String(this.device));
  }

  /** Bytes in live segments. */
  get reservedBytes(): number {
    return this.#ledger.reservedBytes;
  }

  /** Highest `reservedBytes` ever. */
  get peakReservedBytes(): number {
    return this.#ledger.peakReservedBytes;
  }

  /** Successful segment allocations so far. */
  get allocationCount(): number {
    return this.#ledger.allocationCount;
  }

  /** Segment frees so far. */
  get freeCount(): number {
    return this.#ledger.freeCount;
  }

  /** Successful in-place resizes so far. */
  get resizeCount(): number {
    return this.#resizes;
  }

  /** Requests refused for capacity or by `failNext`. */
  get failureCount(): number {
    return this.#failures;
  }

  /** Number of live segments. */
  get liveSegmentCount(): number {
    return this.#ledger.liveSegmentCount;
  }

  /**
   * Makes the next `count` requests return `undefined` (out of memory).
   *
   * @param count Number of requests to refuse.
   */
  failNext(count = 1): void {
    validateByteLength(
      count,
      Number.MAX_SAFE_INTEGER - this.#failNext,
      "count",
    );
    this.#failNext += count;
  }

  /**
   * Makes the next `count` requests throw an `Error` (a faulty device).
   *
   * @param count Number of requests that throw.
   */
  throwNext(count = 1): void {
    validateByteLength(
      count,
      Number.MAX_SAFE_INTEGER - this.#throwNext,
      "count",
    );
    this.#throwNext += count;
  }

  /**
   * Makes a segment, or returns `undefined` past the capacity.
   *
   * @param byteLength Bytes, in `[1, maxSegmentByteLength]`.
   * @param options Host visibility.
   * @returns The segment or `undefined`.
   */
  tryAllocateSegment(
    byteLength: number,
    options: SegmentRequestOptions = {},
  ): Segment<MockMemory> | undefined {
    this.#ledger.checkRequest(byteLength, this.maxSegmentByteLength);
    validateObject(options, "options");
    validateOptionKeys(
      options,
      ["hostVisible", "label", "resizable"],
      "MockSegmentSource.tryAllocateSegment()",
    );
    const resizable = validateFlag(options.resizable, "resizable", false);
    const hostVisible = validateFlag(options.hostVisible, "hostVisible", false);
    if (this.#throwNext > 0) {
      this.#throwNext--;
      throw new Error(`Mock device failed to allocate ${byteLength} bytes`);
    }
    if (
      this.#failNext > 0 || !this.#ledger.fits(byteLength, this.capacityBytes)
    ) {
      if (this.#failNext > 0) this.#failNext--;
      this.#failures++;
      return undefined;
    }
    const segment: Segment<MockMemory> = Object.freeze({
      memory: Object.freeze({
        id: this.#nextId++,
        bytes: this.#backed
          ? new Uint8Array(
            resizable
              ? new ArrayBuffer(byteLength, {
                maxByteLength: Math.min(this.maxSegmentByteLength, 2 ** 32),
              })
              : new ArrayBuffer(byteLength),
          )
          : undefined,
        hostVisible,
        resizable,
      }),
      byteOffset: 0,
      byteLength,
    });
    this.#ledger.add(segment);
    return segment;
  }

  /**
   * Grows or shrinks a segment made with `resizable: true` at its end, or
   * returns `undefined` past the capacity (or for a fixed segment, or when
   * `failNext` says so). A backed segment keeps its bytes.
   *
   * @param segment A live segment of this device.
   * @param byteLength The new length, in `[1, maxSegmentByteLength]`.
   * @returns The segment with its new length, or `undefined`.
   * @throws {InvalidArgumentError} For a length outside the limits.
   * @throws {DoubleFreeError} When the segment is not live here.
   *
   * @example
   * ```ts
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const device = new MockSegmentSource({ capacityBytes: 4096 });
   * const a = device.tryAllocateSegment(1024, { resizable: true })!;
   * const b = device.tryResizeSegment(a, 3072)!;
   * assert.equal(b.memory, a.memory);
   * assert.equal(device.reservedBytes, 3072);
   * assert.equal(device.tryResizeSegment(b, 8192), undefined); // over capacity
   * ```
   */
  tryResizeSegment(
    segment: Segment<MockMemory>,
    byteLength: number,
  ): Segment<MockMemory> | undefined {
    this.#ledger.checkRequest(byteLength, this.maxSegmentByteLength);
    const old = this.#ledger.bytesOf(segment);
    if (this.#throwNext > 0) {
      this.#throwNext--;
      throw new Error(`Mock device failed to resize to ${byteLength} bytes`);
    }
    const grow = byteLength - old;
    if (
      segment.memory.resizable !== true || this.#failNext > 0 ||
      (grow > 0 && !this.#ledger.fits(grow, this.capacityBytes))
    ) {
      if (this.#failNext > 0) this.#failNext--;
      this.#failures++;
      return undefined;
    }
    const bytes = segment.memory.bytes;
    if (bytes !== undefined) {
      const buffer = bytes.buffer as ArrayBuffer;
      if (byteLength > buffer.maxByteLength) {
        this.#failures++;
        return undefined;
      }
      buffer.resize(byteLength);
    }
    const resized: Segment<MockMemory> = Object.freeze({
      memory: segment.memory,
      byteOffset: segment.byteOffset,
      byteLength,
    });
    this.#ledger.replace(segment, resized);
    this.#resizes++;
    return resized;
  }

  /**
   * Frees a live segment.
   *
   * @param segment A segment of this device.
   * @throws {DoubleFreeError} When the segment is not live on this device.
   */
  freeSegment(segment: Segment<MockMemory>): void {
    this.#ledger.remove(segment);
  }
}
