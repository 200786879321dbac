/**
 * {@linkcode Buffer}: a typed, reference-counted strided view over a shared
 * {@linkcode Storage}.
 *
 * @module
 */

import {
  type Allocator,
  AllotError,
  ContractViolationError,
  describeValue,
  findStridedAlias,
  hostBuffer,
  IntrusivePtr,
  InvalidArgumentError,
  isHostMemory,
  UnsupportedOperationError,
  UseAfterFreeError,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import type { BufferBackend, StridedBinding } from "./buffer_backend.ts";
import {
  _checkOptions,
  _checkView,
  _isBufferView,
  BufferView,
  type Shape,
  type SliceOptions,
} from "./buffer_view.ts";
import {
  type AnyTypedArray,
  type Dtype,
  type DtypeInfo,
  dtypeInfo,
  dtypeOf,
  type TypedArrayOf,
} from "./dtype.ts";
import { _fmt, ShapeError } from "./errors.ts";
import { _checkHostSpan, Storage } from "./storage.ts";
import { type _BitArray, _copyStrided } from "./_strided_copy.ts";
import { _noteMemory } from "./_wasm_kernels.ts";
import { _track } from "./tidy.ts";

/** Options for every {@linkcode Buffer} constructor. */
export interface BufferOptions {
  /**
   * Where new storage comes from.
   *
   * @default {an allocator that makes one ArrayBuffer per allocation}
   */
  allocator?: Allocator;
  /**
   * Moves elements when the storage is not host memory; inherited by views
   * and by `contiguous()` results.
   *
   * @default {undefined}
   */
  backend?: BufferBackend;
}

/** Options of {@linkcode Buffer.fromData}. */
export interface FromDataOptions extends BufferOptions {
  /**
   * The logical shape; its product must equal the data's length.
   *
   * @default {[data.length]}
   */
  shape?: Shape;
}

/** Options of the {@linkcode Buffer} constructor. */
export interface BufferFromStorageOptions<D extends Dtype> {
  /** The element type. */
  dtype: D;
  /**
   * The layout, in elements of `dtype`.
   *
   * @default {a contiguous 1-D view of the whole storage}
   */
  view?: BufferView;
  /**
   * Moves elements when the storage is not host memory.
   *
   * @default {undefined}
   */
  backend?: BufferBackend;
}

const BIT_ARRAYS = {
  1: Uint8Array,
  2: Uint16Array,
  4: Int32Array,
  8: Float64Array,
} as const;

let _hasStorage: (value: object) => boolean;

/** The keys each factory's options may hold. */
const BUFFER_KEYS: readonly string[] = ["allocator", "backend"];
const FILLED_KEYS: readonly string[] = ["allocator", "backend", "value"];
const FROM_DATA_KEYS: readonly string[] = ["allocator", "backend", "shape"];

/** Set by {@linkcode _trusted} for the one constructor call it makes. */
let trustedInfo: DtypeInfo | undefined;

/**
 * A buffer over a storage and view this module made or checked (the view
 * fits, the backend was checked): the constructor skips its checks.
 */
function _trusted<D extends Dtype>(
  storage: IntrusivePtr<Storage>,
  info: DtypeInfo,
  view: BufferView,
  backend: BufferBackend | undefined,
): Buffer<D> {
  trustedInfo = info;
  try {
    return new Buffer(storage, { dtype: info.dtype as D, view, backend });
  } finally {
    trustedInfo = undefined;
  }
}

/**
 * A typed strided view over a shared {@linkcode Storage}, like CubeCL's
 * `Buffer<R, E>`: an owning strong reference to the storage, a
 * {@linkcode BufferView} and a {@linkcode Dtype}. View operations
 * (`reshape`, `transpose`, `permute`, `slice`, `squeeze`, `unsqueeze`,
 * `broadcastTo`) copy nothing: they return a new buffer that shares the
 * storage. Each buffer is an owning handle: `release()` it (or `using`) and
 * the storage is freed when its last buffer goes.
 *
 * Every view is an owning handle: release each one. To chain view
 * operations without intermediate handles, chain them on the layout and wrap
 * once: `b.withView(b.view.slice(0, { step: 2 }).transpose())`, or run the
 * chain in `tidy()`, which releases the buffers made inside it.
 *
 * On host memory (`ArrayBuffer`, `SharedArrayBuffer`, `WebAssembly.Memory`)
 * every operation runs here, with blocked copy kernels. On other memory (a
 * `GPUBuffer`) operations that touch elements go through the
 * {@linkcode BufferBackend} given at creation.
 *
 * @typeParam D The element type.
 *
 * @example Views share storage; contiguous() packs
 * ```ts
 * import { Buffer } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * using a = Buffer.fromData("f32", new Float32Array([1, 2, 3, 4, 5, 6]), { shape: [2, 3] });
 * using t = a.transpose();
 * assert.ok(t.sharesStorageWith(a));
 * assert.deepEqual([...t.toData()], [1, 4, 2, 5, 3, 6]);
 * using packed = t.contiguous();
 * assert.ok(!packed.sharesStorageWith(a));
 * assert.ok(packed.isContiguous);
 * assert.deepEqual([...packed.toData()], [1, 4, 2, 5, 3, 6]);
 * ```
 */
export class Buffer<D extends Dtype = Dtype> {
  #storage: IntrusivePtr<Storage>;

  static {
    _hasStorage = (value) => #storage in value;
  }
  #view: BufferView;
  #dtype: D;
  #info: DtypeInfo<D>;
  #backend: BufferBackend | undefined;
  #released = false;

  /**
   * Makes a buffer from a storage handle, which it takes over (release the
   * buffer, not the handle).
   *
   * @param storage A strong reference to the storage; owned by the buffer.
   * @param options Dtype, view and backend.
   * @throws {ShapeError} When the view reaches past the storage.
   * @throws {InvalidArgumentError} When the dtype is unknown.
   * @throws {UseAfterFreeError} When the handle was released.
   */
  constructor(
    storage: IntrusivePtr<Storage>,
    options: BufferFromStorageOptions<D>,
  ) {
    const trusted = trustedInfo;
    if (trusted !== undefined) {
      // From _trusted(): storage, view and backend were made or checked by
      // this module (the view fits); skip the checks of the public path.
      trustedInfo = undefined;
      this.#storage = storage;
      this.#view = options.view as BufferView;
      this.#dtype = trusted.dtype as D;
      this.#info = trusted as DtypeInfo<D>;
      this.#backend = options.backend;
      _track(this);
      return;
    }
    validateObject(options, "options");
    validateOptionKeys(options, ["dtype", "view", "backend"], "Buffer");
    const target = _storageOf(storage);
    const info = dtypeInfo(options.dtype);
    const given = options.view;
    if (given !== undefined) _checkView(given, "view");
    const backend = options.backend;
    _checkBackend(backend);
    const view = given ??
      BufferView.contiguous([
        Math.floor(target.byteLength / info.bytesPerElement),
      ]);
    checkFits(view, target, info);
    this.#storage = storage;
    this.#view = view;
    this.#dtype = info.dtype;
    this.#info = info;
    this.#backend = backend;
    _track(this);
  }

  /**
   * Allocates a contiguous buffer without initialising it (its bytes are
   * whatever the allocator gives).
   *
   * @param dtype The element type.
   * @param shape The shape.
   * @param options Allocator and backend.
   * @returns The buffer.
   * @throws {ShapeError} When the shape is invalid.
   * @throws {InvalidArgumentError} When the dtype is unknown or the byte
   * length is too large.
   */
  static empty<D extends Dtype>(
    dtype: D,
    shape: Shape,
    options: BufferOptions = {},
  ): Buffer<D> {
    _checkOptions(options, "options", BUFFER_KEYS, "Buffer.empty()");
    const info = dtypeInfo(dtype);
    const view = BufferView.contiguous(shape);
    _checkBackend(options.backend);
    const storage = Storage.allocate(view.length * info.bytesPerElement, {
      allocator: options.allocator,
    });
    return _trusted(storage, info, view, options.backend);
  }

  /**
   * A contiguous buffer whose storage allocates on first use (see
   * `Storage.lazy`): plan shapes and views first, spend bytes at the first
   * write. Views of it allocate nothing; its first fill, write, copy or
   * element access allocates. Its elements are as the allocator returns
   * them: write before reading.
   *
   * @param dtype The element type.
   * @param shape The shape.
   * @param options Allocator and backend.
   * @returns The buffer.
   * @throws {ShapeError} When the shape is invalid.
   * @throws {InvalidArgumentError} When the dtype is unknown or the byte
   * length is too large.
   *
   * @example
   * ```ts
   * import { Buffer } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * using w = Buffer.lazy("f32", [1024, 1024]); // 4 MiB planned, 0 spent
   * assert.equal(w.storage.isAllocated, false);
   * w.set([0, 0], 1); // first write: allocates
   * assert.equal(w.storage.isAllocated, true);
   * ```
   */
  static lazy<D extends Dtype>(
    dtype: D,
    shape: Shape,
    options: BufferOptions = {},
  ): Buffer<D> {
    _checkOptions(options, "options", BUFFER_KEYS, "Buffer.lazy()");
    const info = dtypeInfo(dtype);
    const view = BufferView.contiguous(shape);
    _checkBackend(options.backend);
    const storage = Storage.lazy(view.length * info.bytesPerElement, {
      allocator: options.allocator,
    });
    return _trusted(storage, info, view, options.backend);
  }

  /**
   * Allocates a contiguous buffer filled with zeros.
   *
   * @param dtype The element type.
   * @param shape The shape.
   * @param options Allocator and backend.
   * @returns The buffer.
   * @throws {ShapeError} When the shape is invalid.
   */
  static zeros<D extends Dtype>(
    dtype: D,
    shape: Shape,
    options: BufferOptions = {},
  ): Buffer<D> {
    _checkOptions(options, "options", BUFFER_KEYS, "Buffer.zeros()");
    return Buffer.filled(dtype, shape, { ...options, value: 0 });
  }

  /**
   * Allocates a contiguous buffer with every element set to `options.value`.
   *
   * @param dtype The element type.
   * @param shape The shape.
   * @param options The value, allocator and backend.
   * @returns The buffer.
   * @throws {ShapeError} When the shape is invalid.
   *
   * @example Fill a buffer with one value
   * ```ts
   * import { Buffer } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * using b = Buffer.filled("i16", [2, 2], { value: -3 });
   * assert.deepEqual([...b.toData()], [-3, -3, -3, -3]);
   * ```
   */
  static filled<D extends Dtype>(
    dtype: D,
    shape: Shape,
    options: BufferOptions & {
      /** The value of every element. */
      value: number;
    },
  ): Buffer<D> {
    validateObject(options, "options");
    validateOptionKeys(options, FILLED_KEYS, "Buffer.filled()");
    const value = options.value;
    const buffer = Buffer.empty(dtype, shape, {
      allocator: options.allocator,
      backend: options.backend,
    });
    try {
      buffer.fill(value);
    } catch (error) {
      buffer.release();
      throw error;
    }
    return buffer;
  }

  /**
   * Allocates a contiguous buffer holding a copy of `data` (converted to
   * `dtype` as typed arrays convert; `bool` stores 0 or 1).
   *
   * @param dtype The element type.
   * @param data The elements in row-major order.
   * @param options Shape, allocator and backend.
   * @returns The buffer.
   * @throws {ShapeError} When the shape's element count differs from
   * `data.length`.
   *
   * @example Copy numbers into a new buffer
   * ```ts
   * import { Buffer } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * using b = Buffer.fromData("u8", [1, 2, 3, 4, 5, 6], { shape: [3, 2] });
   * assert.deepEqual(b.shape, [3, 2]);
   * assert.throws(() => Buffer.fromData("u8", [1, 2, 3], { shape: [2, 2] }), /3 elements/);
   * ```
   */
  static fromData<D extends Dtype>(
    dtype: D,
    data: ArrayLike<number>,
    options: FromDataOptions = {},
  ): Buffer<D> {
    _checkOptions(options, "options", FROM_DATA_KEYS, "Buffer.fromData()");
    const info = dtypeInfo(dtype);
    // The length is read once: an array-like could answer differently later.
    const length = _checkData(data);
    const shape = options.shape ?? [length];
    const view = BufferView.contiguous(shape);
    if (view.length !== length) {
      throw new ShapeError(
        `Cannot make a buffer of shape ${
          _fmt(shape)
        } (${view.length} elements) from ${length} elements`,
        {
          name: "data",
          value: length,
          limit: view.length,
          shape: view.shape,
        },
      );
    }
    const buffer = Buffer.empty(dtype, view.shape, {
      allocator: options.allocator,
      backend: options.backend,
    });
    try {
      const host = buffer.#isHost();
      const into = host
        ? buffer.#typed() as unknown as Float64Array
        : new info.arrayType(length) as unknown as Float64Array;
      if (dtype === "bool") {
        for (let i = 0; i < length; i++) into[i] = data[i] ? 1 : 0;
      } else if (_isTypedArray(data)) {
        // Its own length (the intrinsic one) is what set() reads.
        into.set(data as unknown as Float64Array, 0);
      } else {
        // Element by element up to the length checked, never data.length
        // again (a proxy's or getter's could change between two reads).
        for (let i = 0; i < length; i++) into[i] = data[i];
      }
      if (!host) {
        buffer.#requireBackend("fromData").write(
          buffer.binding(),
          into as unknown as AnyTypedArray,
        );
      }
    } catch (error) {
      buffer.release();
      if (error instanceof AllotError) throw error;
      throw new InvalidArgumentError(
        `Cannot make a buffer from ${describeValue(data)}: ${
          error instanceof Error ? error.message : String(error)
        }`,
        { name: "data", value: data, limit: "ArrayLike<number>" },
      );
    }
    return buffer;
  }

  /** The element type. */
  get dtype(): D {
    return this.#dtype;
  }

  /** Bytes per element. */
  get bytesPerElement(): number {
    return this.#info.bytesPerElement;
  }

  /** The layout (immutable). */
  get view(): BufferView {
    return this.#view;
  }

  /** The shape (a fresh copy). */
  get shape(): number[] {
    return this.#view.shape;
  }

  /** The strides in elements (a fresh copy). */
  get strides(): number[] {
    return this.#view.strides;
  }

  /** The storage index of the first element, in elements. */
  get offset(): number {
    return this.#view.offset;
  }

  /** Number of logical elements. */
  get length(): number {
    return this.#view.length;
  }

  /** Number of dimensions. */
  get rank(): number {
    return this.#view.rank;
  }

  /** Bytes of the logical elements: `length * bytesPerElement`. */
  get byteLength(): number {
    return this.#view.length * this.#info.bytesPerElement;
  }

  /** Whether the view is row-major contiguous. */
  get isContiguous(): boolean {
    return this.#view.isContiguous;
  }

  /** The backend, if one was given. */
  get backend(): BufferBackend | undefined {
    return this.#backend;
  }

  /**
   * The shared storage.
   *
   * @throws {UseAfterFreeError} After release.
   */
  get storage(): Storage {
    return this.#live("storage").target;
  }

  /** The stable id of the storage: equal ids mean shared bytes. */
  get storageId(): number {
    return this.storage.id;
  }

  /** Whether this buffer holds the only strong reference to its storage. */
  get isStorageUnique(): boolean {
    return !this.#released && this.#storage.isUnique;
  }

  /**
   * Whether writing in place is safe and simple: the storage is not shared
   * and the view is contiguous.
   *
   * "Not shared" counts every live handle, views included: allot cannot know
   * whether a view escaped (into a closure, a cache, a returned tensor), and
   * a runtime that reuses an input's memory for an output (an in-place
   * `relu` on a dead input) must be sure no one observes the write. So a
   * live view makes this `false`. Release views when done (or make them
   * inside `tidy()`), and it is `true` again; to write through views on
   * purpose (PyTorch's in-place semantics), write without asking.
   *
   * @example
   * ```ts
   * import { Buffer, tidy } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * using x = Buffer.zeros("f32", [2, 2]);
   * assert.ok(x.canModifyInPlace);
   * const sum = tidy(() => x.transpose().toData().reduce((a, b) => a + b));
   * assert.equal(sum, 0);
   * assert.ok(x.canModifyInPlace); // the transposed view is gone
   * using view = x.reshape([4]);
   * assert.ok(!x.canModifyInPlace); // a live view could observe the write
   * ```
   */
  get canModifyInPlace(): boolean {
    return this.isStorageUnique && this.#view.isContiguous;
  }

  /** Whether this handle was released. */
  get released(): boolean {
    return this.#released;
  }

  /**
   * Whether `other` views the same storage.
   *
   * @param other Another buffer, or anything with a `storage`.
   * @returns `true` when the storages are the same object.
   */
  sharesStorageWith(other: { readonly storage: Storage }): boolean {
    validateObject(other, "other");
    return this.storage === other.storage;
  }

  /**
   * The binding a kernel needs: storage, view, dtype. Valid while this
   * buffer is alive.
   *
   * @returns The binding.
   * @throws {UseAfterFreeError} After release.
   * @throws {ShapeError} When the view no longer fits its storage (the
   * storage was resized or reset under it): a backend is promised views
   * that were validated against their storage.
   */
  binding(): StridedBinding {
    const storage = this.storage;
    checkFits(this.#view, storage, this.#info);
    return { storage, view: this.#view, dtype: this.#dtype };
  }

  /**
   * Another owning handle to the same storage and view.
   *
   * @returns A new buffer; release it separately.
   * @throws {UseAfterFreeError} After release.
   */
  clone(): Buffer<D> {
    return this.withView(this.#view);
  }

  /**
   * A buffer with another layout over the same storage.
   *
   * @param view The layout, which must fit in the storage.
   * @returns A new buffer sharing the storage.
   * @throws {ShapeError} When the view reaches past the storage.
   * @throws {UseAfterFreeError} After release.
   */
  withView(view: BufferView): Buffer<D> {
    const handle = this.#live("withView");
    _requireInstance(view, _isBufferView, "BufferView", "view", "withView");
    checkFits(view, handle.target, this.#info);
    return _trusted(handle.clone(), this.#info, view, this.#backend);
  }

  /**
   * Same elements, new shape, no copy (see {@linkcode BufferView.reshape}).
   *
   * @param shape The new shape; one size may be -1.
   * @returns A buffer sharing the storage.
   * @throws {ShapeError} When counts differ or a copy would be needed.
   */
  reshape(shape: Shape): Buffer<D> {
    return this.withView(this.#view.reshape(shape));
  }

  /**
   * Swaps two dims, by default the last two; no copy.
   *
   * @param dim0 First dim.
   * @param dim1 Second dim.
   * @returns A buffer sharing the storage.
   * @throws {ShapeError} When a dim is out of range.
   */
  transpose(dim0?: number, dim1?: number): Buffer<D> {
    return this.withView(this.#view.transpose(dim0, dim1));
  }

  /**
   * Reorders the dims; no copy.
   *
   * @param axes A permutation of `[0, rank)`.
   * @returns A buffer sharing the storage.
   * @throws {ShapeError} When `axes` is not a permutation.
   */
  permute(axes: readonly number[]): Buffer<D> {
    return this.withView(this.#view.permute(axes));
  }

  /**
   * Slices one dim with start, stop and step (negative steps too); no copy.
   *
   * @param dim The dim.
   * @param options Start, stop, step.
   * @returns A buffer sharing the storage.
   * @throws {ShapeError} When the slice is out of range.
   */
  slice(dim: number, options: SliceOptions = {}): Buffer<D> {
    return this.withView(this.#view.slice(dim, options));
  }

  /**
   * Removes size-1 dims (one, or all); no copy.
   *
   * @param dim A dim of size 1.
   * @returns A buffer sharing the storage.
   * @throws {ShapeError} When `dim` is out of range or not of size 1.
   */
  squeeze(dim?: number): Buffer<D> {
    return this.withView(this.#view.squeeze(dim));
  }

  /**
   * Inserts a size-1 dim; no copy.
   *
   * @param dim Position of the new dim.
   * @returns A buffer sharing the storage.
   * @throws {ShapeError} When `dim` is out of range.
   */
  unsqueeze(dim: number): Buffer<D> {
    return this.withView(this.#view.unsqueeze(dim));
  }

  /**
   * Broadcasts to a shape (stride 0 on repeated dims); no copy.
   *
   * @param shape The target shape.
   * @returns A buffer sharing the storage; read-only in spirit.
   * @throws {ShapeError} When the shapes are incompatible.
   */
  broadcastTo(shape: Shape): Buffer<D> {
    return this.withView(this.#view.broadcastTo(shape));
  }

  /**
   * The element at `indices`.
   *
   * @param indices One index per dim.
   * @returns The element.
   * @throws {ShapeError} When an index is out of range.
   * @throws {UnsupportedOperationError} When the storage is not host memory.
   */
  get(indices: readonly number[]): number {
    const at = this.#view.index(indices);
    return this.#hostTyped("get")[at] as number;
  }

  /**
   * Sets the element at `indices`.
   *
   * @param indices One index per dim.
   * @param value The value (`bool` stores 0 or 1).
   * @throws {ShapeError} When an index is out of range.
   * @throws {UnsupportedOperationError} When the storage is not host memory.
   */
  set(indices: readonly number[], value: number): void {
    const at = this.#view.index(indices);
    const n = _checkValue(value, "set");
    const typed = this.#hostTyped("set");
    typed[at] = this.#dtype === "bool" ? (value ? 1 : 0) : n;
  }

  /**
   * Sets every element of the view to `value`.
   *
   * @param value The value (`bool` stores 0 or 1).
   * @throws {ShapeError} On a view whose elements alias (a broadcast view,
   * or strides such as `[1, 1]` over shape `[2, 2]`).
   * @throws {UnsupportedOperationError} On non-host memory without backend.
   */
  fill(value: number): void {
    this.#live("fill");
    const n = _checkValue(value, "fill");
    this.#checkWritable("fill");
    const v = this.#dtype === "bool" ? (value ? 1 : 0) : n;
    if (!this.#isHost()) {
      this.#requireBackend("fill").fill(this.binding(), v);
      return;
    }
    const typed = this.#typed();
    const view = this.#view;
    if (view.isContiguous) {
      typed.fill(v, view.offset, view.offset + view.length);
      return;
    }
    const one = new this.#info.arrayType(1);
    one[0] = v;
    _copyStrided(
      this.#bits(),
      view.offset,
      view.strides,
      bitsOf(one, this.#info),
      0,
      new Array<number>(view.rank).fill(0),
      view.shape,
    );
  }

  /**
   * The logical elements of the view, in row-major order, as a fresh typed
   * array (gathered from any layout). Host memory only; use
   * {@linkcode Buffer.read} for any memory.
   *
   * @returns A new typed array of `length` elements.
   * @throws {UnsupportedOperationError} When the storage is not host memory.
   * @throws {UseAfterFreeError} After release.
   */
  toData(): TypedArrayOf<D> {
    const src = this.#hostTyped("toData");
    const view = this.#view;
    const out = new this.#info.arrayType(view.length);
    if (view.isContiguous) {
      (out as Uint8Array).set(
        (src as Uint8Array).subarray(view.offset, view.offset + view.length),
      );
    } else {
      _copyStrided(
        bitsOf(out, this.#info),
        0,
        denseStrides(view),
        this.#bits(),
        view.offset,
        view.strides,
        view.shape,
      );
    }
    return out;
  }

  /**
   * A typed array over this buffer's elements in host memory, without a
   * copy: writes through it change the buffer. For kernel authors who need
   * the elements as an array of the dtype (`Float32Array` for `f32`). The
   * view must be contiguous (row-major, so that the array's element `i` is
   * the buffer's logical element `i`); call `contiguous()` first otherwise.
   * The array is valid until the storage moves: a `resize()`, or a
   * `WebAssembly.Memory` that grows, detaches it.
   *
   * @returns A typed array of `length` elements of the dtype.
   * @throws {ShapeError} When the view is not contiguous.
   * @throws {UnsupportedOperationError} When the storage is not host memory
   *   (use `read()`), or for `f16` where the runtime lacks `Float16Array`.
   * @throws {UseAfterFreeError} After release.
   *
   * @example Write a kernel's output in place
   * ```ts
   * import { Buffer } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * using b = Buffer.zeros("f32", [2, 3]);
   * const out = b.hostView(); // a Float32Array of 6 elements, no copy
   * for (let i = 0; i < out.length; i++) out[i] = i * i;
   * assert.equal(b.get([1, 2]), 25);
   * ```
   */
  hostView(): TypedArrayOf<D> {
    const typed = this.#hostTyped("view");
    const view = this.#view;
    if (!view.isContiguous) {
      throw new ShapeError(
        `Cannot view a non-contiguous buffer of shape ${
          _fmt(view.shape)
        } with strides ${
          _fmt(view.strides)
        } as a typed array: call contiguous() first`,
        {
          name: "strides",
          value: view.strides,
          shape: view.shape,
          strides: view.strides,
        },
      );
    }
    return typed.subarray(
      view.offset,
      view.offset + view.length,
    ) as TypedArrayOf<D>;
  }

  /**
   * The logical elements of the view, from any memory: host memory answers
   * at once, other memory through the backend's `read`.
   *
   * @returns A promise of a new typed array.
   * @throws {UnsupportedOperationError} On non-host memory without backend.
   * @throws {ShapeError} When the view no longer fits its storage (it was
   * resized or reset under it).
   * @throws {ContractViolationError} (as a rejection) When the backend
   * answers with anything but `length` elements of the dtype's array type.
   */
  read(): Promise<TypedArrayOf<D>> {
    this.#live("read");
    if (this.#isHost()) return Promise.resolve(this.toData());
    const backend = this.#requireBackend("read");
    const info = this.#info;
    const length = this.#view.length;
    // A backend's answer is checked: a short, mistyped or junk array was
    // handed to the caller as the buffer's elements.
    return Promise.resolve(backend.read(this.binding())).then((out) => {
      if (!(out instanceof info.arrayType) || out.length !== length) {
        throw new ContractViolationError(
          `Cannot read ${length} ${info.dtype} elements: the backend ${
            describeValue(backend.name)
          } returned ${
            dtypeOf(out) === undefined
              ? describeValue(out)
              : `a ${dtypeOf(out)} array of ${
                (out as { length: number }).length
              } elements`
          }`,
        );
      }
      return out as TypedArrayOf<D>;
    });
  }

  /**
   * A contiguous buffer with the same elements: a new handle to the same
   * storage when this view is already contiguous at offset 0, otherwise a
   * new storage (from `options.allocator`, or this storage's allocator) into
   * which the view is packed.
   *
   * @param options Allocator for the packed copy.
   * @returns A contiguous buffer; release it separately.
   * @throws {UnsupportedOperationError} On non-host memory without backend.
   * @throws {UseAfterFreeError} After release.
   */
  contiguous(options: Pick<BufferOptions, "allocator"> = {}): Buffer<D> {
    const handle = this.#live("contiguous");
    _checkOptions(options, "options", ["allocator"], "Buffer.contiguous()");
    const view = this.#view;
    if (view.isContiguous && view.offset === 0) return this.clone();
    const packedView = BufferView.contiguous(view.shape);
    const allocator = options.allocator ?? handle.target.allocator;
    const out = _trusted<D>(
      Storage.allocate(packedView.length * this.#info.bytesPerElement, {
        allocator,
      }),
      this.#info,
      packedView,
      this.#backend,
    );
    try {
      out.#copyIn(this, "contiguous");
    } catch (error) {
      out.release();
      throw error;
    }
    return out;
  }

  /**
   * Copies the elements of `src` into this view, element for element. Both
   * must have the same dtype and shape; this view must not be a broadcast.
   * Overlapping views of one storage are handled (through a temporary).
   *
   * @param src The source buffer.
   * @throws {InvalidArgumentError} When the dtypes differ.
   * @throws {ShapeError} When the shapes differ or this view's elements
   * alias (a broadcast view, or strides such as `[1, 1]`).
   * @throws {UnsupportedOperationError} On non-host memory without backend,
   * or between host and non-host memory.
   */
  copyFrom(src: Buffer<D>): void {
    this.#live("copyFrom");
    _requireInstance(src, _isBuffer, "Buffer", "src", "copyFrom");
    src.#live("copyFrom");
    if (src.#dtype !== this.#dtype) {
      throw new InvalidArgumentError(
        `Cannot copy a ${src.#dtype} buffer into a ${this.#dtype} buffer: dtypes must match`,
        { name: "dtype", value: src.#dtype, limit: this.#dtype },
      );
    }
    if (!src.#view.sameShape(this.#view)) {
      throw new ShapeError(
        `Cannot copy a buffer of shape ${
          _fmt(src.#view.shape)
        } into a view of shape ${_fmt(this.#view.shape)} with strides ${
          _fmt(this.#view.strides)
        }: shapes must match`,
        {
          name: "src",
          value: src.#view.shape,
          limit: this.#view.shape,
          shape: this.#view.shape,
          strides: this.#view.strides,
        },
      );
    }
    this.#checkWritable("copyFrom");
    this.#copyIn(src, "copyFrom");
  }

  /**
   * Drops this handle's reference to the storage; the last one frees it.
   *
   * @throws {DoubleFreeError} When already released.
   */
  release(): void {
    this.#storage.release();
    this.#released = true;
  }

  /** Releases this handle if it was not released yet. */
  [Symbol.dispose](): void {
    if (!this.#released) this.release();
  }

  /**
   * Short description such as `Buffer<f32>(shape=[2, 3], strides=[3, 1],
   * offset=0, storage=4)`.
   *
   * @returns The description.
   */
  toString(): string {
    return `Buffer<${this.#dtype}>(shape=${_fmt(this.#view.shape)}, strides=${
      _fmt(this.#view.strides)
    }, offset=${this.#view.offset}, storage=${
      this.#released ? "released" : this.#storage.target.id
    })`;
  }

  // -- internals ------------------------------------------------------------

  #live(what: string): IntrusivePtr<Storage> {
    if (this.#released) {
      throw new UseAfterFreeError(
        `Cannot ${what}: the buffer was released`,
      );
    }
    return this.#storage;
  }

  #isHost(): boolean {
    return isHostMemory(this.#storage.target.data.memory);
  }

  #requireBackend(what: string): BufferBackend {
    if (this.#backend === undefined) {
      const storage = this.#storage.target;
      throw new UnsupportedOperationError(
        `Cannot ${what} a buffer on ${storage.device}: storage ${storage.id} is not host memory and the buffer has no backend`,
      );
    }
    return this.#backend;
  }

  #checkWritable(what: string): void {
    const view = this.#view;
    // no elements, nothing aliases (core's findStridedAlias and PyTorch
    // agree): an empty broadcast view such as [3, 0] was refused
    if (view.length === 0) return;
    const shape = view.shape, strides = view.strides;
    for (let i = 0; i < shape.length; i++) {
      if (strides[i] === 0 && shape[i] > 1) {
        throw new ShapeError(
          `Cannot ${what} a broadcast view of shape ${
            _fmt(shape)
          } with strides ${
            _fmt(strides)
          }: stride 0 at dim ${i} makes elements alias`,
          { name: "strides", value: strides, shape, strides },
        );
      }
    }
    if (view.isContiguous || view.isFortranContiguous) return;
    let alias;
    try {
      alias = findStridedAlias(shape, strides);
    } catch (e) {
      if (!(e instanceof InvalidArgumentError)) throw e;
      throw new ShapeError(`Cannot ${what} a view: ${e.message}`, {
        name: "strides",
        value: strides,
        limit: e.limit,
        shape,
        strides,
      });
    }
    if (alias !== undefined) {
      throw new ShapeError(
        `Cannot ${what} a view of shape ${_fmt(shape)} with strides ${
          _fmt(strides)
        }: indices ${_fmt(alias.first)} and ${
          _fmt(alias.second)
        } both reach element ${view.offset + alias.offset}`,
        { name: "strides", value: strides, shape, strides },
      );
    }
  }

  /** Typed array over the whole storage; checks the view still fits. */
  #typed(): TypedArrayOf<D> {
    return this.#over(this.#info.arrayType) as TypedArrayOf<D>;
  }

  /**
   * An array of type `Type` over the whole storage (elements of this dtype's
   * width); checks the view still fits.
   */
  #over<T>(
    Type: new (buffer: ArrayBuffer, byteOffset: number, length: number) => T,
  ): T {
    const storage = this.#storage.target;
    checkFits(this.#view, storage, this.#info);
    const data = storage.data;
    const bpe = this.#info.bytesPerElement;
    if (data.byteOffset % bpe !== 0) {
      throw new UnsupportedOperationError(
        `Cannot read ${this.#dtype} elements of storage ${storage.id}: its byte offset ${data.byteOffset} is not a multiple of ${bpe}`,
      );
    }
    const memory = data.memory;
    if (
      typeof WebAssembly !== "undefined" && memory instanceof WebAssembly.Memory
    ) {
      _noteMemory(memory);
    }
    return new Type(
      _checkHostSpan(storage, hostBuffer(memory as ArrayBuffer) as ArrayBuffer),
      data.byteOffset,
      Math.floor(data.byteLength / bpe),
    );
  }

  #hostTyped(what: string): TypedArrayOf<D> {
    this.#live(what);
    if (!this.#isHost()) {
      const storage = this.#storage.target;
      throw new UnsupportedOperationError(
        `Cannot ${what} a buffer on ${storage.device}: storage ${storage.id} is not host memory; use read()`,
      );
    }
    return this.#typed();
  }

  #bits(): _BitArray {
    // straight to the raw-bits array: one view per call, not two
    return this.#over<_BitArray>(
      BIT_ARRAYS[this.#info.bytesPerElement as 1 | 2 | 4 | 8],
    );
  }

  /** Copies `src` (same dtype and shape) into this view. */
  #copyIn(src: Buffer<D>, what: string): void {
    const srcHost = src.#isHost(), dstHost = this.#isHost();
    if (!srcHost || !dstHost) {
      if (srcHost !== dstHost) {
        throw new UnsupportedOperationError(
          `Cannot ${what} between host and ${
            srcHost ? this.storage.device : src.storage.device
          } memory: use read() and fromData()`,
        );
      }
      this.#requireBackend(what).copy(this.binding(), src.binding());
      return;
    }
    const sv = src.#view, dv = this.#view;
    const sBits = src.#bits();
    let sOff = sv.offset, sStrides = sv.strides;
    let source = sBits;
    if (
      src.#storage.target === this.#storage.target && !(sv.equals(dv)) &&
      sv.minIndex <= dv.maxIndex && dv.minIndex <= sv.maxIndex
    ) {
      // overlapping views of one storage: pack the source first
      source = bitsOf(src.toData(), this.#info);
      sOff = 0;
      sStrides = denseStrides(sv);
    } else if (sv.equals(dv) && src.#storage.target === this.#storage.target) {
      return;
    }
    _copyStrided(
      this.#bits(),
      dv.offset,
      dv.strides,
      source,
      sOff,
      sStrides,
      dv.shape,
    );
  }
}

/** Row-major strides for a packed copy of `view` (sizes of 0 count as 1). */
function denseStrides(view: BufferView): number[] {
  const shape = view.shape;
  const strides = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = acc;
    acc *= Math.max(shape[i], 1);
  }
  return strides;
}

function bitsOf(array: AnyTypedArray, info: DtypeInfo): _BitArray {
  const Bits = BIT_ARRAYS[info.bytesPerElement as 1 | 2 | 4 | 8];
  if (array instanceof Bits) return array;
  return new Bits(array.buffer as ArrayBuffer, array.byteOffset, array.length);
}

function checkFits(view: BufferView, storage: Storage, info: DtypeInfo): void {
  const capacity = Math.floor(storage.byteLength / info.bytesPerElement);
  if (view.requiredLength > capacity) {
    throw new ShapeError(
      `Cannot view storage ${storage.id} (${storage.byteLength} bytes, ${capacity} ${info.dtype} elements) with shape ${
        _fmt(view.shape)
      }, strides ${
        _fmt(view.strides)
      } and offset ${view.offset}: it reaches element ${view.maxIndex}`,
      {
        name: "view",
        value: view.maxIndex,
        limit: capacity,
        shape: view.shape,
        strides: view.strides,
      },
    );
  }
}

/**
 * Refuses `data` that is not array-like (null, a string, a number) and
 * returns its length, read once (a typed array's through the intrinsic
 * getter, which a subclass cannot override).
 */
function _checkData(data: unknown): number {
  if (typeof data === "object" && data !== null) {
    const tag = typedArrayTag.call(data);
    if (tag !== undefined) {
      if (tag === "BigInt64Array" || tag === "BigUint64Array") {
        throw new InvalidArgumentError(
          `Cannot make a buffer from a ${tag}: data must hold numbers, not BigInts`,
          { name: "data", value: data, limit: "ArrayLike<number>" },
        );
      }
      return typedArrayLength.call(data);
    }
    let length: unknown;
    try {
      length = (data as { length?: unknown }).length;
    } catch {
      // A proxy of a typed array: its length getter refuses the receiver.
      length = undefined;
    }
    if (
      Number.isSafeInteger(length) && (length as number) >= 0 &&
      !(data instanceof DataView)
    ) {
      const error = _elementError(data as ArrayLike<unknown>, length as number);
      if (error !== undefined) throw error;
      return length as number;
    }
  }
  throw new InvalidArgumentError(
    `Cannot make a buffer from ${
      describeValue(data)
    }: data must be an array or a typed array of numbers`,
    { name: "data", value: data, limit: "ArrayLike<number>" },
  );
}

/**
 * The typed error naming the first of `length` elements that typed arrays
 * cannot convert (a BigInt, a symbol), or `undefined`. A plain array is
 * scanned before anything is allocated, so a refused call changes nothing.
 */
function _elementError(
  data: ArrayLike<unknown>,
  length: number,
): InvalidArgumentError | undefined {
  for (let i = 0; i < length; i++) {
    const x = data[i];
    if (typeof x === "bigint" || typeof x === "symbol") {
      return new InvalidArgumentError(
        `Cannot make a buffer from data: element ${i} must be a number, received ${
          describeValue(x)
        }`,
        { name: `data[${i}]`, value: x, limit: "number" },
      );
    }
  }
  return undefined;
}

/** Refuses element values typed arrays cannot convert (BigInt, symbol). */
/**
 * The value as a number, converted once (an object's `valueOf` runs once,
 * here): a BigInt, a symbol, or an object that converts to neither a number
 * nor anything but a throw of the engine's is refused with a typed error.
 */
function _checkValue(value: unknown, what: string): number {
  if (typeof value === "number") return value;
  let n: number | undefined;
  if (typeof value !== "bigint" && typeof value !== "symbol") {
    try {
      n = Number(value);
    } catch (error) {
      if (!(error instanceof TypeError)) throw error;
    }
  }
  if (n === undefined) {
    throw new InvalidArgumentError(
      `Cannot ${what} an element to ${
        describeValue(value)
      }: the value must be a number`,
      { name: "value", value, limit: "number" },
    );
  }
  return n;
}

function _requireInstance(
  value: unknown,
  is: (value: unknown) => boolean,
  typeName: string,
  name: string,
  what: string,
): void {
  if (!is(value)) {
    throw new InvalidArgumentError(
      `Cannot ${what}: ${name} must be a ${typeName}, received ${
        describeValue(value)
      }`,
      { name, value, limit: typeName },
    );
  }
}

/** Whether `value` is a real {@linkcode Buffer} (a brand check). */
export function _isBuffer(value: unknown): value is Buffer {
  return typeof value === "object" && value !== null && _hasStorage(value);
}

/** The storage of a strong pointer, or a typed error for anything else. */
function _storageOf(ptr: unknown): Storage {
  let target: unknown;
  if (ptr instanceof IntrusivePtr) {
    try {
      target = ptr.target;
    } catch (error) {
      if (error instanceof AllotError) throw error;
    }
  }
  if (!(target instanceof Storage)) {
    throw new InvalidArgumentError(
      `Cannot make a buffer: storage must be an IntrusivePtr<Storage>, received ${
        describeValue(ptr)
      }`,
      { name: "storage", value: ptr, limit: "IntrusivePtr<Storage>" },
    );
  }
  return target;
}

/** Refuses a backend that is neither `undefined` nor an object of methods. */
export function _checkBackend(backend: unknown): void {
  if (backend === undefined) return;
  if (typeof backend === "object" && backend !== null) {
    const b = backend as Record<string, unknown>;
    if (
      typeof b.copy === "function" && typeof b.fill === "function" &&
      typeof b.write === "function" && typeof b.read === "function"
    ) return;
  }
  throw new InvalidArgumentError(
    `Invalid backend: expected a BufferBackend (an object with copy, fill, write and read methods), received ${
      describeValue(backend)
    }`,
    { name: "backend", value: backend, limit: "BufferBackend" },
  );
}

/** Whether `value` is a typed array (the intrinsic brand, not instanceof). */
function _isTypedArray(value: unknown): boolean {
  return typedArrayTag.call(value) !== undefined;
}

const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);
const typedArrayTag = Object.getOwnPropertyDescriptor(
  TypedArrayPrototype,
  Symbol.toStringTag,
)!.get as (this: unknown) => string | undefined;
const typedArrayLength = Object.getOwnPropertyDescriptor(
  TypedArrayPrototype,
  "length",
)!.get as (this: unknown) => number;
