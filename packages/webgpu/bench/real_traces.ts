/**
 * Real runtime allocation traces (`traces/<runtime>/<name>.jsonl.gz`: TF.js 4.22 WebGPU,
 * onnxruntime-web WebGPU; recorded by `@allot/trace`) replayed through allot's pools and the real
 * peers, all in one process:
 *
 * 1. Bytes: peak held / peak live for storage buffers and for all buffers,
 *    device buffers created after the first full step, and over warm passes
 *    (one instance, 8 passes) the buffers created after the first pass and
 *    the peak held (mock device, so the figures are exact): TF.js's
 *    exact-size pool, onnxruntime-web's buckets, allot's caching allocator
 *    (queue order) and allot's `StepPlannedPool` (queue order).
 * 2. Time, on Deno's WebGPU device: the real TF.js `BufferManager`
 *    (`dist/buffer_manager.js`), an onnxruntime-web bucket pool written after
 *    `js/web/lib/wasm/jsep/webgpu/gpu-data-manager.ts`, and allot's pools on
 *    `GpuSegmentSource` (`GpuCachingAllocator` and `GpuPlannedAllocator`,
 *    which hand out `GpuAllocation` handles, and the bare `StepPlannedPool`),
 *    plus a peer that does nothing (the replay loop's own cost). Every
 *    allocation is charged for what a runtime reads to bind it: the buffer
 *    (TF.js and onnxruntime-web return it), or the handle's buffer and
 *    offset. A buffer made on a miss is charged to whoever made it.
 *    Runtime-like replay: each pass walks the storage
 *    requests of a trace, awaits `queue.onSubmittedWorkDone()` (untimed)
 *    where the runtime waited (step marks, readbacks), frees what is left at
 *    the pass's end (untimed), and `gc()` runs between passes. Warm (one
 *    instance reused; the headline) and fresh (a new instance per pass)
 *    rows; peers interleaved, order rotated each round and reversed every
 *    other round. Then a tight loop: the same requests with no awaits, warm
 *    instances. Every allot peer runs its own copy of the packages
 *    (`_tree_copy.ts`, as `trace_ab.ts` does), so no peer runs code another
 *    peer has warmed or compiled for its shapes; `--aa` adds the handle peer
 *    again on a copy of its own, an A/A control that should read about 1.00.
 *    Ratios are the median of the rounds' ratios (each round sees one load).
 *
 * Run: `deno run -A --v8-flags=--expose-gc packages/webgpu/bench/real_traces.ts [--quick] [--only=<part of a trace path>] [--jit-passes=<N>] [--clock=cpu] [--time-only] [--rounds=<N>] [--reps=<N>] [--modes=warm,fresh,tight] [--aa]`
 *
 * @module
 */

import {
  type PolicyFactory,
  type ReplayOps,
  replayOps,
  traceOps,
} from "@allot/trace";
import {
  allotCachingQueueOrderPolicy,
  ortBucketPolicy,
  ortBucketSize,
  tfjsExactPolicy,
} from "@allot/trace";
import {
  type PlannedBlock,
  StepPlannedPool,
  StepPoolGroup,
} from "@allot/caching";
import { MockSegmentSource } from "@allot/core";
import { BufferManager } from "@tensorflow/tfjs-backend-webgpu/dist/buffer_manager.js";
import { stepPlannedPolicy } from "../../caching/bench/_step_planned_policy.ts";
import type { GpuAllocation } from "../gpu_allocation.ts";
import type * as WebgpuModule from "../mod.ts";
import type * as CachingModule from "@allot/caching";
import { OrtBucketPool } from "./_ort_bucket_pool.ts";
import {
  replayPass,
  rotatedPeer,
  threadCpuClock,
  timeRotatedRounds,
} from "./_replay_pass.ts";
import { importTreeCopy, importTreeCopyModules } from "./_tree_copy.ts";
import {
  loadRecordedTrace,
  recordedTraceNames,
} from "../../../scripts/bench/recorded_traces.ts";

