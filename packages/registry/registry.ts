/**
 * {@linkcode Registry}: which allocator serves which device, with PyTorch's
 * priority rule, as an instance (no global static registration).
 *
 * @module
 */

import {
  type Allocator,
  AllotError,
  describeValue,
  Device,
  type DeviceType,
  type IntrusivePtr,
  InvalidArgumentError,
  validateInteger,
  validateOptionKeys,
} from "@allot/core";
import { CpuAllocator } from "@allot/cpu";
import {
  Buffer,
  type BufferBackend,
  type Dtype as StorageDtype,
  type Shape,
  Storage,
} from "@allot/storage";

/**
 * No allocator is registered for a device (nor for its device type).
 *
 * @example
 * ```ts
 * import { AllocatorNotFoundError, Registry } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * assert.throws(() => new Registry().get("webgpu:0"), AllocatorNotFoundError);
 * ```
 */
export class AllocatorNotFoundError extends AllotError {
  /** The device that was looked up. */
  readonly device: Device;

  /**
   * Creates the error.
   *
   * @param message Message naming the device and what is registered.
   * @param device The device that was looked up.
   */
  constructor(message: string, device: Device) {
    super(message);
    this.device = device;
  }
}

/**
 * A buffer was asked for on a device whose memory is not host memory, and
 * no {@linkcode BufferBackend} was given or registered to move its elements.
 *
 * @example
 * ```ts
 * import { AllocatorBase, DataPtr, Device } from "@allot/core";
 * import { BackendNotFoundError, Registry } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * // device memory that is not host memory (an opaque handle)
 * class Opaque extends AllocatorBase<object, null> {
 *   readonly device: Device = Device.parse("webgpu:0");
 *   allocate(byteLength: number): DataPtr<object, null> {
 *     return new DataPtr({}, 0, byteLength, this.device);
 *   }
 * }
 * const registry = new Registry();
 * registry.set("webgpu", new Opaque());
 * assert.throws(
 *   () => registry.buffer("f32", [4], { device: "webgpu:0" }),
 *   (e) => e instanceof BackendNotFoundError && e.device.type === "webgpu",
 * );
 * ```
 */
export class BackendNotFoundError extends AllotError {
  /** The device of the refused buffer. */
  readonly device: Device;

  /**
   * Creates the error.
   *
   * @param message What happened and how to register a backend.
   * @param device The device.
   */
  constructor(message: string, device: Device) {
    super(message);
    this.device = device;
  }
}

/** Options of {@linkcode Registry.set}. */
export interface SetAllocatorOptions {
  /**
   * Priority in `[0, 255]`. A registration replaces the current one only
   * when its priority is equal or higher (PyTorch's `SetAllocator` rule).
   *
   * @default {0}
   */
  priority?: number;
  /**
   * The backend that moves elements of buffers on this device when its
   * memory is not host memory (`new GpuBufferBackend(device)` for WebGPU):
   * {@linkcode Registry.buffer} uses it unless given one.
   *
   * @default {undefined}
   */
  backend?: BufferBackend;
}

/** Options of {@linkcode Registry.storage}. */
export interface RegistryStorageOptions {
  /**
   * The device whose allocator serves the storage.
   *
   * @default {"cpu"}
   */
  device?: DeviceTarget;
  /**
   * Whether the storage may be resized.
   *
   * @default {false}
   */
  resizable?: boolean;
}

/** Options of {@linkcode Registry.buffer}. */
export interface RegistryBufferOptions {
  /**
   * The device whose allocator serves the buffer.
   *
   * @default {"cpu"}
   */
  device?: DeviceTarget;
  /**
   * Set every element to this value; left as allocated when omitted.
   *
   * @default {undefined}
   */
  fill?: number;
  /**
   * Moves elements when the memory is not host memory (a GPU buffer).
   *
   * @default {the backend registered with the device's allocator}
   */
  backend?: BufferBackend;
}

/** Live allocations of one device, in {@linkcode RegistryMemory}. */
export interface DeviceMemory {
  /** Storages allocated through the registry and not yet freed. */
  readonly numStorages: number;
  /** Their bytes. */
  readonly numBytes: number;
}

/**
 * What {@linkcode Registry.memory} reports, like TensorFlow.js's
 * `tf.memory()`: the storages the registry allocated (through `storage()`
 * and `buffer()`) that are still alive, in all and per device.
 */
