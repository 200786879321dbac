import { CpuHeap } from "../../cpu/mod.ts";
import { logUniformTrace } from "../../cpu/bench/trace.ts";
import { SharedHeap } from "../mod.ts";
const trace = logUniformTrace(200000, 1000, 42);
const slots = new Int32Array(trace.slots);
function replay(heap: any) {
  const { kind, slot, byteLength } = trace;
  const t0 = performance.now();
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === 1) slots[slot[i]] = heap.alloc(byteLength[i]);
    else heap.free(slots[slot[i]]);
  }
  return performance.now() - t0;
}
const cpu = new CpuHeap(512 << 20);
const sh = SharedHeap.create(512 << 20);
const a: number[] = [], b: number[] = [];
for (let r = 0; r < 15; r++) {
  a.push(replay(cpu));
  b.push(replay(sh));
}
a.sort((x, y) => x - y);
b.sort((x, y) => x - y);
console.log(
  "min cpu",
  a[0].toFixed(1),
  "shared",
  b[0].toFixed(1),
  "median",
  a[7].toFixed(1),
  b[7].toFixed(1),
  "ratio(min)",
  (a[0] / b[0]).toFixed(2),
);
