/**
 * Bytes of every pooling policy on the recorded traces, exact (mock devices):
 * peak held / peak live for one pass and over 8 warm passes of one instance
 * (what is left live at a pass's end freed), and the device buffers made
 * after the first pass, for storage buffers and for all buffers.
 *
 *   deno run -A traces/figures.ts [--only=<part of a path>[,<another>...]]
 *
 * Policies: TF.js's exact-size pool, onnxruntime-web's buckets, allot's
 * default pool (`allot-caching`: one `GpuCachingAllocator` per usage with
 * its defaults, on a mock `GPUDevice`, so in the device's own
 * `CachingGroup`; `-marked`: the same with the group's `endStep()` called at
 * the trace's step marks; `-alone`: `group: null`, each pool on its own;
 * `-fence`: frees reusable only after the next fence; `-shared`:
 * `GpuCachingAllocator.forUsage()` per usage, so copies take blocks of the
 * storage pool), `StepPlannedPool`, `GpuPlannedAllocator` (on a mock
 * `GPUDevice`, one per usage in one `StepPoolGroup`) and allot's watermark
 * pool. A pool refuses mapped usages (`MAP_READ`, `MAP_WRITE`: host access
 * is `GpuStaging`'s), so the replay pools a trace's staging buffers as
 * copy buffers (`COPY_SRC` or `COPY_DST` alone).
 *
 * @module
 */
import {
  allotWatermarkPolicy,
  ortBucketPolicy,
  type PolicyFactory,
  type ReplayOps,
  type ReplayPolicy,
  tfjsExactPolicy,
  traceOps,
} from "../packages/trace/mod.ts";
import { StepPoolGroup } from "../packages/caching/mod.ts";
import { stepPlannedPolicy } from "../packages/caching/bench/_step_planned_policy.ts";
import { GpuPlannedAllocator } from "../packages/webgpu/gpu_planned_allocator.ts";
import { GpuCachingAllocator } from "../packages/webgpu/gpu_caching_allocator.ts";
import type { GpuAllocation } from "../packages/webgpu/gpu_allocation.ts";
import { mockGpu } from "../packages/webgpu/_test_mock_device.ts";
import { readTraceFile } from "../packages/trace/cli.ts";
import {
  recordedTraceNames,
  TRACES_DIR,
} from "../scripts/bench/recorded_traces.ts";
import { fileURLToPath } from "node:url";

