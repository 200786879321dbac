/**
 * The sixth hold-out set (traces/README.md): workloads shaped unlike the
 * first thirty-six GPU traces. On TF.js 4.22 WebGPU: a DQN agent (acting
 * at batch 1 interleaved with training at batch 32 on a replay buffer, a
 * target network that takes the online network's weights every few
 * training steps); a mixture-of-experts layer whose tokens per expert
 * follow the router's choices (read back mid-step, gathered and put back
 * in order); a PointNet-like classifier trained and served over point
 * clouds of changing size; a streaming model fed chunks of changing length
 * with its state carried across chunks, streams joining and leaving, all
 * disposed by hand (no `tf.tidy`) and some results kept for many chunks.
 * On onnxruntime-web 1.22's WebGPU EP: retrieval from a memory bank that
 * grows between runs, `TopK` with a `k` that changes (on the CPU: the EP
 * has no `TopK` kernel) and `Gather` / `GatherND` of the chosen rows.
 * On jax-js 0.1.25's WebGPU device: differentially private SGD, whose
 * per-example gradients (`vmap` of `grad`) are as many copies of the
 * weights' shapes as the batch has examples, clipped and summed with noise.
 * Random seeded weights, nothing downloaded; recorded without showing them
 * to the engineers who change allot's pools, and no policy tuned on them.
 *
 * @module
 */
import type { DeviceRecording } from "../packages/trace/mod.ts";
import type { Jax } from "./_cpu_jax.ts";
import type { JaxModelRecording } from "./_cpu_jax_models.ts";
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
  tensor,
  valueInfo,
} from "./_onnx.ts";
type T = tf.Tensor;
type T2 = tf.Tensor2D;

/** A 32-bit LCG: numbers in `[0, 1)`. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

/**
 * A DQN agent on a small made-up environment (state 8, 4 actions): a
 * `tf.sequential` Q-network (dense 64, 64, 4) acts at batch 1 every
 * environment step (ε-greedy, the argmax read back); every 4th step after
 * 32 transitions a training step at batch 32 samples the replay buffer
 * (kept on the CPU, uploaded per batch), computes targets with the target
 * network and updates the online network (`optimizer.minimize`, Adam);
 * every 5th training step the target network takes the online network's
 * weights (`setWeights`, which assigns: the target keeps the buffers the
 * last update made, live until the next copy). 112 environment steps
 * (episodes of 20), 20 training steps.
 */
