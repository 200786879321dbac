/**
 * {@linkcode SparseMatrix}: CSR and CSC matrices stored discontiguously, one
 * view per primary row (column) carved out of registry-owned blocks.
 *
 * @module
 */

import {
  alignUp,
  type Allocator,
  describeValue,
  DoubleFreeError,
  InvalidArgumentError,
  LeakDetector,
  UseAfterFreeError,
  validateInteger,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import {
  defaultOwnershipRegistry,
  OwnershipRegistry,
  type Place,
} from "@allot/registry";
import { type AnyTypedArray, dtypeInfo, dtypeOf } from "@allot/storage";
import { blockElements, type BlockStrategy } from "./block_strategy.ts";

/** `csr`: rows are primary. `csc`: columns are primary. */
export type SparseLayout = "csr" | "csc";

/** Column (CSR) or row (CSC) indices. */
export type IndexArray = Int32Array | Uint32Array;

/** Offsets of each primary row into values and indices. */
export type IndptrArray = Int32Array | Uint32Array | Float64Array;

/**
 * A traditional compressed matrix: every value and index in one array each,
 * and `indptr[i]..indptr[i + 1]` the slice of primary row `i`.
 *
 * @typeParam V Type of the values array.
 */
export interface CompressedArrays<V extends AnyTypedArray = AnyTypedArray> {
  /** Non-zero values, primary row after primary row. */
  values: V;
  /** Secondary index of each value. */
  indices: IndexArray;
  /** `primaryLength + 1` offsets, starting at 0, non-decreasing, ending at nnz. */
  indptr: IndptrArray;
}

/** Options of {@linkcode SparseMatrix.wrap} and {@linkcode SparseMatrix.build}. */
export interface SparseMatrixOptions {
  /** `[rows, cols]`. */
  shape: readonly [number, number];
  /**
   * Which dimension is primary.
   *
   * @default {"csr"}
   */
  layout?: SparseLayout;
  /**
   * The registry that owns the blocks (`build` only).
   *
   * @default {defaultOwnershipRegistry()}
   */
  registry?: OwnershipRegistry;
  /**
   * Allocate blocks from this allocator (its memory must be host memory,
   * such as `@allot/cpu`'s `CpuAllocator`) instead of one `ArrayBuffer` per
   * block (`build` only). A heap allocator is much cheaper per block than
   * `new ArrayBuffer`, which zero-fills and is tracked by the GC.
   *
   * @default {undefined} (one `ArrayBuffer` per block)
   */
  allocator?: Allocator;
  /**
   * Reports matrices (built ones and their slices) that are garbage-collected
   * without `release()` (`build` only). Detection only: their blocks stay
   * registered until released or the registry is disposed.
   *
   * @default {undefined}
   */
  leakDetector?: LeakDetector;
  /**
   * How big the blocks are (`build` only).
   *
   * @default {{ minElements: 4096, maxElements: 262144, rowsPerBlock: 8 }}
   */
  blockStrategy?: BlockStrategy;
}

/**
 * Options of {@linkcode SparseMatrix.toLayout}: where the new blocks go, as
 * for {@linkcode SparseMatrix.build}.
 */
export type ToLayoutOptions = Omit<SparseMatrixOptions, "shape" | "layout">;

/** Options of {@linkcode SparseMatrix.toContiguous}. */
export interface ToContiguousOptions {
  /**
   * Allocate the three arrays in this registry (registered, so they can be
   * handed off with an owner) instead of as plain typed arrays.
   *
   * @default {undefined}
   */
  registry?: OwnershipRegistry;
}

/** One primary row (column for CSC): zero-copy views of its non-zeros. */
export interface SparseRow<V extends AnyTypedArray> {
  /** The row's values. */
  values: V;
  /** The row's secondary indices. */
  indices: IndexArray;
}

/** The per-row tables of a {@linkcode SparseMatrix}; see `rowTable()`. */
export interface SparseRowTable<V extends AnyTypedArray> {
  /** Values array of each block. */
  readonly values: readonly V[];
  /** Indices array of each block. */
  readonly indices: readonly IndexArray[];
  /** Block of each primary row. */
  readonly rowBlock: Uint32Array;
  /** Start of each primary row in its block, in elements. */
  readonly rowStart: Uint32Array;
  /** Length of each primary row, in elements. */
  readonly rowLength: Uint32Array;
}

/** A block: one memory holding values then indices for some rows. */
interface _Block<V extends AnyTypedArray> {
  values: V;
  indices: IndexArray;
}

type _Ctor<T> = { new (length: number): T; BYTES_PER_ELEMENT: number } & {
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): T;
};

const MAX_DIM = 0x7fffffff;

/** The array's real constructor, by brand check (not its `constructor`). */
function ctorOf<T extends ArrayBufferView>(array: T): _Ctor<T> {
  return dtypeInfo(dtypeOf(array)!).arrayType as unknown as _Ctor<T>;
}

const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);
function intrinsicGetter(key: string): (this: unknown) => number {
  return Object.getOwnPropertyDescriptor(TypedArrayPrototype, key)!
    .get as (this: unknown) => number;
}
const lengthOf = intrinsicGetter("length");
const byteOffsetOf = intrinsicGetter("byteOffset");
const bufferOf = intrinsicGetter("buffer") as unknown as (
  this: unknown,
) => ArrayBufferLike;

/**
 * A plain view of a brand-checked typed array, made through the intrinsic
 * getters: a subclass or an own property cannot lie about its constructor,
 * length, buffer or offset to the code that uses the view.
 */