export interface RegistryMemory extends DeviceMemory {
  /** Per device (`"cpu:0"`, `"webgpu:0"`), only devices with live storages. */
  readonly devices: Readonly<Record<string, DeviceMemory>>;
}

/** One registration, as {@linkcode Registry.entries} lists it. */
export interface AllocatorEntry {
  /** The device (`cpu:1`) or device type (`cpu`) the allocator serves. */
  readonly target: string;
  /** The allocator. */
  readonly allocator: Allocator;
  /** Its priority. */
  readonly priority: number;
  /** The backend registered with it, if any. */
  readonly backend?: BufferBackend;
}

/**
 * What a registration is for: a {@linkcode Device} or a string with an index
 * (`"webgpu:1"`) means exactly that device; a bare device type (`"cpu"`)
 * means every device of that type that has no exact registration.
 */
export type DeviceTarget = Device | DeviceType;

const TYPE_PATTERN = /^[a-z][a-z0-9_]*$/;

function resolveTarget(
  target: DeviceTarget,
): { key: string; type: string; device?: Device } {
  if (Device.isDevice(target)) {
    return { key: String(target), type: target.type, device: target };
  }
  if (typeof target === "string" && target.includes(":")) {
    const device = Device.parse(target);
    return { key: String(device), type: device.type, device };
  }
  if (typeof target !== "string" || !TYPE_PATTERN.test(target)) {
    throw new InvalidArgumentError(
      `Invalid device target: expected a Device, "type" or "type:index", received ${
        describeValue(target)
      }`,
      { name: "target", value: target, limit: "Device | type[:index]" },
    );
  }
  return { key: target, type: target };
}

function toDevice(target: DeviceTarget): Device {
  const r = resolveTarget(target);
  return r.device ?? new Device(r.type, 0);
}

/**
 * The composition registry: maps a device, or a device type, to the
 * {@linkcode Allocator} that serves it. It sits on top of allot: users and
 * examples resolve allocators here and hand them to storage, buffers and GPU
 * code, which take an allocator as an argument and never import the registry.
 *
 * Priority follows PyTorch's `SetAllocator(type, allocator, priority)`: a
 * registration replaces the current one only at equal or higher priority, so
 * a library can install a default at priority 0 without overriding a user's
 * choice made at a higher one. Lookup tries the exact device first
 * (`webgpu:1`), then its type (`webgpu`).
 *
 * @example Register, override by priority, look up
 * ```ts
 * import { AllocatorBase, DataPtr, Device } from "@allot/core";
 * import { Registry } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * class Plain extends AllocatorBase<ArrayBuffer, null> {
 *   readonly device: Device = Device.cpu();
 *   allocate(byteLength: number): DataPtr<ArrayBuffer, null> {
 *     return new DataPtr(new ArrayBuffer(byteLength), 0, byteLength, this.device);
 *   }
 * }
 * const registry = new Registry();
 * const user = new Plain(), library = new Plain();
 * registry.set("cpu", user, { priority: 10 });
 * assert.equal(registry.set("cpu", library), false); // lower priority: ignored
 * assert.equal(registry.get(Device.cpu()), user);
 * using ptr = registry.get("cpu:0").allocate(64);
 * assert.equal(ptr.byteLength, 64);
 * ```
 */
export class Registry {
  #entries = new Map<string, AllocatorEntry>();
  /** Storages allocated here; freed ones are pruned now and then. */
  #live = new Set<Storage>();
  #pruneAt = 64;

