/**
 * The hold-out workloads: shapes unlike the first six traces (recurrent
 * generation through tf.layers, a U-Net training loop with a changing batch,
 * a ResNet with a changing batch, a transformer training step with changing
 * sequence lengths, a GAN alternating two models). Random seeded weights,
 * TF.js ops and layers only, nothing downloaded; no allot policy was tuned
 * on them.
 */
import type { TfjsRecording } from "./_tfjs.ts";
import { rnd, tagger, tf } from "./_tfjs.ts";
type T = tf.Tensor;
type T4 = tf.Tensor4D;
type T2 = tf.Tensor2D;

/**
 * Text generation token by token with a tf.layers model (embedding, LSTM,
 * GRU, dense softmax): each token runs `model.predict` over the last
 * `window` tokens, so the recurrent layers unroll over a growing, then
 * sliding, window of small tensors.
 */
export async function lstmTextgen(
  rec: TfjsRecording,
  opts = { vocab: 96, embed: 32, units: 64, prompt: 4, tokens: 10, window: 6 },
): Promise<void> {
  const tag = tagger(rec);
  tag("weights");
  const init = (seed: number) =>
    tf.initializers.randomNormal({ mean: 0, stddev: 0.1, seed });
  const model = tf.sequential({
    layers: [
      tf.layers.embedding({
        inputDim: opts.vocab,
        outputDim: opts.embed,
        embeddingsInitializer: init(1),
      }),
      tf.layers.lstm({
        units: opts.units,
        returnSequences: true,
        kernelInitializer: init(2),
        recurrentInitializer: init(3),
      }),
      tf.layers.gru({
        units: opts.units,
        kernelInitializer: init(4),
        recurrentInitializer: init(5),
      }),
      tf.layers.dense({
        units: opts.vocab,
        activation: "softmax",
        kernelInitializer: init(6),
      }),
    ],
  });
  model.build([null, null]);
  rec.step("weights");
  const tokens = Array.from(
    { length: opts.prompt },
    (_, i) => (i * 37 + 11) % opts.vocab,
  );
  for (let s = 0; s < opts.tokens; s++) {
    tag("input");
    const ctx = tokens.slice(-opts.window);
    const x = tf.tensor2d([ctx], [1, ctx.length], "int32");
    tag("predict");
    const probs = model.predict(x) as T;
    tag("sample");
    const next = tf.argMax(probs, 1);
    tokens.push((await next.data())[0]);
    tf.dispose([x, probs, next]);
    tag(undefined);
    rec.step(`token ${s} (window ${ctx.length})`);
  }
  model.dispose();
  rec.step("disposed");
}

/**
 * A small U-Net (two down, two up: conv2dTranspose and nearest-neighbour
 * upsampling, skip concatenations) trained as an autoencoder with Adam on
 * batches whose size changes between steps.
 */