function plainView<T extends ArrayBufferView>(array: T, name: string): T {
  try {
    return new (ctorOf(array))(
      bufferOf.call(array),
      byteOffsetOf.call(array),
      lengthOf.call(array),
    );
  } catch (error) {
    // a detached buffer, or a resizable one shrunk under the view
    throw new InvalidArgumentError(
      `Invalid ${name}: its memory cannot be viewed (${
        error instanceof Error ? error.message : String(error)
      })`,
      { name, value: array, limit: "a typed array over live memory" },
    );
  }
}

/** Brand checks: proxies and look-alikes of typed arrays fail them. */
function isIndexArray(value: unknown): value is IndexArray {
  const dtype = dtypeOf(value);
  return dtype === "i32" || dtype === "u32";
}

function isIndptrArray(value: unknown): value is IndptrArray {
  const dtype = dtypeOf(value);
  return dtype === "i32" || dtype === "u32" || dtype === "f64";
}

/** The keys of {@linkcode SparseMatrixOptions}. */
const OPTION_KEYS: readonly string[] = [
  "shape",
  "layout",
  "registry",
  "allocator",
  "leakDetector",
  "blockStrategy",
];
/** The keys of {@linkcode ToLayoutOptions}. */
const TO_LAYOUT_KEYS: readonly string[] = OPTION_KEYS.slice(2);

/** Checks the `build` options that are collaborators, before any allocation. */
function validateBuildOptions(options: SparseMatrixOptions): {
  registry: OwnershipRegistry | undefined;
  allocator: Allocator | undefined;
  leakDetector: LeakDetector | undefined;
  blockStrategy: BlockStrategy | undefined;
} {
  const { registry, allocator, leakDetector, blockStrategy } = options;
  if (registry !== undefined && !(registry instanceof OwnershipRegistry)) {
    throw new InvalidArgumentError(
      `Invalid registry: expected an OwnershipRegistry, received ${
        describeValue(registry)
      }`,
      { name: "registry", value: registry, limit: "OwnershipRegistry" },
    );
  }
  if (
    allocator !== undefined &&
    (typeof allocator !== "object" || allocator === null ||
      typeof allocator.allocate !== "function")
  ) {
    throw new InvalidArgumentError(
      `Invalid allocator: expected an Allocator (an object with allocate()), received ${
        describeValue(allocator)
      }`,
      { name: "allocator", value: allocator, limit: "Allocator" },
    );
  }
  if (leakDetector !== undefined && !(leakDetector instanceof LeakDetector)) {
    throw new InvalidArgumentError(
      `Invalid leakDetector: expected a LeakDetector, received ${
        describeValue(leakDetector)
      }`,
      { name: "leakDetector", value: leakDetector, limit: "LeakDetector" },
    );
  }
  if (blockStrategy !== undefined) {
    validateObject(blockStrategy, "blockStrategy");
  }
  return { registry, allocator, leakDetector, blockStrategy };
}

function validateShape(shape: unknown): [number, number] {
  if (!Array.isArray(shape) || shape.length !== 2) {
    throw new InvalidArgumentError(
      `Invalid shape: expected [rows, cols], received ${
        Array.isArray(shape)
          ? `[${shape.map((x: unknown) => describeValue(x)).join(", ")}]`
          : describeValue(shape)
      }`,
      { name: "shape", value: shape, limit: "[rows, cols]" },
    );
  }
  return [
    validateInteger(shape[0], 0, MAX_DIM, "rows"),
    validateInteger(shape[1], 0, MAX_DIM, "cols"),
  ];
}

function validateLayout(layout: unknown): SparseLayout {
  if (layout !== "csr" && layout !== "csc") {
    throw new InvalidArgumentError(
      `Invalid layout: must be "csr" or "csc", received ${
        describeValue(layout)
      }`,
      { name: "layout", value: layout, limit: ["csr", "csc"] },
    );
  }
  return layout;
}

/**
 * Checks traditional arrays; returns them (each read once) and nnz. Reads
 * everything, writes nothing.
 */
function validateArrays<V extends AnyTypedArray>(
  arrays: CompressedArrays<V>,
  primary: number,
  secondary: number,
  layout: SparseLayout,
): { values: V; indices: IndexArray; indptr: IndptrArray; nnz: number } {
  if (typeof arrays !== "object" || arrays === null) {
    throw new InvalidArgumentError(
      `Invalid arrays: expected { values, indices, indptr }, received ${
        describeValue(arrays)
      }`,
      { name: "arrays", value: arrays, limit: "object" },
    );
  }
  const given = arrays;
  const values = given.values, indices = given.indices, indptr = given.indptr;
  if (dtypeOf(values) === undefined) {
    throw new InvalidArgumentError(
      `Invalid values: expected a numeric typed array (f64, f32, f16, i32, u32, i16, u16, i8, u8), received ${
        ArrayBuffer.isView(values)
          ? (values as ArrayBufferView).constructor.name
          : describeValue(values)
      }`,
      { name: "values", value: values, limit: "typed array" },
    );
  }
  if (!isIndexArray(indices)) {
    throw new InvalidArgumentError(
      `Invalid indices: expected an Int32Array or Uint32Array, received ${
        ArrayBuffer.isView(indices)
          ? (indices as ArrayBufferView).constructor.name
          : describeValue(indices)
      }`,
      { name: "indices", value: indices, limit: "Int32Array | Uint32Array" },
    );
  }
  if (!isIndptrArray(indptr)) {
    throw new InvalidArgumentError(
      `Invalid indptr: expected an Int32Array, Uint32Array or Float64Array, received ${
        ArrayBuffer.isView(indptr)
          ? (indptr as ArrayBufferView).constructor.name
          : describeValue(indptr)
      }`,
      {
        name: "indptr",
        value: indptr,
        limit: "Int32Array | Uint32Array | Float64Array",
      },
    );
  }
  return checkContents(
    plainView(values, "values"),
    plainView(indices, "indices"),
    plainView(indptr, "indptr"),
    primary,
    secondary,
    layout,
  );
}

