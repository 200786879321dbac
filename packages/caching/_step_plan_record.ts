// A laid-out step as `StepPlannedPool` keeps it (`_planStep` gives the
// offsets): the keys it is found by (a hash of its first requests), and
// what its fast path reads (the arena items by planned free, and per item
// how many of them must be freed before it is placed).

/** A layout of one step: offsets in the arena (-1: not planned). */
export interface _Plan {
  offsets: Float64Array;
  sizes: Float64Array;
  count: number;
  size: number;
  /**
   * For the fast path: the arena items by planned free, and for each item
   * how many of them the plan freed before it starts (those must be free
   * before it is placed; no other arena block can overlap it).
   */
  freeOrder: Int32Array;
  need: Int32Array;
  /** Per item in the step now: 0 not yet, 1 live (fast), 2 freed. */
  state: Uint8Array;
  /** Per item in the step now: 1 when it waits for blocks (`#waits`). */
  guard: Uint8Array;
  /** Whether some `guard` entry may be 1 (else it needs no clearing). */
  guarded: boolean;
  /** Hash of the sizes of items `0..i`, per item (the plan's keys). */
  keys: Int32Array;
  /** The last step that followed or made it (least recent goes first). */
  used: number;
  /** Times its step left it and asked to be planned again. */
  remade: number;
}

/** Where the hash of a step's sizes starts. */
export const _KEY0 = 0x2545f491;

/** The key of a step's requests so far, given the key before `size`. */
export function _key(key: number, size: number): number {
  let h = Math.imul(key ^ (size | 0) ^ ((size / 4294967296) | 0), 0x9e3779b1);
  h ^= h >>> 15;
  return Math.imul(h, 0x85ebca77);
}

/**
 * A plan with what its fast path needs: the arena items (offset >= 0) by
 * their planned free, and per item how many of those the plan freed
 * before the item's request (greedy-by-size kept the item clear of every
 * arena item whose life overlaps its own, so only those may share its
 * range).
 */
export function _fastPlan(
  offsets: Float64Array,
  sizes: Float64Array,
  starts: ArrayLike<number>,
  ends: ArrayLike<number>,
  size: number,
): _Plan {
  const count = offsets.length;
  const arena: number[] = [];
  for (let i = 0; i < count; i++) if (offsets[i] >= 0) arena.push(i);
  arena.sort((a, b) => ends[a] - ends[b]);
  const freeOrder = Int32Array.from(arena);
  const need = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    // arena items freed at or before this request
    let lo = 0, hi = arena.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (ends[arena[mid]] <= starts[i]) lo = mid + 1;
      else hi = mid;
    }
    need[i] = lo;
  }
  const keys = new Int32Array(count);
  let key = _KEY0;
  for (let i = 0; i < count; i++) keys[i] = key = _key(key, sizes[i]);
  return {
    offsets,
    sizes,
    count,
    size,
    freeOrder,
    need,
    state: new Uint8Array(count),
    guard: new Uint8Array(count),
    guarded: false,
    keys,
    used: 0,
    remade: 0,
  };
}