const quick = Deno.args.includes("--quick");
/** `--only=<text>`: the traces whose path contains it. */
const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7) ?? "";
/**
 * `--jit-passes=<N>`: N more untimed passes (no awaits) on each warm
 * instance after its warm-up pass, so the warm and tight rows run code the
 * JIT has compiled, as in a long-running runtime (default 0).
 */
const jitPasses = Number(
  Deno.args.find((a) => a.startsWith("--jit-passes="))?.slice(13) ?? "0",
);
/**
 * `--clock=cpu`: time the replay in this thread's CPU time instead of
 * wall-clock time (a loaded machine's preemptions then charge no peer).
 */
const cpuClock = Deno.args.includes("--clock=cpu")
  ? threadCpuClock()
  : undefined;

const names = recordedTraceNames(only);
const traces = await Promise.all(names.map(async (n) => ({
  name: n.replace(".jsonl.gz", ""),
  trace: await loadRecordedTrace(n),
})));

// ---- 1. bytes (mock device, exact) ---------------------------------------

/** Buffers a policy creates after the first full step (the second mark). */
function createdAfterFirstStep(ops: ReplayOps, f: PolicyFactory): number {
  const p = f.create();
  let marks = 0, at = -1;
  for (let i = 0; i < ops.length; i++) {
    const c = ops.code[i];
    if (c === 0) p.alloc(ops.id[i], ops.size[i], ops.usage[i]);
    else if (c === 1) p.free(ops.id[i]);
    else {
      p.sync(c === 2 ? "fence" : "step");
      if (c === 3 && ++marks === 2) at = p.buffersCreated();
    }
  }
  return at < 0 ? 0 : p.buffersCreated() - at;
}

/** Warm passes replayed for the creations after the first pass. */
const PASSES = 8;

/**
 * One instance over `PASSES` passes of the trace (what is left live at a
 * pass's end freed, then a step mark), as the time rows below reuse one:
 * buffers created after the first pass and in the last one, and the peak
 * held over all passes.
 */
function warmPasses(ops: ReplayOps, f: PolicyFactory) {
  const p = f.create();
  let afterFirst = 0, beforeLast = 0, peak = 0;
  try {
    for (let pass = 0; pass < PASSES; pass++) {
      if (pass === PASSES - 1) beforeLast = p.buffersCreated();
      const live = new Set<number>();
      for (let i = 0; i < ops.length; i++) {
        const c = ops.code[i];
        if (c === 0) {
          p.alloc(ops.id[i], ops.size[i], ops.usage[i]);
          live.add(ops.id[i]);
          const h = p.heldBytes();
          if (h > peak) peak = h;
        } else if (c === 1) {
          p.free(ops.id[i]);
          live.delete(ops.id[i]);
        } else p.sync(c === 2 ? "fence" : "step");
      }
      for (const id of live) p.free(id);
      p.sync("step");
      if (pass === 0) afterFirst = p.buffersCreated();
    }
    const made = p.buffersCreated();
    return { after: made - afterFirst, last: made - beforeLast, peak };
  } finally {
    p.dispose?.();
  }
}

