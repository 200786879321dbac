import { MockSegmentSource } from "@allot/core";
import { StepPlannedPool } from "./step_planned_pool.ts";
Deno.test("dbg", () => {
  const units = [1, 4, 6, 2, 7, 3, 5, 14, 13, 8, 9, 12, 10, 11];
  const lives = [0, 0, 0, 0, 0, 0, 0, 1, 3, 0, 0, 1, 1, 0];
  const src = new MockSegmentSource({ alignment: 256 });
  const acq = src.tryAllocateSegment.bind(src);
  src.tryAllocateSegment = (n: number) => {
    console.log(
      "  seg",
      n,
      new Error().stack!.split("\n").slice(2, 6).join(" | "),
    );
    return acq(n);
  };
  const pool = new StepPlannedPool(src);
  for (let s = 0; s < 3; s++) {
    console.log("step", s);
    const pending: [any, number][] = [];
    units.forEach((u, i) => {
      if (s === 0 || i !== 7) {
        const b = pool.allocate(u * 256);
        pending.push([b, i + lives[i]]);
        console.log(" ", i, u, b.byteOffset, b.memory === pool["x"]);
      }
      for (let k = pending.length - 1; k >= 0; k--) {
        if (pending[k][1] <= i) {
          pool.free(pending[k][0]);
          pending.splice(k, 1);
        }
      }
    });
    for (const p of pending) pool.free(p[0]);
    pool.endStep();
    console.log(" arena", pool.arenaByteLength, pool.segmentsCreated);
  }
});