function checkContents<V extends AnyTypedArray>(
  values: V,
  indices: IndexArray,
  indptr: IndptrArray,
  primary: number,
  secondary: number,
  layout: SparseLayout,
): { values: V; indices: IndexArray; indptr: IndptrArray; nnz: number } {
  const nnz = values.length;
  if (nnz > 0xffffffff) {
    throw new InvalidArgumentError(
      `Invalid values: at most ${0xffffffff} non-zeros, received ${nnz}`,
      { name: "values", value: nnz, limit: 0xffffffff },
    );
  }
  if (indices.length !== nnz) {
    throw new InvalidArgumentError(
      `Invalid indices: must have one entry per value (${nnz}), received ${indices.length}`,
      { name: "indices", value: indices.length, limit: nnz },
    );
  }
  const primaryName = layout === "csr" ? "rows" : "cols";
  if (indptr.length !== primary + 1) {
    throw new InvalidArgumentError(
      `Invalid indptr: must have ${primaryName} + 1 = ${
        primary + 1
      } entries, received ${indptr.length}`,
      { name: "indptr", value: indptr.length, limit: primary + 1 },
    );
  }
  if (indptr[0] !== 0) {
    throw new InvalidArgumentError(
      `Invalid indptr: must start at 0, received ${indptr[0]}`,
      { name: "indptr[0]", value: indptr[0], limit: 0 },
    );
  }
  if (indptr[primary] !== nnz) {
    throw new InvalidArgumentError(
      `Invalid indptr: must end at nnz = values.length = ${nnz}, received ${
        indptr[primary]
      }`,
      { name: `indptr[${primary}]`, value: indptr[primary], limit: nnz },
    );
  }
  let previous = 0;
  for (let i = 1; i <= primary; i++) {
    const next = indptr[i];
    if (!(next >= previous) || !Number.isInteger(next)) {
      throw new InvalidArgumentError(
        `Invalid indptr: must be non-decreasing integers, received indptr[${
          i - 1
        }] = ${previous} and indptr[${i}] = ${next}`,
        { name: `indptr[${i}]`, value: next, limit: previous },
      );
    }
    previous = next;
  }
  // Indices: one tight pass; locate the culprit only on failure.
  let bad = false;
  if (indices instanceof Int32Array) {
    for (let k = 0; k < nnz; k++) {
      const c = indices[k];
      if (c < 0 || c >= secondary) {
        bad = true;
        break;
      }
    }
  } else {
    for (let k = 0; k < nnz; k++) {
      if (indices[k] >= secondary) {
        bad = true;
        break;
      }
    }
  }
  if (bad) {
    let k = 0;
    while (indices[k] >= 0 && indices[k] < secondary) k++;
    let row = 0;
    while (indptr[row + 1] <= k) row++;
    const rowName = layout === "csr" ? "row" : "column";
    throw new InvalidArgumentError(
      `Invalid indices: indices[${k}] = ${
        indices[k]
      } (${rowName} ${row}) must be in [0, ${secondary})`,
      { name: `indices[${k}]`, value: indices[k], limit: [0, secondary] },
    );
  }
  return { values, indices, indptr, nnz };
}

/**
 * A CSR or CSC sparse matrix stored discontiguously (SCL-Core's
 * `Sparse<T, IsCSR>`): each primary row (column for CSC) is a view of its
 * values and of its indices, with a length, carved out of blocks.
 *
 * ```
 * traditional:  values  [v0 v1 v2 | v3 v4 | v5 v6 v7 v8]   indptr [0 3 5 9]
 * discontiguous:
 *   block 0 = one ArrayBuffer [v0 v1 v2 v3 v4 | pad | c0 c1 c2 c3 c4]
 *   block 1 = one ArrayBuffer [v5 v6 v7 v8 | c5 c6 c7 c8]
 *   row 0 -> (block 0, start 0, length 3)
 *   row 1 -> (block 0, start 3, length 2)
 *   row 2 -> (block 1, start 0, length 4)
 * ```
 *
 * A row is stored as (block, start, length) in three typed arrays, the JS form
 * of SCL's pointer arrays; its typed-array views are made on demand by
 * `row(i)`, since making a view costs about as much as a small allocation.
 *
 * - `SparseMatrix.build(arrays, options)` copies a traditional matrix into
 *   blocks sized by {@linkcode blockElements}; each block is one allocation
 *   registered in an {@linkcode OwnershipRegistry}.
 * - `SparseMatrix.wrap(arrays, options)` views a traditional matrix without
 *   copying; the caller keeps owning its arrays.
 * - `slice(start, end)` and `select(rows)` make views of some rows without
 *   copying values: each takes one alias reference on every block it uses, so
 *   a block lives until every matrix using it is released.
 * - `toContiguous()` converts back to traditional arrays.
 *
 * Bad input (malformed `indptr`, indices out of range, bad shapes) throws
 * {@linkcode InvalidArgumentError} before anything is allocated.
 *
 * @typeParam V Type of the values arrays.
 *
 * @example Build, slice, convert back
 * ```ts
 * import { SparseMatrix } from "@allot/sparse";
 * import { OwnershipRegistry } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * using registry = new OwnershipRegistry();
 * // [[1, 0, 2], [0, 0, 3], [4, 5, 0]]
 * const arrays = {
 *   values: new Float32Array([1, 2, 3, 4, 5]),
 *   indices: new Int32Array([0, 2, 2, 0, 1]),
 *   indptr: new Int32Array([0, 2, 3, 5]),
 * };
 * using matrix = SparseMatrix.build(arrays, { shape: [3, 3], registry });
 * assert.deepEqual([...matrix.row(2).values], [4, 5]);
 * using tail = matrix.slice(1, 3); // no copy of values
 * assert.equal(tail.nnz, 3);
 * const back = tail.toContiguous();
 * assert.deepEqual([...back.indptr], [0, 1, 3]);
 * assert.deepEqual([...back.indices], [2, 0, 1]);
 * ```
 */
