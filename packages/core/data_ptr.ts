/**
 * {@linkcode DataPtr}: an owning pointer to a place in a memory, with the
 * device that owns that memory.
 *
 * @module
 */

import { Device } from "./device.ts";
import { InvalidArgumentError, UseAfterFreeError } from "./errors.ts";
import { hostBuffer, isHostMemory } from "./host_memory.ts";
import { describeValue } from "./validate.ts";
import { type Deleter, UniqueVoidPtr } from "./unique_void_ptr.ts";

/** Ownership part of a {@linkcode DataPtr}: what to free and how. */
export interface DataPtrOwnership<C> {
  /** What the deleter frees; `null` (the default) owns nothing. */
  context?: C | null;
  /** Called once with the context when the pointer is cleared. */
  deleter?: Deleter<C> | null;
}

/**
 * A place in a memory: the memory itself (a heap's `ArrayBuffer`,
 * `SharedArrayBuffer` or `WebAssembly.Memory`, or a `GPUBuffer`), a byte
 * offset and a byte length, plus the {@linkcode Device} that owns the memory.
 * It owns the allocation like a {@linkcode UniqueVoidPtr}: the deleter runs
 * exactly once, on `clear()`, `release()` or `using` scope exit. Reading the
 * place after that throws {@linkcode UseAfterFreeError}.
 *
 * Zero-byte pointers are ordinary values: they carry a device and usually own
 * nothing.
 *
 * **One owner per block.** An allocator's `allocate()` pointer is the only
 * owner of its block: only its deleter frees it. allot allocators whose raw
 * verbs take a bare address or offset (`BuddyAllocator.free`, a
 * `CpuAllocator`'s `CpuHeap.free`) refuse such a block with a
 * `DoubleFreeError` and change nothing, since a raw free would let the
 * address be handed out again and this pointer's release would then free the
 * new owner's block. {@linkcode DataPtr.releaseContext} hands the context to
 * the caller, who then frees it with the allocator's raw verb. Releasing twice
 * frees once, and a pointer frees only into the allocator that made it.
 *
 * @typeParam M Type of the memory (for example `ArrayBuffer` or `GPUBuffer`).
 * @typeParam C Type of the deleter's context.
 *
 * @example Own eight bytes of an ArrayBuffer
 * ```ts
 * import { DataPtr, Device } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const memory = new ArrayBuffer(64);
 * let freed = false;
 * {
 *   using ptr = new DataPtr(memory, 16, 8, Device.cpu(), {
 *     context: 16,
 *     deleter: () => { freed = true; },
 *   });
 *   new Uint8Array(ptr.memory, ptr.byteOffset, ptr.byteLength).fill(1);
 * }
 * assert.ok(freed);
 * assert.equal(new Uint8Array(memory)[16], 1);
 * ```
 */
export class DataPtr<M = unknown, C = unknown> extends UniqueVoidPtr<M, C> {
  /** The device that owns the memory. */
  readonly device: Device;
  #byteOffset: number;
  #byteLength: number;
  #released = false;

  /**
   * Creates a data pointer.
   *
   * @param memory The memory the place is in.
   * @param byteOffset Byte offset of the place in the memory.
   * @param byteLength Byte length of the place.
   * @param device Device that owns the memory.
   * @param ownership Context and deleter; omit for a non-owning pointer.
   * @throws {InvalidArgumentError} When `byteOffset` or `byteLength` is not a
   * non-negative safe integer, the place ends past the end of host memory
   * (an `ArrayBuffer`, `SharedArrayBuffer` or `WebAssembly.Memory`; its
   * `maxByteLength` when it can grow), `device` is not a `Device`, or the
   * deleter is not a function.
   */
  constructor(
    memory: M,
    byteOffset: number,
    byteLength: number,
    device: Device,
    ownership: DataPtrOwnership<C> = {},
  ) {
    _checkPlace(memory, byteOffset, byteLength);
    if (!Device.isDevice(device)) {
      throw new InvalidArgumentError(
        `Cannot create a DataPtr: device must be a Device, received ${
          describeValue(device)
        }`,
        { name: "device", value: device, limit: "Device" },
      );
    }
    if (typeof ownership !== "object" || ownership === null) {
      throw new InvalidArgumentError(
        `Cannot create a DataPtr: ownership must be an object, received ${
          describeValue(ownership)
        }`,
        { name: "ownership", value: ownership, limit: "DataPtrOwnership" },
      );
    }
    const deleter = ownership.deleter ?? null;
    if (deleter !== null && typeof deleter !== "function") {
      throw new InvalidArgumentError(
        `Cannot create a DataPtr: deleter must be a function, received ${
          describeValue(deleter)
        }`,
        { name: "deleter", value: deleter, limit: "function" },
      );
    }
    super(memory, ownership.context ?? null, deleter);
    this.device = device;
    // + 0 turns -0 into 0.
    this.#byteOffset = byteOffset + 0;
    this.#byteLength = byteLength + 0;
  }

