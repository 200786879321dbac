import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { _deviceState, _onDeviceLost } from "./_device_state.ts";
import { GpuSegmentSource } from "./gpu_segment_source.ts";
import { mockGpu } from "./_test_mock_device.ts";

const gc = (globalThis as { gc?: () => void }).gc;

/** Full collections with tasks between them, so finalizers get to run. */
async function collect(): Promise<void> {
  for (let i = 0; i < 6; i++) {
    gc!();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

function dropSources(device: GPUDevice, n: number): WeakRef<object>[] {
  const refs: WeakRef<object>[] = [];
  for (let i = 0; i < n; i++) {
    const source = new GpuSegmentSource(device);
    source.tryAllocateSegment(1024); // a segment the source would keep
    refs.push(new WeakRef(source));
  }
  return refs;
}

describe("device-loss listeners", () => {
  it("_onDeviceLost() tells a held owner once when the device is destroyed", () => {
    const { device } = mockGpu();
    const owner = { drops: 0 };
    _onDeviceLost(device, owner, (o) => o.drops++);
    device.destroy();
    assert.equal(owner.drops, 1);
    assert.equal(_deviceState(device).listeners.size, 0);
  });

  it(
    "a device does not keep dropped segment sources (and their listeners) alive",
    {
      skip: gc === undefined ? "needs --expose-gc" : false,
    },
    async () => {
      const { device } = mockGpu();
      const state = _deviceState(device);
      const refs = dropSources(device, 8);
      assert.equal(state.listeners.size, 8);
      await collect();
      assert.equal(refs.filter((r) => r.deref() !== undefined).length, 0);
      assert.equal(state.listeners.size, 0);
      // a source still held is still told
      const kept = new GpuSegmentSource(device);
      device.destroy();
      assert.equal(kept.lost, true);
    },
  );
});
