/**
 * The fourth hold-out set: workloads unlike the first twenty-four traces (a
 * wide-and-deep recommender with embedding lookups by `tf.gather`, trained
 * and served at changing batch sizes; a super-resolution network ending in
 * `tf.depthToSpace` at several image sizes; a graph network passing
 * messages with `tf.gather` and `tf.unsortedSegmentSum` over graphs of
 * changing size; an iterative solver with nested `tf.tidy` scopes and
 * `tf.keep()` of long-lived state in the middle of short-lived tensors;
 * onnxruntime-web on a speech-style 1-D convolutional network over
 * changing lengths and batches). Random seeded weights, nothing
 * downloaded; recorded without showing them to the engineers who change
 * allot's pools, and no policy tuned on them.
 *
 * @module
 */
import type { DeviceRecording } from "../packages/trace/mod.ts";
import { ort, recordOrtSession } from "./_ort_session.ts";
import type { TfjsRecording } from "./_tfjs.ts";
import { rnd, tagger, tf } from "./_tfjs.ts";
import {
  type Bytes,
  header,
  initializers,
  msg,
  node,
  str,
  valueInfo,
} from "./_onnx.ts";
type T = tf.Tensor;
type T4 = tf.Tensor4D;
type T2 = tf.Tensor2D;

/** Deterministic pseudo-random integers in `[0, n)` (a 32-bit LCG). */
function ints(count: number, n: number, seed: number): Int32Array {
  let s = seed >>> 0;
  return Int32Array.from({ length: count }, () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s % n;
  });
}

/**
 * A wide-and-deep recommender: three categorical features looked up in
 * embedding tables (`tf.gather`), concatenated with dense features into a
 * 3-layer MLP (the deep part), plus a wide linear part over a hashed cross
 * feature (another `tf.gather`); sigmoid click score. Variables trained by
 * Adam (`optimizer.minimize`, the gathers' gradients scattered back) at
 * batches 256, 64, 512, 128; then served (no gradients) at 32, 1024, 8,
 * 256, 64, 512 with the scores read back.
 */
export async function wideDeep(
  rec: TfjsRecording,
  opts = {
    vocab: [1000, 400, 64],
    embed: 16,
    dense: 13,
    hidden: [256, 128, 64],
    crossBuckets: 2048,
    train: [256, 64, 512, 128],
    serve: [32, 1024, 8, 256, 64, 512],
  },
): Promise<void> {
  const tag = tagger(rec);
  tag("weights");
  let seed = 141;
  const v = (shape: number[], scale = 0.05) => {
    const init = rnd(shape, scale, seed++);
    const x = tf.variable(init);
    init.dispose(); // the variable keeps the buffer
    return x;
  };
  const tables = opts.vocab.map((n) => v([n, opts.embed]));
  const wide = v([opts.crossBuckets, 1], 0.01);
  const dims = [opts.vocab.length * opts.embed + opts.dense, ...opts.hidden];
  const mlp = opts.hidden.map((h, i) => ({ w: v([dims[i], h]), b: v([h]) }));
  const out = v([opts.hidden.at(-1)!, 1]);
  const opt = tf.train.adam(1e-3);
  rec.step("weights");
  const batch = (n: number, s: number) => {
    tag("batch");
    const ids = opts.vocab.map((k, i) =>
      tf.tensor1d(ints(n, k, 7000 + 10 * s + i), "int32")
    );
    const cross = tf.tensor1d(ints(n, opts.crossBuckets, 7500 + s), "int32");
    const dense = tf.randomNormal([n, opts.dense], 0, 1, "float32", 7700 + s);
    const label = tf.tidy(() =>
      tf.step(tf.randomUniform([n, 1], -1, 1, "float32", 7900 + s))
    );
    return { ids, cross, dense, label };
  };
  const logits = (b: ReturnType<typeof batch>) => {
    tag("embed");
    const e = tables.map((t, i) => tf.gather(t, b.ids[i]));
    let x = tf.concat([...e, b.dense], 1) as T2;
    tag("deep");
    for (const l of mlp) x = tf.relu(tf.add(tf.matMul(x, l.w as T2), l.b));
    tag("wide");
    return tf.add(tf.matMul(x, out as T2), tf.gather(wide, b.cross));
  };
  for (const [s, n] of opts.train.entries()) {
    const b = batch(n, s);
    tag("train");
    const loss = opt.minimize(
      () => tf.losses.sigmoidCrossEntropy(b.label, logits(b)) as tf.Scalar,
      true,
    )!;
    tag("readback");
    await loss.data();
    tf.dispose([loss, ...b.ids, b.cross, b.dense, b.label]);
    tag(undefined);
    rec.step(`train ${s} (batch ${n})`);
  }
  for (const [s, n] of opts.serve.entries()) {
    const b = batch(n, 100 + s);
    tag("serve");
    const score = tf.tidy(() => tf.sigmoid(logits(b)));
    tag("readback");
    await score.data();
    tf.dispose([score, ...b.ids, b.cross, b.dense, b.label]);
    tag(undefined);
    rec.step(`serve ${s} (batch ${n})`);
  }
  opt.dispose();
  tf.dispose([...tables, wide, out, ...mlp.flatMap((l) => [l.w, l.b])]);
  rec.step("disposed");
}

