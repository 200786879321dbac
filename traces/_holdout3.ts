/**
 * The third hold-out set: workloads unlike the first eighteen traces (beam
 * search with KV caches reordered by `tf.gather` after `tf.topk`, a VAE
 * training loop with sampling passes, a ViT-style classifier at changing
 * batch sizes, a detector with a feature pyramid and an async
 * non-max-suppression readback in the middle of each step; onnxruntime-web
 * on a U-Net-like graph at changing image sizes and on a GRU decoder cell
 * run token by token with the batch changing per sequence). Random seeded
 * weights, nothing downloaded; recorded without showing them to the
 * engineers who change allot's pools, and no policy tuned on them.
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
type T1 = tf.Tensor1D;

/** Layer norm over the last axis (no affine). */
const norm = (x: T) => {
  const { mean, variance } = tf.moments(x, -1, true);
  return tf.div(tf.sub(x, mean), tf.sqrt(tf.add(variance, 1e-5)));
};
/** GELU, sigmoid approximation. */
const gelu = (x: T) => tf.mul(x, tf.sigmoid(tf.mul(x, 1.702)));

/**
 * Beam-search decoding with a 2-layer decoder (d 64, 4 heads): the prompt
 * runs once per beam with a causal mask, then each step takes the top
 * `beam` continuations over all beams (`tf.topk` on the flattened log
 * probabilities plus the beams' scores), reorders every layer's K/V cache
 * by the winning beams (`tf.gather` on the beam axis, the old cache
 * disposed by hand), grows it by `tf.concat`, and reads the chosen tokens
 * back. Two sentences: (prompt, steps, beams) (6, 12, 4) and (10, 8, 3).
 */
