import { parseTrace } from "../../trace/parse_trace.ts";
import { replayOps, traceOps } from "../../trace/replay.ts";
import { stepPlannedPolicy } from "./_step_planned_policy.ts";
const f = Deno.args[0];
const text = await new Response(new Blob([await Deno.readFile(f)]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
const ops = traceOps(parseTrace(text), "storage");
for (let i = 0; i < 5; i++) {
  const r = replayOps(ops, { policies: [stepPlannedPolicy()], repeat: 3 });
  console.log(r.policies[0].nsPerOp.toFixed(0));
}