/**
 * An ESPCN-style super-resolution network, inference: 5×5 conv (32), two
 * 3×3 convs (16, then 3·r²), `tf.depthToSpace` by r = 3 to the high
 * resolution, a bicubic-free nearest upsampling of the input added as the
 * residual, clipped; batch 1 at 24, 48, 32, 64, 40, 24, 48 pixels square,
 * then batch 4 at 32; each output read back.
 */
export async function superResolution(
  rec: TfjsRecording,
  opts = {
    r: 3,
    c: [32, 16],
    runs: [[1, 24], [1, 48], [1, 32], [1, 64], [1, 40], [1, 24], [1, 48], [
      4,
      32,
    ]] as [number, number][],
  },
): Promise<void> {
  const tag = tagger(rec);
  const { r, c } = opts;
  tag("weights");
  let seed = 151;
  const w = (shape: number[], scale = 0.1) => rnd(shape, scale, seed++);
  const k1 = w([5, 5, 3, c[0]]), b1 = w([c[0]], 0.01);
  const k2 = w([3, 3, c[0], c[1]]), b2 = w([c[1]], 0.01);
  const k3 = w([3, 3, c[1], 3 * r * r]), b3 = w([3 * r * r], 0.01);
  rec.step("weights");
  for (const [pass, [n, S]] of opts.runs.entries()) {
    tag("input");
    const img = tf.randomUniform([n, S, S, 3], 0, 1, "float32", 8000 + pass);
    const y = tf.tidy(() => {
      tag("features");
      const f1 = tf.tanh(tf.add(tf.conv2d(img as T4, k1 as T4, 1, "same"), b1));
      const f2 = tf.tanh(tf.add(tf.conv2d(f1 as T4, k2 as T4, 1, "same"), b2));
      tag("subpixel");
      const f3 = tf.add(tf.conv2d(f2 as T4, k3 as T4, 1, "same"), b3) as T4;
      const hr = tf.depthToSpace(f3, r);
      tag("residual");
      const up = tf.image.resizeNearestNeighbor(img as T4, [S * r, S * r]);
      return tf.clipByValue(tf.add(hr, up), 0, 1);
    });
    tag("readback");
    await y.data();
    tf.dispose([y, img]);
    tag(undefined);
    rec.step(`pass ${pass} (batch ${n}, ${S}x${S})`);
  }
  tf.dispose([k1, b1, k2, b2, k3, b3]);
  rec.step("disposed");
}

/**
 * A graph network (3 rounds of message passing, d 32) on batches of small
 * random graphs whose node and edge counts change every step: edge
 * messages from `tf.gather` of the source and target nodes' states
 * through an MLP, summed per target node by `tf.unsortedSegmentSum`, a
 * GRU-like gated update; a graph-level readout (`unsortedSegmentSum` by
 * graph) read back. Inference; (graphs, nodes per graph, edges per node)
 * (8, 12, 3), (2, 40, 4), (16, 6, 2), (4, 24, 5), (8, 12, 3), (1, 64, 6),
 * (12, 10, 3).
 */
