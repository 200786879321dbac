import { formatBytes } from "@allot/core";
import type { ReplayReport } from "./replay.ts";

/** A plain-text side-by-side table of a replay. */
export function formatReplay(r: ReplayReport): string {
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
      (r.recordedPeakReservedBytes / r.peakRequestedBytes).toFixed(2),
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
        (p.peakReservedBytes / r.peakRequestedBytes).toFixed(2),
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
