/**
 * Where the runtime-like replay's time goes (issue #15's per-op target): each
 * stretch of operations between two awaits of `real_traces.ts`'s replay is
 * timed on its own, for this tree's `GpuCachingAllocator` (handles, and ids), TF.js's real
 * `BufferManager` and the no-op peer, and the stretch times are fitted as
 * `fixed + marginal × operations` (least squares over every stretch of every
 * round). `fixed` is what a stretch costs whatever its length (the first
 * operations after an await run with cold caches and predictors), `marginal`
 * what each further operation costs; the first operation after each await is
 * also timed alone (including one clock read).
 *
 * The replay loop mirrors `_replay_pass.ts`'s (the same peers' calls, a
 * `gc()` before each pass, one warm instance per peer, peers rotated per
 * round) and adds a clock read per stretch; `--await=` replaces what the
 * replay awaits at the trace's marks: `gpu` (the replay's
 * `queue.onSubmittedWorkDone()`), `task` (`setTimeout(0)`: an event-loop
 * turn, no GPU) or `micro` (`Promise.resolve()`: no event-loop turn). The
 * `--gc=no` leaves out the `gc()` before each pass. The
 * last column is the tight loop (no awaits, no `gc()`, the mean of 10
 * passes) for comparison.
 *
 * Run: `deno run -A --v8-flags=--expose-gc packages/webgpu/bench/stretch_costs.ts [--only=<part of a trace path>] [--rounds=9] [--await=gpu|task|micro] [--gc=no] [--clock=cpu|wall]`
 *
 * @module
 */

import { type ReplayOps, traceOps } from "@allot/trace";
import {
  makeStretchPeer,
  STRETCH_PEERS,
  type StretchPeer as Peer,
} from "./_stretch_peers.ts";
import { threadCpuClock } from "./_replay_pass.ts";
import { flag } from "../../../scripts/bench/import_at_ref.ts";
import {
  loadRecordedTrace,
  recordedTraceNames,
} from "../../../scripts/bench/recorded_traces.ts";

const only = flag("only", "");
const rounds = Number(flag("rounds", "9"));
const awaitFlag = flag("await", "gpu");
const clockFlag = flag("clock", "cpu");
/** `--gc=no`: no collection before each pass (the replay makes one). */
const collect = flag("gc", "yes") !== "no";
const cpuClock = clockFlag === "cpu" ? threadCpuClock() : undefined;
const now = cpuClock ?? (() => performance.now());

const adapter = await navigator.gpu?.requestAdapter();
if (!adapter) {
  console.log("no WebGPU adapter");
  Deno.exit(0);
}
const device = await adapter.requestDevice({
  requiredLimits: {
    maxBufferSize: adapter.limits.maxBufferSize,
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
  },
});
const wait: () => Promise<unknown> = awaitFlag === "micro"
  ? () => Promise.resolve()
  : awaitFlag === "task"
  ? () => new Promise((resolve) => setTimeout(resolve, 0))
  : () => device.queue.onSubmittedWorkDone();

let sink: unknown;
const kinds = STRETCH_PEERS.map(({ name, label }) => ({
  name: label,
  make: () => makeStretchPeer(name, device),
}));

/** One stretch: operations, its time and its first operation's (ms). */
type Stretch = [ops: number, ms: number, firstMs: number];

/** One pass; with `out`, every stretch is timed into it, awaiting at marks. */
async function pass(ops: ReplayOps, peer: Peer, out?: Stretch[]) {
  const live = new Map<number, unknown>();
  let n = 0, t = now(), first = 0, offsets = 0;
  for (let i = 0; i < ops.length; i++) {
    const c = ops.code[i];
    if (c === 0) {
      const h = peer.alloc(ops.size[i], ops.usage[i]);
      offsets += peer.use(h);
      live.set(ops.id[i], h);
    } else if (c === 1) {
      peer.free(live.get(ops.id[i]));
      live.delete(ops.id[i]);
    } else {
      if (out !== undefined) {
        if (n > 0) out.push([n, now() - t, first - t]);
        n = 0;
        await wait();
        t = now();
      }
      continue;
    }
    if (out !== undefined && n++ === 0) first = now();
  }
  if (out !== undefined && n > 0) out.push([n, now() - t, first - t]);
  for (const h of live.values()) peer.free(h);
  sink = offsets;
}

/** Least squares of stretch time on operations, in ns. */
function fit(stretches: Stretch[]) {
  let sx = 0, sy = 0, sxx = 0, sxy = 0, sf = 0;
  for (const [x, y, f] of stretches) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
    sf += f;
  }
  const m = stretches.length;
  const slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
  return {
    opsPerStretch: sx / m,
    perOp: (sy / sx) * 1e6,
    first: (sf / m) * 1e6,
    fixed: ((sy - slope * sx) / m) * 1e6,
    marginal: slope * 1e6,
  };
}

const gc = (globalThis as { gc?: () => void }).gc;
console.log(
  `await: ${awaitFlag}; clock: ${
    cpuClock === undefined ? "wall" : "thread CPU"
  }; ${rounds} rounds${collect ? "" : "; no gc() before passes"}`,
);
console.log(
  "| trace | peer | ops per stretch | ns/op | first op ns | fixed ns per stretch | marginal ns/op | tight ns/op |",
);
console.log("|---|---|---:|---:|---:|---:|---:|---:|");
for (const name of recordedTraceNames(only)) {
  const ops = traceOps(await loadRecordedTrace(name), "storage");
  const peers = kinds.map((k) => k.make());
  for (const p of peers) await pass(ops, p, []);
  const stretches: Stretch[][] = peers.map(() => []);
  const tight: number[] = peers.map(() => Infinity);
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < peers.length; j++) {
      const k = (j + r) % peers.length;
      if (collect) gc?.();
      await device.queue.onSubmittedWorkDone();
      await pass(ops, peers[k], stretches[k]);
    }
    for (let j = 0; j < peers.length; j++) {
      const k = (j + r) % peers.length;
      const t = now();
      for (let i = 0; i < 10; i++) await pass(ops, peers[k]);
      const count = ops.code.filter((c) => c < 2).length;
      tight[k] = Math.min(tight[k], ((now() - t) * 1e6) / (10 * count));
    }
  }
  peers.forEach((_, i) => {
    const f = fit(stretches[i]);
    console.log(
      `| ${name.replace(".jsonl.gz", "")} | ${kinds[i].name} | ${
        f.opsPerStretch.toFixed(1)
      } | ${f.perOp.toFixed(0)} | ${f.first.toFixed(0)} | ${
        f.fixed.toFixed(0)
      } | ${f.marginal.toFixed(0)} | ${tight[i].toFixed(0)} |`,
    );
  });
}
await device.queue.onSubmittedWorkDone();
device.destroy();
void sink;
