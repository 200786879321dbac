/**
 * {@linkcode Storage}: the reference-counted owner of one allocation.
 *
 * @module
 */

import {
  type Allocator,
  ContractViolationError,
  DataPtr,
  describeValue,
  type Device,
  hostBuffer,
  IntrusivePtr,
  IntrusiveTarget,
  InvalidArgumentError,
  isHostMemory,
  UnsupportedOperationError,
  UseAfterFreeError,
  validateByteLength,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import { _defaultAllocator } from "./_default_allocator.ts";

/** Set by `Storage.lazy` around its constructor call. */
let lazyBytes: number | undefined;

/** Options of {@linkcode Storage.allocate} and the constructor. */
export interface StorageOptions {
  /**
   * The allocator the bytes come from; `resize` and `reset` use it too.
   *
   * @default {an allocator that makes one ArrayBuffer per allocation}
   */
  allocator?: Allocator;
  /**
   * Whether {@linkcode Storage.resize} may replace the allocation.
   *
   * @default {false}
   */
  resizable?: boolean;
}

let nextId = 1;

/** Set by `Storage.allocate` for the one constructor call it makes. */
let checkedByAllocate = false;
/**
 * The pointers live storages hold: an allocator that hands one out again
 * while a storage holds it (the same block twice) is refused, else two
 * storages would alias and the first release would free the other's bytes.
 */
const HELD: unique symbol = Symbol("allot.storage.held");
/** frozen pointers cannot carry the mark: a set (slower) for those */
const heldFrozen = new WeakSet<DataPtr>();
const held = {
  has(data: DataPtr): boolean {
    return (data as { [HELD]?: boolean })[HELD] === true ||
      (heldFrozenCount > 0 && heldFrozen.has(data));
  },
  add(data: DataPtr): void {
    if (Object.isExtensible(data)) {
      (data as { [HELD]?: boolean })[HELD] = true;
    } else if (!heldFrozen.has(data)) {
      heldFrozen.add(data);
      heldFrozenCount++;
    }
  },
  delete(data: DataPtr): void {
    if ((data as { [HELD]?: boolean })[HELD] === true) {
      (data as { [HELD]?: boolean })[HELD] = false;
    } else if (heldFrozen.delete(data)) {
      heldFrozenCount--;
    }
  },
};
let heldFrozenCount = 0;

/**
 * The owner of one allocation, like PyTorch's `StorageImpl`: a
 * {@linkcode DataPtr}, its byte length, the allocator it came from, and
 * whether it may be resized. It is an {@linkcode IntrusiveTarget}: share it
 * through {@linkcode IntrusivePtr}s, and the allocation is freed exactly once,
 * when the last strong reference is released.
 *
 * Every storage has a stable `id`, never reused in the process. Two
 * non-empty storages never alias (their allocator guarantees it); views alias
 * only by sharing a storage.
 *
 * @example Allocate, share, resize, free
 * ```ts
 * import { Storage } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * const owner = Storage.allocate(8, { resizable: true });
 * const storage = owner.target;
 * storage.bytes().set([1, 2, 3, 4, 5, 6, 7, 8]);
 * const other = owner.clone();
 * storage.resize(4);
 * assert.deepEqual([...storage.bytes()], [1, 2, 3, 4]);
 * owner.release();
 * assert.equal(storage.resourcesReleased, false);
 * other.release();
 * assert.equal(storage.resourcesReleased, true);
 * ```
 */
export class Storage extends IntrusiveTarget {
  /** A stable identifier, unique in this process. */
  readonly id: number;
  /** `undefined` while a lazy storage has not allocated yet. */
  #data: DataPtr | undefined;
  /** The byte length a lazy storage will allocate. */
  #lazyBytes = 0;
  #allocator: Allocator;
  #resizable: boolean;

  /**
   * Wraps an allocation the caller owns; the storage takes ownership of it.
   * Take first ownership with `IntrusivePtr.make(storage)`.
   *
   * @param data The allocation; released with the storage.
   * @param options The allocator `data` came from and `resizable`.
   * @throws {UseAfterFreeError} When `data` was already released.
   */
  constructor(data: DataPtr, options: StorageOptions = {}) {
    super();
    if (checkedByAllocate) {
      // From allocate(): the options and the pointer were checked there.
      checkedByAllocate = false;
      this.#data = data;
      held.add(data);
      this.#allocator = options.allocator!;
      this.#resizable = options.resizable ?? false;
      this.id = nextId++;
      return;
    }
    const allocator = _checkStorageOptions(options);
    if (lazyBytes !== undefined) {
      // Storage.lazy(): no allocation until the bytes are first needed
      this.#data = undefined;
      this.#lazyBytes = lazyBytes;
    } else if (!_isDataPtr(data)) {
      throw new InvalidArgumentError(
        `Cannot make a storage from ${
          describeValue(data)
        }: data must be a DataPtr`,
        { name: "data", value: data, limit: "DataPtr" },
      );
    } else if (data.released) {
      throw new UseAfterFreeError(
        `Cannot make a storage from ${data}: the pointer was released`,
      );
    } else if (held.has(data)) {
      throw new InvalidArgumentError(
        `Cannot make a storage from ${data}: another live storage owns it`,
        { name: "data", value: data, limit: "a pointer no storage owns" },
      );
    } else {
      this.#data = data;
      held.add(data);
    }
    this.#allocator = allocator;
    this.#resizable = options?.resizable ?? false;
    this.id = nextId++;
  }

  /**
   * Allocates `byteLength` bytes and returns the first strong reference.
   *
   * @param byteLength Number of bytes.
   * @param options Allocator and `resizable`.
   * @returns The owning handle; release it to free the bytes.
   * @throws {InvalidArgumentError} When `byteLength` is not a non-negative
   * safe integer.
   */
  static allocate(
    byteLength: number,
    options: StorageOptions = {},
  ): IntrusivePtr<Storage> {
    validateByteLength(byteLength);
    const allocator = _checkStorageOptions(options);
    const data = allocator.allocate(byteLength);
    _checkAllocated(data, byteLength);
    if (data.byteLength < byteLength || data.released) {
      const got = data.released
        ? "a released block"
        : `${data.byteLength} bytes`;
      if (!data.released) data.release();
      throw new ContractViolationError(
        `Cannot allocate a storage of ${byteLength} bytes: the allocator returned ${got}`,
      );
    }
    _checkNotHeld(data, `allocate a storage of ${byteLength} bytes`);
    // _checkStorageOptions() checked `resizable` before allocating.
    const resizable = options.resizable ?? false;
    checkedByAllocate = true;
    try {
      return IntrusivePtr.make(new Storage(data, { allocator, resizable }));
    } finally {
      checkedByAllocate = false;
    }
  }

  /**
   * A storage of `byteLength` bytes that allocates them only when they are
   * first needed (Caffe2's `mutable_data`): shapes, views and plans can be
   * made first, and bytes spent only for what is written. The allocation
   * happens at the first access to {@linkcode Storage.data} (a buffer's
   * first write, read, fill or copy, `bytes()`, `isHost`); `byteLength`,
   * `device` and views need none. A storage released before that never
   * allocates. Like {@linkcode Storage.allocate}, the bytes are as the
   * allocator returns them (write before you read).
   *
   * @param byteLength Number of bytes it will hold.
   * @param options Allocator and `resizable`.
   * @returns The owning handle.
   * @throws {InvalidArgumentError} When `byteLength` is not a non-negative
   * safe integer.
   *
   * @example Plan first, allocate on first write
   * ```ts
   * import { Buffer, Storage } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * using b = Buffer.lazy("f32", [16]);
   * using m = b.reshape([4, 4]); // views allocate nothing
   * assert.equal(b.storage.isAllocated, false);
   * m.fill(1);
   * assert.equal(b.storage.isAllocated, true);
   * using s = Storage.lazy(1 << 20); // released unused: never allocated
   * assert.equal(s.target.byteLength, 1 << 20);
   * ```
   */
  static lazy(
    byteLength: number,
    options: StorageOptions = {},
  ): IntrusivePtr<Storage> {
    validateByteLength(byteLength);
    _checkStorageOptions(options);
    lazyBytes = byteLength;
    try {
      return IntrusivePtr.make(
        new Storage(undefined as unknown as DataPtr, options),
      );
    } finally {
      lazyBytes = undefined;
    }
  }

  /**
   * The allocation; a lazy storage allocates it now.
   *
   * @throws {UseAfterFreeError} After the storage was freed.
   */
  get data(): DataPtr {
    if (this.resourcesReleased) this.#throwFreed("data");
    return this.#data ??= this.#materialize();
  }

  /** The first allocation of a lazy storage, with `allocate`'s checks. */
  #materialize(): DataPtr {
    const byteLength = this.#lazyBytes;
    const data = this.#allocator.allocate(byteLength);
    _checkAllocated(data, byteLength);
    if (data.byteLength < byteLength || data.released) {
      const got = data.released
        ? "a released block"
        : `${data.byteLength} bytes`;
      if (!data.released) data.release();
      throw new ContractViolationError(
        `Cannot allocate lazy storage ${this.id} of ${byteLength} bytes: the allocator returned ${got}`,
      );
    }
    _checkNotHeld(data, `allocate lazy storage ${this.id}`);
    held.add(data);
    return data;
  }

  /**
   * Whether the bytes are allocated: `false` only for a
   * {@linkcode Storage.lazy} storage that has not been touched yet.
   */
  get isAllocated(): boolean {
    return this.#data !== undefined;
  }

  /** Number of bytes owned (0 after `reset`). */
  get byteLength(): number {
    return this.#data?.byteLength ?? this.#lazyBytes;
  }

  /** The allocator the bytes came from. */
  get allocator(): Allocator {
    return this.#allocator;
  }

  /** The device of the allocation. */
  get device(): Device {
    return this.#data?.device ?? this.#allocator.device;
  }

  /** Whether `resize` may replace the allocation. */
  get resizable(): boolean {
    return this.#resizable;
  }

  /**
   * Whether the bytes live in host memory (`ArrayBuffer`,
   * `SharedArrayBuffer` or `WebAssembly.Memory`), so typed arrays can read
   * them.
   */
  get isHost(): boolean {
    return !this.resourcesReleased && isHostMemory(this.data.memory);
  }

  /**
   * A `Uint8Array` over the bytes. Make a new one after a resize or after a
   * `WebAssembly.Memory` grows.
   *
   * @returns The byte view.
   * @throws {UseAfterFreeError} After the storage was freed.
   * @throws {UnsupportedOperationError} When the memory is not host memory.
   */
  bytes(): Uint8Array {
    const data = this.data;
    const memory = data.memory;
    if (!isHostMemory(memory)) {
      throw new UnsupportedOperationError(
        `Cannot view the bytes of storage ${this.id} on ${data.device}: its memory is not host memory`,
      );
    }
    return new Uint8Array(
      _checkHostSpan(this, hostBuffer(memory)),
      data.byteOffset,
      data.byteLength,
    );
  }

  /**
   * Replaces the allocation with one of `byteLength` bytes from the same
   * allocator, copying the bytes both have. The new allocation is made
   * before the old one is freed, so a refused or failed call changes nothing.
   *
   * @param byteLength The new byte length.
   * @throws {UnsupportedOperationError} When the storage is not resizable.
   * @throws {InvalidArgumentError} When `byteLength` is invalid.
   * @throws {UseAfterFreeError} After the storage was freed.
   */
  resize(byteLength: number): void {
    if (this.resourcesReleased) this.#throwFreed("data");
    if (this.#data === undefined && this.#resizable) {
      validateByteLength(byteLength);
      this.#lazyBytes = byteLength; // nothing to copy yet
      return;
    }
    const old = this.data;
    if (!this.#resizable) {
      throw new UnsupportedOperationError(
        `Cannot resize storage ${this.id} from ${old.byteLength} to ${
          describeValue(byteLength)
        } bytes: it is not resizable`,
      );
    }
    validateByteLength(byteLength);
    if (byteLength === old.byteLength) return;
    const next = this.#allocator.allocate(byteLength);
    _checkAllocated(next, byteLength);
    if (next === old) {
      throw new ContractViolationError(
        `Cannot resize storage ${this.id} to ${byteLength} bytes: the allocator returned the storage's own live block`,
      );
    }
    _checkNotHeld(next, `resize storage ${this.id} to ${byteLength} bytes`);
    if (next.byteLength < byteLength || next.released) {
      const got = next.released
        ? "a released block"
        : `${next.byteLength} bytes`;
      if (!next.released) next.release();
      throw new ContractViolationError(
        `Cannot resize storage ${this.id} to ${byteLength} bytes: the allocator returned ${got}`,
      );
    }
    try {
      this.#allocator.copyData(
        next,
        old,
        Math.min(byteLength, old.byteLength),
      );
    } catch (error) {
      next.release();
      throw error;
    }
    this.#data = next;
    held.add(next);
    held.delete(old);
    old.release();
  }

  /**
   * Frees the allocation now and keeps an empty (zero-byte) one, like
   * PyTorch's `StorageImpl::reset`. Views of this storage become empty-backed:
   * reading them throws.
   *
   * @throws {UseAfterFreeError} After the storage was freed.
   */
  reset(): void {
    if (this.resourcesReleased) this.#throwFreed("data");
    if (this.#data === undefined) {
      this.#lazyBytes = 0;
      return;
    }
    const old = this.data;
    const next = this.#allocator.allocate(0);
    _checkAllocated(next, 0);
    if (next === old || next.released) {
      throw new ContractViolationError(
        `Cannot reset storage ${this.id}: the allocator returned ${
          next === old ? "the storage's own live block" : "a released block"
        }`,
      );
    }
    _checkNotHeld(next, `reset storage ${this.id}`);
    this.#data = next;
    held.add(next);
    held.delete(old);
    old.release();
  }

  /**
   * Short description such as `Storage(id=3, cpu:0, byteLength=64)`.
   *
   * @returns The description.
   */
  override toString(): string {
    return `Storage(id=${this.id}, ${this.device}, byteLength=${this.byteLength}${
      this.#data === undefined ? ", lazy" : ""
    }${this.resourcesReleased ? ", freed" : ""})`;
  }

  /** Frees the allocation; runs once, when the last strong reference goes. */
  protected override releaseResources(): void {
    const data = this.#data;
    if (data === undefined) return;
    held.delete(data);
    data.release();
  }

  #throwFreed(what: string): never {
    throw new UseAfterFreeError(
      `Cannot read ${what} of storage ${this.id}: it was freed`,
    );
  }
}

