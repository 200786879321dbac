/**
 * {@linkcode GpuCachingAllocator}: `@allot/caching`'s caching allocator on a
 * {@linkcode GpuSegmentSource}, with the device's queue as the stream.
 *
 * @module
 */

import {
  _checkDevice,
  _checkOptions,
  _checkReuse,
  _checkStrict,
  _checkUsage,
} from "./_validate_gpu.ts";
import {
  type _BlockHooks,
  type _BlockPlace,
  CachedBlock,
  CACHING_OPTION_KEYS,
  CachingAllocator,
  type CachingAllocatorOptions,
  CachingGroup,
  type MemoryStats,
} from "@allot/caching";
import {
  AllotError,
  describeValue,
  type Device,
  DoubleFreeError,
  InvalidArgumentError,
  type MemorySnapshot,
  type MemorySummaryOptions,
  optionOr,
  OutOfMemoryError,
  type SynchronizeOptions,
  UseAfterFreeError,
  validateByteLength,
  validateOptionKeys,
  validateSynchronizeOptions,
} from "@allot/core";
import {
  _assertAlive,
  type _DeviceState,
  _deviceState,
  _lostError,
} from "./_device_state.ts";
import {
  _GpuIds,
  type _IdSlot,
  ID_MASK,
  ID_SLOT_MASK,
  ID_SLOTS,
} from "./_gpu_ids.ts";
import type { GpuAllocation, GpuAllocationOwner } from "./gpu_allocation.ts";
import { _makeAllocation } from "./_make_allocation.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { _anchorShapes } from "./_shape_anchors.ts";
import { GpuAllocatorAdapter } from "./gpu_allocator_adapter.ts";
import { _QueueFrees } from "./_deferred_frees.ts";
import {
  GpuSegmentSource,
  type GpuSegmentSourceOptions,
} from "./gpu_segment_source.ts";
import { QueueStream } from "./queue_stream.ts";
import {
  _DEFAULT_SEGMENT_USAGE as DEFAULT_USAGE,
  _Usage,
  _usageNames,
} from "./_flags.ts";
import { _usageCachingDefaults } from "./_usage_defaults.ts";

/** The commonest wrong guess at the constructor's options: say where it goes. */
const USAGE_HINT = {
  usage:
    "a buffer usage goes in the source's options, `{ source: { usage } }`, " +
    "or use GpuCachingAllocator.forUsage(device, usage)",
} as const;

/** `GPUBufferUsage.COPY_SRC | COPY_DST`: a pool of copies may borrow. */
const COPY_USAGE = _Usage.COPY_SRC | _Usage.COPY_DST;

// The handle-less block pair of @allot/caching (internal to allot; kept off
// that package's exports).
const {
  take: _takeBlock,
  give: _giveBlock,
  takeUnwatched: _takeUnwatched,
  takeCached: _takeCached,
} = (CachingAllocator as unknown as Record<symbol, _BlockHooks>)[
  Symbol.for("allot.caching.blockHooks")
];

/** The group's hook that names a wrapper of a member (internal to allot). */
type _GroupAlias = (group: object, alias: object, allocator: object) => void;

/** The `GPUDevice` of each group's GpuCachingAllocators. */
const groupDevices = new WeakMap<CachingGroup, GPUDevice>();

/** Each device's own group: its allocators made without a `group` option. */
const deviceGroups = new WeakMap<GPUDevice, CachingGroup>();

/**
 * Each group's storage allocators (held weakly), which lend whole free
 * segments to its copy pools (see `GpuCachingAllocator.#allocateCopy`).
 */
const groupLenders = new WeakMap<
  CachingGroup,
  WeakRef<GpuCachingAllocator>[]
>();

/** Each device's allocators of `GpuCachingAllocator.forUsage`, by usage. */
const usagePools = new WeakMap<GPUDevice, Map<number, GpuCachingAllocator>>();

/**
 * Takes an allocator that was dropped while still in a group out of it, and
 * gives its cached buffers back: a group (the device's own one included)
 * holds its members' policies, not the allocators, so it does not keep what
 * its users let go, and a device that outlives many allocators does not
 * keep their caches.
 */
const droppedMembers = new FinalizationRegistry<
  { group: CachingGroup; caching: CachingAllocator<GPUBuffer> }
>(({ group, caching }) => {
  if (!group.delete(caching)) return;
  try {
    caching.emptyCache();
  } catch {
    // a lost device: its buffers are gone with it
  }
});

/** When a freed range may serve a new request. */
export type GpuReuse = "after-fence" | "queue-order";

