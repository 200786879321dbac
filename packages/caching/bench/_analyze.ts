import { parseTrace } from "../../trace/parse_trace.ts";
import { replayTrace, DEFAULT_POLICIES } from "../../trace/replay.ts";
import { stepPlannedPolicy } from "./_step_planned_policy.ts";
const files = Deno.args;
for (const f of files) {
  let text: string;
  if (f.endsWith(".gz")) {
    const data = await Deno.readFile(f);
    text = await new Response(new Blob([data]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
  } else text = await Deno.readTextFile(f);
  const trace = parseTrace(text);
  for (const usage of ["storage", "all"] as const) {
    const r = replayTrace(trace, { usage, repeat: 3, policies: [...DEFAULT_POLICIES.slice(0, 3), stepPlannedPolicy()] });
    console.log(`${f.split("/").pop()} [${usage}] live ${(r.peakLiveBytes/2**20).toFixed(2)} MiB, ${r.allocations} allocs`);
    for (const p of r.policies) console.log(`  ${p.name.padEnd(22)} ${(p.peakHeldBytes / r.peakLiveBytes).toFixed(3)}  created ${p.buffersCreated} after1st ${p.buffersCreatedAfterFirstStep} ${p.nsPerOp.toFixed(0)} ns/op ${p.error ?? ""}`);
  }
}
