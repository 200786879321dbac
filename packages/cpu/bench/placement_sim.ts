/**
 * An exact model of `CpuHeap`'s placements, for trying placement policies on
 * the benchmark's traces without timing noise: sizes in 64-byte granules, the
 * free blocks in one address-ordered array, TLSF classes and last-in
 * first-out class lists modelled as the heap keeps them (a block keeps its
 * list while its class does not change). It reproduces the heap's footprints
 * to the byte for `"good-fit"`, `"compact"` and `"first-fit"` (checked below
 * against the heap itself), so a policy's figure here is what the heap would
 * give. O(free blocks) per operation: a few seconds per 200,000-op trace.
 *
 * Run: `deno run -A packages/cpu/bench/placement_sim.ts` (README,
 * "Footprint"); add `--tried` for the policies tried for the default.
 *
 * @module
 */

import { CpuHeap } from "../mod.ts";
import { logUniformTrace, replay, tensorTrace, type Trace } from "./trace.ts";

const GRANULE = 64;
const REGION = 1 << 25; // 2 GiB of granules: no trace reaches the end
const SMALL = 256; // heap.ts's SMALL_UNITS
const FIRST_FIT = 1024; // heap.ts's FIRST_FIT_UNITS

const SL_LOG2 = 5; // heap.ts's: 32 second-level classes per power of two

// TLSF's class of a block of `units` granules, with 2^sl second-level
// classes per power of two.
function mappingIndex(units: number, sl = SL_LOG2): number {
  if (units < 1 << sl) return units;
  const t = 31 - Math.clz32(units);
  return ((t - sl + 1) << sl) | ((units >>> (t - sl)) & ((1 << sl) - 1));
}

// The first class whose every block holds `units` granules.
function searchIndex(units: number, sl = SL_LOG2): number {
  if (units < 1 << sl) return units;
  const t = 31 - Math.clz32(units);
  return mappingIndex(units + (1 << (t - sl)) - 1, sl);
}

/** The free blocks, in address order, with the time each joined its list. */
export class FreeBlocks {
  /** Start of each free block, ascending. */
  start: number[] = [0];
  /** Length of each. */
  size: number[] = [REGION];
  /** When it joined its class list (the latest is the list's head). */
  stamp: number[] = [0];
  /** The high-water mark so far: one past the highest granule ever used. */
  high = 0;
  #clock = 1;

  /** A new stamp: the block goes to the head of its list. */
  tick(): number {
    return this.#clock++;
  }

  /**
   * Index of the first block starting at or after `unit`.
   *
   * @param unit A granule.
   * @returns An index into the arrays.
   */
  at(unit: number): number {
    let lo = 0, hi = this.start.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.start[mid] < unit) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * Inserts a block.
   *
   * @param start Its first granule.
   * @param size Its length.
   * @param stamp Its list time.
   */
  insert(start: number, size: number, stamp: number): void {
    const i = this.at(start);
    this.start.splice(i, 0, start);
    this.size.splice(i, 0, size);
    this.stamp.splice(i, 0, stamp);
  }

  /**
   * Removes block `i`.
   *
   * @param i Its index.
   */
  remove(i: number): void {
    this.start.splice(i, 1);
    this.size.splice(i, 1);
    this.stamp.splice(i, 1);
  }
}

/** Picks the free block (an index) for a request of `units` granules. */
export type Policy = (free: FreeBlocks, units: number) => number;

/**
 * Replays a trace under a policy.
 *
 * @param trace The trace.
 * @param policy Where each request goes.
 * @param sl Log2 of the second-level classes per power of two (a block keeps
 * its list while its class does not change).
 * @returns Highest byte used over peak live bytes.
 */
export function footprint(
  trace: Trace,
  policy: Policy,
  sl: number = SL_LOG2,
): number {
  const free = new FreeBlocks();
  const used = new Map<number, [number, number]>();
  let high = 0;
  const { kind, slot, byteLength } = trace;
  for (let k = 0; k < kind.length; k++) {
    if (kind[k] === 1) {
      const units = Math.max(1, Math.ceil(byteLength[k] / GRANULE));
      const i = policy(free, units);
      const start = free.start[i], size = free.size[i];
      if (!(size >= units)) throw new Error("the policy picked no fit");
      if (size === units) free.remove(i);
      else {
        free.start[i] = start + units;
        free.size[i] = size - units;
        if (mappingIndex(size, sl) !== mappingIndex(size - units, sl)) {
          free.stamp[i] = free.tick();
        }
      }
      used.set(slot[k], [start, units]);
      high = Math.max(high, start + units);
      free.high = high;
    } else {
      const [s, z] = used.get(slot[k])!;
      used.delete(slot[k]);
      let start = s, size = z, stamp = -1;
      const i = free.at(s);
      if (i < free.start.length && free.start[i] === s + z) {
        // Merged into the next block, which keeps its list if its class
        // does not change.
        const keeps = mappingIndex(free.size[i] + z, sl) ===
          mappingIndex(free.size[i], sl);
        stamp = keeps ? free.stamp[i] : -1;
        size += free.size[i];
        free.remove(i);
      }
      if (i > 0 && free.start[i - 1] + free.size[i - 1] === s) {
        const old = mappingIndex(free.size[i - 1], sl);
        start = free.start[i - 1];
        size += free.size[i - 1];
        stamp = mappingIndex(size, sl) === old ? free.stamp[i - 1] : -1;
        free.remove(i - 1);
      }
      free.insert(start, size, stamp >= 0 ? stamp : free.tick());
    }
  }
  return high * GRANULE / trace.peakLiveBytes;
}