/**
 * Checks a storage's options without trusting them: an object (or
 * `undefined`), an allocator with `allocate()`, a boolean `resizable`.
 * Returns the allocator to use.
 */
function _checkStorageOptions(
  options: StorageOptions | undefined,
): Allocator {
  if (options === undefined) return _defaultAllocator;
  validateObject(options, "options");
  validateOptionKeys(options, ["allocator", "resizable"], "Storage");
  const allocator = options.allocator ?? _defaultAllocator;
  if (
    typeof allocator !== "object" || allocator === null ||
    typeof allocator.allocate !== "function"
  ) {
    throw new InvalidArgumentError(
      `Invalid allocator: expected an Allocator (with allocate()), received ${
        describeValue(allocator)
      }`,
      { name: "allocator", value: allocator, limit: "Allocator" },
    );
  }
  const resizable = options.resizable ?? false;
  if (typeof resizable !== "boolean") {
    throw new InvalidArgumentError(
      `Invalid resizable: must be a boolean, received ${
        describeValue(resizable)
      }`,
      { name: "resizable", value: resizable, limit: "boolean" },
    );
  }
  return allocator;
}

/**
 * Returns `buffer` when it still holds the storage's bytes; refuses a
 * detached `ArrayBuffer` or a resizable one shrunk under a live storage
 * (typed arrays over it would throw a `RangeError` or `TypeError`).
 */