/** `--time-only`: skip the byte tables (part 1), time the peers only. */
const timeOnly = Deno.args.includes("--time-only");
if (!timeOnly) {
  const policies = [
    tfjsExactPolicy,
    ortBucketPolicy,
    allotCachingQueueOrderPolicy,
    stepPlannedPolicy(),
  ];
  console.log("## Peak held / peak live (mock device; exact)\n");
  console.log(
    "| trace | usage | peak live MiB | " +
      policies.map((p) => p.name).join(" | ") + " |",
  );
  console.log("|---|---|---:|" + policies.map(() => "---:").join("|") + "|");
  const created: string[] = [];
  const warm: string[] = [];
  for (const { name, trace } of traces) {
    for (const usage of ["storage", "all"] as const) {
      const ops = traceOps(trace, usage);
      const r = replayOps(ops, { policies, repeat: 1 });
      console.log(
        `| ${name} | ${usage} | ${(r.peakLiveBytes / 2 ** 20).toFixed(2)} | ` +
          r.policies.map((p) => (p.peakHeldBytes / r.peakLiveBytes).toFixed(3))
            .join(" | ") +
          " |",
      );
      created.push(
        `| ${name} | ${usage} | ` +
          policies.map((f) =>
            `${createdAfterFirstStep(ops, f)} / ${
              r.policies.find((p) => p.name === f.name)!.buffersCreated
            }`
          ).join(" | ") + " |",
      );
      warm.push(
        `| ${name} | ${usage} | ` +
          policies.map((f) => {
            const w = warmPasses(ops, f);
            return `${w.after} (${w.last}) ${
              (w.peak / r.peakLiveBytes).toFixed(3)
            }`;
          }).join(" | ") + " |",
      );
    }
  }
  console.log(
    "\n## Device buffers created after the first full step / in all\n",
  );
  console.log(
    "| trace | usage | " + policies.map((p) => p.name).join(" | ") + " |",
  );
  console.log("|---|---|" + policies.map(() => "---:").join("|") + "|");
  for (const line of created) console.log(line);
  console.log(
    `\n## Warm passes: device buffers created after the first pass (in the last), and peak held / peak live over ${PASSES} passes\n`,
  );
  console.log(
    "| trace | usage | " + policies.map((p) => p.name).join(" | ") + " |",
  );
  console.log("|---|---|" + policies.map(() => "---:").join("|") + "|");
  for (const line of warm) console.log(line);

  /**
   * All buffers through `StepPlannedPool`s in a `StepPoolGroup` (one per
   * usage, as the replay policy keeps them): at the moment the group's held
   * bytes peak, each usage's held and live bytes (mock sources: exact).
   */
  const heldByUsage = (ops: ReplayOps): string => {
    const group = new StepPoolGroup();
    const pools = new Map<number, StepPlannedPool>();
    const blocks = new Map<number, [StepPlannedPool, PlannedBlock]>();
    let peak = 0, at = "";
    for (let i = 0; i < ops.length; i++) {
      const c = ops.code[i];
      if (c === 0) {
        let p = pools.get(ops.usage[i]);
        if (p === undefined) {
          const source = new MockSegmentSource({ alignment: 256 });
          pools.set(ops.usage[i], p = new StepPlannedPool(source, { group }));
        }
        blocks.set(ops.id[i], [p, p.allocate(Math.max(1, ops.size[i]))]);
        if (group.reservedBytes > peak) {
          peak = group.reservedBytes;
          at = [...pools].map(([usage, p]) =>
            `0x${usage.toString(16)} ${(p.reservedBytes / 1024).toFixed(1)} / ${
              (p.requestedBytes / 1024).toFixed(1)
            }`
          ).join(", ");
        }
      } else if (c === 1) {
        const [p, b] = blocks.get(ops.id[i])!;
        blocks.delete(ops.id[i]);
        p.free(b);
      } else if (c === 3) group.endStep();
    }
    return at;
  };
  console.log(
    "\n## StepPlannedPool, all buffers: held / live KiB per usage where held peaks\n",
  );
  console.log("| trace | usage held / live KiB |");
  console.log("|---|---|");
  for (const { name, trace } of traces) {
    console.log(`| ${name} | ${heldByUsage(traceOps(trace, "all"))} |`);
  }
}

// ---- 2. time on the device ------------------------------------------------

const adapter = await navigator.gpu?.requestAdapter();
if (!adapter) {
  console.log("\nno WebGPU adapter: time figures skipped");
  Deno.exit(0);
}
const device = await adapter.requestDevice({
  requiredLimits: {
    maxBufferSize: adapter.limits.maxBufferSize,
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
  },
});

interface Peer {
  alloc(size: number, usage: number): unknown;
  /** What a runtime reads to bind the memory: the buffer and the offset. */
  use(handle: unknown): number;
  free(handle: unknown): void;
  step(): void;
  dispose(): void;
}

interface PeerKind {
  name: string;
  make(): Peer;
}