export async function beamSearch(
  rec: TfjsRecording,
  opts = {
    vocab: 96,
    d: 64,
    h: 4,
    layers: 2,
    sentences: [[6, 12, 4], [10, 8, 3]] as [number, number, number][],
  },
): Promise<void> {
  const tag = tagger(rec);
  const { d, h, vocab } = opts;
  const dh = d / h;
  tag("weights");
  let seed = 101;
  const w = (shape: number[]) => rnd(shape, 0.1, seed++);
  const emb = w([vocab, d]);
  const pos = w([32, d]);
  const layers = Array.from({ length: opts.layers }, () => ({
    wqkv: w([d, 3 * d]),
    wo: w([d, d]),
    w1: w([d, 2 * d]),
    w2: w([2 * d, d]),
  }));
  const out = w([d, vocab]);
  rec.step("weights");
  // [B, t, d] -> [B, h, t, dh]
  const heads = (x: T, b: number, t: number) =>
    tf.transpose(tf.reshape(x, [b, t, h, dh]), [0, 2, 1, 3]) as T4;
  const merge = (x: T, b: number, t: number) =>
    tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [b * t, d]) as T2;
  /** One pass over `t` new positions; returns the new hidden `[B*t, d]`. */
  const block = (
    x: T2,
    b: number,
    t: number,
    cache: { k?: T4; v?: T4 }[],
    mask?: T,
  ): T2 => {
    layers.forEach((l, li) => {
      tag(`layer${li}.attn`);
      const [q, k, v] = tf.split(tf.matMul(norm(x) as T2, l.wqkv as T2), 3, 1)
        .map((y) => heads(y, b, t));
      const c = cache[li];
      const K = c.k ? tf.concat([c.k, k], 2) as T4 : k;
      const V = c.v ? tf.concat([c.v, v], 2) as T4 : v;
      c.k = K, c.v = V; // the caller keeps and disposes them
      let s = tf.mul(tf.matMul(q, K, false, true), 1 / Math.sqrt(dh));
      if (mask) s = tf.add(s, mask);
      const o = merge(tf.matMul(tf.softmax(s), V), b, t);
      x = tf.add(x, tf.matMul(o, l.wo as T2));
      tag(`layer${li}.mlp`);
      x = tf.add(
        x,
        tf.matMul(gelu(tf.matMul(norm(x) as T2, l.w1 as T2)) as T2, l.w2 as T2),
      );
    });
    return x;
  };
  for (const [si, [P, steps, B]] of opts.sentences.entries()) {
    const prompt = Array.from(
      { length: P },
      (_, i) => (i * 17 + 5 + si) % vocab,
    );
    tag("prompt");
    let cache: { k?: T4; v?: T4 }[] = layers.map(() => ({}));
    const first = tf.tidy(() => {
      const ids = tf.tensor1d(
        Array.from({ length: B }, () => prompt).flat(),
        "int32",
      );
      const x = tf.add(
        tf.reshape(tf.gather(emb, ids), [B, P, d]),
        tf.slice(pos, [0, 0], [P, d]),
      );
      const band = tf.linalg.bandPart(tf.ones([P, P]), -1, 0);
      const mask = tf.mul(tf.sub(1, band), -1e9);
      const c: { k?: T4; v?: T4 }[] = layers.map(() => ({}));
      const y = block(tf.reshape(x, [B * P, d]) as T2, B, P, c, mask);
      const last = tf.reshape(
        tf.slice(tf.reshape(y, [B, P, d]), [0, P - 1, 0], [B, 1, d]),
        [B, d],
      );
      tag("logits");
      // all beams equal: start from beam 0 only (the others at -inf)
      const logp = tf.logSoftmax(tf.matMul(norm(last) as T2, out as T2));
      const start = tf.tensor2d(
        Array.from({ length: B }, (_, i) => i ? -1e9 : 0),
        [B, 1],
      );
      return { c, logp, start };
    });
    cache = first.c;
    let logp: T = first.logp;
    let scores: T = first.start;
    rec.step(`sentence ${si} prompt (${P}, beam ${B})`);
    for (let s = 0; s < steps; s++) {
      tag("topk");
      const picked = tf.tidy(() => {
        const total = tf.reshape(tf.add(logp, scores), [B * vocab]);
        const { values, indices } = tf.topk(total, B);
        const V = tf.scalar(vocab, "int32");
        const beam = tf.floorDiv(indices, V) as T1;
        const token = tf.mod(indices, V) as T1;
        tag("reorder");
        const reordered = cache.map((c) => ({
          k: tf.gather(c.k!, beam, 0) as T4,
          v: tf.gather(c.v!, beam, 0) as T4,
        }));
        return { values: tf.reshape(values, [B, 1]), token, reordered };
      });
      for (const c of cache) c.k!.dispose(), c.v!.dispose();
      tf.dispose([logp, scores]);
      cache = picked.reordered;
      scores = picked.values;
      tag("readback");
      const tokens = await picked.token.data();
      tag("step");
      const next = tf.tidy(() => {
        const x = tf.add(
          tf.gather(emb, picked.token),
          tf.slice(pos, [P + s, 0], [1, d]),
        ) as T2;
        const c: { k?: T4; v?: T4 }[] = cache.map((c) => ({ ...c }));
        const y = block(x, B, 1, c);
        tag("logits");
        return {
          c,
          logp: tf.logSoftmax(tf.matMul(norm(y) as T2, out as T2)),
        };
      });
      for (const c of cache) c.k!.dispose(), c.v!.dispose();
      picked.token.dispose();
      cache = next.c;
      logp = next.logp;
      tag(undefined);
      rec.step(`sentence ${si} step ${s} (token ${tokens[0]})`);
    }
    tag("final");
    const best = tf.tidy(() => tf.argMax(tf.reshape(scores, [B])));
    await best.data();
    tf.dispose([best, logp, scores]);
    for (const c of cache) c.k!.dispose(), c.v!.dispose();
    tag(undefined);
    rec.step(`sentence ${si} done`);
  }
  tf.dispose([emb, pos, out, ...layers.flatMap((l) => Object.values(l))]);
  rec.step("disposed");
}

/**
 * A variational autoencoder TRAINED on 784-pixel binary images (dense
 * encoder to a mean and a log-variance, reparameterised sample, dense
 * decoder; binary cross-entropy plus KL; Adam via `optimizer.minimize`),
 * the batch changing every step (32, 16, 32, 8, 24, 16, 32, 8); every
 * second step also decodes 6 samples from the prior and reads them back.
 */
