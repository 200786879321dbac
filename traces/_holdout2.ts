/**
 * The second hold-out set: workloads unlike the first twelve traces (a
 * diffusion-style denoising loop, sequence-to-sequence greedy decoding with
 * cross attention, an EfficientNet-like network at interleaved input
 * resolutions, a conv+GRU training loop with gradient accumulation and a
 * memory bank kept across steps by manual `dispose()`). Random seeded
 * weights, TF.js ops only, nothing downloaded; recorded without showing them
 * to the engineers who change allot's pools, and no policy tuned on them.
 */
import type { TfjsRecording } from "./_tfjs.ts";
import { rnd, tagger, tf } from "./_tfjs.ts";
type T = tf.Tensor;
type T4 = tf.Tensor4D;
type T3 = tf.Tensor3D;
type T2 = tf.Tensor2D;

const swish = (x: T) => tf.mul(x, tf.sigmoid(x));

/** A sinusoidal timestep embedding `[batch, dim]` (made on the CPU, uploaded). */
function timestepEmbedding(t: number, batch: number, dim: number): T2 {
  const e = new Float32Array(batch * dim);
  for (let b = 0; b < batch; b++) {
    for (let i = 0; i < dim / 2; i++) {
      const f = t / 10000 ** (2 * i / dim);
      e[b * dim + i] = Math.sin(f);
      e[b * dim + dim / 2 + i] = Math.cos(f);
    }
  }
  return tf.tensor2d(e, [batch, dim]);
}

/**
 * A diffusion-style denoising loop: a small U-Net (two levels, skip
 * concatenations, nearest-neighbour upsampling, swish) conditioned on a
 * sinusoidal timestep embedding through a small MLP, called `steps` times
 * per sample; the latent `x` is kept across steps and the old one disposed
 * by hand. Inference, batch 1 then batch 2.
 */
export async function diffusionDenoise(
  rec: TfjsRecording,
  opts = { size: 32, c: 16, temb: 32, steps: 8, batches: [1, 2] },
): Promise<void> {
  const tag = tagger(rec);
  const { c, temb } = opts;
  tag("weights");
  let seed = 51;
  const w = (shape: number[], scale = 0.1) => rnd(shape, scale, seed++);
  const p = {
    t1: w([temb, 4 * c]),
    t2: w([4 * c, 2 * c]),
    tp1: w([2 * c, c]),
    tp2: w([2 * c, 2 * c]),
    cin: w([3, 3, 3, c]),
    e1: w([3, 3, c, c]),
    e2: w([3, 3, c, 2 * c]),
    mid: w([3, 3, 2 * c, 2 * c]),
    d2: w([3, 3, 4 * c, 2 * c]),
    d1: w([3, 3, 3 * c, c]),
    out: w([3, 3, c, 3], 0.05),
  };
  rec.step("weights");
  const conv = (x: T, f: T) => tf.conv2d(x as T4, f as T4, 1, "same");
  const S = opts.size;
  for (const n of opts.batches) {
    tag("noise");
    let x = tf.randomNormal([n, S, S, 3], 0, 1, "float32", 600 + n) as T4;
    for (let s = opts.steps - 1; s >= 0; s--) {
      const tEmb = timestepEmbedding((s + 1) * 100, n, temb);
      const next = tf.tidy(() => {
        tag("time-mlp");
        const t = swish(
          tf.matMul(swish(tf.matMul(tEmb, p.t1 as T2)) as T2, p.t2 as T2),
        );
        const t1 = tf.reshape(tf.matMul(t as T2, p.tp1 as T2), [n, 1, 1, c]);
        const t2 = tf.reshape(tf.matMul(t as T2, p.tp2 as T2), [
          n,
          1,
          1,
          2 * c,
        ]);
        tag("down");
        const h0 = conv(x, p.cin);
        const h1 = swish(tf.add(conv(h0, p.e1), t1));
        const h2 = swish(
          tf.add(conv(tf.avgPool(h1 as T4, 2, 2, "same"), p.e2), t2),
        );
        tag("mid");
        const m = swish(conv(tf.avgPool(h2 as T4, 2, 2, "same"), p.mid));
        tag("up");
        const u2 = swish(conv(
          tf.concat([
            tf.image.resizeNearestNeighbor(m as T4, [S / 2, S / 2]),
            h2,
          ], 3),
          p.d2,
        ));
        const u1 = swish(conv(
          tf.concat([tf.image.resizeNearestNeighbor(u2 as T4, [S, S]), h1], 3),
          p.d1,
        ));
        const eps = conv(u1, p.out);
        tag("update");
        const alpha = 1 - 0.02 * (s + 1);
        let y = tf.mul(tf.sub(x, tf.mul(eps, 1 - alpha)), 1 / Math.sqrt(alpha));
        if (s > 0) {
          y = tf.add(
            y,
            tf.randomNormal([n, S, S, 3], 0, 0.1, "float32", 700 + 10 * n + s),
          );
        }
        return y as T4;
      });
      tEmb.dispose();
      x.dispose();
      x = next;
      tag(undefined);
      rec.step(`batch ${n} step ${s}`);
    }
    tag("readback");
    await x.data();
    x.dispose();
    tag(undefined);
    rec.step(`batch ${n} done`);
  }
  tf.dispose(Object.values(p));
  rec.step("disposed");
}

