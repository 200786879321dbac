/**
 * Internal: decides whether a strided-to-contiguous copy is a transpose that
 * the block kernel can run (whole 16-byte vectors on both sides), and lays
 * out its parameters. Pure arithmetic, no device.
 *
 * @module
 */

/** What the block transpose kernel needs, in 16-byte vectors. */
export interface _BlockPlan {
  /** Elements per 16-byte vector: 2, 4 or 8. */
  per: number;
  /** Blocks along the output's last dimension. */
  blockCols: number;
  /** Blocks along the dimension whose source stride is 1. */
  blockRows: number;
  /** Source start, in vectors from the binding's start. */
  srcBase: number;
  /** Destination start, in vectors from the binding's start. */
  dstBase: number;
  /** Source stride of the output's last dimension, in vectors. */
  srcColStride: number;
  /** Destination stride of the unit-stride dimension, in vectors. */
  dstRowStride: number;
  /** The other dimensions (batch), outermost first. */
  otherShape: number[];
  /** Their source strides, in vectors. */
  otherSrc: number[];
  /** Their destination strides, in vectors. */
  otherDst: number[];
  /** One invocation per `blocks` blocks. */
  invocations: number;
}

/**
 * Drops dimensions of extent 1 and merges neighbours that the source walks
 * as one (the destination is row-major over the same shape, so any merge
 * that holds for the source holds for it).
 *
 * @param shape Extents.
 * @param strides Source strides, in elements.
 * @returns The collapsed shape and strides.
 */
export function _collapse(
  shape: readonly number[],
  strides: readonly number[],
): { shape: number[]; strides: number[] } {
  const n: number[] = [], s: number[] = [];
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    const last = n.length - 1;
    if (last >= 0 && s[last] === strides[d] * shape[d]) {
      n[last] *= shape[d];
      s[last] = strides[d];
    } else {
      n.push(shape[d]);
      s.push(strides[d]);
    }
  }
  return { shape: n, strides: s };
}

/**
 * The block plan of a copy of the view (`shape`, `strides`) starting at
 * source element `srcBase` into contiguous elements from `dstBase`, or
 * `undefined` when the view is not such a transpose: after collapsing, some
 * dimension other than the last has source stride 1, both it and the last
 * dimension are whole vectors long, every other source stride and both
 * starts are whole vectors.
 *
 * @param shape View shape.
 * @param strides View strides, in elements.
 * @param srcBase Source start, in elements from the binding's start.
 * @param dstBase Destination start, in elements from the binding's start.
 * @param elementBytes 2, 4 or 8.
 * @param blocks Blocks per invocation along the last dimension; the last
 * extent must be a multiple of that many vectors.
 * @returns The plan, or `undefined`.
 */
export function _blockPlan(
  shape: readonly number[],
  strides: readonly number[],
  srcBase: number,
  dstBase: number,
  elementBytes: number,
  blocks = 1,
): _BlockPlan | undefined {
  if (elementBytes !== 2 && elementBytes !== 4 && elementBytes !== 8) {
    return undefined;
  }
  const per = 16 / elementBytes;
  const { shape: n, strides: ss } = _collapse(shape, strides);
  const rank = n.length;
  if (rank < 2) return undefined;
  const last = rank - 1;
  const k = ss.indexOf(1);
  if (k < 0 || k === last) return undefined;
  // the kernel runs `blocks` blocks along the last dimension per invocation
  if (n[k] % per !== 0 || n[last] % (per * blocks) !== 0) return undefined;
  if (srcBase % per !== 0 || dstBase % per !== 0) return undefined;
  for (let d = 0; d < rank; d++) {
    if (d !== k && ss[d] % per !== 0) return undefined;
  }
  // row-major destination strides over the collapsed shape
  const ds = new Array<number>(rank);
  let acc = 1;
  for (let d = last; d >= 0; d--) {
    ds[d] = acc;
    acc *= n[d];
  }
  const otherShape: number[] = [], otherSrc: number[] = [];
  const otherDst: number[] = [];
  let others = 1;
  for (let d = 0; d < last; d++) {
    if (d === k) continue;
    otherShape.push(n[d]);
    otherSrc.push(ss[d] / per);
    otherDst.push(ds[d] / per);
    others *= n[d];
  }
  const blockCols = n[last] / per, blockRows = n[k] / per;
  return {
    per,
    blockCols,
    blockRows,
    srcBase: srcBase / per,
    dstBase: dstBase / per,
    srcColStride: ss[last] / per,
    dstRowStride: ds[k] / per,
    otherShape,
    otherSrc,
    otherDst,
    invocations: (blockCols / blocks) * blockRows * others,
  };
}
