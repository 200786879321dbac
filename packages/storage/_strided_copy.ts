/**
 * The CPU copy kernels behind `contiguous()`, `toData()` and `copyFrom()`:
 * `dst[dOff + i·dStrides] = src[sOff + i·sStrides]` for every index `i` of a
 * shape. Internal.
 *
 * Before copying, the layout is simplified: size-1 dims are dropped, dims are
 * ordered by destination stride, and neighbouring dims that are contiguous
 * with each other on both sides are merged. Then one of four inner kernels
 * runs for each index of the remaining outer dims:
 *
 * - contiguous runs: `TypedArray.prototype.set` on subarrays (memcpy), or a
 *   plain loop for short runs;
 * - broadcast runs (source stride 0): `fill`;
 * - transposes (the source's unit stride is on an outer dim): a blocked 2-D
 *   tile loop, so reads and writes both stay in cache;
 * - anything else: a strided loop.
 *
 * Elements are copied as raw bits: callers pass same-width integer views
 * (`Uint8Array`, `Uint16Array`, `Int32Array`) or `Float64Array`, so floats
 * are never converted. The element loops come one set per array type from
 * the generated `_strided_loops.ts`, so that each keeps type feedback of one
 * element kind. The helpers pass one {@linkcode _CopyPlan} (the kernel and
 * its fixed arguments) instead of a dozen positional parameters.
 *
 * @module
 */

import {
  _stagedKernelsIn,
  type _Transpose,
  _wasmKernels,
  _wasmKernelsIn,
} from "./_wasm_kernels.ts";
import { _loopsFor } from "./_strided_loops.ts";

/** A typed array used to move elements of one width. */
export type _BitArray = Uint8Array | Uint16Array | Int32Array | Float64Array;

/**
 * One copy's row kernel and its fixed arguments, made once per copy and
 * passed to `walk`, `block`, `row`, `tile` and the element loops.
 */
export interface _CopyPlan {
  /** The row kernel: `SET`, `LOOP`, `MOVE`, `FILL`, `GATHER`, `STRIDED` or `TILED`. */
  readonly kind: number;
  /** Destination array. */
  readonly dst: _BitArray;
  /** Source array. */
  readonly src: _BitArray;
  /** Elements per row (`TILED`: columns of the plane). */
  readonly len: number;
  /** Destination stride inside a row (`TILED`: of the tiled dim). */
  readonly dIn: number;
  /** Source stride inside a row. */
  readonly sIn: number;
  /** `TILED`: rows of the plane (size of the tiled dim). */
  readonly na: number;
  /** `TILED`: source stride of the tiled dim. */
  readonly sa: number;
  /** Destination stride between the rows of one `block` (set per block). */
  d0: number;
  /** Source stride between the rows of one `block` (set per block). */
  s0: number;
}

/** A plan with every field, in one order (one hidden class for all plans). */
function plan(
  p:
    & Pick<_CopyPlan, "kind" | "dst" | "src" | "len">
    & Partial<Pick<_CopyPlan, "dIn" | "sIn" | "na" | "sa">>,
): _CopyPlan {
  return {
    kind: p.kind,
    dst: p.dst,
    src: p.src,
    len: p.len,
    dIn: p.dIn ?? 1,
    sIn: p.sIn ?? 1,
    na: p.na ?? 0,
    sa: p.sa ?? 0,
    d0: 0,
    s0: 0,
  };
}

/** Runs at least this long are copied with `set`; shorter ones with a loop. */
const SET_MIN = 48;
/** Edge of a transpose tile, in elements. */
const TILE = 64;

/**
 * Copies every element of `shape` from a strided source to a strided
 * destination. The arrays must not overlap unless they are the same array and
 * the layouts are equal.
 *
 * @param dst Destination array.
 * @param dOff Destination index of element 0.
 * @param dStrides Destination strides, in elements.
 * @param src Source array (same element width as `dst`).
 * @param sOff Source index of element 0.
 * @param sStrides Source strides, in elements.
 * @param shape The shape copied.
 */