// Every allot peer runs its own copy of the packages (`_tree_copy.ts`), as
// in `trace_ab.ts`: no peer runs code that another peer has warmed, or that
// was compiled for another peer's shapes. Until 2026-11-25 the handle, id,
// StepPlannedPool and GpuPlanned peers shared this tree's modules.
type Webgpu = typeof WebgpuModule;
const webgpuCopy = () => importTreeCopy<Webgpu>("webgpu/mod.ts");
const HandlesCopy = (await webgpuCopy()).GpuCachingAllocator;
const IdsCopy = (await webgpuCopy()).GpuCachingAllocator;
const PlannedCopy = (await webgpuCopy()).GpuPlannedAllocator;
const [stepCaching, stepWebgpu] = await importTreeCopyModules([
  "caching/mod.ts",
  "webgpu/mod.ts",
]) as [typeof CachingModule, Webgpu];
/**
 * `--aa`: one more peer, the handle peer again on a copy of its own (an
 * A/A control: `handles / handles copy` should read about 1.00).
 */
const aa = Deno.args.includes("--aa");
const AaCopy = aa ? (await webgpuCopy()).GpuCachingAllocator : undefined;

let sink: unknown;
// One literal per peer: closures made from one literal share their
// feedback, so two peers' classes would meet at each call site.
const kinds: PeerKind[] = [
  {
    name: "TF.js BufferManager (real)",
    make() {
      const m = new BufferManager(device);
      return {
        alloc: (size, usage) => m.acquireBuffer(size, usage),
        use: (b) => (sink = b, 0),
        free: (b) => m.releaseBuffer(b as GPUBuffer),
        step() {},
        dispose: () => m.dispose(),
      };
    },
  },
  {
    name: "onnxruntime-web buckets",
    make() {
      const p = new OrtBucketPool(device);
      return {
        alloc: (size, usage) => p.getBuffer(size, usage),
        use: (b) => (sink = b, 0),
        free: (b) => p.release(b as GPUBuffer),
        step: () => p.refreshPendingBuffers(),
        dispose: () => p.dispose(),
      };
    },
  },
  {
    name: "allot GpuCachingAllocator (queue-order)",
    make() {
      const a = new HandlesCopy(device, { reuse: "queue-order" });
      return {
        alloc: (size) => a.allocate(size),
        use: (
          h,
        ) => (sink = (h as GpuAllocation).buffer, (h as GpuAllocation).offset),
        free: (h) => (h as GpuAllocation).release(),
        step() {},
        dispose: () => a.emptyCache(),
      };
    },
  },
  {
    name: "allot GpuCachingAllocator ids (queue-order)",
    make() {
      const a = new IdsCopy(device, { reuse: "queue-order" });
      return {
        alloc: (size) => a.allocateId(size),
        use: (
          id,
        ) => (sink = a.bufferOf(id as number), a.offsetOf(id as number)),
        free: (id) => a.freeById(id as number),
        step() {},
        dispose: () => a.emptyCache(),
      };
    },
  },
  {
    name: "allot StepPlannedPool (queue-order)",
    make() {
      const p = new stepCaching.StepPlannedPool(
        new stepWebgpu.GpuSegmentSource(device),
      );
      return {
        alloc: (size) => p.allocate(size),
        use: (
          b,
        ) => (sink = (b as PlannedBlock<GPUBuffer>).memory,
          (b as PlannedBlock<GPUBuffer>).byteOffset),
        free: (b) => p.free(b as PlannedBlock<GPUBuffer>),
        step: () => p.endStep(),
        dispose: () => p.emptyCache(),
      };
    },
  },
  {
    name: "allot GpuPlannedAllocator",
    make() {
      const a = new PlannedCopy(device);
      return {
        alloc: (size) => a.allocate(size),
        use: (
          h,
        ) => (sink = (h as GpuAllocation).buffer, (h as GpuAllocation).offset),
        free: (h) => (h as GpuAllocation).release(),
        step: () => a.endStep(),
        dispose: () => a.emptyCache(),
      };
    },
  },
  {
    name: "replay loop alone (no-op peer)",
    make() {
      const none = {};
      return {
        alloc: () => none,
        use: (h) => (sink = h, 0),
        free() {},
        step() {},
        dispose() {},
      };
    },
  },
];
if (AaCopy) {
  kinds.push({
    name: "allot GpuCachingAllocator, a second copy (A/A)",
    make() {
      const a = new AaCopy(device, { reuse: "queue-order" });
      return {
        alloc: (size) => a.allocate(size),
        use: (
          h,
        ) => (sink = (h as GpuAllocation).buffer, (h as GpuAllocation).offset),
        free: (h) => (h as GpuAllocation).release(),
        step() {},
        dispose: () => a.emptyCache(),
      };
    },
  });
}
/** Index of each peer in `kinds`, for the ratio columns. */
const TFJS = 0, CACHING = 2, CACHING_IDS = 3, STEP_PLANNED = 4, GPU_PLANNED = 5;
const AA = 7;

