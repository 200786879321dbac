import { makeOurs, replayOurs } from "./head_to_head.ts";
import { benchTraces } from "./traces.ts";
const trace = benchTraces(false)[Deno.args[0] === "tensor" ? 1 : 0];
const b = makeOurs();
let t = 0;
for (let r = 0; r < 200; r++) t += replayOurs(b, trace, true);
console.log(t);