/** Options of {@linkcode GpuCachingAllocator}. */
export interface GpuCachingAllocatorOptions
  extends Omit<CachingAllocatorOptions, "group"> {
  /**
   * Options of the segment source made for the allocator.
   *
   * @default {{}}
   */
  source?: GpuSegmentSourceOptions;
  /**
   * A `CachingGroup` whose allocators share one held bound (see there):
   * the allocators of one device, one per usage, so that a miss of one
   * first destroys another's idle cached buffers rather than raise what
   * they hold together. Refused when it holds allocators of another
   * `GPUDevice`, or is another `GPUDevice`'s own group. Left out, the
   * allocator joins its device's own group
   * ({@linkcode GpuCachingAllocator.deviceGroup}), which every
   * `GpuCachingAllocator` of that device made without this option shares;
   * `null` joins none.
   *
   * @default {GpuCachingAllocator.deviceGroup(device)}
   */
  group?: CachingGroup | null;
  /**
   * `"queue-order"` (the default): a freed range comes back at once, as
   * PyTorch does for a block used only on its own stream. This is safe for
   * this allocator's memory: its segments are storage buffers that the CPU
   * never maps, and every use of them (dispatches, copies, `writeBuffer`)
   * goes through the device's single queue, which runs later commands after
   * earlier ones. A loop that never awaits holds no more than it uses.
   * `"after-fence"`: a freed range comes back only once the queue has
   * finished every command buffer submitted before the free
   * (`onSubmittedWorkDone`), for callers that touch the memory outside the
   * queue's order; in a loop that never awaits, freed blocks pile up until it
   * does.
   *
   * @default {"queue-order"}
   */
  reuse?: GpuReuse;
}

/**
 * PyTorch's caching allocator over `GPUBuffer`s: segments come from a
 * {@linkcode GpuSegmentSource} (one labelled buffer each, storage by
 * default, any pooled usage through `source.usage`, with the device's
 * limits), blocks are {@linkcode GpuAllocation}s at offsets aligned to the
 * source's alignment (`minStorageBufferOffsetAlignment` for storage), and
 * frees are ordered by
 * {@linkcode QueueStream} fences: a freed block is held (counted in
 * `pendingFreeBytes`) until the queue has finished the work submitted before
 * the free, then handed back to the caching allocator. The frees of one task
 * share one fence and one batch. A storage pool's large segments are capped
 * at `maxStorageBufferBindingSize`, so every block that can be bound at all sits
 * in a segment it can be bound from, and larger requests get their own
 * buffer.
 *
 * The allocators of one device (one per usage: storage, uniforms, vertex
 * data) share a held bound by default, in the device's own
 * {@linkcode CachingGroup} (see the `group` option): a pool's miss that
 * would raise what they hold together first destroys the idle cached
 * buffers of the others, among them those of a pool that holds nothing
 * lately (staging copies, uniforms); a runtime may mark its steps there
 * (`allocator.group.endStep()`).
 *
 * By default (`reuse: "queue-order"`) a freed block serves the next request
 * at once: the queue runs that request's work after the work already
 * submitted. With `reuse: "after-fence"` it waits for the queue:
 *
 * @example A freed block waits for the queue under after-fence reuse
 * ```ts
 * import { GpuCachingAllocator } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const allocator = new GpuCachingAllocator(device, { reuse: "after-fence" });
 *   const a = allocator.allocate(4096);
 *   const [buffer, offset] = [a.buffer, a.offset];
 *   a.release(); // the queue may still use it
 *   using b = allocator.allocate(4096);
 *   assert.ok(b.buffer !== buffer || b.offset !== offset);
 *   await allocator.synchronize();
 *   using c = allocator.allocate(4096);
 *   assert.ok(c.buffer === buffer && c.offset === offset);
 *   device.destroy();
 * }
 * ```
 */
export class GpuCachingAllocator {
  /** The WebGPU device. */
  readonly gpuDevice: GPUDevice;
  /** Where segments come from. */
  readonly source: GpuSegmentSource;
  /** The device's queue. */
  readonly stream: QueueStream;
  /** The caching allocator itself, for stats, snapshots and tuning. */
  readonly caching: CachingAllocator<GPUBuffer>;
  /** When freed ranges come back. */
  readonly reuse: GpuReuse;
  /**
   * The group whose held bound the allocator shares (its device's own
   * unless the `group` option named another), or `undefined` with
   * `group: null`.
   */
  readonly group: CachingGroup | undefined;
  #adapter: GpuAllocatorAdapter | undefined;
  #frees: _QueueFrees;
  #owner: GpuAllocationOwner;
  #handleOwner: GpuAllocationOwner;
  #state: _DeviceState;
  #maxByteLength: number;
  /** Whether frees wait for the queue (`reuse: "after-fence"`). */
  #afterFence: boolean;
  #ids = new _GpuIds<_BlockPlace<GPUBuffer>>();
  /** `#ids.slots` (one load less on the id path). */
  #slots: _IdSlot<_BlockPlace<GPUBuffer>>[] = this.#ids.slots;

