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
  viewSpan,
} from "@allot/core";
import {
  ContractViolationError,
  formatStatsSummary,
  type MemorySummaryOptions,
  validateOptionKeys,
} from "@allot/core";
import { type Dtype, dtypeInfo, type TypedArrayOf } from "@allot/storage";
import { MapRecordStore, type RecordStore } from "./record_store.ts";
import {
  checkFlag,
  describeValue,
  readOptions,
  typeName,
} from "./_describe.ts";
import {
  _AliasTable,
  _RecordTable,
  FREE_DELETER,
  FREE_DETACH,
  FREE_NONE,
  FREE_RELEASE,
} from "./_record_table.ts";

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
   * Where records are kept. A store other than a `MapRecordStore` has its
   * `get()` answers checked (-1, or the value set for that place): a lying
   * store gets a typed error before anything changes.
   *
   * @default {new MapRecordStore()}
   */
  store?: RecordStore;
  /**
   * Debug mode for hunting use-after-free bugs (slow): freed heap-kind
   * memory is filled with junk (`0xdd`) and kept in a quarantine of recent
   * frees; every later `register`, `unregister` and `newArray` first checks
   * the junk and throws {@linkcode UseAfterFreeError} naming the first byte a
   * stale view wrote. Memory that an allocator hands out again through this
   * registry's `newArray` leaves the quarantine; memory reused by code
   * outside the registry (the same allocator used directly) is reported as
   * written, so use strict mode where the registry is the allocator's only
   * user.
   *
   * @default {false}
   */
  strict?: boolean;
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

const KINDS: readonly AllocationKind[] = [
  "heap",
  "system",
  "aligned",
  "custom",
];
const HEAP = 0, SYSTEM = 1, ALIGNED = 2, CUSTOM = 3;

/** Freed ranges a strict registry keeps junk-filled and checks. */
const QUARANTINE_RANGES = 256;
/** The byte strict mode fills freed memory with. */
const JUNK = 0xdd;
/** What a lookup returns for a stale array (freed, its place reused). */
const STALE = -2;

/** The keys of {@linkcode RegisterOptions} and {@linkcode RegisterBufferOptions}. */
const REGISTER_KEYS: readonly string[] = [
  "byteLength",
  "kind",
  "deleter",
  "alignment",
  "detach",
];
const REGISTER_BUFFER_KEYS: readonly string[] = [...REGISTER_KEYS, "aliases"];

/**
 * Refuses an options object of `register()` (`registerBuffer()` with
 * `buffer`) holding an own key they do not read (a misspelt option did
 * nothing, silently); anything but an object is left to the caller's own
 * check. Plain comparisons in a for-in: no array, no search on the common
 * path (register with options is a hot path).
 */
function checkRegisterKeys(options: unknown, buffer: boolean): void {
  if (typeof options !== "object" || options === null) return;
  let keyError: unknown;
  try {
    for (const key in options) {
      if (
        key !== "byteLength" && key !== "deleter" && key !== "kind" &&
        key !== "alignment" && key !== "detach" &&
        (key !== "aliases" || !buffer)
      ) {
        validateOptionKeys(
          options,
          buffer ? REGISTER_BUFFER_KEYS : REGISTER_KEYS,
          buffer
            ? "OwnershipRegistry.registerBuffer()"
            : "OwnershipRegistry.register()",
        );
      }
    }
  } catch (error) {
    keyError = error;
  }
  // a proxy whose key traps throw: the caller's read of the fields reports it
  if (keyError instanceof InvalidArgumentError) throw keyError;
}

/** A freed range in quarantine (strict mode). */
interface _Quarantined {
  memory: object;
  byteOffset: number;
  byteLength: number;
  id: number;
}

/** Whether `value` has a `RecordStore`'s methods (reads that throw: no). */
function isRecordStore(value: unknown): boolean {
  if (value === null || typeof value !== "object") return false;
  try {
    const s = value as Record<string, unknown>;
    return typeof s.get === "function" && typeof s.set === "function" &&
      typeof s.delete === "function" && typeof s.clear === "function";
  } catch {
    return false;
  }
}