export async function dqnAgent(
  rec: TfjsRecording,
  opts = {
    state: 8,
    actions: 4,
    hidden: [64, 64],
    envSteps: 112,
    episode: 20,
    batch: 32,
    trainEvery: 4,
    copyEvery: 5,
    replay: 1000,
    gamma: 0.95,
  },
): Promise<void> {
  const tag = tagger(rec);
  const { state: S, actions: A, batch: B } = opts;
  tag("weights");
  let seed = 191;
  const net = () => {
    const m = tf.sequential();
    for (const [i, units] of [...opts.hidden, A].entries()) {
      m.add(tf.layers.dense({
        units,
        activation: i < opts.hidden.length ? "relu" : "linear",
        inputShape: i === 0 ? [S] : undefined,
        kernelInitializer: tf.initializers.glorotUniform({ seed: seed++ }),
      }));
    }
    return m;
  };
  const online = net(), target = net();
  target.trainable = false;
  target.setWeights(online.getWeights());
  const opt = tf.train.adam(1e-3);
  rec.step("weights");
  // the environment and the replay buffer live on the CPU
  const rand = lcg(1901);
  const replay: {
    s: Float32Array;
    a: number;
    r: number;
    s2: Float32Array;
    done: number;
  }[] = [];
  const reset = () => Float32Array.from({ length: S }, () => rand() - 0.5);
  let obs = reset();
  let trainSteps = 0;
  for (let t = 0; t < opts.envSteps; t++) {
    tag("act");
    const eps = Math.max(0.05, 1 - t / 100);
    const best = tf.tidy(() =>
      tf.argMax(online.predict(tf.tensor2d(obs, [1, S])) as T2, -1)
    );
    const [greedy] = await best.data();
    best.dispose();
    const action = rand() < eps ? Math.floor(rand() * A) : greedy;
    tag("env");
    const next = obs.map((x, i) => 0.9 * x + (i % A === action ? 0.1 : -0.05));
    const done = (t + 1) % opts.episode === 0 ? 1 : 0;
    replay.push({
      s: obs,
      a: action,
      r: next[action] - next[0],
      s2: next,
      done,
    });
    if (replay.length > opts.replay) replay.shift();
    obs = done ? reset() : next;
    tag(undefined);
    rec.step(`act ${t}`);
    if (replay.length < B || t % opts.trainEvery !== 0) continue;
    tag("sample");
    const picks = Array.from(
      { length: B },
      () => replay[Math.floor(rand() * replay.length)],
    );
    const flat = (f: (p: typeof picks[0]) => Float32Array) => {
      const out = new Float32Array(B * S);
      picks.forEach((p, i) => out.set(f(p), i * S));
      return out;
    };
    const states = tf.tensor2d(flat((p) => p.s), [B, S]);
    const nextStates = tf.tensor2d(flat((p) => p.s2), [B, S]);
    const actions = tf.tensor1d(picks.map((p) => p.a), "int32");
    const rewards = tf.tensor1d(picks.map((p) => p.r));
    const dones = tf.tensor1d(picks.map((p) => p.done));
    tag("train");
    const loss = opt.minimize(() => {
      const q = online.apply(states, { training: true }) as T2;
      const qa = tf.sum(tf.mul(q, tf.oneHot(actions, A)), 1);
      const maxNext = tf.max(target.predict(nextStates) as T2, 1);
      const y = tf.add(
        rewards,
        tf.mul(tf.mul(maxNext, opts.gamma), tf.sub(1, dones)),
      );
      return tf.losses.meanSquaredError(y, qa) as tf.Scalar;
    }, true)!;
    tag("readback");
    await loss.data();
    tf.dispose([loss, states, nextStates, actions, rewards, dones]);
    trainSteps++;
    if (trainSteps % opts.copyEvery === 0) {
      tag("copy");
      target.setWeights(online.getWeights());
    }
    tag(undefined);
    rec.step(`train ${trainSteps - 1} (after act ${t})`);
  }
  opt.dispose();
  online.dispose();
  target.dispose();
  rec.step("disposed");
}

/**
 * Two mixture-of-experts layers (d 64, 4 experts, each a ReLU MLP 64 →
 * 128 → 64; top-1 routing) over a batch of tokens whose count changes
 * every step: the router's logits and argmax are computed on the GPU and
 * read back mid-step; on the CPU the tokens are grouped by expert, each
 * expert's row indices uploaded, its tokens `tf.gather`ed, run through its
 * MLP, the outputs `tf.concat`ed and put back in token order by another
 * `tf.gather`, scaled by the gate and added to the residual. Inference;
 * tokens per step 48, 128, 80, 32, 128, 64, 96, 40, 112, 56 (so the rows
 * per expert change at every layer of every step).
 */
export async function moeRouting(
  rec: TfjsRecording,
  opts = {
    d: 64,
    ff: 128,
    experts: 4,
    layers: 2,
    tokens: [48, 128, 80, 32, 128, 64, 96, 40, 112, 56],
  },
): Promise<void> {
  const tag = tagger(rec);
  const { d, ff, experts: E } = opts;
  tag("weights");
  let seed = 201;
  const w = (shape: number[], scale = 0.15) => rnd(shape, scale, seed++);
  const layers = Array.from({ length: opts.layers }, () => ({
    router: w([d, E], 0.5),
    experts: Array.from({ length: E }, () => ({
      w1: w([d, ff]),
      b1: w([ff], 0.01),
      w2: w([ff, d]),
    })),
  }));
  rec.step("weights");
  for (const [s, n] of opts.tokens.entries()) {
    tag("input");
    let x: T = tf.randomNormal([n, d], 0, 1, "float32", 2000 + s);
    for (const [li, layer] of layers.entries()) {
      tag(`route ${li}`);
      const [gate, choice] = tf.tidy(() => {
        const probs = tf.softmax(tf.matMul(x as T2, layer.router as T2));
        return [tf.max(probs, 1, true), tf.argMax(probs, 1)];
      });
      const chosen = (await choice.data()) as Int32Array;
      choice.dispose();
      const groups = Array.from({ length: E }, () => [] as number[]);
      chosen.forEach((e, i) => groups[e].push(i));
      const order = groups.flat();
      const back = new Int32Array(n);
      order.forEach((tok, pos) => back[tok] = pos);
      tag(`experts ${li}`);
      const y = tf.tidy(() => {
        const outs: T[] = [];
        for (const [e, rows] of groups.entries()) {
          if (rows.length === 0) continue;
          const { w1, b1, w2 } = layer.experts[e];
          const xe = tf.gather(x, tf.tensor1d(rows, "int32"));
          const h = tf.relu(tf.add(tf.matMul(xe as T2, w1 as T2), b1));
          outs.push(tf.matMul(h as T2, w2 as T2));
        }
        const cat = outs.length === 1 ? outs[0] : tf.concat(outs, 0);
        const ordered = tf.gather(cat, tf.tensor1d(back, "int32"));
        return tf.add(x, tf.mul(ordered, gate));
      });
      gate.dispose();
      x.dispose();
      x = y;
    }
    tag("readback");
    const pooled = tf.mean(x, 0);
    await pooled.data();
    tf.dispose([pooled, x]);
    tag(undefined);
    rec.step(`step ${s} (${n} tokens)`);
  }
  tf.dispose(
    layers.flatMap((l) => [
      l.router,
      ...l.experts.flatMap((e) => [e.w1, e.b1, e.w2]),
    ]),
  );
  rec.step("disposed");
}

