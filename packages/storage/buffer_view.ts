/**
 * {@linkcode BufferView}: the layout of a strided view (shape, strides,
 * offset, length) and its zero-copy operations, plus stride helpers.
 *
 * @module
 */

import {
  alignUp,
  describeValue,
  InvalidArgumentError,
  optionOr,
  validateOptionKeys,
} from "@allot/core";
import { _fmt, ShapeError } from "./errors.ts";

/** A shape or strides list, in elements. */
export type Shape = readonly number[];

/** The most dimensions a view may have. */
export const MAX_RANK = 64;

/** Options of the {@linkcode BufferView} constructor. */
export interface BufferViewOptions {
  /**
   * Strides in elements, one per dimension; may be zero or negative.
   *
   * @default {row-major strides of the shape}
   */
  strides?: Shape;
  /**
   * Storage index of the element at index 0 in every dimension.
   *
   * @default {0}
   */
  offset?: number;
}

/** Options of {@linkcode BufferView.slice}. Indices are never wrapped. */
export interface SliceOptions {
  /**
   * First index taken.
   *
   * @default {0 for a positive step, size - 1 for a negative one}
   */
  start?: number;
  /**
   * Index where taking stops (exclusive). With a negative step, `-1` means
   * "through index 0".
   *
   * @default {size for a positive step, -1 for a negative one}
   */
  stop?: number;
  /**
   * Distance between taken indices; not zero.
   *
   * @default {1}
   */
  step?: number;
}

let trusted = false;

/** The keys of {@linkcode BufferViewOptions} and {@linkcode SliceOptions}. */
const VIEW_KEYS: readonly string[] = ["strides", "offset"];
const SLICE_KEYS: readonly string[] = ["start", "stop", "step"];

let _hasShape: (value: object) => boolean;

/** Builds a view from arrays already checked (and owned) by the caller. */
function make(shape: number[], strides: number[], offset: number): BufferView {
  trusted = true;
  try {
    return new BufferView(shape, { strides, offset });
  } finally {
    trusted = false;
  }
}

/**
 * The layout of a strided view into a storage: four facts, `shape`,
 * `strides` (elements, may be zero or negative), `offset` (elements) and the
 * derived `length`. Element `[i0, i1, ...]` lives at storage index
 * `offset + i0 * strides[0] + i1 * strides[1] + ...`.
 *
 * A view is immutable and knows nothing about where its bytes live. Every
 * operation (`reshape`, `transpose`, `permute`, `slice`, `squeeze`,
 * `unsqueeze`, `broadcastTo`) is O(rank) arithmetic that returns a new view of
 * the same storage. Layout facts (`length`, `isContiguous`,
 * `isFortranContiguous`, the index range) are computed once, in the
 * constructor. Getters hand out copies of `shape` and `strides`.
 *
 * Rank 0 (a scalar, shape `[]`) works everywhere.
 *
 * @example Transpose, slice and reshape without copying
 * ```ts
 * import { BufferView } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * const view = BufferView.contiguous([2, 3]);
 * const t = view.transpose();
 * assert.deepEqual(t.shape, [3, 2]);
 * assert.deepEqual(t.strides, [1, 3]);
 * assert.equal(t.isContiguous, false);
 * assert.equal(t.isFortranContiguous, true);
 *
 * const reversed = view.slice(1, { step: -1 });
 * assert.equal(reversed.offset, 2);
 * assert.deepEqual(reversed.strides, [3, -1]);
 * assert.equal(reversed.index([0, 0]), 2);
 *
 * assert.deepEqual(view.reshape([3, -1]).shape, [3, 2]);
 * ```
 */
export class BufferView {
  #shape: number[];
  #strides: number[];
  #offset: number;
  #length: number;
  #minIndex: number;
  #maxIndex: number;
  #contiguous: boolean;
  #fortran: boolean;

  static {
    _hasShape = (value) => #shape in value;
  }