const gc = (globalThis as { gc?: () => void }).gc;

const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
const range = (v: number[]) =>
  `${Math.min(...v).toFixed(0)}–${Math.max(...v).toFixed(0)}`;

/** `--rounds=N`: rounds per row (default 7, `--quick` 3). */
const rounds = Number(
  Deno.args.find((a) => a.startsWith("--rounds="))?.slice(9) ??
    (quick ? "3" : "7"),
);
/** `--reps=N`: passes per tight-loop measurement, their mean (default 1). */
const reps = Number(
  Deno.args.find((a) => a.startsWith("--reps="))?.slice(7) ?? "1",
);
/**
 * `--modes=warm,fresh,tight`: the rows to time (default all three, in that
 * order); leaving out fresh halves the run.
 */
const modes = (Deno.args.find((a) => a.startsWith("--modes="))?.slice(8) ??
  "warm,fresh,tight").split(",").map((m) => {
    if (m === "warm" || m === "fresh") return m;
    if (m === "tight") return "tight loop (warm)";
    throw new Error(`--modes: "${m}" is not warm, fresh or tight`);
  });
const ratioColumns = [
  ["TF.js / GpuCaching", TFJS, CACHING],
  ["TF.js / GpuCaching ids", TFJS, CACHING_IDS],
  ["TF.js / StepPlanned", TFJS, STEP_PLANNED],
  ["TF.js / GpuPlanned", TFJS, GPU_PLANNED],
  ...(aa ? [["GpuCaching copy / GpuCaching (A/A)", AA, CACHING]] : []),
] as [string, number, number][];
console.log(
  `\n## Time per alloc+free op, storage requests (ns; median, range over ${rounds} rounds; ratios: median of the rounds' ratios)\n`,
);
console.log(
  "| trace | mode | " + kinds.map((k) => k.name).join(" | ") + " | " +
    ratioColumns.map(([name]) => name).join(" | ") + " |",
);
console.log(
  "|---|---|" + kinds.map(() => "---:").join("|") + "|" +
    ratioColumns.map(() => "---:").join("|") + "|",
);
for (const { name, trace } of traces) {
  const ops = traceOps(trace, "storage");
  for (const mode of modes) {
    let times: number[][];
    if (mode === "fresh") {
      times = kinds.map(() => []);
      for (let r = 0; r < rounds; r++) {
        for (let j = 0; j < kinds.length; j++) {
          const k = rotatedPeer(j, r, kinds.length, true);
          gc?.();
          await device.queue.onSubmittedWorkDone();
          const p = kinds[k].make();
          times[k].push(await replayPass(device, ops, p, true, cpuClock));
          p.dispose();
        }
      }
    } else {
      const warm = kinds.map((k) => k.make());
      times = await timeRotatedRounds(device, ops, warm, {
        mode: mode === "warm" ? "warm" : "tight",
        rounds,
        reps,
        jitPasses,
        now: cpuClock,
        alternate: true,
      });
      for (const p of warm) p.dispose();
    }
    const med = times.map(median);
    const ratio = (a: number, b: number) =>
      median(times[a].map((v, r) => v / times[b][r]));
    console.log(
      `| ${name} | ${mode} | ` +
        times.map((v, k) => `${med[k].toFixed(0)} (${range(v)})`).join(" | ") +
        " | " +
        ratioColumns.map(([, a, b]) => `${ratio(a, b).toFixed(2)}×`).join(
          " | ",
        ) + " |",
    );
  }
}
await device.queue.onSubmittedWorkDone();
device.destroy();
void ortBucketSize;
void sink;
