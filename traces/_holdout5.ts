/**
 * The fifth hold-out set (traces/README.md): GPU traces from jax-js 0.1.25's
 * WebGPU device (`_gpu_jax.ts`), a runtime allot's pools had never seen,
 * and more onnxruntime-web WebGPU workloads unlike the earlier ones.
 *
 * jax-js on WebGPU runs the four models of the CPU traces
 * (`_cpu_jax_models.ts`: MLP training at changing batch, a transformer at
 * changing length, KV decode, a `jit` CNN) and one more here: a transformer
 * classifier whose whole training step (`valueAndGrad`) and Adam update are
 * `jit` functions, traced again for each new (batch, length) and served
 * from the cache when a shape comes back. onnxruntime-web 1.22 runs an
 * encoder-decoder re-run on a growing decoder input (the last position
 * `Slice`d out), and a decoder step whose KV caches are inputs grown by
 * `Concat` and fed back. Weights random and seeded; nothing downloaded.
 *
 * @module
 */
import type { DeviceRecording } from "../packages/trace/mod.ts";
import type { Jax } from "./_cpu_jax.ts";
import type { JaxModelRecording } from "./_cpu_jax_models.ts";
import {
  jaxCnnJit,
  jaxKvDecode,
  jaxMlpTraining,
  jaxTransformerVarlen,
} from "./_cpu_jax_models.ts";
import {
  attention,
  attentionConstants,
  type Bytes,
  feedForward,
  header,
  initializers,
  layerNorm,
  msg,
  node,
  str,
  tensor,
  valueInfo,
} from "./_onnx.ts";
import { ort, recordOrtSession } from "./_ort_session.ts";

type A = InstanceType<Jax["numpy"]["Array"]>;
type Np = Jax["numpy"];

