/**
 * What runs between two stretches of a replay sets what each operation costs
 * (issue #15's per-op target): one peer per process (no other peer's data in
 * the caches), one warm instance, the storage requests of one recorded trace
 * replayed pass after pass with a `gc()` before each pass, and at each of the
 * trace's await marks one of:
 *
 * - `none`: nothing (the tight loop);
 * - `micro`: `await Promise.resolve()` (no event-loop turn);
 * - `task`: `await` a `setTimeout(0)` (an event-loop turn, no GPU);
 * - `gpu`: `await device.queue.onSubmittedWorkDone()` (what the runtime-like
 *   replay awaits);
 * - `evict`: no await; 16 MiB of data written (every cache line of it), so
 *   the next operations find their data out of the caches but the code path
 *   the same.
 *
 * Only the operations are timed (thread CPU clock; the awaits and the
 * eviction are not), and each pass's time per operation is taken; the figure
 * is the median of the passes after `--warm` untimed ones. The replay loop is
 * `stretch_costs.ts`'s (a `Map` from the trace's ids to handles, the buffer
 * and offset read per allocation), so `no-op` is the harness's own cost.
 *
 * Run: `deno run -A --v8-flags=--expose-gc packages/webgpu/bench/between_stretches.ts --peer=allot|allot-ids|tfjs|no-op --between=none|micro|task|gpu|evict [--only=cnn-training] [--passes=16] [--warm=4]`
 *
 * @module
 */

import { traceOps } from "@allot/trace";
import { makeStretchPeer } from "./_stretch_peers.ts";
import { threadCpuClock } from "./_replay_pass.ts";
import { flag } from "../../../scripts/bench/import_at_ref.ts";
import {
  loadRecordedTrace,
  recordedTraceNames,
} from "../../../scripts/bench/recorded_traces.ts";

const only = flag("only", "cnn-training");
const peerName = flag("peer", "allot");
const between = flag("between", "gpu");
const passes = Number(flag("passes", "16"));
const warm = Number(flag("warm", "4"));
const now = threadCpuClock() ?? (() => performance.now());

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

let sink: unknown;

const junk = new Int32Array(4 << 20);
/** Writes one word of every cache line of 16 MiB. */
function evict(): void {
  for (let i = 0; i < junk.length; i += 16) junk[i]++;
}

const wait: (() => Promise<unknown>) | null = between === "micro"
  ? () => Promise.resolve()
  : between === "task"
  ? () => new Promise((resolve) => setTimeout(resolve, 0))
  : between === "gpu"
  ? () => device.queue.onSubmittedWorkDone()
  : null;

const name = recordedTraceNames(only)[0];
const ops = traceOps(await loadRecordedTrace(name), "storage");
const peer = makeStretchPeer(peerName, device);

/** One pass; its operations' time per operation (ns). */
async function pass(): Promise<number> {
  const live = new Map<number, unknown>();
  let n = 0, ms = 0, t = now(), offsets = 0;
  for (let i = 0; i < ops.length; i++) {
    const c = ops.code[i];
    if (c === 0) {
      const h = peer.alloc(ops.size[i], ops.usage[i]);
      offsets += peer.use(h);
      live.set(ops.id[i], h);
      n++;
    } else if (c === 1) {
      peer.free(live.get(ops.id[i]));
      live.delete(ops.id[i]);
      n++;
    } else if (wait !== null) {
      ms += now() - t;
      await wait();
      t = now();
    } else if (between === "evict") {
      ms += now() - t;
      evict();
      t = now();
    }
  }
  ms += now() - t;
  for (const h of live.values()) peer.free(h);
  sink = offsets;
  return (ms * 1e6) / n;
}

const gc = (globalThis as { gc?: () => void }).gc;
const perOp: number[] = [];
for (let p = 0; p < warm + passes; p++) {
  gc?.();
  await device.queue.onSubmittedWorkDone();
  const ns = await pass();
  if (p >= warm) perOp.push(ns);
}
perOp.sort((a, b) => a - b);
console.log(
  `| ${name} | ${peerName} | ${between} | ${
    perOp[perOp.length >> 1].toFixed(0)
  } | ${perOp[perOp.length >> 2].toFixed(0)}–${
    perOp[(perOp.length * 3) >> 2].toFixed(0)
  } |${sink === undefined ? " " : ""}`,
);