/**
 * Sequence-to-sequence greedy decoding: a 2-layer encoder runs once over the
 * source, each decoder layer projects the memory to cross-attention K/V once
 * per sentence, then tokens are decoded one at a time with a self-attention
 * KV cache grown by `tf.concat` (the old cache disposed by hand) and the
 * next token read back. Two sentences of different source lengths.
 */
export async function seq2seqDecode(
  rec: TfjsRecording,
  opts = {
    vocab: 128,
    d: 64,
    h: 4,
    layers: 2,
    sentences: [[24, 14], [12, 10]] as [number, number][],
  },
): Promise<void> {
  const tag = tagger(rec);
  const { d, h, vocab } = opts;
  const dh = d / h;
  tag("weights");
  let seed = 61;
  const w = (shape: number[]) => rnd(shape, 0.1, seed++);
  const emb = w([vocab, d]);
  const enc = Array.from({ length: opts.layers }, () => ({
    wqkv: w([d, 3 * d]),
    wo: w([d, d]),
    w1: w([d, 2 * d]),
    w2: w([2 * d, d]),
  }));
  const dec = Array.from({ length: opts.layers }, () => ({
    wqkv: w([d, 3 * d]),
    wo: w([d, d]),
    cq: w([d, d]),
    ckv: w([d, 2 * d]),
    co: w([d, d]),
    w1: w([d, 2 * d]),
    w2: w([2 * d, d]),
  }));
  const out = w([d, vocab]);
  rec.step("weights");
  const norm = (x: T) => {
    const { mean, variance } = tf.moments(x, -1, true);
    return tf.div(tf.sub(x, mean), tf.sqrt(tf.add(variance, 1e-5)));
  };
  const heads = (x: T, n: number) =>
    tf.transpose(tf.reshape(x, [n, h, dh]), [1, 0, 2]) as T3; // [h, n, dh]
  const merge = (x: T, n: number) =>
    tf.reshape(tf.transpose(x, [1, 0, 2]), [n, d]) as T2;
  const attend = (q: T3, k: T3, v: T3, n: number) =>
    merge(
      tf.matMul(
        tf.softmax(
          tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(dh)),
        ) as T3,
        v,
      ),
      n,
    );
  for (const [si, [srcLen, tokens]] of opts.sentences.entries()) {
    tag("encoder");
    const src = Array.from(
      { length: srcLen },
      (_, i) => (i * 29 + 3 + si) % vocab,
    );
    const memory = tf.tidy(() => {
      let x = tf.gather(emb, tf.tensor1d(src, "int32")) as T2;
      for (const l of enc) {
        const [q, k, v] = tf.split(tf.matMul(norm(x) as T2, l.wqkv as T2), 3, 1)
          .map((t) => heads(t, srcLen));
        x = tf.add(x, tf.matMul(attend(q, k, v, srcLen), l.wo as T2));
        x = tf.add(
          x,
          tf.matMul(
            tf.relu(tf.matMul(norm(x) as T2, l.w1 as T2)) as T2,
            l.w2 as T2,
          ),
        );
      }
      return norm(x) as T2;
    });
    tag("cross-kv");
    const cross = dec.map((l) =>
      tf.tidy(() =>
        tf.split(tf.matMul(memory, l.ckv as T2), 2, 1).map((t) =>
          heads(t, srcLen)
        )
      )
    );
    memory.dispose();
    rec.step(`sentence ${si} encoded (${srcLen})`);
    const cache: { k?: T3; v?: T3 }[] = dec.map(() => ({}));
    let token = 1;
    for (let s = 0; s < tokens; s++) {
      const logits = tf.tidy(() => {
        tag("embed");
        let x = tf.gather(emb, tf.tensor1d([token], "int32")) as T2;
        dec.forEach((l, li) => {
          tag(`dec${li}.self`);
          const [q, k, v] = tf.split(
            tf.matMul(norm(x) as T2, l.wqkv as T2),
            3,
            1,
          )
            .map((t) => heads(t, 1));
          const c = cache[li];
          const K = c.k ? tf.concat([c.k, k], 1) as T3 : k;
          const V = c.v ? tf.concat([c.v, v], 1) as T3 : v;
          tf.keep(K), tf.keep(V);
          c.k?.dispose(), c.v?.dispose();
          c.k = K, c.v = V;
          x = tf.add(x, tf.matMul(attend(q, K, V, 1), l.wo as T2));
          tag(`dec${li}.cross`);
          const cq = heads(tf.matMul(norm(x) as T2, l.cq as T2), 1);
          x = tf.add(
            x,
            tf.matMul(attend(cq, cross[li][0], cross[li][1], 1), l.co as T2),
          );
          tag(`dec${li}.mlp`);
          x = tf.add(
            x,
            tf.matMul(
              tf.relu(tf.matMul(norm(x) as T2, l.w1 as T2)) as T2,
              l.w2 as T2,
            ),
          );
        });
        tag("logits");
        return tf.argMax(tf.matMul(norm(x) as T2, out as T2), 1);
      });
      tag("readback");
      token = (await logits.data())[0];
      logits.dispose();
      tag(undefined);
      rec.step(`sentence ${si} token ${s}`);
    }
    for (const c of cache) c.k?.dispose(), c.v?.dispose();
    tf.dispose(cross.flat());
    rec.step(`sentence ${si} done`);
  }
  tf.dispose([
    emb,
    out,
    ...enc.flatMap((l) => Object.values(l)),
    ...dec.flatMap((l) => Object.values(l)),
  ]);
  rec.step("disposed");
}