  /**
   * Registers `allocator` for a device or device type, unless one with a
   * higher priority is registered there.
   *
   * @param target A `Device`, `"type:index"`, or a device type.
   * @param allocator The allocator; its device type must match the target's,
   *   and for an exact device (`"cpu:1"`) its device must be that device.
   * @param options The priority, and the backend for buffers on the device.
   * @returns `true` when the registration took effect.
   * @throws {InvalidArgumentError} For a bad target or priority, an object
   * without `allocate()`, an allocator of another device (type, or index for
   * an exact target), or a backend without `read`/`write`; nothing changes.
   */
  set(
    target: DeviceTarget,
    allocator: Allocator,
    options: SetAllocatorOptions = {},
  ): boolean {
    const { key, type } = resolveTarget(target);
    const read = registryOptions(
      options,
      ["priority", "backend"],
      "register",
      "Registry.set()",
    );
    const priorityOption = read.priority === undefined ? 0 : read.priority;
    if (typeof priorityOption !== "number") {
      throw new InvalidArgumentError(
        `Invalid priority: must be an integer in [0, 255], received ${
          describeValue(priorityOption)
        }`,
        { name: "priority", value: priorityOption, limit: [0, 255] },
      );
    }
    const priority = validateInteger(priorityOption, 0, 255, "priority");
    let allocate: unknown, device: unknown;
    try {
      allocate = (allocator as Partial<Allocator> | null)?.allocate;
      device = (allocator as { device?: unknown } | null)?.device;
    } catch (error) {
      throw new InvalidArgumentError(
        `Cannot register an allocator for ${key}: reading it threw ${
          describeValue(error)
        }`,
        {
          name: "allocator",
          value: describeValue(allocator),
          limit: "Allocator",
        },
      );
    }
    if (typeof allocate !== "function") {
      throw new InvalidArgumentError(
        `Cannot register ${
          describeValue(allocator)
        } for ${key}: it is not an Allocator (it has no allocate() method)`,
        {
          name: "allocator",
          value: describeValue(allocator),
          limit: "Allocator",
        },
      );
    }
    if (!Device.isDevice(device) || device.type !== type) {
      const shown = Device.isDevice(device)
        ? String(device)
        : describeValue(device);
      throw new InvalidArgumentError(
        `Cannot register an allocator for ${key}: its device must be of type ${type}, received ${shown}`,
        { name: "allocator", value: shown, limit: type },
      );
    }
    const exact = resolveTarget(target).device;
    if (exact !== undefined && !exact.equals(device)) {
      throw new InvalidArgumentError(
        `Cannot register an allocator of ${device} for ${key}: an exact device target needs an allocator of that device (register it for "${type}" to serve every ${type} device)`,
        { name: "allocator", value: String(device), limit: key },
      );
    }
    const backend = read.backend as BufferBackend | undefined;
    if (backend !== undefined && !isBackend(backend)) {
      throw new InvalidArgumentError(
        `Cannot register a backend for ${key}: ${
          describeValue(backend)
        } is not a BufferBackend (read, write, copy, fill)`,
        {
          name: "backend",
          value: describeValue(backend),
          limit: "BufferBackend",
        },
      );
    }
    const current = this.#entries.get(key);
    if (current !== undefined && priority < current.priority) return false;
    this.#entries.set(
      key,
      // frozen: entries() hands these out, and a caller's change must never
      // reach the registry
      Object.freeze(
        backend === undefined
          ? { target: key, allocator, priority }
          : { target: key, allocator, priority, backend },
      ),
    );
    return true;
  }

  /**
   * The allocator serving a device: the exact registration, else the one
   * for its type.
   *
   * @param device A `Device`, `"type:index"`, or a device type (index 0).
   * @returns The allocator.
   * @throws {AllocatorNotFoundError} When nothing serves the device.
   */
  get(device: DeviceTarget): Allocator {
    const found = this.tryGet(device);
    if (found === undefined) {
      const d = toDevice(device);
      const known = [...this.#entries.keys()];
      throw new AllocatorNotFoundError(
        `No allocator is registered for ${d}: registered ${
          known.length === 0 ? "none" : known.join(", ")
        }`,
        d,
      );
    }
    return found;
  }

  /**
   * The allocator serving a device, or `undefined`.
   *
   * @param device A `Device`, `"type:index"`, or a device type (index 0).
   * @returns The allocator, or `undefined`.
   */
  tryGet(device: DeviceTarget): Allocator | undefined {
    return this.#entry(device)?.allocator;
  }

  /**
   * The backend registered with the allocator serving a device.
   *
   * @param device A `Device`, `"type:index"`, or a device type (index 0).
   * @returns The backend, or `undefined` when none was registered.
   */
  backendOf(device: DeviceTarget): BufferBackend | undefined {
    return this.#entry(device)?.backend;
  }

  #entry(device: DeviceTarget): AllocatorEntry | undefined {
    const d = toDevice(device);
    return this.#entries.get(String(d)) ?? this.#entries.get(d.type);
  }

  /**
   * The storages this registry allocated that are still alive, in all and
   * per device, like TensorFlow.js's `tf.memory()`. Counts what
   * {@linkcode Registry.storage} and {@linkcode Registry.buffer} made (a
   * storage once, however many views share it); memory allocated from an
   * allocator directly is not seen.
   *
   * @returns The counts and bytes.
   *
   * @example
   * ```ts
   * import { Registry } from "@allot/registry";
   * import { CpuAllocator } from "@allot/cpu";
   * import assert from "node:assert/strict";
   *
   * const registry = new Registry();
   * registry.set("cpu", new CpuAllocator());
   * using a = registry.buffer("f32", [256]);
   * using view = a.reshape([16, 16]); // shares a's storage
   * assert.deepEqual(registry.memory(), {
   *   numStorages: 1,
   *   numBytes: 1024,
   *   devices: { "cpu:0": { numStorages: 1, numBytes: 1024 } },
   * });
   * ```
   */
  memory(): RegistryMemory {
    this.#prune();
    let numStorages = 0, numBytes = 0;
    const devices: Record<string, { numStorages: number; numBytes: number }> =
      {};
    for (const storage of this.#live) {
      const bytes = storage.byteLength;
      numStorages++;
      numBytes += bytes;
      const key = String(storage.device);
      const entry = devices[key] ??= { numStorages: 0, numBytes: 0 };
      entry.numStorages++;
      entry.numBytes += bytes;
    }
    return { numStorages, numBytes, devices };
  }

  #track(storage: Storage): void {
    this.#live.add(storage);
    if (this.#live.size >= this.#pruneAt) {
      this.#prune();
      this.#pruneAt = Math.max(64, 2 * this.#live.size);
    }
  }

  #prune(): void {
    for (const storage of this.#live) {
      if (storage.useCount === 0) this.#live.delete(storage);
    }
  }

  /**
   * The priority of the registration for exactly this target.
   *
   * @param target A `Device`, `"type:index"`, or a device type.
   * @returns The priority, or `undefined` when none is registered there.
   */
  priorityOf(target: DeviceTarget): number | undefined {
    return this.#entries.get(resolveTarget(target).key)?.priority;
  }

  /**
   * Removes the registration for exactly this target.
   *
   * @param target A `Device`, `"type:index"`, or a device type.
   * @returns `true` when one was removed.
   */
  delete(target: DeviceTarget): boolean {
    return this.#entries.delete(resolveTarget(target).key);
  }

  /**
   * Every registration.
   *
   * @returns The entries, in registration order.
   */
  entries(): AllocatorEntry[] {
    return [...this.#entries.values()];
  }

  /**
   * Allocates a `@allot/storage` {@linkcode Storage} with the allocator
   * serving a device.
   *
   * @param byteLength Number of bytes.
   * @param options Device and resizability.
   * @returns The owning handle; release it to free the bytes.
   * @throws {AllocatorNotFoundError} When nothing serves the device.
   * @throws {InvalidArgumentError} For a bad byte length.
   *
   * @example
   * ```ts
   * import { defaultRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using storage = defaultRegistry().storage(256);
   * assert.equal(storage.target.byteLength, 256);
   * ```
   */
  storage(
    byteLength: number,
    options: RegistryStorageOptions = {},
  ): IntrusivePtr<Storage> {
    const read = registryOptions(
      options,
      ["device", "resizable"],
      "allocate a storage",
      "Registry.storage()",
    );
    const allocator = this.get((read.device ?? "cpu") as DeviceTarget);
    const ptr = Storage.allocate(byteLength, {
      allocator,
      resizable: read.resizable as boolean | undefined,
    });
    this.#track(ptr.target);
    return ptr;
  }

  /**
   * Allocates a contiguous `@allot/storage` {@linkcode Buffer} with the
   * allocator serving a device.
   *
   * @param dtype Element type.
   * @param shape The shape.
   * @param options Device, fill value and backend (default: the one
   *   registered with the device's allocator).
   * @returns The buffer; release it to free the storage.
   * @throws {AllocatorNotFoundError} When nothing serves the device.
   * @throws {InvalidArgumentError} For a bad dtype or shape.
   * @throws {BackendNotFoundError} When the memory is not host memory (a
   *   GPU buffer) and no backend was given or registered: the bytes are
   *   freed at once, and the message says how to register one.
   *
   * @example
   * ```ts
   * import { defaultRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using ones = defaultRegistry().buffer("f32", [2, 3], { fill: 1 });
   * assert.deepEqual([...ones.toData()], [1, 1, 1, 1, 1, 1]);
   * ```
   */
  buffer<D extends StorageDtype>(
    dtype: D,
    shape: Shape,
    options: RegistryBufferOptions = {},
  ): Buffer<D> {
    const read = registryOptions(
      options,
      ["device", "backend", "fill"],
      "make a buffer",
      "Registry.buffer()",
    );
    const target = (read.device ?? "cpu") as DeviceTarget;
    const allocator = this.get(target);
    const backendOption = read.backend;
    if (backendOption !== undefined && !isBackend(backendOption)) {
      throw new InvalidArgumentError(
        `Cannot make a buffer: ${
          describeValue(backendOption)
        } is not a BufferBackend (read, write, copy, fill)`,
        { name: "backend", value: backendOption, limit: "BufferBackend" },
      );
    }
    const fill = read.fill;
    if (fill !== undefined && typeof fill !== "number") {
      throw new InvalidArgumentError(
        `Invalid fill: must be a number, received ${describeValue(fill)}`,
        { name: "fill", value: fill, limit: "number" },
      );
    }
    const backend = (backendOption as BufferBackend | undefined) ??
      this.backendOf(target);
    const buffer = Buffer.empty(dtype, shape, { allocator, backend });
    if (backend === undefined && !buffer.storage.isHost) {
      const device = buffer.storage.device;
      buffer.release();
      throw new BackendNotFoundError(
        `Cannot make a buffer on ${device} without a backend: its memory is not host memory, so reading, writing and filling it needs one. Register it with the allocator (registry.set("${device.type}", allocator, { backend: new GpuBufferBackend(gpuDevice) }) for WebGPU) or pass { backend }`,
        device,
      );
    }
    this.#track(buffer.storage);
    if (fill !== undefined) {
      try {
        buffer.fill(fill as number);
      } catch (error) {
        buffer.release();
        throw error;
      }
    }
    return buffer;
  }
}

