// Where a StepPoolGroup's held bytes sit on a recorded trace (all buffers,
// one pool per usage on mock sources): per step, live and held peaks, the
// arena, replans and fast steps; each segment made or given back (op, step,
// size, live then); and at the held peak each pool's segments.
//
// Run: deno run -A packages/caching/bench/_step_held_at_peak.ts --only=cnn [--usage=storage] [--passes=N]

import { type MockMemory, MockSegmentSource } from "@allot/core";
import { readRecordedTrace } from "../../trace/_test_traces.ts";
import { traceOps } from "../../trace/mod.ts";
import { type PlannedBlock, StepPlannedPool } from "../step_planned_pool.ts";
import { StepPoolGroup } from "../step_pool_group.ts";
import { recordedTraceNames } from "../../../scripts/bench/recorded_traces.ts";

const only = Deno.args.find((a) => a.startsWith("--only="))?.slice(7) ?? "cnn";
const usage = Deno.args.includes("--usage=storage") ? "storage" : "all";
const passes = Number(
  Deno.args.find((a) => a.startsWith("--passes="))?.slice(9) ?? 1,
);
const verbose = Deno.args.includes("--segments");
const names = recordedTraceNames(only);
const K = (n: number) => (n / 1024).toFixed(1);

for (const name of names) {
  const ops = traceOps(await readRecordedTrace(name), usage);
  const group = new StepPoolGroup();
  const pools = new Map<number, StepPlannedPool<MockMemory>>();
  const blocks = new Map<
    number,
    [StepPlannedPool<MockMemory>, PlannedBlock<MockMemory>]
  >();
  let step = 0, op = 0, peakHeld = 0, peakLive = 0, stepLive = 0, stepHeld = 0;
  let at = "";
  const log = (s: string) => verbose && console.log(s);
  for (let pass = 0; pass < passes; pass++) {
    for (let i = 0; i < ops.length; i++, op++) {
      const c = ops.code[i];
      if (c === 0) {
        const u = ops.usage[i];
        let p = pools.get(u);
        if (p === undefined) {
          const source = new MockSegmentSource({ alignment: 256 });
          const acquire = source.tryAllocateSegment.bind(source);
          const release = source.freeSegment.bind(source);
          source.tryAllocateSegment = (size, options) => {
            log(
              `  + seg 0x${u.toString(16)} ${
                K(size)
              } KiB at op ${op} step ${step} live ${
                K(group.requestedBytes)
              } held ${K(group.reservedBytes)}`,
            );
            return acquire(size, options);
          };
          source.freeSegment = (seg) => {
            log(
              `  - seg 0x${u.toString(16)} ${
                K(seg.byteLength)
              } KiB at op ${op} step ${step}`,
            );
            return release(seg);
          };
          pools.set(u, p = new StepPlannedPool(source, { group }));
        }
        blocks.set(ops.id[i], [p, p.allocate(Math.max(1, ops.size[i]))]);
        const live = group.requestedBytes, held = group.reservedBytes;
        if (live > peakLive) peakLive = live;
        if (live > stepLive) stepLive = live;
        if (held > stepHeld) stepHeld = held;
        if (held > peakHeld) {
          peakHeld = held;
          at = `op ${op} step ${step} live ${K(live)}: ` +
            [...pools].map(([u, p]) =>
              `0x${u.toString(16)} ${K(p.reservedBytes)}/${
                K(p.requestedBytes)
              } arena ${K(p.arenaByteLength)} segs ${p.segmentCount}`
            ).join(", ");
        }
      } else if (c === 1) {
        const [p, b] = blocks.get(ops.id[i])!;
        blocks.delete(ops.id[i]);
        p.free(b);
      } else if (c === 3) {
        const s = [...pools].map(([u, p]) =>
          `0x${u.toString(16)} arena ${K(p.arenaByteLength)} held ${
            K(p.reservedBytes)
          } live ${
            K(p.requestedBytes)
          } replans ${p.replanCount} fast ${p.fastStepCount}`
        ).join("; ");
        console.log(
          `step ${step}: peak live ${K(stepLive)} held ${K(stepHeld)} (${
            (stepHeld / stepLive).toFixed(3)
          }) | ${s}`,
        );
        group.endStep();
        step++;
        stepLive = group.requestedBytes;
        stepHeld = group.reservedBytes;
      }
    }
    for (const [id, [p, b]] of blocks) {
      p.free(b);
      blocks.delete(id);
    }
    group.endStep();
    step++;
  }
  console.log(
    `${name} ${usage}: peak held ${K(peakHeld)} / live ${K(peakLive)} = ${
      (peakHeld / peakLive).toFixed(4)
    } at ${at}`,
  );
}
