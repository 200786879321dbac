/** Small models with random weights, written with TF.js ops (nothing downloaded). */
import type { TfjsRecording } from "./_tfjs.ts";
import { rnd, tf } from "./_tfjs.ts";
type T = tf.Tensor;
type T4 = tf.Tensor4D;

/** MobileNetV2-like inference: stem, inverted residual blocks (expand, depthwise, project), head. */
export async function mobilenet(
  rec: TfjsRecording,
  opts = { passes: 3, size: 96, batch: 1 },
): Promise<void> {
  const tag = (t: string | undefined) => rec.recording.recorder.setTag(t);
  tag("weights");
  const cfg: [number, number, number, number][] = [ // expand, out, repeats, stride
    [1, 16, 1, 1],
    [6, 24, 2, 2],
    [6, 32, 3, 2],
    [6, 64, 2, 2],
    [6, 96, 2, 1],
    [6, 160, 2, 2],
  ];
  const stem = rnd([3, 3, 3, 32]);
  const blocks: { e?: T; d: T; p: T; stride: number; res: boolean }[] = [];
  let cin = 32;
  for (const [x, cout, n, s] of cfg) {
    for (let i = 0; i < n; i++) {
      const hid = cin * x;
      blocks.push({
        e: x === 1 ? undefined : rnd([1, 1, cin, hid]),
        d: rnd([3, 3, hid, 1]),
        p: rnd([1, 1, hid, cout]),
        stride: i === 0 ? s : 1,
        res: i > 0 && cin === cout,
      });
      cin = cout;
    }
  }
  const headW = rnd([1, 1, cin, 320]);
  const fc = rnd([320, 100]);
  rec.step("weights");
  const relu6 = (t: T) => tf.clipByValue(t, 0, 6);
  for (let pass = 0; pass < opts.passes; pass++) {
    tag("input");
    const input = tf.randomUniform([opts.batch, opts.size, opts.size, 3]) as T4;
    const out = tf.tidy(() => {
      tag("stem");
      let x = relu6(tf.conv2d(input, stem as tf.Tensor4D, 2, "same")) as T4;
      blocks.forEach((b, i) => {
        tag(`block${i}`);
        let h = x;
        if (b.e) h = relu6(tf.conv2d(h, b.e as tf.Tensor4D, 1, "same")) as T4;
        h = relu6(
          tf.depthwiseConv2d(h, b.d as tf.Tensor4D, b.stride, "same"),
        ) as T4;
        h = tf.conv2d(h, b.p as tf.Tensor4D, 1, "same");
        x = b.res ? tf.add(x, h) : h;
      });
      tag("head");
      const y = relu6(tf.conv2d(x, headW as tf.Tensor4D, 1, "same"));
      const pooled = tf.mean(y, [1, 2]);
      return tf.softmax(tf.matMul(pooled as tf.Tensor2D, fc as tf.Tensor2D));
    });
    tag("readback");
    await out.data();
    out.dispose();
    input.dispose();
    tag(undefined);
    rec.step(`pass ${pass}`);
  }
  tf.dispose([
    stem,
    headW,
    fc,
    ...blocks.flatMap((b) => [b.e, b.d, b.p].filter((t): t is T => !!t)),
  ]);
  rec.step("disposed");
}