  /**
   * Whether `value` was made by this constructor (or a subclass's): a brand
   * check on private state, so a look-alike such as
   * `Object.create(DataPtr.prototype)`, which `instanceof` accepts but whose
   * getters throw a `TypeError`, is not one.
   *
   * @param value Any value.
   * @returns `true` for a real `DataPtr`.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { DataPtr, Device } from "@allot/core";
   *
   * const ptr = new DataPtr(new ArrayBuffer(8), 0, 8, Device.cpu());
   * assert.ok(DataPtr.isDataPtr(ptr));
   * assert.ok(!DataPtr.isDataPtr(Object.create(DataPtr.prototype)));
   * ```
   */
  static isDataPtr(value: unknown): value is DataPtr {
    return typeof value === "object" && value !== null && #byteOffset in value;
  }

  /**
   * The memory the place is in.
   *
   * @throws {UseAfterFreeError} After the pointer was cleared or released.
   */
  get memory(): M {
    if (this.#released) this.#throwReleased("memory");
    return this.get() as M;
  }

  /**
   * Byte offset of the place in its memory.
   *
   * @throws {UseAfterFreeError} After the pointer was cleared or released.
   */
  get byteOffset(): number {
    if (this.#released) this.#throwReleased("byteOffset");
    return this.#byteOffset;
  }

  /** Byte length of the place; still readable after release. */
  get byteLength(): number {
    return this.#byteLength;
  }

  /** Whether the pointer was cleared or gave up its context. */
  get released(): boolean {
    return this.#released;
  }

  /** Runs the deleter once (if a context is owned) and invalidates the place. */
  override clear(): void {
    this.#released = true;
    super.clear();
  }

  /** Same as {@linkcode DataPtr.clear}: frees the place. */
  release(): void {
    this.clear();
  }

  /**
   * Gives up ownership and invalidates this pointer; returns the context.
   *
   * @returns The context that was owned, or `null`.
   */
  override releaseContext(): C | null {
    this.#released = true;
    return super.releaseContext();
  }

  /**
   * Short description such as `DataPtr(cpu:0, byteOffset=64, byteLength=128)`.
   *
   * @returns The description.
   */
  override toString(): string {
    return `DataPtr(${this.device}, byteOffset=${this.#byteOffset}, byteLength=${this.#byteLength}${
      this.#released ? ", released" : ""
    })`;
  }

  #throwReleased(what: string): never {
    throw new UseAfterFreeError(
      `Cannot read ${what} of ${this}: the pointer was released`,
    );
  }
}

function _placeError(
  name: string,
  value: unknown,
  limit: number,
  why: string,
): InvalidArgumentError {
  return new InvalidArgumentError(
    `Cannot create a DataPtr: ${name} ${why}, received ${describeValue(value)}`,
    { name, value, limit },
  );
}

/** The byte length host memory can reach, or `undefined` for other memory. */
function _lookalike(memory: unknown): InvalidArgumentError {
  return new InvalidArgumentError(
    "Cannot create a DataPtr: memory is a host-memory look-alike (its byteLength cannot be read)",
    { name: "memory", value: memory, limit: "a host memory or device memory" },
  );
}

// An object made with Object.create(ArrayBuffer.prototype) passes
// `instanceof` but its getters throw a TypeError: refused as a typed error.
function _byteLengthOf(memory: ArrayBuffer): number {
  try {
    return memory.byteLength;
  } catch {
    throw _lookalike(memory);
  }
}

function _hostLimit(memory: unknown): number | undefined {
  if (!isHostMemory(memory)) return undefined;
  try {
    const buffer = hostBuffer(memory) as ArrayBuffer & {
      growable?: boolean;
      resizable?: boolean;
      maxByteLength?: number;
    };
    // A wasm memory grows by replacing its buffer: its current length counts.
    return buffer !== memory
      ? buffer.byteLength
      : buffer.resizable || buffer.growable
      ? buffer.maxByteLength ?? buffer.byteLength
      : buffer.byteLength;
  } catch {
    throw _lookalike(memory);
  }
}

function _checkPlace(
  memory: unknown,
  byteOffset: unknown,
  byteLength: unknown,
): void {
  if (!Number.isSafeInteger(byteOffset) || (byteOffset as number) < 0) {
    throw _placeError(
      "byteOffset",
      byteOffset,
      Number.MAX_SAFE_INTEGER,
      "must be a non-negative integer",
    );
  }
  if (!Number.isSafeInteger(byteLength) || (byteLength as number) < 0) {
    throw _placeError(
      "byteLength",
      byteLength,
      Number.MAX_SAFE_INTEGER,
      "must be a non-negative integer",
    );
  }
  const end = (byteOffset as number) + (byteLength as number);
  if (end > Number.MAX_SAFE_INTEGER) {
    throw _placeError(
      "byteLength",
      byteLength,
      Number.MAX_SAFE_INTEGER - (byteOffset as number),
      `must end at most at 2^53 - 1 (byteOffset ${byteOffset})`,
    );
  }
  // Fast path: a place inside a plain ArrayBuffer's current length.
  if (memory instanceof ArrayBuffer && end <= _byteLengthOf(memory)) return;
  const limit = _hostLimit(memory);
  if (limit !== undefined && end > limit) {
    throw _placeError(
      "byteLength",
      byteLength,
      limit - Math.min(limit, byteOffset as number),
      `must end within the ${limit}-byte memory (byteOffset ${byteOffset})`,
    );
  }
}
