import { parseTrace } from "../../trace/parse_trace.ts";
import { traceOps } from "../../trace/replay.ts";
import { MockSegmentSource } from "@allot/core";
import { StepPlannedPool } from "../step_planned_pool.ts";
const f = Deno.args[0];
let text: string;
if (f.endsWith(".gz")) text = await new Response(new Blob([await Deno.readFile(f)]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
else text = await Deno.readTextFile(f);
const ops = traceOps(parseTrace(text), "storage");
const pool = new StepPlannedPool(new MockSegmentSource({ capacityBytes: 2 ** 40, alignment: 256 }));
const live = new Map();
let stepPeakLive = 0, stepPeakHeld = 0, live0 = 0;
for (let i = 0; i < ops.length; i++) {
  const c = ops.code[i];
  if (c === 0) { live.set(ops.id[i], pool.allocate(ops.size[i])); }
  else if (c === 1) { pool.free(live.get(ops.id[i])); live.delete(ops.id[i]); }
  else if (c === 3) {
    console.log(`step ${pool.stepCount}: liveAtEnd ${(pool.liveBytes/2**20).toFixed(2)} peakLive ${(stepPeakLive/2**20).toFixed(2)} peakHeld ${(stepPeakHeld/2**20).toFixed(2)} created ${pool.segmentsCreated} segs ${pool.segmentCount}`);
    pool.endStep(); pool.validate();
    console.log(`   after endStep: held ${(pool.heldBytes/2**20).toFixed(2)} arena ${(pool.arenaByteLength/2**20).toFixed(2)} created ${pool.segmentsCreated}`);
    stepPeakLive = pool.liveBytes; stepPeakHeld = pool.heldBytes;
  }
  stepPeakLive = Math.max(stepPeakLive, pool.liveBytes); stepPeakHeld = Math.max(stepPeakHeld, pool.heldBytes);
}
console.log("overall", pool.peakHeldBytes / pool.peakLiveBytes);