  /**
   * Creates a view and checks it.
   *
   * @param shape Sizes of the dimensions: non-negative integers, at most
   * {@linkcode MAX_RANK} of them, whose product is a safe integer.
   * @param options Strides and offset.
   * @throws {ShapeError} When the shape or strides are invalid, or the view
   * reaches a negative storage index.
   * @throws {InvalidArgumentError} When the offset is not a non-negative
   * integer.
   */
  constructor(shape: Shape, options: BufferViewOptions = {}) {
    if (trusted) {
      trusted = false;
      this.#shape = shape as number[];
      this.#strides = options.strides as number[];
      this.#offset = options.offset as number;
    } else {
      _checkOptions(options, "view options", VIEW_KEYS, "BufferView");
      const s = validateShape(shape);
      const strides = options.strides;
      const st = strides === undefined
        ? rowMajorStrides(s)
        : validateStrides(strides, s);
      const offset: unknown = optionOr(options.offset, 0);
      if (!Number.isSafeInteger(offset) || (offset as number) < 0) {
        throw new InvalidArgumentError(
          `Invalid view offset: must be a non-negative integer, received ${
            describeValue(offset)
          }`,
          { name: "offset", value: offset, limit: 0 },
        );
      }
      this.#shape = s;
      this.#strides = st;
      // + 0 turns -0 into 0.
      this.#offset = (offset as number) + 0;
    }
    const shp = this.#shape, str = this.#strides, rank = shp.length;
    let length = 1, lo = this.#offset, hi = this.#offset;
    for (let i = 0; i < rank; i++) {
      length *= shp[i];
      const reach = str[i] * (shp[i] - 1);
      if (reach < 0) lo += reach;
      else hi += reach;
    }
    this.#length = length;
    this.#minIndex = length === 0 ? this.#offset : lo;
    this.#maxIndex = length === 0 ? this.#offset - 1 : hi;
    if (length > 0 && (lo < 0 || !Number.isSafeInteger(hi))) {
      throw new ShapeError(
        `Invalid view of shape ${_fmt(shp)} with strides ${
          _fmt(str)
        } and offset ${this.#offset}: it reaches storage index ${
          lo < 0 ? lo : hi
        }, outside [0, ${Number.MAX_SAFE_INTEGER}]`,
        {
          name: "strides",
          value: [...str],
          limit: [0, Number.MAX_SAFE_INTEGER],
          shape: shp,
          strides: str,
        },
      );
    }
    let c = true, f = true;
    if (length > 1) {
      let expected = 1;
      for (let i = rank - 1; i >= 0; i--) {
        if (shp[i] === 1) continue;
        if (str[i] !== expected) {
          c = false;
          break;
        }
        expected *= shp[i];
      }
      expected = 1;
      for (let i = 0; i < rank; i++) {
        if (shp[i] === 1) continue;
        if (str[i] !== expected) {
          f = false;
          break;
        }
        expected *= shp[i];
      }
    }
    this.#contiguous = c;
    this.#fortran = f;
  }

  /**
   * A row-major (C order) view of `shape` starting at `offset`.
   *
   * @param shape The shape.
   * @param offset Storage index of the first element; 0 by default.
   * @returns The view.
   * @throws {ShapeError} When the shape is invalid.
   */
  static contiguous(shape: Shape, offset = 0): BufferView {
    return new BufferView(shape, { offset });
  }

  /**
   * A column-major (Fortran order) view of `shape` starting at `offset`.
   *
   * @param shape The shape.
   * @param offset Storage index of the first element; 0 by default.
   * @returns The view.
   * @throws {ShapeError} When the shape is invalid.
   */
  static fortran(shape: Shape, offset = 0): BufferView {
    // Validate (read) the shape once, so the strides match the sizes kept.
    const s = validateShape(shape);
    return new BufferView(s, { strides: columnMajorStrides(s), offset });
  }

  /** Sizes of the dimensions (a fresh copy). */
  get shape(): number[] {
    return this.#shape.slice();
  }

  /** Strides in elements (a fresh copy). */
  get strides(): number[] {
    return this.#strides.slice();
  }

  /** Storage index of the first element (index 0 in every dimension). */
  get offset(): number {
    return this.#offset;
  }

  /** Number of elements: the product of the shape (1 for rank 0). */
  get length(): number {
    return this.#length;
  }

  /** Number of dimensions. */
  get rank(): number {
    return this.#shape.length;
  }

  /**
   * Whether the elements lie in row-major order with no gaps (sizes of 1 and
   * empty views do not break it). The offset does not matter.
   */
  get isContiguous(): boolean {
    return this.#contiguous;
  }

  /** Whether the elements lie in column-major order with no gaps. */
  get isFortranContiguous(): boolean {
    return this.#fortran;
  }

  /** The lowest storage index the view reaches (`offset` when empty). */
  get minIndex(): number {
    return this.#minIndex;
  }

  /** The highest storage index the view reaches (`offset - 1` when empty). */
  get maxIndex(): number {
    return this.#maxIndex;
  }

  /**
   * How many elements a storage needs to hold this view: `maxIndex + 1`, or 0
   * for an empty view.
   */
  get requiredLength(): number {
    return this.#length === 0 ? 0 : this.#maxIndex + 1;
  }

  /**
   * Size of dimension `dim`; negative dims count from the end.
   *
   * @param dim The dimension.
   * @returns Its size.
   * @throws {ShapeError} When `dim` is out of range.
   */
  size(dim: number): number {
    return this.#shape[this.#dim(dim, "size")];
  }

