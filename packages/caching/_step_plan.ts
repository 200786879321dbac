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
  const order: number[] = [];
  // items placed so far, by offset
  const placed: number[] = [];
  const insert = (i: number) => {
    let lo = 0, hi = placed.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (offsets[placed[mid]] <= offsets[i]) lo = mid + 1;
      else hi = mid;
    }
    placed.splice(lo, 0, i);
  };
  let size = 0;
  for (let i = 0; i < n; i++) {
    const fixed = items[i].fixed;
    if (fixed !== undefined) {
      offsets[i] = fixed;
      insert(i);
      size = Math.max(size, fixed + items[i].size);
    } else order.push(i);
  }
  order.sort((a, b) =>
    items[b].size - items[a].size || items[a].start - items[b].start
  );
  for (const i of order) {
    const it = items[i];
    let best = -1;
    let bestGap = Infinity;
    let cursor = 0;
    for (const j of placed) {
      const o = items[j];
      if (o.start >= it.end || it.start >= o.end) continue;
      const gap = offsets[j] - cursor;
      if (gap >= it.size && gap < bestGap) {
        best = cursor;
        bestGap = gap;
      }
      cursor = Math.max(cursor, offsets[j] + o.size);
    }
    const at = best >= 0 ? best : cursor;
    if (at + it.size > limit) {
      offsets[i] = -1;
      continue;
    }
    offsets[i] = at;
    size = Math.max(size, at + it.size);
    insert(i);
  }
  return { offsets, size: Math.ceil(size / alignment) * alignment };
}