export function _copyStrided(
  dst: _BitArray,
  dOff: number,
  dStrides: readonly number[],
  src: _BitArray,
  sOff: number,
  sStrides: readonly number[],
  shape: readonly number[],
): void {
  // 1. keep dims of size > 1; stop at empty shapes
  const rank0 = shape.length;
  const n: number[] = [], ds: number[] = [], ss: number[] = [];
  for (let i = 0; i < rank0; i++) {
    const size = shape[i];
    if (size === 0) return;
    if (size === 1) continue;
    n.push(size);
    ds.push(dStrides[i]);
    ss.push(sStrides[i]);
  }
  // 2. order by |destination stride|, largest first (stable insertion sort)
  for (let i = 1; i < n.length; i++) {
    for (let j = i; j > 0 && Math.abs(ds[j - 1]) < Math.abs(ds[j]); j--) {
      swap(n, j);
      swap(ds, j);
      swap(ss, j);
    }
  }
  // 3. merge neighbours that are contiguous with each other on both sides
  let rank = 0;
  for (let i = 0; i < n.length; i++) {
    if (
      rank > 0 && ds[rank - 1] === n[i] * ds[i] &&
      ss[rank - 1] === n[i] * ss[i]
    ) {
      n[rank - 1] *= n[i];
      ds[rank - 1] = ds[i];
      ss[rank - 1] = ss[i];
    } else {
      n[rank] = n[i];
      ds[rank] = ds[i];
      ss[rank] = ss[i];
      rank++;
    }
  }
  n.length = ds.length = ss.length = rank;
  if (rank === 0) {
    dst[dOff] = src[sOff];
    return;
  }
  const last = rank - 1;
  const len = n[last], dIn = ds[last], sIn = ss[last];
  // 4o. leading broadcast dims over a dense destination: copy the inner block
  // once, then replicate it inside the destination
  if (rank >= 2 && ss[0] === 0 && dIn === 1 && isDense(n, ds)) {
    const block = ds[0];
    _copyStrided(dst, dOff, ds.slice(1), src, sOff, ss.slice(1), n.slice(1));
    replicate(dst, dOff, block, block * n[0]);
    return;
  }
  // 4a. transposes: the source's smallest stride is on an outer dim
  if (dIn === 1 && len >= 8 && rank >= 2) {
    let k = -1;
    for (let i = 0; i < last; i++) {
      const a = Math.abs(ss[i]);
      if (
        a !== 0 && a < Math.abs(sIn) && n[i] >= 8 &&
        (k < 0 || a < Math.abs(ss[k]))
      ) k = i;
    }
    if (k >= 0 && wasmTranspose(dst, dOff, src, sOff, n, ds, ss, k)) return;
    if (k >= 0) {
      const nk = n[k], dk = ds[k], sk = ss[k];
      const on: number[] = [], ods: number[] = [], oss: number[] = [];
      for (let i = 0; i < last; i++) {
        if (i === k) continue;
        on.push(n[i]);
        ods.push(ds[i]);
        oss.push(ss[i]);
      }
      const tiled = plan({
        kind: TILED,
        dst,
        src,
        len,
        dIn: dk,
        sIn,
        na: nk,
        sa: sk,
      });
      walk(tiled, on, ods, oss, dOff, sOff);
      return;
    }
  }
  // the outer dims: these arrays are this call's own, so trim them in place
  n.length = ds.length = ss.length = last;
  const outer = n, ods = ds, oss = ss;
  // 4w. both in one WebAssembly memory: runs and strided rows in wasm, so
  // a run costs a few instructions rather than a builtin call
  if (dIn === 1 && sIn !== 0 && dst.buffer === src.buffer) {
    const inPlace = _wasmKernelsIn(dst.buffer);
    if (inPlace !== undefined) {
      const bpe = dst.BYTES_PER_ELEMENT;
      const m = outer.length - 1;
      const dBase = dst.byteOffset + dOff * bpe;
      const sBase = src.byteOffset + sOff * bpe;
      const rows = m < 0 ? 1 : outer[m];
      const dRow = m < 0 ? 0 : ods[m] * bpe, sRow = m < 0 ? 0 : oss[m] * bpe;
      const rowsFn = inPlace.rows, gatherFn = inPlace.gather[bpe];
      const lenBytes = len * bpe, sb = sIn * bpe;
      const run = sIn === 1
        ? (d: number, s: number) => rowsFn(d, dRow, s, sRow, lenBytes, rows)
        : (d: number, s: number) => gatherFn(d, dRow, s, sRow, sb, len, rows);
      if (m < 0) run(dBase, sBase);
      else {
        forEachOuter(
          outer.slice(0, m),
          ods.slice(0, m),
          oss.slice(0, m),
          dBase,
          sBase,
          run,
          bpe,
        );
      }
      return;
    }
  }
  // 4b. contiguous runs
  if (dIn === 1 && sIn === 1) {
    if (
      len >= SET_MIN && dst.buffer === src.buffer &&
      dst.buffer.byteLength % dst.BYTES_PER_ELEMENT === 0
    ) {
      // one memory (such as a CpuHeap): memmove with no view per run
      const whole = wholeOf(dst);
      const dBase = dOff + dst.byteOffset / dst.BYTES_PER_ELEMENT;
      const sBase = sOff + src.byteOffset / src.BYTES_PER_ELEMENT;
      const move = plan({ kind: MOVE, dst: whole, src: whole, len });
      walk(move, outer, ods, oss, dBase, sBase);
    } else {
      const kind = len >= SET_MIN ? SET : LOOP;
      walk(plan({ kind, dst, src, len }), outer, ods, oss, dOff, sOff);
    }
    return;
  }
  // 4c. broadcast runs
  if (dIn === 1 && sIn === 0) {
    const fill = plan({ kind: FILL, dst, src, len, sIn: 0 });
    walk(fill, outer, ods, oss, dOff, sOff);
    return;
  }
  // 4d. strided runs
  const kind = dIn === 1 ? GATHER : STRIDED;
  walk(plan({ kind, dst, src, len, dIn, sIn }), outer, ods, oss, dOff, sOff);
}

