/**
 * Benchmarks of `@allot/webgpu`, all on one device in one process:
 *
 * 1. Allocation: the same tensor traces (from `@allot/caching/traces`)
 *    replayed through allot's caching allocator on `GpuSegmentSource`,
 *    through `device.createBuffer` + `destroy` per tensor, and through
 *    TF.js's real WebGPU buffer pool (`BufferManager` from
 *    `@tensorflow/tfjs-backend-webgpu`). At every pass boundary of a trace
 *    each peer awaits `queue.onSubmittedWorkDone()` (untimed), as a runtime
 *    does between session runs.
 * 2. Kernels: strided to contiguous of a 16 MiB transposed view with allot's
 *    kernel, against download, gather on the CPU, upload; and
 *    `copyBufferToBuffer` of the same bytes as the device's copy bandwidth.
 *
 * Run: `deno run -A packages/webgpu/bench/run.ts [--quick] [--kernel-mib=<N>] [--kernels |
 * --allocation]`.
 *
 * @module
 */

import type {
  BenchOptions,
  Ratio,
  Row,
  Scenario,
} from "../../../scripts/bench/types.ts";
import {
  type AllocationTrace,
  trainingStepTrace,
  transformerInferenceTrace,
} from "@allot/caching/traces";
import { BufferManager } from "@tensorflow/tfjs-backend-webgpu/dist/buffer_manager.js";
import { GpuCachingAllocator } from "../gpu_caching_allocator.ts";
import type { GpuReuse } from "../gpu_caching_allocator.ts";
import type { GpuAllocation } from "../gpu_allocation.ts";
import { GpuKernels } from "../gpu_kernels.ts";
import { GpuStaging } from "../gpu_staging.ts";

const USAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC |
  GPUBufferUsage.COPY_DST;

interface Target<H> {
  allocate(byteLength: number): H;
  free(handle: H): void;
}

interface ReplayResult {
  /** ns per op (alloc or free) over the whole trace. */
  nsPerOp: number;
  /** ns per op after warm-up (the hit path for pools). */
  nsPerOpSteady: number;
}

/**
 * Replays a trace `repeats` times on one target; timing stops at marks,
 * where the queue is awaited. The whole-trace figure is the first replay;
 * the steady figure is the median over replays of the ops after warm-up.
 */
async function replay<H>(
  device: GPUDevice,
  trace: AllocationTrace,
  target: Target<H>,
  repeats: number,
): Promise<ReplayResult> {
  let first = 0;
  const steadyRuns: number[] = [];
  for (let r = 0; r < repeats; r++) {
    const live = new Map<number, H>();
    let total = 0;
    let steady = 0;
    let ops = 0;
    let steadyOps = 0;
    let start = performance.now();
    const close = (i: number) => {
      const t = performance.now() - start;
      total += t;
      if (i >= trace.warmupOps) steady += t;
    };
    for (let i = 0; i < trace.ops.length; i++) {
      const op = trace.ops[i];
      if (op.kind === "mark" || i === trace.warmupOps) {
        close(i - 1);
        await device.queue.onSubmittedWorkDone();
        start = performance.now();
      }
      if (op.kind === "alloc") {
        live.set(op.id, target.allocate(op.byteLength));
      } else if (op.kind === "free") {
        target.free(live.get(op.id)!);
        live.delete(op.id);
      } else continue;
      ops++;
      if (i >= trace.warmupOps) steadyOps++;
    }
    close(trace.ops.length - 1);
    await device.queue.onSubmittedWorkDone();
    if (r === 0) first = (total * 1e6) / ops;
    steadyRuns.push((steady * 1e6) / Math.max(1, steadyOps));
  }
  return { nsPerOp: first, nsPerOpSteady: median(steadyRuns) };
}

interface PeerFigures extends ReplayResult {
  name: string;
  buffersCreated: number;
  peakBytes: number;
  ours?: boolean;
}

async function allot(
  device: GPUDevice,
  trace: AllocationTrace,
  reuse: GpuReuse,
  repeats: number,
): Promise<PeerFigures> {
  const allocator = new GpuCachingAllocator(device, { reuse });
  const result = await replay<GpuAllocation>(device, trace, {
    allocate: (n) => allocator.allocate(n),
    free: (a) => a.release(),
  }, repeats);
  const figures = {
    name: `allot GpuCachingAllocator (${reuse})`,
    ours: true,
    ...result,
    buffersCreated: allocator.source.allocationCount,
    peakBytes: allocator.source.peakReservedBytes,
  };
  await allocator.synchronize();
  allocator.emptyCache();
  return figures;
}