/** A `[shape]` float32 array of seeded uniform numbers in ±scale/2. */
function weights(np: Np, shape: number[], scale: number, seed: number): A {
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

/**
 * A 1-layer transformer classifier (features 16 → d 64, 4 heads, ReLU MLP
 * 128, mean-pooled, 8 classes) TRAINED with `jit`: the loss's
 * `valueAndGrad` is one `jit` function, traced again for every new (batch,
 * length) and taken from its cache when a shape comes back; the Adam update
 * is another (its shapes never change: traced once). (batch, length) (4,
 * 16), (2, 32), (4, 16), (8, 8), (2, 32), (4, 24), (8, 8), (4, 16), (2,
 * 32), (4, 24): four shapes, each step's loss read back.
 */
export async function jaxJitTraining(
  rec: JaxModelRecording,
  opts = {
    features: 16,
    d: 64,
    h: 4,
    ff: 128,
    classes: 8,
    shapes: [
      [4, 16],
      [2, 32],
      [4, 16],
      [8, 8],
      [2, 32],
      [4, 24],
      [8, 8],
      [
        4,
        16,
      ],
      [2, 32],
      [4, 24],
    ] as [number, number][],
  },
): Promise<void> {
  const { jax } = rec, { numpy: np, nn } = jax;
  const { features: F, d, h, ff, classes: C } = opts;
  const dh = d / h;
  const tag = (t: string | undefined) => rec.recorder.setTag(t);
  tag("weights");
  type P = {
    win: A;
    wq: A;
    wk: A;
    wv: A;
    wo: A;
    w1: A;
    w2: A;
    head: A;
  };
  const shapes: Record<keyof P, number[]> = {
    win: [F, d],
    wq: [d, d],
    wk: [d, d],
    wv: [d, d],
    wo: [d, d],
    w1: [d, ff],
    w2: [ff, d],
    head: [d, C],
  };
  const keys = Object.keys(shapes) as (keyof P)[];
  let params = Object.fromEntries(
    keys.map((k, i) => [k, weights(np, shapes[k], 0.3, 1101 + i)]),
  ) as P;
  let m = Object.fromEntries(keys.map((k) => [k, np.zeros(shapes[k])])) as P;
  let v = Object.fromEntries(keys.map((k) => [k, np.zeros(shapes[k])])) as P;
  rec.step("weights");
  const split = (x: A, B: number, T: number) =>
    x.reshape([B, T, h, dh]).transpose([0, 2, 1, 3]);
  const loss = (p: P, x: A, y: A): A => {
    const [B, T] = x.shape;
    let z = np.matmul(x, p.win);
    const hN = norm(np, z.ref);
    const q = split(np.matmul(hN.ref, p.wq), B, T);
    const k = split(np.matmul(hN.ref, p.wk), B, T).transpose([0, 1, 3, 2]);
    const vv = split(np.matmul(hN, p.wv), B, T);
    const a = nn.softmax(np.matmul(q, k).mul(1 / Math.sqrt(dh)), -1);
    const o = np.matmul(a, vv).transpose([0, 2, 1, 3]).reshape([B, T, d]);
    z = z.add(np.matmul(o, p.wo));
    z = z.ref.add(np.matmul(nn.relu(np.matmul(norm(np, z), p.w1)), p.w2));
    const logits = np.matmul(z.mean(1), p.head);
    return nn.logSoftmax(logits, -1).mul(y).sum(-1).mean().neg();
  };
  const gradStep = jax.jit(jax.valueAndGrad(loss));
  const [b1, b2, eps] = [0.9, 0.999, 1e-8];
  const adam = jax.jit((p: P, mm: P, vv: P, g: P, lrt: A) => {
    const out = { p: {} as P, m: {} as P, v: {} as P };
    for (const k of keys) {
      const m2 = mm[k].mul(b1).add(g[k].ref.mul(1 - b1));
      const v2 = vv[k].mul(b2).add(g[k].ref.mul(g[k]).mul(1 - b2));
      out.p[k] = p[k].sub(
        m2.ref.mul(lrt.ref).div(np.sqrt(v2.ref).add(eps)),
      );
      out.m[k] = m2;
      out.v[k] = v2;
    }
    lrt.dispose();
    return out;
  });
  for (const [s, [B, T]] of opts.shapes.entries()) {
    tag("batch");
    const x = weights(np, [B, T, F], 2, 1200 + s);
    const labels = new Float32Array(B * C);
    for (let i = 0; i < B; i++) labels[i * C + ((i * 5 + s) % C)] = 1;
    const y = np.array(labels).reshape([B, C]);
    tag("grad");
    const [value, grads] = gradStep(jax.tree.ref(params), x, y) as [A, P];
    tag("adam");
    const t = s + 1;
    const lrt = 1e-3 * Math.sqrt(1 - b2 ** t) / (1 - b1 ** t);
    const next = adam(params, m, v, grads, np.array(Float32Array.of(lrt)));
    params = next.p, m = next.m, v = next.v;
    tag("readback");
    await value.data();
    tag(undefined);
    rec.step(`step ${s} (batch ${B}, length ${T})`);
  }
  gradStep.dispose();
  adam.dispose();
  jax.tree.dispose([params, m, v]);
  rec.step("disposed");
}

/** jax-js WebGPU workloads: `traces/jax-webgpu/<name>.jsonl.gz`. */
export const jaxWebgpuWorkloads: Record<
  string,
  (rec: JaxModelRecording) => Promise<void>
> = {
  "mlp-training": jaxMlpTraining,
  "transformer-varlen": jaxTransformerVarlen,
  "kv-decode": jaxKvDecode,
  "cnn-jit": jaxCnnJit,
  "jit-training": jaxJitTraining,
};

/**
 * An encoder-decoder transformer as an ONNX graph, re-run whole on a
 * growing decoder input (no cache, as a plain export is): `src[N, S, d]`
 * through a pre-norm encoder layer (self-attention, MLP) and a final norm;
 * `tgt[N, T, d]` through a pre-norm decoder layer (self-attention,
 * cross-attention on the encoder's output, MLP); the last position
 * `Slice`d out and projected: `logits[N, 1, V]`. Batch, S and T dynamic.
 */
export function seq2seqModel(
  d: number,
  h: number,
  ff: number,
  vocab: number,
  seed = 11,
): Uint8Array {
  const init = initializers(seed, 0.2);
  const out: Bytes = [];
  header(out);
  msg(7, (g) => {
    // encoder
    const e1 = layerNorm(g, init, d, "enc.ln1", "src");
    const ea = attention(g, init, d, "enc.self", e1, e1);
    node("Add", ["src", ea], ["enc.x1"], "enc.x1", g);
    const e2 = layerNorm(g, init, d, "enc.ln2", "enc.x1");
    const ex = feedForward(g, init, d, ff, "enc.mlp", "enc.x1", e2);
    const mem = layerNorm(g, init, d, "enc.lnf", ex);
    // decoder
    const d1 = layerNorm(g, init, d, "dec.ln1", "tgt");
    const da = attention(g, init, d, "dec.self", d1, d1);
    node("Add", ["tgt", da], ["dec.x1"], "dec.x1", g);
    const d2 = layerNorm(g, init, d, "dec.ln2", "dec.x1");
    const ca = attention(g, init, d, "dec.cross", d2, mem);
    node("Add", ["dec.x1", ca], ["dec.x2"], "dec.x2", g);
    const d3 = layerNorm(g, init, d, "dec.ln3", "dec.x2");
    const dx = feedForward(g, init, d, ff, "dec.mlp", "dec.x2", d3);
    // the last position only
    node(
      "Slice",
      [dx, "last.start", "last.end", "last.axis"],
      ["last"],
      "last",
      g,
    );
    const lf = layerNorm(g, init, d, "dec.lnf", "last");
    node("MatMul", [lf, init.add("out.w", [d, vocab])], ["logits"], "out", g);
    str(2, "seq2seq", g);
    init.write(g);
    attentionConstants(g, d, h);
    tensor(5, "last.start", [1], BigInt64Array.of(-1n), g);
    tensor(5, "last.end", [1], BigInt64Array.of(2n ** 62n), g);
    tensor(5, "last.axis", [1], BigInt64Array.of(1n), g);
    valueInfo(11, "src", ["N", "S", d], g);
    valueInfo(11, "tgt", ["N", "T", d], g);
    valueInfo(12, "logits", ["N", 1, vocab], g);
  }, out);
  return Uint8Array.from(out);
}

/** Seeded embeddings `[vocab, d]` for the decoders' CPU side. */
function embeddings(vocab: number, d: number, seed: number): Float32Array {
  let s = seed >>> 0;
  return Float32Array.from({ length: vocab * d }, () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return (s / 2 ** 32 - 0.5) * 2;
  });
}

