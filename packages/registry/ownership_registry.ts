/**
 * {@linkcode OwnershipRegistry}: SCL-Core's registry of who owns which
 * memory. Records, reference-counted buffers with aliases, statistics, leak
 * detection and allocation tracking.
 *
 * @module
 */

import {
  alignUp,
  type Allocator,
  DataPtr,
  DoubleFreeError,
  hostBuffer,
  InvalidArgumentError,
  isHostMemory,
  OutOfMemoryError,
  Stat,
  type StatValues,
  UnsupportedOperationError,
  UseAfterFreeError,
  validateAlignment,
  validateByteLength,
  validateInteger,
} from "@allot/core";
import { type Dtype, dtypeInfo, type TypedArrayOf } from "@allot/storage";
import { MapRecordStore, type RecordStore } from "./record_store.ts";

/**
 * How a registered allocation is freed, after SCL-Core's `AllocType`:
 *
 * - `heap`: a {@linkcode DataPtr} from an allocator over a linear memory
 *   (such as `@allot/cpu`); freeing releases it back to its heap.
 * - `system`: the allocation owns its whole `ArrayBuffer`; freeing detaches
 *   it (`ArrayBuffer.prototype.transfer(0)`) when `detach` is on, so the bytes
 *   go back at once and stale views read as empty, and otherwise drops it.
 * - `aligned`: like `system` (or `heap`), at a byte offset that is a multiple
 *   of a power-of-two alignment, with the length padded to that alignment.
 * - `custom`: freeing calls a deleter the caller gave.
 */
export type AllocationKind = "heap" | "system" | "aligned" | "custom";

/** A place in a memory: the memory object and a byte offset into it. */
export interface Place {
  /** The memory: an `ArrayBuffer`, `SharedArrayBuffer`, `WebAssembly.Memory`, `GPUBuffer`, ... */
  readonly memory: object;
  /** Byte offset of the place in the memory. */
  readonly byteOffset: number;
}

/**
 * What the registry accepts as a pointer: a typed array or `DataView` (the
 * place is its `buffer` and `byteOffset`), a {@linkcode DataPtr}, or any
 * {@linkcode Place}. Two pointers are the same when memory and byte offset
 * are. Places in a `WebAssembly.Memory` should be given as a `DataPtr` or a
 * `Place` naming the memory, since the memory's `buffer` changes when it
 * grows.
 */
export type Pointer = ArrayBufferView | Place;

/** Where and when an allocation was registered (tracking mode). */
export interface AllocationInfo {
  /** Stack trace of the registration, without the registry's own frames. */
  stack: string;
  /** `performance.now()` at registration, in milliseconds. */
  time: number;
  /** The worker that registered it: `main`, or the Worker's name. */
  worker: string;
}

/** A registered allocation as the registry reports it. */
export interface RecordInfo {
  /** Id of the allocation, unique within its registry. */
  readonly id: number;
  /** How it is freed. */
  readonly kind: AllocationKind;
  /** The memory it lives in. */
  readonly memory: object;
  /** Byte offset of the real pointer. */
  readonly byteOffset: number;
  /** Bytes the caller asked for. */
  readonly byteLength: number;
  /** Bytes held, including alignment padding. */
  readonly reservedByteLength: number;
  /** `true` for a reference-counted buffer, `false` for a plain pointer. */
  readonly buffer: boolean;
  /** References still held: the real pointer and aliases not yet unregistered. */
  readonly references: number;
  /** Where and when it was registered, when tracking is on. */
  readonly info?: AllocationInfo;
}

/** Counts and byte figures of an {@linkcode OwnershipRegistry}. */
export interface RegistryStats {
  /** Plain pointers registered (no aliases). */
  pointers: number;
  /** Reference-counted buffers registered. */
  buffers: number;
  /** References held on buffers (real pointers plus aliases). */
  references: number;
  /** Bytes callers asked for. */
  requestedBytes: StatValues;
  /** Bytes held, including alignment padding. */
  reservedBytes: StatValues;
}

/** What was still registered when a leak check ran. */
export interface LeakReport {
  /** Why the check ran: `dispose` or `exit`. */
  reason: "dispose" | "exit";
  /** Every allocation still registered. */
  records: RecordInfo[];
  /** Sum of `byteLength` over `records`. */
  byteLength: number;
  /** Sum of `reservedByteLength` over `records`. */
  reservedByteLength: number;
  /** The printable report. */
  text: string;
}

/** Options of {@linkcode OwnershipRegistry}. */
export interface OwnershipRegistryOptions {
  /**
   * Record a stack, a time and a worker for every allocation (slow; for
   * debugging).
   *
   * @default {false}
   */
  track?: boolean;
  /**
   * Called with the leak report when `dispose()` (or the exit check) finds
   * allocations still registered.
   *
   * @default {undefined} (the report is printed with `console.warn`)
   */
  onLeak?: (report: LeakReport) => void;
  /**
   * Also check for leaks when the process or page exits (`unload` event in
   * Deno and browsers, `process.on("exit")` in Node).
   *
   * @default {false}
   */
  checkAtExit?: boolean;
  /**
   * Name of the worker this registry runs in, used in tracking records.
   *
   * @default {"main"} on the main thread; the Worker's `name` (or `"worker"`) in a Worker
   */
  worker?: string;
  /**
   * Where records are kept.
   *
   * @default {new MapRecordStore()}
   */
  store?: RecordStore<RegistryEntry>;
}

