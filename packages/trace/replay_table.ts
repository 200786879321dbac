import { describeValue, formatBytes, InvalidArgumentError } from "@allot/core";
import type { ReplayReport } from "./replay.ts";

function badReport(what: string, value: unknown): never {
  throw new InvalidArgumentError(
    `Invalid replay report: ${what}, received ${describeValue(value)}`,
    { name: "report", value, limit: "what replayTrace() returns" },
  );
}

/** Checks that `r` has the shape `replayTrace()` gives (internal). */
export function _checkReplayReport(r: unknown): ReplayReport {
  if (r === null || typeof r !== "object") badReport("not an object", r);
  const o = r as ReplayReport;
  for (const k of ["peakRequestedBytes", "allocations"] as const) {
    if (typeof o[k] !== "number") badReport(`${k} must be a number`, o[k]);
  }
  for (
    const k of ["recordedPeakReservedBytes", "recordedBuffersCreated"] as const
  ) {
    if (o[k] !== undefined && typeof o[k] !== "number") {
      badReport(`${k} must be a number or undefined`, o[k]);
    }
  }
  // written into the report's page: only the values a replay gives
  if (o.usage !== "all" && o.usage !== "storage") {
    badReport('usage must be "all" or "storage"', o.usage);
  }
  if (o.from !== "alloc" && o.from !== "create") {
    badReport('from must be "alloc" or "create"', o.from);
  }
  if (!Array.isArray(o.policies)) {
    badReport("policies must be an array", o.policies);
  }
  for (const p of o.policies) {
    if (p === null || typeof p !== "object") {
      badReport("a row must be an object", p);
    }
    if (typeof p.name !== "string") {
      badReport("a row's name must be a string", p.name);
    }
    if (p.error !== undefined && typeof p.error !== "string") {
      badReport("a row's error must be a string", p.error);
    }
    for (
      const k of [
        "peakReservedBytes",
        "buffersCreated",
        "buffersCreatedAfterFirstStep",
        "nsPerOp",
      ] as const
    ) {
      if (typeof p[k] !== "number") {
        badReport(`a row's ${k} must be a number`, p[k]);
      }
    }
  }
  return o;
}

/** held/live, or "-" when nothing was live (0/0 printed "NaN"). */
function ratio(held: number, live: number): string {
  return live > 0 ? (held / live).toFixed(2) : "-";
}

/**
 * A plain-text side-by-side table of a replay.
 *
 * @example
 * ```ts
 * import { formatReplay, parseTrace, replayTrace } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1,"source":"demo"}`,
 *   `{"t":0,"op":"create","id":0,"size":1024,"usage":128,"tag":"weights"}`,
 *   `{"t":1,"op":"create","id":1,"size":512,"usage":128,"tag":"act"}`,
 *   `{"t":2,"op":"destroy","id":1}`,
 * ].join("\n"));
 * const table = formatReplay(replayTrace(trace, { repeat: 1 }));
 * assert.match(table, /peak held/);
 * assert.match(table, /tfjs-exact/);
 * ```
 */
export function formatReplay(r: ReplayReport): string {
  _checkReplayReport(r);
  const rows: string[][] = [[
    "policy",
    "peak held",
    "held/live",
    "buffers",
    "after 1st step",
    "ns/op",
  ]];
  if (r.recordedPeakReservedBytes !== undefined) {
    rows.push([
      "your app (recorded)",
      formatBytes(r.recordedPeakReservedBytes),
      ratio(r.recordedPeakReservedBytes, r.peakRequestedBytes),
      String(r.recordedBuffersCreated),
      "",
      "",
    ]);
  }
  for (const p of r.policies) {
    rows.push(
      p.error ? [p.name, "error: " + p.error, "", "", "", ""] : [
        p.name,
        formatBytes(p.peakReservedBytes),
        ratio(p.peakReservedBytes, r.peakRequestedBytes),
        String(p.buffersCreated),
        String(p.buffersCreatedAfterFirstStep),
        p.nsPerOp.toFixed(0),
      ],
    );
  }
  const w = rows[0].map((_, c) =>
    Math.max(...rows.map((row) => row[c].length))
  );
  const lines = rows.map((row) =>
    row.map((s, c) => c === 0 ? s.padEnd(w[c]) : s.padStart(w[c])).join("  ")
  );
  const allot = r.policies.find((p) => p.name === "allot-caching");
  const head = `peak live ${
    formatBytes(r.peakRequestedBytes)
  } over ${r.allocations} allocations (${r.usage} buffers, from ${r.from} events)`;
  const say = r.recordedPeakReservedBytes !== undefined && allot && !allot.error
    ? `\nyour app held ${
      formatBytes(r.recordedPeakReservedBytes)
    }; allot's default would hold ${formatBytes(allot.peakReservedBytes)}`
    : "";
  return head + say + "\n" + lines.join("\n");
}
