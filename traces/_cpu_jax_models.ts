/**
 * The models of the fourth hold-out set's CPU traces, on jax-js 0.1.25's
 * wasm device (`_cpu_jax.ts`): an MLP trained with `valueAndGrad` and a
 * hand-written Adam at changing batch sizes, a transformer encoder at
 * changing sequence lengths, a decoder growing a KV cache token by token
 * (`np.concatenate`), and a CNN served through `jit` (fused kernels) at
 * changing batch sizes. Weights are seeded pseudo-random numbers made in
 * JavaScript and uploaded (`np.array`); nothing downloaded. jax-js passes
 * ownership: every function takes its arguments, `.ref` keeps one.
 *
 * @module
 */
import type { Jax, JaxRecording } from "./_cpu_jax.ts";

/**
 * What the models use of a recording: jax-js's wasm device's
 * (`_cpu_jax.ts`) or its WebGPU device's (`_gpu_jax.ts`, the fifth hold-out
 * set runs these models there too).
 */
export type JaxModelRecording = Pick<JaxRecording, "jax" | "recorder" | "step">;

type A = InstanceType<Jax["numpy"]["Array"]>;
type Np = Jax["numpy"];

/** A `[shape]` float32 array of seeded uniform numbers in ±scale/2. */
function weights(
  np: Np,
  shape: number[],
  scale: number,
  seed: number,
): A {
  let s = seed >>> 0;
  const n = shape.reduce((a, b) => a * b, 1);
  const data = Float32Array.from({ length: n }, () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return (s / 2 ** 32 - 0.5) * scale;
  });
  return np.array(data).reshape(shape);
}

/** Layer norm over the last axis, no affine (takes `x`). */
function norm(np: Np, x: A): A {
  const mean = x.ref.mean(-1, { keepdims: true });
  const c = x.sub(mean);
  const v = c.ref.mul(c.ref).mean(-1, { keepdims: true });
  return c.div(np.sqrt(v.add(1e-5)));
}

const tag = (rec: JaxModelRecording, t: string | undefined) =>
  rec.recorder.setTag(t);

/**
 * An MLP (784 → 256 → 128 → 10, ReLU, softmax cross-entropy) trained by
 * `valueAndGrad` and a hand-written Adam; batches 64, 32, 128, 16, 64, 96,
 * 32, then an evaluation pass at 256 with the predictions read back.
 */
export async function jaxMlpTraining(
  rec: JaxModelRecording,
  opts = {
    sizes: [784, 256, 128, 10],
    batches: [64, 32, 128, 16, 64, 96, 32],
    evalBatch: 256,
  },
): Promise<void> {
  const { jax } = rec, { numpy: np, nn } = jax;
  const { sizes } = opts;
  tag(rec, "weights");
  type P = { w: A; b: A }[];
  let params: P = sizes.slice(1).map((n, i) => ({
    w: weights(np, [sizes[i], n], 2 / Math.sqrt(sizes[i]), 201 + i),
    b: np.zeros([n]),
  }));
  let m: P = params.map((l) => ({
    w: np.zeros(l.w.shape),
    b: np.zeros(l.b.shape),
  }));
  let v: P = params.map((l) => ({
    w: np.zeros(l.w.shape),
    b: np.zeros(l.b.shape),
  }));
  rec.step("weights");
  const forward = (p: P, x: A): A => {
    let h = x;
    p.forEach((l, i) => {
      h = np.matmul(h, l.w).add(l.b);
      if (i < p.length - 1) h = nn.relu(h);
    });
    return h;
  };
  const loss = (p: P, x: A, y: A): A =>
    nn.logSoftmax(forward(p, x), -1).mul(y).sum(-1).mean().neg();
  const step = jax.valueAndGrad(loss);
  const batch = (n: number, seed: number) => {
    const x = weights(np, [n, sizes[0]], 2, seed);
    const labels = new Float32Array(n * sizes.at(-1)!);
    for (let i = 0; i < n; i++) {
      labels[i * sizes.at(-1)! + ((i * 7 + seed) % sizes.at(-1)!)] = 1;
    }
    return { x, y: np.array(labels).reshape([n, sizes.at(-1)!]) };
  };
  const [b1, b2, lr, eps] = [0.9, 0.999, 1e-3, 1e-8];
  for (const [s, n] of opts.batches.entries()) {
    tag(rec, "batch");
    const { x, y } = batch(n, 300 + s);
    tag(rec, "grad");
    const [value, grads] = step(jax.tree.ref(params), x, y) as [A, P];
    tag(rec, "adam");
    const t = s + 1;
    const lrt = lr * Math.sqrt(1 - b2 ** t) / (1 - b1 ** t);
    const next = params.map((l, i) => {
      const out: Record<string, A> = {};
      for (const k of ["w", "b"] as const) {
        const g = grads[i][k];
        const m2 = m[i][k].mul(b1).add(g.ref.mul(1 - b1));
        const v2 = v[i][k].mul(b2).add(g.ref.mul(g).mul(1 - b2));
        out[k] = l[k].sub(m2.ref.mul(lrt).div(np.sqrt(v2.ref).add(eps)));
        out[`m${k}`] = m2;
        out[`v${k}`] = v2;
      }
      return out;
    });
    params = next.map((o) => ({ w: o.w, b: o.b }));
    m = next.map((o) => ({ w: o.mw, b: o.mb }));
    v = next.map((o) => ({ w: o.vw, b: o.vb }));
    tag(rec, "readback");
    await value.data();
    tag(rec, undefined);
    rec.step(`step ${s} (batch ${n})`);
  }
  tag(rec, "eval");
  const { x, y } = batch(opts.evalBatch, 400);
  y.dispose();
  await np.argmax(forward(jax.tree.ref(params), x), -1).data();
  tag(rec, undefined);
  rec.step("eval");
  jax.tree.dispose([params, m, v]);
  rec.step("disposed");
}