export async function vaeTraining(
  rec: TfjsRecording,
  opts = {
    pixels: 784,
    hidden: 256,
    latent: 16,
    batches: [32, 16, 32, 8, 24, 16, 32, 8],
    samples: 6,
  },
): Promise<void> {
  const tag = tagger(rec);
  const { pixels: D, hidden: H, latent: Z } = opts;
  tag("weights");
  let seed = 111;
  const v = (shape: number[], scale = 0.05) =>
    tf.variable(
      shape.length === 1 ? tf.zeros(shape) : rnd(shape, scale, seed++),
    );
  const p = {
    we: v([D, H]),
    be: v([H]),
    wmu: v([H, Z]),
    bmu: v([Z]),
    wlv: v([H, Z]),
    blv: v([Z]),
    wd1: v([Z, H]),
    bd1: v([H]),
    wd2: v([H, D]),
    bd2: v([D]),
  };
  const opt = tf.train.adam(1e-3);
  const decode = (z: T) =>
    tf.add(
      tf.matMul(
        tf.relu(tf.add(tf.matMul(z as T2, p.wd1), p.bd1)) as T2,
        p.wd2,
      ),
      p.bd2,
    );
  rec.step("weights");
  for (const [s, n] of opts.batches.entries()) {
    tag("batch");
    const x = tf.tidy(() =>
      tf.step(tf.randomUniform([n, D], -0.5, 0.5, "float32", 1200 + s))
    );
    tag("train");
    const cost = opt.minimize(() => {
      tag("encode");
      const h = tf.relu(tf.add(tf.matMul(x as T2, p.we), p.be)) as T2;
      const mu = tf.add(tf.matMul(h, p.wmu), p.bmu);
      const lv = tf.add(tf.matMul(h, p.wlv), p.blv);
      tag("sample");
      const eps = tf.randomNormal([n, Z], 0, 1, "float32", 1300 + s);
      const z = tf.add(mu, tf.mul(tf.exp(tf.mul(lv, 0.5)), eps));
      tag("decode");
      const logits = decode(z);
      tag("loss");
      const recon = tf.mean(
        tf.sum(
          tf.sub(
            tf.add(tf.relu(logits), tf.log1p(tf.exp(tf.neg(tf.abs(logits))))),
            tf.mul(logits, x),
          ),
          1,
        ),
      );
      const kl = tf.mean(tf.mul(
        tf.sum(tf.sub(tf.sub(tf.add(lv, 1), tf.square(mu)), tf.exp(lv)), 1),
        -0.5,
      ));
      return tf.add(recon, kl) as tf.Scalar;
    }, true)!;
    tag("readback");
    await cost.data();
    tf.dispose([cost, x]);
    tag(undefined);
    rec.step(`step ${s} (batch ${n})`);
    if (s % 2 === 1) {
      tag("prior-sample");
      const img = tf.tidy(() =>
        tf.sigmoid(
          decode(
            tf.randomNormal([opts.samples, Z], 0, 1, "float32", 1400 + s),
          ),
        )
      );
      await img.data();
      img.dispose();
      tag(undefined);
      rec.step(`step ${s} samples`);
    }
  }
  opt.dispose();
  tf.dispose(Object.values(p));
  rec.step("disposed");
}

/**
 * A ViT-style classifier, inference: 4×4 patch embedding (a strided
 * conv2d) of 32×32×3 images into 64 patches, a class token, position
 * embeddings, 2 pre-norm encoder layers (d 64, 4 heads, GELU MLP), a head
 * on the class token; batches 1, 8, 4, 8, 2, 1, 4.
 */
