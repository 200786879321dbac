/**
 * In-process A/B of `StepPlannedPool` and `GpuPlannedAllocator` on the real
 * runtime traces (issue #15's per-op target): this working tree's packages
 * against the same packages at a git ref (default `main`), both loaded in
 * one process, with TF.js's real `BufferManager` and the no-op peer beside
 * them. The replay is `real_traces.ts`'s (`_replay_pass.ts`: storage
 * requests, each allocation charged for reading the buffer and offset,
 * `endStep()` at the trace's step marks, timed), in two modes: runtime-like
 * warm passes (awaits at the trace's marks, untimed; a `gc()` before each
 * pass; one instance per peer reused) and the tight loop (no awaits, warm
 * instances; the mean of `--reps` passes per measurement). Each round runs
 * every peer once, the order rotated; the figures are the medians over
 * rounds of per-round ratios (TF.js / peer, ref / this) with their range.
 *
 * Run: `deno run -A --v8-flags=--expose-gc packages/webgpu/bench/planned_ab.ts [--ref=main] [--rounds=11] [--reps=10] [--only=<part of a trace path>] [--modes=warm,tight] [--clock=cpu]`
 *
 * @module
 */

import { traceOps } from "@allot/trace";
import { BufferManager } from "@tensorflow/tfjs-backend-webgpu/dist/buffer_manager.js";
import { StepPlannedPool } from "@allot/caching";
import { GpuPlannedAllocator } from "../gpu_planned_allocator.ts";
import { GpuSegmentSource } from "../gpu_segment_source.ts";
import { threadCpuClock, timeRotatedRounds } from "./_replay_pass.ts";
import { flag, importAtRef } from "../../../scripts/bench/import_at_ref.ts";
import {
  loadRecordedTrace,
  recordedTraceNames,
} from "../../../scripts/bench/recorded_traces.ts";

const ref = flag("ref", "main");
const rounds = Number(flag("rounds", "11"));
const reps = Number(flag("reps", "10"));
const only = flag("only", "");
const modes = flag("modes", "warm,tight").split(",");
const cpuClock = flag("clock", "wall") === "cpu" ? threadCpuClock() : undefined;
const now = cpuClock ?? (() => performance.now());

/** What the harness uses of a block or handle, old or new. */
interface Block {
  readonly memory: GPUBuffer;
  readonly byteOffset: number;
}
interface Handle {
  readonly buffer: GPUBuffer;
  readonly offset: number;
  release(): void;
}
interface Pool {
  allocate(n: number): Block;
  free(b: Block): void;
  endStep(): void;
  emptyCache(): void;
}
interface Planned {
  allocate(n: number): Handle;
  endStep(): void;
  emptyCache(): void;
}
type PoolClass = new (source: unknown) => Pool;
type PlannedClass = new (device: GPUDevice) => Planned;

const RefPool = (await importAtRef<{ StepPlannedPool: PoolClass }>(
  ref,
  "caching/mod.ts",
)).StepPlannedPool;
const refWebgpu = await importAtRef<
  { GpuPlannedAllocator: PlannedClass; GpuSegmentSource: unknown }
>(ref, "webgpu/mod.ts");
const RefPlanned = refWebgpu.GpuPlannedAllocator;
const RefSource = refWebgpu.GpuSegmentSource as new (d: GPUDevice) => unknown;

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

interface Peer {
  alloc(size: number, usage: number): unknown;
  use(handle: unknown): number;
  free(handle: unknown): void;
  step(): void;
  dispose(): void;
}

let sink: unknown;
// One literal per peer: closures made from one literal share their
// feedback, so both sides' classes would meet at each call site.
const kinds: { name: string; make: () => Peer }[] = [
  {
    name: "TF.js",
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
    name: "StepPlanned",
    make() {
      const p = new (StepPlannedPool as unknown as PoolClass)(
        new GpuSegmentSource(device),
      );
      return {
        alloc: (size) => p.allocate(size),
        use: (b) => (sink = (b as Block).memory, (b as Block).byteOffset),
        free: (b) => p.free(b as Block),
        step: () => p.endStep(),
        dispose: () => p.emptyCache(),
      };
    },
  },
  {
    name: `StepPlanned@${ref}`,
    make() {
      const p = new RefPool(new RefSource(device));
      return {
        alloc: (size) => p.allocate(size),
        use: (b) => (sink = (b as Block).memory, (b as Block).byteOffset),
        free: (b) => p.free(b as Block),
        step: () => p.endStep(),
        dispose: () => p.emptyCache(),
      };
    },
  },
  {
    name: "GpuPlanned",
    make() {
      const a = new (GpuPlannedAllocator as unknown as PlannedClass)(device);
      return {
        alloc: (size) => a.allocate(size),
        use: (h) => (sink = (h as Handle).buffer, (h as Handle).offset),
        free: (h) => (h as Handle).release(),
        step: () => a.endStep(),
        dispose: () => a.emptyCache(),
      };
    },
  },
  {
    name: `GpuPlanned@${ref}`,
    make() {
      const a = new RefPlanned(device);
      return {
        alloc: (size) => a.allocate(size),
        use: (h) => (sink = (h as Handle).buffer, (h as Handle).offset),
        free: (h) => (h as Handle).release(),
        step: () => a.endStep(),
        dispose: () => a.emptyCache(),
      };
    },
  },
  {
    name: "no-op",
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
const TFJS = 0, SP = 1, SP_REF = 2, GP = 3, GP_REF = 4;

const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
const cell = (v: number[]) =>
  `${median(v).toFixed(2)} (${Math.min(...v).toFixed(2)}–${
    Math.max(...v).toFixed(2)
  })`;

console.log(
  `| trace | mode | ${
    kinds.map((k) => `${k.name} ns`).join(" | ")
  } | TF.js / StepPlanned | TF.js / GpuPlanned | ${ref} / this, StepPlanned | ${ref} / this, GpuPlanned | TF.js / StepPlanned@${ref} |`,
);
console.log(
  `|---|---|${kinds.map(() => "---:|").join("")}---:|---:|---:|---:|---:|`,
);
for (const name of recordedTraceNames(only)) {
  const ops = traceOps(await loadRecordedTrace(name), "storage");
  for (const mode of modes) {
    const peers = kinds.map((k) => k.make());
    const times = await timeRotatedRounds(device, ops, peers, {
      mode,
      rounds,
      reps,
      now,
    });
    for (const p of peers) p.dispose();
    const ratio = (a: number, b: number) =>
      times[a].map((v, r) => v / times[b][r]);
    console.log(
      `| ${name.replace(".jsonl.gz", "")} | ${mode} | ${
        times.map((v) => median(v).toFixed(0)).join(" | ")
      } | ${cell(ratio(TFJS, SP))} | ${cell(ratio(TFJS, GP))} | ${
        cell(ratio(SP_REF, SP))
      } | ${cell(ratio(GP_REF, GP))} | ${cell(ratio(TFJS, SP_REF))} |`,
    );
  }
}
await device.queue.onSubmittedWorkDone();
device.destroy();
void sink;