async function createPerTensor(
  device: GPUDevice,
  trace: AllocationTrace,
  repeats: number,
): Promise<PeerFigures> {
  let created = 0;
  let liveBytes = 0;
  let peak = 0;
  const result = await replay<GPUBuffer>(device, trace, {
    allocate: (n) => {
      created++;
      const size = Math.ceil(n / 4) * 4;
      liveBytes += size;
      if (liveBytes > peak) peak = liveBytes;
      return device.createBuffer({ size, usage: USAGE });
    },
    free: (b) => {
      liveBytes -= b.size;
      b.destroy();
    },
  }, repeats);
  return {
    name: "device.createBuffer + destroy",
    ...result,
    buffersCreated: created,
    peakBytes: peak,
  };
}

async function tfjs(
  device: GPUDevice,
  trace: AllocationTrace,
  repeats: number,
): Promise<PeerFigures> {
  let created = 0;
  const counting = {
    createBuffer: (descriptor: GPUBufferDescriptor) => {
      created++;
      return device.createBuffer(descriptor);
    },
  } as unknown as GPUDevice;
  const manager = new BufferManager(counting);
  let peak = 0;
  const result = await replay<GPUBuffer>(device, trace, {
    allocate: (n) => {
      // TF.js sizes buffers in whole 4-byte words.
      const buffer = manager.acquireBuffer(Math.ceil(n / 4) * 4, USAGE);
      if (manager.numBytesAllocated > peak) peak = manager.numBytesAllocated;
      return buffer;
    },
    free: (b) => manager.releaseBuffer(b),
  }, repeats);
  manager.dispose();
  return {
    name: "TF.js BufferManager",
    ...result,
    buffersCreated: created,
    peakBytes: peak,
  };
}

function ratio(
  label: string,
  value: number,
  target?: number,
): Ratio {
  return target === undefined
    ? { label, value }
    : { label, value, target: `>= ${target}`, met: value >= target };
}

