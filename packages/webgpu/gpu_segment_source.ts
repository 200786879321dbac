/**
 * {@linkcode GpuSegmentSource}: the raw WebGPU allocator. Pooling allocators
 * (`@allot/caching`, `@allot/watermark`) take big segments from it and carve
 * them into blocks; each block is a {@linkcode GpuBinding}.
 *
 * @module
 */

import { _recordBufferDevice } from "./_buffer_devices.ts";
import {
  _checkDevice,
  _checkLabel,
  _checkLimits,
  _checkOptions,
  _checkUsage,
} from "./_validate_gpu.ts";
import {
  _DEFAULT_SEGMENT_USAGE as DEFAULT_USAGE,
  _Usage,
  _usageNames,
} from "./_flags.ts";
import { type DeviceBudget, deviceBudget } from "./device_budget.ts";
import {
  alignUp,
  describeValue,
  Device,
  InvalidArgumentError,
  optionOr,
  type Segment,
  SegmentLedger,
  type SegmentRequestOptions,
  type SegmentSource,
  validateCapacity,
  validateFlag,
  validateInteger,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import { _assertAlive, _deviceState, _onDeviceLost } from "./_device_state.ts";

/** How a {@linkcode GpuSegmentSource} answers a host-visible request. */
export type HostVisibleMode = "staged" | "refuse";

/** Options of {@linkcode GpuSegmentSource}. */
export interface GpuSegmentSourceOptions {
  /**
   * Prefix of every buffer label.
   *
   * @default {"allot"}
   */
  label?: string;
  /**
   * Index reported in {@linkcode GpuSegmentSource.device} (`webgpu:<index>`).
   *
   * @default {0}
   */
  index?: number;
  /**
   * A budget in bytes: requests that would hold more return `undefined`.
   * WebGPU reports real out-of-memory only asynchronously, so a budget is the
   * only way to refuse synchronously. `"device"`: the budget
   * {@linkcode deviceBudget} gives (half of host memory for an adapter whose
   * buffers live there, a software or Apple adapter; no budget for others,
   * since WebGPU tells no device's memory size).
   *
   * @default {"device"}
   */
  capacityBytes?: number | "device";
  /**
   * What `hostVisible: true` means. WebGPU cannot combine `MAP_READ` or
   * `MAP_WRITE` with `STORAGE`, so no buffer is both bindable and mapped.
   * `"staged"` makes an ordinary buffer (of the source's usage), records it
   * as shared, and leaves host access to a staging pool (`GpuStaging`), which
   * copies: a usage with neither `COPY_SRC` nor `COPY_DST` refuses as
   * `"refuse"` does. `"refuse"` returns `undefined`, so the caller falls back
   * to private memory.
   *
   * @default {"staged"}
   */
  hostVisible?: HostVisibleMode;
  /**
   * The `GPUBufferUsage` of every segment's buffer (a buffer's usage is
   * fixed when it is made, so one source, and one allocator over it, pools
   * one usage): `GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST` for the
   * uniform buffers a runtime makes per dispatch, `VERTEX`, `INDEX`,
   * `INDIRECT`, ... Known bits only, not 0; `MAP_READ` and `MAP_WRITE` are
   * refused (a buffer has one map state, and the queue cannot use it while
   * any range is mapped, so the blocks of one segment could not be mapped
   * independently: reach blocks from the host through `GpuStaging`). The usage sets the block alignment and
   * {@linkcode GpuSegmentSource.maxBindingByteLength}.
   *
   * @default {GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST}
   */
  usage?: number;
}

/** `resolveQuerySet` writes at multiples of 256 bytes (the spec's constant). */
const QUERY_RESOLVE_ALIGNMENT = 256;

/**
 * The limits of a source's usage: block alignment and the largest range
 * every binding kind in the usage can cover.
 */
function usageLimits(
  device: GPUDevice,
  usage: number,
  maxSegment: number,
): { alignment: number; maxBinding: number } {
  const limits = device.limits;
  let alignment = 4; // copyBufferToBuffer, writeBuffer, vertex, index, indirect
  let maxBinding = maxSegment; // vertex, index, indirect: any range
  if ((usage & _Usage.STORAGE) !== 0) {
    alignment = Math.max(alignment, limits.minStorageBufferOffsetAlignment);
    maxBinding = Math.min(maxBinding, limits.maxStorageBufferBindingSize);
  }
  if ((usage & _Usage.UNIFORM) !== 0) {
    alignment = Math.max(alignment, limits.minUniformBufferOffsetAlignment);
    maxBinding = Math.min(maxBinding, limits.maxUniformBufferBindingSize);
  }
  if ((usage & _Usage.QUERY_RESOLVE) !== 0) {
    alignment = Math.max(alignment, QUERY_RESOLVE_ALIGNMENT);
  }
  return { alignment, maxBinding };
}

let nextBufferId = 1;

/**
 * A {@linkcode SegmentSource} over a `GPUDevice`: each segment is one
 * labelled `GPUBuffer` of one usage (by default `STORAGE | COPY_SRC |
 * COPY_DST`; see {@linkcode GpuSegmentSourceOptions.usage}). It respects the
 * device's limits for that usage: `maxBufferSize` caps a segment; the
 * alignment of every block is `minStorageBufferOffsetAlignment` when the
 * usage has `STORAGE`, `minUniformBufferOffsetAlignment` when it has
 * `UNIFORM` (the larger when both), 256 with `QUERY_RESOLVE`, and 4
 * otherwise (what vertex, index and indirect offsets and copies need); and
 * {@linkcode GpuSegmentSource.maxBindingByteLength} is the largest block
 * that binds as every binding kind of the usage.
 *
 * Out of memory: requests over `capacityBytes` return `undefined` at once;
 * each buffer is made inside an `out-of-memory` error scope, and a reported
 * failure is counted in `outOfMemoryCount` and lowers `capacityBytes` to what
 * was held, so later requests are refused synchronously.
 *
 * When the device is lost, every live buffer is destroyed, the bookkeeping is
 * dropped, `freeSegment` becomes a no-op and `tryAllocateSegment` throws
 * `DeviceLostError`.
 *
 * @example Allocate and free a segment
 * ```ts
 * import { GpuSegmentSource } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const source = new GpuSegmentSource(device);
 *   const segment = source.tryAllocateSegment(1 << 20);
 *   assert.ok(segment);
 *   assert.equal(segment.memory.size, 1 << 20);
 *   assert.equal(source.reservedBytes, 1 << 20);
 *   source.freeSegment(segment);
 *   assert.equal(source.reservedBytes, 0);
 *   device.destroy();
 * }
 * ```
 */
export class GpuSegmentSource implements SegmentSource<GPUBuffer> {
  /** The allot device (`webgpu:<index>`). */
  readonly device: Device;
  /** The WebGPU device the buffers live on. */
  readonly gpuDevice: GPUDevice;
  /**
   * Block offset alignment, from the usage: `minStorageBufferOffsetAlignment`
   * with `STORAGE`, `minUniformBufferOffsetAlignment` with `UNIFORM` (the
   * larger when both), 256 with `QUERY_RESOLVE`, at least 4.
   */
  readonly alignment: number;
  /** Largest segment: `maxBufferSize`, rounded down to a multiple of 4. */
  readonly maxSegmentByteLength: number;
  /**
   * Largest range that binds as every binding kind of the usage:
   * `maxStorageBufferBindingSize` with `STORAGE`, `maxUniformBufferBindingSize`
   * with `UNIFORM` (the smaller when both); a usage that binds nothing
   * (vertex, index, indirect, copies) is limited by the buffer only:
   * `maxSegmentByteLength`.
   */
  readonly maxBindingByteLength: number;
  /** The `GPUBufferUsage` of every buffer made here. */
  readonly usage: number;
  /** The budget in bytes; lowered when the device reports out of memory. */
  capacityBytes: number;
  /**
   * Where the budget came from: the `capacityBytes` option, host memory (see
   * {@linkcode deviceBudget}), or nothing known (`Infinity`).
   */
  readonly capacityBasis: "option" | DeviceBudget["basis"];
  #label: string;
  #usageTag: string;
  #hostVisible: HostVisibleMode;
  /** Whether host-visible requests are served (staged through copies). */
  #staged: boolean;
  #ledger: SegmentLedger<GPUBuffer>;
  #shared = new WeakSet<GPUBuffer>();
  #refusals = 0;
  #outOfMemory = 0;

  /**
   * Creates a segment source on `device`.
   *
   * @param device The WebGPU device.
   * @param options Label, device index, budget, host-visible mode, usage.
   * @throws {InvalidArgumentError} For a negative budget, a bad index or
   * usage, or a device limit the usage reads that is not a positive integer.
   */
  constructor(device: GPUDevice, options?: GpuSegmentSourceOptions) {
    _checkDevice(device, "Cannot make a GpuSegmentSource");
    options = _checkOptions(options, "source options");
    validateOptionKeys(
      options,
      ["label", "index", "capacityBytes", "hostVisible", "usage"],
      "GpuSegmentSource",
    );
    // read once: a getter is not asked twice
    const usage = _checkUsage(options.usage, DEFAULT_USAGE);
    const limitNames: (keyof GPUSupportedLimits)[] = ["maxBufferSize"];
    if ((usage & _Usage.STORAGE) !== 0) {
      limitNames.push(
        "minStorageBufferOffsetAlignment",
        "maxStorageBufferBindingSize",
      );
    }
    if ((usage & _Usage.UNIFORM) !== 0) {
      limitNames.push(
        "minUniformBufferOffsetAlignment",
        "maxUniformBufferBindingSize",
      );
    }
    _checkLimits(device, "Cannot make a GpuSegmentSource", limitNames);
    const option = optionOr<number | "device">(options.capacityBytes, "device");
    const budget = option === "device" ? deviceBudget(device) : undefined;
    const capacity = budget?.capacityBytes ??
      validateCapacity(option as number);
    const mode = optionOr(options.hostVisible, "staged");
    if (mode !== "staged" && mode !== "refuse") {
      throw new InvalidArgumentError(
        `Invalid hostVisible: must be "staged" or "refuse", received ${
          describeValue(mode)
        }`,
        { name: "hostVisible", value: mode, limit: ["staged", "refuse"] },
      );
    }
    this.device = new Device(
      "webgpu",
      validateInteger(optionOr(options.index, 0), 0, 0xffff, "index"),
    );
    this.gpuDevice = device;
    this.capacityBytes = capacity;
    this.capacityBasis = budget?.basis ?? "option";
    this.#label = _checkLabel(options.label, "allot");
    this.#hostVisible = mode;
    this.usage = usage;
    // staging reaches a buffer only through copies
    this.#staged = mode === "staged" &&
      (usage & (_Usage.COPY_SRC | _Usage.COPY_DST)) !== 0;
    this.#usageTag = usage === DEFAULT_USAGE ? "" : ` [${_usageNames(usage)}]`;
    this.maxSegmentByteLength = Math.floor(device.limits.maxBufferSize / 4) * 4;
    const limits = usageLimits(device, usage, this.maxSegmentByteLength);
    this.alignment = limits.alignment;
    this.maxBindingByteLength = limits.maxBinding;
    this.#ledger = new SegmentLedger(String(this.device));
    _onDeviceLost(device, this, (source) => source.#drop());
  }

  /** Bytes in live segments. */
  get reservedBytes(): number {
    return this.#ledger.reservedBytes;
  }

  /** Highest `reservedBytes` so far. */
  get peakReservedBytes(): number {
    return this.#ledger.peakReservedBytes;
  }

  /** Buffers created so far. */
  get allocationCount(): number {
    return this.#ledger.allocationCount;
  }

  /** Buffers destroyed through `freeSegment` so far. */
  get freeCount(): number {
    return this.#ledger.freeCount;
  }

  /** Requests refused by the budget or by `hostVisible: "refuse"`. */
  get refusalCount(): number {
    return this.#refusals;
  }

  /** Out-of-memory errors the device reported for buffers made here. */
  get outOfMemoryCount(): number {
    return this.#outOfMemory;
  }

  /** Number of live segments. */
  get liveSegmentCount(): number {
    return this.#ledger.liveSegmentCount;
  }

  /** Whether the device was lost. */
  get lost(): boolean {
    return _deviceState(this.gpuDevice).lost;
  }

  /**
   * Whether `buffer` was requested host-visible (a shared segment, reached
   * from the host through staging).
   *
   * @param buffer A segment's memory.
   * @returns `true` for a shared segment's buffer.
   */
  isHostVisible(buffer: GPUBuffer): boolean {
    return this.#shared.has(buffer);
  }

  /**
   * Makes one `GPUBuffer` of `byteLength` bytes (rounded up to 4 for the
   * buffer; the segment keeps the requested length).
   *
   * @param byteLength Bytes, in `[1, maxSegmentByteLength]`.
   * @param options Host visibility and a label.
   * @returns The segment, or `undefined` over the budget or when shared
   * memory is refused.
   * @throws {InvalidArgumentError} For a length outside the device's limits.
   * @throws {DeviceLostError} When the device was lost.
   */
  tryAllocateSegment(
    byteLength: number,
    options: SegmentRequestOptions = {},
  ): Segment<GPUBuffer> | undefined {
    this.#ledger.checkRequest(byteLength, this.maxSegmentByteLength);
    // as core's MockSegmentSource: `null` threw TypeError, `hostVisible: 1`
    // asked for shared memory, a label's toString ran our code
    validateObject(options, "options");
    validateOptionKeys(
      options,
      ["hostVisible", "label", "resizable"],
      "GpuSegmentSource.tryAllocateSegment()",
    );
    const shared = validateFlag(options.hostVisible, "hostVisible", false);
    const given = options.label;
    if (given !== undefined && typeof given !== "string") {
      throw new InvalidArgumentError(
        `Invalid label: must be a string, received ${describeValue(given)}`,
        { name: "label", value: given, limit: "string" },
      );
    }
    _assertAlive(this.gpuDevice, `allocate a segment of ${byteLength} bytes`);
    const size = alignUp(byteLength, 4);
    if (
      (shared && !this.#staged) ||
      !this.#ledger.fits(size, this.capacityBytes)
    ) {
      this.#refusals++;
      return undefined;
    }
    const id = nextBufferId++;
    const label = `${this.#label}:segment#${id}${this.#usageTag}${
      shared ? " (shared)" : ""
    }${given === undefined ? "" : ` ${given}`}`;
    const device = this.gpuDevice;
    device.pushErrorScope("out-of-memory");
    let buffer: GPUBuffer;
    try {
      buffer = device.createBuffer({
        label,
        size,
        usage: this.usage,
      });
    } finally {
      device.popErrorScope().then((error) => {
        if (error !== null) this.#onOutOfMemory();
      }, () => {});
    }
    if (buffer.size !== size) {
      // A device that lies about its buffers: the ranges cut from this one
      // would reach outside it.
      buffer.destroy();
      throw new InvalidArgumentError(
        `Cannot allocate a segment of ${size} bytes: the device made a buffer of ${buffer.size} bytes`,
        { name: "size", value: buffer.size, limit: size },
      );
    }
    _recordBufferDevice(buffer, device);
    const segment: Segment<GPUBuffer> = Object.freeze({
      memory: buffer,
      byteOffset: 0,
      byteLength,
    });
    if (shared) this.#shared.add(buffer);
    this.#ledger.add(segment, size);
    return segment;
  }

  /**
   * Destroys a live segment's buffer. After device loss this is a no-op.
   *
   * @param segment A segment from `tryAllocateSegment`.
   * @throws {DoubleFreeError} When the segment is not live here.
   */
  freeSegment(segment: Segment<GPUBuffer>): void {
    if (this.lost) return;
    this.#ledger.remove(segment);
    segment.memory.destroy();
  }

  #onOutOfMemory(): void {
    this.#outOfMemory++;
    // Learn the real capacity: refuse anything beyond what is held now.
    this.capacityBytes = Math.min(
      this.capacityBytes,
      this.#ledger.reservedBytes,
    );
  }

  #drop(): void {
    for (const segment of this.#ledger.clear()) {
      try {
        segment.memory.destroy();
      } catch {
        // Destroying on a lost device may fail; the memory is gone anyway.
      }
    }
  }
}

// What tells a source's device apart in a `CachingGroup` (internal to allot):
// every GPUDevice is `webgpu:<index>` to allot, so two devices' sources would
// look like one device's.
Object.defineProperty(
  GpuSegmentSource.prototype,
  Symbol.for("allot.caching.deviceKey"),
  {
    get(this: GpuSegmentSource): GPUDevice {
      return this.gpuDevice;
    },
  },
);
