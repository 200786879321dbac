import { parseTrace } from "../../trace/parse_trace.ts";
import { traceOps } from "../../trace/replay.ts";
import { MockSegmentSource } from "@allot/core";
import { StepPlannedPool, type PlannedBlock } from "../step_planned_pool.ts";
for (const f of Deno.args) {
  const text = await new Response(new Blob([await Deno.readFile(f)]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
  const ops = traceOps(parseTrace(text), "storage");
  const pool = new StepPlannedPool(new MockSegmentSource({ capacityBytes: 2 ** 40, alignment: 256 }));
  const out = [];
  for (let p = 0; p < (Number(Deno.env.get("PASSES")) || 6); p++) {
    const c0 = pool.segmentsCreated;
    const live = new Map<number, PlannedBlock>();
    let replans = 0;
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
    out.push(`${pool.replanCount}r ${pool.segmentsCreated - c0}c ${(dt*1e6/ops.length).toFixed(0)}ns`);
  }
  console.log(f.split("/").pop(), out.join(" | "), "peak ratio", (pool.peakHeldBytes / pool.peakLiveBytes).toFixed(3));
}