export class SparseMatrix<V extends AnyTypedArray = AnyTypedArray> {
  readonly #layout: SparseLayout;
  readonly #rows: number;
  readonly #cols: number;
  #nnz: number;
  readonly #blocks: readonly _Block<V>[];
  readonly #rowBlock: Uint32Array;
  readonly #rowStart: Uint32Array;
  readonly #rowLength: Uint32Array;
  readonly #registry: OwnershipRegistry | undefined;
  /** Block index -> the place through which this matrix holds one reference. */
  readonly #keys: Map<number, Place>;
  /** Rows use blocks in order, every block between the first and last. */
  readonly #monotonic: boolean;
  readonly #template: { values: V; indices: IndexArray };
  readonly #detector: LeakDetector | undefined;
  #released = false;

  private constructor(
    layout: SparseLayout,
    shape: [number, number],
    nnz: number,
    blocks: readonly _Block<V>[],
    rowBlock: Uint32Array,
    rowStart: Uint32Array,
    rowLength: Uint32Array,
    registry: OwnershipRegistry | undefined,
    keys: Map<number, Place>,
    template: { values: V; indices: IndexArray },
    monotonic: boolean,
    detector: LeakDetector | undefined,
  ) {
    this.#layout = layout;
    this.#rows = shape[0];
    this.#cols = shape[1];
    this.#nnz = nnz;
    this.#blocks = blocks;
    this.#rowBlock = rowBlock;
    this.#rowStart = rowStart;
    this.#rowLength = rowLength;
    this.#registry = registry;
    this.#keys = keys;
    this.#template = template;
    this.#monotonic = monotonic;
    this.#detector = detector;
    if (detector !== undefined && registry !== undefined) {
      detector.watch(this, {
        label: `SparseMatrix(${layout} ${shape[0]}x${
          shape[1]
        }, ${keys.size} blocks)`,
      });
    }
  }

  /**
   * Views a traditional matrix without copying (SCL's `wrap_traditional`).
   * The matrix owns nothing: the caller keeps the arrays alive and valid.
   *
   * @param arrays Values, indices and indptr.
   * @param options Shape and layout.
   * @returns The matrix; `release()` only invalidates it.
   * @throws {InvalidArgumentError} For a bad shape, layout or array.
   *
   * @example
   * ```ts
   * import { SparseMatrix } from "@allot/sparse";
   * import assert from "node:assert/strict";
   *
   * const values = new Float64Array([1, 2, 3]);
   * const m = SparseMatrix.wrap(
   *   { values, indices: new Int32Array([1, 0, 1]), indptr: new Int32Array([0, 1, 3]) },
   *   { shape: [2, 2] },
   * );
   * assert.equal(m.row(1).values.buffer, values.buffer); // a view, not a copy
   * assert.throws(() => SparseMatrix.wrap(
   *   { values, indices: new Int32Array([1, 0, 1]), indptr: new Int32Array([0, 2, 1, 3]) },
   *   { shape: [3, 2] },
   * ), /non-decreasing integers, received indptr\[1\] = 2 and indptr\[2\] = 1/);
   * ```
   */
  static wrap<V extends AnyTypedArray>(
    arrays: CompressedArrays<V>,
    options: SparseMatrixOptions,
  ): SparseMatrix<V> {
    const shape = validateShape(options?.shape);
    validateOptionKeys(options, OPTION_KEYS, "SparseMatrix.wrap()");
    const layout = validateLayout(options.layout ?? "csr");
    const [primary, secondary] = layout === "csr"
      ? shape
      : [shape[1], shape[0]];
    const { values, indices, indptr, nnz } = validateArrays(
      arrays,
      primary,
      secondary,
      layout,
    );
    const rowStart = new Uint32Array(primary);
    const rowLength = new Uint32Array(primary);
    for (let i = 0; i < primary; i++) {
      const s = indptr[i];
      rowStart[i] = s;
      rowLength[i] = indptr[i + 1] - s;
    }
    return new SparseMatrix<V>(
      layout,
      shape,
      nnz,
      [{ values, indices }],
      new Uint32Array(primary),
      rowStart,
      rowLength,
      undefined,
      new Map(),
      { values, indices },
      true,
      undefined,
    );
  }

