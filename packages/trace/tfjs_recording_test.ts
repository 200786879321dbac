import assert from "node:assert/strict";
import * as tf from "npm:@tensorflow/tfjs-core@4.22.0";
import { WebGPUBackend } from "npm:@tensorflow/tfjs-backend-webgpu@4.22.0";
import {
  parseTrace,
  recordBufferPool,
  recordDevice,
  type TraceEvent,
} from "./mod.ts";

/** Live and held bytes computed from the trace alone. */
function fromTrace(events: readonly TraceEvent[]) {
  const a = new Map<number, number>(), b = new Map<number, number>();
  let live = 0, held = 0;
  for (const e of events) {
    if (e.op === "alloc") a.set(e.id, e.size), live += e.size;
    if (e.op === "free") live -= a.get(e.id)!;
    if (e.op === "create") b.set(e.id, e.size), held += e.size;
    if (e.op === "destroy") held -= b.get(e.id)!;
  }
  return { live, held };
}

Deno.test({
  name:
    "TF.js 4.22 WebGPU through the recorder: live and held bytes from the trace equal TF.js's counters at every step",
  ignore: !("gpu" in navigator),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return;
    const recording = recordDevice(await adapter.requestDevice());
    const { recorder } = recording;
    if (tf.findBackendFactory("webgpu")) tf.removeBackend("webgpu");
    const backend = new WebGPUBackend(recording.device);
    const pool = (backend as unknown as {
      bufferManager: {
        numBytesUsed: number;
        numBytesAllocated: number;
        acquireBuffer(size: number, usage: number): unknown;
        releaseBuffer(b: unknown): void;
      };
    }).bufferManager;
    recordBufferPool(pool, recording);
    tf.registerBackend("webgpu", () => backend);
    await tf.setBackend("webgpu");
    try {
      const w = tf.randomNormal([3, 3, 3, 8]) as tf.Tensor4D;
      for (const size of [8, 12, 8]) {
        recorder.setTag(`size ${size}`);
        const x = tf.randomNormal([1, size, size, 3]) as tf.Tensor4D;
        const y = tf.tidy(() => tf.mean(tf.relu(tf.conv2d(x, w, 1, "same"))));
        await y.data();
        tf.dispose([x, y]);
        recorder.step(`size ${size}`);
        const { live, held } = fromTrace(recorder.events);
        assert.equal(live, pool.numBytesUsed);
        assert.equal(held, pool.numBytesAllocated);
      }
      w.dispose();
      const trace = parseTrace(recorder.toJsonLines());
      const ops = new Set(trace.events.map((e) => e.op));
      for (
        const op of [
          "create",
          "alloc",
          "free",
          "submit",
          "map",
          "unmap",
          "step",
          "stack",
        ]
      ) {
        assert.ok(ops.has(op as never), `no ${op} event`);
      }
      // stacks reach past TF.js's frames into this test (V8's 10-frame default would not)
      const stack = trace.events.find((e) => e.op === "stack");
      assert.ok(stack && stack.op === "stack");
      const mine = stack.frames.find((f) =>
        /tfjs_recording_test\.ts/.test(f.at)
      );
      assert.ok(mine, stack.frames.map((f) => f.at).join("\n"));
      assert.equal(mine.kind, "allot"); // (this file lies in packages/trace)
      assert.ok(stack.frames.some((f) => f.kind === "runtime"));
    } finally {
      recording.stop();
      tf.removeBackend("webgpu");
      recording.device.destroy();
    }
  },
});
