/**
 * The stats vocabulary of pooling allocators, after PyTorch's
 * `torch.cuda.memory_stats()`: each figure is a {@linkcode StatValues}
 * (current, peak, allocated, freed) kept for all pools together and for the
 * small and large pools apart. Shared by `@allot/caching` and
 * `@allot/watermark`, with a text report ({@linkcode formatMemorySummary})
 * and a flat form ({@linkcode flattenMemoryStats}).
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { formatBytes } from "./format_bytes.ts";
import { describeValue, validateFlag, validateObject } from "./validate.ts";
import { validateOptionKeys } from "./option_keys.ts";
import type { StatValues } from "./stat.ts";

/** Which pools a figure covers: every pool, or only the small or large one. */
export type StatType = "all" | "smallPool" | "largePool";

/** One figure kept per pool: {@linkcode StatValues} for each {@linkcode StatType}. */
export interface StatArray {
  /** All pools together. */
  all: StatValues;
  /** The small pool (requests up to the small-request limit). */
  smallPool: StatValues;
  /** The large pool. */
  largePool: StatValues;
}

/**
 * A pooling allocator's stats, with PyTorch's meanings. Counts are numbers of
 * blocks or segments; `…Bytes` are bytes.
 */
export interface MemoryStats {
  /** Blocks handed out and not yet freed by the caller. */
  allocation: StatArray;
  /** Segments taken from the device. */
  segment: StatArray;
  /** Blocks handed out, or freed but still waiting for fences. */
  active: StatArray;
  /** Free blocks that are part of a split segment (fragments). */
  inactiveSplit: StatArray;
  /** Bytes of blocks handed out (rounded sizes). */
  allocatedBytes: StatArray;
  /** Bytes of segments taken from the device. */
  reservedBytes: StatArray;
  /** Bytes of active blocks (rounded sizes). */
  activeBytes: StatArray;
  /** Bytes of free blocks in split segments: memory that cannot go back to the device. */
  inactiveSplitBytes: StatArray;
  /** Bytes the callers asked for, before rounding, of active blocks. */
  requestedBytes: StatArray;
  /** Device allocations retried after freeing the whole cache. */
  numAllocRetries: number;
  /** Requests that failed with an out-of-memory error. */
  numOoms: number;
  /** Times the allocator waited for every pending fence. */
  numSyncAllStreams: number;
  /** Segments taken from the device. */
  numDeviceAlloc: number;
  /** Segments returned to the device. */
  numDeviceFree: number;
  /** Handed-out blocks of at least `maxSplitByteLength` bytes. */
  oversizeAllocations: StatValues;
  /** Segments of at least `maxSplitByteLength` bytes. */
  oversizeSegments: StatValues;
  /** The `maxSplitByteLength` in force (`Infinity` when unset). */
  maxSplitByteLength: number;
}

/** Names of the {@linkcode StatArray} figures of {@linkcode MemoryStats}. */
export const STAT_ARRAY_NAMES: readonly (
  | "allocation"
  | "segment"
  | "active"
  | "inactiveSplit"
  | "allocatedBytes"
  | "reservedBytes"
  | "activeBytes"
  | "inactiveSplitBytes"
  | "requestedBytes"
)[] = Object.freeze([
  "allocation",
  "segment",
  "active",
  "inactiveSplit",
  "allocatedBytes",
  "reservedBytes",
  "activeBytes",
  "inactiveSplitBytes",
  "requestedBytes",
]);

/**
 * Formats a byte count like PyTorch's `format_size` (core's `formatBytes`): bytes below 1 KiB, then
 * KiB, MiB or GiB with two decimals.
 *
 * @param byteLength Bytes.
 * @returns Text such as `512 bytes`, `1.50 MiB`.
 *
 * @example
 * ```ts
 * import { formatSize } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(formatSize(512), "512 bytes");
 * assert.equal(formatSize(3 * 2 ** 19), "1.50 MiB");
 * ```
 */
export function formatSize(byteLength: number): string {
  return formatBytes(byteLength);
}

/**
 * Flattens stats into PyTorch's dotted keys (`allocated_bytes.all.current`,
 * `num_alloc_retries`, ...), for tools that read `torch.cuda.memory_stats()`.
 *
 * @param stats The stats.
 * @returns A flat record of numbers.
 *
 * @example
 * ```ts
 * import { CachingAllocator } from "@allot/caching";
 * import { flattenMemoryStats } from "@allot/core";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const allocator = new CachingAllocator(new MockSegmentSource());
 * using block = allocator.allocate(1000);
 * const flat = flattenMemoryStats(allocator.memoryStats());
 * assert.equal(flat["allocated_bytes.all.current"], 1024);
 * assert.equal(flat["requested_bytes.small_pool.current"], 1000);
 * ```
 */
