/**
 * In-process A/B of `GpuCachingAllocator` on the real runtime traces (issue
 * #15's per-op target): this working tree's `@allot/webgpu` (with its
 * `@allot/caching` and `@allot/core`) against the same packages at a git ref
 * (default `main`), both loaded in one process, with TF.js's real
 * `BufferManager` and the no-op peer beside them. The replay is
 * `real_traces.ts`'s (storage requests; each allocation charged for reading
 * the buffer and offset), in two modes: runtime-like warm passes (awaits at
 * the trace's marks, untimed; a `gc()` before each pass; one instance per
 * peer reused; wall-clock time of the timed stretches) and the tight loop
 * (no awaits, warm instances; the mean of `--reps` passes per measurement,
 * since one pass takes well under a millisecond). Each round
 * runs every peer once, the order rotated and reversed every other round
 * (each peer follows each neighbour as often); the figure is the median over
 * rounds of per-round ratios (ref / this, TF.js / this), with their range.
 *
 * Every allot peer (this tree's handles, the ref's, this tree's ids, the
 * core peer) runs its own copy of the packages, loaded the same way
 * (`_tree_copy.ts` for the working tree, `importAtRef` for the ref): no peer
 * runs code another peer has warmed, or that was compiled for another
 * peer's shapes. Until 2026-11-25 the handle and id peers shared this tree's
 * modules, and an A/A run (`--ref=HEAD`) read ref / this 0.78–0.97 warm.
 *
 * A shared machine swings single rounds; ratios taken within one round see
 * the same load. Check the harness with `--ref=HEAD` on a clean tree: warm
 * and tight medians within about ±5 % of 1 (BENCHMARKS.md, ninth pass).
 *
 * Run: `deno run -A --v8-flags=--expose-gc packages/webgpu/bench/trace_ab.ts [--ref=main] [--rounds=15] [--reps=20] [--only=<part of a trace path>] [--clock=cpu] [--core] [--ref-ids] [--no-ids] [--jit-passes=N]`
 *
 * @module
 */

import { traceOps } from "@allot/trace";
import { BufferManager } from "@tensorflow/tfjs-backend-webgpu/dist/buffer_manager.js";
import type { CachedBlock } from "@allot/caching";
import { threadCpuClock, timeRotatedRounds } from "./_replay_pass.ts";
import { importTreeCopy } from "./_tree_copy.ts";
import { flag, importAtRef } from "../../../scripts/bench/import_at_ref.ts";
import {
  loadRecordedTrace,
  recordedTraceNames,
} from "../../../scripts/bench/recorded_traces.ts";

const ref = flag("ref", "main");
const rounds = Number(flag("rounds", "15"));
const only = flag("only", "");
/** Passes per tight-loop measurement (one pass is under a millisecond). */
const reps = Number(flag("reps", "20"));
/**
 * `--jit-passes=N`: after the warm-up pass, N more untimed passes without
 * awaits on each peer's instance, so the measured passes run code the JIT
 * has compiled as a long-running runtime's would be (default 0: one pass of
 * mlp-varbatch, 57 requests, leaves allot's hot path in the lower tiers).
 */
const jitPasses = Number(flag("jit-passes", "0"));
/**
 * `--clock=cpu`: time the stretches in this thread's CPU time instead of
 * wall-clock time (a loaded machine's preemptions then charge no peer).
 */
const clockFlag = flag("clock", "wall");
const cpuClock = clockFlag === "cpu" ? threadCpuClock() : undefined;
if (clockFlag === "cpu" && cpuClock === undefined) {
  console.log("no thread CPU clock here: wall-clock time");
}
const now = cpuClock ?? (() => performance.now());
/**
 * `--core`: one more peer, this tree's `GpuCachingAllocator`'s own
 * `CachingAllocator` driven directly (same policy and source, `CachedBlock`
 * handles, no GPU layer): `core / this` is the GPU layer's share. Off by
 * default: one more peer leaves the others' code and data colder.
 */