export async function vitVarBatch(
  rec: TfjsRecording,
  opts = {
    size: 32,
    patch: 4,
    d: 64,
    h: 4,
    layers: 2,
    classes: 10,
    batches: [1, 8, 4, 8, 2, 1, 4],
  },
): Promise<void> {
  const tag = tagger(rec);
  const { size: S, patch: Pa, d, h } = opts;
  const dh = d / h;
  const tokens = (S / Pa) ** 2 + 1;
  tag("weights");
  let seed = 121;
  const w = (shape: number[], scale = 0.1) => rnd(shape, scale, seed++);
  const patchW = w([Pa, Pa, 3, d]);
  const patchB = w([d], 0.01);
  const cls = w([1, 1, d]);
  const pos = w([1, tokens, d]);
  const layers = Array.from({ length: opts.layers }, () => ({
    wq: w([d, d]),
    wk: w([d, d]),
    wv: w([d, d]),
    wo: w([d, d]),
    w1: w([d, 4 * d]),
    b1: w([4 * d], 0.01),
    w2: w([4 * d, d]),
  }));
  const head = w([d, opts.classes]);
  rec.step("weights");
  for (const [pass, n] of opts.batches.entries()) {
    tag("input");
    const img = tf.randomUniform([n, S, S, 3], 0, 1, "float32", 1500 + pass);
    const y = tf.tidy(() => {
      tag("patches");
      const pe = tf.reshape(
        tf.add(tf.conv2d(img as T4, patchW as T4, Pa, "valid"), patchB),
        [n, tokens - 1, d],
      );
      let x = tf.reshape(
        tf.add(tf.concat([tf.tile(cls, [n, 1, 1]), pe], 1), pos),
        [n * tokens, d],
      ) as T2;
      const split = (y: T) =>
        tf.transpose(tf.reshape(y, [n, tokens, h, dh]), [0, 2, 1, 3]);
      layers.forEach((l, li) => {
        tag(`layer${li}.attn`);
        const hN = norm(x) as T2;
        const q = split(tf.matMul(hN, l.wq as T2));
        const k = split(tf.matMul(hN, l.wk as T2));
        const v = split(tf.matMul(hN, l.wv as T2));
        const a = tf.softmax(
          tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(dh)),
        );
        const o = tf.reshape(
          tf.transpose(tf.matMul(a, v), [0, 2, 1, 3]),
          [n * tokens, d],
        ) as T2;
        x = tf.add(x, tf.matMul(o, l.wo as T2));
        tag(`layer${li}.mlp`);
        x = tf.add(
          x,
          tf.matMul(
            gelu(tf.add(tf.matMul(norm(x) as T2, l.w1 as T2), l.b1)) as T2,
            l.w2 as T2,
          ),
        );
      });
      tag("head");
      const c = tf.reshape(
        tf.slice(tf.reshape(x, [n, tokens, d]), [0, 0, 0], [n, 1, d]),
        [n, d],
      );
      return tf.softmax(tf.matMul(norm(c) as T2, head as T2));
    });
    tag("readback");
    await y.data();
    tf.dispose([y, img]);
    tag(undefined);
    rec.step(`pass ${pass} (batch ${n})`);
  }
  tf.dispose([
    patchW,
    patchB,
    cls,
    pos,
    head,
    ...layers.flatMap((l) => Object.values(l)),
  ]);
  rec.step("disposed");
}

/**
 * A one-image detector with a feature pyramid: a 4-stage strided conv
 * backbone, FPN (1×1 laterals, top-down `tf.image.resizeBilinear` and
 * adds, 3×3 smoothing), a shared head for scores and box offsets on three
 * levels, boxes decoded from a grid of anchors (made on the CPU), then in
 * the middle of the step an async `tf.image.nonMaxSuppressionAsync` (boxes
 * and scores read back) and a second stage on the kept boxes
 * (`tf.image.cropAndResize` of the finest level, a small MLP) read back
 * too. Inputs 64, 96, 64, 128, 96, 64, 80.
 */
