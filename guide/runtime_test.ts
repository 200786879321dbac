import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { train } from "./runtime.ts";

// The CPU part. The WGSL step runs in packages/webgpu/guide_gpu_test.ts,
// with the other WebGPU tests (scripts/run_tests.ts runs those apart).
describe("guide: build a runtime on allot", () => {
  it("trains the 2-layer MLP, keeps only live tensors and frees everything at the end", async () => {
    const report = await train(undefined);
    assert.ok(report.firstLoss > 0.5, `first loss ${report.firstLoss}`);
    assert.ok(report.lastLoss < 0.05, `last loss ${report.lastLoss}`);
    // x, y, four parameters and the kept prediction: tidy() freed the rest
    assert.equal(report.memoryAfterTraining.numStorages, 7);
    assert.equal(report.storagesAtEnd, 0);
    assert.equal(report.gpuMatches, undefined);
  });
});