/** Options of {@linkcode OwnershipRegistry.register}. */
export interface RegisterOptions {
  /**
   * Bytes owned from the pointer on.
   *
   * @default {the view's or DataPtr's byteLength} (required for a plain Place)
   */
  byteLength?: number;
  /**
   * How the allocation is freed.
   *
   * @default {"heap"} for a DataPtr; `"custom"` when a deleter is given; `"system"` otherwise
   */
  kind?: AllocationKind;
  /**
   * Called once with the pointer when the allocation is freed (kind `custom`).
   *
   * @default {undefined}
   */
  deleter?: (pointer: Pointer) => void;
  /**
   * The alignment the byte offset must have (kind `aligned`).
   *
   * @default {1}
   */
  alignment?: number;
  /**
   * Detach the `ArrayBuffer` when the allocation is freed (kinds `system`
   * and `aligned`). Only for memory the allocation owns whole.
   *
   * @default {false}
   */
  detach?: boolean;
}

/** Options of {@linkcode OwnershipRegistry.registerBuffer}. */
export interface RegisterBufferOptions extends RegisterOptions {
  /**
   * Pointers into the buffer (`[byteOffset, byteOffset + byteLength]` of the
   * same memory), each holding one reference. A pointer may appear more than
   * once, and may equal the real pointer: each occurrence is one reference.
   *
   * @default {[]}
   */
  aliases?: readonly Pointer[];
}

/** Options of {@linkcode OwnershipRegistry.newArray}. */
export interface NewArrayOptions {
  /**
   * Allocate a `SharedArrayBuffer` (to share with Workers).
   *
   * @default {false}
   */
  shared?: boolean;
  /**
   * Byte alignment of the array; the byte length is padded to a multiple of
   * it and the record's kind is `aligned`.
   *
   * @default {undefined} (no padding; kind `system` or `heap`)
   */
  alignment?: number;
  /**
   * Allocate from this allocator (its memory must be host memory) instead of
   * a fresh `ArrayBuffer`; the record's kind is `heap`. Zero-length arrays
   * always get their own empty `ArrayBuffer`.
   *
   * @default {undefined}
   */
  allocator?: Allocator;
}

/** An allocation: a plain pointer or a reference-counted buffer. Internal. */
interface _Allocation {
  id: number;
  kind: AllocationKind;
  memory: object;
  byteOffset: number;
  byteLength: number;
  reservedByteLength: number;
  buffer: boolean;
  references: number;
  free: () => void;
  info: AllocationInfo | undefined;
}

/**
 * What a {@linkcode RecordStore} of an {@linkcode OwnershipRegistry} holds at
 * one place: the allocation and how many references that place holds.
 */
export interface RegistryEntry {
  /** The allocation (opaque to stores). */
  readonly allocation: unknown;
  /** References held at this place. */
  count: number;
}

interface _Entry extends RegistryEntry {
  readonly allocation: _Allocation;
}

const KINDS: readonly AllocationKind[] = [
  "heap",
  "system",
  "aligned",
  "custom",
];

function detectWorker(): string {
  const scope = (globalThis as { WorkerGlobalScope?: unknown })
    .WorkerGlobalScope;
  if (typeof scope === "function" && globalThis instanceof scope) {
    const name = (globalThis as { name?: unknown }).name;
    return typeof name === "string" && name !== "" ? name : "worker";
  }
  return "main";
}

