// Bench-private recorder: runs small TF.js 4.22 WebGPU models (random
// weights) on Deno's WebGPU and logs every buffer the backend's
// BufferManager hands out and takes back (`acquireBuffer` /
// `releaseBuffer`), with size and usage, as allot-trace v1 JSON Lines
// (`alloc` / `free` / `step` events; the format of `@allot/trace`). These
// are the runtime's logical allocations: what a pool policy is asked for.
// Replaced by the `see-memory` recorder's traces when they land.
//
// Run: deno run -A packages/webgpu/bench/_record_tfjs.ts [outDir]

import * as tf from "npm:@tensorflow/tfjs-core@4.22.0";
// the umbrella package registers the gradients (tfjs-core alone does not)
import "npm:@tensorflow/tfjs@4.22.0";
import "npm:@tensorflow/tfjs-backend-webgpu@4.22.0";

interface Event {
  t: number;
  op: "alloc" | "free" | "step";
  id?: number;
  size?: number;
  usage?: number;
  name?: string;
}

const outDir = Deno.args[0] ?? new URL("./traces/", import.meta.url).pathname;

await tf.setBackend("webgpu");
await tf.ready();
// deno-lint-ignore no-explicit-any
const backend = tf.backend() as any;
const manager = backend.bufferManager;
let events: Event[] = [];
const ids = new Map<GPUBuffer, number>();
let nextId = 1;
const t0 = performance.now();
const now = () => Math.round((performance.now() - t0) * 1000) / 1000;
const acquire = manager.acquireBuffer.bind(manager);
const release = manager.releaseBuffer.bind(manager);
manager.acquireBuffer = (
  size: number,
  usage: number,
  mapped = false,
  reuse = true,
) => {
  const buffer = acquire(size, usage, mapped, reuse);
  const id = nextId++;
  ids.set(buffer, id);
  events.push({ t: now(), op: "alloc", id, size, usage });
  return buffer;
};
manager.releaseBuffer = (buffer: GPUBuffer, reuse = true) => {
  const id = ids.get(buffer);
  if (id !== undefined) {
    ids.delete(buffer);
    events.push({ t: now(), op: "free", id });
  }
  release(buffer, reuse);
};
const step = (name: string) => events.push({ t: now(), op: "step", name });

function save(name: string, description: string) {
  const header = {
    format: "allot-trace",
    version: 1,
    source: `tfjs-backend-webgpu 4.22.0 BufferManager, ${name}`,
    created: new Date().toISOString(),
    meta: { description, adapter: "Deno WebGPU (llvmpipe)" },
  };
  const lines = [JSON.stringify(header), ...events.map((e) => JSON.stringify(e))];
  Deno.writeTextFileSync(`${outDir}/${name}.jsonl`, lines.join("\n") + "\n");
  console.log(name, events.length, "events");
  events = [];
}

const rand = (shape: number[]) => tf.randomNormal(shape, 0, 0.1);

const only = Deno.args[1];
const want = (name: string) => only === undefined || only.includes(name);

// MobileNetV2-like CNN inference: inverted residual blocks, batch 1, 96x96.
if (want("cnn_inference")) {
  const blocks: [number, number, number, number][] = [
    // [in, expand, out, stride]
    [16, 96, 24, 2],
    [24, 144, 24, 1],
    [24, 144, 32, 2],
    [32, 192, 32, 1],
    [32, 192, 64, 2],
    [64, 384, 64, 1],
    [64, 384, 96, 1],
    [96, 576, 160, 2],
    [160, 960, 160, 1],
  ];
  const stem = tf.keep(rand([3, 3, 3, 16]));
  const w = blocks.map(([i, e, o]) =>
    tf.keep(tf.tidy(() => ({
      expand: rand([1, 1, i, e]),
      dw: rand([3, 3, e, 1]),
      project: rand([1, 1, e, o]),
    })))
  );
  const head = tf.keep(rand([160, 1000]));
  step("weights");
  for (let s = 0; s < 5; s++) {
    step(`inference ${s}`);
    const logits = tf.tidy(() => {
      let x: tf.Tensor4D = rand([1, 96, 96, 3]) as tf.Tensor4D;
      x = tf.relu6(tf.conv2d(x, stem as tf.Tensor4D, 2, "same"));
      blocks.forEach(([i, , o, stride], k) => {
        let y = tf.relu6(tf.conv2d(x, w[k].expand as tf.Tensor4D, 1, "same"));
        y = tf.relu6(
          tf.depthwiseConv2d(y, w[k].dw as tf.Tensor4D, stride, "same"),
        );
        y = tf.conv2d(y, w[k].project as tf.Tensor4D, 1, "same");
        x = (i === o && stride === 1 ? tf.add(x, y) : y) as tf.Tensor4D;
      });
      const pooled = tf.mean(x, [1, 2]) as tf.Tensor2D;
      return tf.softmax(tf.matMul(pooled, head as tf.Tensor2D));
    });
    await logits.data();
    logits.dispose();
  }
  save("tfjs_cnn_inference", "MobileNetV2-like inverted residual CNN, batch 1, 96x96x3, 5 inferences with readback");
}

