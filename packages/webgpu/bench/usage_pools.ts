/**
 * Bytes of the pools a runtime can now build per usage: the storage and
 * uniform buffers of each recorded trace (`traces/`), replayed through one
 * `GpuCachingAllocator` per usage (`source: { usage }`, the trace's usage
 * bits, on a mock `GPUDevice` with 256-byte storage and uniform alignment),
 * against the figures' model of the same pools (`allot-caching`: a
 * `CachingAllocator` per usage over a mock segment source,
 * `traces/figures.ts`), and TF.js's exact-size and onnxruntime-web's bucket
 * pools (per usage too) as the peers. Exact (no timing): peak held / peak live, one pass
 * and warm over 8 passes of one instance; buffers made after the first pass.
 * Mapped staging buffers (`MAP_READ | COPY_DST`, `MAP_WRITE | COPY_SRC`) are
 * left out: a pool refuses them, staging is `GpuStaging`'s.
 *
 * Run: `deno run -A packages/webgpu/bench/usage_pools.ts [--only=<part of a trace path>]`
 *
 * @module
 */

import {
  allotCachingQueueOrderPolicy,
  ortBucketPolicy,
  type PolicyFactory,
  type ReplayOps,
  type ReplayPolicy,
  tfjsExactPolicy,
  traceOps,
} from "@allot/trace";
import { readTraceFile } from "../../trace/cli.ts";
import { GpuCachingAllocator } from "../gpu_caching_allocator.ts";
import type { GpuAllocation } from "../gpu_allocation.ts";
import { mockGpu } from "../_test_mock_device.ts";
import { _Usage } from "../_flags.ts";
import { measure } from "../../../traces/figures.ts";
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

/** One `GpuCachingAllocator` per usage, on one mock device. */
const gpuCachingPerUsage: PolicyFactory = {
  name: "gpu-caching-per-usage",
  description: "GpuCachingAllocator per usage (source.usage), mock device",
  create(): ReplayPolicy {
    const gpu = mockGpu();
    Object.assign(gpu.device.limits as unknown as Record<string, number>, {
      minUniformBufferOffsetAlignment: 256,
      maxUniformBufferBindingSize: 64 * 1024,
    });
    let made = 0;
    const create = gpu.device.createBuffer.bind(gpu.device);
    (gpu.device as { createBuffer: GPUDevice["createBuffer"] }).createBuffer = (
      d,
    ) => (made++, create(d));
    const pools = new Map<number, GpuCachingAllocator>();
    const live = new Map<number, GpuAllocation>();
    return {
      alloc(id, size, usage) {
        let a = pools.get(usage);
        if (a === undefined) {
          a = new GpuCachingAllocator(gpu.device, { source: { usage } });
          pools.set(usage, a);
        }
        live.set(id, a.allocate(Math.max(1, size)));
      },
      free(id) {
        live.get(id)!.release();
        live.delete(id);
      },
      sync() {},
      heldBytes() {
        let n = 0;
        for (const b of gpu.live) n += b.size;
        return n;
      },
      buffersCreated: () => made,
      dispose() {
        for (const a of live.values()) a.release();
        for (const a of pools.values()) a.emptyCache();
      },
    };
  },
};

if (import.meta.main) {
  const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7) ?? "";
  const f = (x: { onePass: number; warm: number; madeAfterFirst: number }) =>
    `${x.onePass.toFixed(3)}, ${x.warm.toFixed(3)}; ${x.madeAfterFirst}`;
  console.log(
    "| trace (storage + uniform) | peak live MiB | TF.js exact | ORT buckets | allot-caching (figures' model) | GpuCachingAllocator per usage |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
  for (const name of recordedTraceNames(only)) {
    const trace = await readTraceFile(
      fileURLToPath(new URL(name, TRACES_DIR)),
    );
    const ops = pooledOps(traceOps(trace, "all"));
    const model = measure(ops, allotCachingQueueOrderPolicy);
    const real = measure(ops, gpuCachingPerUsage);
    console.log(
      `| ${name.replace(".jsonl.gz", "")} | ${
        (model.peakLive / 2 ** 20).toFixed(2)
      } | ${f(measure(ops, tfjsExactPolicy))} | ${
        f(measure(ops, ortBucketPolicy))
      } | ${f(model)} | ${f(real)} |`,
    );
  }
}