/**
 * EfficientNet-like inference (MBConv blocks: 1×1 expand, depthwise 3×3,
 * squeeze-and-excitation, 1×1 project, swish, residual adds) at input
 * resolutions that change and come back (64, 128, 96, 64, 128, 96, 64),
 * batch 1.
 */
export async function efficientnetMultires(
  rec: TfjsRecording,
  opts = { sizes: [64, 128, 96, 64, 128, 96, 64] },
): Promise<void> {
  const tag = tagger(rec);
  tag("weights");
  let seed = 71;
  const w = (shape: number[]) => rnd(shape, 0.1, seed++);
  // expand, out, stride
  const cfg: [number, number, number][] = [
    [1, 16, 1],
    [4, 24, 2],
    [4, 24, 1],
    [4, 40, 2],
    [4, 40, 1],
    [4, 80, 2],
    [4, 80, 1],
  ];
  const stem = w([3, 3, 3, 24]);
  const stemB = w([24]);
  let cin = 24;
  const blocks = cfg.map(([e, cout, stride]) => {
    const hid = cin * e, r = Math.max(4, cin >> 2);
    const b = {
      e: e === 1 ? undefined : w([1, 1, cin, hid]),
      dw: w([3, 3, hid, 1]),
      se1: w([hid, r]),
      se2: w([r, hid]),
      p: w([1, 1, hid, cout]),
      pb: w([cout]),
      stride,
      res: stride === 1 && cin === cout,
    };
    cin = cout;
    return b;
  });
  const head = w([1, 1, cin, 160]);
  const fc = w([160, 10]);
  rec.step("weights");
  for (const [pass, S] of opts.sizes.entries()) {
    tag("input");
    const input = tf.randomUniform(
      [1, S, S, 3],
      0,
      1,
      "float32",
      800 + pass,
    ) as T4;
    const y = tf.tidy(() => {
      tag("stem");
      let x = swish(
        tf.add(tf.conv2d(input, stem as T4, 2, "same"), stemB),
      ) as T4;
      blocks.forEach((b, i) => {
        tag(`mbconv${i}`);
        let h = x;
        if (b.e) h = swish(tf.conv2d(h, b.e as T4, 1, "same")) as T4;
        h = swish(tf.depthwiseConv2d(h, b.dw as T4, b.stride, "same")) as T4;
        const se = tf.sigmoid(
          tf.matMul(
            swish(tf.matMul(tf.mean(h, [1, 2]) as T2, b.se1 as T2)) as T2,
            b.se2 as T2,
          ),
        );
        h = tf.mul(h, tf.reshape(se, [1, 1, 1, -1])) as T4;
        h = tf.add(tf.conv2d(h, b.p as T4, 1, "same"), b.pb) as T4;
        x = b.res ? tf.add(x, h) as T4 : h;
      });
      tag("head");
      const f = tf.mean(swish(tf.conv2d(x, head as T4, 1, "same")), [1, 2]);
      return tf.softmax(tf.matMul(f as T2, fc as T2));
    });
    tag("readback");
    await y.data();
    tf.dispose([y, input]);
    tag(undefined);
    rec.step(`pass ${pass} (${S}x${S})`);
  }
  tf.dispose([
    stem,
    stemB,
    head,
    fc,
    ...blocks.flatMap((b) =>
      [b.e, b.dw, b.se1, b.se2, b.p, b.pb].filter((t): t is T => !!t)
    ),
  ]);
  rec.step("disposed");
}