/** Row kernels, chosen once per copy and dispatched by `row`. */
const SET = 0, LOOP = 1, MOVE = 2, FILL = 3, GATHER = 4, STRIDED = 5, TILED = 6;

/** Runs one builtin-backed row kernel (`SET`, `MOVE`, `FILL`, `TILED`) at `(d, s)`. */
function row(p: _CopyPlan, d: number, s: number): void {
  const len = p.len;
  switch (p.kind) {
    case SET:
      p.dst.set(p.src.subarray(s, s + len), d);
      return;
    case MOVE:
      p.dst.copyWithin(d, s, s + len);
      return;
    case FILL:
      p.dst.fill(p.src[s], d, d + len);
      return;
    case TILED:
      tile(p, d, s);
      return;
  }
}

/** Largest index that `| 0` keeps. */
const INT32 = 0x7fffffff;

/**
 * Runs the plan's kernel over `n0` rows (strides `p.d0`, `p.s0`). The element
 * loops (`LOOP`, `GATHER`, `STRIDED`) run both loops in one function, so V8
 * optimises the whole nest at once; the others call a builtin per row.
 */
function block(p: _CopyPlan, d: number, s: number, n0: number): void {
  const kind = p.kind;
  if (kind === LOOP || kind === GATHER || kind === STRIDED) {
    const dst = p.dst, src = p.src;
    if (dst.length <= INT32 && src.length <= INT32) {
      // every index fits in int32: say so with `| 0`, or V8 computes the
      // nested indices as float64 (measured 2× slower)
      const loops = _loopsFor(dst);
      if (kind === LOOP) loops.loop(p, d, s, n0);
      else if (kind === GATHER) loops.gather(p, d, s, n0);
      else loops.strided(p, d, s, n0);
      return;
    }
    const len = p.len, d0 = p.d0, s0 = p.s0, dIn = p.dIn, sIn = p.sIn;
    for (let i = 0; i < n0; i++, d += d0, s += s0) {
      for (let j = 0, dj = d, sj = s; j < len; j++, dj += dIn, sj += sIn) {
        dst[dj] = src[sj];
      }
    }
  } else {
    const d0 = p.d0, s0 = p.s0;
    for (let i = 0; i < n0; i++, d += d0, s += s0) row(p, d, s);
  }
}

/**
 * Runs the plan's kernel for every index of the outer dims `n` (strides
 * `ds`, `ss`), in row-major order: the last outer dim through `block`, the
 * others through an odometer.
 */
function walk(
  p: _CopyPlan,
  n: number[],
  ds: number[],
  ss: number[],
  d: number,
  s: number,
): void {
  const rank = n.length;
  if (rank === 0) {
    p.d0 = p.s0 = 0;
    block(p, d, s, 1);
    return;
  }
  const last = rank - 1;
  const nl = n[last];
  p.d0 = ds[last];
  p.s0 = ss[last];
  if (rank === 1) {
    block(p, d, s, nl);
    return;
  }
  const idx = new Array<number>(rank).fill(0);
  for (;;) {
    block(p, d, s, nl);
    let i = last - 1;
    for (; i >= 0; i--) {
      d += ds[i];
      s += ss[i];
      if (++idx[i] < n[i]) break;
      idx[i] = 0;
      d -= ds[i] * n[i];
      s -= ss[i] * n[i];
    }
    if (i < 0) return;
  }
}

