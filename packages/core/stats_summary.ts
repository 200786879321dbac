/**
 * {@linkcode formatStatsSummary}: the text report of any allocator's
 * `stats()` record, in the layout of `torch.cuda.memory_summary()`, so every
 * allocator of allot answers `memorySummary()` the same way.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { formatBytes } from "./format_bytes.ts";
import type { MemorySummaryOptions } from "./memory_stats.ts";
import type { StatValues } from "./stat.ts";
import { describeValue, validateFlag, validateObject } from "./validate.ts";
import { validateOptionKeys } from "./option_keys.ts";

const FIELDS = ["current", "peak", "allocated", "freed"] as const;
const POOLS = [["all", ""], ["largePool", "  from large pool"], [
  "smallPool",
  "  from small pool",
]] as const;

function isStatValues(value: unknown): value is StatValues {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return FIELDS.every((f) => typeof v[f] === "number");
}

/**
 * A figure's values (and its pools' values) copied into plain objects:
 * each field read once.
 */
function _plainFigure(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of FIELDS) out[k] = value[k];
  for (const [pool] of POOLS) {
    const v = value[pool];
    if (typeof v === "object" && v !== null) {
      const o: Record<string, unknown> = {};
      for (const k of FIELDS) o[k] = (v as Record<string, unknown>)[k];
      out[pool] = o;
    }
  }
  return out;
}

function label(name: string): string {
  const words = name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/**
 * Checks the options of a `memorySummary()`: an object whose `title` is a
 * string and `abbreviated` a boolean, where given.
 *
 * @param options The options.
 * @throws {InvalidArgumentError} When they are not.
 *
 * @example
 * ```ts
 * import { InvalidArgumentError, validateMemorySummaryOptions } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * validateMemorySummaryOptions({ title: "GPU 0", abbreviated: true });
 * assert.throws(
 *   () => validateMemorySummaryOptions({ abrev: true }), // a misspelt key
 *   InvalidArgumentError,
 * );
 * ```
 */
export function validateMemorySummaryOptions(options: unknown): void {
  validateObject(options, "options");
  // a misspelt key (`abrev`) printed the full table, silently
  validateOptionKeys(
    options as object,
    ["title", "abbreviated"],
    "memorySummary()",
  );
  const { title, abbreviated } = options as MemorySummaryOptions;
  if (title !== undefined && typeof title !== "string") {
    throw new InvalidArgumentError(
      `Invalid title: must be a string, received ${describeValue(title)}`,
      { name: "title", value: title, limit: "a string" },
    );
  }
  validateFlag(abbreviated, "abbreviated", false);
}

/**
 * A text table of an allocator's `stats()` record, in the layout of
 * `torch.cuda.memory_summary()`: one row per figure that is a
 * {@linkcode StatValues} (current, peak, total allocated, total freed; and
 * one row per pool for an `all`/`smallPool`/`largePool` figure unless
 * abbreviated), and the plain numbers on the lines above. A figure whose name
 * ends in `Bytes` (or `bytes`, or is `reserved`/`requested`/`allocated`) is
 * printed as bytes.
 *
 * @param stats The stats record.
 * @param options Title and abbreviation.
 * @param defaultTitle The title when `options.title` is not given.
 * @returns The table.
 * @throws {InvalidArgumentError} When `stats` is not an object or an option
 * is not of its type.
 *
 * @example
 * ```ts
 * import { formatStatsSummary } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const text = formatStatsSummary({
 *   requestedBytes: { current: 1536, peak: 2048, allocated: 4096, freed: 2560 },
 *   allocations: { current: 2, peak: 3, allocated: 5, freed: 3 },
 *   reservedBytes: 65536,
 * });
 * assert.match(text, /Requested bytes +\| +1\.50 KiB\| +2\.00 KiB/);
 * assert.match(text, /reserved bytes: 64\.00 KiB/);
 * ```
 */
export function formatStatsSummary(
  stats: object,
  options: MemorySummaryOptions = {},
  defaultTitle = "allot memory summary",
): string {
  validateObject(stats, "stats");
  validateMemorySummaryOptions(options);
  const title0 = options.title ?? defaultTitle;
  const abbreviated = options.abbreviated === true;
  const width = 79;
  const line = "=".repeat(width);
  const thin = "-".repeat(width);
  // deno-lint-ignore no-control-regex
  const one = title0.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, " ");
  const title = one.length > width - 3 ? `${one.slice(0, width - 4)}…` : one;
  const isBytes = (name: string) =>
    /bytes$/i.test(name) || name === "reserved" || name === "requested" ||
    name === "allocated";
  const cell = (text: string): string => text.padStart(12);
  const numbers: string[] = [];
  const rows: string[] = [];
  const row = (name: string, v: StatValues, bytes: boolean) => {
    const f = (n: number) => bytes ? formatBytes(n) : String(n);
    rows.push(
      `|${name.slice(0, 25).padEnd(25)}|${
        FIELDS.map((k) => cell(f(v[k]))).join("|")
      }|`,
    );
  };
  let entries: [string, unknown][];
  try {
    // read once, here: a record that traps (or a getter that throws) is
    // refused with a typed error, not passed on raw
    entries = Object.entries(stats).map(([name, value]) => [
      name,
      typeof value === "object" && value !== null
        ? _plainFigure(value as Record<string, unknown>)
        : value,
    ]);
  } catch (error) {
    throw new InvalidArgumentError(
      `Invalid stats: the record cannot be read (${
        error instanceof Error ? error.message : "a non-error was thrown"
      })`,
      { name: "stats", value: stats, limit: "a stats record" },
      { cause: error },
    );
  }
  for (const [name, value] of entries) {
    if (typeof value === "number") {
      const text = isBytes(name) ? formatBytes(value) : String(value);
      numbers.push(`${label(name).toLowerCase()}: ${text}`);
    } else if (isStatValues(value)) {
      rows.push(thin);
      row(` ${label(name)}`, value, isBytes(name));
    } else if (
      typeof value === "object" && value !== null &&
      isStatValues((value as Record<string, unknown>).all)
    ) {
      rows.push(thin);
      for (const [pool, suffix] of abbreviated ? [POOLS[0]] : POOLS) {
        const v = (value as Record<string, unknown>)[pool];
        if (!isStatValues(v)) continue;
        row(suffix === "" ? ` ${label(name)}` : suffix, v, isBytes(name));
      }
    }
  }
  const out = [line, `|${` ${title}`.padEnd(width - 2)}|`, line];
  // the plain figures, as many to a line as fit
  let current = "";
  for (const n of numbers) {
    if (current !== "" && current.length + n.length + 2 > width - 3) {
      out.push(`|${` ${current}`.padEnd(width - 2)}|`);
      current = "";
    }
    current = current === "" ? n : `${current}; ${n}`;
  }
  if (current !== "") out.push(`|${` ${current}`.padEnd(width - 2)}|`);
  if (numbers.length > 0) out.push(line);
  out.push(
    `|${" Metric".padEnd(25)}|${cell("Cur Usage")}|${cell("Peak Usage")}|${
      cell("Tot Alloc")
    }|${cell("Tot Freed")}|`,
  );
  out.push(...rows, line);
  return out.join("\n");
}