export async function detectorFpn(
  rec: TfjsRecording,
  opts = { sizes: [64, 96, 64, 128, 96, 64, 80], c: 16, f: 32, keep: 12 },
): Promise<void> {
  const tag = tagger(rec);
  const { c, f } = opts;
  tag("weights");
  let seed = 131;
  const w = (shape: number[], scale = 0.1) => rnd(shape, scale, seed++);
  const back = [
    w([3, 3, 3, c]),
    w([3, 3, c, 2 * c]),
    w([3, 3, 2 * c, 4 * c]),
    w(
      [3, 3, 4 * c, 4 * c],
    ),
  ];
  const lat = [w([1, 1, 2 * c, f]), w([1, 1, 4 * c, f]), w([1, 1, 4 * c, f])];
  const smooth = [w([3, 3, f, f]), w([3, 3, f, f]), w([3, 3, f, f])];
  const headS = w([3, 3, f, 1]);
  const headB = w([3, 3, f, 4], 0.05);
  const roi1 = w([7 * 7 * f, 64], 0.02);
  const roi2 = w([64, 5]);
  rec.step("weights");
  const conv = (x: T, k: T, stride = 1) =>
    tf.conv2d(x as T4, k as T4, stride, "same") as T4;
  /** Normalised anchor boxes `[H*W, 4]` (y1, x1, y2, x2) of one level. */
  const anchors = (H: number, W: number) => {
    const a = new Float32Array(H * W * 4);
    for (let i = 0; i < H; i++) {
      for (let j = 0; j < W; j++) {
        const cy = (i + 0.5) / H, cx = (j + 0.5) / W, r = 1.5 / H;
        a.set([cy - r, cx - r, cy + r, cx + r], (i * W + j) * 4);
      }
    }
    return tf.tensor2d(a, [H * W, 4]);
  };
  for (const [pass, S] of opts.sizes.entries()) {
    tag("input");
    const img = tf.randomUniform([1, S, S, 3], 0, 1, "float32", 1600 + pass);
    tag("anchors");
    const sizes = [S / 4, S / 8, S / 16];
    const anc = sizes.map((s) => anchors(s, s));
    const { p2, boxes, scores } = tf.tidy(() => {
      tag("backbone");
      const c1 = tf.relu(conv(img, back[0], 2));
      const c2 = tf.relu(conv(c1, back[1], 2));
      const c3 = tf.relu(conv(c2, back[2], 2));
      const c4 = tf.relu(conv(c3, back[3], 2));
      tag("fpn");
      const l4 = conv(c4, lat[2]);
      const l3 = tf.add(
        conv(c3, lat[1]),
        tf.image.resizeBilinear(l4, [sizes[1], sizes[1]]),
      ) as T4;
      const l2 = tf.add(
        conv(c2, lat[0]),
        tf.image.resizeBilinear(l3, [sizes[0], sizes[0]]),
      ) as T4;
      const levels = [l2, l3, l4].map((l, i) => tf.relu(conv(l, smooth[i])));
      tag("heads");
      const s = tf.concat(
        levels.map((l) => tf.reshape(conv(l, headS), [-1])),
        0,
      );
      const b = tf.concat(
        levels.map((l, i) =>
          tf.add(
            anc[i],
            tf.mul(
              tf.tanh(tf.reshape(conv(l, headB), [-1, 4])),
              0.5 / sizes[i],
            ),
          )
        ),
        0,
      );
      return {
        p2: levels[0] as T4,
        boxes: b as T2,
        scores: tf.sigmoid(s) as T1,
      };
    });
    tf.dispose([img, ...anc]);
    tag("nms");
    const kept = await tf.image.nonMaxSuppressionAsync(
      boxes,
      scores,
      opts.keep,
      0.4,
    );
    tag("second-stage");
    const cls = tf.tidy(() => {
      const k = kept.shape[0];
      const crops = tf.image.cropAndResize(
        p2,
        tf.gather(boxes, kept) as T2,
        tf.zeros([k], "int32") as T1,
        [7, 7],
      );
      const hid = tf.relu(
        tf.matMul(tf.reshape(crops, [k, -1]) as T2, roi1 as T2),
      );
      return tf.softmax(tf.matMul(hid as T2, roi2 as T2));
    });
    tf.dispose([p2, boxes, scores, kept]);
    tag("readback");
    await cls.data();
    cls.dispose();
    tag(undefined);
    rec.step(`pass ${pass} (${S}x${S})`);
  }
  tf.dispose([...back, ...lat, ...smooth, headS, headB, roi1, roi2]);
  rec.step("disposed");
}

// --- onnxruntime-web --------------------------------------------------------

/**
 * A U-Net-like ONNX graph `x[N, 3, H, W] -> y[N, 1, H, W]`: two encoder
 * levels (Conv 3×3, BatchNormalization, Relu, MaxPool 2), a middle Conv, a
 * ConvTranspose 2×2 stride 2 up, Concat with the skip, Conv, BN, Relu, a
 * nearest Resize ×2 up, Concat, Conv, Relu, a 1×1 Conv and Sigmoid. Batch
 * and image size dynamic.
 */