/**
 * Transposes at least this many elements go to WebAssembly. Measured with
 * `copyFrom` on f32 and u16 views, heap and `ArrayBuffer` storages: from 256
 * elements the kernels (even with the copies in and out) beat the JS tiles
 * (32×32: 4.0 → 2.0–2.7 µs, 24×40: 4.0 → 1.1–1.3 µs, 100×30: 7.9 → 2.1–4.3
 * µs); at 64 elements the call costs more than it saves.
 */
const WASM_MIN = 256;
/**
 * Bytes of packed output staged in the kernel's memory before one `set`
 * copies them out (small enough to stay in L2; measured on 1024×1024 f32:
 * 128 KiB to 2 MiB timed the same within noise, a full-size stage 1.3–1.6×
 * slower).
 */
const STAGE_BYTES = 256 << 10;
/** Largest chunk (one index of the outermost dim) worth a scratch memory. */
const STAGE_MAX = 64 << 20;
/**
 * Largest source span (bytes) copied into the kernel's memory; larger
 * transposes between `ArrayBuffer`s take the JS tiles, which need no copies.
 * Measured with f32 and f64 from 768² to 2048²: up to about 8 MiB the copy
 * path wins or ties (1024² f32: 1.4 ms against 1.9 ms at best), at 2000² both
 * tie, and at 2048² (8 KiB rows) the JS tiles take half the time.
 */
const COPY_IN_MAX = 8 << 20;

/**
 * The transpose path through WebAssembly SIMD. Both storages in one
 * WebAssembly memory: transpose in place. Otherwise copy the source span into
 * the kernel's memory, then, chunk by chunk of the outermost destination dim
 * (about `STAGE_BYTES` each), run the blocked transpose into a staging area
 * and copy that chunk out with one `set` (for source spans up to
 * `COPY_IN_MAX`). Needs a dense destination, unit
 * source stride on dim `k` and a source span at most 4× the element count.
 *
 * @returns `false` (having done nothing) when the path does not apply.
 */
