import { parseTrace, traceOps } from "@allot/trace";
import { StepPlannedPool, type PlannedBlock } from "@allot/caching";
import { MockSegmentSource } from "@allot/core";
import { GpuSegmentSource } from "../gpu_segment_source.ts";
const f = Deno.args[0];
const text = await new Response(new Blob([await Deno.readFile(f)]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
const ops = traceOps(parseTrace(text), "storage");
const adapter = await navigator.gpu.requestAdapter();
const device = await adapter!.requestDevice();
for (const kind of ["gpu", "mock", "gpu", "mock"]) {
  const source = kind === "gpu" ? new GpuSegmentSource(device) : new MockSegmentSource({ capacityBytes: 2 ** 40, alignment: 256 });
  // deno-lint-ignore no-explicit-any
  const pool = new StepPlannedPool<any>(source);
  const out = [];
  for (let p = 0; p < 8; p++) {
    const c0 = pool.segmentsCreated, r0 = pool.replanCount;
    const live = new Map<number, PlannedBlock>();
    const t = performance.now();
    for (let i = 0; i < ops.length; i++) {
      const c = ops.code[i];
      if (c === 0) live.set(ops.id[i], pool.allocate(ops.size[i]));
      else if (c === 1) { pool.free(live.get(ops.id[i])!); live.delete(ops.id[i]); }
      else if (c === 3) pool.endStep();
    }
    const dt = performance.now() - t;
    for (const b of live.values()) pool.free(b);
    pool.endStep();
    out.push(`${pool.replanCount - r0}r ${pool.segmentsCreated - c0}c ${(dt*1e6/ops.length).toFixed(0)}ns`);
  }
  console.log(kind, out.join(" | "));
}