// TLSF's good fit among the free blocks shorter than `under` units: the
// head (latest freed) of the first non-empty class that surely fits.
function goodFitUnder(
  free: FreeBlocks,
  units: number,
  under: number,
  sl = SL_LOG2,
): number {
  const idx = searchIndex(units, sl);
  let best = -1, bestClass = Infinity;
  for (let i = 0; i < free.start.length; i++) {
    if (free.size[i] >= under) continue;
    const c = mappingIndex(free.size[i], sl);
    if (
      c >= idx &&
      (c < bestClass || (c === bestClass && free.stamp[i] > free.stamp[best]))
    ) {
      best = i;
      bestClass = c;
    }
  }
  return best;
}

/** TLSF's good fit: the head of the first non-empty class that surely fits. */
export const goodFit: Policy = (free, units) =>
  goodFitUnder(free, units, Infinity);

/**
 * TLSF's good fit with 2^`sl` second-level classes per power of two (the
 * heap has 2^5): finer classes round a request up less. Replay it with the
 * same `sl` in {@linkcode footprint}.
 *
 * @param sl Log2 of the second-level classes.
 * @returns The policy.
 */
export function goodFitSecondLevel(sl: number): Policy {
  return (free, units) => goodFitUnder(free, units, Infinity, sl);
}

/**
 * Good fit, but first the head of the class the request itself falls in
 * when that block is long enough (TLSF rounds the request up past it).
 */
export const ownClassHead: Policy = (free, units) => {
  const own = mappingIndex(units);
  let head = -1;
  for (let i = 0; i < free.start.length; i++) {
    if (
      mappingIndex(free.size[i]) === own &&
      (head < 0 || free.stamp[i] > free.stamp[head])
    ) head = i;
  }
  return head >= 0 && free.size[head] >= units ? head : goodFit(free, units);
};

/**
 * Good fit, except where the good fit would raise the high-water mark: then
 * exact first fit (the lowest block that fits), for requests under `under`
 * granules. Footprint is set only by the allocations that raise the mark,
 * so this asks whether first fit pays only there (it does not: README, "Why
 * the default is not first fit").
 *
 * @param under The threshold in granules (`Infinity`: every request).
 * @returns The policy.
 */
export function firstFitAtHighWater(under = Infinity): Policy {
  return (free, units) => {
    const i = goodFit(free, units);
    if (free.start[i] + units <= free.high || units >= under) return i;
    for (let j = 0; j < free.start.length; j++) {
      if (free.size[j] >= units) return j;
    }
    return i;
  };
}

/** `"compact"`: the lower of the small-class good fit and the lowest large. */
export const compact: Policy = (free, units) => {
  if (units >= SMALL) return goodFit(free, units);
  const best = goodFitUnder(free, units, SMALL);
  let low = 0;
  while (low < free.start.length && free.size[low] < SMALL) low++;
  if (low === free.start.length) low = -1;
  return best < 0 || (low >= 0 && low < best) ? low : best;
};

/**
 * Exact first fit for requests under `small` granules, good fit for the rest
 * (`"first-fit"` with 1,024).
 *
 * @param small The threshold in granules.
 * @returns The policy.
 */
export function firstFitSmall(small = FIRST_FIT): Policy {
  return (free, units) => {
    if (units >= small) return goodFit(free, units);
    for (let i = 0; i < free.start.length; i++) {
      if (free.size[i] >= units) return i;
    }
    return -1;
  };
}

/** First fit among the blocks whose class surely fits (no exact search). */
export const firstFitByClass: Policy = (free, units) => {
  if (units >= SMALL) return goodFit(free, units);
  const idx = searchIndex(units);
  for (let i = 0; i < free.start.length; i++) {
    if (mappingIndex(free.size[i]) >= idx) return i;
  }
  return -1;
};

/**
 * A request under `under` granules takes the lowest-addressed of two kinds
 * of candidates: the heads (latest freed) of the first `k` non-empty classes
 * that surely fit, among the blocks under `under`, and the lowest block of
 * at least `under` granules (which fits it); larger requests take the good
 * fit. `"compact"` is `k = 1` with 256 granules. Constant-time for a fixed
 * `k` in a heap (a few bitmap scans), where exact first fit is not.
 *
 * @param k Class heads compared.
 * @param under The threshold in granules.
 * @returns The policy.
 */