function wasmTranspose(
  dst: _BitArray,
  dOff: number,
  src: _BitArray,
  sOff: number,
  n: number[],
  ds: number[],
  ss: number[],
  k: number,
): boolean {
  const bpe = dst.BYTES_PER_ELEMENT;
  if (ss[k] !== 1 || !isDense(n, ds)) {
    return false;
  }
  let count = 1, lo = sOff, hi = sOff;
  for (let i = 0; i < n.length; i++) {
    count *= n[i];
    const reach = ss[i] * (n[i] - 1);
    if (reach < 0) lo += reach;
    else hi += reach;
  }
  if (count < WASM_MIN) return false;
  const last = n.length - 1;
  const on: number[] = [], ods: number[] = [], oss: number[] = [];
  for (let i = 0; i < last; i++) {
    if (i === k) continue;
    on.push(n[i]);
    ods.push(ds[i]);
    oss.push(ss[i]);
  }
  const da = ds[k] * bpe, sb = ss[last] * bpe, na = n[k], nb = n[last];
  const span = hi - lo + 1;
  const staged = span <= 4 * count && span * bpe <= COPY_IN_MAX;
  // the packed result goes out in chunks of whole indices of the outermost
  // destination dim, each staged where it stays in cache: no full-size
  // staging area
  const perIndex = ds[0];
  const chunkRows = Math.max(1, Math.floor(STAGE_BYTES / (perIndex * bpe)));
  const chunk = Math.min(n[0], chunkRows);
  const chunkBytes = chunk * perIndex * bpe;
  const plan = { n, ss, k, on, ods, oss, bpe, da, sb, na, nb, chunk };
  if (dst.buffer === src.buffer) {
    // both in one WebAssembly memory: transpose in place, no copies. When
    // the destination rows are not whole cache lines apart, each tile row
    // writes parts of two lines far away in memory; staging the output in
    // cache then measured 1.3-1.5x faster (1000x1000 and 777x1500 f32; rows
    // 64-byte aligned, such as 1024 or 1040 wide, are faster written in
    // place). With multi-memory WebAssembly the kernel stages into its own
    // memory and copies back; without it, the copy path below stages.
    const aligned = da % 64 === 0;
    if (
      da % 4096 === 0 && bpe === 4 && on.length === 0 && k === 0 &&
      chunk * (da + 64) <= STAGE_MAX
    ) {
      // a plain 2-D transpose whose rows are whole pages apart: stage with
      // the rows one line further apart than in the destination (so that
      // they do not all share cache sets) using 32×8 tiles, then copy row by
      // row (1024×1024 f32: 0.71-0.74 ms against 0.90 in place). Shorter
      // rows stay in place: for 256-byte rows (64³ permuted [1, 2, 0], which
      // merges to 4096×64) the row copies cost more than they save.
      const pitch = da + 64;
      const two = _stagedKernelsIn(src.buffer, chunk * pitch);
      if (two !== undefined) {
        const dBase = dst.byteOffset + dOff * bpe;
        stageChunks(
          { ...plan, da: pitch },
          two.t32w,
          src.byteOffset + sOff * bpe,
          0,
          (i0, rows) => two.outRows(dBase + i0 * da, da, 0, pitch, da, rows),
        );
        return true;
      }
    }
    if (!aligned && chunkBytes <= STAGE_MAX) {
      const two = _stagedKernelsIn(src.buffer, chunkBytes);
      if (two !== undefined) {
        const dBase = dst.byteOffset + dOff * bpe;
        stageChunks(
          plan,
          two.transpose[bpe],
          src.byteOffset + sOff * bpe,
          0,
          (i0, rows) =>
            two.out(dBase + i0 * perIndex * bpe, 0, rows * perIndex * bpe),
        );
        return true;
      }
    }
    const inPlace = _wasmKernelsIn(src.buffer);
    if (inPlace !== undefined && (aligned || !staged)) {
      const f = inPlace.transpose[bpe];
      forEachOuter(
        on,
        ods,
        oss,
        dst.byteOffset + dOff * bpe,
        src.byteOffset + sOff * bpe,
        (d, s) => f(d, da, s, sb, na, nb),
        bpe,
      );
      return true;
    }
  }
  if (!staged) return false;
  // copy the source span into the kernel's memory, stage the output after it
  const dstAt = Math.ceil((span * bpe) / 16) * 16;
  const total = dstAt + chunkBytes;
  if (total > 0x7fff0000) return false;
  const kernels = _wasmKernels(total);
  if (kernels === undefined) return false;
  const buffer = kernels.memory.buffer as ArrayBuffer;
  const Bits = src.constructor as new (
    buffer: ArrayBuffer,
    byteOffset: number,
    length: number,
  ) => _BitArray;
  (new Bits(buffer, 0, span) as Int32Array).set(
    src.subarray(lo, hi + 1) as Int32Array,
  );
  stageChunks(
    plan,
    kernels.transpose[bpe],
    (sOff - lo) * bpe,
    dstAt,
    (i0, rows) =>
      (dst as Int32Array).set(
        new Bits(buffer, dstAt, rows * perIndex) as Int32Array,
        dOff + i0 * perIndex,
      ),
  );
  return true;
}

/** The shape facts of one staged transpose (see `wasmTranspose`). */
interface _StagePlan {
  n: number[];
  ss: number[];
  k: number;
  on: number[];
  ods: number[];
  oss: number[];
  bpe: number;
  da: number;
  sb: number;
  na: number;
  nb: number;
  chunk: number;
}

/**
 * Runs `fn` over the transpose chunk by chunk of the outermost destination
 * dim: each chunk is written at `stageAt` (in the kernel's output memory),
 * then `flush(first index, indices)` moves it to the destination.
 */
function stageChunks(
  p: _StagePlan,
  fn: _Transpose,
  srcAt: number,
  stageAt: number,
  flush: (i0: number, rows: number) => void,
): void {
  const { n, ss, k, on, ods, oss, bpe, da, sb, na, nb, chunk } = p;
  const n0 = n[0], s0 = ss[0] * bpe;
  let rows = 0;
  const body = (d: number, s: number) => fn(d, da, s, sb, na, nb);
  const body0 = (d: number, s: number) => fn(d, da, s, sb, rows, nb);
  for (let i0 = 0; i0 < n0; i0 += chunk) {
    rows = Math.min(chunk, n0 - i0);
    const sAt = srcAt + i0 * s0;
    if (k === 0) {
      // the chunked dim is the transposed one: `rows` rows of each plane
      forEachOuter(on, ods, oss, stageAt, sAt, body0, bpe);
    } else {
      // the chunked dim is the first outer one (on[0] === n[0])
      forEachOuter(
        [rows, ...on.slice(1)],
        ods,
        oss,
        stageAt,
        sAt,
        body,
        bpe,
      );
    }
    flush(i0, rows);
  }
}