/**
 * A PointNet-like classifier over point clouds of changing size: a shared
 * per-point MLP (3 → 64 → 128 → 256, as one `tf.matMul` over all points of
 * the batch), a max over each cloud's points, a head 256 → 128 → 10.
 * Trained with Adam (`optimizer.minimize`) at (clouds, points) (4, 300),
 * (2, 1024), (8, 128), (4, 517), (1, 2048), (8, 300), (2, 777), then
 * served at (1, 4096), (16, 200), (3, 1000), the scores read back.
 */
export async function pointnetVarsize(
  rec: TfjsRecording,
  opts = {
    widths: [3, 64, 128, 256],
    head: [128, 10],
    train: [[4, 300], [2, 1024], [8, 128], [4, 517], [1, 2048], [8, 300], [
      2,
      777,
    ]] as [number, number][],
    serve: [[1, 4096], [16, 200], [3, 1000]] as [number, number][],
  },
): Promise<void> {
  const tag = tagger(rec);
  tag("weights");
  let seed = 211;
  const v = (shape: number[], scale = 0.1) => {
    const init = rnd(shape, scale, seed++);
    const x = tf.variable(init);
    init.dispose();
    return x;
  };
  const dims = opts.widths;
  const shared = dims.slice(1).map((k, i) => ({
    w: v([dims[i], k]),
    b: v([k]),
  }));
  const hd = [dims.at(-1)!, ...opts.head];
  const head = opts.head.map((k, i) => ({ w: v([hd[i], k]), b: v([k]) }));
  const C = opts.head.at(-1)!;
  const opt = tf.train.adam(1e-3);
  rec.step("weights");
  const logits = (pts: T, B: number, N: number) => {
    tag("shared");
    let h = tf.reshape(pts, [B * N, 3]) as T2;
    for (const l of shared) h = tf.relu(tf.add(tf.matMul(h, l.w as T2), l.b));
    tag("pool");
    let g = tf.max(tf.reshape(h, [B, N, dims.at(-1)!]), 1) as T2;
    tag("head");
    for (const [i, l] of head.entries()) {
      g = tf.add(tf.matMul(g, l.w as T2), l.b);
      if (i < head.length - 1) g = tf.relu(g);
    }
    return g;
  };
  for (const [s, [B, N]] of opts.train.entries()) {
    tag("batch");
    const pts = tf.randomUniform([B, N, 3], -1, 1, "float32", 2100 + s);
    const labels = tf.oneHot(
      tf.tensor1d(
        Array.from({ length: B }, (_, i) => (i * 3 + s) % C),
        "int32",
      ),
      C,
    );
    tag("train");
    const loss = opt.minimize(
      () =>
        tf.losses.softmaxCrossEntropy(labels, logits(pts, B, N)) as tf.Scalar,
      true,
    )!;
    tag("readback");
    await loss.data();
    tf.dispose([loss, pts, labels]);
    tag(undefined);
    rec.step(`train ${s} (${B} clouds of ${N} points)`);
  }
  for (const [s, [B, N]] of opts.serve.entries()) {
    tag("batch");
    const pts = tf.randomUniform([B, N, 3], -1, 1, "float32", 2200 + s);
    const probs = tf.tidy(() => tf.softmax(logits(pts, B, N)));
    tag("readback");
    await probs.data();
    tf.dispose([probs, pts]);
    tag(undefined);
    rec.step(`serve ${s} (${B} clouds of ${N} points)`);
  }
  opt.dispose();
  tf.dispose([...shared, ...head].flatMap((l) => [l.w, l.b]));
  rec.step("disposed");
}