export async function unetTraining(
  rec: TfjsRecording,
  opts = { size: 32, batches: [4, 8, 2, 4, 8, 2] },
): Promise<void> {
  const tag = tagger(rec);
  tag("weights");
  let seed = 11;
  const v = (shape: number[]) => tf.variable(rnd(shape, 0.1, seed++));
  const w = {
    e1: v([3, 3, 3, 8]),
    e2: v([3, 3, 8, 16]),
    b: v([3, 3, 16, 32]),
    up1: v([2, 2, 16, 32]), // conv2dTranspose filter: [h, w, out, in]
    d1: v([3, 3, 32, 16]),
    d2: v([3, 3, 24, 8]),
    out: v([1, 1, 8, 3]),
  };
  const opt = tf.train.adam(1e-3);
  rec.step("weights");
  const conv = (x: T4, f: T, name: string) => {
    tag(name);
    return tf.relu(tf.conv2d(x, f as T4, 1, "same")) as T4;
  };
  for (const [s, n] of opts.batches.entries()) {
    tag("batch");
    const x = tf.randomUniform([n, opts.size, opts.size, 3]) as T4;
    tag("forward+backward");
    const loss = tf.tidy(() => {
      const { value, grads } = tf.variableGrads(() => {
        const s1 = conv(x, w.e1, "enc1");
        const p1 = tf.maxPool(s1, 2, 2, "same");
        const s2 = conv(p1, w.e2, "enc2");
        const p2 = tf.maxPool(s2, 2, 2, "same");
        const b = conv(p2, w.b, "bottleneck");
        tag("up1");
        const u1 = tf.conv2dTranspose(
          b,
          w.up1 as T4,
          [n, opts.size / 2, opts.size / 2, 16],
          2,
          "same",
        );
        const d1 = conv(tf.concat([u1, s2], 3) as T4, w.d1, "dec1");
        tag("up2");
        const u2 = tf.image.resizeNearestNeighbor(d1, [opts.size, opts.size]);
        const d2 = conv(tf.concat([u2, s1], 3) as T4, w.d2, "dec2");
        tag("out");
        const y = tf.sigmoid(tf.conv2d(d2, w.out as T4, 1, "same"));
        return tf.losses.meanSquaredError(x, y) as tf.Scalar;
      });
      tag("optimizer");
      opt.applyGradients(grads as tf.NamedTensorMap as never);
      return value;
    });
    tag("readback");
    await loss.data();
    tf.dispose([loss, x]);
    tag(undefined);
    rec.step(`step ${s} (batch ${n})`);
  }
  opt.dispose();
  tf.dispose(Object.values(w));
  rec.step("disposed");
}

/**
 * ResNet-style inference (stem, three stages of two basic blocks with batch
 * norm, residual adds and strided 1×1 projections, global pooling, dense)
 * with a batch size that changes and repeats between passes.
 */
export async function resnetVarBatch(
  rec: TfjsRecording,
  opts = { size: 64, batches: [1, 4, 8, 1, 4, 8, 1] },
): Promise<void> {
  const tag = tagger(rec);
  tag("weights");
  let seed = 21;
  const w = (shape: number[]) => rnd(shape, 0.1, seed++);
  const bn = (c: number) => ({
    mean: w([c]),
    variance: tf.add(tf.abs(w([c])), 1) as tf.Tensor1D,
    offset: w([c]),
    scale: tf.add(w([c]), 1) as tf.Tensor1D,
  });
  const stem = w([5, 5, 3, 16]);
  const stemBn = bn(16);
  const stages: {
    c1: T;
    b1: ReturnType<typeof bn>;
    c2: T;
    b2: ReturnType<typeof bn>;
    proj?: T;
    stride: number;
  }[] = [];
  let cin = 16;
  for (const cout of [16, 32, 64]) {
    for (let i = 0; i < 2; i++) {
      const stride = i === 0 && cout !== cin ? 2 : 1;
      stages.push({
        c1: w([3, 3, cin, cout]),
        b1: bn(cout),
        c2: w([3, 3, cout, cout]),
        b2: bn(cout),
        proj: stride === 2 ? w([1, 1, cin, cout]) : undefined,
        stride,
      });
      cin = cout;
    }
  }
  const fc = w([cin, 10]);
  rec.step("weights");
  const norm = (x: T4, b: ReturnType<typeof bn>) =>
    tf.batchNorm(x, b.mean, b.variance, b.offset, b.scale, 1e-5) as T4;
  for (const [pass, n] of opts.batches.entries()) {
    tag("input");
    const input = tf.randomUniform([n, opts.size, opts.size, 3]) as T4;
    const out = tf.tidy(() => {
      tag("stem");
      let x = tf.relu(norm(tf.conv2d(input, stem as T4, 2, "same"), stemBn));
      x = tf.maxPool(x as T4, 3, 2, "same");
      stages.forEach((b, i) => {
        tag(`block${i}`);
        let h = tf.relu(
          norm(tf.conv2d(x as T4, b.c1 as T4, b.stride, "same"), b.b1),
        );
        h = norm(tf.conv2d(h as T4, b.c2 as T4, 1, "same"), b.b2);
        const skip = b.proj ? tf.conv2d(x as T4, b.proj as T4, 2, "same") : x;
        x = tf.relu(tf.add(h, skip));
      });
      tag("head");
      const pooled = tf.mean(x, [1, 2]) as T2;
      return tf.softmax(tf.matMul(pooled, fc as T2));
    });
    tag("readback");
    await out.data();
    tf.dispose([out, input]);
    tag(undefined);
    rec.step(`pass ${pass} (batch ${n})`);
  }
  tf.dispose([
    stem,
    fc,
    ...Object.values(stemBn),
    ...stages.flatMap((b) => [
      b.c1,
      b.c2,
      ...Object.values(b.b1),
      ...Object.values(b.b2),
      ...(b.proj ? [b.proj] : []),
    ]),
  ]);
  rec.step("disposed");
}