export function unetModel(c: number, seed = 4): Uint8Array {
  const init = initializers(seed, 0.2);
  const out: Bytes = [];
  header(out);
  msg(7, (g) => {
    const conv = (x: string, y: string, cin: number, cout: number, k = 3) =>
      node(
        "Conv",
        [x, init.add(`${y}.w`, [cout, cin, k, k]), init.add(`${y}.b`, [cout])],
        [y],
        y,
        g,
        { kernel_shape: [k, k], pads: Array(4).fill(k >> 1) },
      );
    const bn = (x: string, y: string, ch: number) =>
      node(
        "BatchNormalization",
        [
          x,
          init.add(`${y}.scale`, [ch], 1),
          init.add(`${y}.bias`, [ch], 0.01),
          init.add(`${y}.mean`, [ch], 0),
          init.add(`${y}.var`, [ch], 1),
        ],
        [y],
        y,
        g,
      );
    const pool = (x: string, y: string) =>
      node("MaxPool", [x], [y], y, g, {
        kernel_shape: [2, 2],
        strides: [2, 2],
      });
    conv("x", "e1c", 3, c);
    bn("e1c", "e1n", c);
    node("Relu", ["e1n"], ["e1"], "e1", g);
    pool("e1", "p1");
    conv("p1", "e2c", c, 2 * c);
    bn("e2c", "e2n", 2 * c);
    node("Relu", ["e2n"], ["e2"], "e2", g);
    pool("e2", "p2");
    conv("p2", "mc", 2 * c, 2 * c);
    node("Relu", ["mc"], ["m"], "m", g);
    node(
      "ConvTranspose",
      [
        "m",
        init.add("up2.w", [2 * c, 2 * c, 2, 2]),
        init.add("up2.b", [2 * c]),
      ],
      ["u2"],
      "up2",
      g,
      { kernel_shape: [2, 2], strides: [2, 2] },
    );
    node("Concat", ["u2", "e2"], ["k2"], "cat2", g, { axis: 1 });
    conv("k2", "d2c", 4 * c, 2 * c);
    bn("d2c", "d2n", 2 * c);
    node("Relu", ["d2n"], ["d2"], "d2", g);
    node(
      "Resize",
      ["d2", "", init.add("up1.scales", [4], Float32Array.of(1, 1, 2, 2))],
      ["u1"],
      "up1",
      g,
    );
    node("Concat", ["u1", "e1"], ["k1"], "cat1", g, { axis: 1 });
    conv("k1", "d1c", 3 * c, c);
    node("Relu", ["d1c"], ["d1"], "d1", g);
    conv("d1", "oc", c, 1, 1);
    node("Sigmoid", ["oc"], ["y"], "out", g);
    str(2, "unet", g);
    init.write(g);
    valueInfo(11, "x", ["N", 3, "H", "W"], g);
    valueInfo(12, "y", ["N", 1, "H", "W"], g);
  }, out);
  return Uint8Array.from(out);
}

/**
 * A GRU decoder cell as an ONNX graph: `tok[N]` (int32) through a Gather
 * embedding, with `h[N, H]`: `z = σ([e, h] Wz + bz)`, `r = σ([e, h] Wr +
 * br)`, `c = tanh([e, r⊙h] Wc + bc)`, `h' = z⊙h + (1 − z)⊙c`; outputs
 * `logits[N, V] = h' Wo + bo` and `hout = h'`.
 */
export function gruCellModel(
  vocab: number,
  e: number,
  hidden: number,
  seed = 5,
): Uint8Array {
  const init = initializers(seed, 0.3);
  const out: Bytes = [];
  header(out);
  msg(7, (g) => {
    const dense = (x: string, y: string, din: number, dout: number) => {
      node(
        "MatMul",
        [x, init.add(`${y}.w`, [din, dout])],
        [`${y}.m`],
        `${y}.m`,
        g,
      );
      node("Add", [`${y}.m`, init.add(`${y}.b`, [dout])], [y], y, g);
    };
    node("Gather", [init.add("emb", [vocab, e]), "tok"], ["e"], "embed", g, {
      axis: 0,
    });
    node("Concat", ["e", "h"], ["eh"], "cat.eh", g, { axis: 1 });
    dense("eh", "zl", e + hidden, hidden);
    node("Sigmoid", ["zl"], ["z"], "z", g);
    dense("eh", "rl", e + hidden, hidden);
    node("Sigmoid", ["rl"], ["r"], "r", g);
    node("Mul", ["r", "h"], ["rh"], "rh", g);
    node("Concat", ["e", "rh"], ["erh"], "cat.erh", g, { axis: 1 });
    dense("erh", "cl", e + hidden, hidden);
    node("Tanh", ["cl"], ["c"], "c", g);
    node("Mul", ["z", "h"], ["zh"], "zh", g);
    node("Sub", [init.add("one", [], 1), "z"], ["omz"], "1-z", g);
    node("Mul", ["omz", "c"], ["zc"], "zc", g);
    node("Add", ["zh", "zc"], ["hout"], "hout", g);
    dense("hout", "logits", hidden, vocab);
    str(2, "gru_cell", g);
    init.write(g);
    valueInfo(11, "tok", ["N"], g, 6);
    valueInfo(11, "h", ["N", hidden], g);
    valueInfo(12, "logits", ["N", vocab], g);
    valueInfo(12, "hout", ["N", hidden], g);
  }, out);
  return Uint8Array.from(out);
}