  /**
   * Stride of dimension `dim`; negative dims count from the end.
   *
   * @param dim The dimension.
   * @returns Its stride in elements.
   * @throws {ShapeError} When `dim` is out of range.
   */
  stride(dim: number): number {
    return this.#strides[this.#dim(dim, "stride")];
  }

  /**
   * The storage index of the element at `indices`.
   *
   * @param indices One index per dimension, each in `[0, size)`.
   * @returns The storage index.
   * @throws {ShapeError} When the count or any index is out of range.
   *
   * @example Find the storage index of an element
   * ```ts
   * import { BufferView } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * const view = new BufferView([2, 3], { strides: [1, 2], offset: 4 });
   * assert.equal(view.index([1, 2]), 4 + 1 + 4);
   * assert.throws(() => view.index([2, 0]), /index 2 at dim 0/);
   * ```
   */
  index(indices: readonly number[]): number {
    const shp = this.#shape, str = this.#strides;
    if (!Array.isArray(indices) || indices.length !== shp.length) {
      throw this.#error(
        `Cannot index a view of shape ${
          _fmt(shp)
        }: expected ${shp.length} indices, received ${
          Array.isArray(indices) ? _fmt(indices) : describeValue(indices)
        }`,
        "indices",
        indices,
        shp.length,
      );
    }
    let at = this.#offset;
    for (let i = 0; i < shp.length; i++) {
      const k = indices[i];
      if (!Number.isInteger(k) || k < 0 || k >= shp[i]) {
        throw this.#error(
          `Cannot index a view of shape ${_fmt(shp)}: index ${
            describeValue(k)
          } at dim ${i} is outside [0, ${shp[i]})`,
          "indices",
          [...indices],
          shp[i],
        );
      }
      at += k * str[i];
    }
    return at;
  }

  /**
   * A view with a new shape over the same elements, without copying. Works
   * whenever the dims being merged or split are laid out contiguously with
   * respect to each other (always for a contiguous view). One size may be
   * `-1`: it is inferred.
   *
   * @param shape The new shape; its product must equal `length`.
   * @returns The reshaped view.
   * @throws {ShapeError} When the element counts differ, the shape is
   * invalid, or the layout cannot be expressed without a copy.
   *
   * @example Reshape a stepped view without copying
   * ```ts
   * import { BufferView } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * const v = BufferView.contiguous([4, 6]).slice(1, { step: 2 });
   * assert.deepEqual(v.reshape([2, 2, 3]).strides, [12, 6, 2]);
   * assert.throws(() => v.transpose().reshape([12]), /without copying/);
   * ```
   */
  reshape(shape: Shape): BufferView {
    const target = this.#resolveReshape(shape);
    if (this.#length === 0 || this.#contiguous) {
      return make(target, rowMajorStrides(target), this.#offset);
    }
    const strides = this.#noCopyStrides(target);
    if (strides === undefined) {
      throw this.#error(
        `Cannot reshape a view of shape ${_fmt(this.#shape)} with strides ${
          _fmt(this.#strides)
        } to ${
          _fmt(target)
        } without copying: the dims to merge are not contiguous with each other; call contiguous() first`,
        "shape",
        target,
      );
    }
    return make(target, strides, this.#offset);
  }

  /**
   * Swaps two dimensions; by default the last two. A view of rank below 2
   * is returned unchanged when no dims are given.
   *
   * @param dim0 First dimension; negative counts from the end.
   * @param dim1 Second dimension; negative counts from the end.
   * @returns The transposed view.
   * @throws {ShapeError} When a dim is out of range.
   */
  transpose(dim0?: number, dim1?: number): BufferView {
    const rank = this.#shape.length;
    if (dim0 === undefined && dim1 === undefined && rank < 2) return this;
    const a = this.#dim(dim0 ?? rank - 2, "transpose");
    const b = this.#dim(dim1 ?? rank - 1, "transpose");
    const shape = this.#shape.slice(), strides = this.#strides.slice();
    shape[a] = this.#shape[b];
    shape[b] = this.#shape[a];
    strides[a] = this.#strides[b];
    strides[b] = this.#strides[a];
    return make(shape, strides, this.#offset);
  }

  /**
   * Reorders the dimensions: dimension `i` of the result is dimension
   * `axes[i]` of this view.
   *
   * @param axes A permutation of `[0, rank)`.
   * @returns The permuted view.
   * @throws {ShapeError} When `axes` is not a permutation of the dims.
   *
   * @example Move the last axis first
   * ```ts
   * import { BufferView } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * const v = BufferView.contiguous([2, 3, 4]).permute([2, 0, 1]);
   * assert.deepEqual(v.shape, [4, 2, 3]);
   * assert.deepEqual(v.strides, [1, 12, 4]);
   * assert.throws(() => v.permute([0, 0, 1]), /not a permutation/);
   * ```
   */
  permute(axes: readonly number[]): BufferView {
    const rank = this.#shape.length;
    const seen = new Array<boolean>(rank).fill(false);
    // Read each axis once (a proxy could answer differently the second time).
    const list = Array.isArray(axes) && axes.length === rank
      ? Array.from({ length: rank }, (_, i) => axes[i])
      : undefined;
    const ok = list !== undefined &&
      list.every((a) =>
        Number.isInteger(a) && a >= 0 && a < rank && !seen[a] &&
        (seen[a] = true)
      );
    if (!ok) {
      throw this.#error(
        `Cannot permute a view of shape ${_fmt(this.#shape)} with strides ${
          _fmt(this.#strides)
        }: axes ${
          Array.isArray(axes) ? _fmt(axes) : describeValue(axes)
        } are not a permutation of [0, ${rank})`,
        "axes",
        list ?? axes,
        rank,
      );
    }
    const shape = new Array<number>(rank), strides = new Array<number>(rank);
    for (let i = 0; i < rank; i++) {
      shape[i] = this.#shape[list[i]];
      strides[i] = this.#strides[list[i]];
    }
    return make(shape, strides, this.#offset);
  }

  /**
   * Takes every `step`-th index of dimension `dim` from `start` up to (not
   * including) `stop`. A negative step walks backwards: the offset moves to
   * `start` and the stride changes sign. Indices are never wrapped.
   *
   * @param dim The dimension; negative counts from the end.
   * @param options Start, stop and step.
   * @returns The sliced view (possibly empty).
   * @throws {ShapeError} When `dim`, `start` or `stop` is out of range or
   * `step` is zero or not an integer.
   *
   * @example Slice forwards and backwards
   * ```ts
   * import { BufferView } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * const v = BufferView.contiguous([10]);
   * assert.deepEqual(v.slice(0, { start: 1, stop: 8, step: 3 }).shape, [3]);
   * const back = v.slice(0, { start: 8, stop: 1, step: -3 });
   * assert.deepEqual([back.offset, back.length, back.stride(0)], [8, 3, -3]);
   * assert.throws(() => v.slice(0, { stop: 11 }), /stop 11/);
   * ```
   */
  slice(dim: number, options: SliceOptions = {}): BufferView {
    const d = this.#dim(dim, "slice");
    _checkOptions(options, "slice options");
    // (inline: slice is a hot path; a misspelt `end` did nothing, silently)
    let known = true;
    try {
      for (const key in options) {
        if (key !== "start" && key !== "stop" && key !== "step") {
          known = false;
          break;
        }
      }
    } catch {
      known = false; // keys that cannot be read: refused (typed) just below
    }
    if (!known) validateOptionKeys(options, SLICE_KEYS, "BufferView.slice()");
    const n = this.#shape[d];
    const step = optionOr(options.step, 1);
    if (!Number.isSafeInteger(step) || step === 0) {
      throw this.#error(
        `Cannot slice dim ${d} of a view of shape ${
          _fmt(this.#shape)
        }: step must be a non-zero integer, received ${describeValue(step)}`,
        "step",
        step,
      );
    }
    const lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
    const start = optionOr(options.start, step > 0 ? 0 : n - 1);
    const stop = optionOr(options.stop, step > 0 ? n : -1);
    for (const [name, value] of [["start", start], ["stop", stop]] as const) {
      if (!Number.isInteger(value) || value < lo || value > hi) {
        throw this.#error(
          `Cannot slice dim ${d} of a view of shape ${
            _fmt(this.#shape)
          } with step ${step}: ${name} ${
            describeValue(value)
          } is outside [${lo}, ${hi}]`,
          name,
          value,
          [lo, hi],
        );
      }
    }
    const span = step > 0 ? stop - start : start - stop;
    const count = span <= 0 ? 0 : Math.ceil(span / Math.abs(step));
    const shape = this.#shape.slice(), strides = this.#strides.slice();
    shape[d] = count;
    strides[d] = this.#strides[d] * step;
    const offset = count === 0
      ? this.#offset
      : this.#offset + start * this.#strides[d];
    return make(shape, strides, offset);
  }

  /**
   * Removes dimensions of size 1: the given one, or all of them.
   *
   * @param dim A dimension of size 1; negative counts from the end.
   * @returns The squeezed view.
   * @throws {ShapeError} When `dim` is out of range or its size is not 1.
   */
  squeeze(dim?: number): BufferView {
    if (dim === undefined) {
      const shape: number[] = [], strides: number[] = [];
      for (let i = 0; i < this.#shape.length; i++) {
        if (this.#shape[i] !== 1) {
          shape.push(this.#shape[i]);
          strides.push(this.#strides[i]);
        }
      }
      return make(shape, strides, this.#offset);
    }
    const d = this.#dim(dim, "squeeze");
    if (this.#shape[d] !== 1) {
      throw this.#error(
        `Cannot squeeze dim ${d} of a view of shape ${
          _fmt(this.#shape)
        }: its size is ${this.#shape[d]}, not 1`,
        "dim",
        dim,
        1,
      );
    }
    const shape = this.#shape.slice(), strides = this.#strides.slice();
    shape.splice(d, 1);
    strides.splice(d, 1);
    return make(shape, strides, this.#offset);
  }

  /**
   * Inserts a dimension of size 1 before dimension `dim`.
   *
   * @param dim Position in `[-(rank + 1), rank]`; negative counts from the end.
   * @returns The view with one more dimension.
   * @throws {ShapeError} When `dim` is out of range or the rank would exceed
   * {@linkcode MAX_RANK}.
   */
  unsqueeze(dim: number): BufferView {
    const rank = this.#shape.length;
    const d = Number.isInteger(dim) && dim < 0 ? dim + rank + 1 : dim;
    if (!Number.isInteger(d) || d < 0 || d > rank || rank >= MAX_RANK) {
      throw this.#error(
        `Cannot unsqueeze a view of shape ${_fmt(this.#shape)} at dim ${
          describeValue(dim)
        }: ${
          rank >= MAX_RANK
            ? `rank would exceed ${MAX_RANK}`
            : `must be in [${-rank - 1}, ${rank}]`
        }`,
        "dim",
        dim,
        [-rank - 1, rank],
      );
    }
    const shape = this.#shape.slice(), strides = this.#strides.slice();
    const stride = d < rank ? this.#strides[d] * this.#shape[d] : 1;
    shape.splice(d, 0, 1);
    strides.splice(d, 0, stride);
    return make(shape, strides, this.#offset);
  }

  /**
   * Broadcasts to `shape` with NumPy's rules: dims are aligned from the
   * right, new leading dims and dims of size 1 get stride 0.
   *
   * @param shape The target shape.
   * @returns The broadcast view (elements repeat; do not write through it).
   * @throws {ShapeError} When the shapes are not compatible.
   *
   * @example Broadcast a row
   * ```ts
   * import { BufferView } from "@allot/storage";
   * import assert from "node:assert/strict";
   *
   * const row = BufferView.contiguous([1, 3]);
   * const b = row.broadcastTo([2, 4, 3]);
   * assert.deepEqual(b.strides, [0, 0, 1]);
   * assert.throws(() => row.broadcastTo([2]), /Cannot broadcast/);
   * ```
   */
  broadcastTo(shape: Shape): BufferView {
    const target = validateShape(shape, "broadcast shape");
    const rank = this.#shape.length, lead = target.length - rank;
    const strides = new Array<number>(target.length).fill(0);
    let ok = lead >= 0;
    for (let i = 0; ok && i < rank; i++) {
      const from = this.#shape[i], to = target[lead + i];
      if (from === to) strides[lead + i] = this.#strides[i];
      else if (from !== 1) ok = false;
    }
    if (!ok) {
      throw this.#error(
        `Cannot broadcast a view of shape ${_fmt(this.#shape)} with strides ${
          _fmt(this.#strides)
        } to ${_fmt(target)}: sizes must match or be 1, aligned from the right`,
        "shape",
        target,
      );
    }
    return make(target, strides, this.#offset);
  }

  /**
   * Returns whether `other` has the same shape, strides and offset.
   *
   * @param other Another view.
   * @returns `true` for equal layouts.
   */
  equals(other: BufferView): boolean {
    _checkView(other, "other");
    return other.#offset === this.#offset &&
      sameList(other.#shape, this.#shape) &&
      sameList(other.#strides, this.#strides);
  }

  /**
   * Returns whether `other` has the same shape (strides may differ).
   *
   * @param other Another view.
   * @returns `true` for equal shapes.
   */
  sameShape(other: BufferView): boolean {
    _checkView(other, "other");
    return sameList(other.#shape, this.#shape);
  }

  /**
   * Short description such as `BufferView(shape=[2, 3], strides=[3, 1],
   * offset=0)`.
   *
   * @returns The description.
   */
  toString(): string {
    return `BufferView(shape=${_fmt(this.#shape)}, strides=${
      _fmt(this.#strides)
    }, offset=${this.#offset})`;
  }

  /**
   * Plain form: shape, strides, offset.
   *
   * @returns A JSON-ready object.
   */
  toJSON(): { shape: number[]; strides: number[]; offset: number } {
    return { shape: this.shape, strides: this.strides, offset: this.#offset };
  }

  #dim(dim: number, what: string): number {
    const rank = this.#shape.length;
    const d = Number.isInteger(dim) && dim < 0 ? dim + rank : dim;
    if (!Number.isInteger(d) || d < 0 || d >= rank) {
      throw this.#error(
        `Cannot ${what} dim ${describeValue(dim)} of a view of shape ${
          _fmt(this.#shape)
        }: must be in [${-rank}, ${rank})`,
        "dim",
        dim,
        [-rank, rank],
      );
    }
    return d;
  }

  #error(
    message: string,
    name: string,
    value: unknown,
    limit?: unknown,
  ): ShapeError {
    return new ShapeError(message, {
      name,
      value,
      limit,
      shape: this.#shape,
      strides: this.#strides,
    });
  }

  #resolveReshape(shape: Shape): number[] {
    let infer = -1;
    if (Array.isArray(shape)) {
      for (let i = 0; i < shape.length; i++) {
        if (shape[i] !== -1) continue;
        if (infer >= 0) {
          throw this.#error(
            `Cannot reshape a view of shape ${_fmt(this.#shape)} to ${
              _fmt(shape)
            }: at most one size may be -1`,
            "shape",
            [...shape],
          );
        }
        infer = i;
      }
    }
    let target: number[];
    if (infer >= 0) {
      const rest = validateShape(
        shape.map((n, i) => i === infer ? 1 : n),
        "reshape shape",
      );
      const known = rest.reduce((a, b) => a * b, 1);
      if (known === 0 || this.#length % known !== 0) {
        throw this.#error(
          `Cannot reshape a view of shape ${
            _fmt(this.#shape)
          } (${this.#length} elements) to ${
            _fmt(shape)
          }: the size -1 cannot be inferred`,
          "shape",
          [...shape],
          this.#length,
        );
      }
      rest[infer] = this.#length / known;
      target = rest;
    } else {
      target = validateShape(shape, "reshape shape");
    }
    const count = target.reduce((a, b) => a * b, 1);
    if (count !== this.#length) {
      throw this.#error(
        `Cannot reshape a view of shape ${
          _fmt(this.#shape)
        } (${this.#length} elements) to ${
          _fmt(target)
        } (${count} elements): element counts differ`,
        "shape",
        target,
        this.#length,
      );
    }
    return target;
  }

  /** NumPy's `_attempt_nocopy_reshape`, for a non-empty view. */
  #noCopyStrides(target: number[]): number[] | undefined {
    const od: number[] = [], os: number[] = [];
    for (let i = 0; i < this.#shape.length; i++) {
      if (this.#shape[i] !== 1) {
        od.push(this.#shape[i]);
        os.push(this.#strides[i]);
      }
    }
    const nd = target, ns = new Array<number>(nd.length).fill(0);
    let oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < nd.length && oi < od.length) {
      let np = nd[ni], op = od[oi];
      while (np !== op) {
        if (np < op) np *= nd[nj++];
        else op *= od[oj++];
      }
      for (let ok = oi; ok < oj - 1; ok++) {
        if (os[ok] !== od[ok + 1] * os[ok + 1]) return undefined;
      }
      ns[nj - 1] = os[oj - 1];
      for (let nk = nj - 1; nk > ni; nk--) ns[nk - 1] = ns[nk] * nd[nk];
      ni = nj++;
      oi = oj++;
    }
    const last = ni >= 1 ? ns[ni - 1] : 1;
    for (let nk = ni; nk < nd.length; nk++) ns[nk] = last;
    return ns;
  }
}