export function flattenMemoryStats(
  stats: MemoryStats,
): Record<string, number> {
  stats = _checkedStats(stats);
  const out: Record<string, number> = {};
  const snake = (name: string): string =>
    name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  for (const name of STAT_ARRAY_NAMES) {
    const array = stats[name];
    for (const type of ["all", "smallPool", "largePool"] as const) {
      const values = array[type];
      for (const field of ["current", "peak", "allocated", "freed"] as const) {
        out[`${snake(name)}.${snake(type)}.${field}`] = values[field];
      }
    }
  }
  for (const field of ["current", "peak", "allocated", "freed"] as const) {
    out[`oversize_allocations.${field}`] = stats.oversizeAllocations[field];
    out[`oversize_segments.${field}`] = stats.oversizeSegments[field];
  }
  out.num_alloc_retries = stats.numAllocRetries;
  out.num_ooms = stats.numOoms;
  out.num_sync_all_streams = stats.numSyncAllStreams;
  out.num_device_alloc = stats.numDeviceAlloc;
  out.num_device_free = stats.numDeviceFree;
  out.max_split_size = stats.maxSplitByteLength;
  return out;
}

/** Options of {@linkcode formatMemorySummary}. */
export interface MemorySummaryOptions {
  /**
   * Title printed in the header, such as the allocator and device.
   *
   * @default {"allot memory summary"}
   */
  title?: string;
  /**
   * Leave out the small/large pool rows.
   *
   * @default {false}
   */
  abbreviated?: boolean;
}

/**
 * A text table of the stats in the layout of PyTorch's
 * `torch.cuda.memory_summary()`: one row per figure (and per pool unless
 * abbreviated), with current usage, peak usage, total allocated and total
 * freed.
 *
 * @param stats The stats.
 * @param options Title and abbreviation.
 * @returns The table.
 * @throws {InvalidArgumentError} When `stats` lacks a figure, or an option is
 * not of its type.
 *
 * @example
 * ```ts
 * import { CachingAllocator } from "@allot/caching";
 * import { formatMemorySummary } from "@allot/core";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const allocator = new CachingAllocator(new MockSegmentSource());
 * using block = allocator.allocate(1000);
 * const text = formatMemorySummary(allocator.memoryStats());
 * assert.match(text, /Allocated memory/);
 * assert.match(text, /1.00 KiB/);
 * ```
 */