  /**
   * Creates the source, the stream and the allocator.
   *
   * @param device The WebGPU device.
   * @param options Caching options, source options and the reuse rule.
   * @throws {InvalidArgumentError} For an option out of range.
   */
  constructor(device: GPUDevice, options?: GpuCachingAllocatorOptions) {
    _checkDevice(device, "Cannot make a GpuCachingAllocator");
    // a copy: each option read once (a getter is not asked twice)
    options = { ..._checkOptions(options) };
    _checkStrict(options.strict);
    validateOptionKeys(
      options,
      [...CACHING_OPTION_KEYS, "source", "reuse"],
      "GpuCachingAllocator",
      USAGE_HINT,
    );
    _anchorShapes("caching");
    if (options.group === null) delete options.group;
    else options.group ??= GpuCachingAllocator.deviceGroup(device);
    const group = options.group;
    const groupDevice = typeof group === "object" && group !== null
      ? groupDevices.get(group)
      : undefined;
    // (a group left empty takes any device's allocators, but a device's own
    // group only that device's: else its own allocators were refused after)
    if (
      groupDevice !== undefined && groupDevice !== device &&
      (group!.size > 0 || deviceGroups.get(groupDevice) === group)
    ) {
      throw new InvalidArgumentError(
        `Cannot make a GpuCachingAllocator: its group ${
          group!.size > 0 ? "holds allocators of" : "is the own group of"
        } another GPUDevice (${
          describeValue(groupDevice.label)
        }), this one is ${describeValue(device.label)}`,
        { name: "group", value: device, limit: "the group's GPUDevice" },
      );
    }
    this.gpuDevice = device;
    this.source = new GpuSegmentSource(device, options.source);
    this.stream = QueueStream.of(device);
    this.reuse = _checkReuse(options.reuse, "queue-order");
    this.#afterFence = this.reuse === "after-fence";
    // kernels bind storage ranges across blocks: a storage pool's large
    // segments stay within one storage binding (uniform blocks bind alone,
    // and vertex, index and indirect ranges have no binding limit)
    const maxBinding = (this.source.usage & _Usage.STORAGE) !== 0
      ? device.limits.maxStorageBufferBindingSize
      : Infinity;
    // (the caching allocator refuses keys it does not read: not these two)
    const { source: _source, reuse: _reuse, ...own } = options;
    // checked before the clamp below can hide a bad value; the label names
    // a usage other than the default (in summaries and snapshots); a pool
    // that is not storage takes small blocks and segments (see
    // `_usageCachingDefaults`) unless the caller sets them
    const caching: CachingAllocatorOptions = {
      label: this.source.usage === DEFAULT_USAGE
        ? "webgpu"
        : `webgpu [${_usageNames(this.source.usage)}]`,
      ...own as CachingAllocatorOptions,
    };
    // (absent or undefined takes the usage's default; null is refused below)
    const usageDefaults = _usageCachingDefaults(this.source.usage);
    if (caching.minBlockByteLength === undefined) {
      caching.minBlockByteLength = usageDefaults.minBlockByteLength;
    }
    if (caching.minSegmentByteLength === undefined) {
      caching.minSegmentByteLength = usageDefaults.minSegmentByteLength;
    }
    const large = validateByteLength(
      optionOr(caching.largeSegmentByteLength, 20 * 2 ** 20),
      undefined,
      "largeSegmentByteLength",
    );
    if (large > maxBinding) {
      caching.largeSegmentByteLength = Math.floor(maxBinding / 2 ** 20) *
        2 ** 20;
      caching.ownSegmentMinByteLength = Math.min(
        validateByteLength(
          optionOr(caching.ownSegmentMinByteLength, 10 * 2 ** 20),
          undefined,
          "ownSegmentMinByteLength",
        ),
        caching.largeSegmentByteLength,
      );
    }
    this.caching = new CachingAllocator(this.source, caching);
    this.group = group;
    if (group !== undefined) {
      groupDevices.set(group, device);
      // the group answers for this allocator too (has, delete)
      (CachingGroup as unknown as Record<symbol, _GroupAlias>)[
        Symbol.for("allot.caching.groupAlias")
      ](group, this, this.caching);
      droppedMembers.register(this, { group, caching: this.caching });
    }
    if (group !== undefined) {
      const usage = this.source.usage;
      if ((usage & _Usage.STORAGE) !== 0) {
        // (the collected ones dropped here too: many short-lived storage
        // pools on one device do not grow the list)
        const lenders = (groupLenders.get(group) ?? []).filter((r) =>
          r.deref() !== undefined
        );
        lenders.push(new WeakRef(this));
        groupLenders.set(group, lenders);
      } else if (
        (usage & ~COPY_USAGE) === 0 && caching.leakDetector === undefined
      ) this.#borrows = true; // (a watched pool hands out handles only)
    }
    this.#state = _deviceState(device);
    this.#maxByteLength = this.source.maxSegmentByteLength;
    // A token is a bare block (the hit path's, `_takeBlock`), or a
    // CachedBlock when the pool watches its handles for leaks. It reaches
    // the pool through `this`: frees waiting for the queue keep the
    // allocator alive (as a live allocation does), so `droppedMembers`
    // empties the cache only once they are back.
    const release = (token: unknown) =>
      token instanceof CachedBlock
        ? token.release()
        : _giveBlock(this.caching, token as _BlockPlace<GPUBuffer>);
    const frees = new _QueueFrees(this.stream, release);
    this.#frees = frees;
    // The owners reach the allocator through `this`: a live allocation keeps
    // its allocator alive, so that `droppedMembers` empties the cache only
    // once nothing can give a block back to it (a block released after its
    // allocator was collected stayed cached for good, outside any group).
    if (this.reuse === "after-fence") {
      this.#owner = {
        free: (block) =>
          this.#frees.defer(block, (block as _BlockPlace<GPUBuffer>).size),
      };
      this.#handleOwner = {
        free: (handle) =>
          this.#frees.defer(
            handle,
            (handle as CachedBlock<GPUBuffer>).blockByteLength,
          ),
      };
    } else {
      this.#owner = {
        free: (block) =>
          _giveBlock(this.caching, block as _BlockPlace<GPUBuffer>),
      };
      this.#handleOwner = {
        free: (handle) => this.caching.free(handle as CachedBlock<GPUBuffer>),
      };
    }
  }

  /**
   * The device's own {@linkcode CachingGroup}: the group of every
   * `GpuCachingAllocator` of `device` made without a `group` option (made
   * at the first call).
   *
   * @example The allocators of one device share its group
   * ```ts
   * import { GpuCachingAllocator } from "@allot/webgpu";
   * import assert from "node:assert/strict";
   *
   * const adapter = await navigator.gpu?.requestAdapter();
   * if (adapter) {
   *   const device = await adapter.requestDevice();
   *   const storage = new GpuCachingAllocator(device);
   *   const uniforms = new GpuCachingAllocator(device, {
   *     source: { usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST },
   *   });
   *   const group = GpuCachingAllocator.deviceGroup(device);
   *   assert.ok(storage.group === group && uniforms.group === group);
   *   group.endStep(); // at the end of each step of the runtime
   *   device.destroy();
   * }
   * ```
   *
   * @param device The WebGPU device.
   * @returns Its group.
   * @throws {InvalidArgumentError} When `device` is not a `GPUDevice`.
   */
  static deviceGroup(device: GPUDevice): CachingGroup {
    _checkDevice(device, "Cannot give a device's CachingGroup");
    let group = deviceGroups.get(device);
    if (group === undefined) {
      group = new CachingGroup();
      // (only this device's allocators join it, even while it is empty)
      (CachingGroup as unknown as Record<
        symbol,
        (group: object, key: object) => void
      >)[Symbol.for("allot.caching.groupPin")](group, device);
      deviceGroups.set(device, group);
      groupDevices.set(group, device);
    }
    return group;
  }

  /**
   * The device's allocator for buffers of `usage`, made at the first call
   * for it with the defaults (so in the device's own group) and held for
   * the device's life. A usage that the default storage usage covers
   * (`STORAGE | COPY_SRC | COPY_DST`, or any part of it: copy sources and
   * destinations, storage alone) gets the device's storage allocator: a
   * buffer that is both copied and bound is legal in WebGPU, so copies take
   * blocks of the storage pool's cache instead of a pool of their own, whose
   * cache would peak apart from storage's (a session's weights uploaded
   * again at each run while storage holds its whole cache). Any other usage
   * (uniforms, vertex, index, indirect buffers) gets one allocator of its
   * own. Mapped usages are refused, as by the constructor: reach blocks
   * from the host through `GpuStaging`.
   *
   * Replayed on the recorded traces with the trace's staging buffers as
   * copies (`traces/figures.ts`, `allot-caching-shared` against
   * `allot-caching`), all buffers: see the package's `BENCHMARKS.md`.
   *
   * @example Copies share the storage pool; uniforms get their own
   * ```ts
   * import { GpuCachingAllocator } from "@allot/webgpu";
   * import assert from "node:assert/strict";
   *
   * const adapter = await navigator.gpu?.requestAdapter();
   * if (adapter) {
   *   const device = await adapter.requestDevice();
   *   const storage = GpuCachingAllocator.forUsage(device);
   *   const uploads = GpuCachingAllocator.forUsage(
   *     device,
   *     GPUBufferUsage.COPY_SRC,
   *   );
   *   const uniforms = GpuCachingAllocator.forUsage(
   *     device,
   *     GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
   *   );
   *   assert.equal(uploads, storage);
   *   assert.notEqual(uniforms, storage);
   *   assert.equal(uniforms.group, storage.group);
   *   device.destroy();
   * }
   * ```
   *
   * @param device The WebGPU device.
   * @param usage The `GPUBufferUsage` the buffers need.
   * @returns The device's allocator for it.
   * @throws {InvalidArgumentError} When `device` is not a `GPUDevice`, or
   * for a usage that is not an integer of known `GPUBufferUsage` bits, is 0,
   * or has `MAP_READ` or `MAP_WRITE` (nothing is made).
   */
  static forUsage(
    device: GPUDevice,
    usage: number = DEFAULT_USAGE,
  ): GpuCachingAllocator {
    _checkDevice(device, "Cannot give a device's GpuCachingAllocator");
    usage = _checkUsage(usage, DEFAULT_USAGE);
    const pooled = (usage & ~DEFAULT_USAGE) === 0 ? DEFAULT_USAGE : usage;
    let pools = usagePools.get(device);
    let a = pools?.get(pooled);
    if (a !== undefined) return a;
    a = new GpuCachingAllocator(device, { source: { usage: pooled } });
    if (pools === undefined) usagePools.set(device, pools = new Map());
    pools.set(pooled, a);
    return a;
  }

  /**
   * Freed blocks waiting for their queue fence (after-fence reuse). They go
   * back to the pool at the first allocation after their fence completed,
   * or at {@linkcode GpuCachingAllocator.synchronize}.
   */
  get pendingFreeCount(): number {
    return this.#frees.count;
  }

  /** Bytes of freed blocks waiting for their queue fence. */
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
   * @returns The owning handle.
   * @throws {InvalidArgumentError} For a bad size or one above the device's
   * `maxBufferSize`.
   * @throws {CachingOutOfMemoryError} When the device cannot hold it.
   * @throws {DeviceLostError} When the device was lost.
   */
  allocate(byteLength: number): GpuAllocation {
    validateByteLength(byteLength, this.#maxByteLength);
    if (this.#state.lost) {
      _assertAlive(this.gpuDevice, `allocate ${byteLength} bytes`);
    }
    if (this.#frees.count > 0) this.#frees.poll();
    if (this.#borrows) {
      const a = this.#allocateCopy(byteLength);
      if (a !== undefined) return a;
    }
    let b: _BlockPlace<GPUBuffer> | undefined;
    try {
      b = _takeBlock(this.caching, byteLength);
    } catch (error) {
      this.#lostInside(error, byteLength);
    }
    if (b === undefined) return this.#allocateHandle(byteLength);
    const raw = b.segment.raw;
    return _makeAllocation(
      this.gpuDevice,
      raw.memory,
      raw.byteOffset + b.offset,
      byteLength,
      this.#owner,
      b,
    );
  }

  /**
   * A pool of copy buffers in a group (usage within `COPY_SRC | COPY_DST`):
   * allocate() first takes a block of its own cache, then a block lent by a
   * storage pool of the group (see `#allocateCopy`), and only then misses.
   */
  #borrows = false;

  /**
   * allocate() of a copy pool in a group, before its own miss: a block of
   * its own cache; else, while a storage pool of the group (whose usage
   * covers this one's) holds at most half its bytes allocated, that pool's
   * whole free segment of exactly the request's rounded size (at least that
   * pool's smallest segment; a pool under after-fence reuse borrows only
   * from one under after-fence reuse), freed back to that pool. `undefined` when
   * neither (the caller misses as before).
   */
  #allocateCopy(byteLength: number): GpuAllocation | undefined {
    let b = _takeCached(this.caching, byteLength, false);
    let owner = this.#owner;
    if (b === undefined) {
      const group = this.group!;
      const lenders = groupLenders.get(group);
      if (lenders === undefined || !group.has(this)) return undefined;
      const usage = this.source.usage;
      for (let i = 0; i < lenders.length; i++) {
        const l = lenders[i].deref();
        if (l === undefined) {
          lenders.splice(i--, 1); // a lender collected
          continue;
        }
        if (
          (l.source.usage & usage) !== usage || l.group !== group ||
          l.#state.lost || !group.has(l) ||
          // (a block of an after-fence pool waits for the queue when freed:
          // a queue-order lender would take it back at once)
          (this.#afterFence && !l.#afterFence)
        ) continue;
        if (l.#frees.count > 0) l.#frees.poll();
        const c = l.caching;
        if (2 * c.allocatedBytes > c.reservedBytes) continue;
        b = _takeCached(c, byteLength, true);
        if (b !== undefined) {
          owner = l.#owner;
          break;
        }
      }
      if (b === undefined) return undefined;
    }
    const raw = b.segment.raw;
    return _makeAllocation(
      this.gpuDevice,
      raw.memory,
      raw.byteOffset + b.offset,
      byteLength,
      owner,
      b,
    );
  }

  /** allocate() through a CachedBlock (when the pool watches for leaks). */
  #allocateHandle(byteLength: number): GpuAllocation {
    let block: CachedBlock<GPUBuffer>;
    try {
      block = this.caching.allocate(byteLength);
    } catch (error) {
      this.#lostInside(error, byteLength);
    }
    return _makeAllocation(
      this.gpuDevice,
      block.memory,
      block.byteOffset,
      byteLength,
      this.#handleOwner,
      block,
    );
  }

  /**
   * Rethrows an allocation's error, as the `DeviceLostError` the caller is
   * promised when the device was lost inside the call (a buffer's
   * `destroy()` during a give-back that loses the device: the segment
   * source's refusal reaches here as a `SegmentSourceError`, or the retry
   * after emptying the cache as out of memory).
   */
  #lostInside(error: unknown, byteLength: number): never {
    if (this.#state.lost && !(error instanceof DeviceLostError)) {
      const lost = _lostError(
        this.gpuDevice,
        this.#state,
        `allocate ${byteLength} bytes`,
      );
      (lost as { cause?: unknown }).cause = error;
      throw lost;
    }
    throw error;
  }

  // ---- the id path: no object per allocation ----

  /**
   * Allocates like {@linkcode GpuCachingAllocator.allocate}, but returns a
   * number instead of a handle, for runtimes that keep their own records of
   * their tensors: no object is made per allocation (no garbage), and
   * binding reads {@linkcode GpuCachingAllocator.bufferOf} and
   * {@linkcode GpuCachingAllocator.offsetOf}. Free it once with
   * {@linkcode GpuCachingAllocator.freeById}, under the same reuse rule as a
   * handle's `release()`.
   *
   * A freed id is refused (`UseAfterFreeError`, `DoubleFreeError`) until
   * its slot has been reused 4,096 times, 16 other frees apart each time; an
   * id of another allocator is refused as long as that slot has not reached
   * the same generation in both (each allocator starts its ids at another
   * of the 4,096 generations, a stride near 0.618 of them apart: allocators
   * made one after the other are 1,565 generations apart, but two made 971
   * apart only one, so there a slot reused once more in one than in the
   * other gives the other's id; ids are numbers, not handles). At most
   * 262,144 ids are live at once per allocator. No leak detector watches
   * ids.
   *
   * @param byteLength Bytes; 0 gives an ordinary 0-byte allocation.
   * @returns The id: an integer from 0 to 2^30 - 1.
   * @throws {InvalidArgumentError} For a bad size, one above the device's
   * `maxBufferSize`, or when 262,144 ids are live.
   * @throws {CachingOutOfMemoryError} When the device cannot hold it.
   * @throws {DeviceLostError} When the device was lost.
   *
   * @example Bind by id
   * ```ts
   * import { GpuCachingAllocator } from "@allot/webgpu";
   * import { UseAfterFreeError } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const adapter = await navigator.gpu?.requestAdapter();
   * if (adapter) {
   *   const device = await adapter.requestDevice();
   *   const allocator = new GpuCachingAllocator(device);
   *   const id = allocator.allocateId(1000);
   *   const entry = {
   *     buffer: allocator.bufferOf(id),
   *     offset: allocator.offsetOf(id),
   *     size: allocator.sizeOf(id),
   *   };
   *   assert.equal(entry.size, 1000);
   *   allocator.freeById(id);
   *   assert.throws(() => allocator.bufferOf(id), UseAfterFreeError);
   *   device.destroy();
   * }
   * ```
   */
  allocateId(byteLength: number): number {
    // (the checked value: -0 comes back as 0, a small integer, so the slot's
    // size field never widens to a boxed double)
    byteLength = validateByteLength(byteLength, this.#maxByteLength);
    if (this.#state.lost) {
      _assertAlive(this.gpuDevice, `allocate ${byteLength} bytes`);
    }
    const ids = this.#ids;
    if (ids.full) this.#throwIdsFull(byteLength); // before any change
    if (this.#frees.count > 0) this.#frees.poll();
    let b: _BlockPlace<GPUBuffer>;
    try {
      b = _takeUnwatched(this.caching, byteLength);
    } catch (error) {
      this.#lostInside(error, byteLength);
    }
    if (ids.full) {
      // (a device or detector that re-entered at the miss took the last
      // slots: a slot past the table would alias another id's)
      _giveBlock(this.caching, b);
      this.#throwIdsFull(byteLength);
    }
    const r = ids.add();
    const raw = b.segment.raw;
    r.buffer = raw.memory;
    r.offset = raw.byteOffset + b.offset;
    r.size = byteLength;
    r.block = b;
    return r.id;
  }

  /**
   * The buffer of a live id.
   *
   * @param id An id from {@linkcode GpuCachingAllocator.allocateId}.
   * @returns The `GPUBuffer` that holds it.
   * @throws {InvalidArgumentError} When `id` is no integer from 0 to 2^30 - 1.
   * @throws {UseAfterFreeError} When it is not a live id of this allocator.
   * @throws {DeviceLostError} When the device was lost.
   */
  bufferOf(id: number): GPUBuffer {
    const r = typeof id === "number"
      ? this.#slots[id & ID_SLOT_MASK]
      : undefined;
    if (r === undefined || r.id !== id || id < 0 || this.#state.lost) {
      this.#refuse(id, "read the buffer of");
    }
    return r.buffer!;
  }

  /**
   * The byte offset of a live id in its buffer (a multiple of the source's
   * alignment).
   *
   * @param id An id from {@linkcode GpuCachingAllocator.allocateId}.
   * @returns The byte offset.
   * @throws {InvalidArgumentError} When `id` is no integer from 0 to 2^30 - 1.
   * @throws {UseAfterFreeError} When it is not a live id of this allocator.
   * @throws {DeviceLostError} When the device was lost.
   */
  offsetOf(id: number): number {
    const r = typeof id === "number"
      ? this.#slots[id & ID_SLOT_MASK]
      : undefined;
    if (r === undefined || r.id !== id || id < 0 || this.#state.lost) {
      this.#refuse(id, "read the offset of");
    }
    return r.offset;
  }

  /**
   * The bytes asked for by a live id (a binding's `size`).
   *
   * @param id An id from {@linkcode GpuCachingAllocator.allocateId}.
   * @returns The byte length.
   * @throws {InvalidArgumentError} When `id` is no integer from 0 to 2^30 - 1.
   * @throws {UseAfterFreeError} When it is not a live id of this allocator.
   * @throws {DeviceLostError} When the device was lost.
   */
  sizeOf(id: number): number {
    const r = typeof id === "number"
      ? this.#slots[id & ID_SLOT_MASK]
      : undefined;
    if (r === undefined || r.id !== id || id < 0 || this.#state.lost) {
      this.#refuse(id, "read the size of");
    }
    return r.size;
  }

  /**
   * Frees a live id: its memory serves new requests at once under
   * queue-order reuse, after the work submitted so far under after-fence
   * reuse (as `GpuAllocation.release()`). After device loss it does
   * nothing and never throws for an id that was given (cleanup loops never
   * throw).
   *
   * @param id An id from {@linkcode GpuCachingAllocator.allocateId}.
   * @throws {InvalidArgumentError} When `id` is no integer from 0 to 2^30 - 1.
   * @throws {DoubleFreeError} When it is not a live id of this allocator
   * (freed already, never given, or another allocator's); nothing changes.
   */
  freeById(id: number): void {
    const r = typeof id === "number"
      ? this.#slots[id & ID_SLOT_MASK]
      : undefined;
    if (r === undefined || r.id !== id || id < 0) {
      this.#refuseFree(id);
      return;
    }
    const b = r.block!;
    this.#ids.remove(r);
    if (this.#state.lost) return;
    if (this.#afterFence) this.#frees.defer(b, b.size);
    else _giveBlock(this.caching, b);
  }

  /** Ids live now (given by allocateId, not yet freed). */
  get liveIdCount(): number {
    return this.#ids.count;
  }

  /** The refusal of bufferOf / offsetOf / sizeOf for `id`. */
  #refuse(id: unknown, what: string): never {
    this.#checkId(id, what);
    if (this.#state.lost) {
      throw _lostError(this.gpuDevice, this.#state, `${what} id ${id}`);
    }
    throw new UseAfterFreeError(
      `Cannot ${what} id ${id}: it is not a live id of this GpuCachingAllocator (freed already, never given, or another allocator's)`,
    );
  }

  /** The refusal of freeById(id) (none for a given id after device loss). */
  #refuseFree(id: unknown): void {
    this.#checkId(id, "free");
    if (this.#state.lost) return;
    throw new DoubleFreeError(
      `Cannot free id ${id}: it is not a live id of this GpuCachingAllocator (freed already, never given, or another allocator's)`,
    );
  }

  /** Refuses what cannot be an id at all. */
  #checkId(id: unknown, what: string): void {
    if (
      typeof id !== "number" || !Number.isInteger(id) || id < 0 ||
      id > ID_MASK
    ) {
      throw new InvalidArgumentError(
        `Cannot ${what} id ${
          describeValue(id)
        }: an id is an integer from 0 to ${ID_MASK} (from allocateId())`,
        { name: "id", value: id, limit: `an integer from 0 to ${ID_MASK}` },
      );
    }
  }

  #throwIdsFull(byteLength: number): never {
    throw new InvalidArgumentError(
      `Cannot allocate ${byteLength} bytes by id: ${ID_SLOTS} ids are live already (free some with freeById())`,
      { name: "byteLength", value: byteLength, limit: ID_SLOTS },
    );
  }

  /**
   * Allocates like {@linkcode GpuCachingAllocator.allocate}; when the device
   * is out of memory, first waits for the blocks held for queue fences, gives
   * every whole free segment back, and tries once more.
   *
   * Without a signal, a queue that never finishes its work makes it wait
   * forever.
   *
   * @param byteLength Bytes; 0 gives an ordinary 0-byte allocation.
   * @param options A signal that stops the wait (read and checked once): the
   * promise rejects with its reason, the blocks stay pending and the cache is
   * not emptied. Already aborted: rejects before anything is done.
   * @returns The owning handle.
   * @throws {InvalidArgumentError} For a bad size or signal.
   * @throws {CachingOutOfMemoryError} When it still does not fit.
   * @throws {DeviceLostError} When the device was lost.
   */
  async allocateAsync(
    byteLength: number,
    options?: SynchronizeOptions,
  ): Promise<GpuAllocation> {
    // read once: a getter cannot hand the wait another signal
    const signal = validateSynchronizeOptions(options);
    signal?.throwIfAborted();
    try {
      return this.allocate(byteLength);
    } catch (error) {
      if (!(error instanceof OutOfMemoryError)) throw error;
      await this.synchronize(signal === undefined ? undefined : { signal });
      this.emptyCache();
      return this.allocate(byteLength);
    }
  }

  /**
   * Waits for the queue, then returns every block waiting for it to the pool.
   *
   * Without a signal, a queue that never finishes its work makes it wait
   * forever.
   *
   * @param options A signal that stops the wait: the promise rejects with
   * its reason and nothing changes (the blocks stay pending until their work
   * completes).
   * @returns Resolves when the pending blocks are back.
   * @throws {InvalidArgumentError} (as a rejection) For bad options.
   */
  async synchronize(options?: SynchronizeOptions): Promise<void> {
    // read once: a getter cannot hand the waits another signal
    const signal = validateSynchronizeOptions(options);
    signal?.throwIfAborted();
    const once = signal === undefined ? undefined : { signal };
    await this.#frees.synchronize(once);
    await this.caching.synchronize(once);
  }

  /** Destroys every whole free segment (`emptyCache`). */
  emptyCache(): void {
    if (!this.lost) this.caching.emptyCache();
  }

  /**
   * PyTorch's memory stats of the caching allocator.
   *
   * @returns The stats.
   */
  memoryStats(): MemoryStats {
    return this.caching.memoryStats();
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
   * Allocates like {@linkcode GpuCachingAllocator.allocate}, but returns `undefined`
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
   * PyTorch's memory stats of the caching allocator (the same as
   * {@linkcode GpuCachingAllocator.memoryStats}).
   *
   * @returns The stats.
   */
  stats(): MemoryStats {
    return this.caching.stats();
  }

  /**
   * A text table of the stats, in the layout of
   * `torch.cuda.memory_summary()` (the same as `caching.memorySummary()`).
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return this.caching.memorySummary(options);
  }

  /**
   * Checks every internal invariant: `caching.validate()`, and that every
   * live id's buffer, offset and size are its block's.
   *
   * @throws {AllotError} Naming the first broken invariant.
   */
  validate(): void {
    this.caching.validate();
    let live = 0;
    for (const r of this.#slots) {
      if (r.id === -1) continue;
      live++;
      const b = r.block;
      const raw = b?.segment.raw;
      if (
        b == null || raw === undefined || r.buffer !== raw.memory ||
        r.offset !== raw.byteOffset + b.offset || r.size > b.size
      ) {
        throw new AllotError(
          `GpuCachingAllocator is inconsistent: id ${r.id} does not hold its block's place`,
        );
      }
    }
    if (live !== this.#ids.count) {
      throw new AllotError(
        `GpuCachingAllocator is inconsistent: ${live} live ids, ${this.#ids.count} counted`,
      );
    }
  }

  /**
   * Every segment with its blocks, and the recorded history (the same as
   * `caching.snapshot()`).
   *
   * @returns The snapshot.
   */
  snapshot(): MemorySnapshot {
    return this.caching.snapshot();
  }

  /** Sets every peak of the stats to its current value. */
  resetPeakStats(): void {
    this.caching.resetPeakStats();
  }

  /** Sets the `allocated` and `freed` totals of the stats to 0. */
  resetAccumulatedStats(): void {
    this.caching.resetAccumulatedStats();
  }
}
