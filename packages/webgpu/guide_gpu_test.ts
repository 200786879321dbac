import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { sgdOnGpu } from "../../guide/runtime.ts";
import { sharedDevice, skip } from "./_test_device.ts";

describe("guide: the WGSL kernel", { skip }, () => {
  it("the guide's SGD kernel (bindBuffers, uniform block, error scope) matches the CPU update", async () => {
    const device = await sharedDevice();
    const param = Float32Array.from({ length: 100 }, (_, i) => i / 10);
    const grad = Float32Array.from({ length: 100 }, (_, i) => 1 - i / 50);
    const got = await sgdOnGpu(device, param, grad, 0.5);
    param.forEach((p, i) =>
      assert.ok(Math.abs(got[i] - (p - 0.5 * grad[i])) < 1e-6, `element ${i}`)
    );
  });
});