/** A small CNN trained a few steps with tf.variableGrads through an Adam optimizer. */
export async function cnnTraining(
  rec: TfjsRecording,
  opts = { steps: 5, batch: 8, size: 32 },
): Promise<void> {
  const tag = (t: string | undefined) => rec.recording.recorder.setTag(t);
  tag("weights");
  const v = (shape: number[]) => tf.variable(rnd(shape));
  const w1 = v([3, 3, 3, 16]), w2 = v([3, 3, 16, 32]), w3 = v([3, 3, 32, 64]);
  const fc = v([64 * (opts.size / 8) ** 2, 10]);
  const opt = tf.train.adam(1e-3);
  rec.step("weights");
  for (let s = 0; s < opts.steps; s++) {
    tag("batch");
    const x = tf.randomNormal([opts.batch, opts.size, opts.size, 3]) as T4;
    const labels = tf.oneHot(
      tf.randomUniform([opts.batch], 0, 10, "int32") as tf.Tensor1D,
      10,
    );
    tag("forward+backward");
    const loss = tf.tidy(() => {
      const { value, grads } = tf.variableGrads(() => {
        let h = tf.relu(
          tf.conv2d(x, w1 as unknown as tf.Tensor4D, 1, "same"),
        ) as T4;
        h = tf.maxPool(h, 2, 2, "same");
        h = tf.relu(
          tf.conv2d(h, w2 as unknown as tf.Tensor4D, 1, "same"),
        ) as T4;
        h = tf.maxPool(h, 2, 2, "same");
        h = tf.relu(
          tf.conv2d(h, w3 as unknown as tf.Tensor4D, 1, "same"),
        ) as T4;
        h = tf.maxPool(h, 2, 2, "same");
        const logits = tf.matMul(
          tf.reshape(h, [opts.batch, -1]) as tf.Tensor2D,
          fc as unknown as tf.Tensor2D,
        );
        return tf.losses.softmaxCrossEntropy(labels, logits) as tf.Scalar;
      });
      tag("optimizer");
      opt.applyGradients(grads as tf.NamedTensorMap as never);
      return value;
    });
    tag("readback");
    await loss.data();
    tf.dispose([loss, x, labels]);
    tag(undefined);
    rec.step(`step ${s}`);
  }
  opt.dispose();
  tf.dispose([w1, w2, w3, fc]);
  rec.step("disposed");
}

interface Layer {
  wq: T;
  wk: T;
  wv: T;
  wo: T;
  w1: T;
  w2: T;
}

function layers(n: number, d: number): Layer[] {
  return Array.from({ length: n }, () => ({
    wq: rnd([d, d]),
    wk: rnd([d, d]),
    wv: rnd([d, d]),
    wo: rnd([d, d]),
    w1: rnd([d, 4 * d]),
    w2: rnd([4 * d, d]),
  }));
}

function layerNorm(x: T): T {
  const { mean, variance } = tf.moments(x, -1, true);
  return tf.div(tf.sub(x, mean), tf.sqrt(tf.add(variance, 1e-5)));
}

function heads(x: T, n: number, h: number, d: number): T { // [n, d] -> [h, n, d/h]
  return tf.transpose(tf.reshape(x, [n, h, d / h]), [1, 0, 2]);
}

function attention(q: T, k: T, v: T, d: number, h: number, causal: boolean): T {
  let s = tf.mul(
    tf.matMul(q as tf.Tensor3D, k as tf.Tensor3D, false, true),
    1 / Math.sqrt(d / h),
  );
  if (causal) {
    const n = q.shape[1]!, m = k.shape[1]!;
    const mask = tf.linalg.bandPart(tf.ones([n, m]), -1, m - n);
    s = tf.add(s, tf.mul(tf.sub(1, mask), -1e9));
  }
  return tf.matMul(tf.softmax(s) as tf.Tensor3D, v as tf.Tensor3D);
}

/** An encoder run over batches whose sequence length changes every pass. */
export async function transformerVarLen(
  rec: TfjsRecording,
  opts = { d: 128, h: 4, layers: 2, lengths: [16, 48, 32, 64, 24, 40, 8, 56] },
): Promise<void> {
  const tag = (t: string | undefined) => rec.recording.recorder.setTag(t);
  const { d, h } = opts;
  tag("weights");
  const ls = layers(opts.layers, d);
  rec.step("weights");
  for (const [i, n] of opts.lengths.entries()) {
    tag("embed");
    const x0 = tf.randomNormal([n, d]);
    const out = tf.tidy(() => {
      let x = x0;
      ls.forEach((l, li) => {
        tag(`layer${li}.attn`);
        const y = layerNorm(x);
        const q = heads(
          tf.matMul(y as tf.Tensor2D, l.wq as tf.Tensor2D),
          n,
          h,
          d,
        );
        const k = heads(
          tf.matMul(y as tf.Tensor2D, l.wk as tf.Tensor2D),
          n,
          h,
          d,
        );
        const v = heads(
          tf.matMul(y as tf.Tensor2D, l.wv as tf.Tensor2D),
          n,
          h,
          d,
        );
        const a = tf.reshape(
          tf.transpose(attention(q, k, v, d, h, false), [1, 0, 2]),
          [n, d],
        );
        x = tf.add(x, tf.matMul(a as tf.Tensor2D, l.wo as tf.Tensor2D));
        tag(`layer${li}.mlp`);
        const z = layerNorm(x);
        x = tf.add(
          x,
          tf.matMul(
            tf.relu(
              tf.matMul(z as tf.Tensor2D, l.w1 as tf.Tensor2D),
            ) as tf.Tensor2D,
            l.w2 as tf.Tensor2D,
          ),
        );
      });
      return tf.mean(x, 0);
    });
    tag("readback");
    await out.data();
    tf.dispose([out, x0]);
    tag(undefined);
    rec.step(`seq ${n} (pass ${i})`);
  }
  tf.dispose(ls.flatMap((l) => Object.values(l)));
  rec.step("disposed");
}