/** The argmax over the last axis of each row of `[rows, V]` logits. */
function argmaxRows(logits: Float32Array, rows: number, V: number): number[] {
  return Array.from({ length: rows }, (_, r) => {
    let best = 0;
    for (let k = 1; k < V; k++) {
      if (logits[r * V + k] > logits[r * V + best]) best = k;
    }
    return best;
  });
}

/**
 * onnxruntime-web on `seq2seqModel` (d 64, 4 heads, MLP 128, vocabulary
 * 48): greedy decoding with the whole graph re-run per token on a decoder
 * input grown by one position each run (the argmax's embedding appended on
 * the CPU), the source encoded again every run; sentences of (batch,
 * source length, tokens) (2, 12, 10), (1, 20, 8), (4, 8, 12), (1, 16, 6).
 */
export function ortSeq2seqGrowing(
  source: string,
  opts = {
    d: 64,
    h: 4,
    ff: 128,
    vocab: 48,
    sentences: [[2, 12, 10], [1, 20, 8], [4, 8, 12], [1, 16, 6]] as [
      number,
      number,
      number,
    ][],
  },
): Promise<DeviceRecording<GPUDevice>> {
  const { d, vocab: V } = opts;
  const emb = embeddings(V, d, 1301);
  const embed = (ids: number[]) => {
    const out = new Float32Array(ids.length * d);
    ids.forEach((t, i) => out.set(emb.subarray(t * d, (t + 1) * d), i * d));
    return out;
  };
  return recordOrtSession(
    source,
    opts,
    seq2seqModel(d, opts.h, opts.ff, V),
    async (session, recording) => {
      for (const [si, [n, S, tokens]] of opts.sentences.entries()) {
        const srcIds = Array.from(
          { length: n * S },
          (_, i) => (i * 13 + si * 7 + 1) % V,
        );
        const src = new ort.Tensor("float32", embed(srcIds), [n, S, d]);
        // per row: its tokens so far, BOS (0) first
        const rows: number[][] = Array.from({ length: n }, () => [0]);
        for (let t = 0; t < tokens; t++) {
          recording.recorder.setTag(`sentence ${si} batch ${n}`);
          const T = t + 1;
          const tgt = new ort.Tensor("float32", embed(rows.flat()), [n, T, d]);
          const res = await session.run({ src, tgt });
          if (res.logits.dims.join() !== [n, 1, V].join()) {
            throw new Error(`bad output dims ${res.logits.dims}`);
          }
          const next = argmaxRows(res.logits.data as Float32Array, n, V);
          rows.forEach((r, b) => r.push(next[b]));
          recording.recorder.setTag(undefined);
          recording.recorder.step(`sentence ${si} token ${t} (batch ${n})`);
        }
      }
    },
  );
}

