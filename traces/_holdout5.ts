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
  type Bytes,
  header,
  initializers,
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