/** `GpuPlannedAllocator`s (one per usage, one group) on a mock device. */
const gpuPlannedPolicy: PolicyFactory = {
  name: "gpu-planned",
  description: "@allot/webgpu GpuPlannedAllocator, defaults, on a mock device",
  create(): ReplayPolicy {
    const gpu = mockGpu();
    let made = 0;
    const create = gpu.device.createBuffer.bind(gpu.device);
    (gpu.device as { createBuffer: GPUDevice["createBuffer"] }).createBuffer = (
      d,
    ) => (made++, create(d));
    const group = new StepPoolGroup();
    const pools = new Map<number, GpuPlannedAllocator>();
    const live = new Map<number, GpuAllocation>();
    return {
      alloc(id, size, usage) {
        let a = pools.get(usage);
        if (a === undefined) {
          // the usage bits only keep usages apart (one allocator each)
          a = new GpuPlannedAllocator(gpu.device, { group });
          pools.set(usage, a);
        }
        live.set(id, a.allocate(Math.max(1, size)));
      },
      free(id) {
        live.get(id)!.release();
        live.delete(id);
      },
      sync(kind) {
        if (kind === "step") group.endStep();
      },
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

/** `GPUBufferUsage.MAP_READ | MAP_WRITE`. */
const MAPPED = 0x1 | 0x2;

/**
 * `GpuCachingAllocator`s with their defaults, one per usage, on one mock
 * `GPUDevice` (256-byte storage and uniform offsets): what a runtime builds
 * with allot's public API. `group: null` keeps each pool on its own;
 * `steps` calls the device group's `endStep()` at step marks; `afterFence`
 * holds frees back until the next fence (readback or step mark).
 */
export function gpuCachingPolicy(
  name: string,
  { alone = false, steps = false, afterFence = false, shared = false } = {},
): PolicyFactory {
  return {
    name,
    description: `@allot/webgpu GpuCachingAllocator ${
      shared ? "forUsage()" : "per usage"
    }, defaults${alone ? ", group: null" : ""}${
      !alone && steps ? ", endStep() at step marks" : ""
    }${
      afterFence ? ", frees reusable after the next fence" : ""
    }, on a mock device`,
    create(): ReplayPolicy {
      const gpu = mockGpu();
      Object.assign(gpu.device.limits as unknown as Record<string, number>, {
        minUniformBufferOffsetAlignment: 256,
        maxUniformBufferBindingSize: 64 * 1024,
      });
      let made = 0;
      const create = gpu.device.createBuffer.bind(gpu.device);
      (gpu.device as { createBuffer: GPUDevice["createBuffer"] })
        .createBuffer = (d) => (made++, create(d));
      const pools = new Map<number, GpuCachingAllocator>();
      const live = new Map<number, GpuAllocation>();
      let pending: GpuAllocation[] = [];
      return {
        alloc(id, size, usage) {
          let a = pools.get(usage);
          if (a === undefined) {
            // staging buffers pooled as plain copy buffers
            const pooled = (usage & MAPPED) !== 0 ? usage & ~MAPPED : usage;
            a = shared
              ? GpuCachingAllocator.forUsage(gpu.device, pooled || 0x4)
              : new GpuCachingAllocator(gpu.device, {
                source: { usage: pooled === 0 ? 0x4 : pooled },
                ...(alone ? { group: null } : {}),
              });
            pools.set(usage, a);
          }
          live.set(id, a.allocate(Math.max(1, size)));
        },
        free(id) {
          const a = live.get(id)!;
          live.delete(id);
          if (afterFence) pending.push(a);
          else a.release();
        },
        sync(kind) {
          if (pending.length > 0) {
            for (const a of pending) a.release();
            pending = [];
          }
          if (kind === "step" && steps && !alone) {
            GpuCachingAllocator.deviceGroup(gpu.device).endStep();
          }
        },
        heldBytes() {
          let n = 0;
          for (const b of gpu.live) n += b.size;
          return n;
        },
        buffersCreated: () => made,
        dispose() {
          for (const a of [...live.values(), ...pending]) a.release();
          for (const a of new Set(pools.values())) a.emptyCache();
        },
      };
    },
  };
}

export const POLICIES: readonly PolicyFactory[] = [
  tfjsExactPolicy,
  ortBucketPolicy,
  gpuCachingPolicy("allot-caching"),
  gpuCachingPolicy("allot-caching-marked", { steps: true }),
  gpuCachingPolicy("allot-caching-alone", { alone: true }),
  gpuCachingPolicy("allot-caching-fence", { afterFence: true }),
  gpuCachingPolicy("allot-caching-shared", { shared: true }),
  stepPlannedPolicy("step-planned"),
  gpuPlannedPolicy,
  allotWatermarkPolicy,
];

export const PASSES = 8;

/** One pass, then `PASSES` warm passes of one instance. */
export function measure(ops: ReplayOps, f: PolicyFactory): {
  peakLive: number;
  onePass: number;
  warm: number;
  madeAfterFirst: number;
} {
  const p = f.create();
  const size = new Map<number, number>();
  let live = 0, peakLive = 0, peak = 0, onePass = 0, afterFirst = 0;
  try {
    for (let pass = 0; pass < PASSES; pass++) {
      for (let i = 0; i < ops.length; i++) {
        const c = ops.code[i];
        if (c === 0) {
          const n = Math.max(1, ops.size[i]);
          p.alloc(ops.id[i], ops.size[i], ops.usage[i]);
          size.set(ops.id[i], n);
          live += n;
          if (live > peakLive) peakLive = live;
          const h = p.heldBytes();
          if (h > peak) peak = h;
        } else if (c === 1) {
          p.free(ops.id[i]);
          live -= size.get(ops.id[i])!;
          size.delete(ops.id[i]);
        } else p.sync(c === 2 ? "fence" : "step");
      }
      for (const [id, n] of size) {
        p.free(id);
        live -= n;
      }
      size.clear();
      p.sync("step");
      if (pass === 0) {
        onePass = peak;
        afterFirst = p.buffersCreated();
      }
    }
    return {
      peakLive,
      onePass: onePass / peakLive,
      warm: peak / peakLive,
      madeAfterFirst: p.buffersCreated() - afterFirst,
    };
  } finally {
    p.dispose?.();
  }
}

if (import.meta.main) {
  const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7) ?? "";
  console.log(
    `Peak held / peak live: one pass, warm (${PASSES} passes of one instance); buffers made after the first pass\n`,
  );
  console.log(
    "| trace | usage | peak live MiB | " + POLICIES.map((p) =>
      p.name
    ).join(" | ") +
      " |",
  );
  console.log("|---|---|---:|" + POLICIES.map(() => "---:").join("|") + "|");
  // --only=a,b: the traces whose path contains any of them
  const names = [
    ...new Set(only.split(",").flatMap((o) => recordedTraceNames(o))),
  ].sort();
  for (const name of names) {
    const trace = await readTraceFile(
      fileURLToPath(new URL(name, TRACES_DIR)),
    );
    for (const usage of ["storage", "all"] as const) {
      const ops = traceOps(trace, usage);
      const cells = POLICIES.map((f) => measure(ops, f));
      console.log(
        `| ${name.replace(".jsonl.gz", "")} | ${usage} | ${
          (cells[0].peakLive / 2 ** 20).toFixed(2)
        } | ` +
          cells.map((c) =>
            `${c.onePass.toFixed(3)}, ${c.warm.toFixed(3)}; ${c.madeAfterFirst}`
          ).join(" | ") + " |",
      );
    }
  }
}