/** Whether `value` is a real {@linkcode BufferView} (a brand check). */
export function _isBufferView(value: unknown): value is BufferView {
  return typeof value === "object" && value !== null && _hasShape(value);
}

/** Refuses anything but a real {@linkcode BufferView}, naming `name`. */
export function _checkView(value: unknown, name: string): void {
  if (!_isBufferView(value)) {
    throw new InvalidArgumentError(
      `Invalid ${name}: expected a BufferView, received ${
        describeValue(value)
      }`,
      { name, value, limit: "BufferView" },
    );
  }
}

/**
 * Refuses options that are neither `undefined` nor an object, and (given
 * `keys`) an object holding a key that `where` does not read: a misspelt
 * key (`end` for `stop`) would otherwise do nothing, silently.
 */
export function _checkOptions(
  options: unknown,
  name: string,
  keys?: readonly string[],
  where: string = name,
): void {
  if (options === undefined) return;
  if (typeof options !== "object" || options === null) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be an object or undefined, received ${
        describeValue(options)
      }`,
      { name, value: options, limit: "object" },
    );
  }
  if (keys !== undefined) validateOptionKeys(options, keys, where);
}

function sameList(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Checks a shape and returns a copy: at most {@linkcode MAX_RANK} sizes, each
 * a non-negative integer, with a safe-integer product.
 */
function validateShape(shape: Shape, what = "shape"): number[] {
  if (!Array.isArray(shape)) {
    throw new ShapeError(
      `Invalid ${what}: expected an array of sizes, received ${
        describeValue(shape)
      }`,
      { name: "shape", value: shape, shape: [] },
    );
  }
  if (shape.length > MAX_RANK) {
    throw new ShapeError(
      `Invalid ${what} of rank ${shape.length}: rank must be at most ${MAX_RANK}`,
      { name: "shape", value: shape.length, limit: MAX_RANK, shape },
    );
  }
  // Read each size once, into a copy: a proxy could answer differently later.
  const rank = shape.length;
  const copy = new Array<number>(rank);
  let count = 1;
  for (let i = 0; i < rank; i++) {
    const n = shape[i];
    copy[i] = n;
    if (!Number.isSafeInteger(n) || n < 0) {
      throw new ShapeError(
        `Invalid ${what} ${
          _fmt(shape)
        }: sizes must be non-negative integers, received ${
          describeValue(n)
        } at dim ${i}`,
        { name: "shape", value: n, limit: 0, shape },
      );
    }
    count *= n;
  }
  // Row-major strides count sizes of 0 as 1: keep them safe integers too.
  let span = 1;
  for (let i = 0; i < rank; i++) span *= Math.max(copy[i], 1);
  if (!Number.isSafeInteger(count) || !Number.isSafeInteger(span)) {
    throw new ShapeError(
      `Invalid ${what} ${_fmt(shape)}: ${
        Number.isSafeInteger(count)
          ? `its strides (${span} elements when sizes of 0 count as 1)`
          : `${count} elements`
      } exceed the safe integer limit ${Number.MAX_SAFE_INTEGER}`,
      {
        name: "shape",
        value: Number.isSafeInteger(count) ? span : count,
        limit: Number.MAX_SAFE_INTEGER,
        shape: copy,
      },
    );
  }
  return copy;
}

function validateStrides(strides: Shape, shape: number[]): number[] {
  if (!Array.isArray(strides) || strides.length !== shape.length) {
    throw new ShapeError(
      `Invalid strides ${
        Array.isArray(strides) ? _fmt(strides) : describeValue(strides)
      } for shape ${_fmt(shape)}: expected ${shape.length} strides`,
      { name: "strides", value: strides, limit: shape.length, shape },
    );
  }
  const copy = new Array<number>(shape.length);
  for (let i = 0; i < shape.length; i++) {
    const n = strides[i];
    copy[i] = n;
    if (!Number.isSafeInteger(n)) {
      throw new ShapeError(
        `Invalid strides ${_fmt(strides)} for shape ${
          _fmt(shape)
        }: strides must be integers, received ${describeValue(n)} at dim ${i}`,
        { name: "strides", value: n, shape, strides: copy.slice(0, i) },
      );
    }
  }
  return copy;
}

/**
 * Row-major (C order) strides of `shape`: the last dimension has stride 1.
 * Sizes of 0 count as 1, so strides stay distinct.
 *
 * @param shape The shape.
 * @returns The strides, in elements.
 * @throws {ShapeError} When the shape is invalid.
 *
 * @example Strides of a C-order shape
 * ```ts
 * import { rowMajorStrides } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(rowMajorStrides([2, 3, 4]), [12, 4, 1]);
 * assert.deepEqual(rowMajorStrides([]), []);
 * ```
 */
export function rowMajorStrides(shape: Shape): number[] {
  const s = validateShape(shape);
  const strides = new Array<number>(s.length);
  let acc = 1;
  for (let i = s.length - 1; i >= 0; i--) {
    strides[i] = acc;
    acc *= Math.max(s[i], 1);
  }
  return strides;
}

/**
 * Column-major (Fortran order) strides of `shape`: the first dimension has
 * stride 1.
 *
 * @param shape The shape.
 * @returns The strides, in elements.
 * @throws {ShapeError} When the shape is invalid.
 *
 * @example Strides of a Fortran-order shape
 * ```ts
 * import { columnMajorStrides } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(columnMajorStrides([2, 3, 4]), [1, 2, 6]);
 * ```
 */
export function columnMajorStrides(shape: Shape): number[] {
  const s = validateShape(shape);
  const strides = new Array<number>(s.length);
  let acc = 1;
  for (let i = 0; i < s.length; i++) {
    strides[i] = acc;
    acc *= Math.max(s[i], 1);
  }
  return strides;
}

/**
 * Row-major strides whose rows (the innermost dimension) are padded to a
 * multiple of `alignment` elements, so every row starts aligned. The logical
 * shape is unchanged.
 *
 * @param shape The shape.
 * @param alignment Row alignment in elements, a positive integer.
 * @returns The strides, in elements.
 * @throws {ShapeError} When the shape is invalid.
 * @throws {InvalidArgumentError} When `alignment` is not a positive integer.
 *
 * @example Pad rows to 4 elements
 * ```ts
 * import { alignedStrides, alignedStorageLength } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(alignedStrides([2, 3, 5], 4), [24, 8, 1]);
 * assert.equal(alignedStorageLength([2, 3, 5], 4), 48);
 * ```
 */
export function alignedStrides(shape: Shape, alignment: number): number[] {
  const s = validateShape(shape);
  validateElementAlignment(alignment);
  const strides = new Array<number>(s.length);
  let acc = 1;
  for (let i = s.length - 1; i >= 0; i--) {
    strides[i] = acc;
    acc *= Math.max(s[i], 1);
    if (i === s.length - 1) acc = alignUp(acc, alignment);
  }
  if (!Number.isSafeInteger(acc)) {
    throw new ShapeError(
      `Invalid shape ${
        _fmt(s)
      } with rows aligned to ${alignment} elements: its storage (${acc} elements) exceeds the safe integer limit ${Number.MAX_SAFE_INTEGER}`,
      {
        name: "alignment",
        value: alignment,
        limit: Number.MAX_SAFE_INTEGER,
        shape: s,
      },
    );
  }
  return strides;
}

/**
 * Elements a storage needs for a view with {@linkcode alignedStrides},
 * including the padding of the last row.
 *
 * @param shape The shape.
 * @param alignment Row alignment in elements, a positive integer.
 * @returns The element count (0 for an empty shape).
 * @throws {ShapeError} When the shape is invalid.
 * @throws {InvalidArgumentError} When `alignment` is not a positive integer.
 *
 * @example
 * ```ts
 * import { alignedStorageLength, alignedStrides } from "@allot/storage";
 * import { InvalidArgumentError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * // rows of 5 elements padded to 8
 * assert.deepEqual(alignedStrides([3, 5], 8), [8, 1]);
 * assert.equal(alignedStorageLength([3, 5], 8), 24);
 * assert.throws(() => alignedStorageLength([3, 5], 0), InvalidArgumentError);
 * ```
 */
export function alignedStorageLength(shape: Shape, alignment: number): number {
  const s = validateShape(shape);
  const strides = alignedStrides(s, alignment);
  if (s.length === 0) return 1;
  if (s.some((n) => n === 0)) return 0;
  return s[0] * strides[0];
}

function validateElementAlignment(alignment: number): void {
  if (!Number.isSafeInteger(alignment) || alignment < 1) {
    throw new InvalidArgumentError(
      `Invalid alignment: must be a positive integer count of elements, received ${
        describeValue(alignment)
      }`,
      { name: "alignment", value: alignment, limit: 1 },
    );
  }
}

/**
 * The shape that two or more shapes broadcast to, with NumPy's rules: align
 * from the right; sizes must match or be 1.
 *
 * @param shapes At least one shape.
 * @returns The broadcast shape.
 * @throws {ShapeError} When the shapes are incompatible or invalid.
 *
 * @example Combine three shapes
 * ```ts
 * import { broadcastShapes } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(broadcastShapes([[3, 1], [1, 4], [2, 1, 1]]), [2, 3, 4]);
 * assert.throws(() => broadcastShapes([[2], [3]]), /Cannot broadcast shapes \[2\] and \[3\]/);
 * ```
 */
export function broadcastShapes(shapes: readonly Shape[]): number[] {
  if (!Array.isArray(shapes) || shapes.length === 0) {
    throw new ShapeError(
      "Cannot broadcast shapes: expected at least one shape, received none",
      { name: "shapes", value: shapes, limit: 1, shape: [] },
    );
  }
  const checked = shapes.map((s) => validateShape(s));
  const rank = Math.max(...checked.map((s) => s.length));
  const out = new Array<number>(rank).fill(1);
  for (const s of checked) {
    const lead = rank - s.length;
    for (let i = 0; i < s.length; i++) {
      const a = out[lead + i], b = s[i];
      if (a === b || b === 1) continue;
      if (a === 1) {
        out[lead + i] = b;
        continue;
      }
      throw new ShapeError(
        `Cannot broadcast shapes ${
          checked.map(_fmt).join(" and ")
        }: sizes ${a} and ${b} differ at dim ${lead + i} of ${rank}`,
        { name: "shapes", value: checked, shape: s },
      );
    }
  }
  return out;
}