export function lowestOfHeads(k: number, under = SMALL): Policy {
  return (free, units) => {
    if (units >= under) return goodFit(free, units);
    const idx = searchIndex(units);
    const heads = new Map<number, number>();
    let low = -1;
    for (let i = 0; i < free.start.length; i++) {
      if (free.size[i] >= under) {
        if (low < 0) low = i;
        continue;
      }
      const c = mappingIndex(free.size[i]);
      const head = heads.get(c);
      if (
        c >= idx && (head === undefined || free.stamp[i] > free.stamp[head])
      ) {
        heads.set(c, i);
      }
    }
    let best = low;
    for (const c of [...heads.keys()].sort((a, b) => a - b).slice(0, k)) {
      const i = heads.get(c)!;
      if (best < 0 || i < best) best = i;
    }
    return best;
  };
}

function mean(values: number[]): string {
  const m = values.reduce((a, b) => a + b, 0) / values.length;
  return values.length === 1
    ? m.toFixed(3)
    : `${m.toFixed(3)} (${Math.min(...values).toFixed(3)} - ${
      Math.max(...values).toFixed(3)
    })`;
}

function heapFootprint(trace: Trace, placement: CpuHeap["placement"]): number {
  const heap = new CpuHeap(REGION * GRANULE - GRANULE * 1024, { placement });
  replay(heap, trace);
  return heap.highWaterBytes / trace.peakLiveBytes;
}

if (import.meta.main) {
  const seeds = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
  const families: [string, Trace[]][] = [
    ["seed 42", [logUniformTrace(200_000)]],
    ["seeds 1-12", seeds.map((s) => logUniformTrace(200_000, 1000, s))],
    [
      "~300 live",
      seeds.slice(0, 6).map((s) => logUniformTrace(100_000, 300, s)),
    ],
    [
      "~3,000 live",
      seeds.slice(0, 4).map((s) => logUniformTrace(200_000, 3000, s)),
    ],
    ["tensor", [1, 2, 3].map((s) => tensorTrace(300, s))],
  ];
  const policies: [string, Policy, number?][] = [
    ["good fit (the heap's good-fit)", goodFit],
    ["compact (the heap's compact)", compact],
    ["exact first fit < 1,024 (the heap's first-fit)", firstFitSmall()],
    ["exact first fit < 256", firstFitSmall(SMALL)],
    ["first fit among surely fitting classes < 256", firstFitByClass],
  ];
  if (Deno.args.includes("--tried")) {
    // Tried for a default that meets 1.12 at good fit's speed (README,
    // "Why the default is not first fit"); slow: about 10 minutes.
    policies.push(
      ["exact first fit < 64", firstFitSmall(64)],
      ["exact first fit < 128", firstFitSmall(128)],
      ["exact first fit < 512", firstFitSmall(512)],
      ["lowest of 2 class heads and the lowest >= 256", lowestOfHeads(2)],
      ["lowest of 4 class heads and the lowest >= 256", lowestOfHeads(4)],
      [
        "lowest of all class heads and the lowest >= 256",
        lowestOfHeads(Infinity),
      ],
      [
        "lowest of 4 class heads and the lowest >= 1,024",
        lowestOfHeads(4, 1024),
      ],
      [
        "lowest of all class heads and the lowest >= 1,024",
        lowestOfHeads(Infinity, 1024),
      ],
      // #18, cheap rules for the default (README, "Why the default is not
      // first fit"): finer second-level classes, the request's own class.
      ["good fit, 64 second-level classes", goodFitSecondLevel(6), 6],
      ["good fit, 128 second-level classes", goodFitSecondLevel(7), 7],
      ["good fit after the head of the request's own class", ownClassHead],
      // #18, fifth session: first fit only where good fit raises the mark.
      [
        "good fit; exact first fit where it would raise the high-water mark",
        firstFitAtHighWater(),
      ],
      [
        "same, requests under 1,024 only",
        firstFitAtHighWater(FIRST_FIT),
      ],
    );
  }
  // The model must agree with the heap to the byte on the headline trace.
  const headline = families[0][1][0];
  for (
    const [placement, policy] of [
      ["good-fit", goodFit],
      ["compact", compact],
      ["first-fit", firstFitSmall()],
    ] as const
  ) {
    const model = footprint(headline, policy),
      heap = heapFootprint(headline, placement);
    if (model !== heap) {
      throw new Error(`${placement}: model ${model}, heap ${heap}`);
    }
  }
  console.log(`| policy | ${families.map(([name]) => name).join(" | ")} |`);
  console.log(`|---|${families.map(() => "---:").join("|")}|`);
  for (const [name, policy, sl] of policies) {
    const cells = families.map(([, traces]) =>
      mean(traces.map((t) => footprint(t, policy, sl)))
    );
    console.log(`| ${name} | ${cells.join(" | ")} |`);
  }
}