/**
 * A conv + GRU sequence classifier TRAINED with gradient accumulation: each
 * optimizer step runs `micro` forward+backward passes (tf.variableGrads),
 * sums their gradients into accumulators kept across the micro-batches (old
 * sums disposed by hand, no tf.tidy around them), then one Adam step on the
 * mean. A memory bank of the last `bank` pooled features (kept across steps,
 * the oldest disposed by hand) enters each loss as a constant.
 */
export async function crnnGradAccum(
  rec: TfjsRecording,
  opts = {
    time: 8,
    features: 16,
    conv: 32,
    hidden: 32,
    classes: 8,
    batch: 4,
    micro: 3,
    steps: 2,
    bank: 4,
  },
): Promise<void> {
  const tag = tagger(rec);
  const { time: T_, features: F, conv: C, hidden: H, batch: B } = opts;
  tag("weights");
  let seed = 81;
  const v = (shape: number[]) => tf.variable(rnd(shape, 0.1, seed++));
  const p: Record<string, tf.Variable> = {
    conv: v([3, F, C]),
    wz: v([C, H]),
    uz: v([H, H]),
    wr: v([C, H]),
    ur: v([H, H]),
    wh: v([C, H]),
    uh: v([H, H]),
    out: v([H, opts.classes]),
  };
  const opt = tf.train.adam(1e-3);
  const bank: T2[] = [];
  rec.step("weights");
  let micro = 0;
  for (let s = 0; s < opts.steps; s++) {
    let acc: Record<string, T> | undefined;
    for (let m = 0; m < opts.micro; m++, micro++) {
      tag("batch");
      const x = tf.randomNormal([B, T_, F], 0, 1, "float32", 900 + micro) as T3;
      const labels = tf.oneHot(
        tf.tensor1d(
          Array.from({ length: B }, (_, i) => (i * 3 + micro) % opts.classes),
          "int32",
        ),
        opts.classes,
      );
      const bankT = bank.length ? tf.concat(bank, 0) : undefined;
      tag("forward+backward");
      const { value, grads } = tf.variableGrads(() => {
        const f = tf.relu(
          tf.conv1d(x, p.conv as unknown as T3, 1, "same"),
        ) as T3;
        const steps = tf.unstack(f, 1) as T2[];
        let hs: T2 = tf.zeros([B, H]);
        for (const xt of steps) {
          const z = tf.sigmoid(
            tf.add(tf.matMul(xt, p.wz as T2), tf.matMul(hs, p.uz as T2)),
          );
          const r = tf.sigmoid(
            tf.add(tf.matMul(xt, p.wr as T2), tf.matMul(hs, p.ur as T2)),
          );
          const c = tf.tanh(
            tf.add(
              tf.matMul(xt, p.wh as T2),
              tf.matMul(tf.mul(r, hs) as T2, p.uh as T2),
            ),
          );
          hs = tf.add(tf.mul(tf.sub(1, z), hs), tf.mul(z, c)) as T2;
        }
        let loss = tf.losses.softmaxCrossEntropy(
          labels,
          tf.matMul(hs, p.out as T2),
        ) as T;
        if (bankT) {
          loss = tf.add(
            loss,
            tf.mul(tf.mean(tf.square(tf.matMul(hs, bankT, false, true))), 0.01),
          );
        }
        tag("bank");
        const feat = tf.keep(tf.mean(hs, 0, true) as T2);
        bank.push(feat);
        return loss as tf.Scalar;
      });
      if (bank.length > opts.bank) bank.shift()!.dispose();
      tag("accumulate");
      if (!acc) acc = grads;
      else {
        const sums: Record<string, T> = {};
        for (const k of Object.keys(grads)) {
          sums[k] = tf.add(acc[k], grads[k]);
          acc[k].dispose();
          grads[k].dispose();
        }
        acc = sums;
      }
      tag("readback");
      await value.data();
      tf.dispose([value, x, labels]);
      bankT?.dispose();
      tag(undefined);
      rec.step(`step ${s} micro ${m}`);
    }
    tag("optimizer");
    const mean: Record<string, T> = {};
    for (const k of Object.keys(acc!)) {
      mean[k] = tf.div(acc![k], opts.micro);
      acc![k].dispose();
    }
    opt.applyGradients(mean as tf.NamedTensorMap as never);
    tf.dispose(Object.values(mean));
    tag(undefined);
    rec.step(`step ${s} update`);
  }
  opt.dispose();
  tf.dispose([...bank, ...Object.values(p)]);
  rec.step("disposed");
}

