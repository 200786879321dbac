import {
  describeValue,
  formatBytes,
  InvalidArgumentError,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import { _checkTimeline } from "./_check_timeline.ts";
import { _checkReplayReport } from "./replay_table.ts";
import type { MemoryTimeline } from "./memory_timeline.ts";
import type { ReplayReport } from "./replay.ts";
import { PALETTE, tagGroups, timelineSvg } from "./timeline_svg.ts";
import { _REPORT_SCRIPT } from "./_report_script.ts";

/** Options of {@linkcode reportHtml}. */
export interface ReportOptions {
  /** A what-if replay to show side by side. */
  readonly whatIf?: ReplayReport;
  /** The page title (default: the trace's source). */
  readonly title?: string;
}

const KIND = { user: "u", allot: "a", runtime: "r" } as const;

/**
 * One self-contained HTML page (no network, no build step; open it from
 * disk): a zoomable timeline of live and held bytes stacked by tag or by
 * allocation, with size, tag and stack on hover; the segment map at the held
 * peak; the largest allocations at the live peak; and the what-if table.
 *
 * @example
 * ```ts
 * import { memoryTimeline, parseTrace, replayTrace, reportHtml } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1,"source":"demo"}`,
 *   `{"t":0,"op":"create","id":0,"size":1024,"usage":128,"tag":"weights"}`,
 *   `{"t":1,"op":"create","id":1,"size":512,"usage":128,"tag":"act"}`,
 *   `{"t":2,"op":"destroy","id":1}`,
 * ].join("\n"));
 * const html = reportHtml(memoryTimeline(trace), {
 *   title: "demo",
 *   whatIf: replayTrace(trace, { repeat: 1 }),
 * });
 * assert.match(html, /<html/i);
 * ```
 */
export function reportHtml(
  tl: MemoryTimeline,
  options: ReportOptions = {},
): string {
  _checkTimeline(tl);
  validateObject(options, "options");
  validateOptionKeys(options, ["whatIf", "title"], "reportHtml()");
  const whatIf = options.whatIf;
  if (whatIf !== undefined) _checkReplayReport(whatIf);
  if (options.title !== undefined && typeof options.title !== "string") {
    throw new InvalidArgumentError(
      `Invalid title: must be a string, received ${
        describeValue(options.title)
      }`,
      { name: "title", value: options.title, limit: "a string" },
    );
  }
  const { group, names } = tagGroups(tl);
  const r = (v: number) => Math.round(v * 1000) / 1000;
  const frames: string[] = [];
  const frameIds = new Map<string, number>();
  const frameId = (f: string) => {
    let i = frameIds.get(f);
    if (i === undefined) frameIds.set(f, i = frames.push(f) - 1);
    return i;
  };
  const data = {
    source: tl.source,
    hasAllocs: tl.hasAllocs,
    peakLive: tl.peakLive,
    peakLiveAt: tl.peakLiveAt,
    peakHeld: tl.peakHeld,
    peakHeldAt: tl.peakHeldAt,
    dropped: tl.dropped,
    time: Array.from(tl.time, r),
    live: Array.from(tl.live),
    held: Array.from(tl.held),
    subject: Array.from(tl.subject),
    allocs: tl.allocations.map((a, i) => [
      a.size,
      a.tag,
      a.stack,
      a.start,
      a.end,
      a.buffer ?? -1,
      a.offset ?? -1,
      group[i],
    ]),
    segs: tl.segments.map((
      s,
    ) => [s.id, s.size, s.usage, s.start, s.end, s.tag]),
    tags: tl.tags,
    groups: names,
    palette: PALETTE,
    stacks: tl.stacks.map((st) => st.map((f) => frameId(KIND[f.kind] + f.at))),
    frames,
    steps: tl.steps.map((s) => [s.at, s.name]),
    whatIf: options.whatIf ?? null,
  };
  const title = options.title ?? (tl.source || "memory report");
  let json: string;
  try {
    json = JSON.stringify(data).replace(/</g, "\\u003c");
  } catch (error) {
    throw new InvalidArgumentError(
      `Invalid whatIf: must be plain JSON data (${(error as Error)?.message})`,
      { name: "whatIf", value: whatIf, limit: "JSON data" },
    );
  }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>${esc(title)}</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px;margin:0 0 8px}h2{font-size:15px;margin:18px 0 6px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;padding:6px 10px}
.card b{display:block;font-size:16px}
#tl{width:100%;height:340px;border:1px solid #ccc;cursor:crosshair;display:block}
#tip{position:fixed;pointer-events:none;background:#fffff0;border:1px solid #999;padding:6px;max-width:640px;font-size:12px;display:none;white-space:pre-wrap;z-index:9}
table{border-collapse:collapse}td,th{border-bottom:1px solid #eee;padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}
.f-u{color:#000}.f-a{color:#2a6}.f-r{color:#999}
.seg{position:relative;height:14px;background:#e6e6e6;margin:2px 0;border:1px solid #bbb}
.seg div{position:absolute;top:0;bottom:0}
.legend span{display:inline-block;margin-right:10px}.legend i{display:inline-block;width:10px;height:10px;margin-right:3px}
.note{color:#666}
</style></head><body>
<h1>${esc(title)}</h1>
<div class="cards">
<div class="card">peak live<b id="peak-live">${
    formatBytes(tl.peakLive)
  }</b></div>
<div class="card">peak held<b id="peak-held">${
    formatBytes(tl.peakHeld)
  }</b></div>
<div class="card">allocations<b id="alloc-count">${tl.allocations.length}</b></div>
<div class="card">buffers/segments<b id="seg-count">${tl.segments.length}</b></div>
${
    tl.dropped
      ? `<div class="card">dropped entries<b id="dropped">${tl.dropped}</b></div>`
      : ""
  }
</div>
<h2>Timeline</h2>
<div><label><input type="radio" name="mode" value="tag" checked> stacked by tag</label>
<label><input type="radio" name="mode" value="alloc"> by allocation (largest 11 apart)</label>
<span class="note">wheel: zoom, drag: pan, double-click: reset; black line: held bytes</span></div>
<canvas id="tl"></canvas>
<div class="legend" id="legend"></div>
<div id="tip"></div>
<h2>Largest allocations at the live peak</h2>
<table id="largest"><thead><tr><th>size</th><th>tag</th><th>where (first user frame)</th></tr></thead><tbody></tbody></table>
<h2>Segment map at the held peak</h2>
<div class="note" id="segnote"></div>
<div id="segmap"></div>
<h2>What if</h2>
<div id="whatif"></div>
<h2>Static timeline</h2>
<details><summary>SVG</summary>${timelineSvg(tl)}</details>
<script id="data" type="application/json">${json}</script>
<script>${_REPORT_SCRIPT}</script>
</body></html>
`;
}

function esc(s: string): string {
  return s.replace(
    /[&<>"]/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!,
  );
}
