import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError, MockSegmentSource } from "@allot/core";
import { CachingAllocator } from "./caching_allocator.ts";
import {
  type AllocationTrace,
  replayTrace,
  summarizeTrace,
  trainingStepTrace,
  transformerInferenceTrace,
} from "./traces.ts";

function checkWellFormed(trace: AllocationTrace): void {
  const live = new Set<number>();
  const seen = new Set<number>();
  for (const op of trace.ops) {
    if (op.kind === "alloc") {
      assert.ok(!seen.has(op.id), `id ${op.id} reused`);
      assert.ok(Number.isSafeInteger(op.byteLength) && op.byteLength > 0);
      seen.add(op.id);
      live.add(op.id);
    } else if (op.kind === "free") {
      assert.ok(live.delete(op.id), `id ${op.id} freed while not live`);
    }
  }
  assert.equal(live.size, 0, "every allocation is freed by the end");
  assert.ok(trace.warmupOps > 0 && trace.warmupOps < trace.ops.length);
}

function replay(trace: AllocationTrace) {
  const device = new MockSegmentSource();
  const allocator = new CachingAllocator(device);
  let atWarmup = -1;
  replayTrace(trace, {
    allocate: (n) => allocator.allocate(n),
    free: (block) => block.release(),
    onOp: (i) => {
      if (i === trace.warmupOps) atWarmup = device.allocationCount;
    },
  });
  allocator.validate();
  return {
    ratio: device.peakReservedBytes / summarizeTrace(trace).peakRequestedBytes,
    afterWarmup: device.allocationCount - atWarmup,
    allocatedBytes: allocator.allocatedBytes,
  };
}

describe("traces", () => {
  it("transformerInferenceTrace() is deterministic and frees everything", () => {
    const a = transformerInferenceTrace({ layers: 2, rounds: 2 });
    const b = transformerInferenceTrace({ layers: 2, rounds: 2 });
    assert.deepEqual(a, b);
    checkWellFormed(a);
    const summary = summarizeTrace(a);
    assert.ok(summary.distinctSizes > 50, "sequence lengths change");
  });

  it("trainingStepTrace() is deterministic and frees everything", () => {
    const a = trainingStepTrace({ layers: 2, steps: 3 });
    assert.deepEqual(a, trainingStepTrace({ layers: 2, steps: 3 }));
    checkWellFormed(a);
  });

  it("CachingAllocator replays the inference trace within 1.15x of peak live bytes, with no device allocations after warm-up", () => {
    const result = replay(transformerInferenceTrace());
    assert.equal(result.afterWarmup, 0);
    assert.ok(result.ratio <= 1.15, `ratio ${result.ratio}`);
    assert.equal(result.allocatedBytes, 0);
  });

  it("CachingAllocator replays the training trace within 1.15x of peak live bytes, with no device allocations after warm-up", () => {
    const result = replay(trainingStepTrace());
    assert.equal(result.afterWarmup, 0);
    assert.ok(result.ratio <= 1.15, `ratio ${result.ratio}`);
  });

  it("replayTrace() refuses a trace that frees an unknown id", () => {
    const trace: AllocationTrace = {
      name: "bad",
      description: "",
      ops: [{ kind: "free", id: 7 }],
      warmupOps: 0,
    };
    assert.throws(
      () => replayTrace(trace, { allocate: () => 0, free: () => {} }),
      (error: unknown) =>
        error instanceof InvalidArgumentError &&
        error.argument === "trace.ops[0].id" && error.value === 7 &&
        error.message ===
          'Cannot replay trace "bad": op 0 frees id 7, which is not live (never allocated, or freed already)',
    );
  });

  it("replayTrace() refuses a trace that frees an id twice with InvalidArgumentError, after freeing it once", () => {
    const trace: AllocationTrace = {
      name: "twice",
      description: "",
      ops: [
        { kind: "alloc", id: 1, byteLength: 8, tag: "x" },
        { kind: "free", id: 1 },
        { kind: "free", id: 1 },
      ],
      warmupOps: 0,
    };
    const freed: number[] = [];
    assert.throws(
      () =>
        replayTrace(trace, { allocate: () => 41, free: (h) => freed.push(h) }),
      (error: unknown) =>
        error instanceof InvalidArgumentError &&
        error.argument === "trace.ops[2].id" &&
        /op 2 frees id 1/.test(error.message),
    );
    assert.deepEqual(freed, [41]);
  });
});