/** Reads `keys` of a caller's options once; junk or a throwing read: typed. */
function registryOptions(
  options: unknown,
  keys: readonly string[],
  what: string,
  where: string,
): Record<string, unknown> {
  if (options === undefined) return {};
  if (options === null || typeof options !== "object") {
    throw new InvalidArgumentError(
      `Cannot ${what}: options must be an object, received ${
        describeValue(options)
      }`,
      { name: "options", value: options, limit: "object" },
    );
  }
  const values: Record<string, unknown> = {};
  try {
    validateOptionKeys(options, keys, where);
    for (const key of keys) {
      values[key] = (options as Record<string, unknown>)[key];
    }
  } catch (error) {
    if (error instanceof InvalidArgumentError) throw error;
    throw new InvalidArgumentError(
      `Cannot ${what}: reading its options threw ${describeValue(error)}`,
      { name: "options", value: describeValue(options), limit: "object" },
    );
  }
  return values;
}

/** Whether `value` has a `BufferBackend`'s `read` and `write` (no throw). */
function isBackend(value: unknown): boolean {
  if (value === null || typeof value !== "object") return false;
  try {
    const b = value as Record<string, unknown>;
    return typeof b.read === "function" && typeof b.write === "function";
  } catch {
    return false;
  }
}

let defaultInstance: Registry | undefined;

/**
 * The default registry, created on first use, for users who do not make
 * their own. Nothing registers at import time; on creation it registers an
 * `@allot/cpu` {@linkcode CpuAllocator} (its own heaps: plain `ArrayBuffer`s,
 * more added as needed, so pointers never move) for device type `cpu` at
 * priority 0, so any registration of yours for `cpu` replaces it.
 *
 * @returns The same registry on every call.
 *
 * @example
 * ```ts
 * import { CpuAllocator } from "@allot/cpu";
 * import { defaultRegistry } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * assert.equal(defaultRegistry(), defaultRegistry());
 * assert.ok(defaultRegistry().get("cpu:0") instanceof CpuAllocator);
 * ```
 */
export function defaultRegistry(): Registry {
  if (defaultInstance === undefined) {
    defaultInstance = new Registry();
    defaultInstance.set("cpu", new CpuAllocator(), { priority: 0 });
  }
  return defaultInstance;
}