/**
 * A transformer encoder TRAINING step (forward, backward through
 * tf.variableGrads, Adam) on sequences whose length changes between steps
 * (a batch of 2, causal attention, a regression loss).
 */
export async function transformerTraining(
  rec: TfjsRecording,
  opts = {
    d: 64,
    h: 4,
    layers: 2,
    batch: 2,
    lengths: [16, 32, 24, 32, 16, 24],
  },
): Promise<void> {
  const tag = tagger(rec);
  const { d, h, batch: b } = opts;
  tag("weights");
  let seed = 31;
  const v = (shape: number[]) => tf.variable(rnd(shape, 0.1, seed++));
  const ls = Array.from({ length: opts.layers }, () => ({
    wqkv: v([d, 3 * d]),
    wo: v([d, d]),
    w1: v([d, 4 * d]),
    w2: v([4 * d, d]),
  }));
  const opt = tf.train.adam(1e-3);
  rec.step("weights");
  const layerNorm = (x: T) => {
    const { mean, variance } = tf.moments(x, -1, true);
    return tf.div(tf.sub(x, mean), tf.sqrt(tf.add(variance, 1e-5)));
  };
  // [b*n, d] -> [b*h, n, d/h]
  const split = (x: T, n: number) =>
    tf.reshape(
      tf.transpose(tf.reshape(x, [b, n, h, d / h]), [0, 2, 1, 3]),
      [b * h, n, d / h],
    );
  for (const [s, n] of opts.lengths.entries()) {
    tag("batch");
    const x0 = tf.randomNormal([b * n, d], 0, 1, "float32", 100 + s);
    const target = tf.randomNormal([b * n, d], 0, 1, "float32", 200 + s);
    const mask = tf.mul(
      tf.sub(1, tf.linalg.bandPart(tf.ones([n, n]), -1, 0)),
      -1e9,
    );
    tag("forward+backward");
    const loss = tf.tidy(() => {
      const { value, grads } = tf.variableGrads(() => {
        let x = x0;
        ls.forEach((l, li) => {
          tag(`layer${li}.attn`);
          const qkv = tf.matMul(layerNorm(x) as T2, l.wqkv as unknown as T2);
          const [q, k, vv] = tf.split(qkv, 3, 1).map((t) => split(t, n));
          const att = tf.softmax(
            tf.add(
              tf.mul(
                tf.matMul(q as tf.Tensor3D, k as tf.Tensor3D, false, true),
                1 / Math.sqrt(d / h),
              ),
              mask,
            ),
          );
          const a = tf.reshape(
            tf.transpose(
              tf.reshape(tf.matMul(att as tf.Tensor3D, vv as tf.Tensor3D), [
                b,
                h,
                n,
                d / h,
              ]),
              [0, 2, 1, 3],
            ),
            [b * n, d],
          );
          x = tf.add(x, tf.matMul(a as T2, l.wo as unknown as T2));
          tag(`layer${li}.mlp`);
          x = tf.add(
            x,
            tf.matMul(
              tf.relu(
                tf.matMul(layerNorm(x) as T2, l.w1 as unknown as T2),
              ) as T2,
              l.w2 as unknown as T2,
            ),
          );
        });
        return tf.losses.meanSquaredError(target, x) as tf.Scalar;
      });
      tag("optimizer");
      opt.applyGradients(grads as tf.NamedTensorMap as never);
      return value;
    });
    tag("readback");
    await loss.data();
    tf.dispose([loss, x0, target, mask]);
    tag(undefined);
    rec.step(`step ${s} (seq ${n})`);
  }
  opt.dispose();
  tf.dispose(ls.flatMap((l) => Object.values(l)));
  rec.step("disposed");
}