/** Whether `ds` are the row-major strides of `n` (a dense block). */
function isDense(n: number[], ds: number[]): boolean {
  let acc = 1;
  for (let i = n.length - 1; i >= 0; i--) {
    if (ds[i] !== acc) return false;
    acc *= n[i];
  }
  return true;
}

/** Largest replication chunk: big enough to amortise calls, small enough for L2. */
const REPLICATE_CHUNK = 1 << 16;

/**
 * Fills `dst[at + block, at + total)` with copies of `dst[at, at + block)`:
 * doubling up to a chunk that stays in cache, then chunk by chunk.
 */
function replicate(
  dst: _BitArray,
  at: number,
  block: number,
  total: number,
): void {
  let filled = block;
  while (filled < total && filled < REPLICATE_CHUNK) {
    const c = Math.min(filled, total - filled);
    dst.copyWithin(at + filled, at, at + c);
    filled += c;
  }
  const chunk = filled - (filled % block);
  while (filled < total) {
    const c = Math.min(chunk, total - filled);
    dst.copyWithin(at + filled, at, at + c);
    filled += c;
  }
}

/** An array of the same type over the whole buffer of `array`. */
function wholeOf(array: _BitArray): _BitArray {
  const Ctor = array.constructor as new (buffer: ArrayBufferLike) => _BitArray;
  return new Ctor(array.buffer);
}

function swap(list: number[], j: number): void {
  const t = list[j];
  list[j] = list[j - 1];
  list[j - 1] = t;
}

/**
 * Calls `body(d, s)` for every index of the outer dims, in row-major order;
 * strides are multiplied by `unit` (1 for elements, the width for bytes).
 */
function forEachOuter(
  n: number[],
  dStrides: number[],
  sStrides: number[],
  d: number,
  s: number,
  body: (d: number, s: number) => void,
  unit = 1,
): void {
  const rank = n.length;
  const ds = unit === 1 ? dStrides : dStrides.map((x) => x * unit);
  const ss = unit === 1 ? sStrides : sStrides.map((x) => x * unit);
  if (rank === 0) {
    body(d, s);
    return;
  }
  if (rank === 1) {
    const n0 = n[0], d0 = ds[0], s0 = ss[0];
    for (let i = 0; i < n0; i++, d += d0, s += s0) body(d, s);
    return;
  }
  if (rank === 2) {
    const n0 = n[0], d0 = ds[0], s0 = ss[0];
    const n1 = n[1], d1 = ds[1], s1 = ss[1];
    for (let i = 0; i < n0; i++, d += d0, s += s0) {
      for (let j = 0, dd = d, sd = s; j < n1; j++, dd += d1, sd += s1) {
        body(dd, sd);
      }
    }
    return;
  }
  // odometer for rank >= 3
  const idx = new Array<number>(rank).fill(0);
  const last = rank - 1;
  const nl = n[last], dl = ds[last], sl = ss[last];
  for (;;) {
    for (let j = 0, dd = d, sd = s; j < nl; j++, dd += dl, sd += sl) {
      body(dd, sd);
    }
    let i = last - 1;
    for (; i >= 0; i--) {
      d += ds[i];
      s += ss[i];
      if (++idx[i] < n[i]) break;
      idx[i] = 0;
      d -= ds[i] * n[i];
      s -= ss[i] * n[i];
    }
    if (i < 0) return;
  }
}

/**
 * Blocked copy of a `p.na × p.len` plane: `dst[d + a·p.dIn + b] = src[s +
 * a·p.sa + b·p.sIn]`, tile by tile so both sides stay in cache.
 */
function tile(p: _CopyPlan, d: number, s: number): void {
  const dst = p.dst, src = p.src;
  const da = p.dIn, sa = p.sa, sb = p.sIn, na = p.na, nb = p.len;
  const int = dst.length <= INT32 && src.length <= INT32;
  const tileInt = _loopsFor(dst).tile;
  for (let a0 = 0; a0 < na; a0 += TILE) {
    const a1 = a0 + TILE < na ? a0 + TILE : na;
    for (let b0 = 0; b0 < nb; b0 += TILE) {
      const b1 = b0 + TILE < nb ? b0 + TILE : nb;
      if (int) tileInt(p, d, s, a0, a1, b0, b1);
      else {
        for (let a = a0; a < a1; a++) {
          let di = d + a * da + b0;
          let si = s + a * sa + b0 * sb;
          for (let b = b0; b < b1; b++, si += sb) dst[di++] = src[si];
        }
      }
    }
  }
}
