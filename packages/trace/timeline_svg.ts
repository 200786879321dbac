import {
  describeValue,
  formatBytes,
  InvalidArgumentError,
  optionOr,
  validateInteger,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import { _checkTimeline } from "./_check_timeline.ts";
import type { MemoryTimeline } from "./memory_timeline.ts";

/** Colors of the tag bands (the last one is "other"). */
export const PALETTE: readonly string[] = Object.freeze([
  "#4e79a7",
  "#f28e2b",
  "#e15759",
  "#76b7b2",
  "#59a14f",
  "#edc948",
  "#b07aa1",
  "#ff9da7",
  "#9c755f",
  "#86bcb6",
  "#d37295",
  "#bab0ac",
]);

/** Options of {@linkcode timelineSvg}. */
export interface TimelineSvgOptions {
  /** Pixels (default 800). */
  readonly width?: number;
  /** Pixels (default 260). */
  readonly height?: number;
}

/**
 * Groups allocations by tag: the largest tags (by bytes at the live peak,
 * then overall) get their own band, the rest share "other".
 *
 * @example
 * ```ts
 * import { memoryTimeline, parseTrace, tagGroups } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1}`,
 *   `{"t":0,"op":"alloc","id":1,"size":1024,"tag":"weights"}`,
 *   `{"t":1,"op":"alloc","id":2,"size":64,"tag":"act"}`,
 *   `{"t":2,"op":"alloc","id":3,"size":32,"tag":"tmp"}`,
 * ].join("\n"));
 * const { group, names } = tagGroups(memoryTimeline(trace), 1);
 * assert.deepEqual(names, ["weights", "other"]);
 * assert.deepEqual([...group], [0, 1, 1]);
 * ```
 */
export function tagGroups(
  tl: MemoryTimeline,
  most: number = PALETTE.length - 1,
): {
  group: Int32Array;
  names: string[];
} {
  _checkTimeline(tl);
  validateInteger(most, 0, PALETTE.length - 1, "most");
  const weight = new Float64Array(tl.tags.length + 1);
  const used = new Uint8Array(tl.tags.length + 1);
  for (const a of tl.allocations) {
    const live = a.start <= tl.peakLiveAt && a.end > tl.peakLiveAt;
    weight[a.tag + 1] += a.size * (live ? 1e6 : 1);
    used[a.tag + 1] = 1;
  }
  // every tag that has an allocation is ranked, zero-byte ones last: a
  // zero-byte allocation never lands in another tag's group
  const order = [...weight.keys()].filter((k) => used[k] !== 0)
    .sort((a, b) => weight[b] - weight[a] || a - b);
  const top = order.slice(0, most);
  const rank = new Map(top.map((k, i) => [k, i]));
  const names = top.map((k) => (k === 0 ? "(no tag)" : tl.tags[k - 1]));
  const hasOther = order.length > top.length;
  if (hasOther) names.push("other");
  const group = new Int32Array(tl.allocations.length);
  tl.allocations.forEach((a, i) => {
    group[i] = rank.get(a.tag + 1) ?? names.length - 1;
  });
  return { group, names };
}

/**
 * A static SVG of the timeline: live bytes stacked by tag, held bytes as a
 * line, step marks as ticks; for READMEs and CI logs.
 *
 * @example
 * ```ts
 * import { memoryTimeline, parseTrace, timelineSvg } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1,"source":"demo"}`,
 *   `{"t":0,"op":"create","id":0,"size":1024,"usage":128,"tag":"weights"}`,
 *   `{"t":1,"op":"create","id":1,"size":512,"usage":128,"tag":"act"}`,
 *   `{"t":2,"op":"destroy","id":1}`,
 * ].join("\n"));
 * const svg = timelineSvg(memoryTimeline(trace), { width: 400, height: 120 });
 * assert.ok(svg.startsWith("<svg"));
 * ```
 */
export function timelineSvg(
  tl: MemoryTimeline,
  options: TimelineSvgOptions = {},
): string {
  _checkTimeline(tl);
  validateObject(options, "options");
  validateOptionKeys(options, ["width", "height"], "timelineSvg()");
  const W = optionOr(options.width, 800),
    H = optionOr(options.height, 260);
  if (
    typeof W !== "number" || typeof H !== "number" ||
    !(W >= 100 && W <= 10000) || !(H >= 60 && H <= 10000)
  ) {
    throw new InvalidArgumentError(
      `Invalid size: width must be in [100, 10000] and height in [60, 10000], received ${
        describeValue(W)
      } x ${describeValue(H)}`,
      { name: "width, height", value: [W, H], limit: [10000, 10000] },
    );
  }
  const pad = { l: 70, r: 10, t: 24, b: 36 };
  const w = W - pad.l - pad.r, h = H - pad.t - pad.b;
  const n = tl.time.length;
  const { group, names } = tagGroups(tl);
  const G = names.length;
  const cols = Math.max(1, Math.min(w, n));
  // bytes per group at the sampled point of each column (the column's max-live point)
  const cur = new Float64Array(G);
  const sampled: Float64Array[] = [];
  const heldCol = new Float64Array(cols);
  let i = 0;
  for (let c = 0; c < cols; c++) {
    const end = Math.floor(((c + 1) * n) / cols);
    let best = -1, bestLive = -1, snap: Float64Array | undefined;
    for (; i < end; i++) {
      const s = tl.subject[i];
      if (s >= 0) cur[group[s]] += tl.sign[i] * tl.allocations[s].size;
      if (tl.live[i] > bestLive) {
        bestLive = tl.live[i], best = i, snap = cur.slice();
      }
      if (tl.held[i] > heldCol[c]) heldCol[c] = tl.held[i];
    }
    sampled.push(snap ?? cur.slice());
    void best;
  }
  const top = Math.max(tl.peakHeld, tl.peakLive, 1);
  const x = (c: number) => pad.l + (c / cols) * w;
  const y = (b: number) => pad.t + h - (b / top) * h;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
  );
  out.push(`<rect width="${W}" height="${H}" fill="#fff"/>`);
  out.push(
    `<text x="${pad.l}" y="15" font-size="12">${
      esc(tl.source || "memory")
    }: peak live ${formatBytes(tl.peakLive)}, peak held ${
      formatBytes(tl.peakHeld)
    }, ${tl.allocations.length} allocations</text>`,
  );
  for (let g = G - 1; g >= 0; g--) {
    const up: string[] = [], down: string[] = [];
    for (let c = 0; c < cols; c++) {
      let below = 0;
      for (let k = 0; k < g; k++) below += sampled[c][k];
      const above = below + sampled[c][g];
      up.push(
        `${x(c).toFixed(1)},${y(above).toFixed(1)} ${x(c + 1).toFixed(1)},${
          y(above).toFixed(1)
        }`,
      );
      down.push(
        `${x(c + 1).toFixed(1)},${y(below).toFixed(1)} ${x(c).toFixed(1)},${
          y(below).toFixed(1)
        }`,
      );
    }
    out.push(
      `<polygon fill="${
        PALETTE[g === G - 1 && names[g] === "other" ? PALETTE.length - 1 : g]
      }" points="${up.join(" ")} ${down.reverse().join(" ")}"><title>${
        esc(names[g])
      }</title></polygon>`,
    );
  }
  if (tl.hasAllocs) {
    const pts: string[] = [];
    for (let c = 0; c < cols; c++) {
      pts.push(
        `${x(c).toFixed(1)},${y(heldCol[c]).toFixed(1)} ${
          x(c + 1).toFixed(1)
        },${y(heldCol[c]).toFixed(1)}`,
      );
    }
    out.push(
      `<polyline fill="none" stroke="#000" stroke-width="1.2" points="${
        pts.join(" ")
      }"><title>held</title></polyline>`,
    );
  }
  for (const s of tl.steps) {
    const xs = (pad.l + (s.at / Math.max(1, n)) * w).toFixed(1);
    out.push(
      `<line x1="${xs}" x2="${xs}" y1="${pad.t + h}" y2="${
        pad.t + h + 4
      }" stroke="#888"/>`,
    );
  }
  for (let k = 0; k <= 4; k++) {
    const b = (top * k) / 4;
    out.push(
      `<text x="${pad.l - 4}" y="${y(b) + 4}" text-anchor="end">${
        formatBytes(b)
      }</text>`,
    );
    out.push(
      `<line x1="${pad.l}" x2="${pad.l + w}" y1="${y(b)}" y2="${
        y(b)
      }" stroke="#eee"/>`,
    );
  }
  let lx = pad.l;
  names.forEach((nm, g) => {
    const color =
      PALETTE[nm === "other" && g === G - 1 ? PALETTE.length - 1 : g];
    out.push(
      `<rect x="${lx}" y="${
        H - 14
      }" width="10" height="10" fill="${color}"/><text x="${lx + 13}" y="${
        H - 5
      }">${esc(nm.slice(0, 18))}</text>`,
    );
    lx += 20 + Math.min(18, nm.length) * 6;
  });
  if (tl.hasAllocs) {
    out.push(
      `<line x1="${lx}" x2="${lx + 12}" y1="${H - 9}" y2="${
        H - 9
      }" stroke="#000"/><text x="${lx + 15}" y="${H - 5}">held</text>`,
    );
  }
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}

function esc(s: string): string {
  return s.replace(
    /[&<>"]/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!,
  );
}