async function allocationScenarios(
  device: GPUDevice,
  quick: boolean,
  progress: (m: string) => void,
): Promise<Scenario[]> {
  const traces: AllocationTrace[] = [
    transformerInferenceTrace({
      layers: quick ? 2 : 4,
      hidden: 512,
      heads: 8,
      vocab: 8192,
      weights: false,
      decodeSteps: quick ? 4 : 8,
      rounds: quick ? 2 : 3,
      promptLengths: quick ? [37, 128, 300] : undefined,
    }),
    trainingStepTrace({
      layers: quick ? 2 : 4,
      hidden: 512,
      heads: 8,
      vocab: 8192,
      sequence: 128,
      batch: 2,
      steps: quick ? 3 : 4,
    }),
  ];
  const scenarios: Scenario[] = [];
  for (const trace of traces) {
    progress(`allocation: ${trace.name}`);
    const repeats = quick ? 2 : 5;
    const peers = [
      await allot(device, trace, "after-fence", repeats),
      await allot(device, trace, "queue-order", repeats),
      await createPerTensor(device, trace, repeats),
      await tfjs(device, trace, repeats),
    ];
    const [ours, ordered, create, tf] = peers;
    // the replay loop itself (trace walk, live-handle map, awaits at
    // marks): what no target can go below
    const floor = await replay<number>(device, trace, {
      allocate: () => 0,
      free: () => {},
    }, repeats);
    const ops = trace.ops.filter((o) => o.kind !== "mark").length;
    const note = (p: PeerFigures) =>
      `${p.buffersCreated} buffers created over all replays, peak ${
        (p.peakBytes / 2 ** 20).toFixed(1)
      } MiB held, ${p.nsPerOp.toFixed(0)} ns/op over the whole trace`;
    scenarios.push({
      package: "webgpu",
      scenario:
        `allocate + free after warm-up (hit path), ${trace.name}, ${ops} ops`,
      unit: "ns/op",
      higherIsBetter: false,
      rows: [
        ...peers.map((p): Row => ({
          name: p.name,
          value: p.nsPerOpSteady,
          ours: p.ours,
          note: note(p),
        })),
        {
          name: "replay harness alone (no-op target)",
          value: floor.nsPerOpSteady,
          note: "the same loop with allocate/free doing nothing",
        },
      ],
      ratios: [
        ratio(
          "createBuffer / allot (after-fence), hit path",
          create.nsPerOpSteady / ours.nsPerOpSteady,
          50,
        ),
        ratio(
          "createBuffer / allot (queue-order), hit path",
          create.nsPerOpSteady / ordered.nsPerOpSteady,
        ),
        ratio(
          "TF.js pool / allot (after-fence), hit path",
          tf.nsPerOpSteady / ours.nsPerOpSteady,
        ),
        ratio(
          "createBuffer / allot (after-fence), hit path less the harness",
          (create.nsPerOpSteady - floor.nsPerOpSteady) /
            Math.max(1, ours.nsPerOpSteady - floor.nsPerOpSteady),
        ),
      ],
      notes: [
        trace.description,
        `whole-trace ns/op is the first replay (segments and buffers made); the hit path is the median over ${repeats} replays of the ops after warm-up`,
      ],
    });
    scenarios.push({
      package: "webgpu",
      scenario: `peak bytes held, ${trace.name}`,
      unit: "MiB",
      higherIsBetter: false,
      rows: peers.map((p): Row => ({
        name: p.name,
        value: p.peakBytes / 2 ** 20,
        ours: p.ours,
        note: `${p.buffersCreated} buffers created over all replays`,
      })),
      ratios: [
        ratio(
          "TF.js pool peak / allot (after-fence) peak",
          tf.peakBytes / ours.peakBytes,
          1,
        ),
        ratio(
          "TF.js pool peak / allot (queue-order) peak",
          tf.peakBytes / ordered.peakBytes,
        ),
        ratio(
          "createBuffer (exact live bytes) / allot (after-fence) peak",
          create.peakBytes / ours.peakBytes,
        ),
      ],
    });
  }
  return scenarios;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function kernelScenario(
  device: GPUDevice,
  quick: boolean,
  dtype: "f32" | "u16",
  progress: (m: string) => void,
  mib = quick ? 1 : 16,
): Promise<Scenario> {
  const bytesPer = dtype === "f32" ? 4 : 2;
  const rows = quick ? 512 : 2048;
  const cols = (mib * 2 ** 20) / bytesPer / rows;
  const byteLength = rows * cols * bytesPer;
  progress(`kernels: ${dtype} transpose of ${byteLength >> 20} MiB`);
  const src = device.createBuffer({
    label: "bench:src",
    size: byteLength,
    usage: USAGE,
  });
  const dst = device.createBuffer({
    label: "bench:dst",
    size: byteLength,
    usage: USAGE,
  });
  const host = new Uint8Array(byteLength);
  for (let i = 0; i < byteLength; i += 4096) host[i] = i & 0xff;
  device.queue.writeBuffer(src, 0, host);
  await device.queue.onSubmittedWorkDone();
  const kernels = GpuKernels.of(device);
  // the same transpose split in pieces: bindings of a quarter of the view
  const split = new GpuKernels(device, {
    maxBindingByteLength: byteLength / 4,
  });
  const staging = new GpuStaging(device, { maxStagingBytes: 64 << 20 });
  const srcBinding = { buffer: src, offset: 0, size: byteLength };
  const dstBinding = { buffer: dst, offset: 0, size: byteLength };
  // The [rows, cols] matrix read as its [cols, rows] transpose.
  const layout = { shape: [cols, rows], strides: [1, cols], offset: 0 };
  const repeats = quick ? 2 : 7;

  const kernelMs: number[] = [];
  const splitMs: number[] = [];
  const roundTripMs: number[] = [];
  const copyMs: number[] = [];
  const emptyMs: number[] = [];
  let expected: Uint8Array | undefined;
  for (let r = 0; r < repeats + 1; r++) {
    // What every figure below pays whatever it moves: an empty submit and
    // the wait for it (large under a sandboxed driver).
    const t0 = performance.now();
    device.queue.submit([device.createCommandEncoder().finish()]);
    await device.queue.onSubmittedWorkDone();
    if (r > 0) emptyMs.push(performance.now() - t0);

    let t = performance.now();
    kernels.contiguous(srcBinding, layout, dstBinding, { dtype });
    await device.queue.onSubmittedWorkDone();
    if (r > 0) kernelMs.push(performance.now() - t);

    t = performance.now();
    split.contiguous(srcBinding, layout, dstBinding, { dtype });
    await device.queue.onSubmittedWorkDone();
    if (r > 0) splitMs.push(performance.now() - t);

    t = performance.now();
    const bytes = await staging.download(srcBinding);
    const out = new Uint8Array(byteLength);
    if (dtype === "f32") {
      const a = new Uint32Array(bytes.buffer);
      const b = new Uint32Array(out.buffer);
      gather(a, b, rows, cols);
    } else {
      const a = new Uint16Array(bytes.buffer);
      const b = new Uint16Array(out.buffer);
      gather(a, b, rows, cols);
    }
    device.queue.writeBuffer(dst, 0, out);
    await device.queue.onSubmittedWorkDone();
    if (r > 0) roundTripMs.push(performance.now() - t);
    expected ??= out;

    t = performance.now();
    const encoder = device.createCommandEncoder({ label: "bench:copy" });
    encoder.copyBufferToBuffer(src, 0, dst, 0, byteLength);
    device.queue.submit([encoder.finish()]);
    await device.queue.onSubmittedWorkDone();
    if (r > 0) copyMs.push(performance.now() - t);
  }
  // The kernel's output must equal the CPU gather's, byte for byte.
  kernels.contiguous(srcBinding, layout, dstBinding, { dtype });
  const got = await staging.download(dstBinding);
  const mismatch = expected!.findIndex((b, i) => got[i] !== b);
  device.queue.writeBuffer(dst, 0, new Uint8Array(byteLength));
  const before = split.dispatchCount;
  split.contiguous(srcBinding, layout, dstBinding, { dtype });
  const pieces = split.dispatchCount - before;
  const gotSplit = await staging.download(dstBinding);
  const splitMismatch = expected!.findIndex((b, i) => gotSplit[i] !== b);
  src.destroy();
  dst.destroy();
  staging.release();
  if (splitMismatch >= 0) {
    throw new Error(
      `GpuKernels.contiguous in pieces (${dtype}, ${byteLength} bytes): byte ${splitMismatch} differs from the CPU gather`,
    );
  }
  if (mismatch >= 0) {
    throw new Error(
      `GpuKernels.contiguous (${dtype}, ${byteLength} bytes): byte ${mismatch} differs from the CPU gather`,
    );
  }
  const gbps = (ms: number) => byteLength / (ms / 1e3) / 1e9;
  const k = median(kernelMs);
  const sp = median(splitMs);
  const rt = median(roundTripMs);
  const c = median(copyMs);
  const e = median(emptyMs);
  // Bandwidth once the fixed cost is taken out; only where it is a small
  // part of the figure, since the difference of two noisy medians is not.
  const netGbps = (ms: number) =>
    ms > 2 * e
      ? `${gbps(ms - e).toFixed(2)} GB/s`
      : "not measurable (within twice the fixed cost)";
  return {
    package: "webgpu",
    scenario: `strided to contiguous, ${dtype} [${rows}, ${cols}] transposed (${
      byteLength >> 20
    } MiB)`,
    unit: "ms",
    higherIsBetter: false,
    rows: [
      {
        name: "allot GpuKernels.contiguous",
        value: k,
        ours: true,
        note: `${gbps(k).toFixed(2)} GB/s`,
      },
      {
        name: "allot, split in pieces (bindings of 1/4)",
        value: sp,
        note: `${gbps(sp).toFixed(2)} GB/s; ${pieces} pieces, one submit`,
      },
      {
        name: "download + CPU gather + upload",
        value: rt,
        note: `${gbps(rt).toFixed(2)} GB/s`,
      },
      {
        name: "copyBufferToBuffer (same bytes, contiguous)",
        value: c,
        note: `${gbps(c).toFixed(2)} GB/s: the device's copy bandwidth`,
      },
      {
        name: "empty submit + onSubmittedWorkDone",
        value: e,
        note: "the fixed cost in each row above",
      },
    ],
    ratios: [
      ratio("round trip / allot kernel", rt / k, 2),
      ratio("allot kernel bandwidth / copyBufferToBuffer bandwidth", c / k),
      ratio("split in pieces / one piece (time)", sp / k),
    ],
    notes: [
      `median of ${repeats} runs after one warm-up; each includes submit and onSubmittedWorkDone`,
      `kernel output checked byte for byte against the CPU gather`,
      `less the fixed cost: allot kernel ${netGbps(k)}, copyBufferToBuffer ${
        netGbps(c)
      }`,
    ],
  };
}

function gather(
  src: Uint32Array | Uint16Array,
  dst: Uint32Array | Uint16Array,
  rows: number,
  cols: number,
): void {
  // dst[j][i] = src[i][j], in tiles, as a careful hand-written CPU pass.
  const T = 64;
  for (let jj = 0; jj < cols; jj += T) {
    for (let ii = 0; ii < rows; ii += T) {
      const jEnd = Math.min(jj + T, cols);
      const iEnd = Math.min(ii + T, rows);
      for (let j = jj; j < jEnd; j++) {
        const o = j * rows;
        for (let i = ii; i < iEnd; i++) dst[o + i] = src[i * cols + j];
      }
    }
  }
}

/**
 * Runs every scenario on the first WebGPU adapter.
 *
 * @param options Quick mode and progress callback.
 * @returns The scenarios; empty when this runtime has no WebGPU adapter.
 */
export async function run(options: BenchOptions): Promise<Scenario[]> {
  return await _run(options, "all");
}

async function _run(
  options: BenchOptions,
  only: "all" | "kernels" | "allocation",
  kernelMiB?: number,
): Promise<Scenario[]> {
  const progress = options.progress ?? (() => {});
  const adapter = await navigator.gpu?.requestAdapter();
  if (!adapter) {
    progress("no WebGPU adapter: webgpu benchmarks skipped");
    return [];
  }
  // A large transpose needs the adapter's binding and buffer limits, not
  // WebGPU's defaults (128 MiB bindings, 256 MiB buffers).
  const device = await adapter.requestDevice({
    label: "allot-bench",
    requiredLimits: kernelMiB === undefined ? {} : {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
    },
  });
  const info = adapter.info;
  const where = `${info.description || info.vendor || "unknown adapter"}${
    info.isFallbackAdapter ? " (software fallback adapter)" : ""
  }`;
  try {
    const scenarios: Scenario[] = [];
    if (only !== "kernels") {
      scenarios.push(
        ...await allocationScenarios(device, options.quick, progress),
      );
    }
    if (only !== "allocation") {
      scenarios.push(
        await kernelScenario(device, options.quick, "f32", progress, kernelMiB),
        await kernelScenario(device, options.quick, "u16", progress, kernelMiB),
      );
    }
    for (const s of scenarios) (s.notes ??= []).push(`device: ${where}`);
    return scenarios;
  } finally {
    device.destroy();
  }
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  const only = Deno.args.includes("--kernels")
    ? "kernels"
    : Deno.args.includes("--allocation")
    ? "allocation"
    : "all";
  /** `--kernel-mib=<N>`: the transposed matrix's size (default 16; 1 quick). */
  const mibArg = Deno.args.find((a) => a.startsWith("--kernel-mib="));
  const kernelMiB = mibArg === undefined ? undefined : Number(mibArg.slice(13));
  if (
    kernelMiB !== undefined &&
    !(Number.isInteger(kernelMiB) && kernelMiB >= 1 && kernelMiB <= 1024)
  ) {
    throw new RangeError(
      `--kernel-mib must be an integer from 1 to 1024, got ${mibArg}`,
    );
  }
  const scenarios = await _run(
    {
      quick,
      progress: (m) => console.error(`… ${m}`),
    },
    only,
    kernelMiB,
  );
  for (const s of scenarios) {
    console.log(
      `\n## ${s.scenario} (${s.unit}, ${
        s.higherIsBetter ? "higher" : "lower"
      } is better)`,
    );
    for (const r of s.rows) {
      console.log(
        `  ${r.ours ? "*" : " "} ${r.name.padEnd(44)} ${
          r.value.toFixed(r.value < 10 ? 3 : 1).padStart(12)
        }  ${r.note ?? ""}`,
      );
    }
    for (const r of s.ratios ?? []) {
      console.log(
        `    ${r.label}: ${r.value.toFixed(2)}${
          r.target ? ` (target ${r.target}: ${r.met ? "met" : "NOT met"})` : ""
        }`,
      );
    }
    for (const n of s.notes ?? []) console.log(`    note: ${n}`);
  }
}