/**
 * A decoder step with its KV caches as inputs and outputs, as an ONNX
 * graph: `x[N, 1, d]` and, per layer, `past_k{l}`, `past_v{l}` `[N, h, P,
 * dh]`; each layer's new key and value `Concat`ed onto the past along the
 * length axis (`present_k{l}`, `present_v{l}` `[N, h, P + 1, dh]`, outputs
 * fed back as the next run's past), pre-norm attention over them and an
 * MLP; `logits[N, 1, V]`. Batch and P dynamic.
 */
export function kvStepModel(
  d: number,
  h: number,
  ff: number,
  vocab: number,
  layers: number,
  seed = 12,
): Uint8Array {
  const init = initializers(seed, 0.2);
  const out: Bytes = [];
  header(out);
  const dh = d / h;
  msg(7, (g) => {
    let x = "x";
    for (let l = 0; l < layers; l++) {
      const n = (s: string) => `l${l}.${s}`;
      const hN = layerNorm(g, init, d, n("ln1"), x);
      for (const t of ["q", "k", "v"]) {
        node("MatMul", [hN, init.add(n(`w${t}`), [d, d])], [n(t)], n(t), g);
        node("Reshape", [n(t), "split4"], [n(`${t}4`)], n(`${t}4`), g);
        node("Transpose", [n(`${t}4`)], [n(`${t}h`)], n(`${t}h`), g, {
          perm: [0, 2, 1, 3],
        });
      }
      node("Concat", [`past_k${l}`, n("kh")], [`present_k${l}`], n("catk"), g, {
        axis: 2,
      });
      node("Concat", [`past_v${l}`, n("vh")], [`present_v${l}`], n("catv"), g, {
        axis: 2,
      });
      node("Transpose", [`present_k${l}`], [n("kt")], n("kt"), g, {
        perm: [0, 1, 3, 2],
      });
      node("MatMul", [n("qh"), n("kt")], [n("s")], n("s"), g);
      node("Mul", [n("s"), "scale"], [n("ss")], n("ss"), g);
      node("Softmax", [n("ss")], [n("p")], n("p"), g);
      node("MatMul", [n("p"), `present_v${l}`], [n("o")], n("o"), g);
      node("Transpose", [n("o")], [n("ot")], n("ot"), g, {
        perm: [0, 2, 1, 3],
      });
      node("Reshape", [n("ot"), "merge3"], [n("om")], n("om"), g);
      node("MatMul", [n("om"), init.add(n("wo"), [d, d])], [n("a")], n("a"), g);
      node("Add", [x, n("a")], [n("x1")], n("x1"), g);
      const h2 = layerNorm(g, init, d, n("ln2"), n("x1"));
      x = feedForward(g, init, d, ff, n("mlp"), n("x1"), h2);
    }
    const lf = layerNorm(g, init, d, "lnf", x);
    node("MatMul", [lf, init.add("out.w", [d, vocab])], ["logits"], "out", g);
    str(2, "kv_step", g);
    init.write(g);
    attentionConstants(g, d, h);
    valueInfo(11, "x", ["N", 1, d], g);
    for (let l = 0; l < layers; l++) {
      valueInfo(11, `past_k${l}`, ["N", h, "P", dh], g);
      valueInfo(11, `past_v${l}`, ["N", h, "P", dh], g);
    }
    valueInfo(12, "logits", ["N", 1, vocab], g);
    for (let l = 0; l < layers; l++) {
      valueInfo(12, `present_k${l}`, ["N", h, "P1", dh], g);
      valueInfo(12, `present_v${l}`, ["N", h, "P1", dh], g);
    }
  }, out);
  return Uint8Array.from(out);
}

