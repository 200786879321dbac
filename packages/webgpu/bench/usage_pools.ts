/**
 * Bytes of the pools a runtime can build per usage: the storage and uniform
 * buffers of each recorded trace (`traces/`), replayed through one
 * `GpuCachingAllocator` per usage (`source: { usage }`, the trace's usage
 * bits, on a mock `GPUDevice` with 256-byte storage and uniform alignment)
 * with its defaults, as `traces/figures.ts` builds them (`allot-caching`:
 * in the device's group; `-alone`: `group: null`), against
 * `@allot/trace`'s model of the pools before their usage defaults
 * (`CachingAllocator` defaults per usage, `mem replay`'s `allot-caching`)
 * and TF.js's exact-size and onnxruntime-web's bucket pools (per usage too)
 * as the peers. Exact (no timing): peak held / peak live, one pass and warm
 * over 8 passes of one instance; buffers made after the first pass. Mapped
 * staging buffers (`MAP_READ | COPY_DST`, `MAP_WRITE | COPY_SRC`) are left
 * out: a pool refuses them, staging is `GpuStaging`'s.
 *
 * Run: `deno run -A packages/webgpu/bench/usage_pools.ts [--only=<part of a trace path>]`
 *
 * @module
 */

import {
  allotCachingQueueOrderPolicy,
  ortBucketPolicy,
  type ReplayOps,
  tfjsExactPolicy,
  traceOps,
} from "@allot/trace";
import { readTraceFile } from "../../trace/cli.ts";
import { _Usage } from "../_flags.ts";
import { gpuCachingPolicy, measure } from "../../../traces/figures.ts";
import {
  recordedTraceNames,
  TRACES_DIR,
} from "../../../scripts/bench/recorded_traces.ts";
import { fileURLToPath } from "node:url";

const MAPPED = _Usage.MAP_READ | _Usage.MAP_WRITE;

/** The ops of the buffers a pool may hold (no mapped staging buffers). */
function pooledOps(ops: ReplayOps): ReplayOps {
  const keep: number[] = [];
  const dropped = new Set<number>();
  for (let i = 0; i < ops.length; i++) {
    if (ops.code[i] === 0 && (ops.usage[i] & MAPPED) !== 0) {
      dropped.add(ops.id[i]);
    } else if (ops.code[i] === 1 && dropped.has(ops.id[i])) {
      dropped.delete(ops.id[i]);
    } else keep.push(i);
  }
  const pick = <T extends Float64Array | Uint8Array>(a: T): T =>
    a.constructor === Uint8Array
      ? Uint8Array.from(keep, (i) => a[i]) as T
      : Float64Array.from(keep, (i) => a[i]) as T;
  return {
    code: pick(ops.code),
    id: pick(ops.id),
    size: pick(ops.size),
    usage: pick(ops.usage),
    length: keep.length,
    from: ops.from,
  };
}

/** `GpuCachingAllocator`s per usage as `traces/figures.ts` builds them. */
const gpuCaching = gpuCachingPolicy("allot-caching");
const gpuCachingAlone = gpuCachingPolicy("allot-caching-alone", {
  alone: true,
});

if (import.meta.main) {
  const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7) ?? "";
  const f = (x: { onePass: number; warm: number; madeAfterFirst: number }) =>
    `${x.onePass.toFixed(3)}, ${x.warm.toFixed(3)}; ${x.madeAfterFirst}`;
  console.log(
    "| trace (storage + uniform) | peak live MiB | TF.js exact | ORT buckets | CachingAllocator defaults per usage | GpuCachingAllocator per usage, alone | GpuCachingAllocator per usage (defaults: device group) |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const name of recordedTraceNames(only)) {
    const trace = await readTraceFile(
      fileURLToPath(new URL(name, TRACES_DIR)),
    );
    const ops = pooledOps(traceOps(trace, "all"));
    const model = measure(ops, allotCachingQueueOrderPolicy);
    const alone = measure(ops, gpuCachingAlone);
    const real = measure(ops, gpuCaching);
    console.log(
      `| ${name.replace(".jsonl.gz", "")} | ${
        (model.peakLive / 2 ** 20).toFixed(2)
      } | ${f(measure(ops, tfjsExactPolicy))} | ${
        f(measure(ops, ortBucketPolicy))
      } | ${f(model)} | ${f(alone)} | ${f(real)} |`,
    );
  }
}