export async function graphNetwork(
  rec: TfjsRecording,
  opts = {
    d: 32,
    rounds: 3,
    batches: [[8, 12, 3], [2, 40, 4], [16, 6, 2], [4, 24, 5], [8, 12, 3], [
      1,
      64,
      6,
    ], [12, 10, 3]] as [number, number, number][],
  },
): Promise<void> {
  const tag = tagger(rec);
  const { d } = opts;
  tag("weights");
  let seed = 161;
  const w = (shape: number[], scale = 0.1) => rnd(shape, scale, seed++);
  const inW = w([8, d]);
  const msgW1 = w([2 * d, d]), msgW2 = w([d, d]);
  const gateW = w([2 * d, d]), candW = w([2 * d, d]);
  const outW = w([d, 4]);
  rec.step("weights");
  for (const [s, [G, N, E]] of opts.batches.entries()) {
    tag("graph");
    const nodes = G * N, edges = nodes * E;
    // each node sends E edges to random nodes of its own graph
    const src = new Int32Array(edges), dst = new Int32Array(edges);
    const r = ints(edges, N, 9000 + s);
    for (let e = 0; e < edges; e++) {
      const from = Math.floor(e / E);
      src[e] = from;
      dst[e] = from - (from % N) + r[e];
    }
    const graphOf = Int32Array.from(
      { length: nodes },
      (_, i) => Math.floor(i / N),
    );
    const srcT = tf.tensor1d(src, "int32"), dstT = tf.tensor1d(dst, "int32");
    const graphT = tf.tensor1d(graphOf, "int32");
    const feats = tf.randomNormal([nodes, 8], 0, 1, "float32", 9100 + s);
    const y = tf.tidy(() => {
      tag("embed");
      let h = tf.tanh(tf.matMul(feats as T2, inW as T2)) as T2;
      for (let round = 0; round < opts.rounds; round++) {
        tag(`round${round}.message`);
        const pair = tf.concat([tf.gather(h, srcT), tf.gather(h, dstT)], 1);
        const m = tf.relu(
          tf.matMul(tf.relu(tf.matMul(pair as T2, msgW1 as T2)) as T2, msgW2),
        );
        tag(`round${round}.aggregate`);
        const agg = tf.unsortedSegmentSum(m, dstT, nodes) as T2;
        tag(`round${round}.update`);
        const hx = tf.concat([h, agg], 1) as T2;
        const z = tf.sigmoid(tf.matMul(hx, gateW as T2));
        const cand = tf.tanh(tf.matMul(hx, candW as T2));
        h = tf.add(tf.mul(z, h), tf.mul(tf.sub(1, z), cand)) as T2;
      }
      tag("readout");
      const g = tf.unsortedSegmentSum(h, graphT, G) as T2;
      return tf.softmax(tf.matMul(g, outW as T2));
    });
    tag("readback");
    await y.data();
    tf.dispose([y, srcT, dstT, graphT, feats]);
    tag(undefined);
    rec.step(`batch ${s} (${G} graphs of ${N} nodes, ${E} edges each)`);
  }
  tf.dispose([inW, msgW1, msgW2, gateW, candW, outW]);
  rec.step("disposed");
}

/**
 * An iterative solver in nested `tf.tidy` scopes: each outer step runs in
 * one tidy; inside it, each of `inner` sub-steps runs in its own tidy and
 * refines a state through a small residual MLP; the new state is
 * `tf.keep()`-ed out of the inner tidy (and the outer one), the old
 * disposed by hand. Every sub-step also keeps a small diagnostic (the
 * residual norm), and every outer step keeps a checkpoint of the state in
 * a ring of 3 (the oldest disposed): long-lived tensors made between
 * short-lived ones. (batch, width) changes between phases: (16, 256) for
 * 4 steps, (64, 128) for 3, (4, 512) for 3, with `inner` 5; diagnostics
 * read back once per outer step.
 */
export async function tidyKeep(
  rec: TfjsRecording,
  opts = {
    hidden: 256,
    inner: 5,
    ring: 3,
    phases: [[16, 256, 4], [64, 128, 3], [4, 512, 3]] as [
      number,
      number,
      number,
    ][],
  },
): Promise<void> {
  const tag = tagger(rec);
  tag("weights");
  let seed = 171;
  const w = (shape: number[], scale = 0.05) => rnd(shape, scale, seed++);
  const widths = [...new Set(opts.phases.map(([, d]) => d))];
  const weights = new Map(
    widths.map((d) => [d, {
      w1: w([d, opts.hidden]),
      w2: w([opts.hidden, d]),
    }]),
  );
  rec.step("weights");
  let step = 0;
  for (const [pi, [n, d, steps]] of opts.phases.entries()) {
    const { w1, w2 } = weights.get(d)!;
    tag("init");
    let state = tf.randomNormal([n, d], 0, 1, "float32", 9500 + pi) as T2;
    const ring: T[] = [];
    const diagnostics: T[] = [];
    for (let s = 0; s < steps; s++, step++) {
      tf.tidy(() => {
        tag("outer");
        const target = tf.tanh(tf.mul(state, 0.5)); // short-lived
        for (let k = 0; k < opts.inner; k++) {
          tf.tidy(() => {
            tag("inner");
            const h = tf.relu(tf.matMul(state, w1 as T2));
            const delta = tf.matMul(h as T2, w2 as T2);
            const residual = tf.sub(tf.add(state, delta), target);
            const next = tf.keep(tf.sub(state, tf.mul(residual, 0.1))) as T2;
            diagnostics.push(tf.keep(tf.norm(residual)));
            state.dispose();
            state = next;
          });
        }
        tag("checkpoint");
        ring.push(tf.keep(tf.clone(state)));
        if (ring.length > opts.ring) ring.shift()!.dispose();
      });
      tag("readback");
      const done = diagnostics.splice(0);
      const norms = tf.stack(done);
      tf.dispose(done);
      await norms.data();
      norms.dispose();
      tag(undefined);
      rec.step(`step ${step} (phase ${pi}: batch ${n}, width ${d})`);
    }
    tf.dispose([state, ...ring, ...diagnostics]);
    rec.step(`phase ${pi} done`);
  }
  tf.dispose([...weights.values()].flatMap((x) => [x.w1, x.w2]));
  rec.step("disposed");
}