/**
 * A streaming model over audio-like frames (40 features), fed chunks of
 * changing length, written without `tf.tidy`: every intermediate is
 * disposed by hand. Per chunk: the last 4 frames of the previous chunk
 * (the causal context, carried) are `tf.concat`ed in front, a causal
 * conv1d (k 5, 64) and a pointwise conv1d (64) run over it, the new
 * context is `tf.slice`d off; the chunk's mean feature updates a carried
 * recurrent state (`tanh(state·U + mean·W)`); the chunk's embedding is
 * kept in a ring of the last 8 chunks (the oldest disposed when a new one
 * comes), and every 4th chunk a summary of the ring (`tf.stack`, mean) is
 * kept for 12 chunks. Streams join and leave: 2 streams for chunks 0–9, a
 * third joins (state and context `tf.concat`ed), the first leaves after
 * chunk 19 (`tf.gather` of the rest); chunk lengths cycle through 20, 35,
 * 50, 12, 64, 28, 40; 30 chunks, each chunk's output read back.
 */
export async function streamingChunks(
  rec: TfjsRecording,
  opts = {
    features: 40,
    c: 64,
    k: 5,
    state: 64,
    ring: 8,
    summaryEvery: 4,
    summaryKeep: 12,
    chunks: 30,
    lengths: [20, 35, 50, 12, 64, 28, 40],
    join: 10,
    leave: 20,
  },
): Promise<void> {
  const tag = tagger(rec);
  const { features: F, c, k, state: H } = opts;
  tag("weights");
  let seed = 221;
  const w = (shape: number[], scale = 0.1) => rnd(shape, scale, seed++);
  const conv1 = w([k, F, c]), conv2 = w([1, c, c]);
  const U = w([H, H]), W = w([c, H]);
  rec.step("weights");
  tag("init");
  let streams = 2;
  let context: T = tf.zeros([streams, k - 1, F]);
  let state: T = tf.zeros([streams, H]);
  const ring: T[] = [];
  const summaries: { t: T; until: number }[] = [];
  for (let i = 0; i < opts.chunks; i++) {
    if (i === opts.join) {
      tag("join");
      const z1 = tf.zeros([1, k - 1, F]), z2 = tf.zeros([1, H]);
      const c2 = tf.concat([context, z1], 0), s2 = tf.concat([state, z2], 0);
      tf.dispose([z1, z2, context, state]);
      context = c2, state = s2, streams++;
      tf.dispose(ring.splice(0));
    }
    if (i === opts.leave) {
      tag("leave");
      const keep = tf.tensor1d(
        Array.from({ length: streams - 1 }, (_, j) => j + 1),
        "int32",
      );
      const c2 = tf.gather(context, keep), s2 = tf.gather(state, keep);
      tf.dispose([keep, context, state]);
      context = c2, state = s2, streams--;
      tf.dispose(ring.splice(0));
    }
    const L = opts.lengths[i % opts.lengths.length];
    tag("chunk");
    const chunk = tf.randomNormal([streams, L, F], 0, 1, "float32", 3000 + i);
    tag("conv");
    const full = tf.concat([context, chunk], 1) as tf.Tensor3D;
    const nextContext = tf.slice(full, [0, L, 0], [streams, k - 1, F]);
    const a1 = tf.conv1d(full, conv1 as tf.Tensor3D, 1, "valid");
    const r1 = tf.relu(a1);
    const a2 = tf.conv1d(r1 as tf.Tensor3D, conv2 as tf.Tensor3D, 1, "valid");
    const out = tf.relu(a2);
    tf.dispose([full, a1, r1, a2, chunk, context]);
    context = nextContext;
    tag("state");
    const m = tf.mean(out, 1);
    const su = tf.matMul(state as T2, U as T2);
    const mw = tf.matMul(m as T2, W as T2);
    const pre = tf.add(su, mw);
    const nextState = tf.tanh(pre);
    tf.dispose([su, mw, pre, state]);
    state = nextState;
    tag("ring");
    ring.push(m);
    if (ring.length > opts.ring) ring.shift()!.dispose();
    if (i % opts.summaryEvery === opts.summaryEvery - 1) {
      tag("summary");
      const st = tf.stack(ring);
      summaries.push({ t: tf.mean(st, 0), until: i + opts.summaryKeep });
      st.dispose();
    }
    while (summaries.length && summaries[0].until <= i) {
      summaries.shift()!.t.dispose();
    }
    tag("readback");
    const score = tf.sum(out, [1, 2]);
    out.dispose();
    await score.data();
    score.dispose();
    tag(undefined);
    rec.step(`chunk ${i} (${streams} streams, ${L} frames)`);
  }
  tf.dispose([context, state, ...ring, ...summaries.map((x) => x.t)]);
  tf.dispose([conv1, conv2, U, W]);
  rec.step("disposed");
}