const withCore = Deno.args.includes("--core");

/** What the harness uses of a `GpuCachingAllocator`, old or new. */
interface Handle {
  readonly buffer: GPUBuffer;
  readonly offset: number;
  release(): void;
}
interface Caching {
  allocate(byteLength: number): Handle;
  emptyCache(): void;
  // the id path (at refs that have it)
  allocateId?(byteLength: number): number;
  bufferOf?(id: number): GPUBuffer;
  offsetOf?(id: number): number;
  freeById?(id: number): void;
}
type CachingClass = new (device: GPUDevice) => Caching;
/** The core peer's view: the pool's own `CachingAllocator`. */
interface CoreOwner {
  readonly caching: {
    allocate(byteLength: number): CachedBlock<GPUBuffer>;
    emptyCache(): void;
  };
}

type CachingModule = { GpuCachingAllocator: CachingClass };
const MODULE = "webgpu/gpu_caching_allocator.ts";
// Every allot peer runs its own copy of the packages, loaded the same way:
// this tree's handle peer, the ref's, this tree's id peer (and the core
// peer). Sharing one copy (the id peer and the handle peer did) leaves the
// shared code warmer for one side, and its type feedback made for two
// peers' shapes, which biased an A/A run (`--ref=HEAD`) by up to 20 % warm.
const ThisCaching = (await importTreeCopy<CachingModule>(MODULE))
  .GpuCachingAllocator;
const RefCaching = (await importAtRef<CachingModule>(ref, MODULE))
  .GpuCachingAllocator;
const IdsCaching = (await importTreeCopy<CachingModule>(MODULE))
  .GpuCachingAllocator;
const names = recordedTraceNames(only);

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
  dispose(): void;
}

let sink: unknown;
// Two literal copies, one per side: closures made from one literal share
// their feedback, so both sides' classes would meet at each call site
// (polymorphic, slower for both) where a runtime has one.
const thisPeer = (): Peer => {
  const a = new ThisCaching(device);
  return {
    alloc: (size) => a.allocate(size),
    use: (h) => (sink = (h as Handle).buffer, (h as Handle).offset),
    free: (h) => (h as Handle).release(),
    dispose: () => a.emptyCache(),
  };
};
const refPeer = (): Peer => {
  const a = new RefCaching(device);
  return {
    alloc: (size) => a.allocate(size),
    use: (h) => (sink = (h as Handle).buffer, (h as Handle).offset),
    free: (h) => (h as Handle).release(),
    dispose: () => a.emptyCache(),
  };
};
// This tree's id path (`allocateId` / `bufferOf` / `offsetOf` /
// `freeById`): charged the same reads to bind (the buffer and the offset).
const idsPeer = (): Peer => {
  const a = new IdsCaching(device);
  return {
    alloc: (size) => a.allocateId!(size),
    use: (id) => (sink = a.bufferOf!(id as number), a.offsetOf!(id as number)),
    free: (id) => a.freeById!(id as number),
    dispose: () => a.emptyCache(),
  };
};
const kinds: { name: string; make: () => Peer }[] = [
  { name: "this", make: thisPeer },
  { name: ref, make: refPeer },
  {
    name: "TF.js",
    make() {
      const m = new BufferManager(device);
      return {
        alloc: (size, usage) => m.acquireBuffer(size, usage),
        use: (b) => (sink = b, 0),
        free: (b) => m.releaseBuffer(b as GPUBuffer),
        dispose: () => m.dispose(),
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
        dispose() {},
      };
    },
  },
];
/**
 * `--no-ids`: a control. The id peer runs this tree's caching code too, so
 * the handle peer's first operation after each await finds that code warmer
 * than the ref's copy does; with `--no-ids` a second no-op peer takes its
 * place (same number of peers; the `ids` columns then time that no-op).
 */