export function _checkHostSpan<B extends ArrayBufferLike>(
  storage: Storage,
  buffer: B,
): B {
  const data = storage.data;
  const end = data.byteOffset + data.byteLength;
  if (end > buffer.byteLength) {
    throw new ContractViolationError(
      `Cannot access storage ${storage.id}: its bytes [${data.byteOffset}, ${end}) lie past the end of its memory, now ${buffer.byteLength} bytes (the ArrayBuffer was detached or shrunk under a live storage)`,
    );
  }
  return buffer;
}

/** Whether `value` is a real {@linkcode DataPtr} (its private state reads). */
function _isDataPtr(value: unknown): value is DataPtr {
  if (!(value instanceof DataPtr)) return false;
  try {
    void value.released;
    return true;
  } catch {
    return false;
  }
}

/** Refuses what an allocator returned when it is not a `DataPtr`. */
/** Refuses a block a live storage holds (left to that storage). */
function _checkNotHeld(data: DataPtr, what: string): void {
  if (held.has(data)) {
    throw new ContractViolationError(
      `Cannot ${what}: the allocator returned ${data}, a block a live storage holds`,
    );
  }
}

function _checkAllocated(data: unknown, byteLength: number): void {
  if (!_isDataPtr(data)) {
    throw new ContractViolationError(
      `Cannot allocate a storage of ${byteLength} bytes: the allocator returned ${
        describeValue(data)
      }, not a DataPtr`,
    );
  }
}