/** Autoregressive decoding with a per-layer KV cache that grows by one row a token. */
export async function kvDecode(
  rec: TfjsRecording,
  opts = { d: 128, h: 4, layers: 2, prompt: 8, tokens: 40 },
): Promise<void> {
  const tag = (t: string | undefined) => rec.recording.recorder.setTag(t);
  const { d, h } = opts;
  tag("weights");
  const ls = layers(opts.layers, d);
  const unembed = rnd([d, 256]);
  rec.step("weights");
  let kc: T[] = ls.map(() => tf.zeros([h, 0, d / h]));
  let vc: T[] = ls.map(() => tf.zeros([h, 0, d / h]));
  let x0: T = tf.randomNormal([opts.prompt, d]);
  for (let s = 0; s <= opts.tokens; s++) {
    const n = x0.shape[0]!;
    const nk: T[] = [], nv: T[] = [];
    const logits = tf.tidy(() => {
      let x = x0;
      ls.forEach((l, li) => {
        tag(`layer${li}.attn`);
        const y = layerNorm(x);
        const q = heads(
          tf.matMul(y as tf.Tensor2D, l.wq as tf.Tensor2D),
          n,
          h,
          d,
        );
        tag(`layer${li}.kv-cache`);
        const k = tf.keep(
          tf.concat([
            kc[li],
            heads(tf.matMul(y as tf.Tensor2D, l.wk as tf.Tensor2D), n, h, d),
          ], 1),
        );
        const v = tf.keep(
          tf.concat([
            vc[li],
            heads(tf.matMul(y as tf.Tensor2D, l.wv as tf.Tensor2D), n, h, d),
          ], 1),
        );
        nk.push(k);
        nv.push(v);
        tag(`layer${li}.attn`);
        const a = tf.reshape(
          tf.transpose(attention(q, k, v, d, h, true), [1, 0, 2]),
          [n, d],
        );
        x = tf.add(x, tf.matMul(a as tf.Tensor2D, l.wo as tf.Tensor2D));
        tag(`layer${li}.mlp`);
        const z = layerNorm(x);
        x = tf.add(
          x,
          tf.matMul(
            tf.relu(
              tf.matMul(z as tf.Tensor2D, l.w1 as tf.Tensor2D),
            ) as tf.Tensor2D,
            l.w2 as tf.Tensor2D,
          ),
        );
      });
      tag("logits");
      return tf.matMul(
        tf.slice(x, [n - 1, 0], [1, d]) as tf.Tensor2D,
        unembed as tf.Tensor2D,
      );
    });
    tf.dispose([...kc, ...vc, x0]);
    kc = nk;
    vc = nv;
    tag("sample");
    const next = (await tf.argMax(logits, 1).data())[0];
    logits.dispose();
    tag("embed");
    x0 = tf.randomNormal([1, d], 0, 1, "float32", next);
    tag(undefined);
    rec.step(s === 0 ? "prefill" : `token ${s}`);
  }
  tf.dispose([
    ...kc,
    ...vc,
    x0,
    unembed,
    ...ls.flatMap((l) => Object.values(l)),
  ]);
  rec.step("disposed");
}