// --- onnxruntime-web --------------------------------------------------------

/**
 * A speech-style 1-D convolutional acoustic model as an ONNX graph
 * `x[N, F, T] -> y[N, T/2, V]`: Conv1d k5 (c) + Relu, Conv1d k3 stride 2
 * (2c) + Relu, two residual blocks (Conv1d k3 + Relu + Conv1d k3, Add),
 * Transpose to `[N, T/2, 2c]`, MatMul to the vocabulary, LogSoftmax. Batch
 * and length dynamic.
 */
export function speechConvModel(
  features: number,
  c: number,
  vocab: number,
  seed = 6,
): Uint8Array {
  const init = initializers(seed, 0.2);
  const out: Bytes = [];
  header(out);
  msg(7, (g) => {
    const conv = (
      x: string,
      y: string,
      cin: number,
      cout: number,
      k: number,
      stride = 1,
    ) =>
      node(
        "Conv",
        [x, init.add(`${y}.w`, [cout, cin, k]), init.add(`${y}.b`, [cout])],
        [y],
        y,
        g,
        { kernel_shape: [k], pads: [k >> 1, k >> 1], strides: [stride] },
      );
    conv("x", "c1", features, c, 5);
    node("Relu", ["c1"], ["r1"], "r1", g);
    conv("r1", "c2", c, 2 * c, 3, 2);
    node("Relu", ["c2"], ["r2"], "r2", g);
    let x = "r2";
    for (const b of ["b1", "b2"]) {
      conv(x, `${b}.c1`, 2 * c, 2 * c, 3);
      node("Relu", [`${b}.c1`], [`${b}.r`], `${b}.r`, g);
      conv(`${b}.r`, `${b}.c2`, 2 * c, 2 * c, 3);
      node("Add", [x, `${b}.c2`], [`${b}.y`], `${b}.add`, g);
      x = `${b}.y`;
    }
    node("Transpose", [x], ["t"], "t", g, { perm: [0, 2, 1] });
    node("MatMul", ["t", init.add("head.w", [2 * c, vocab])], ["m"], "m", g);
    node("Add", ["m", init.add("head.b", [vocab])], ["logits"], "logits", g);
    node("LogSoftmax", ["logits"], ["y"], "y", g, { axis: 2 });
    str(2, "speech_conv1d", g);
    init.write(g);
    valueInfo(11, "x", ["N", features, "T"], g);
    valueInfo(12, "y", ["N", "T2", vocab], g);
  }, out);
  return Uint8Array.from(out);
}

/**
 * onnxruntime-web on `speechConvModel` (40 features, c 32, vocab 29): one
 * run per utterance batch, (batch, frames) (1, 100), (4, 60), (2, 160),
 * (1, 40), (4, 120), (2, 80), (1, 160), (3, 100): lengths and batches
 * changing together, shapes coming back.
 */
export function ortSpeechConv(
  source: string,
  opts = {
    features: 40,
    c: 32,
    vocab: 29,
    runs: [[1, 100], [4, 60], [2, 160], [1, 40], [4, 120], [2, 80], [1, 160], [
      3,
      100,
    ]] as [number, number][],
  },
): Promise<DeviceRecording<GPUDevice>> {
  const { features: F, vocab: V } = opts;
  return recordOrtSession(
    source,
    opts,
    speechConvModel(F, opts.c, V),
    async (session, recording) => {
      for (const [i, [n, T]] of opts.runs.entries()) {
        recording.recorder.setTag(`batch ${n} frames ${T}`);
        const data = Float32Array.from(
          { length: n * F * T },
          (_, k) => ((k * 7919) % 1000) / 1000 - 0.5,
        );
        const res = await session.run({
          x: new ort.Tensor("float32", data, [n, F, T]),
        });
        if (res.y.dims.join() !== [n, T / 2, V].join()) {
          throw new Error(`bad output dims ${res.y.dims}`);
        }
        recording.recorder.setTag(undefined);
        recording.recorder.step(`run ${i} (batch ${n}, ${T} frames)`);
      }
    },
  );
}