export function formatMemorySummary(
  stats: MemoryStats,
  options: MemorySummaryOptions = {},
): string {
  stats = _checkedStats(stats);
  validateObject(options, "options");
  validateOptionKeys(options, ["title", "abbreviated"], "memorySummary()");
  const rawTitle = options.title === undefined
    ? "allot memory summary"
    : options.title;
  if (typeof rawTitle !== "string") {
    throw new InvalidArgumentError(
      `Invalid title: must be a string, received ${describeValue(rawTitle)}`,
      { name: "title", value: rawTitle, limit: "a string" },
    );
  }
  const abbreviated = validateFlag(options.abbreviated, "abbreviated", false);
  const width = 79;
  const line = "=".repeat(width);
  const thin = "-".repeat(width);
  // one line inside the box: control characters become spaces, a long title
  // is cut
  const oneLine = rawTitle.replace(
    // deno-lint-ignore no-control-regex
    /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g,
    " ",
  );
  const title = oneLine.length > width - 3
    ? `${oneLine.slice(0, width - 4)}…`
    : oneLine;
  const pools: [StatType, string][] = abbreviated
    ? [["all", ""]]
    : [["all", ""], ["largePool", "  from large pool"], [
      "smallPool",
      "  from small pool",
    ]];
  const cell = (text: string): string => text.padStart(12);
  const rows: string[] = [];
  rows.push(line);
  rows.push(`|${` ${title}`.padEnd(width - 2)}|`);
  rows.push(line);
  rows.push(
    `|${
      [
        `   num ooms: ${stats.numOoms}`,
        `alloc retries: ${stats.numAllocRetries}`,
        `device allocs: ${stats.numDeviceAlloc}`,
        `device frees: ${stats.numDeviceFree}`,
      ].join("  ").padEnd(width - 2)
    }|`,
  );
  rows.push(line);
  rows.push(
    `|${" Metric".padEnd(25)}|${cell("Cur Usage")}|${cell("Peak Usage")}|${
      cell("Tot Alloc")
    }|${cell("Tot Freed")}|`,
  );
  const section = (
    label: string,
    array: StatArray,
    bytes: boolean,
  ): void => {
    rows.push(thin);
    for (const [type, suffix] of pools) {
      const v = array[type];
      const f = (n: number): string => bytes ? formatSize(n) : String(n);
      const name = suffix === "" ? ` ${label}` : suffix;
      rows.push(
        `|${name.padEnd(25)}|${cell(f(v.current))}|${cell(f(v.peak))}|${
          cell(f(v.allocated))
        }|${cell(f(v.freed))}|`,
      );
    }
  };
  section("Allocated memory", stats.allocatedBytes, true);
  section("Active memory", stats.activeBytes, true);
  section("Requested memory", stats.requestedBytes, true);
  section("Device reserved memory", stats.reservedBytes, true);
  section("Non-releasable memory", stats.inactiveSplitBytes, true);
  section("Allocations", stats.allocation, false);
  section("Active allocs", stats.active, false);
  section("Device reserved segments", stats.segment, false);
  section("Non-releasable allocs", stats.inactiveSplit, false);
  rows.push(thin);
  const single = (label: string, v: StatValues): void => {
    rows.push(
      `|${` ${label}`.padEnd(25)}|${cell(String(v.current))}|${
        cell(String(v.peak))
      }|${cell(String(v.allocated))}|${cell(String(v.freed))}|`,
    );
  };
  single("Oversize allocations", stats.oversizeAllocations);
  single("Oversize segments", stats.oversizeSegments);
  rows.push(line);
  return rows.join("\n");
}

const _COUNTERS = [
  "numAllocRetries",
  "numOoms",
  "numSyncAllStreams",
  "numDeviceAlloc",
  "numDeviceFree",
  "maxSplitByteLength",
] as const;

/**
 * `stats` checked and copied: every figure a report reads, each value read
 * once and a number (or left out). A record that traps when read, or holds
 * a null-prototype object where a number goes, threw a raw error from the
 * report or printed junk.
 */
function _checkedStats(stats: unknown): MemoryStats {
  validateObject(stats, "stats");
  const bad = (where: string, value: unknown, rule: string): never => {
    throw new InvalidArgumentError(
      `Invalid stats: ${where} must be ${rule}, received ${
        describeValue(value)
      }`,
      { name: `stats.${where}`, value, limit: rule },
    );
  };
  const number = (where: string, value: unknown): number => {
    if (value !== undefined && typeof value !== "number") {
      bad(where, value, "a number");
    }
    return value as number;
  };
  const values = (where: string, v: unknown): StatValues => {
    if (typeof v !== "object" || v === null) bad(where, v, "StatValues");
    const o = v as Record<string, unknown>;
    return {
      current: number(`${where}.current`, o.current),
      peak: number(`${where}.peak`, o.peak),
      allocated: number(`${where}.allocated`, o.allocated),
      freed: number(`${where}.freed`, o.freed),
    };
  };
  try {
    const s = stats as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const name of STAT_ARRAY_NAMES) {
      const figure = s[name];
      if (typeof figure !== "object" || figure === null) {
        bad(name, figure, "an object");
      }
      const f = figure as Record<string, unknown>;
      out[name] = {
        all: values(`${name}.all`, f.all),
        smallPool: values(`${name}.smallPool`, f.smallPool),
        largePool: values(`${name}.largePool`, f.largePool),
      };
    }
    out.oversizeAllocations = values(
      "oversizeAllocations",
      s.oversizeAllocations,
    );
    out.oversizeSegments = values("oversizeSegments", s.oversizeSegments);
    for (const name of _COUNTERS) out[name] = number(name, s[name]);
    return out as unknown as MemoryStats;
  } catch (error) {
    if (error instanceof InvalidArgumentError) throw error;
    throw new InvalidArgumentError(
      `Invalid stats: the record cannot be read (${
        error instanceof Error ? error.message : "a non-error was thrown"
      })`,
      { name: "stats", value: stats, limit: "MemoryStats" },
      { cause: error },
    );
  }
}