/**
 * Keras-style training through `tf.layers`' own loop: `model.fit` (conv,
 * batch normalization, dropout, dense; Adam; 20% held out for validation),
 * 40 training samples in batches of 16, 16 and 8 (the last one partial), 2 epochs, a
 * step mark at every batch's end from the fit callbacks, then `evaluate`.
 */
export async function layersFit(
  rec: TfjsRecording,
  opts = { size: 16, samples: 50, batch: 16, epochs: 2, classes: 5 },
): Promise<void> {
  const tag = tagger(rec);
  const { size: S, classes } = opts;
  tag("weights");
  const init = (seed: number) => tf.initializers.glorotUniform({ seed });
  const model = tf.sequential({
    layers: [
      tf.layers.conv2d({
        inputShape: [S, S, 3],
        filters: 16,
        kernelSize: 3,
        padding: "same",
        kernelInitializer: init(91),
      }),
      tf.layers.batchNormalization(),
      tf.layers.activation({ activation: "relu" }),
      tf.layers.maxPooling2d({ poolSize: 2 }),
      tf.layers.conv2d({
        filters: 32,
        kernelSize: 3,
        padding: "same",
        activation: "relu",
        kernelInitializer: init(92),
      }),
      tf.layers.globalAveragePooling2d({}),
      tf.layers.dropout({ rate: 0.25, seed: 93 }),
      tf.layers.dense({
        units: classes,
        activation: "softmax",
        kernelInitializer: init(94),
      }),
    ],
  });
  model.compile({
    optimizer: tf.train.adam(1e-3),
    loss: "categoricalCrossentropy",
    metrics: ["accuracy"],
  });
  rec.step("weights");
  tag("data");
  const xs = tf.randomUniform([opts.samples, S, S, 3], 0, 1, "float32", 95);
  const ys = tf.oneHot(
    tf.tensor1d(
      Array.from({ length: opts.samples }, (_, i) => (i * 7) % classes),
      "int32",
    ),
    classes,
  );
  rec.step("data");
  let batches = 0;
  tag("fit");
  await model.fit(xs, ys, {
    batchSize: opts.batch,
    epochs: opts.epochs,
    shuffle: false,
    validationSplit: 0.2,
    verbose: 0,
    callbacks: {
      onBatchEnd: () => {
        tag(undefined);
        rec.step(`batch ${batches++}`);
        tag("fit");
      },
      onEpochEnd: (epoch) => {
        tag(undefined);
        rec.step(`epoch ${epoch} end`);
        tag("fit");
      },
    },
  });
  tag("evaluate");
  const scores = model.evaluate(xs, ys, { batchSize: opts.batch }) as T[];
  await Promise.all(scores.map((t) => t.data()));
  tf.dispose(scores);
  tag(undefined);
  rec.step("evaluated");
  tf.dispose([xs, ys]);
  model.dispose();
  rec.step("disposed");
}
