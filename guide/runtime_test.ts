import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { train } from "./runtime.ts";

describe("guide: build a runtime on allot", () => {
  it("trains the 2-layer MLP, keeps only live tensors, frees everything at the end, and the WGSL step matches the CPU", async () => {
    const adapter = await navigator.gpu?.requestAdapter().catch(() => null);
    const device = await adapter?.requestDevice();
    const report = await train(device ?? undefined);
    assert.ok(report.firstLoss > 0.5, `first loss ${report.firstLoss}`);
    assert.ok(report.lastLoss < 0.05, `last loss ${report.lastLoss}`);
    // x, y, four parameters and the kept prediction: tidy() freed the rest
    assert.equal(report.memoryAfterTraining.numStorages, 7);
    assert.equal(report.storagesAtEnd, 0);
    if (device) assert.equal(report.gpuMatches, true);
    device?.destroy();
  });
});