/**
 * A BERT-like encoder fine-tuned on padding buckets: token ids looked up
 * in an embedding table (`tf.gather`, vocabulary 512, d 64) plus position
 * embeddings, 2 bidirectional pre-norm layers (4 heads, MLP 256) with a
 * key-padding mask made on the CPU from each sequence's true length, the
 * first token's state to a 2-class head; softmax cross-entropy, Adam
 * (`optimizer.minimize`, the table's gradient scattered back). Each batch
 * is padded to its bucket (16, 32 or 64 tokens), the batch size chosen so
 * a batch holds about 256 tokens, the last batch of a bucket short:
 * (batch, length) (8, 32), (16, 16), (4, 64), (16, 16), (3, 64), (8, 32),
 * (5, 32), (6, 16).
 */
export async function bertBuckets(
  rec: TfjsRecording,
  opts = {
    vocab: 512,
    d: 64,
    h: 4,
    ff: 256,
    layers: 2,
    classes: 2,
    maxLen: 64,
    batches: [[8, 32], [16, 16], [4, 64], [16, 16], [3, 64], [8, 32], [
      5,
      32,
    ], [6, 16]] as [number, number][],
  },
): Promise<void> {
  const tag = tagger(rec);
  const { d, h, ff } = opts;
  const dh = d / h;
  tag("weights");
  let seed = 231;
  const v = (shape: number[], scale = 0.1) => {
    const init = rnd(shape, scale, seed++);
    const x = tf.variable(init);
    init.dispose();
    return x;
  };
  const table = v([opts.vocab, d]);
  const pos = v([opts.maxLen, d]);
  const ls = Array.from({ length: opts.layers }, () => ({
    wqkv: v([d, 3 * d]),
    wo: v([d, d]),
    w1: v([d, ff]),
    w2: v([ff, d]),
  }));
  const head = v([d, opts.classes]);
  const opt = tf.train.adam(1e-3);
  rec.step("weights");
  const norm = (x: T) => {
    const { mean, variance } = tf.moments(x, -1, true);
    return tf.div(tf.sub(x, mean), tf.sqrt(tf.add(variance, 1e-5)));
  };
  const rand = lcg(2401);
  for (const [s, [B, L]] of opts.batches.entries()) {
    tag("batch");
    const lens = Array.from(
      { length: B },
      () => L / 2 + 1 + Math.floor(rand() * (L / 2)),
    );
    const ids = new Int32Array(B * L);
    const maskData = new Float32Array(B * L);
    lens.forEach((n, b) => {
      for (let t = 0; t < L; t++) {
        ids[b * L + t] = t < n ? 1 + Math.floor(rand() * (opts.vocab - 1)) : 0;
        maskData[b * L + t] = t < n ? 0 : -1e9;
      }
    });
    const idT = tf.tensor1d(ids, "int32");
    const mask = tf.tensor4d(maskData, [B, 1, 1, L]);
    const labels = tf.oneHot(
      tf.tensor1d(lens.map((n) => n % opts.classes), "int32"),
      opts.classes,
    );
    // [B*L, d] -> [B, h, L, dh]
    const split = (x: T) =>
      tf.transpose(tf.reshape(x, [B, L, h, dh]), [0, 2, 1, 3]);
    tag("train");
    const loss = opt.minimize(() => {
      tag("embed");
      const p = tf.slice(pos, [0, 0], [L, d]);
      let x = tf.reshape(
        tf.add(tf.reshape(tf.gather(table, idT), [B, L, d]), p),
        [B * L, d],
      ) as T2;
      ls.forEach((l, li) => {
        tag(`layer${li}.attn`);
        const qkv = tf.matMul(norm(x) as T2, l.wqkv as T2);
        const [q, k, vv] = tf.split(qkv, 3, 1).map(split);
        const att = tf.softmax(
          tf.add(
            tf.mul(
              tf.matMul(q as tf.Tensor4D, k as tf.Tensor4D, false, true),
              1 / Math.sqrt(dh),
            ),
            mask,
          ),
        );
        const a = tf.reshape(
          tf.transpose(
            tf.matMul(att as tf.Tensor4D, vv as tf.Tensor4D),
            [0, 2, 1, 3],
          ),
          [B * L, d],
        );
        x = tf.add(x, tf.matMul(a as T2, l.wo as T2));
        tag(`layer${li}.mlp`);
        x = tf.add(
          x,
          tf.matMul(
            tf.relu(tf.matMul(norm(x) as T2, l.w1 as T2)) as T2,
            l
              .w2 as T2,
          ),
        );
      });
      tag("head");
      const cls = tf.reshape(
        tf.slice(tf.reshape(x, [B, L, d]), [0, 0, 0], [B, 1, d]),
        [B, d],
      );
      return tf.losses.softmaxCrossEntropy(
        labels,
        tf.matMul(cls as T2, head as T2),
      ) as tf.Scalar;
    }, true)!;
    tag("readback");
    await loss.data();
    tf.dispose([loss, idT, mask, labels]);
    tag(undefined);
    rec.step(`step ${s} (batch ${B}, bucket ${L})`);
  }
  opt.dispose();
  tf.dispose([table, pos, head, ...ls.flatMap((l) => Object.values(l))]);
  rec.step("disposed");
}