  /**
   * Copies a traditional matrix into registry-owned blocks.
   *
   * @param arrays Values, indices and indptr; read, not kept.
   * @param options Shape, layout, registry and block strategy.
   * @returns The matrix; `release()` drops its references on the blocks.
   * @throws {InvalidArgumentError} For a bad shape, layout, strategy or array;
   * nothing is allocated.
   */
  static build<V extends AnyTypedArray>(
    arrays: CompressedArrays<V>,
    options: SparseMatrixOptions,
  ): SparseMatrix<V> {
    const shape = validateShape(options?.shape);
    validateOptionKeys(options, OPTION_KEYS, "SparseMatrix.build()");
    const layout = validateLayout(options.layout ?? "csr");
    const [primary, secondary] = layout === "csr"
      ? shape
      : [shape[1], shape[0]];
    const { values, indices, indptr: given, nnz } = validateArrays(
      arrays,
      primary,
      secondary,
      layout,
    );
    // The row pointers as validated: the allocator (the caller's code) runs
    // between the copies and may write the caller's arrays.
    const indptr = given.slice();
    const checked = validateBuildOptions(options);
    const size = blockElements(nnz, primary, checked.blockStrategy);
    const registry = checked.registry ?? defaultOwnershipRegistry();
    const allocation = checked.allocator === undefined
      ? undefined
      : { allocator: checked.allocator };
    const V = ctorOf(values);
    const I = ctorOf(indices);
    const vBytes = V.BYTES_PER_ELEMENT;
    const rowBlock = new Uint32Array(primary);
    const rowStart = new Uint32Array(primary);
    const rowLength = new Uint32Array(primary);
    const blocks: _Block<V>[] = [];
    const keys = new Map<number, Place>();
    try {
      let i = 0;
      while (i < primary) {
        // Take rows while the block stays within `size` (at least one row).
        const first = i;
        const base = indptr[first];
        let end = indptr[i + 1];
        i++;
        while (i < primary && indptr[i + 1] - base <= size) {
          end = indptr[i + 1];
          i++;
        }
        const count = end - base;
        const indexOffset = alignUp(count * vBytes, 4);
        let blockValues: V, blockIndices: IndexArray;
        if (count === 0) {
          // Rows without non-zeros need no memory and no record.
          blockValues = new V(0);
          blockIndices = new I(0);
        } else {
          const bytes = registry.newArray(
            "u8",
            indexOffset + count * 4,
            allocation,
          );
          const memory = bytes.buffer as ArrayBuffer;
          const at = bytes.byteOffset;
          keys.set(blocks.length, { memory, byteOffset: at });
          if (at % 8 !== 0) {
            throw new InvalidArgumentError(
              `Cannot build a block: the allocator returned byteOffset ${at}, not a multiple of 8`,
              { name: "allocator", value: at, limit: 8 },
            );
          }
          blockValues = new V(memory, at, count);
          blockIndices = new I(memory, at + indexOffset, count);
          if (lengthOf.call(values) < end || lengthOf.call(indices) < end) {
            throw new InvalidArgumentError(
              `Cannot build: values or indices lost their memory during build() (detached or shrunk, by the allocator?), they need ${end} elements`,
              { name: "arrays", value: arrays, limit: end },
            );
          }
          blockValues.set(values.subarray(base, end) as never);
          blockIndices.set(indices.subarray(base, end));
        }
        const b = blocks.length;
        blocks.push({ values: blockValues, indices: blockIndices });
        for (let r = first; r < i; r++) {
          rowBlock[r] = b;
          rowStart[r] = indptr[r] - base;
          rowLength[r] = indptr[r + 1] - indptr[r];
        }
      }
      // Inside the try: a leak detector that throws leaves nothing behind.
      return new SparseMatrix<V>(
        layout,
        shape,
        nnz,
        blocks,
        rowBlock,
        rowStart,
        rowLength,
        registry,
        keys,
        { values, indices },
        true,
        checked.leakDetector,
      );
    } catch (error) {
      for (const key of keys.values()) registry.tryUnregister(key);
      throw error;
    }
  }

  /** `csr` or `csc`. */
  get layout(): SparseLayout {
    return this.#layout;
  }

