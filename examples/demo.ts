/**
 * The end-to-end demo (`./scripts/allot demo`): compose a registry with a CPU
 * heap, the caching allocator and WebGPU when an adapter exists (the CPU
 * otherwise, said out loud); create tensors, take zero-copy views, make them
 * contiguous on the device, read them back, check them against the CPU,
 * free everything, print memory summaries and write a snapshot file.
 *
 * @module
 */

import { CachingAllocator, CachingAllocatorAdapter } from "@allot/caching";
import type { Allocator } from "@allot/core";
import { CpuAllocator, HostSegmentSource } from "@allot/cpu";
import { Registry } from "@allot/registry";
import { Buffer, type BufferBackend } from "@allot/storage";
import { GpuBufferBackend, GpuCachingAllocator } from "@allot/webgpu";
import {
  formatTrace,
  fromAllocatorSnapshot,
  memoryReport,
  type SnapshotLike,
} from "@allot/trace";

const MiB = 2 ** 20;
const out = new URL("../.out/", import.meta.url);

// 1. Compose: the registry maps devices to allocators; nothing registers
//    itself.
const registry = new Registry();
const cpu = new CpuAllocator({ byteLength: 64 * MiB });
registry.set("cpu", cpu);

let target = "cpu:0";
let backend: BufferBackend | undefined;
let summary: () => string;
let synchronize: () => Promise<void> = () => Promise.resolve();
let deviceAllocations: () => number;
let snapshot: () => unknown;
let gpuDevice: GPUDevice | undefined;

// ALLOT_DEMO_CPU=1 shows the CPU path on a machine that has an adapter.
const adapter = Deno.env.get("ALLOT_DEMO_CPU")
  ? undefined
  : await navigator.gpu?.requestAdapter();
if (adapter) {
  gpuDevice = await adapter.requestDevice();
  const gpu = new GpuCachingAllocator(gpuDevice, { recordHistory: true });
  registry.set("webgpu", gpu.asAllocator(), { priority: 10 });
  backend = new GpuBufferBackend(gpuDevice);
  target = "webgpu:0";
  summary = () => gpu.caching.memorySummary({ abbreviated: true });
  snapshot = () => gpu.caching.snapshot();
  synchronize = () => gpu.synchronize();
  deviceAllocations = () => gpu.memoryStats().numDeviceAlloc;
  console.log(
    `WebGPU adapter found (${
      adapter.info.description || adapter.info.vendor || "unnamed"
    }): tensors live in GPU memory through the caching allocator`,
  );
} else {
  const caching = new CachingAllocator(new HostSegmentSource(), {
    recordHistory: true,
  });
  registry.set("cpu:1", new CachingAllocatorAdapter(caching));
  target = "cpu:1";
  summary = () => caching.memorySummary({ abbreviated: true });
  snapshot = () => caching.snapshot();
  deviceAllocations = () => caching.memoryStats().numDeviceAlloc;
  console.log(
    "No WebGPU adapter: running on the CPU, through the caching allocator over host memory",
  );
}
for (const entry of registry.entries()) {
  console.log(
    `  registry: ${entry.target} -> ${entry.allocator.constructor.name} (priority ${entry.priority})`,
  );
}

{
  // 2. Tensors on the target device and a reference copy on the CPU heap.
  const device: Allocator = registry.get(target);
  const [rows, cols] = [256, 384];
  const data = Float32Array.from({ length: rows * cols }, (_, i) => i % 1000);
  using a = Buffer.fromData("f32", data, {
    shape: [rows, cols],
    allocator: device,
    backend,
  });
  using reference = Buffer.fromData("f32", data, {
    shape: [rows, cols],
    allocator: registry.get("cpu"),
  });
  console.log(`\ncreated ${a} on ${target}`);

  // 3. Zero-copy views: transpose, then every third row of it, reversed.
  using t = a.transpose();
  using stepped = t.slice(0, { start: cols - 1, step: -3 });
  console.log(
    `view: shape [${stepped.shape}] strides [${stepped.strides}] offset ${stepped.offset}, shares storage: ${
      stepped.sharesStorageWith(a)
    }`,
  );

  // 4. Pack on the device (a WGSL kernel on WebGPU) and read back.
  using packed = stepped.contiguous();
  const got = await packed.read();
  using refT = reference.transpose();
  using refStepped = refT.slice(0, { start: cols - 1, step: -3 });
  const expected = refStepped.toData();
  let mismatches = 0;
  for (let i = 0; i < expected.length; i++) {
    if (got[i] !== expected[i]) mismatches++;
  }
  console.log(
    `contiguous(): ${packed.length} elements read back, ${mismatches} mismatches against the CPU`,
  );
  if (mismatches !== 0) throw new Error("device result differs from the CPU");

  // 5. A step loop: each step waits for the previous step's work (as a runtime
  //    does when it reads a result), allocates a scratch tensor that the GPU
  //    fills, and frees it at the end of the step. A freed block returns to
  //    the pool once the work that used it is done, so every step after the
  //    first is served from the cache.
  const before = deviceAllocations();
  for (let step = 0; step < 50; step++) {
    await synchronize(); // the previous step's work is done
    using _scratch = Buffer.zeros("f32", [rows, cols], {
      allocator: device,
      backend,
    }); // released at the end of the step
  }
  console.log(
    `loop: 50 steps made ${
      deviceAllocations() - before
    } new device allocation(s)`,
  );
}
await synchronize();

// 6. Every tensor was released when the block above ended (`using`). What
//    the allocators hold now, and a snapshot for tools.
console.log(`\n${summary()}`);
const cpuStats = cpu.stats();
console.log(
  `CPU heap: ${cpu.allocatedBytes} B in use, peak ${cpuStats.peak} B, reserved ${cpu.reservedBytes} B`,
);
await Deno.mkdir(out, { recursive: true });
const file = new URL("demo-snapshot.json", out);
await Deno.writeTextFile(file, JSON.stringify(snapshot(), null, 2));
console.log(`snapshot written to ${file.pathname}`);
// The same history as a trace, and a report to open in a browser.
const trace = fromAllocatorSnapshot(snapshot() as SnapshotLike, "allot demo");
await Deno.writeTextFile(new URL("demo-trace.jsonl", out), formatTrace(trace));
const report = new URL("demo-report.html", out);
await Deno.writeTextFile(report, memoryReport(trace, { repeat: 1 }));
console.log(`memory report written to ${report.pathname}`);

const live = snapshot() as { segments: { blocks: { state: string }[] }[] };
const active =
  live.segments.flatMap((seg) => seg.blocks).filter((b) =>
    b.state !== "inactive"
  ).length;
console.log(
  `after the block: ${active} active block(s), CPU heap ${cpu.allocatedBytes} B in use`,
);
if (active !== 0 || cpu.allocatedBytes !== 0) {
  throw new Error("demo leaked memory");
}
gpuDevice?.destroy();
console.log("demo done: every tensor was released at scope exit");
