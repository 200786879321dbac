// Offline layout of one step's allocations in one arena: TFLite's
// greedy-by-size planner. Items are placed largest first, each at the
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
  // the items' fields in flat arrays: the inner loop below is the hot part
  const sizes = new Float64Array(n);
  const starts = new Float64Array(n);
  const ends = new Float64Array(n);
  const order: number[] = [];
  // items placed so far, by offset
  const placed = new Int32Array(n);
  let count = 0;
  const insert = (i: number) => {
    const at = offsets[i];
    let lo = 0, hi = count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (offsets[placed[mid]] <= at) lo = mid + 1;
      else hi = mid;
    }
    placed.copyWithin(lo + 1, lo, count);
    placed[lo] = i;
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
  order.sort((a, b) => sizes[b] - sizes[a] || starts[a] - starts[b]);
  for (let k = 0; k < order.length; k++) {
    const i = order[k];
    const need = sizes[i], start = starts[i], end = ends[i];
    let best = -1;
    let bestGap = Infinity;
    let cursor = 0;
    for (let p = 0; p < count; p++) {
      const j = placed[p];
      if (starts[j] >= end || start >= ends[j]) continue;
      const gap = offsets[j] - cursor;
      if (gap >= need && gap < bestGap) {
        best = cursor;
        bestGap = gap;
      }
      const top = offsets[j] + sizes[j];
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