const noIds = Deno.args.includes("--no-ids");
/** Index of the id-path peer in `kinds`. */
const IDS = kinds.push(
  noIds
    ? { name: "no-op 2", make: kinds[3].make }
    : { name: "this ids", make: idsPeer },
) - 1;
/**
 * `--ref-ids`: one more peer, the ref's id path (a ref that has one):
 * `ref ids / this ids` is then the last column.
 */
const withRefIds = Deno.args.includes("--ref-ids");
if (withRefIds) {
  kinds.push({
    name: `${ref} ids`,
    make() {
      const a = new RefCaching(device);
      return {
        alloc: (size) => a.allocateId!(size),
        use: (
          id,
        ) => (sink = a.bufferOf!(id as number), a.offsetOf!(id as number)),
        free: (id) => a.freeById!(id as number),
        dispose: () => a.emptyCache(),
      };
    },
  });
}
/** Index of the core peer in `kinds` (after the optional ref ids). */
const CORE = kinds.length;
if (withCore) {
  const CoreCaching = (await importTreeCopy<
    { GpuCachingAllocator: new (device: GPUDevice) => CoreOwner }
  >(MODULE)).GpuCachingAllocator;
  kinds.push({
    name: "core",
    make() {
      const a = new CoreCaching(device).caching;
      return {
        alloc: (size) => a.allocate(size),
        use: (
          b,
        ) => (sink = (b as CachedBlock<GPUBuffer>).memory,
          (b as CachedBlock<GPUBuffer>).byteOffset),
        free: (b) => (b as CachedBlock<GPUBuffer>).release(),
        dispose: () => a.emptyCache(),
      };
    },
  });
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
const range = (v: number[]) =>
  `${Math.min(...v).toFixed(2)}–${Math.max(...v).toFixed(2)}`;

console.log(
  `| trace | mode | this ns | ${ref} ns | TF.js ns | no-op ns | this ids ns |${
    withRefIds ? ` ${ref} ids ns |` : ""
  }${
    withCore ? " core ns |" : ""
  } ${ref} / this | TF.js / this | TF.js / ${ref} | TF.js / this ids | this / this ids |${
    withCore ? " core / this |" : ""
  }${withRefIds ? ` ${ref} ids / this ids |` : ""}`,
);
console.log(
  `|---|---|---:|---:|---:|---:|---:|${withRefIds ? "---:|" : ""}${
    withCore ? "---:|" : ""
  }---:|---:|---:|---:|---:|${withCore ? "---:|" : ""}${
    withRefIds ? "---:|" : ""
  }`,
);
for (const name of names) {
  const ops = traceOps(await loadRecordedTrace(name), "storage");
  for (const mode of ["warm", "tight"] as const) {
    const peers = kinds.map((k) => k.make());
    const times = await timeRotatedRounds(device, ops, peers, {
      mode,
      rounds,
      reps,
      jitPasses,
      now,
      alternate: true,
    });
    for (const p of peers) p.dispose();
    const ratio = (a: number, b: number) =>
      times[a].map((v, r) => v / times[b][r]);
    const refThis = ratio(1, 0), tfThis = ratio(2, 0), tfRef = ratio(2, 1);
    const cell = (v: number[]) => `${median(v).toFixed(2)} (${range(v)})`;
    console.log(
      `| ${name.replace(".jsonl.gz", "")} | ${mode} | ${
        times.map((v) => median(v).toFixed(0)).join(" | ")
      } | ${cell(refThis)} | ${cell(tfThis)} | ${cell(tfRef)} | ${
        cell(ratio(2, IDS))
      } | ${cell(ratio(0, IDS))} |${
        withCore ? ` ${cell(ratio(CORE, 0))} |` : ""
      }${withRefIds ? ` ${cell(ratio(IDS + 1, IDS))} |` : ""}`,
    );
  }
}
await device.queue.onSubmittedWorkDone();
device.destroy();
void sink;
