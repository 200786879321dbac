// Offline layout of one step's allocations in one arena: TFLite's
// greedy-by-size planner. Items are placed largest first (of equal sizes,
// the longest lived first), each at the
// smallest gap (between items already placed that overlap it in time) that
// holds it, else after the highest of them. A step that repeats is laid out
// once, near its lower bound (the peak of the bytes live at once).

/** One allocation of a recorded step: its size and the op times it lives. */
export interface _PlanItem {
  /** Bytes (already aligned). */
  size: number;
  /** Op index of the allocation. */
  start: number;
  /** Op index of the free (`Infinity` when still live at the step's end). */
  end: number;
  /** A fixed offset (a block already placed, live at the step's start). */
  fixed?: number;
}

/**
 * Lays the items out; returns each item's offset (in input order) and the
 * arena size.
 *
 * @param items The step's allocations (fixed ones keep their offset).
 * @param alignment Offsets are multiples of it.
 * @param limit Items that would end above it are left out (offset -1).
 */
export function _planStep(
  items: readonly _PlanItem[],
  alignment: number,
  limit = Infinity,
): { offsets: Float64Array; size: number } {
  const n = items.length;
  const offsets = new Float64Array(n);
  const sizes = new Float64Array(n);
  const starts = new Float64Array(n);
  const ends = new Float64Array(n);
  const order: number[] = [];
  // the items placed so far, by offset: their offset, end offset and life,
  // four numbers each side by side (the scan below is the hot part)
  const placed = new Float64Array(4 * n);
  let count = 0;
  const insert = (i: number) => {
    const at = offsets[i];
    let lo = 0, hi = count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (placed[4 * mid] <= at) lo = mid + 1;
      else hi = mid;
    }
    placed.copyWithin(4 * lo + 4, 4 * lo, 4 * count);
    placed[4 * lo] = at;
    placed[4 * lo + 1] = at + sizes[i];
    placed[4 * lo + 2] = starts[i];
    placed[4 * lo + 3] = ends[i];
    count++;
  };
  let size = 0;
  for (let i = 0; i < n; i++) {
    const it = items[i];
    sizes[i] = it.size;
    starts[i] = it.start;
    ends[i] = it.end;
    const fixed = it.fixed;
    if (fixed !== undefined) {
      offsets[i] = fixed;
      insert(i);
      size = Math.max(size, fixed + it.size);
    } else order.push(i);
  }
  // largest first; of equal sizes the longest lived first (it meets more
  // of the others: the weights, gradients and optimizer slots of one
  // shape, placed before the short-lived activations of that shape, keep
  // the low offsets and leave the gaps to the items that fit them)
  order.sort((a, b) =>
    sizes[b] - sizes[a] || _life(b, starts, ends) - _life(a, starts, ends) ||
    starts[a] - starts[b]
  );
  for (let k = 0; k < order.length; k++) {
    const i = order[k];
    const need = sizes[i], start = starts[i], end = ends[i];
    let best = -1;
    let bestGap = Infinity;
    let cursor = 0;
    for (let q = 0, last = 4 * count; q < last; q += 4) {
      if (placed[q + 2] >= end || start >= placed[q + 3]) continue;
      const gap = placed[q] - cursor;
      if (gap >= need && gap < bestGap) {
        best = cursor;
        bestGap = gap;
      }
      const top = placed[q + 1];
      if (top > cursor) cursor = top;
    }
    const at = best >= 0 ? best : cursor;
    if (at + need > limit) {
      offsets[i] = -1;
      continue;
    }
    offsets[i] = at;
    if (at + need > size) size = at + need;
    insert(i);
  }
  return { offsets, size: Math.ceil(size / alignment) * alignment };
}

/** How long item `i` lives (in ops; one past the last op while live at the end). */
function _life(i: number, starts: Float64Array, ends: Float64Array): number {
  const end = ends[i];
  return (end === Infinity ? Number.MAX_SAFE_INTEGER : end) - starts[i];
}

/**
 * Layouts laid out lately, by their whole input: a step laid out again with
 * the same requests, lives, fixed blocks and limit (a workload's steps that
 * come back, a warm pass over the same work) takes the kept layout instead
 * of running greedy-by-size again (quadratic in the requests). The input is
 * compared in full, so a hit returns exactly what `_planStep` would.
 */
export class _PlanMemo {
  #max: number;
  #byHash = new Map<
    number,
    { input: Float64Array; offsets: Float64Array; size: number }[]
  >();
  #order: number[] = [];
  #count = 0;

  /** @param max Layouts kept (the oldest goes first). */
  constructor(max = 32) {
    this.#max = max;
  }

  /** `_planStep(items, alignment, limit)`, from the kept layouts when there. */
  plan(
    items: readonly _PlanItem[],
    alignment: number,
    limit = Infinity,
  ): { offsets: Float64Array; size: number } {
    const n = items.length;
    const input = new Float64Array(4 * n + 2);
    let h = 0x811c9dc5 ^ n;
    for (let i = 0, k = 0; i < n; i++, k += 4) {
      const it = items[i];
      input[k] = it.size;
      input[k + 1] = it.start;
      input[k + 2] = it.end;
      input[k + 3] = it.fixed ?? -1;
      h = _mix(h, it.size);
      h = _mix(h, it.start);
      h = _mix(h, it.end === Infinity ? -2 : it.end);
      h = _mix(h, it.fixed ?? -1);
    }
    input[4 * n] = limit;
    input[4 * n + 1] = alignment;
    h = _mix(_mix(h, limit === Infinity ? -2 : limit), alignment);
    const bucket = this.#byHash.get(h);
    if (bucket !== undefined) {
      for (const e of bucket) {
        if (_same(e.input, input)) return { offsets: e.offsets, size: e.size };
      }
    }
    const out = _planStep(items, alignment, limit);
    const entry = { input, offsets: out.offsets, size: out.size };
    if (bucket === undefined) this.#byHash.set(h, [entry]);
    else bucket.push(entry);
    this.#order.push(h);
    if (++this.#count > this.#max) {
      const old = this.#order.shift()!;
      const list = this.#byHash.get(old)!;
      list.shift();
      if (list.length === 0) this.#byHash.delete(old);
      this.#count--;
    }
    return out;
  }
}

function _mix(h: number, v: number): number {
  h = Math.imul(h ^ (v | 0) ^ ((v / 4294967296) | 0), 0x01000193);
  return h ^ (h >>> 13);
}

function _same(a: Float64Array, b: Float64Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