type Layer = { wq: A; wk: A; wv: A; wo: A; w1: A; w2: A };

function layersOf(
  np: Np,
  count: number,
  d: number,
  ff: number,
  seed: number,
) {
  return Array.from({ length: count }, (_, i): Layer => ({
    wq: weights(np, [d, d], 0.2, seed + 10 * i),
    wk: weights(np, [d, d], 0.2, seed + 10 * i + 1),
    wv: weights(np, [d, d], 0.2, seed + 10 * i + 2),
    wo: weights(np, [d, d], 0.2, seed + 10 * i + 3),
    w1: weights(np, [d, ff], 0.2, seed + 10 * i + 4),
    w2: weights(np, [ff, d], 0.2, seed + 10 * i + 5),
  }));
}

/** `[t, d]` → `[h, t, dh]` (takes `x`). */
const heads = (x: A, t: number, h: number) =>
  x.reshape([t, h, -1]).transpose([1, 0, 2]);

/** The MLP half of a pre-norm block (takes `x`, keeps the weights). */
const mlp = (jax: Jax, x: A, l: Layer) =>
  x.ref.add(
    jax.numpy.matmul(
      jax.nn.relu(jax.numpy.matmul(norm(jax.numpy, x), l.w1.ref)),
      l.w2.ref,
    ),
  );

/**
 * A 2-layer pre-norm transformer encoder (d 64, 4 heads, ReLU MLP 256),
 * inference, one sequence per pass at lengths 16, 48, 32, 64, 24, 40, 8,
 * 56; the pooled output read back.
 */
export async function jaxTransformerVarlen(
  rec: JaxModelRecording,
  opts = {
    d: 64,
    h: 4,
    ff: 256,
    layers: 2,
    lengths: [16, 48, 32, 64, 24, 40, 8, 56],
  },
): Promise<void> {
  const { jax } = rec, { numpy: np, nn } = jax;
  const { d, h } = opts;
  tag(rec, "weights");
  const layers = layersOf(np, opts.layers, d, opts.ff, 501);
  rec.step("weights");
  for (const [pass, T] of opts.lengths.entries()) {
    tag(rec, "input");
    let x = weights(np, [T, d], 1, 600 + pass);
    layers.forEach((l, li) => {
      tag(rec, `layer${li}.attn`);
      const hN = norm(np, x.ref);
      const q = heads(np.matmul(hN.ref, l.wq.ref), T, h);
      const k = heads(np.matmul(hN.ref, l.wk.ref), T, h).transpose([0, 2, 1]);
      const v = heads(np.matmul(hN, l.wv.ref), T, h);
      const a = nn.softmax(np.matmul(q, k).mul(1 / Math.sqrt(d / h)), -1);
      const o = np.matmul(a, v).transpose([1, 0, 2]).reshape([T, d]);
      x = x.add(np.matmul(o, l.wo.ref));
      tag(rec, `layer${li}.mlp`);
      x = mlp(rec.jax, x, l);
    });
    tag(rec, "readback");
    await x.mean(0).data();
    tag(rec, undefined);
    rec.step(`pass ${pass} (length ${T})`);
  }
  jax.tree.dispose(layers);
  rec.step("disposed");
}

/**
 * A 2-layer decoder (d 64, 4 heads, vocabulary 96): an 8-token causal
 * prompt pass, then 32 tokens one at a time, each layer's K and V caches
 * grown by `np.concatenate` (the old ones given up), the next token the
 * argmax read back.
 */
