/** The report page's script (plain browser JavaScript, no dependencies). */
export const _REPORT_SCRIPT = String.raw`
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const n = D.time.length, A = D.allocs;
const units = ["B", "KiB", "MiB", "GiB", "TiB"];
function fmt(b) { let u = 0, v = Math.abs(b); while (v >= 1024 && u < 4) { v /= 1024; u++; }
  return (b < 0 ? "-" : "") + (u === 0 ? String(v) : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)) + " " + units[u]; }
function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]); }
const tagName = (t) => t < 0 ? "(no tag)" : D.tags[t];
const isLive = (a, p) => a[3] <= p && a[4] > p;
function stackText(sid, max) {
  if (sid < 0) return "(no stack recorded)";
  const st = D.stacks[sid].map((k) => D.frames[k]);
  const lines = st.slice(0, max).map((f) => (f[0] === "u" ? "  " : f[0] === "a" ? "  [allot] " : "  [runtime] ") + f.slice(1));
  if (st.length > max) lines.push("  ... " + (st.length - max) + " more");
  return lines.join("\n");
}
function firstUser(sid) {
  if (sid < 0) return "";
  const st = D.stacks[sid].map((k) => D.frames[k]);
  const f = st.find((x) => x[0] === "u") || st[0];
  return f ? f.slice(1) : "";
}
// series per group
function build(groupOf, G) {
  const s = Array.from({ length: G }, () => new Float64Array(n));
  const cur = new Float64Array(G);
  for (let i = 0; i < n; i++) {
    const k = D.subject[i];
    if (k >= 0) { const a = A[k]; cur[groupOf(k)] += (a[3] === i ? 1 : -1) * a[0]; }
    for (let g = 0; g < G; g++) s[g][i] = cur[g];
  }
  return s;
}
const modes = {};
function mode(name) {
  if (modes[name]) return modes[name];
  let names, groupOf;
  if (name === "tag") { names = D.groups; groupOf = (k) => A[k][7]; }
  else {
    const live = [];
    for (let k = 0; k < A.length; k++) if (isLive(A[k], D.peakLiveAt)) live.push(k);
    live.sort((x, y) => A[y][0] - A[x][0]);
    const top = live.slice(0, 11), rank = new Map(top.map((k, i) => [k, i]));
    names = top.map((k) => fmt(A[k][0]) + " " + tagName(A[k][1])).concat(["other"]);
    groupOf = (k) => rank.has(k) ? rank.get(k) : top.length;
  }
  const colors = names.map((nm, g) => nm === "other" && g === names.length - 1 ? D.palette[D.palette.length - 1] : D.palette[g % (D.palette.length - 1)]);
  return modes[name] = { names, colors, series: build(groupOf, names.length) };
}
let M = mode("tag");
const cv = document.getElementById("tl"), tip = document.getElementById("tip");
let lo = 0, hi = Math.max(1, n), colIdx = [], scaleTop = 1, geo = null;
function legend() {
  document.getElementById("legend").innerHTML = M.names.map((nm, g) => '<span><i style="background:' + M.colors[g] + '"></i>' + esc(nm) + "</span>").join("") + (D.hasAllocs ? '<span><i style="background:#000;height:2px;vertical-align:middle"></i>held</span>' : "");
}
function draw() {
  const dpr = window.devicePixelRatio || 1, W = cv.clientWidth, H = cv.clientHeight;
  cv.width = W * dpr; cv.height = H * dpr;
  const c = cv.getContext("2d"); c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.fillStyle = "#fff"; c.fillRect(0, 0, W, H);
  const pl = 70, pb = 20, w = W - pl - 6, h = H - pb - 8;
  const cols = Math.max(1, Math.min(w, hi - lo));
  colIdx = new Array(cols); const heldCol = new Float64Array(cols);
  let top = 1;
  for (let k = 0; k < cols; k++) {
    const i0 = Math.floor(lo + k * (hi - lo) / cols), i1 = Math.max(i0 + 1, Math.floor(lo + (k + 1) * (hi - lo) / cols));
    let best = i0;
    for (let i = i0; i < i1 && i < n; i++) { if (D.live[i] > D.live[best]) best = i; if (D.held[i] > heldCol[k]) heldCol[k] = D.held[i]; }
    colIdx[k] = best; top = Math.max(top, D.live[best], heldCol[k]);
  }
  scaleTop = top;
  const cw = w / cols, G = M.names.length;
  geo = { pl, w, h, cols, cw, top };
  for (let k = 0; k < cols; k++) {
    const i = colIdx[k]; let y = 0;
    if (i >= n) continue;
    for (let g = 0; g < G; g++) {
      const v = M.series[g][i]; if (v <= 0) continue;
      c.fillStyle = M.colors[g];
      c.fillRect(pl + k * cw, 8 + h - (y + v) / top * h, Math.ceil(cw), v / top * h);
      y += v;
    }
  }
  if (D.hasAllocs) {
    c.strokeStyle = "#000"; c.lineWidth = 1.2; c.beginPath();
    for (let k = 0; k < cols; k++) { const y = 8 + h - heldCol[k] / top * h; if (k === 0) c.moveTo(pl, y); else c.lineTo(pl + k * cw, y); c.lineTo(pl + (k + 1) * cw, y); }
    c.stroke();
  }
  c.fillStyle = "#444"; c.font = "11px sans-serif"; c.textAlign = "right";
  for (let q = 0; q <= 4; q++) { const b = top * q / 4, y = 8 + h - b / top * h; c.fillText(fmt(b), pl - 4, y + 4); c.fillStyle = "#eee"; c.fillRect(pl, y, w, 1); c.fillStyle = "#444"; }
  c.textAlign = "left"; c.fillStyle = "#888";
  for (const [at, name] of D.steps) { if (at < lo || at > hi) continue; const x = pl + (at - lo) / (hi - lo) * w; c.fillRect(x, 8 + h, 1, 5); }
  c.fillStyle = "#444";
  c.fillText("events " + lo + "–" + hi + " of " + n + (n ? "  (t " + D.time[Math.min(lo, n - 1)] + "–" + D.time[Math.max(0, Math.min(hi, n) - 1)] + " ms)" : ""), pl, H - 4);
}
function colAt(ev) { const r = cv.getBoundingClientRect(); const k = Math.floor((ev.clientX - r.left - geo.pl) / geo.cw); return k < 0 || k >= geo.cols ? -1 : k; }
cv.addEventListener("mousemove", (ev) => {
  if (drag) { const dx = ev.clientX - drag.x, span = drag.hi - drag.lo, sh = Math.round(-dx / geo.w * span);
    lo = Math.max(0, Math.min(n - span, drag.lo + sh)); hi = lo + span; draw(); return; }
  const k = colAt(ev); if (k < 0 || !geo) { tip.style.display = "none"; return; }
  const i = colIdx[k]; if (i === undefined || i >= n) return;
  const r = cv.getBoundingClientRect(), yb = (geo.h + 8 - (ev.clientY - r.top)) / geo.h * geo.top;
  let acc = 0, band = -1;
  for (let g = 0; g < M.names.length; g++) { acc += M.series[g][i]; if (yb <= acc) { band = g; break; } }
  let s = "event " + i + " at " + D.time[i] + " ms\nlive " + fmt(D.live[i]) + ", held " + fmt(D.held[i]);
  if (band >= 0) s += "\nband: " + M.names[band] + " " + fmt(M.series[band][i]);
  const k2 = D.subject[i];
  if (k2 >= 0) { const a = A[k2]; s += "\n\n" + (a[3] === i ? "alloc " : "free ") + fmt(a[0]) + " (" + a[0] + " B), tag " + tagName(a[1]) + "\nstack:\n" + stackText(a[2], 14); }
  else s += "\n\n(buffer " + (D.held[i] >= (i ? D.held[i - 1] : 0) ? "created" : "destroyed") + ")";
  tip.textContent = s; tip.style.display = "block";
  tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 660) + "px"; tip.style.top = (ev.clientY + 14) + "px";
});
cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
let drag = null;
cv.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, lo, hi }; });
window.addEventListener("mouseup", () => { drag = null; });
cv.addEventListener("wheel", (ev) => {
  ev.preventDefault(); const k = colAt(ev); const f = k < 0 ? 0.5 : k / geo.cols;
  const span = hi - lo, ns = Math.max(10, Math.min(n, Math.round(span * (ev.deltaY < 0 ? 0.8 : 1.25))));
  const at = lo + f * span; lo = Math.max(0, Math.round(at - f * ns)); hi = Math.min(n, lo + ns); lo = Math.max(0, hi - ns); draw();
}, { passive: false });
cv.addEventListener("dblclick", () => { lo = 0; hi = Math.max(1, n); draw(); });
for (const r of document.querySelectorAll('input[name="mode"]')) r.addEventListener("change", () => { M = mode(r.value); legend(); draw(); });
window.addEventListener("resize", draw);
// largest allocations at the live peak
(function () {
  const p = D.peakLiveAt, rows = [];
  for (let k = 0; k < A.length; k++) if (isLive(A[k], p)) rows.push(k);
  rows.sort((x, y) => A[y][0] - A[x][0]);
  document.querySelector("#largest tbody").innerHTML = rows.slice(0, 25).map((k) => { const a = A[k];
    return "<tr><td>" + fmt(a[0]) + "</td><td>" + esc(tagName(a[1])) + "</td><td><details><summary>" + esc(firstUser(a[2])) + "</summary><pre>" + esc(stackText(a[2], 40)) + "</pre></details></td></tr>"; }).join("");
})();
// segment map at the held peak
(function () {
  const p = D.peakHeldAt, inSeg = new Map();
  for (let k = 0; k < A.length; k++) { const a = A[k]; if (a[5] < 0 || !isLive(a, p)) continue; if (!inSeg.has(a[5])) inSeg.set(a[5], []); inSeg.get(a[5]).push(k); }
  const segs = D.segs.filter((s) => s[3] <= p && s[4] > p).sort((x, y) => y[1] - x[1]);
  const shown = segs.slice(0, 300), max = shown.length ? shown[0][1] : 1;
  let free = 0; for (const s of segs) { let used = 0; for (const k of inSeg.get(s[0]) || []) used += A[k][0]; free += Math.max(0, s[1] - used); }
  document.getElementById("segnote").textContent = segs.length ? segs.length + " buffers/segments held at event " + p + " (" + fmt(D.held[p]) + "), " + fmt(free) + " of them free (grey)" + (segs.length > shown.length ? "; largest " + shown.length + " shown" : "") : "no buffers or segments in this trace";
  const groupColor = (k) => modes.tag.colors[A[k][7]];
  document.getElementById("segmap").innerHTML = shown.map((s) => {
    const blocks = (inSeg.get(s[0]) || []).map((k) => { const a = A[k], off = Math.max(0, a[6]);
      return '<div title="' + esc(fmt(a[0]) + " " + tagName(a[1])) + '" style="left:' + (off / s[1] * 100) + "%;width:" + Math.max(0.2, a[0] / s[1] * 100) + "%;background:" + groupColor(k) + '"></div>'; }).join("");
    return '<div class="seg" title="' + esc("buffer " + s[0] + ": " + fmt(s[1]) + ", usage 0x" + s[2].toString(16)) + '" style="width:' + Math.max(1, s[1] / max * 100) + '%">' + blocks + "</div>";
  }).join("");
})();
// what-if
(function () {
  const w = D.whatIf, el = document.getElementById("whatif");
  if (!w) { el.textContent = "no replay in this report (run: mem report TRACE -o OUT.html, which replays by default)"; return; }
  const live = w.peakRequestedBytes, rows = [];
  if (w.recordedPeakReservedBytes !== undefined && w.recordedPeakReservedBytes !== null) rows.push(["your app (recorded)", w.recordedPeakReservedBytes, w.recordedBuffersCreated, "", ""]);
  for (const p of w.policies) rows.push([p.name, p.peakReservedBytes, p.buffersCreated, p.buffersCreatedAfterFirstStep, p.error ? "error: " + p.error : p.nsPerOp.toFixed(0)]);
  const mine = w.recordedPeakReservedBytes, allot = w.policies.find((p) => p.name === "allot-caching");
  el.innerHTML = (mine && allot ? "<p><b>Your app held " + fmt(mine) + "; allot's default would hold " + fmt(allot.peakReservedBytes) + "</b> (peak live " + fmt(live) + ", " + esc(w.allocations) + " allocations, " + esc(w.usage) + " buffers).</p>" : "") +
    '<table id="whatif-table"><thead><tr><th>policy</th><th>peak held</th><th>held / live</th><th>buffers created</th><th>after 1st step</th><th>ns / op</th></tr></thead><tbody>' +
    rows.map((r) => "<tr><td>" + esc(r[0]) + "</td><td>" + fmt(r[1]) + "</td><td>" + (live ? (r[1] / live).toFixed(2) : "") + "</td><td>" + esc(r[2]) + "</td><td>" + esc(r[3]) + "</td><td>" + esc(r[4]) + "</td></tr>").join("") + "</tbody></table>";
})();
legend(); draw();
window.__reportReadyMs = performance.now();
`;
