// StepPlannedPool as a `@allot/trace` replay policy: one pool per WebGPU
// usage (a buffer's usage is fixed at creation, so blocks of different
// usages cannot share a segment), over mock segment sources with WebGPU's
// 256-byte offset alignment; held bytes are the segments' bytes.

import { type MockMemory, MockSegmentSource } from "@allot/core";
import type { PolicyFactory, ReplayPolicy } from "../../trace/replay_policy.ts";
import { type PlannedBlock, StepPlannedPool } from "../step_planned_pool.ts";
import { StepPoolGroup } from "../step_pool_group.ts";

export function stepPlannedPolicy(name = "allot-step-planned"): PolicyFactory {
  return {
    name,
    description:
      "@allot/caching StepPlannedPool: best fit + per-step greedy-by-size plan, queue-order reuse",
    create(): ReplayPolicy {
      const pools = new Map<number, StepPlannedPool<MockMemory>>();
      // one device: the pools' held bytes are bounded together
      const group = new StepPoolGroup();
      const live = new Map<
        number,
        [StepPlannedPool<MockMemory>, PlannedBlock<MockMemory>]
      >();
      return {
        alloc(id, size, usage) {
          let p = pools.get(usage);
          if (p === undefined) {
            const source = new MockSegmentSource({
              capacityBytes: 2 ** 40,
              alignment: 256,
            });
            pools.set(usage, p = new StepPlannedPool(source, { group }));
          }
          live.set(id, [p, p.allocate(Math.max(1, size))]);
        },
        free(id) {
          const [p, b] = live.get(id)!;
          live.delete(id);
          p.free(b);
        },
        sync(kind) {
          if (kind === "step") group.endStep();
        },
        heldBytes() {
          let n = 0;
          for (const p of pools.values()) n += p.reservedBytes;
          return n;
        },
        buffersCreated() {
          let n = 0;
          for (const p of pools.values()) n += p.segmentsCreated;
          return n;
        },
      };
    },
  };
}