// --- onnxruntime-web --------------------------------------------------------

/**
 * Retrieval over a memory bank as an ONNX graph: `query[N, d]` scored
 * against `keys[M, d]` (`MatMul` with the `Transpose`), `TopK` with `k`
 * an input (`k[1]`, int64), the chosen keys `Gather`ed (`[N, k, d]`) and
 * the chosen values `GatherND`ed (`values[M, dv]` with the indices
 * `Unsqueeze`d to `[N, k, 1]`), attention over them (`Softmax` of the
 * top scores and of the query's dot products with the gathered keys,
 * summed), a weighted sum (`Mul`, `ReduceSum`), an MLP to `y[N, classes]`.
 * N, M and k dynamic.
 */
export function retrievalModel(
  d: number,
  dv: number,
  hidden: number,
  classes: number,
  seed = 13,
): Uint8Array {
  const init = initializers(seed, 0.2);
  const out: Bytes = [];
  header(out);
  msg(7, (g) => {
    node("MatMul", ["query", init.add("wq", [d, d])], ["q"], "q", g);
    node("Transpose", ["keys"], ["kt"], "kt", g, { perm: [1, 0] });
    node("MatMul", ["q", "kt"], ["scores"], "scores", g);
    node("TopK", ["scores", "k"], ["top", "idx"], "topk", g, {
      axis: 1,
      largest: 1,
      sorted: 1,
    });
    node("Gather", ["keys", "idx"], ["kg"], "gather_keys", g, { axis: 0 });
    node("Unsqueeze", ["idx", "axis2"], ["idx3"], "idx3", g);
    node("GatherND", ["values", "idx3"], ["vg"], "gather_values", g);
    node("Unsqueeze", ["q", "axis1"], ["q3"], "q3", g);
    node("Mul", ["kg", "q3"], ["kq"], "kq", g);
    node("ReduceSum", ["kq", "axis2"], ["dots"], "dots", g, { keepdims: 0 });
    node("Add", ["top", "dots"], ["logit"], "logit", g);
    node("Softmax", ["logit"], ["p"], "p", g, { axis: 1 });
    node("Unsqueeze", ["p", "axis2"], ["p3"], "p3", g);
    node("Mul", ["vg", "p3"], ["pv"], "pv", g);
    node("ReduceSum", ["pv", "axis1"], ["read"], "read", g, { keepdims: 0 });
    node("MatMul", ["read", init.add("w1", [dv, hidden])], ["h"], "h", g);
    node("Add", ["h", init.add("b1", [hidden])], ["hb"], "hb", g);
    node("Relu", ["hb"], ["hr"], "hr", g);
    node("MatMul", ["hr", init.add("w2", [hidden, classes])], ["y"], "y", g);
    str(2, "retrieval", g);
    init.write(g);
    tensor(5, "axis1", [1], BigInt64Array.of(1n), g);
    tensor(5, "axis2", [1], BigInt64Array.of(2n), g);
    valueInfo(11, "query", ["N", d], g);
    valueInfo(11, "keys", ["M", d], g);
    valueInfo(11, "values", ["M", dv], g);
    valueInfo(11, "k", [1], g, 7);
    valueInfo(12, "y", ["N", classes], g);
  }, out);
  return Uint8Array.from(out);
}