  /** `[rows, cols]`. */
  get shape(): [number, number] {
    return [this.#rows, this.#cols];
  }

  /** Number of rows. */
  get rows(): number {
    return this.#rows;
  }

  /** Number of columns. */
  get cols(): number {
    return this.#cols;
  }

  /** Number of primary rows: rows for CSR, columns for CSC. */
  get primaryLength(): number {
    return this.#rowLength.length;
  }

  /** Number of stored non-zeros. */
  get nnz(): number {
    if (this.#nnz < 0) {
      const lengths = this.#rowLength;
      let nnz = 0;
      for (let k = 0; k < lengths.length; k++) nnz += lengths[k];
      this.#nnz = nnz;
    }
    return this.#nnz;
  }

  /**
   * Number of registered blocks this matrix holds a reference on (blocks of
   * rows without non-zeros own no memory and are not counted); 1 for a
   * wrapped matrix.
   */
  get blockCount(): number {
    return this.#registry === undefined ? this.#blocks.length : this.#keys.size;
  }

  /** Whether this matrix owns its blocks through a registry. */
  get owned(): boolean {
    return this.#registry !== undefined;
  }

  /** Whether `release()` has run. */
  get released(): boolean {
    return this.#released;
  }

  /**
   * Number of non-zeros in primary row `i`.
   *
   * @param i Primary index.
   * @returns The length.
   * @throws {InvalidArgumentError} When `i` is out of range.
   */
  rowLength(i: number): number {
    this.#check(i, "rowLength");
    return this.#rowLength[i];
  }

  /**
   * Zero-copy views of primary row `i` (column `i` for CSC).
   *
   * @param i Primary index.
   * @returns The row's values and indices.
   * @throws {InvalidArgumentError} When `i` is out of range.
   * @throws {UseAfterFreeError} After `release()`.
   */
  row(i: number): SparseRow<V> {
    this.#check(i, "row");
    const block = this.#blocks[this.#rowBlock[i]];
    const s = this.#rowStart[i];
    const e = s + this.#rowLength[i];
    return {
      values: block.values.subarray(s, e) as V,
      indices: block.indices.subarray(s, e),
    };
  }

  /**
   * The row table itself, SCL's pointer arrays in JS form: row `i` is
   * `values[rowBlock[i]]` (and `indices[rowBlock[i]]`) from `rowStart[i]`
   * for `rowLength[i]` elements. For hot loops that cannot afford two views
   * per row. The arrays are this matrix's own: read them, never write them,
   * and stop using them after `release()`.
   *
   * @returns The block arrays and the per-row tables.
   * @throws {UseAfterFreeError} After `release()`.
   *
   * @example Sum every row without making views
   * ```ts
   * import { SparseMatrix } from "@allot/sparse";
   * import assert from "node:assert/strict";
   *
   * const m = SparseMatrix.wrap({
   *   values: new Float32Array([1, 2, 3]),
   *   indices: new Int32Array([0, 1, 1]),
   *   indptr: new Int32Array([0, 2, 3]),
   * }, { shape: [2, 2] });
   * const t = m.rowTable();
   * const sums = [0, 1].map((i) => {
   *   const v = t.values[t.rowBlock[i]];
   *   let s = 0;
   *   for (let k = t.rowStart[i]; k < t.rowStart[i] + t.rowLength[i]; k++) s += v[k];
   *   return s;
   * });
   * assert.deepEqual(sums, [3, 3]);
   * ```
   */
  rowTable(): SparseRowTable<V> {
    this.#live("rowTable");
    return {
      values: this.#blocks.map((b) => b.values),
      indices: this.#blocks.map((b) => b.indices),
      rowBlock: this.#rowBlock,
      rowStart: this.#rowStart,
      rowLength: this.#rowLength,
    };
  }

  /**
   * Calls `fn(row, col, value)` for every non-zero, primary row by primary
   * row.
   *
   * @param fn The callback.
   * @throws {UseAfterFreeError} After `release()`.
   */
  forEach(fn: (row: number, col: number, value: number) => void): void {
    this.#live("forEach");
    if (typeof fn !== "function") {
      throw new InvalidArgumentError(
        `Invalid callback: forEach() needs a function, received ${
          describeValue(fn)
        }`,
        { name: "fn", value: fn, limit: "function" },
      );
    }
    const csr = this.#layout === "csr";
    const n = this.#rowLength.length;
    const registry = this.#registry;
    for (let i = 0; i < n; i++) {
      const block = this.#blocks[this.#rowBlock[i]];
      const vals = block.values, idx = block.indices;
      const s = this.#rowStart[i];
      const e = s + this.#rowLength[i];
      for (let k = s; k < e; k++) {
        if (csr) fn(i, idx[k], vals[k] as number);
        else fn(idx[k], i, vals[k] as number);
        // The callback may have released the matrix (or disposed its
        // registry): stop before reading freed blocks.
        if (this.#released || (registry !== undefined && registry.disposed)) {
          this.#live("forEach");
        }
      }
    }
  }

  /**
   * Iterates over every non-zero as `[row, col, value]`.
   *
   * @returns An iterator.
   * @throws {UseAfterFreeError} After `release()`.
   */
  *entries(): IterableIterator<[number, number, number]> {
    this.#live("entries");
    const csr = this.#layout === "csr";
    const n = this.#rowLength.length;
    const registry = this.#registry;
    for (let i = 0; i < n; i++) {
      const block = this.#blocks[this.#rowBlock[i]];
      const s = this.#rowStart[i];
      const e = s + this.#rowLength[i];
      for (let k = s; k < e; k++) {
        const c = block.indices[k];
        const v = block.values[k] as number;
        yield csr ? [i, c, v] : [c, i, v];
        // Released between two steps: stop before reading freed blocks.
        if (this.#released || (registry !== undefined && registry.disposed)) {
          this.#live("entries");
        }
      }
    }
  }

  /**
   * The primary rows `[start, end)` (columns for CSC) as a new matrix that
   * shares this one's blocks: no value is copied; each block used gets one
   * more alias reference.
   *
   * @param start First primary index.
   * @param end One past the last primary index.
   * @returns The view; release it like any matrix.
   * @throws {InvalidArgumentError} When the range is out of bounds.
   * @throws {UseAfterFreeError} After `release()`.
   */
  slice(start: number, end: number = this.primaryLength): SparseMatrix<V> {
    this.#live("slice");
    const n = this.primaryLength;
    validateInteger(start, 0, n, "start");
    validateInteger(end, start, n, "end");
    const rowBlock = this.#rowBlock.subarray(start, end);
    const rowStart = this.#rowStart.subarray(start, end);
    const rowLength = this.#rowLength.subarray(start, end);
    return this.#derive(rowBlock, rowStart, rowLength, this.#monotonic);
  }

  /**
   * The given primary rows, in the given order (repeats allowed), as a new
   * matrix sharing this one's blocks.
   *
   * @param rows Primary indices.
   * @returns The view.
   * @throws {InvalidArgumentError} When an index is out of range.
   * @throws {UseAfterFreeError} After `release()`.
   */
  select(rows: ArrayLike<number>): SparseMatrix<V> {
    this.#live("select");
    const n = this.primaryLength;
    const m = typeof rows === "object" && rows !== null
      ? rows.length
      : undefined;
    if (!Number.isSafeInteger(m) || (m as number) < 0) {
      throw new InvalidArgumentError(
        `Invalid rows: select() needs an array of indices, received ${
          describeValue(rows)
        }`,
        { name: "rows", value: rows, limit: "ArrayLike<number>" },
      );
    }
    validateInteger(m as number, 0, MAX_DIM, "rows.length");
    // Each index read once: a getter cannot change it after the check. A
    // growing array: a huge claimed length fails on its first missing index,
    // not on allocating for all of them.
    const picked: number[] = [];
    for (let k = 0; k < (m as number); k++) {
      picked.push(validateInteger(rows[k], 0, n - 1, `rows[${k}]`));
    }
    const rowBlock = new Uint32Array(picked.length);
    const rowStart = new Uint32Array(picked.length);
    const rowLength = new Uint32Array(picked.length);
    for (let k = 0; k < picked.length; k++) {
      const r = picked[k];
      rowBlock[k] = this.#rowBlock[r];
      rowStart[k] = this.#rowStart[r];
      rowLength[k] = this.#rowLength[r];
    }
    return this.#derive(rowBlock, rowStart, rowLength, false);
  }

  /**
   * The transpose, without copying: a CSR matrix of shape `[r, c]` read as
   * the CSC matrix of shape `[c, r]` over the same blocks (and CSC as CSR).
   * Each block used gets one more alias reference.
   *
   * @returns The view; release it like any matrix.
   * @throws {UseAfterFreeError} After `release()`.
   *
   * @example
   * ```ts
   * import { SparseMatrix } from "@allot/sparse";
   * import assert from "node:assert/strict";
   *
   * using m = SparseMatrix.build({
   *   values: new Float32Array([1, 2, 3]),
   *   indices: new Int32Array([2, 0, 1]),
   *   indptr: new Int32Array([0, 1, 3]),
   * }, { shape: [2, 3] });
   * using t = m.transpose();
   * assert.equal(t.layout, "csc");
   * assert.deepEqual(t.shape, [3, 2]);
   * assert.deepEqual([...t.entries()], [[2, 0, 1], [0, 1, 2], [1, 1, 3]]);
   * ```
   */
  transpose(): SparseMatrix<V> {
    this.#live("transpose");
    return this.#derive(
      this.#rowBlock,
      this.#rowStart,
      this.#rowLength,
      this.#monotonic,
      this.#layout === "csr" ? "csc" : "csr",
    );
  }