/** A byte length option: a safe integer >= 0, else a typed error. */
function checkLength(value: unknown, name: string): number {
  if (typeof value !== "number") {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be an integer in [0, ${Number.MAX_SAFE_INTEGER}], received ${
        describeValue(value)
      }`,
      { name, value, limit: [0, Number.MAX_SAFE_INTEGER] },
    );
  }
  return validateByteLength(value, Number.MAX_SAFE_INTEGER, name);
}

function callFree(
  mode: number,
  target: unknown,
  pointer: unknown,
  memory: object,
): void {
  if (mode === FREE_RELEASE) (target as DataPtr).release();
  else if (mode === FREE_DELETER) {
    (target as (pointer: Pointer) => void)(pointer as Pointer);
  } else if (mode === FREE_DETACH) detach(memory);
}

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
  // A place's memory is the caller's object: its getters may throw, and a
  // message (or dispose()'s leak report) must still be made.
  let length: unknown;
  try {
    length = (memory as { byteLength?: unknown }).byteLength;
  } catch {
    length = undefined;
  }
  return `${typeName(memory)}${
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
  if (!(memory instanceof ArrayBuffer) || memory.detached === true) return;
  try {
    if (typeof memory.transfer === "function") memory.transfer(0);
    // Node 20 has no transfer(): a transferring structuredClone detaches
    // it all the same.
    else structuredClone(memory, { transfer: [memory] });
  } catch {
    // Not detachable (a WebAssembly.Memory's buffer, or detached already):
    // the record is gone and the memory is its owner's; nothing more to
    // free here.
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
 * - **Queries**: `isRegistered`, `requestedBytes`, `pointerCount`, `bufferCount`,
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
  #store: RecordStore;
  /** Whether store answers are checked (a store other than ours). */
  #checkStore = false;
  /** Records by slot; the store maps a real pointer's place to `slot * 2`. */
  #records = new _RecordTable();
  /** Alias places by slot; the store maps them to `slot * 2 + 1`. */
  #aliases = new _AliasTable();
  #track: boolean;
  #strict: boolean;
  #worker: string;
  #onLeak: ((report: LeakReport) => void) | undefined;
  #nextId = 1;
  #pointers = 0;
  #buffers = 0;
  #references = 0;
  #requested = new Stat();
  #reserved = new Stat();
  #disposed = false;
  #exitCleanup: (() => void) | undefined;
  /**
   * Arrays of freed heap-kind records: the allocator may give their place
   * to a new owner, and these arrays must not reach the new record.
   */
  #retired = new WeakSet<object>();
  #anyRetired = false;
  /**
   * Whether a place's record may belong to another pointer that matters to
   * a lookup: set (for good) once a DataPtr is registered (it may be
   * released behind the registry's back, leaving a stale record) or a
   * heap-kind array is freed (`#retired`). Until then `#find` skips both
   * checks.
   */
  #mayBeStale = false;
  #quarantine: _Quarantined[] = [];
  /** The place `#placeOf` found last (no tuple per call). */
  #memory: object = this;
  #offset = 0;

  /**
   * Creates an empty registry.
   *
   * @param options Tracking, leak reporting, strict mode and the record
   * store.
   */
  constructor(options: OwnershipRegistryOptions = {}) {
    // Each option is read once, checked, then used: a refused construction
    // installs no exit check.
    const read = readOptions(options, [
      "store",
      "track",
      "strict",
      "worker",
      "onLeak",
      "checkAtExit",
    ]);
    if (read.problem !== undefined) {
      throw new InvalidArgumentError(
        `Cannot create an OwnershipRegistry: ${read.problem}`,
        { name: "options", value: options, limit: "OwnershipRegistryOptions" },
      );
    }
    validateOptionKeys(options, [
      "store",
      "track",
      "strict",
      "worker",
      "onLeak",
      "checkAtExit",
    ], "OwnershipRegistry");
    const { store, worker, onLeak } = read.values;
    const track = checkFlag(read.values.track, "track", false);
    const strict = checkFlag(read.values.strict, "strict", false);
    const atExit = checkFlag(read.values.checkAtExit, "checkAtExit", false);
    if (worker !== undefined && typeof worker !== "string") {
      throw new InvalidArgumentError(
        `Invalid worker: must be a string, received ${describeValue(worker)}`,
        { name: "worker", value: worker, limit: "string" },
      );
    }
    if (onLeak !== undefined && typeof onLeak !== "function") {
      throw new InvalidArgumentError(
        `Invalid onLeak: must be a function, received ${describeValue(onLeak)}`,
        { name: "onLeak", value: onLeak, limit: "function" },
      );
    }
    if (store !== undefined && !isRecordStore(store)) {
      throw new InvalidArgumentError(
        `Invalid store: must be a RecordStore (get, set, delete, clear), received ${
          describeValue(store)
        }`,
        { name: "store", value: store, limit: "RecordStore" },
      );
    }
    this.#store = (store as RecordStore | undefined) ?? new MapRecordStore();
    this.#checkStore = !(this.#store instanceof MapRecordStore);
    this.#track = track;
    this.#strict = strict;
    this.#worker = (worker as string | undefined) ?? detectWorker();
    this.#onLeak = onLeak as ((report: LeakReport) => void) | undefined;
    if (atExit) this.#installExitCheck();
  }

  /** Whether strict mode (junk-filled, checked frees) is on. */
  get strict(): boolean {
    return this.#strict;
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
  get requestedBytes(): number {
    return this.#requested.current;
  }

  /**
   * Same as `requestedBytes`.
   *
   * @deprecated Use `requestedBytes` (one name per figure across allot); removed in the next minor version.
   */
  get totalBytes(): number {
    return this.requestedBytes;
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
   * assert.equal(registry.requestedBytes, 64);
   * registry.unregister(data);
   * assert.deepEqual(freed, [64]);
   * ```
   */
  register(pointer: Pointer, options?: RegisterOptions): number {
    checkRegisterKeys(options, false);
    return this.#register(pointer, options, false, "register");
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
    options?: RegisterBufferOptions,
  ): number {
    checkRegisterKeys(options, true);
    return this.#register(pointer, options, true, "registerBuffer");
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
    const v = this.#find(existing, "existing");
    if (v < 0) this.#throwNotRegistered(v, "add an alias to");
    const t = this.#records;
    const r = this.#slotOf(v);
    if (alias === existing) this.#countPlace(v); // one more through the same pointer
    else {
      const o = this.#placeOf(alias, "alias");
      if (o < 0) this.#throwDetached("addAlias", "alias");
      const m = this.#memory;
      this.#checkAlias(r, m, o, "addAlias");
      const w = this.#get(m, o);
      if (w >= 0) this.#countPlace(w);
      else this.#addAliasPlace(r, m, o);
    }
    if (t.buffer[r] === 0) {
      t.buffer[r] = 1;
      this.#pointers--;
      this.#buffers++;
      this.#references += t.refs[r];
    }
    this.#references++;
    return ++t.refs[r];
  }

  /**
   * Drops the reference `pointer` holds. A plain pointer is freed at once;
   * a buffer is freed when its last reference goes.
   *
   * @param pointer A registered pointer (real or alias).
   * @returns `true` when the memory was freed by this call.
   * @throws {DoubleFreeError} When the pointer is not registered (never was,
   * or was already unregistered); nothing changes.
   * @throws {UseAfterFreeError} After `dispose()`, or for a freed heap-kind
   * array whose place now belongs to another allocation (a stale array);
   * nothing changes.
   * @throws What a custom deleter throws: the record is removed first, so the
   * registry stays consistent (a deleter may also call the registry).
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
    if (this.#disposed) this.#requireLive("unregister");
    if (this.#strict) this.#checkQuarantine();
    const v = this.#find(pointer, "pointer");
    if (v < 0) this.#throwNotRegistered(v, "unregister");
    const t = this.#records;
    let r: number;
    // The store's delete comes before any count changes: a store that
    // throws (only one other than MapRecordStore can) changes nothing.
    if ((v & 1) === 0) {
      r = v >> 1;
      if (t.placeCount[r] === 1) this.#store.delete(this.#memory, this.#offset);
      t.placeCount[r]--;
    } else {
      const a = v >> 1;
      r = this.#aliases.record[a];
      if (this.#aliases.count[a] === 1) {
        this.#store.delete(this.#memory, this.#offset);
        this.#aliases.put(a);
      }
      this.#aliases.count[a]--;
    }
    if (t.buffer[r] === 1) this.#references--;
    if (--t.refs[r] > 0) return false;
    this.#free(r);
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
    return this.#find(pointer, "pointer") >= 0;
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
   * assert.equal(registry.requestedBytes, 24);
   * assert.equal(registry.reservedBytes, 64);
   * registry.unregister(a);
   * ```
   */
  newArray<D extends Dtype>(
    dtype: D,
    length: number,
    options?: NewArrayOptions,
  ): TypedArrayOf<D> {
    this.#requireLive("newArray");
    if (typeof dtype !== "string") {
      throw new InvalidArgumentError(
        `Invalid dtype: expected a dtype name such as "f32", received ${
          describeValue(dtype)
        }`,
        { name: "dtype", value: dtype, limit: "Dtype" },
      );
    }
    const read = readOptions(
      options,
      ["shared", "alignment", "allocator"],
      "OwnershipRegistry.newArray()",
    );
    if (read.problem !== undefined) {
      throw new InvalidArgumentError(`Cannot allocate: ${read.problem}`, {
        name: "options",
        value: options,
        limit: "NewArrayOptions",
      });
    }
    const { alignment: alignmentOption } = read.values;
    const shared = checkFlag(read.values.shared, "shared", false);
    const allocatorOption = read.values.allocator as Allocator | undefined;
    const Ctor = dtypeInfo(dtype).arrayType;
    const bpe = Ctor.BYTES_PER_ELEMENT;
    if (typeof length !== "number") {
      throw new InvalidArgumentError(
        `Invalid length: must be an integer in [0, ${
          Math.floor(Number.MAX_SAFE_INTEGER / bpe)
        }], received ${describeValue(length)}`,
        { name: "length", value: length, limit: "integer >= 0" },
      );
    }
    if (alignmentOption !== undefined && typeof alignmentOption !== "number") {
      throw new InvalidArgumentError(
        `Invalid alignment: must be a power of two, received ${
          describeValue(alignmentOption)
        }`,
        { name: "alignment", value: alignmentOption, limit: "power of two" },
      );
    }
    // `allocate` is read once: a getter answering a function now and
    // something else later must not end in a TypeError.
    const allocate = allocatorOption === undefined
      ? undefined
      : this.#allocateOf(allocatorOption);
    if (allocatorOption !== undefined && allocate === undefined) {
      throw new InvalidArgumentError(
        `Invalid allocator: expected an Allocator (an object with allocate()), received ${
          describeValue(allocatorOption)
        }`,
        { name: "allocator", value: allocatorOption, limit: "Allocator" },
      );
    }
    validateInteger(
      length,
      0,
      Math.floor(Number.MAX_SAFE_INTEGER / bpe),
      "length",
    );
    const byteLength = length * bpe;
    const alignment = alignmentOption === undefined
      ? undefined
      : validateAlignment(alignmentOption);
    const reserved = alignment === undefined
      ? byteLength
      : alignUp(byteLength, alignment);
    // Zero-length arrays never come from the allocator: a zero-byte place in
    // a heap may coincide with a live allocation's place.
    const allocator = length === 0 ? undefined : allocatorOption;
    if (allocator !== undefined) {
      if (shared) {
        throw new InvalidArgumentError(
          `Cannot allocate ${byteLength} bytes: shared and allocator are exclusive, received both`,
          { name: "shared", value: true, limit: "no allocator" },
        );
      }
      const pad = alignment === undefined ? 0 : alignment - 1;
      const ptr = allocate!.call(allocator, reserved + pad);
      if (!DataPtr.isDataPtr(ptr)) {
        // A lying allocator: nothing to release, nothing registered.
        throw new InvalidArgumentError(
          `Cannot allocate ${byteLength} bytes: the allocator returned ${
            describeValue(ptr)
          }, not a DataPtr`,
          { name: "allocator", value: describeValue(ptr), limit: "DataPtr" },
        );
      }
      let array: TypedArrayOf<D>;
      try {
        if (ptr.byteLength < reserved + pad) {
          throw new InvalidArgumentError(
            `Cannot allocate ${
              reserved + pad
            } bytes: the allocator returned a DataPtr of ${ptr.byteLength} bytes`,
            { name: "allocator", value: ptr.byteLength, limit: reserved + pad },
          );
        }
        if (!isHostMemory(ptr.memory)) {
          throw new InvalidArgumentError(
            `Cannot allocate ${byteLength} bytes: the allocator's memory must be host memory, received ${
              typeName(ptr.memory)
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
          false,
          "newArray",
          ptr,
          reserved + pad,
        );
        if (this.#strict) this.#leaveQuarantine(array.buffer, offset, reserved);
      } catch (error) {
        ptr.release();
        throw error;
      }
      return array;
    }
    let memory: ArrayBuffer | SharedArrayBuffer;
    try {
      memory = shared
        ? new SharedArrayBuffer(reserved)
        : new ArrayBuffer(reserved);
    } catch (error) {
      throw new OutOfMemoryError(
        `Cannot allocate ${reserved} bytes: the engine refused a ${
          shared ? "SharedArrayBuffer" : "ArrayBuffer"
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
        detach: !shared,
      },
      false,
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
   * assert.equal(registry.requestedBytes, 16);
   * registry.unregister(received);
   * assert.equal(received.length, 0);
   * ```
   */
  adopt(array: ArrayBufferView): number {
    this.#requireLive("adopt");
    if (!ArrayBuffer.isView(array)) {
      throw new InvalidArgumentError(
        `Cannot adopt ${
          describeValue(array)
        }: expected a typed array or DataView`,
        { name: "array", value: array, limit: "ArrayBufferView" },
      );
    }
    // What the view covers, read through the built-in getters: a subclass
    // that overrides `byteOffset` or `byteLength` must not pass for a view
    // of its whole buffer, whose freeing detaches (destroys) all of it.
    const span = viewSpan(array);
    if (
      span === undefined || span.buffer !== array.buffer ||
      span.byteOffset !== array.byteOffset ||
      span.byteLength !== array.byteLength
    ) {
      throw new InvalidArgumentError(
        `Cannot adopt ${
          describeValue(array)
        }: its buffer, byteOffset or byteLength getters disagree with the view's own`,
        {
          name: "array",
          value: array,
          limit: "a plain typed array or DataView",
        },
      );
    }
    const buffer = span.buffer;
    if ((buffer as ArrayBuffer).detached === true) {
      throw new InvalidArgumentError(
        `Cannot adopt a ${typeName(array)}: its ArrayBuffer is detached`,
        { name: "array", value: "detached", limit: "attached buffer" },
      );
    }
    // Only a view over its whole ArrayBuffer owns it: freeing a part must
    // not detach (destroy) the rest.
    const whole = buffer instanceof ArrayBuffer && span.byteOffset === 0 &&
      span.byteLength === buffer.byteLength;
    return this.#register(
      array,
      { kind: "system", byteLength: span.byteLength, detach: whole },
      false,
      "adopt",
      undefined,
      whole ? buffer.byteLength : span.byteLength,
    );
  }

  /**
   * Gives up ownership of an array so its `ArrayBuffer` can be transferred
   * to a Worker (`worker.postMessage(message, [buffer])`): the record is
   * removed without freeing, and the buffer is returned. The receiver owns
   * it from then on (`adopt` it in the Worker's registry). Only `system` or
   * `aligned` records that own a whole non-shared `ArrayBuffer` and hold one
   * reference (a buffer whose aliases were all unregistered is fine) can
   * move; share a `SharedArrayBuffer` instead of transferring it.
   *
   * @param pointer The registered array (its real pointer).
   * @returns The buffer to put in the transfer list.
   * @throws {DoubleFreeError} When the pointer is not registered.
   * @throws {UnsupportedOperationError} For a buffer with aliases still
   * registered, an alias, a heap or custom allocation, a record that does not
   * own its whole `ArrayBuffer`, one whose `ArrayBuffer` holds another
   * registered allocation, or a `SharedArrayBuffer`; nothing changes.
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
    const v = this.#find(pointer, "pointer");
    if (v < 0) this.#throwNotRegistered(v, "transfer");
    const memory = this.#memory, byteOffset = this.#offset;
    const t = this.#records;
    const r = this.#slotOf(v);
    const kind = t.kind[r];
    const why = (v & 1) === 1
      ? "it is an alias, not the real pointer"
      : t.refs[r] > 1
      ? `it is a buffer with aliases (${t.refs[r]} references held)`
      : kind !== SYSTEM && kind !== ALIGNED
      ? `its kind is ${KINDS[kind]}`
      : !(memory instanceof ArrayBuffer)
      ? `its memory is a ${typeName(memory)} (share it instead)`
      : byteOffset !== 0 || t.reserved[r] < memory.byteLength
      ? `it does not own its whole ArrayBuffer (bytes 0 to ${memory.byteLength})`
      : this.#sharesMemory(r, memory)
      ? `another allocation registered in the same ArrayBuffer would be moved with it (and could never be unregistered here)`
      : undefined;
    if (why !== undefined) {
      throw new UnsupportedOperationError(
        `Cannot transfer ${describePointer(memory, byteOffset)}: ${why}`,
      );
    }
    this.#store.delete(memory, byteOffset);
    if (t.buffer[r] === 1) this.#references--;
    this.#forget(r);
    t.put(r);
    return memory as ArrayBuffer;
  }

  /** Whether a live record other than `r` lies in `memory` (O(records)). */
  #sharesMemory(r: number, memory: object): boolean {
    const m = this.#records.memory;
    for (let s = 0; s < m.length; s++) {
      if (s !== r && m[s] === memory) return true;
    }
    return false;
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
    const v = this.#find(pointer, "pointer");
    return v < 0
      ? undefined
      : this.#records.info[this.#slotOf(v)] as AllocationInfo | undefined;
  }

  /**
   * The record of the allocation holding `pointer`.
   *
   * @param pointer A registered pointer.
   * @returns The record, or `undefined` when the pointer is not registered.
   */
  recordOf(pointer: Pointer): RecordInfo | undefined {
    const v = this.#find(pointer, "pointer");
    return v < 0 ? undefined : this.#info(this.#slotOf(v));
  }

  /**
   * Every live allocation, oldest first.
   *
   * @returns The records.
   */
  records(): RecordInfo[] {
    this.#sweepReleased();
    return this.#records.liveSlots().map((r) => this.#info(r));
  }

  /**
   * Counts and byte figures.
   *
   * @returns The stats.
   */
  stats(): RegistryStats {
    this.#sweepReleased();
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
   * @param limit How many allocations to list: an integer >= 0, or
   *   `Infinity` for all.
   * @throws {InvalidArgumentError} For any other limit.
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
  report(limit: number = 20): string {
    if (typeof limit !== "number") {
      throw new InvalidArgumentError(
        `Invalid limit: must be an integer in [0, ${Number.MAX_SAFE_INTEGER}], received ${
          describeValue(limit)
        }`,
        { name: "limit", value: limit, limit: "integer >= 0" },
      );
    }
    if (limit !== Infinity) {
      validateInteger(limit, 0, Number.MAX_SAFE_INTEGER, "limit");
    }
    this.#sweepReleased();
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
    const live = this.records().sort((a, b) =>
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
    const t = this.#records;
    const slots = t.liveSlots();
    const frees = slots.map((r) =>
      [t.free[r], t.target[r], t.pointer[r], t.memory[r]!] as const
    );
    for (const r of slots) {
      this.#requested.decrease(t.length[r]);
      this.#reserved.decrease(t.reserved[r]);
      t.put(r);
    }
    this.#store.clear();
    this.#aliases.clear();
    this.#quarantine.length = 0;
    this.#pointers = this.#buffers = this.#references = 0;
    let failure: unknown;
    for (const [mode, target, pointer, memory] of frees) {
      try {
        callFree(mode, target, pointer, memory);
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
    this.#sweepReleased();
    if (this.#records.live === 0) return undefined;
    const records = this.records();
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

  /**
   * Finds a pointer's place: sets `#memory` and `#offset`.
   *
   * @returns The byte offset, or -1 for a view whose buffer is detached
   * (matches no record, so lookups fail instead of hitting offset 0).
   */
  #placeOf(pointer: Pointer, name: string): number {
    if (ArrayBuffer.isView(pointer)) {
      this.#memory = pointer.buffer;
      const offset = pointer.byteOffset;
      // A detached view reads as offset 0, length 0; `detached` is a call
      // into C++, so only such views pay for it.
      if (
        offset === 0 && pointer.byteLength === 0 &&
        (this.#memory as ArrayBuffer).detached === true
      ) return this.#offset = -1;
      return this.#offset = offset;
    }
    return this.#placeOfObject(pointer, name);
  }

  #placeOfObject(pointer: unknown, name: string): number {
    if (pointer === null || typeof pointer !== "object") {
      throw new InvalidArgumentError(
        `Invalid ${name}: expected a typed array, DataPtr or { memory, byteOffset }, received ${
          describeValue(pointer)
        }`,
        { name, value: pointer, limit: "Pointer" },
      );
    }
    let memory: unknown, byteOffset: unknown, released = false;
    try {
      released = DataPtr.isDataPtr(pointer) && pointer.released;
      if (!released) {
        memory = (pointer as Place).memory;
        byteOffset = (pointer as Place).byteOffset;
      }
    } catch (error) {
      throw new InvalidArgumentError(
        `Invalid ${name}: reading its memory or byteOffset threw ${
          (error as Error)?.message ?? String(error)
        }`,
        { name, value: pointer, limit: "Pointer" },
      );
    }
    if (released) {
      throw new UseAfterFreeError(
        `Cannot use ${pointer} as a ${name}: the pointer was released`,
      );
    }
    if (memory === null || typeof memory !== "object") {
      throw new InvalidArgumentError(
        `Invalid ${name}: memory must be an object, received ${
          describeValue(memory)
        }`,
        { name: `${name}.memory`, value: memory, limit: "object" },
      );
    }
    if (!Number.isSafeInteger(byteOffset) || (byteOffset as number) < 0) {
      checkLength(byteOffset, `${name}.byteOffset`);
    }
    this.#memory = memory;
    return this.#offset = byteOffset as number;
  }

  /**
   * The store's value for a pointer's place (`#placeOf` runs first).
   *
   * @returns The value; -1 when not registered; `STALE` for a freed
   * heap-kind array whose place now belongs to another record.
   */
  #find(pointer: Pointer, name: string): number {
    const offset = this.#placeOf(pointer, name);
    const v = this.#get(this.#memory, offset);
    if (
      v >= 0 && this.#mayBeStale &&
      this.#records.pointer[this.#slotOf(v)] !== pointer
    ) return this.#findOther(pointer, v);
    return v;
  }

  /**
   * `#find` when the place holds another pointer's record (or an alias): a
   * DataPtr released behind the registry's back leaves a stale one, purged
   * here (-1); a freed heap array must not reach the record of the new
   * owner of its place (`STALE`).
   */
  #findOther(pointer: Pointer, v: number): number {
    if (this.#purgeIfReleased(v)) return -1;
    if (this.#anyRetired && this.#retired.has(pointer)) return STALE;
    return v;
  }

  /** The record slot of a store value. */
  /**
   * The store's value for a place. A store other than `MapRecordStore` is
   * a collaborator that may lie: its answer must be -1 or name a live
   * record (or alias) in `memory`, else a typed error before any change.
   */
  #get(memory: object, byteOffset: number): number {
    const v = this.#store.get(memory, byteOffset);
    if (this.#checkStore && !this.#stored(v, memory, byteOffset)) {
      this.#throwStore(v, memory, byteOffset);
    }
    return v;
  }

  /** Drops every stale record (see `#purgeIfReleased`): O(records). */
  #sweepReleased(): void {
    const t = this.#records;
    if (t.live === 0) return;
    for (const r of t.liveSlots()) this.#purgeIfReleased(r << 1);
  }

  /** `#get`, with a stale record (its DataPtr released directly) purged. */
  #getLive(memory: object, byteOffset: number): number {
    const v = this.#get(memory, byteOffset);
    return v >= 0 && this.#purgeIfReleased(v) ? -1 : v;
  }

  /**
   * One owner per block: a registered DataPtr released directly (not
   * through the registry) gave its block back to its allocator, which may
   * hand the place to a new pointer. Its record is stale: dropped here with
   * its own and alias places and its counts, freeing nothing (the pointer's
   * release freed it already).
   *
   * @returns Whether the record of store value `v` was stale and dropped.
   */
  #purgeIfReleased(v: number): boolean {
    const t = this.#records, r = this.#slotOf(v);
    const pointer = t.pointer[r];
    if (!DataPtr.isDataPtr(pointer) || !pointer.released) return false;
    const aliases = this.#aliases;
    if (t.placeCount[r] > 0) {
      this.#store.delete(t.memory[r]!, t.offset[r]);
      t.placeCount[r] = 0;
    }
    for (let a = 0, n = aliases.used; a < n; a++) {
      if (aliases.count[a] > 0 && aliases.record[a] === r) {
        this.#store.delete(aliases.memory[a]!, aliases.offset[a]);
        aliases.count[a] = 0;
        aliases.put(a);
      }
    }
    if (t.buffer[r] === 1) this.#references -= t.refs[r];
    this.#forget(r);
    t.put(r);
    return true;
  }

  /** Whether `v` is -1 or names a live record or alias in `memory`. */
  #stored(v: unknown, memory: object, byteOffset: number): boolean {
    if (v === -1) return true;
    const t = this.#records;
    let ok = false;
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) {
      const i = v >> 1;
      if (v > 0x7fffffff) ok = false;
      else if ((v & 1) === 0) {
        ok = i < t.id.length && t.memory[i] === memory &&
          t.offset[i] === byteOffset;
      } else {
        const a = this.#aliases;
        ok = i < a.record.length && a.count[i] > 0 &&
          t.memory[a.record[i]] === memory;
      }
    }
    return ok;
  }

  #throwStore(v: unknown, memory: object, byteOffset: number): never {
    throw new InvalidArgumentError(
      `The record store answered ${describeValue(v)} for ${
        describePointer(memory, byteOffset)
      }: a RecordStore's get() must return -1 or the value set there`,
      { name: "store", value: v, limit: "-1 or a value set for the place" },
    );
  }

  #slotOf(v: number): number {
    return (v & 1) === 0 ? v >> 1 : this.#aliases.record[v >> 1];
  }

  /** One more reference at the place of store value `v`. */
  #countPlace(v: number): void {
    if ((v & 1) === 0) this.#records.placeCount[v >> 1]++;
    else this.#aliases.count[v >> 1]++;
  }

  /**
   * A new alias place of record `r`; a store that throws changes nothing.
   *
   * @returns The alias slot.
   */
  #addAliasPlace(r: number, memory: object, byteOffset: number): number {
    const a = this.#aliases.take();
    this.#aliases.record[a] = r;
    this.#aliases.count[a] = 1;
    this.#aliases.memory[a] = memory;
    this.#aliases.offset[a] = byteOffset;
    try {
      this.#store.set(memory, byteOffset, (a << 1) | 1);
    } catch (error) {
      this.#aliases.put(a);
      throw error;
    }
    return a;
  }

  /**
   * Writes the alias places of new record `r` (whose own place is written).
   * A store that throws (only one other than `MapRecordStore` can) gets every
   * place of this call deleted again, and `r`'s slot is given back.
   */
  #placeAliases(
    r: number,
    memory: object,
    byteOffset: number,
    memories: object[],
    offsets: number[],
  ): void {
    const aliases = this.#aliases;
    const taken: number[] = [];
    try {
      for (let i = 0; i < memories.length; i++) {
        const m = memories[i], o = offsets[i];
        // A store answer that is not valid here (a lying store) makes a new
        // alias place.
        const w = this.#store.get(m, o);
        if (w >= 0 && (!this.#checkStore || this.#stored(w, m, o))) {
          this.#countPlace(w);
        } else {
          taken.push(this.#addAliasPlace(r, m, o));
        }
      }
    } catch (error) {
      for (let i = 0; i < memories.length; i++) {
        this.#deleteQuietly(memories[i], offsets[i]);
      }
      this.#deleteQuietly(memory, byteOffset);
      for (const a of taken) aliases.put(a);
      this.#records.put(r);
      throw error;
    }
    this.#records.refs[r] += memories.length;
  }

  /** Deletes a place while taking back a failed call; a throw is ignored. */
  #deleteQuietly(memory: object, byteOffset: number): void {
    try {
      this.#store.delete(memory, byteOffset);
    } catch {
      // The store already failed this call; its first error is the one thrown.
    }
  }

  #throwNotRegistered(v: number, what: string): never {
    const place = describePointer(this.#memory, this.#offset);
    if (v === STALE) {
      throw new UseAfterFreeError(
        `Cannot ${what} ${place}: this array's allocation was freed and its place now belongs to another allocation (a stale array)`,
      );
    }
    throw new DoubleFreeError(
      `Cannot ${what} ${place}: the pointer is not registered (never registered, or already unregistered)`,
    );
  }

  #throwDetached(what: string, name: string): never {
    throw new UseAfterFreeError(
      `Cannot ${what}: the ${name}'s ArrayBuffer is detached (freed or transferred)`,
    );
  }

  /** An alias must lie in record `r` and not belong to another record. */
  #checkAlias(r: number, memory: object, byteOffset: number, what: string) {
    const t = this.#records;
    const start = t.offset[r], end = start + t.length[r];
    const own = t.memory[r]!;
    if (memory !== own || byteOffset < start || byteOffset > end) {
      throw new InvalidArgumentError(
        `Cannot ${what} ${
          describePointer(memory, byteOffset)
        }: an alias must lie in ${
          describePointer(own, start)
        } up to byte ${end}`,
        { name: "alias", value: byteOffset, limit: [start, end] },
      );
    }
    const w = this.#get(memory, byteOffset);
    if (w >= 0 && this.#slotOf(w) !== r) {
      throw new InvalidArgumentError(
        `Cannot ${what} ${
          describePointer(memory, byteOffset)
        }: the pointer is registered for allocation #${t.id[this.#slotOf(w)]}`,
        { name: "alias", value: byteOffset, limit: "unregistered" },
      );
    }
  }

  // The allocator's `allocate` method, read once; undefined when it is not
  // an object with one (or reading it throws).
  #allocateOf(allocator: unknown): Allocator["allocate"] | undefined {
    if (allocator === null || typeof allocator !== "object") return undefined;
    try {
      const allocate = (allocator as Allocator).allocate;
      return typeof allocate === "function" ? allocate : undefined;
    } catch {
      return undefined;
    }
  }

  #badOptions(what: string, error: unknown): never {
    throw new InvalidArgumentError(
      `Cannot ${what}: reading its options threw ${
        (error as Error)?.message ?? String(error)
      }`,
      { name: "options", value: error, limit: "RegisterOptions" },
    );
  }

  #register(
    pointer: Pointer,
    options: RegisterBufferOptions | undefined,
    buffer: boolean,
    what: string,
    release?: DataPtr,
    reservedByteLength?: number,
  ): number {
    if (this.#disposed) this.#requireLive(what);
    if (this.#strict) this.#checkQuarantine();
    const byteOffset = this.#placeOf(pointer, "pointer");
    const memory = this.#memory;
    if (byteOffset < 0) this.#throwDetached(what, "pointer");
    let lengthOption: unknown, kindOption: unknown, deleter: unknown;
    let alignmentOption: unknown, detachOption: unknown, aliases: unknown;
    if (options !== undefined) {
      if (options === null || typeof options !== "object") {
        throw new InvalidArgumentError(
          `Cannot ${what}: options must be an object, received ${
            describeValue(options)
          }`,
          { name: "options", value: options, limit: "object" },
        );
      }
      try {
        lengthOption = options.byteLength;
        kindOption = options.kind;
        deleter = options.deleter;
        alignmentOption = options.alignment;
        detachOption = options.detach;
        if (buffer) aliases = options.aliases;
      } catch (error) {
        this.#badOptions(what, error);
      }
    }
    if (detachOption !== undefined && typeof detachOption !== "boolean") {
      checkFlag(detachOption, "detach", false); // throws
    }
    const isView = ArrayBuffer.isView(pointer);
    const isPtr = !isView && DataPtr.isDataPtr(pointer);
    // Before any change (a refused call leaves a flag that only costs
    // lookups a check).
    if (isPtr) this.#mayBeStale = true;
    let byteLength: number;
    if (lengthOption !== undefined) {
      byteLength = checkLength(lengthOption, "byteLength");
    } else if (isView || isPtr) {
      byteLength = (pointer as ArrayBufferView | DataPtr).byteLength;
    } else {
      throw new InvalidArgumentError(
        `Cannot ${what} ${
          describePointer(memory, byteOffset)
        }: byteLength is required for a place, received undefined`,
        { name: "byteLength", value: undefined, limit: "integer >= 0" },
      );
    }
    const kind = kindOption === undefined
      ? (isPtr ? HEAP : deleter !== undefined ? CUSTOM : SYSTEM)
      : KINDS.indexOf(kindOption as AllocationKind);
    if (kind < 0) {
      throw new InvalidArgumentError(
        `Invalid kind: must be one of ${KINDS.join(", ")}, received ${
          describeValue(kindOption)
        }`,
        { name: "kind", value: kindOption, limit: KINDS },
      );
    }
    if (kind === CUSTOM && typeof deleter !== "function") {
      throw new InvalidArgumentError(
        `Cannot ${what} with kind custom: a deleter function is required, received ${
          describeValue(deleter)
        }`,
        { name: "deleter", value: deleter, limit: "function" },
      );
    }
    if (alignmentOption !== undefined) {
      if (typeof alignmentOption !== "number") {
        throw new InvalidArgumentError(
          `Invalid alignment: must be a power of two, received ${
            describeValue(alignmentOption)
          }`,
          { name: "alignment", value: alignmentOption, limit: "power of two" },
        );
      }
      const alignment = validateAlignment(alignmentOption);
      if (byteOffset % alignment !== 0) {
        throw new InvalidArgumentError(
          `Cannot ${what} ${
            describePointer(memory, byteOffset)
          }: byteOffset must be a multiple of the alignment ${alignment}, received ${byteOffset}`,
          { name: "byteOffset", value: byteOffset, limit: alignment },
        );
      }
    }
    if (this.#getLive(memory, byteOffset) >= 0) {
      throw new InvalidArgumentError(
        `Cannot ${what} ${
          describePointer(memory, byteOffset)
        }: the pointer is already registered`,
        { name: "pointer", value: byteOffset, limit: "unregistered" },
      );
    }
    let aliasMemories: object[] | undefined, aliasOffsets: number[] | undefined;
    if (buffer && aliases !== undefined) {
      if (!Array.isArray(aliases)) {
        throw new InvalidArgumentError(
          `Invalid aliases: expected an array of pointers, received ${
            describeValue(aliases)
          }`,
          { name: "aliases", value: aliases, limit: "Pointer[]" },
        );
      }
      // Copied by index, as options are read: an array's own iterator or a
      // getter at an index that throws is a bad option, not a raw error.
      let list: Pointer[] = [];
      try {
        const from = aliases as Pointer[];
        list = new Array(from.length);
        for (let i = 0; i < list.length; i++) list[i] = from[i];
      } catch (error) {
        this.#badOptions(what, error);
      }
      aliasMemories = [];
      aliasOffsets = [];
      const end = byteOffset + byteLength;
      for (let i = 0; i < list.length; i++) {
        const alias = list[i];
        const o = this.#placeOf(alias, "alias");
        const m = this.#memory;
        if (o < 0) this.#throwDetached(what, "alias");
        if (m !== memory || o < byteOffset || o > end) {
          throw new InvalidArgumentError(
            `Cannot ${what} ${describePointer(m, o)}: an alias must lie in ${
              describePointer(memory, byteOffset)
            } up to byte ${end}`,
            { name: "alias", value: o, limit: [byteOffset, end] },
          );
        }
        const w = o === byteOffset ? -1 : this.#getLive(m, o);
        if (w >= 0) {
          throw new InvalidArgumentError(
            `Cannot ${what} ${
              describePointer(m, o)
            }: the pointer is registered for allocation #${
              this.#records.id[this.#slotOf(w)]
            }`,
            { name: "alias", value: o, limit: "unregistered" },
          );
        }
        aliasMemories.push(m);
        aliasOffsets.push(o);
      }
    }
    let free = FREE_NONE, target: unknown = undefined;
    if (release !== undefined) {
      free = FREE_RELEASE;
      target = release;
    } else if (kind === CUSTOM) {
      free = FREE_DELETER;
      target = deleter;
    } else if (isPtr && (kind === HEAP || !detachOption)) {
      free = FREE_RELEASE;
      target = pointer;
    } else if (detachOption) free = FREE_DETACH;
    // Validated: from here on only a store other than MapRecordStore can
    // throw, and then the places written are taken back.
    const t = this.#records;
    const r = t.take();
    t.kind[r] = kind;
    t.free[r] = free;
    t.buffer[r] = buffer ? 1 : 0;
    t.offset[r] = byteOffset;
    t.length[r] = byteLength;
    const reserved = reservedByteLength ?? byteLength;
    t.reserved[r] = reserved;
    t.refs[r] = 1;
    t.placeCount[r] = 1;
    t.memory[r] = memory;
    t.pointer[r] = pointer;
    t.target[r] = target;
    try {
      this.#store.set(memory, byteOffset, r << 1);
    } catch (error) {
      t.put(r);
      throw error;
    }
    if (aliasMemories !== undefined) {
      this.#placeAliases(r, memory, byteOffset, aliasMemories, aliasOffsets!);
    }
    const id = this.#nextId++;
    t.id[r] = id;
    if (this.#track) {
      t.info[r] = {
        stack: (new Error().stack ?? "").split("\n").slice(3).join("\n"),
        time: performance.now(),
        worker: this.#worker,
      } satisfies AllocationInfo;
    }
    if (buffer) {
      this.#buffers++;
      this.#references += t.refs[r];
    } else this.#pointers++;
    this.#requested.increase(byteLength);
    this.#reserved.increase(reserved);
    if (this.#anyRetired && isView) this.#retired.delete(pointer);
    return id;
  }

  /** Drops record `r` from the counts (not its slot). */
  #forget(r: number): void {
    const t = this.#records;
    if (t.buffer[r] === 1) this.#buffers--;
    else this.#pointers--;
    this.#requested.decrease(t.length[r]);
    this.#reserved.decrease(t.reserved[r]);
  }

  /** Frees record `r`: counts, slot, then its memory. */
  #free(r: number): void {
    const t = this.#records;
    this.#forget(r);
    const mode = t.free[r], target = t.target[r], pointer = t.pointer[r];
    const memory = t.memory[r]!;
    if (t.kind[r] === HEAP && ArrayBuffer.isView(pointer)) {
      // The allocator may give this place to a new owner: remember the
      // array so it cannot reach the new owner's record.
      this.#retired.add(pointer);
      this.#anyRetired = true;
      this.#mayBeStale = true;
    }
    if (this.#strict && t.kind[r] === HEAP) {
      this.#enterQuarantine(memory, t.offset[r], t.length[r], t.id[r]);
    }
    t.put(r);
    callFree(mode, target, pointer, memory);
  }

  #enterQuarantine(
    memory: object,
    byteOffset: number,
    byteLength: number,
    id: number,
  ): void {
    if (!isHostMemory(memory) || byteLength === 0) return;
    new Uint8Array(hostBuffer(memory), byteOffset, byteLength).fill(JUNK);
    if (this.#quarantine.length === QUARANTINE_RANGES) {
      this.#checkRange(this.#quarantine[0], 0);
      this.#quarantine.shift();
    }
    this.#quarantine.push({ memory, byteOffset, byteLength, id });
  }

  /** Throws when a stale view wrote a quarantined range (strict mode). */
  #checkQuarantine(): void {
    const q = this.#quarantine;
    for (let i = 0; i < q.length; i++) this.#checkRange(q[i], i);
  }

  #checkRange(range: _Quarantined, index: number): void {
    const buffer = hostBuffer(range.memory as ArrayBuffer);
    if (range.byteOffset + range.byteLength > buffer.byteLength) return;
    const bytes = new Uint8Array(buffer, range.byteOffset, range.byteLength);
    for (let i = 0; i < bytes.length; i++) {
      if (bytes[i] !== JUNK) {
        this.#quarantine.splice(index, 1); // report it once
        throw new UseAfterFreeError(
          `Strict mode: freed memory was written after free: byte ${
            range.byteOffset + i
          } of ${
            describePointer(range.memory, range.byteOffset)
          } (allocation #${range.id}, ${range.byteLength} bytes) holds ${
            bytes[i]
          }, not the junk 0x${
            JUNK.toString(16)
          } left there; a stale view of that allocation wrote it`,
        );
      }
    }
  }

  /** A range handed out again through newArray leaves the quarantine. */
  #leaveQuarantine(memory: object, byteOffset: number, byteLength: number) {
    const end = byteOffset + byteLength;
    this.#quarantine = this.#quarantine.filter((q) =>
      hostBuffer(q.memory as ArrayBuffer) !== memory ||
      q.byteOffset >= end || q.byteOffset + q.byteLength <= byteOffset
    );
  }

  /** The public record of slot `r`. */
  #info(r: number): RecordInfo {
    const t = this.#records;
    const info = t.info[r] as AllocationInfo | undefined;
    return {
      id: t.id[r],
      kind: KINDS[t.kind[r]],
      memory: t.memory[r]!,
      byteOffset: t.offset[r],
      byteLength: t.length[r],
      reservedByteLength: t.reserved[r],
      buffer: t.buffer[r] === 1,
      references: t.refs[r],
      ...(info ? { info } : {}),
    };
  }

  // ---- the allocator contract's verbs (issue #15) ----

  /** Sets the peaks of `requestedBytes` and `reservedBytes` to their current values. */
  resetPeakStats(): void {
    this.#sweepReleased();
    this.#requested.resetPeak();
    this.#reserved.resetPeak();
  }

  /**
   * Sets the `allocated` and `freed` totals of `requestedBytes` and
   * `reservedBytes` to 0; `current` and `peak` stay.
   */
  resetAccumulatedStats(): void {
    this.#sweepReleased();
    this.#requested.resetAccumulated();
    this.#reserved.resetAccumulated();
  }

  /**
   * Checks that the byte figures of {@linkcode OwnershipRegistry.stats}
   * equal a recount of the live records.
   *
   * @throws {ContractViolationError} When they do not.
   */
  validate(): void {
    const records = this.records();
    let requested = 0, reserved = 0;
    for (const r of records) {
      requested += r.byteLength;
      reserved += r.reservedByteLength;
    }
    if (
      requested !== this.#requested.current ||
      reserved !== this.#reserved.current
    ) {
      throw new ContractViolationError(
        `OwnershipRegistry is inconsistent: ${records.length} records hold ${requested} requested and ${reserved} reserved bytes; the stats say ${this.#requested.current} and ${this.#reserved.current}`,
      );
    }
  }

  /**
   * A text table of {@linkcode OwnershipRegistry.stats}, in the layout of
   * `torch.cuda.memory_summary()` (see `report()` for the live records).
   *
   * @param options Title and abbreviation.
   * @returns The table.
   * @throws {InvalidArgumentError} When an option is not of its type.
   */
  memorySummary(options: MemorySummaryOptions = {}): string {
    return formatStatsSummary(this.stats(), options, "OwnershipRegistry");
  }
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
