/**
 * See the memory of an unmodified runtime: TF.js 4.22's WebGPU backend runs a
 * tiny model (random weights) on this runtime's WebGPU through
 * `@allot/trace`'s recorder; at every step the trace's live and held bytes
 * must equal TF.js's own counters; then the trace is replayed through the
 * pooling policies and drawn.
 *
 *   deno task trace:check     (writes .out/trace-tfjs.{jsonl,html,svg})
 *
 * Without a WebGPU adapter it says so and exits 0.
 *
 * @module
 */
import * as tf from "npm:@tensorflow/tfjs-core@4.22.0";
import { WebGPUBackend } from "npm:@tensorflow/tfjs-backend-webgpu@4.22.0";
import {
  formatReplay,
  memoryTimeline,
  parseTrace,
  recordBufferPool,
  recordDevice,
  replayTrace,
  reportHtml,
  timelineSvg,
  type TraceEvent,
} from "@allot/trace";

const adapter = await navigator.gpu?.requestAdapter();
if (!adapter) {
  console.log("trace_tfjs: no WebGPU adapter here; nothing to record");
  Deno.exit(0);
}
// 1. Record the device, hand it to TF.js, record TF.js's own buffer pool too.
const recording = recordDevice(await adapter.requestDevice(), {
  source: "tfjs-webgpu 4.22 tiny MLP",
});
const { device, recorder } = recording;
if (tf.findBackendFactory("webgpu")) tf.removeBackend("webgpu");
const backend = new WebGPUBackend(device);
// deno-lint-ignore no-explicit-any
const pool = (backend as any).bufferManager;
recordBufferPool(pool, recording);
tf.registerBackend("webgpu", () => backend);
await tf.setBackend("webgpu");

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

// 2. A tiny MLP, three passes with varying batch sizes, a step mark each.
recorder.setTag("weights");
const w1 = tf.randomNormal([64, 128], 0, 0.1, "float32", 1);
const w2 = tf.randomNormal([128, 10], 0, 0.1, "float32", 2);
for (const [i, batch] of [8, 16, 8].entries()) {
  recorder.setTag("input");
  const x = tf.randomNormal([batch, 64]);
  recorder.setTag("mlp");
  const y = tf.tidy(() => tf.softmax(tf.matMul(tf.relu(tf.matMul(x, w1)), w2)));
  recorder.setTag("readback");
  await y.data();
  tf.dispose([x, y]);
  recorder.setTag(undefined);
  recorder.step(`pass ${i}`);
  const { live, held } = fromTrace(recorder.events);
  if (live !== pool.numBytesUsed || held !== pool.numBytesAllocated) {
    throw new Error(
      `pass ${i}: trace says live ${live} held ${held}; TF.js says ${pool.numBytesUsed} / ${pool.numBytesAllocated}`,
    );
  }
}
tf.dispose([w1, w2]);
recording.stop();

// 3. Validate, replay, draw.
const text = recorder.toJsonLines();
const trace = parseTrace(text);
const whatIf = replayTrace(trace, { repeat: 1 });
const tl = memoryTimeline(trace);
await Deno.mkdir(".out", { recursive: true });
await Deno.writeTextFile(".out/trace-tfjs.jsonl", text);
await Deno.writeTextFile(".out/trace-tfjs.html", reportHtml(tl, { whatIf }));
await Deno.writeTextFile(".out/trace-tfjs.svg", timelineSvg(tl));
console.log(
  `${trace.events.length} events; live/held matched TF.js at every step`,
);
console.log(formatReplay(whatIf));
console.log(
  "wrote .out/trace-tfjs.jsonl, .out/trace-tfjs.html, .out/trace-tfjs.svg",
);
tf.removeBackend("webgpu");
device.destroy();