// CNN training: conv-conv-dense classifier, SGD via optimizer.minimize.
if (want("cnn_training")) {
  const vars = {
    c1: tf.variable(rand([3, 3, 3, 16])),
    c2: tf.variable(rand([3, 3, 16, 32])),
    d: tf.variable(rand([16 * 16 * 32, 10])),
  };
  const opt = tf.train.sgd(0.01);
  step("weights");
  for (let s = 0; s < 5; s++) {
    step(`train ${s}`);
    const loss = tf.tidy(() => {
      const x = rand([8, 32, 32, 3]) as tf.Tensor4D;
      const labels = tf.oneHot(tf.randomUniform([8], 0, 10, "int32") as tf.Tensor1D, 10);
      return opt.minimize(() => {
        let h = tf.relu(tf.conv2d(x, vars.c1 as tf.Tensor4D, 1, "same"));
        h = tf.maxPool(h, 2, 2, "same");
        h = tf.relu(tf.conv2d(h, vars.c2 as tf.Tensor4D, 1, "same"));
        const flat = tf.reshape(h, [8, 16 * 16 * 32]) as tf.Tensor2D;
        const logits = tf.matMul(flat, vars.d as tf.Tensor2D);
        return tf.losses.softmaxCrossEntropy(labels, logits) as tf.Scalar;
      }, true)!;
    });
    await loss.data();
    loss.dispose();
  }
  save("tfjs_cnn_training", "conv-pool-conv-dense classifier, batch 8, 32x32x3, SGD, 5 steps with loss readback");
}

// Transformer encoder with varying sequence length.
const D = 128, H = 4, F = 512, LAYERS = 2;
const layers = Array.from({ length: LAYERS }, () =>
  tf.keep(tf.tidy(() => ({
    wq: rand([D, D]),
    wk: rand([D, D]),
    wv: rand([D, D]),
    wo: rand([D, D]),
    f1: rand([D, F]),
    f2: rand([F, D]),
  })))
);
function attention(q: tf.Tensor2D, k: tf.Tensor2D, v: tf.Tensor2D) {
  const L = q.shape[0], S = k.shape[0], hd = D / H;
  const qh = tf.transpose(tf.reshape(q, [L, H, hd]), [1, 0, 2]) as tf.Tensor3D;
  const kh = tf.transpose(tf.reshape(k, [S, H, hd]), [1, 0, 2]) as tf.Tensor3D;
  const vh = tf.transpose(tf.reshape(v, [S, H, hd]), [1, 0, 2]) as tf.Tensor3D;
  const p = tf.softmax(tf.div(tf.matMul(qh, kh, false, true), Math.sqrt(hd)));
  const o = tf.matMul(p, vh);
  return tf.reshape(tf.transpose(o, [1, 0, 2]), [L, D]) as tf.Tensor2D;
}
function block(x: tf.Tensor2D, l: (typeof layers)[number], kv?: [tf.Tensor2D, tf.Tensor2D]) {
  const q = tf.matMul(x, l.wq as tf.Tensor2D);
  const k = kv ? kv[0] : tf.matMul(x, l.wk as tf.Tensor2D);
  const v = kv ? kv[1] : tf.matMul(x, l.wv as tf.Tensor2D);
  const a = tf.add(x, tf.matMul(attention(q, k, v), l.wo as tf.Tensor2D));
  const f = tf.matMul(tf.relu(tf.matMul(a, l.f1 as tf.Tensor2D)), l.f2 as tf.Tensor2D);
  return tf.add(a, f) as tf.Tensor2D;
}
step("weights");
events = [];
if (want("varlen")) {
  const lengths = [37, 128, 64, 17, 96, 50];
  for (const [s, L] of lengths.entries()) {
    step(`request ${s} (L=${L})`);
    const out = tf.tidy(() => {
      let x = rand([L, D]) as tf.Tensor2D;
      for (const l of layers) x = block(x, l);
      return tf.sum(x, 0);
    });
    await out.data();
    out.dispose();
  }
  save("tfjs_transformer_varlen", "2-layer transformer encoder, d=128, 4 heads, ffn 512, 6 requests of lengths 17..128 with readback");
}
if (want("kv_decode")) {
  const caches = layers.map(() => [rand([1, D]), rand([1, D])]) as tf.Tensor2D[][];
  for (let s = 0; s < 24; s++) {
    step(`token ${s}`);
    const out = tf.tidy(() => {
      let x = rand([1, D]) as tf.Tensor2D;
      layers.forEach((l, i) => {
        const kNew = tf.matMul(x, l.wk as tf.Tensor2D);
        const vNew = tf.matMul(x, l.wv as tf.Tensor2D);
        const k = tf.concat([caches[i][0], kNew], 0) as tf.Tensor2D;
        const v = tf.concat([caches[i][1], vNew], 0) as tf.Tensor2D;
        caches[i][0].dispose();
        caches[i][1].dispose();
        caches[i] = [tf.keep(k), tf.keep(v)];
        x = block(x, l, [k, v]);
      });
      return tf.argMax(tf.matMul(x, layers[0].f1 as tf.Tensor2D), 1);
    });
    await out.data();
    out.dispose();
  }
  save("tfjs_kv_decode", "2-layer decoder, d=128, KV caches grown by concat one token at a time, 24 tokens with argmax readback");
}