function describePointer(memory: object, byteOffset: number): string {
  const name = memory.constructor?.name ?? "memory";
  const length = (memory as { byteLength?: unknown }).byteLength;
  return `${name}${
    typeof length === "number" ? `(${length})` : ""
  }+${byteOffset}`;
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

function detach(memory: object): void {
  if (
    memory instanceof ArrayBuffer && !memory.detached &&
    typeof memory.transfer === "function"
  ) {
    memory.transfer(0);
  }
}

/**
 * SCL-Core's `Registry` for JavaScript: records which allocations are live,
 * how to free each, and who still references them.
 *
 * - **Records**: `register(pointer)` records a pointer with its byte length
 *   and allocation kind; `unregister(pointer)` frees it at once.
 *   `newArray(dtype, length)` allocates and registers in one call.
 * - **Reference-counted buffers**: `registerBuffer(pointer, { aliases })`
 *   starts the count at one plus the number of aliases; each `unregister` of
 *   the real pointer or an alias drops one; the memory is freed at zero.
 *   `addAlias` takes one more reference through a new pointer.
 * - **Queries**: `isRegistered`, `totalBytes`, `pointerCount`, `bufferCount`,
 *   `stats()`, `records()`, and `report()` for printing.
 * - **Leaks**: `dispose()` reports what is still registered (with byte
 *   totals), then frees it; `checkAtExit` reports at process exit.
 * - **Tracking**: with `track: true` each record keeps its stack, time and
 *   worker (`allocationInfo(pointer)`).
 *
 * A pointer is a place in a memory: a typed array (its buffer and byte
 * offset), a `DataPtr`, or `{ memory, byteOffset }`. Unregistering a pointer
 * that is not registered throws {@linkcode DoubleFreeError}; a refused call
 * changes nothing.
 *
 * The registry belongs to one JS thread (a Worker has its own). SCL-Core
 * shards its registry to spread lock contention between threads; one JS
 * thread has no contention, so there are no shards here. Records live behind
 * the {@linkcode RecordStore} interface so a shared-memory store can serve
 * several Workers later.
 *
 * @example Simple ownership and a buffer with aliases
 * ```ts
 * import { OwnershipRegistry } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * using registry = new OwnershipRegistry();
 * const data = registry.newArray("f32", 1000);
 * assert.ok(registry.isRegistered(data));
 * registry.unregister(data); // freed at once
 * assert.equal(data.length, 0); // its ArrayBuffer was detached
 *
 * const main = new Float32Array(1000);
 * const columns = [0, 1, 2].map((i) => main.subarray(i * 100, i * 100 + 100));
 * registry.registerBuffer(main, { aliases: columns.slice(1) });
 * assert.equal(registry.records()[0].references, 3);
 * registry.unregister(main);
 * registry.unregister(columns[1]);
 * assert.equal(registry.bufferCount, 1);
 * registry.unregister(columns[2]); // last reference: freed
 * assert.equal(registry.bufferCount, 0);
 * ```
 */
export class OwnershipRegistry {
  #store: RecordStore<RegistryEntry>;
  #track: boolean;
  #worker: string;
  #onLeak: ((report: LeakReport) => void) | undefined;
  #nextId = 1;
  #pointers = 0;
  #buffers = 0;
  #references = 0;
  #requested = new Stat();
  #reserved = new Stat();
  #live = new Set<_Allocation>();
  #disposed = false;
  #exitCleanup: (() => void) | undefined;

  /**
   * Creates an empty registry.
   *
   * @param options Tracking, leak reporting and the record store.
   */
  constructor(options: OwnershipRegistryOptions = {}) {
    this.#store = options.store ?? new MapRecordStore<RegistryEntry>();
    this.#track = options.track ?? false;
    this.#worker = options.worker ?? detectWorker();
    this.#onLeak = options.onLeak;
    if (options.checkAtExit) this.#installExitCheck();
  }

  /** Whether tracking (stack, time, worker per record) is on. */
  get tracking(): boolean {
    return this.#track;
  }

  /** The worker name recorded in tracking records. */
  get worker(): string {
    return this.#worker;
  }

  /** Whether `dispose()` has run. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** Plain pointers registered (SCL's `get_num_pointers`). */
  get pointerCount(): number {
    return this.#pointers;
  }

  /** Reference-counted buffers registered (SCL's `get_num_buffers`). */
  get bufferCount(): number {
    return this.#buffers;
  }

  /** Bytes registered, as callers asked for them (SCL's `get_total_bytes`). */
  get totalBytes(): number {
    return this.#requested.current;
  }

  /** Bytes held, including alignment padding. */
  get reservedBytes(): number {
    return this.#reserved.current;
  }

  /**
   * Registers a plain pointer: one owner, freed by the first `unregister`.
   *
   * @param pointer A typed array, `DataPtr` or place.
   * @param options Byte length, kind and deleter.
   * @returns The allocation's id.
   * @throws {InvalidArgumentError} When the pointer is already registered,
   * a length, kind or alignment is invalid, or a custom kind has no deleter.
   * @throws {UseAfterFreeError} After `dispose()`, or for a released `DataPtr`.
   *
   * @example Register a heap pointer and an external buffer with a deleter
   * ```ts
   * import { OwnershipRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using registry = new OwnershipRegistry();
   * const freed: number[] = [];
   * const data = new Uint8Array(64);
   * registry.register(data, { deleter: (p) => freed.push((p as Uint8Array).length) });
   * assert.equal(registry.totalBytes, 64);
   * registry.unregister(data);
   * assert.deepEqual(freed, [64]);
   * ```
   */
  register(pointer: Pointer, options: RegisterOptions = {}): number {
    return this.#register(pointer, options, undefined, "register");
  }

  /**
   * Registers a reference-counted buffer: the real pointer plus aliases into
   * it. The count starts at one plus the number of aliases; the memory is
   * freed when the last reference is unregistered.
   *
   * @param pointer The real pointer (what is freed).
   * @param options Byte length, kind, deleter and aliases.
   * @returns The buffer's id.
   * @throws {InvalidArgumentError} When a pointer is already registered
   * elsewhere, an alias lies outside the buffer, or an option is invalid.
   * @throws {UseAfterFreeError} After `dispose()`.
   *
   * @example
   * ```ts
   * import { OwnershipRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using registry = new OwnershipRegistry();
   * const main = new Float64Array(10);
   * registry.registerBuffer(main, { aliases: [main.subarray(5)] });
   * registry.unregister(main.subarray(5));
   * assert.ok(registry.isRegistered(main));
   * registry.unregister(main);
   * assert.ok(!registry.isRegistered(main));
   * ```
   */
  registerBuffer(
    pointer: Pointer,
    options: RegisterBufferOptions = {},
  ): number {
    return this.#register(
      pointer,
      options,
      options.aliases ?? [],
      "registerBuffer",
    );
  }

  /**
   * Takes one more reference on the allocation `existing` belongs to,
   * through `alias` (a pointer into the same allocation). A plain pointer
   * becomes a reference-counted buffer.
   *
   * @param existing A registered pointer (real or alias).
   * @param alias A pointer inside the allocation; may already be registered
   * for the same allocation (each call holds one more reference there).
   * @returns The number of references after the call.
   * @throws {DoubleFreeError} When `existing` is not registered.
   * @throws {InvalidArgumentError} When `alias` lies outside the allocation
   * or is registered for another one.
   *
   * @example Views that share memory keep it alive
   * ```ts
   * import { OwnershipRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using registry = new OwnershipRegistry();
   * const block = registry.newArray("i32", 100);
   * const row = block.subarray(10, 20);
   * assert.equal(registry.addAlias(block, row), 2);
   * registry.unregister(block);
   * assert.equal(row.length, 10); // still alive
   * registry.unregister(row);
   * assert.equal(row.length, 0); // freed
   * ```
   */
  addAlias(existing: Pointer, alias: Pointer): number {
    this.#requireLive("addAlias");
    const [memory, byteOffset] = this.#placeOf(existing, "existing");
    const entry = this.#store.get(memory, byteOffset) as _Entry | undefined;
    if (entry === undefined) {
      throw new DoubleFreeError(
        `Cannot add an alias to ${
          describePointer(memory, byteOffset)
        }: the pointer is not registered`,
      );
    }
    const allocation = entry.allocation;
    // Fast path: one more reference through the same pointer.
    let aliasEntry: RegistryEntry | undefined = entry;
    if (alias !== existing) {
      const [aliasMemory, aliasOffset] = this.#placeOf(alias, "alias");
      if (aliasOffset < 0) this.#throwDetached("addAlias", "alias");
      this.#checkAlias(allocation, aliasMemory, aliasOffset, "addAlias");
      aliasEntry = this.#store.get(aliasMemory, aliasOffset);
      if (aliasEntry === undefined) {
        aliasEntry = { allocation, count: 0 } as _Entry;
        this.#store.set(aliasMemory, aliasOffset, aliasEntry);
      }
    }
    aliasEntry.count++;
    if (!allocation.buffer) {
      allocation.buffer = true;
      this.#pointers--;
      this.#buffers++;
      this.#references += allocation.references;
    }
    allocation.references++;
    this.#references++;
    return allocation.references;
  }

  /**
   * Drops the reference `pointer` holds. A plain pointer is freed at once;
   * a buffer is freed when its last reference goes.
   *
   * @param pointer A registered pointer (real or alias).
   * @returns `true` when the memory was freed by this call.
   * @throws {DoubleFreeError} When the pointer is not registered (never was,
   * or was already unregistered); nothing changes.
   * @throws {UseAfterFreeError} After `dispose()`.
   *
   * @example
   * ```ts
   * import { DoubleFreeError } from "@allot/core";
   * import { OwnershipRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using registry = new OwnershipRegistry();
   * const data = registry.newArray("u8", 16);
   * assert.equal(registry.unregister(data), true);
   * assert.throws(() => registry.unregister(data), DoubleFreeError);
   * ```
   */
  unregister(pointer: Pointer): boolean {
    this.#requireLive("unregister");
    const [memory, byteOffset] = this.#placeOf(pointer, "pointer");
    const entry = this.#store.get(memory, byteOffset) as _Entry | undefined;
    if (entry === undefined) {
      throw new DoubleFreeError(
        `Cannot unregister ${
          describePointer(memory, byteOffset)
        }: the pointer is not registered (never registered, or already unregistered)`,
      );
    }
    const allocation = entry.allocation;
    if (--entry.count === 0) this.#store.delete(memory, byteOffset);
    allocation.references--;
    if (allocation.buffer) this.#references--;
    if (allocation.references > 0) return false;
    this.#forget(allocation);
    allocation.free();
    return true;
  }

  /**
   * Unregisters and returns `true`, or returns `false` when the pointer is
   * not registered.
   *
   * @param pointer A pointer.
   * @returns Whether a reference was dropped.
   */
  tryUnregister(pointer: Pointer): boolean {
    if (!this.isRegistered(pointer)) return false;
    this.unregister(pointer);
    return true;
  }

  /**
   * Whether `pointer` holds a reference (as a plain pointer, a real buffer
   * pointer or an alias).
   *
   * @param pointer A pointer.
   * @returns `true` when registered.
   */
  isRegistered(pointer: Pointer): boolean {
    const [memory, byteOffset] = this.#placeOf(pointer, "pointer");
    return this.#store.get(memory, byteOffset) !== undefined;
  }

  /**
   * Allocates an array of `length` elements and registers it, in one call
   * (SCL's `new_array<T>(count)`).
   *
   * @param dtype Element type, such as `"f32"`.
   * @param length Number of elements.
   * @param options Shared memory, alignment or an allocator to use.
   * @returns The array; unregister it (or the registry's `dispose()`) frees it.
   * @throws {InvalidArgumentError} For an unknown dtype, a bad length or
   * alignment, or an allocator whose memory is not host memory.
   * @throws {OutOfMemoryError} When the memory cannot be allocated.
   *
   * @example
   * ```ts
   * import { OwnershipRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using registry = new OwnershipRegistry();
   * const a = registry.newArray("f64", 3, { alignment: 64 });
   * assert.equal(a.length, 3);
   * assert.equal(registry.totalBytes, 24);
   * assert.equal(registry.reservedBytes, 64);
   * registry.unregister(a);
   * ```
   */
  newArray<D extends Dtype>(
    dtype: D,
    length: number,
    options: NewArrayOptions = {},
  ): TypedArrayOf<D> {
    this.#requireLive("newArray");
    const Ctor = dtypeInfo(dtype).arrayType;
    const bpe = Ctor.BYTES_PER_ELEMENT;
    validateInteger(
      length,
      0,
      Math.floor(Number.MAX_SAFE_INTEGER / bpe),
      "length",
    );
    const byteLength = length * bpe;
    const alignment = options.alignment === undefined
      ? undefined
      : validateAlignment(options.alignment);
    const reserved = alignment === undefined
      ? byteLength
      : alignUp(byteLength, alignment);
    // Zero-length arrays never come from the allocator: a zero-byte place in
    // a heap may coincide with a live allocation's place.
    const allocator = length === 0 ? undefined : options.allocator;
    if (allocator !== undefined) {
      if (options.shared) {
        throw new InvalidArgumentError(
          `Cannot allocate ${byteLength} bytes: shared and allocator are exclusive, received both`,
          { name: "shared", value: true, limit: "no allocator" },
        );
      }
      const pad = alignment === undefined ? 0 : alignment - 1;
      const ptr = allocator.allocate(reserved + pad);
      let array: TypedArrayOf<D>;
      try {
        if (!isHostMemory(ptr.memory)) {
          throw new InvalidArgumentError(
            `Cannot allocate ${byteLength} bytes: the allocator's memory must be host memory, received ${
              (ptr.memory as object)?.constructor?.name
            }`,
            { name: "allocator", value: allocator, limit: "host memory" },
          );
        }
        const offset = alignment === undefined
          ? ptr.byteOffset
          : alignUp(ptr.byteOffset, alignment);
        if (offset % bpe !== 0) {
          throw new InvalidArgumentError(
            `Cannot allocate ${dtype} array: the allocator returned byteOffset ${offset}, not a multiple of ${bpe}`,
            { name: "allocator", value: offset, limit: bpe },
          );
        }
        array = new Ctor(hostBuffer(ptr.memory), offset, length);
        this.#register(
          array,
          {
            byteLength,
            kind: alignment === undefined ? "heap" : "aligned",
            alignment,
          },
          undefined,
          "newArray",
          () => ptr.release(),
          reserved + pad,
        );
      } catch (error) {
        ptr.release();
        throw error;
      }
      return array;
    }
    let memory: ArrayBuffer | SharedArrayBuffer;
    try {
      memory = options.shared
        ? new SharedArrayBuffer(reserved)
        : new ArrayBuffer(reserved);
    } catch (error) {
      throw new OutOfMemoryError(
        `Cannot allocate ${reserved} bytes: the engine refused a ${
          options.shared ? "SharedArrayBuffer" : "ArrayBuffer"
        } of that length`,
        { requestedBytes: reserved },
        { cause: error },
      );
    }
    const array = new Ctor(memory, 0, length);
    this.#register(
      array,
      {
        byteLength,
        kind: alignment === undefined ? "system" : "aligned",
        alignment,
        detach: !options.shared,
      },
      undefined,
      "newArray",
      undefined,
      reserved,
    );
    return array;
  }

  /**
   * Registers an array whose whole `ArrayBuffer` this registry now owns,
   * such as one received from another Worker by transfer: kind `system`,
   * detached when freed. The receiving side of
   * {@linkcode OwnershipRegistry.transferOut}.
   *
   * @param array A typed array over memory nobody else owns.
   * @returns The allocation's id.
   * @throws {InvalidArgumentError} When the array is already registered or
   * its buffer is detached.
   *
   * @example
   * ```ts
   * import { OwnershipRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using registry = new OwnershipRegistry();
   * const received = new Float32Array(new ArrayBuffer(16));
   * registry.adopt(received);
   * assert.equal(registry.totalBytes, 16);
   * registry.unregister(received);
   * assert.equal(received.length, 0);
   * ```
   */
  adopt(array: ArrayBufferView): number {
    const buffer = array?.buffer;
    if (buffer instanceof ArrayBuffer && buffer.detached) {
      throw new InvalidArgumentError(
        `Cannot adopt a ${array.constructor.name}: its ArrayBuffer is detached`,
        { name: "array", value: "detached", limit: "attached buffer" },
      );
    }
    return this.#register(
      array,
      {
        kind: "system",
        byteLength: array.byteLength,
        detach: buffer instanceof ArrayBuffer,
      },
      undefined,
      "adopt",
      undefined,
      buffer?.byteLength,
    );
  }

  /**
   * Gives up ownership of an array so its `ArrayBuffer` can be transferred
   * to a Worker (`worker.postMessage(message, [buffer])`): the record is
   * removed without freeing, and the buffer is returned. The receiver owns
   * it from then on (`adopt` it in the Worker's registry). Only plain
   * `system` or `aligned` records that own a whole non-shared `ArrayBuffer`
   * can move; share a `SharedArrayBuffer` instead of transferring it.
   *
   * @param pointer The registered array (its real pointer).
   * @returns The buffer to put in the transfer list.
   * @throws {DoubleFreeError} When the pointer is not registered.
   * @throws {UnsupportedOperationError} For a buffer with aliases, a heap or
   * custom allocation, or a `SharedArrayBuffer`; nothing changes.
   *
   * @example
   * ```ts
   * import { OwnershipRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using registry = new OwnershipRegistry();
   * const data = registry.newArray("f64", 4);
   * const buffer = registry.transferOut(data);
   * assert.ok(!registry.isRegistered(data));
   * const moved = structuredClone(buffer, { transfer: [buffer] });
   * assert.equal(data.length, 0); // detached here, owned by the receiver
   * assert.equal(moved.byteLength, 32);
   * ```
   */
  transferOut(pointer: Pointer): ArrayBuffer {
    this.#requireLive("transferOut");
    const [memory, byteOffset] = this.#placeOf(pointer, "pointer");
    const entry = this.#store.get(memory, byteOffset) as _Entry | undefined;
    if (entry === undefined) {
      throw new DoubleFreeError(
        `Cannot transfer ${
          describePointer(memory, byteOffset)
        }: the pointer is not registered`,
      );
    }
    const a = entry.allocation;
    const why = a.buffer
      ? "it is a buffer with aliases"
      : a.kind !== "system" && a.kind !== "aligned"
      ? `its kind is ${a.kind}`
      : !(memory instanceof ArrayBuffer)
      ? `its memory is a ${memory.constructor?.name} (share it instead)`
      : a.byteOffset !== byteOffset || byteOffset !== 0
      ? "it does not own its ArrayBuffer from byte 0"
      : undefined;
    if (why !== undefined) {
      throw new UnsupportedOperationError(
        `Cannot transfer ${describePointer(memory, byteOffset)}: ${why}`,
      );
    }
    this.#store.delete(memory, byteOffset);
    this.#forget(a);
    return memory as ArrayBuffer;
  }

  /**
   * Where and when the allocation holding `pointer` was registered.
   *
   * @param pointer A registered pointer.
   * @returns The tracking record, or `undefined` when tracking is off or the
   * pointer is not registered.
   *
   * @example
   * ```ts
   * import { OwnershipRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using registry = new OwnershipRegistry({ track: true });
   * const a = registry.newArray("u8", 8);
   * assert.equal(registry.allocationInfo(a)?.worker, "main");
   * registry.unregister(a);
   * ```
   */
  allocationInfo(pointer: Pointer): AllocationInfo | undefined {
    const [memory, byteOffset] = this.#placeOf(pointer, "pointer");
    return (this.#store.get(memory, byteOffset) as _Entry | undefined)
      ?.allocation.info;
  }

  /**
   * The record of the allocation holding `pointer`.
   *
   * @param pointer A registered pointer.
   * @returns The record, or `undefined` when the pointer is not registered.
   */
  recordOf(pointer: Pointer): RecordInfo | undefined {
    const [memory, byteOffset] = this.#placeOf(pointer, "pointer");
    const entry = this.#store.get(memory, byteOffset) as _Entry | undefined;
    return entry === undefined ? undefined : toInfo(entry.allocation);
  }

  /**
   * Every live allocation, oldest first.
   *
   * @returns The records.
   */
  records(): RecordInfo[] {
    return [...this.#live].map(toInfo);
  }

  /**
   * Counts and byte figures.
   *
   * @returns The stats.
   */
  stats(): RegistryStats {
    return {
      pointers: this.#pointers,
      buffers: this.#buffers,
      references: this.#references,
      requestedBytes: this.#requested.values(),
      reservedBytes: this.#reserved.values(),
    };
  }

  /**
   * A printable statistics report (SCL's `print_statistics`), listing the
   * largest live allocations.
   *
   * @param limit How many allocations to list.
   * @returns The report.
   *
   * @example
   * ```ts
   * import { OwnershipRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * using registry = new OwnershipRegistry();
   * const a = registry.newArray("f32", 256);
   * assert.match(registry.report(), /pointers 1, buffers 0/);
   * registry.unregister(a);
   * ```
   */
  report(limit = 20): string {
    const r = this.#requested, s = this.#reserved;
    const lines = [
      `OwnershipRegistry (${this.#worker}): pointers ${this.#pointers}, buffers ${this.#buffers} (${this.#references} references)`,
      `  requested bytes: current ${
        formatBytes(r.current)
      } (${r.current}), peak ${formatBytes(r.peak)}, allocated ${
        formatBytes(r.allocated)
      }, freed ${formatBytes(r.freed)}`,
      `  reserved bytes:  current ${
        formatBytes(s.current)
      } (${s.current}), peak ${formatBytes(s.peak)}`,
    ];
    const live = [...this.#live].sort((a, b) =>
      b.reservedByteLength - a.reservedByteLength
    );
    for (const a of live.slice(0, Math.max(0, limit))) {
      lines.push(
        `  #${a.id} ${a.kind} ${describePointer(a.memory, a.byteOffset)} ${
          formatBytes(a.byteLength)
        }${a.buffer ? `, ${a.references} references` : ""}${
          a.info ? `, ${a.info.worker} at ${a.info.time.toFixed(1)} ms` : ""
        }`,
      );
      if (a.info) {
        const frame = a.info.stack.split("\n")[0]?.trim();
        if (frame) lines.push(`      ${frame}`);
      }
    }
    if (live.length > limit) {
      lines.push(`  ... and ${live.length - limit} more`);
    }
    return lines.join("\n");
  }

  /**
   * Checks for leaks: reports every allocation still registered (to
   * `onLeak`, or `console.warn`), then frees them all. Later calls do
   * nothing. The registry refuses new work afterwards.
   *
   * @returns The report, or `undefined` when nothing was registered.
   *
   * @example
   * ```ts
   * import { OwnershipRegistry } from "@allot/registry";
   * import assert from "node:assert/strict";
   *
   * const leaks: number[] = [];
   * const registry = new OwnershipRegistry({ onLeak: (r) => leaks.push(r.byteLength) });
   * registry.newArray("f32", 4);
   * registry.dispose();
   * assert.deepEqual(leaks, [16]);
   * ```
   */
  dispose(): LeakReport | undefined {
    if (this.#disposed) return undefined;
    this.#disposed = true;
    this.#exitCleanup?.();
    this.#exitCleanup = undefined;
    const report = this.#leakReport("dispose");
    const live = [...this.#live];
    this.#store.clear();
    this.#live.clear();
    for (const allocation of live) {
      this.#requested.decrease(allocation.byteLength);
      this.#reserved.decrease(allocation.reservedByteLength);
    }
    this.#pointers = this.#buffers = this.#references = 0;
    let failure: unknown;
    for (const allocation of live) {
      try {
        allocation.free();
      } catch (error) {
        failure ??= error;
      }
    }
    if (report !== undefined) this.#emit(report);
    if (failure !== undefined) throw failure;
    return report;
  }

  /** Same as {@linkcode OwnershipRegistry.dispose}, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  // --- internals ---------------------------------------------------------

  #emit(report: LeakReport): void {
    if (this.#onLeak) this.#onLeak(report);
    else console.warn(report.text);
  }

  #leakReport(reason: "dispose" | "exit"): LeakReport | undefined {
    if (this.#live.size === 0) return undefined;
    const records = [...this.#live].map(toInfo);
    let byteLength = 0, reservedByteLength = 0;
    for (const r of records) {
      byteLength += r.byteLength;
      reservedByteLength += r.reservedByteLength;
    }
    const text =
      `Memory leak detected at ${reason}: ${records.length} allocation${
        records.length === 1 ? "" : "s"
      } still registered, ${byteLength} bytes (${reservedByteLength} reserved)\n${this.report()}`;
    return { reason, records, byteLength, reservedByteLength, text };
  }

  #installExitCheck(): void {
    const check = () => {
      if (this.#disposed) return;
      const report = this.#leakReport("exit");
      if (report !== undefined) this.#emit(report);
    };
    const g = globalThis as {
      addEventListener?: (type: string, fn: () => void) => void;
      removeEventListener?: (type: string, fn: () => void) => void;
      process?: {
        on?: (type: string, fn: () => void) => void;
        off?: (type: string, fn: () => void) => void;
      };
      Deno?: unknown;
    };
    if (typeof g.addEventListener === "function" && g.Deno !== undefined) {
      g.addEventListener("unload", check);
      this.#exitCleanup = () => g.removeEventListener?.("unload", check);
    } else if (typeof g.process?.on === "function") {
      g.process.on("exit", check);
      this.#exitCleanup = () => g.process?.off?.("exit", check);
    } else if (typeof g.addEventListener === "function") {
      g.addEventListener("unload", check);
      this.#exitCleanup = () => g.removeEventListener?.("unload", check);
    }
  }

  #requireLive(what: string): void {
    if (this.#disposed) {
      throw new UseAfterFreeError(
        `Cannot ${what}: the registry was disposed`,
      );
    }
  }

  #placeOf(pointer: Pointer, name: string): [object, number] {
    if (ArrayBuffer.isView(pointer)) {
      const buffer = pointer.buffer;
      // A detached view reports byteOffset 0; -1 matches no record, so
      // lookups fail (DoubleFreeError, false) instead of hitting offset 0.
      if (buffer instanceof ArrayBuffer && buffer.detached) return [buffer, -1];
      return [buffer, pointer.byteOffset];
    }
    if (pointer === null || typeof pointer !== "object") {
      throw new InvalidArgumentError(
        `Invalid ${name}: expected a typed array, DataPtr or { memory, byteOffset }, received ${
          String(pointer)
        }`,
        { name, value: pointer, limit: "Pointer" },
      );
    }
    if (pointer instanceof DataPtr && pointer.released) {
      throw new UseAfterFreeError(
        `Cannot use ${pointer} as a ${name}: the pointer was released`,
      );
    }
    const memory = pointer.memory;
    const byteOffset = pointer.byteOffset;
    if (memory === null || typeof memory !== "object") {
      throw new InvalidArgumentError(
        `Invalid ${name}: memory must be an object, received ${String(memory)}`,
        { name: `${name}.memory`, value: memory, limit: "object" },
      );
    }
    if (!Number.isSafeInteger(byteOffset) || byteOffset < 0) {
      validateByteLength(
        byteOffset,
        Number.MAX_SAFE_INTEGER,
        `${name}.byteOffset`,
      );
    }
    return [memory, byteOffset];
  }

  #throwDetached(what: string, name: string): never {
    throw new UseAfterFreeError(
      `Cannot ${what}: the ${name}'s ArrayBuffer is detached (freed or transferred)`,
    );
  }

  #checkAlias(
    allocation: _Allocation,
    memory: object,
    byteOffset: number,
    what: string,
  ): void {
    const end = allocation.byteOffset + allocation.byteLength;
    if (
      memory !== allocation.memory || byteOffset < allocation.byteOffset ||
      byteOffset > end
    ) {
      throw new InvalidArgumentError(
        `Cannot ${what} ${
          describePointer(memory, byteOffset)
        }: an alias must lie in ${
          describePointer(allocation.memory, allocation.byteOffset)
        } up to byte ${end}`,
        {
          name: "alias",
          value: byteOffset,
          limit: [allocation.byteOffset, end],
        },
      );
    }
    const existing = this.#store.get(memory, byteOffset) as _Entry | undefined;
    if (existing !== undefined && existing.allocation !== allocation) {
      throw new InvalidArgumentError(
        `Cannot ${what} ${
          describePointer(memory, byteOffset)
        }: the pointer is registered for allocation #${existing.allocation.id}`,
        { name: "alias", value: byteOffset, limit: "unregistered" },
      );
    }
  }

  #register(
    pointer: Pointer,
    options: RegisterOptions,
    aliases: readonly Pointer[] | undefined,
    what: string,
    free?: () => void,
    reservedByteLength?: number,
  ): number {
    this.#requireLive(what);
    const [memory, byteOffset] = this.#placeOf(pointer, "pointer");
    if (byteOffset < 0) this.#throwDetached(what, "pointer");
    const implicitLength = ArrayBuffer.isView(pointer)
      ? pointer.byteLength
      : pointer instanceof DataPtr
      ? pointer.byteLength
      : undefined;
    const byteLengthValue = options.byteLength ?? implicitLength;
    if (byteLengthValue === undefined) {
      throw new InvalidArgumentError(
        `Cannot ${what} ${
          describePointer(memory, byteOffset)
        }: byteLength is required for a place, received undefined`,
        { name: "byteLength", value: undefined, limit: "integer >= 0" },
      );
    }
    const byteLength = validateByteLength(byteLengthValue);
    const kind: AllocationKind = options.kind ??
      (pointer instanceof DataPtr
        ? "heap"
        : options.deleter
        ? "custom"
        : "system");
    if (!KINDS.includes(kind)) {
      throw new InvalidArgumentError(
        `Invalid kind: must be one of ${KINDS.join(", ")}, received ${
          JSON.stringify(kind)
        }`,
        { name: "kind", value: kind, limit: KINDS },
      );
    }
    if (kind === "custom" && typeof options.deleter !== "function") {
      throw new InvalidArgumentError(
        `Cannot ${what} with kind custom: a deleter function is required, received ${typeof options
          .deleter}`,
        { name: "deleter", value: options.deleter, limit: "function" },
      );
    }
    if (options.alignment !== undefined) {
      const alignment = validateAlignment(options.alignment);
      if (byteOffset % alignment !== 0) {
        throw new InvalidArgumentError(
          `Cannot ${what} ${
            describePointer(memory, byteOffset)
          }: byteOffset must be a multiple of the alignment ${alignment}, received ${byteOffset}`,
          { name: "byteOffset", value: byteOffset, limit: alignment },
        );
      }
    }
    if (this.#store.get(memory, byteOffset) !== undefined) {
      throw new InvalidArgumentError(
        `Cannot ${what} ${
          describePointer(memory, byteOffset)
        }: the pointer is already registered`,
        { name: "pointer", value: byteOffset, limit: "unregistered" },
      );
    }
    const allocation: _Allocation = {
      id: this.#nextId,
      kind,
      memory,
      byteOffset,
      byteLength,
      reservedByteLength: reservedByteLength ?? byteLength,
      buffer: aliases !== undefined,
      references: 1,
      free: free ?? makeFree(kind, pointer, memory, options),
      info: undefined,
    };
    const places: [object, number][] = [];
    if (aliases !== undefined) {
      if (!Array.isArray(aliases)) {
        throw new InvalidArgumentError(
          `Invalid aliases: expected an array of pointers, received ${typeof aliases}`,
          { name: "aliases", value: aliases, limit: "Pointer[]" },
        );
      }
      for (const alias of aliases) {
        const [m, o] = this.#placeOf(alias, "alias");
        if (o < 0) this.#throwDetached(what, "alias");
        this.#checkAlias(allocation, m, o, what);
        places.push([m, o]);
      }
    }
    // Validated: from here on nothing throws.
    this.#nextId++;
    if (this.#track) {
      allocation.info = {
        stack: (new Error().stack ?? "").split("\n").slice(3).join("\n"),
        time: performance.now(),
        worker: this.#worker,
      };
    }
    this.#store.set(memory, byteOffset, { allocation, count: 1 } as _Entry);
    for (const [m, o] of places) {
      const entry = this.#store.get(m, o);
      if (entry === undefined) {
        this.#store.set(m, o, { allocation, count: 1 } as _Entry);
      } else entry.count++;
    }
    allocation.references += places.length;
    if (allocation.buffer) {
      this.#buffers++;
      this.#references += allocation.references;
    } else this.#pointers++;
    this.#requested.increase(byteLength);
    this.#reserved.increase(allocation.reservedByteLength);
    this.#live.add(allocation);
    return allocation.id;
  }

  #forget(allocation: _Allocation): void {
    this.#live.delete(allocation);
    if (allocation.buffer) this.#buffers--;
    else this.#pointers--;
    this.#requested.decrease(allocation.byteLength);
    this.#reserved.decrease(allocation.reservedByteLength);
  }
}

function makeFree(
  kind: AllocationKind,
  pointer: Pointer,
  memory: object,
  options: RegisterOptions,
): () => void {
  if (kind === "custom") {
    const deleter = options.deleter!;
    return () => deleter(pointer);
  }
  if (kind === "heap" && pointer instanceof DataPtr) {
    return () => pointer.release();
  }
  if (options.detach) return () => detach(memory);
  if (pointer instanceof DataPtr) return () => pointer.release();
  return () => {};
}

function toInfo(a: _Allocation): RecordInfo {
  const info: RecordInfo = {
    id: a.id,
    kind: a.kind,
    memory: a.memory,
    byteOffset: a.byteOffset,
    byteLength: a.byteLength,
    reservedByteLength: a.reservedByteLength,
    buffer: a.buffer,
    references: a.references,
    ...(a.info ? { info: a.info } : {}),
  };
  return info;
}

let defaultOwnership: OwnershipRegistry | undefined;

/**
 * The default ownership registry, created on first use, for code that does
 * not make its own (for example `@allot/sparse` when given no registry).
 *
 * @returns The same registry on every call.
 *
 * @example
 * ```ts
 * import { defaultOwnershipRegistry } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * const registry = defaultOwnershipRegistry();
 * const a = registry.newArray("u8", 4);
 * registry.unregister(a);
 * assert.equal(defaultOwnershipRegistry(), registry);
 * ```
 */
export function defaultOwnershipRegistry(): OwnershipRegistry {
  if (defaultOwnership === undefined || defaultOwnership.disposed) {
    defaultOwnership = new OwnershipRegistry();
  }
  return defaultOwnership;
}