/**
 * A GAN on 28×28 images: dense generator and discriminator, each step one
 * discriminator update (real and generated batch) then one generator update,
 * two Adam optimizers alternating.
 */
export async function ganStep(
  rec: TfjsRecording,
  opts = { latent: 32, hidden: 128, image: 784, batch: 16, steps: 6 },
): Promise<void> {
  const tag = tagger(rec);
  const { latent, hidden, image, batch } = opts;
  tag("weights");
  let seed = 41;
  const v = (shape: number[]) => tf.variable(rnd(shape, 0.05, seed++));
  const g = {
    w1: v([latent, hidden]),
    b1: tf.variable(tf.zeros([hidden])),
    w2: v([hidden, 2 * hidden]),
    b2: tf.variable(tf.zeros([2 * hidden])),
    w3: v([2 * hidden, image]),
  };
  const dsc = {
    w1: v([image, 2 * hidden]),
    b1: tf.variable(tf.zeros([2 * hidden])),
    w2: v([2 * hidden, hidden]),
    w3: v([hidden, 1]),
  };
  const gOpt = tf.train.adam(2e-4, 0.5);
  const dOpt = tf.train.adam(2e-4, 0.5);
  rec.step("weights");
  const generate = (z: T) => {
    tag("generator");
    const h1 = tf.leakyRelu(tf.add(tf.matMul(z as T2, g.w1 as T2), g.b1), 0.2);
    const h2 = tf.leakyRelu(tf.add(tf.matMul(h1 as T2, g.w2 as T2), g.b2), 0.2);
    return tf.tanh(tf.matMul(h2 as T2, g.w3 as T2));
  };
  const discriminate = (x: T) => {
    tag("discriminator");
    const h1 = tf.leakyRelu(
      tf.add(tf.matMul(x as T2, dsc.w1 as T2), dsc.b1),
      0.2,
    );
    const h2 = tf.leakyRelu(tf.matMul(h1 as T2, dsc.w2 as T2), 0.2);
    return tf.matMul(h2 as T2, dsc.w3 as T2);
  };
  const bce = (logits: T, label: number) =>
    tf.losses.sigmoidCrossEntropy(tf.fill(logits.shape, label), logits);
  for (let s = 0; s < opts.steps; s++) {
    tag("batch");
    const real = tf.randomUniform([batch, image], -1, 1, "float32", 300 + s);
    const z1 = tf.randomNormal([batch, latent], 0, 1, "float32", 400 + s);
    const z2 = tf.randomNormal([batch, latent], 0, 1, "float32", 500 + s);
    const dLoss = tf.tidy(() => {
      const { value, grads } = tf.variableGrads(
        () =>
          tf.add(
            bce(discriminate(real), 1),
            bce(discriminate(generate(z1)), 0),
          ) as tf.Scalar,
        Object.values(dsc),
      );
      tag("d.optimizer");
      dOpt.applyGradients(grads as tf.NamedTensorMap as never);
      return value;
    });
    const gLoss = tf.tidy(() => {
      const { value, grads } = tf.variableGrads(
        () => bce(discriminate(generate(z2)), 1) as tf.Scalar,
        Object.values(g),
      );
      tag("g.optimizer");
      gOpt.applyGradients(grads as tf.NamedTensorMap as never);
      return value;
    });
    tag("readback");
    await Promise.all([dLoss.data(), gLoss.data()]);
    tf.dispose([dLoss, gLoss, real, z1, z2]);
    tag(undefined);
    rec.step(`step ${s}`);
  }
  gOpt.dispose();
  dOpt.dispose();
  tf.dispose([...Object.values(g), ...Object.values(dsc)]);
  rec.step("disposed");
}
