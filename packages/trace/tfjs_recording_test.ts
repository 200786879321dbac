import assert from "node:assert/strict";
import { parseTrace } from "./mod.ts";

Deno.test({
  name: "TF.js 4.22 WebGPU through the recorder: live and held bytes from the trace equal TF.js's counters at every step",
  ignore: !("gpu" in navigator),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    if (!(await navigator.gpu.requestAdapter())) return;
    const { startTfjs, tf, traceBytes } = await import("../../traces/_tfjs.ts");
    const rec = await startTfjs("test tiny conv");
    try {
      const w = tf.randomNormal([3, 3, 3, 8]) as import("../../traces/_tfjs.ts").tf.Tensor4D;
      for (const size of [8, 12, 8]) {
        rec.recording.recorder.setTag(`size ${size}`);
        const x = tf.randomNormal([1, size, size, 3]) as typeof w;
        const y = tf.tidy(() => tf.mean(tf.relu(tf.conv2d(x, w, 1, "same"))));
        await y.data();
        tf.dispose([x, y]);
        rec.step(`size ${size}`);
        const { live, held } = traceBytes(rec.recording.recorder.events);
        assert.equal(live, rec.pool.numBytesUsed);
        assert.equal(held, rec.pool.numBytesAllocated);
      }
      w.dispose();
      assert.equal(rec.checks.mismatches, 0);
      const trace = parseTrace(rec.recording.recorder.toJsonLines());
      const ops = new Set(trace.events.map((e) => e.op));
      for (const op of ["create", "alloc", "free", "submit", "map", "unmap", "step", "stack"]) {
        assert.ok(ops.has(op as never), `no ${op} event`);
      }
      // stacks reach past TF.js's frames into this test (V8's 10-frame default would not)
      const stack = trace.events.find((e) => e.op === "stack");
      assert.ok(stack && stack.op === "stack");
      const mine = stack.frames.find((f) => /tfjs_recording_test\.ts/.test(f.at));
      assert.ok(mine, stack.frames.map((f) => f.at).join("\n"));
      assert.equal(mine.kind, "allot"); // (this file lies in packages/trace)
      assert.ok(stack.frames.some((f) => f.kind === "runtime"));
    } finally {
      rec.finish();
    }
  },
});