/**
 * onnxruntime-web on `retrievalModel` (d 64, values 96, MLP 128, 16
 * classes): a memory bank that starts with 64 rows and grows by each
 * run's queries (their keys and values appended on the CPU), so `M`
 * changes every run; (queries, k) (8, 4), (32, 8), (4, 16), (16, 4), (64,
 * 8), (8, 32), (24, 16), (2, 4), (48, 8), (12, 16).
 */
export function ortRetrievalTopK(
  source: string,
  opts = {
    d: 64,
    dv: 96,
    hidden: 128,
    classes: 16,
    start: 64,
    runs: [
      [8, 4],
      [32, 8],
      [4, 16],
      [16, 4],
      [64, 8],
      [8, 32],
      [24, 16],
      [
        2,
        4,
      ],
      [48, 8],
      [12, 16],
    ] as [number, number][],
  },
): Promise<DeviceRecording<GPUDevice>> {
  const { d, dv } = opts;
  const rand = lcg(1601);
  const fill = (n: number) =>
    Float32Array.from({ length: n }, () => rand() - 0.5);
  let keys = fill(opts.start * d), values = fill(opts.start * dv);
  let M = opts.start;
  return recordOrtSession(
    source,
    opts,
    retrievalModel(d, dv, opts.hidden, opts.classes),
    async (session, recording) => {
      for (const [r, [n, k]] of opts.runs.entries()) {
        recording.recorder.setTag(`run ${r}`);
        const query = fill(n * d);
        const res = await session.run({
          query: new ort.Tensor("float32", query, [n, d]),
          keys: new ort.Tensor("float32", keys, [M, d]),
          values: new ort.Tensor("float32", values, [M, dv]),
          k: new ort.Tensor("int64", BigInt64Array.of(BigInt(k)), [1]),
        });
        if (res.y.dims.join() !== [n, opts.classes].join()) {
          throw new Error(`bad output dims ${res.y.dims}`);
        }
        // the queries join the bank
        const k2 = new Float32Array((M + n) * d);
        k2.set(keys), k2.set(query, M * d);
        const v2 = new Float32Array((M + n) * dv);
        v2.set(values), v2.set(fill(n * dv), M * dv);
        keys = k2, values = v2, M += n;
        recording.recorder.setTag(undefined);
        recording.recorder.step(
          `run ${r} (${n} queries, k ${k}, bank ${M - n})`,
        );
      }
    },
  );
}

// --- jax-js -----------------------------------------------------------------

type A = InstanceType<Jax["numpy"]["Array"]>;

/**
 * Differentially private SGD on jax-js: an MLP 64 → 128 → 128 → 10 whose
 * per-example gradients come from `vmap(grad(loss of one example))` (each
 * leaf `[batch, ...weights' shape]`), clipped to norm 1 per example,
 * summed over the batch with seeded Gaussian noise (made on the CPU,
 * uploaded), and applied by SGD with momentum; batches 32, 8, 64, 16, 48,
 * 24, 64, 8, each step's mean per-example norm read back; then an
 * evaluation pass at 128.
 */