/**
 * onnxruntime-web on `unetModel` (c 8): one run per (batch, image size),
 * both changing and coming back: (1, 32), (2, 64), (1, 48), (4, 32),
 * (1, 64), (2, 48), (1, 96), (2, 32).
 */
export function ortUnetMultisize(
  source: string,
  opts = {
    c: 8,
    runs: [[1, 32], [2, 64], [1, 48], [4, 32], [1, 64], [2, 48], [1, 96], [
      2,
      32,
    ]] as [number, number][],
  },
): Promise<DeviceRecording<GPUDevice>> {
  return recordOrtSession(
    source,
    opts,
    unetModel(opts.c),
    async (session, recording) => {
      for (const [i, [n, S]] of opts.runs.entries()) {
        recording.recorder.setTag(`batch ${n} ${S}x${S}`);
        const data = Float32Array.from(
          { length: n * 3 * S * S },
          (_, k) => ((k * 7919) % 1000) / 1000,
        );
        const res = await session.run({
          x: new ort.Tensor("float32", data, [n, 3, S, S]),
        });
        const y = res.y;
        if (y.dims.join() !== [n, 1, S, S].join()) {
          throw new Error(`bad output dims ${y.dims}`);
        }
        recording.recorder.setTag(undefined);
        recording.recorder.step(`run ${i} (batch ${n}, ${S}x${S})`);
      }
    },
  );
}

/**
 * onnxruntime-web on `gruCellModel` (vocab 64, embed 32, hidden 64), one
 * `session.run` per token: greedy decoding on the CPU (argmax of the
 * logits read back), the hidden state fed back as an input; sequences of
 * (batch, tokens) (4, 12), (1, 10), (8, 12), (2, 8).
 */
export function ortGruDecode(
  source: string,
  opts = {
    vocab: 64,
    embed: 32,
    hidden: 64,
    seqs: [[4, 12], [1, 10], [8, 12], [2, 8]] as [number, number][],
  },
): Promise<DeviceRecording<GPUDevice>> {
  const { vocab: V, hidden: H } = opts;
  return recordOrtSession(
    source,
    opts,
    gruCellModel(V, opts.embed, H),
    async (session, recording) => {
      for (const [si, [n, tokens]] of opts.seqs.entries()) {
        let tok = Int32Array.from({ length: n }, (_, i) => (i * 5 + si) % V);
        let h = new Float32Array(n * H);
        for (let t = 0; t < tokens; t++) {
          recording.recorder.setTag(`seq ${si} batch ${n}`);
          const res = await session.run({
            tok: new ort.Tensor("int32", tok, [n]),
            h: new ort.Tensor("float32", h, [n, H]),
          });
          const logits = res.logits.data as Float32Array;
          if (res.logits.dims.join() !== [n, V].join()) {
            throw new Error(`bad output dims ${res.logits.dims}`);
          }
          h = Float32Array.from(res.hout.data as Float32Array);
          tok = Int32Array.from({ length: n }, (_, b) => {
            let best = 0;
            for (let k = 1; k < V; k++) {
              if (logits[b * V + k] > logits[b * V + best]) best = k;
            }
            return best;
          });
          recording.recorder.setTag(undefined);
          recording.recorder.step(`seq ${si} token ${t} (batch ${n})`);
        }
      }
    },
  );
}