  /**
   * The same matrix in `layout` (CSR to CSC or back), copied into new
   * blocks of `options.registry`: a counting sort over the non-zeros,
   * O(nnz + rows + cols), stable, so each new primary row lists its
   * secondary indices in increasing order when the old rows were in order.
   * With the layout it already has, a compacted copy.
   *
   * @param layout The layout wanted.
   * @param options Registry, allocator, block strategy, leak detector.
   * @returns A new matrix that owns its blocks.
   * @throws {InvalidArgumentError} For a bad layout or option; nothing is
   * allocated.
   * @throws {UseAfterFreeError} After `release()`.
   *
   * @example CSR to CSC
   * ```ts
   * import { SparseMatrix } from "@allot/sparse";
   * import assert from "node:assert/strict";
   *
   * using m = SparseMatrix.build({
   *   values: new Float64Array([1, 2, 3]),
   *   indices: new Int32Array([2, 0, 2]),
   *   indptr: new Int32Array([0, 1, 3]),
   * }, { shape: [2, 3] });
   * using c = m.toLayout("csc");
   * const { values, indices, indptr } = c.toContiguous();
   * assert.deepEqual([...indptr], [0, 1, 1, 3]); // columns 0, 1, 2
   * assert.deepEqual([...indices], [1, 0, 1]); // their rows
   * assert.deepEqual([...values], [2, 1, 3]);
   * ```
   */
  toLayout(
    layout: SparseLayout,
    options: ToLayoutOptions = {},
  ): SparseMatrix<V> {
    this.#live("toLayout");
    const target = validateLayout(layout);
    validateObject(options, "options");
    validateOptionKeys(options, TO_LAYOUT_KEYS, "SparseMatrix.toLayout()");
    const shape: [number, number] = [this.#rows, this.#cols];
    if (target === this.#layout) {
      return SparseMatrix.build(this.toContiguous(), {
        ...options,
        shape,
        layout: target,
      });
    }
    const n = this.primaryLength;
    const m = target === "csr" ? this.#rows : this.#cols;
    const nnz = this.nnz;
    const wide = nnz > MAX_DIM;
    const indptr = wide ? new Float64Array(m + 1) : new Int32Array(m + 1);
    const rowBlock = this.#rowBlock, rowStart = this.#rowStart;
    const rowLength = this.#rowLength, blocks = this.#blocks;
    // count per new primary row, then prefix sums
    for (let i = 0; i < n; i++) {
      const idx = blocks[rowBlock[i]].indices;
      const s = rowStart[i], e = s + rowLength[i];
      for (let k = s; k < e; k++) indptr[idx[k] + 1]++;
    }
    for (let j = 0; j < m; j++) indptr[j + 1] += indptr[j];
    const values = new (ctorOf(this.#template.values))(nnz);
    const indices = new Int32Array(nnz);
    const next = indptr.slice(0, m);
    for (let i = 0; i < n; i++) {
      const block = blocks[rowBlock[i]];
      const idx = block.indices, vals = block.values;
      const s = rowStart[i], e = s + rowLength[i];
      for (let k = s; k < e; k++) {
        const at = next[idx[k]]++;
        values[at] = vals[k];
        indices[at] = i;
      }
    }
    return SparseMatrix.build({ values, indices, indptr }, {
      ...options,
      shape,
      layout: target,
    });
  }

  /**
   * Copies into traditional contiguous arrays (SCL's `to_contiguous_arrays`),
   * for libraries that need them. Rows adjacent in one block are copied in
   * one `set`.
   *
   * @param options Where to allocate.
   * @returns Fresh values, indices and indptr (`Int32Array` while nnz fits,
   * `Float64Array` beyond).
   * @throws {UseAfterFreeError} After `release()`.
   */
  toContiguous(options: ToContiguousOptions = {}): CompressedArrays<V> {
    this.#live("toContiguous");
    validateObject(options, "options");
    validateOptionKeys(options, ["registry"], "SparseMatrix.toContiguous()");
    const registry = options.registry;
    if (registry !== undefined && !(registry instanceof OwnershipRegistry)) {
      throw new InvalidArgumentError(
        `Invalid registry: expected an OwnershipRegistry, received ${
          describeValue(registry)
        }`,
        { name: "registry", value: registry, limit: "OwnershipRegistry" },
      );
    }
    const n = this.primaryLength;
    const nnz = this.nnz;
    const VC = ctorOf(this.#template.values);
    const IC = ctorOf(this.#template.indices);
    const wide = nnz > MAX_DIM;
    let values: V, indices: IndexArray, indptr: IndptrArray;
    if (registry !== undefined) {
      // All three or none: a failure unregisters what was allocated.
      const made: ArrayBufferView[] = [];
      try {
        values = registry.newArray(
          dtypeOf(this.#template.values)!,
          nnz,
        ) as unknown as V;
        made.push(values);
        indices = registry.newArray(IC === Int32Array ? "i32" : "u32", nnz);
        made.push(indices);
        indptr = registry.newArray(wide ? "f64" : "i32", n + 1);
      } catch (error) {
        for (const a of made) {
          registry.tryUnregister({
            memory: a.buffer,
            byteOffset: a.byteOffset,
          });
        }
        throw error;
      }
    } else {
      values = new VC(nnz);
      indices = new IC(nnz);
      indptr = wide ? new Float64Array(n + 1) : new Int32Array(n + 1);
    }
    const rowBlock = this.#rowBlock, rowStart = this.#rowStart;
    const rowLength = this.#rowLength, blocks = this.#blocks;
    let offset = 0;
    let i = 0;
    indptr[0] = 0;
    while (i < n) {
      // A run: consecutive rows stored back to back in one block.
      const b = rowBlock[i];
      const s = rowStart[i];
      let e = s + rowLength[i];
      indptr[i + 1] = offset + rowLength[i];
      i++;
      while (i < n && rowBlock[i] === b && rowStart[i] === e) {
        e += rowLength[i];
        indptr[i + 1] = offset + (e - s);
        i++;
      }
      if (e > s) {
        const block = blocks[b];
        values.set(block.values.subarray(s, e) as never, offset);
        indices.set(block.indices.subarray(s, e), offset);
      }
      offset += e - s;
    }
    return { values, indices, indptr };
  }

  /**
   * Drops this matrix's references on its blocks (freeing blocks no other
   * matrix uses). A wrapped matrix only becomes unusable.
   *
   * @throws {DoubleFreeError} When called twice.
   */
  release(): void {
    if (this.#released) {
      throw new DoubleFreeError(
        `Cannot release a ${this.#rows}x${this.#cols} SparseMatrix: it was already released`,
      );
    }
    this.#released = true;
    this.#detector?.forget(this);
    const registry = this.#registry;
    if (registry === undefined || registry.disposed) return;
    for (const key of this.#keys.values()) registry.unregister(key);
  }

  /** Releases unless already released, for `using`. */
  [Symbol.dispose](): void {
    if (!this.#released) this.release();
  }

  /**
   * A short description such as `SparseMatrix(csr 3x3, nnz 5, 1 block)`.
   *
   * @returns The description.
   */
  toString(): string {
    return `SparseMatrix(${this.#layout} ${this.#rows}x${this.#cols}, nnz ${this.nnz}, ${this.blockCount} block${
      this.blockCount === 1 ? "" : "s"
    }${this.#released ? ", released" : ""})`;
  }

  #derive(
    rowBlock: Uint32Array,
    rowStart: Uint32Array,
    rowLength: Uint32Array,
    monotonic: boolean,
    layout: SparseLayout = this.#layout,
  ): SparseMatrix<V> {
    const m = rowLength.length;
    // the secondary length stays; a flipped layout swaps the shape
    const secondary = this.#layout === "csr" ? this.#cols : this.#rows;
    const shape: [number, number] = layout === "csr"
      ? [m, secondary]
      : [secondary, m];
    const registry = this.#registry;
    const keys = new Map<number, Place>();
    if (registry !== undefined && m > 0) {
      // The blocks used: a range for rows in block order, else marked.
      const used: number[] = [];
      if (monotonic) {
        for (let b = rowBlock[0]; b <= rowBlock[m - 1]; b++) used.push(b);
      } else {
        const mark = new Uint8Array(this.#blocks.length);
        for (let k = 0; k < m; k++) {
          const b = rowBlock[k];
          if (mark[b] === 0) {
            mark[b] = 1;
            used.push(b);
          }
        }
      }
      // One more reference per block, through the block's own place.
      try {
        for (const b of used) {
          const place = this.#keys.get(b);
          if (place === undefined) continue; // an empty block owns nothing
          registry.addAlias(place, place);
          keys.set(b, place);
        }
      } catch (error) {
        for (const place of keys.values()) registry.unregister(place);
        throw error;
      }
    }
    try {
      return new SparseMatrix<V>(
        layout,
        shape,
        -1,
        this.#blocks,
        rowBlock,
        rowStart,
        rowLength,
        registry,
        keys,
        this.#template,
        monotonic,
        this.#detector,
      );
    } catch (error) {
      // A leak detector that throws: drop the references just taken.
      if (registry !== undefined) {
        for (const place of keys.values()) registry.unregister(place);
      }
      throw error;
    }
  }

  #live(what: string): void {
    if (this.#released) {
      throw new UseAfterFreeError(
        `Cannot ${what} ${this}: the matrix was released`,
      );
    }
    // The registry owns the blocks' memory: once disposed, it is gone.
    if (this.#registry !== undefined && this.#registry.disposed) {
      throw new UseAfterFreeError(
        `Cannot ${what} ${this}: its registry was disposed`,
      );
    }
  }

  #check(i: number, what: string): void {
    this.#live(what);
    const n = this.#rowLength.length;
    if (!Number.isInteger(i) || i < 0 || i >= n) {
      throw new InvalidArgumentError(
        `Invalid index: ${what}() needs an integer in [0, ${n}), received ${
          describeValue(i)
        }`,
        { name: "index", value: i, limit: [0, n] },
      );
    }
  }
}