export async function jaxKvDecode(
  rec: JaxModelRecording,
  opts = { d: 64, h: 4, ff: 128, layers: 2, vocab: 96, prompt: 8, steps: 32 },
): Promise<void> {
  const { jax } = rec, { numpy: np, nn } = jax;
  const { d, h, vocab } = opts;
  const dh = d / h;
  tag(rec, "weights");
  const layers = layersOf(np, opts.layers, d, opts.ff, 701);
  const emb = weights(np, [vocab, d], 1, 790);
  const out = weights(np, [d, vocab], 0.2, 791);
  rec.step("weights");
  const caches: { k?: A; v?: A }[] = layers.map(() => ({}));
  /** `t` new positions `x [t, d]` through the decoder (takes `x`). */
  const block = (x: A, t: number, mask?: A): A => {
    layers.forEach((l, li) => {
      tag(rec, `layer${li}.attn`);
      const hN = norm(np, x.ref);
      const q = heads(np.matmul(hN.ref, l.wq.ref), t, h);
      const kNew = heads(np.matmul(hN.ref, l.wk.ref), t, h);
      const vNew = heads(np.matmul(hN, l.wv.ref), t, h);
      const c = caches[li];
      const K = c.k ? np.concatenate([c.k, kNew], 1) : kNew;
      const V = c.v ? np.concatenate([c.v, vNew], 1) : vNew;
      c.k = K.ref, c.v = V.ref;
      let s = np.matmul(q, K.transpose([0, 2, 1])).mul(1 / Math.sqrt(dh));
      if (mask) s = s.add(mask.ref);
      const o = np.matmul(nn.softmax(s, -1), V).transpose([1, 0, 2])
        .reshape([t, d]);
      x = x.add(np.matmul(o, l.wo.ref));
      tag(rec, `layer${li}.mlp`);
      x = mlp(rec.jax, x, l);
    });
    return x;
  };
  const logitsOf = (x: A) => np.matmul(norm(np, x), out.ref);
  tag(rec, "prompt");
  const P = opts.prompt;
  const ids = np.array(
    Int32Array.from({ length: P }, (_, i) => (i * 17 + 5) % vocab),
  );
  const band = new Float32Array(P * P);
  for (let i = 0; i < P; i++) {
    for (let j = i + 1; j < P; j++) band[i * P + j] = -1e9;
  }
  const mask = np.array(band).reshape([P, P]);
  const y = block(np.take(emb.ref, ids, 0), P, mask);
  mask.dispose();
  let token = (await np.argmax(logitsOf(y.slice([P - 1, P])), -1).data())[0];
  rec.step("prompt");
  for (let s = 0; s < opts.steps; s++) {
    tag(rec, "embed");
    const x = np.take(emb.ref, np.array(Int32Array.of(token)), 0);
    const yy = block(x, 1);
    tag(rec, "readback");
    token = (await np.argmax(logitsOf(yy), -1).data())[0];
    tag(rec, undefined);
    rec.step(`token ${s} (${token})`);
  }
  jax.tree.dispose([layers, emb, out, caches]);
  rec.step("disposed");
}

/**
 * A small CNN served through `jit` (one compiled function, traced again for
 * each new input shape; its kernels fused): 3×3 conv (16) + ReLU, strided
 * 3×3 conv (32) + ReLU, 3×3 conv (32) + residual + ReLU, global average,
 * dense softmax; 32×32×3 inputs (NCHW), batches 1, 4, 2, 8, 1, 4, 8, 2, the
 * class probabilities read back.
 */
export async function jaxCnnJit(
  rec: JaxModelRecording,
  opts = { size: 32, c: 16, classes: 10, batches: [1, 4, 2, 8, 1, 4, 8, 2] },
): Promise<void> {
  const { jax } = rec, { numpy: np, nn, lax } = jax;
  const { c, size: S } = opts;
  tag(rec, "weights");
  const p = {
    k1: weights(np, [c, 3, 3, 3], 0.4, 801),
    k2: weights(np, [2 * c, c, 3, 3], 0.2, 802),
    k3: weights(np, [2 * c, 2 * c, 3, 3], 0.2, 803),
    fc: weights(np, [2 * c, opts.classes], 0.3, 804),
  };
  rec.step("weights");
  const net = jax.jit((q: typeof p, x: A): A => {
    const a = nn.relu(lax.conv(x, q.k1, [1, 1], "SAME"));
    const b = nn.relu(lax.conv(a, q.k2, [2, 2], "SAME"));
    const r = nn.relu(b.ref.add(lax.conv(b, q.k3, [1, 1], "SAME")));
    return nn.softmax(np.matmul(r.mean([2, 3]), q.fc), -1);
  });
  for (const [pass, n] of opts.batches.entries()) {
    tag(rec, "input");
    const x = weights(np, [n, 3, S, S], 2, 900 + pass);
    tag(rec, "net");
    const y = net(jax.tree.ref(p), x);
    tag(rec, "readback");
    await y.data();
    tag(rec, undefined);
    rec.step(`pass ${pass} (batch ${n})`);
  }
  net.dispose();
  jax.tree.dispose(p);
  rec.step("disposed");
}