/**
 * onnxruntime-web on `kvStepModel` (d 64, 4 heads, MLP 128, 2 layers,
 * vocabulary 48), one `session.run` per token: the caches start as one
 * zero position and come back from each run (`Concat`ed on the GPU, read
 * back, fed in again), greedy on the CPU; sequences of (batch, tokens)
 * (2, 16), (1, 24), (4, 12), (1, 8).
 */
export function ortKvCacheDecode(
  source: string,
  opts = {
    d: 64,
    h: 4,
    ff: 128,
    vocab: 48,
    layers: 2,
    seqs: [[2, 16], [1, 24], [4, 12], [1, 8]] as [number, number][],
  },
): Promise<DeviceRecording<GPUDevice>> {
  const { d, h, vocab: V, layers } = opts;
  const dh = d / h;
  const emb = embeddings(V, d, 1401);
  return recordOrtSession(
    source,
    opts,
    kvStepModel(d, h, opts.ff, V, layers),
    async (session, recording) => {
      for (const [si, [n, tokens]] of opts.seqs.entries()) {
        let past: Record<string, InstanceType<typeof ort.Tensor>> = {};
        for (let l = 0; l < layers; l++) {
          for (const kv of ["k", "v"]) {
            past[`past_${kv}${l}`] = new ort.Tensor(
              "float32",
              new Float32Array(n * h * dh),
              [n, h, 1, dh],
            );
          }
        }
        let ids = Array.from({ length: n }, (_, b) => (b * 11 + si) % V);
        for (let t = 0; t < tokens; t++) {
          recording.recorder.setTag(`seq ${si} batch ${n}`);
          const x = new Float32Array(n * d);
          ids.forEach((id, b) =>
            x.set(emb.subarray(id * d, id * d + d), b * d)
          );
          const res = await session.run({
            x: new ort.Tensor("float32", x, [n, 1, d]),
            ...past,
          });
          if (res.present_k0.dims.join() !== [n, h, t + 2, dh].join()) {
            throw new Error(`bad cache dims ${res.present_k0.dims}`);
          }
          past = {};
          for (let l = 0; l < layers; l++) {
            for (const kv of ["k", "v"]) {
              past[`past_${kv}${l}`] = res[`present_${kv}${l}`];
            }
          }
          ids = argmaxRows(res.logits.data as Float32Array, n, V);
          recording.recorder.setTag(undefined);
          recording.recorder.step(`seq ${si} token ${t} (batch ${n})`);
        }
      }
    },
  );
}
