// The free index of a `StepPlannedPool`: free blocks in a sorted array (by
// size and then by when they entered it, so best fit takes the longest-free
// block of a size; or by offset, for the arena), shifted by hand.

import { AllotError } from "@allot/core";
import type { PlannedBlock } from "./step_planned_pool.ts";

/** Moves a free range node (never a handle in use). */
export function _place<M>(
  block: PlannedBlock<M>,
  offset: number,
  size: number,
) {
  const b = block as { byteOffset: number; byteLength: number };
  block._offset = offset;
  b.byteOffset = block._seg.base + offset;
  b.byteLength = size;
}

/**
 * Whether `a` sorts before `b`: by offset, or by size and then by when it
 * entered the index (so best fit takes the longest-free block of a size).
 */
export function _before<M>(
  a: PlannedBlock<M>,
  b: PlannedBlock<M>,
  bySize: boolean,
): boolean {
  if (!bySize) return a._offset < b._offset;
  if (a.byteLength !== b.byteLength) return a.byteLength < b.byteLength;
  return a._seq < b._seq;
}

/** First index of `list` (sorted, see `_before`) not before `item`. */
function _position<M>(
  list: PlannedBlock<M>[],
  item: PlannedBlock<M>,
  bySize: boolean,
): number {
  let lo = 0, hi = list.length;
  if (!bySize) {
    const at = item._offset;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (list[mid]._offset < at) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
  const size = item.byteLength, seq = item._seq;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const b = list[mid];
    if (b.byteLength < size || (b.byteLength === size && b._seq < seq)) {
      lo = mid + 1;
    } else hi = mid;
  }
  return lo;
}

// (shifting by hand: `splice` makes an array each call, and the lists are
// short)
export function _insertSorted<M>(
  list: PlannedBlock<M>[],
  item: PlannedBlock<M>,
  bySize: boolean,
) {
  const at = _position(list, item, bySize);
  let k = list.length;
  list.push(item);
  for (; k > at; k--) list[k] = list[k - 1];
  list[at] = item;
}

export function _removeSorted<M>(
  list: PlannedBlock<M>[],
  item: PlannedBlock<M>,
  bySize: boolean,
) {
  // keys are unique (a free block's range is its own), so the block is at
  // its position or not in the index at all
  const at = _position(list, item, bySize);
  if (list[at] !== item) {
    throw new AllotError(
      `StepPlannedPool is inconsistent: the free index lost the block at ${item._offset}`,
    );
  }
  const last = list.length - 1;
  for (let k = at; k < last; k++) list[k] = list[k + 1];
  list.pop();
}
