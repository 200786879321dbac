/**
 * Internal: splits a strided copy into boxes of its iteration space whose
 * source and destination ranges each fit one storage binding, for views
 * wider than `maxStorageBufferBindingSize`.
 *
 * @module
 */

/** Most pieces one kernel call may be split into. */
export const MAX_PIECES = 65536;

/** One box of the iteration space: its extents and first elements. */
export interface _Piece {
  /** Extent of each dimension of the box. */
  readonly shape: number[];
  /** Source element of the box's first index. */
  readonly srcOffset: number;
  /** Destination element of the box's first index. */
  readonly dstOffset: number;
}

/** What {@linkcode _splitStrided} splits. */
export interface _SplitInput {
  readonly shape: readonly number[];
  readonly srcStrides: readonly number[];
  readonly dstStrides: readonly number[];
  readonly srcOffset: number;
  readonly dstOffset: number;
  /** Elements one side of a piece should span at most (sizes the chunks). */
  readonly budget: number;
  /** Whether a box reaching these elements binds within the limit. */
  fits(srcLo: number, srcHi: number, dstLo: number, dstHi: number): boolean;
  /** Most pieces; more refuses the split. */
  readonly maxPieces: number;
  /**
   * Elements per destination word: a cut along a dimension of destination
   * stride 1 keeps whole words in each chunk where it can.
   */
  readonly dstUnit?: number;
}

/** The pieces, or why there are none. */
export type _SplitResult =
  | { readonly pieces: _Piece[] }
  | { readonly refused: "element" | "pieces" };

/**
 * Lowest and highest element a view reaches (its shape has no 0): the
 * offset moved by each dimension's last step, down for a negative stride.
 */
export function _span(
  shape: readonly number[],
  strides: readonly number[],
  offset: number,
): [number, number] {
  let lo = offset;
  let hi = offset;
  for (let d = 0; d < shape.length; d++) {
    const step = strides[d] * (shape[d] - 1);
    if (step < 0) lo += step;
    else hi += step;
  }
  return [lo, hi];
}

/**
 * Splits the iteration space recursively: a box that does not fit is cut
 * along the dimension that widens an over-wide side the most (the outer one
 * on a tie, which keeps a row-major destination contiguous), into equal
 * chunks sized to fit that side when the other dimensions allow, else in
 * halves. Pieces come out in row-major order of their first index.
 *
 * @returns The pieces, or `refused: "element"` when one element does not
 * fit, `"pieces"` when more than `maxPieces` would be needed.
 */
export function _splitStrided(input: _SplitInput): _SplitResult {
  const { srcStrides, dstStrides, budget, fits, maxPieces } = input;
  const pieces: _Piece[] = [];
  let refused: "element" | "pieces" | undefined;
  const split = (shape: number[], srcOffset: number, dstOffset: number) => {
    if (refused !== undefined) return;
    const [sLo, sHi] = _span(shape, srcStrides, srcOffset);
    const [dLo, dHi] = _span(shape, dstStrides, dstOffset);
    if (fits(sLo, sHi, dLo, dHi)) {
      if (pieces.length >= maxPieces) refused = "pieces";
      else pieces.push({ shape, srcOffset, dstOffset });
      return;
    }
    const srcWide = sHi - sLo + 1 > budget;
    const dstWide = dHi - dLo + 1 > budget;
    const either = !srcWide && !dstWide; // too wide only with the slack
    let best = -1;
    let widest = -1;
    for (let d = 0; d < shape.length; d++) {
      if (shape[d] < 2) continue;
      const width = Math.max(
        srcWide || either ? Math.abs(srcStrides[d]) * (shape[d] - 1) : 0,
        dstWide || either ? Math.abs(dstStrides[d]) * (shape[d] - 1) : 0,
      );
      if (width > widest) {
        widest = width;
        best = d;
      }
    }
    if (best < 0) {
      refused = "element";
      return;
    }
    const n = shape[best];
    let k = n;
    const chunk = (wide: boolean, stride: number, lo: number, hi: number) => {
      const s = Math.abs(stride);
      if (!wide || s === 0) return;
      const other = hi - lo + 1 - s * (n - 1);
      k = Math.min(
        k,
        other < budget
          ? Math.floor((budget - other) / s) + 1
          : Math.ceil(n / 2),
      );
    };
    chunk(srcWide, srcStrides[best], sLo, sHi);
    chunk(dstWide, dstStrides[best], dLo, dHi);
    if (k >= n) k = Math.ceil(n / 2);
    k = Math.max(1, k);
    const unit = input.dstUnit ?? 1;
    if (unit > 1 && Math.abs(dstStrides[best]) === 1 && k >= unit) {
      k -= k % unit;
    } else {
      const m = Math.ceil(n / k);
      k = Math.ceil(n / m);
    }
    for (let start = 0; start < n && refused === undefined; start += k) {
      const sub = shape.slice();
      sub[best] = Math.min(k, n - start);
      split(
        sub,
        srcOffset + start * srcStrides[best],
        dstOffset + start * dstStrides[best],
      );
    }
  };
  split([...input.shape], input.srcOffset, input.dstOffset);
  return refused === undefined ? { pieces } : { refused };
}

/**
 * Splits a byte range copied (or filled) at `n` bytes into runs, each the
 * longest that `fits(start, length)` allows from where the last ended.
 *
 * @returns `[start, length]` runs, or `undefined` when a run of `unit` bytes
 * does not fit or more than `maxPieces` runs would be needed.
 */
export function _splitRun(
  n: number,
  unit: number,
  fits: (start: number, length: number) => boolean,
  maxPieces: number,
): [number, number][] | undefined {
  const runs: [number, number][] = [];
  for (let at = 0; at < n;) {
    const left = (n - at) / unit;
    if (!fits(at, unit) || runs.length >= maxPieces) return undefined;
    // largest count of units that fits: fits is monotonic in the length
    let lo = 1;
    let hi = left;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (fits(at, mid * unit)) lo = mid;
      else hi = mid - 1;
    }
    runs.push([at, lo * unit]);
    at += lo * unit;
  }
  return runs;
}

/**
 * Whether the strided kernel writes every destination word of `layout`
 * from one invocation: rows of whole words (last stride 1, last extent and
 * the other strides multiples of the elements per word, a word-aligned
 * start), and the elements of one invocation a whole number of words.
 */
export function _wordOwned(
  layout: {
    readonly shape: readonly number[];
    readonly strides: readonly number[];
  },
  dstBase: number,
  size: number,
  elementsPerInvocation: number,
): boolean {
  const per = 4 / size;
  const { shape, strides } = layout;
  const last = shape.length - 1;
  if (last < 0 || dstBase % per !== 0 || elementsPerInvocation % per !== 0) {
    return false;
  }
  if (strides[last] !== 1 || shape[last] % per !== 0) return false;
  for (let d = 0; d < last; d++) {
    if (shape[d] > 1 && strides[d] % per !== 0) return false;
  }
  return true;
}