export async function jaxDpSgd(
  rec: JaxModelRecording,
  opts = {
    sizes: [64, 128, 128, 10],
    batches: [32, 8, 64, 16, 48, 24, 64, 8],
    evalBatch: 128,
    clip: 1,
    sigma: 0.5,
    lr: 0.05,
    momentum: 0.9,
  },
): Promise<void> {
  const { jax } = rec, { numpy: np, nn } = jax;
  const { sizes } = opts;
  const F = sizes[0], C = sizes.at(-1)!, last = sizes.length - 2;
  const tag = (t: string | undefined) => rec.recorder.setTag(t);
  const rand = lcg(2301);
  const uniform = (shape: number[], scale: number): A =>
    np.array(
      Float32Array.from(
        { length: shape.reduce((a, b) => a * b, 1) },
        () => (rand() - 0.5) * scale,
      ),
    ).reshape(shape);
  // Box-Muller from the same generator
  const gauss = (shape: number[], sigma: number): A =>
    np.array(
      Float32Array.from(
        { length: shape.reduce((a, b) => a * b, 1) },
        () =>
          sigma * Math.sqrt(-2 * Math.log(1 - rand())) *
          Math.cos(2 * Math.PI * rand()),
      ),
    ).reshape(shape);
  tag("weights");
  type P = { w: A; b: A }[];
  let params: P = sizes.slice(1).map((n, i) => ({
    w: uniform([sizes[i], n], 2 / Math.sqrt(sizes[i])),
    b: np.zeros([n]),
  }));
  let vel: P = params.map((l) => ({
    w: np.zeros(l.w.shape),
    b: np.zeros(l.b.shape),
  }));
  rec.step("weights");
  const forward = (p: P, x: A): A => {
    let h = x;
    p.forEach((l, i) => {
      h = np.matmul(h, l.w).add(l.b);
      if (i < last) h = nn.relu(h);
    });
    return h;
  };
  // one example: x [F], y [C]
  const lossOne = (p: P, x: A, y: A): A =>
    nn.logSoftmax(forward(p, x.reshape([1, F])).reshape([C]), -1).mul(y)
      .sum().neg();
  const perExample = jax.vmap(jax.grad(lossOne), [null, 0, 0]);
  const batch = (n: number, s: number) => {
    const labels = new Float32Array(n * C);
    for (let i = 0; i < n; i++) labels[i * C + ((i * 7 + s) % C)] = 1;
    return { x: uniform([n, F], 2), y: np.array(labels).reshape([n, C]) };
  };
  for (const [s, B] of opts.batches.entries()) {
    tag("batch");
    const { x, y } = batch(B, s);
    tag("per-example grads");
    const grads = perExample(jax.tree.ref(params), x, y) as P;
    tag("clip");
    const leaves = grads.flatMap((g) => [g.w, g.b]);
    let sq: A | undefined;
    for (const g of leaves) {
      const part = g.ref.mul(g.ref).reshape([B, -1]).sum(1);
      sq = sq ? sq.add(part) : part;
    }
    const norms = np.sqrt(sq!);
    const denom = np.maximum(norms.ref.mul(1 / opts.clip), 1);
    tag("noise");
    const summed = grads.map((g) => {
      const out: Record<"w" | "b", A> = {} as Record<"w" | "b", A>;
      for (const k of ["w", "b"] as const) {
        const shape = g[k].shape;
        const clipped = g[k].div(
          denom.ref.reshape([B, ...shape.slice(1).map(() => 1)]),
        ).sum(0);
        out[k] = clipped.add(gauss(shape.slice(1), opts.sigma * opts.clip))
          .mul(1 / B);
      }
      return out;
    });
    denom.dispose();
    tag("update");
    const next = params.map((l, i) => {
      const out: Record<string, A> = {};
      for (const k of ["w", "b"] as const) {
        const v2 = vel[i][k].mul(opts.momentum).add(summed[i][k]);
        out[k] = l[k].sub(v2.ref.mul(opts.lr));
        out[`v${k}`] = v2;
      }
      return out;
    });
    params = next.map((o) => ({ w: o.w, b: o.b }));
    vel = next.map((o) => ({ w: o.vw, b: o.vb }));
    tag("readback");
    await norms.mean().data();
    tag(undefined);
    rec.step(`step ${s} (batch ${B})`);
  }
  tag("eval");
  const { x, y } = batch(opts.evalBatch, 99);
  y.dispose();
  await np.argmax(forward(jax.tree.ref(params), x), -1).data();
  tag(undefined);
  rec.step("eval");
  jax.tree.dispose([params, vel]);
  rec.step("disposed");
}

/** jax-js WebGPU workloads of this set: `traces/jax-webgpu/<name>.jsonl.gz`. */
export const jaxWebgpuWorkloads6: Record<
  string,
  (rec: JaxModelRecording) => Promise<void>
> = {
  "dp-sgd": jaxDpSgd,
};
