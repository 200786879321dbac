/**
 * A tiny ONNX protobuf writer: enough to build small models offline with
 * random weights (the writer's pieces, and the transformer blocks `layerNorm`,
 * `attention` and `feedForward`, are exported for `_holdout3.ts`,
 * `_holdout4.ts` and `_holdout5.ts`).
 */
const enc = new TextEncoder();
export type Bytes = number[];
function varint(n: number | bigint, out: Bytes): void {
  let v = BigInt(n);
  while (v > 127n) out.push(Number(v & 127n) | 128), v >>= 7n;
  out.push(Number(v));
}
const key = (field: number, wire: number, out: Bytes) =>
  varint((field << 3) | wire, out);
export function int(field: number, v: number, out: Bytes) {
  key(field, 0, out), varint(v, out);
}
function bytes(field: number, b: ArrayLike<number>, out: Bytes) {
  key(field, 2, out), varint(b.length, out);
  for (let i = 0; i < b.length; i++) out.push(b[i]);
}
export const str = (field: number, s: string, out: Bytes) =>
  bytes(field, enc.encode(s), out);
export const msg = (field: number, build: (o: Bytes) => void, out: Bytes) => {
  const o: Bytes = [];
  build(o);
  bytes(field, o, out);
};

export function tensor(
  field: number,
  name: string,
  dims: number[],
  data: Float32Array | BigInt64Array,
  out: Bytes,
) {
  msg(field, (o) => {
    for (const d of dims) int(1, d, o);
    int(2, data instanceof BigInt64Array ? 7 : 1, o); // INT64 or FLOAT
    str(8, name, o);
    bytes(9, new Uint8Array(data.buffer), o);
  }, out);
}
export function valueInfo(
  field: number,
  name: string,
  dims: (number | string)[],
  out: Bytes,
  elemType = 1, // FLOAT; 6 is INT32, 7 INT64
) {
  msg(field, (o) => {
    str(1, name, o);
    msg(2, (t) =>
      msg(1, (tt) => {
        int(1, elemType, tt);
        msg(2, (sh) => {
          for (const d of dims) {
            msg(
              1,
              (dm) => typeof d === "number" ? int(1, d, dm) : str(2, d, dm),
              sh,
            );
          }
        }, tt);
      }, t), o);
  }, out);
}
export function node(
  op: string,
  inputs: string[],
  outputs: string[],
  name: string,
  out: Bytes,
  attrs: Record<string, number | number[]> = {},
) {
  msg(1, (o) => {
    for (const i of inputs) str(1, i, o);
    for (const x of outputs) str(2, x, o);
    str(3, name, o);
    str(4, op, o);
    for (const [k, v] of Object.entries(attrs)) {
      msg(5, (a) => { // AttributeProto
        str(1, k, a);
        if (typeof v === "number") {
          int(3, v, a);
          int(20, 2, a); // INT
        } else {
          for (const x of v) int(8, x, a);
          int(20, 7, a); // INTS
        }
      }, o);
    }
  }, out);
}

export function header(out: Bytes): void {
  int(1, 8, out); // ir_version
  msg(8, (o) => {
    str(1, "", o);
    int(2, 17, o);
  }, out); // opset 17
  str(2, "allot-trace", out); // producer_name
}

export const lcg = (seed: number, scale: number) => {
  let s = seed;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32 - 0.5) * scale;
};

/** An MLP `x[N, d] -> (MatMul W_i, Add b_i, Relu) x layers -> y[N, d]` with seeded random weights. */
export function mlpModel(
  d: number,
  hidden: number,
  layers: number,
  seed = 1,
): Uint8Array {
  const rnd = lcg(seed, 0.1);
  const out: Bytes = [];
  header(out);
  msg(7, (g) => {
    let x = "x";
    for (let l = 0; l < layers; l++) {
      node("MatMul", [x, `w${l}`], [`m${l}`], `matmul${l}`, g);
      node("Add", [`m${l}`, `b${l}`], [`a${l}`], `add${l}`, g);
      const y = l === layers - 1 ? "y" : `r${l}`;
      node(l === layers - 1 ? "Tanh" : "Relu", [`a${l}`], [y], `act${l}`, g);
      x = y;
    }
    str(2, "mlp", g);
    for (let l = 0; l < layers; l++) {
      const din = l === 0 ? d : hidden, dout = l === layers - 1 ? d : hidden;
      tensor(
        5,
        `w${l}`,
        [din, dout],
        Float32Array.from({ length: din * dout }, rnd),
        g,
      );
      tensor(5, `b${l}`, [dout], Float32Array.from({ length: dout }, rnd), g);
    }
    valueInfo(11, "x", ["N", d], g);
    valueInfo(12, "y", ["N", d], g);
  }, out);
  return Uint8Array.from(out);
}

/**
 * A small residual CNN `x[N, 3, S, S] -> Conv 3x3 (c) -> Relu -> Conv 3x3
 * stride 2 (2c) -> Relu -> Conv 3x3 (2c) -> Add (residual) -> Relu ->
 * MaxPool 2 -> Conv 1x1 (4c) -> Relu -> GlobalAveragePool -> Flatten -> Gemm
 * -> Softmax -> y[N, classes]` with seeded random weights.
 */
export function convNetModel(
  size: number,
  c: number,
  classes: number,
  seed = 2,
): Uint8Array {
  const rnd = lcg(seed, 0.2);
  const out: Bytes = [];
  header(out);
  const weights: [string, number[]][] = [];
  const w = (
    name: string,
    dims: number[],
  ) => (weights.push([name, dims]), name);
  msg(7, (g) => {
    const conv = (
      x: string,
      y: string,
      cin: number,
      cout: number,
      k: number,
      stride: number,
    ) =>
      node(
        "Conv",
        [x, w(`${y}.w`, [cout, cin, k, k]), w(`${y}.b`, [cout])],
        [y],
        y,
        g,
        {
          kernel_shape: [k, k],
          pads: Array(4).fill(k >> 1),
          strides: [stride, stride],
        },
      );
    conv("x", "c1", 3, c, 3, 1);
    node("Relu", ["c1"], ["r1"], "relu1", g);
    conv("r1", "c2", c, 2 * c, 3, 2);
    node("Relu", ["c2"], ["r2"], "relu2", g);
    conv("r2", "c3", 2 * c, 2 * c, 3, 1);
    node("Add", ["c3", "r2"], ["a3"], "residual", g);
    node("Relu", ["a3"], ["r3"], "relu3", g);
    node("MaxPool", ["r3"], ["p3"], "pool", g, {
      kernel_shape: [2, 2],
      strides: [2, 2],
    });
    conv("p3", "c4", 2 * c, 4 * c, 1, 1);
    node("Relu", ["c4"], ["r4"], "relu4", g);
    node("GlobalAveragePool", ["r4"], ["gap"], "gap", g);
    node("Flatten", ["gap"], ["flat"], "flatten", g);
    node(
      "Gemm",
      ["flat", w("fc.w", [4 * c, classes]), w("fc.b", [classes])],
      ["logits"],
      "fc",
      g,
    );
    node("Softmax", ["logits"], ["y"], "softmax", g);
    str(2, "convnet", g);
    for (const [name, dims] of weights) {
      const n = dims.reduce((a, b) => a * b, 1);
      tensor(5, name, dims, Float32Array.from({ length: n }, rnd), g);
    }
    valueInfo(11, "x", ["N", 3, size, size], g);
    valueInfo(12, "y", ["N", classes], g);
  }, out);
  return Uint8Array.from(out);
}

/**
 * A pre-norm transformer encoder `x[N, S, d] -> (LayerNormalization, MatMul
 * Q/K/V, Reshape + Transpose to heads, MatMul, Mul, Softmax, MatMul,
 * Transpose + Reshape back, MatMul, Add; LayerNormalization, MatMul, Add,
 * Relu, MatMul, Add) x layers -> y[N, S, d]`, batch and sequence length
 * both dynamic, with seeded random weights.
 */
export function attentionModel(
  d: number,
  h: number,
  ff: number,
  layers: number,
  seed = 3,
): Uint8Array {
  const init = initializers(seed, 0.2);
  const out: Bytes = [];
  header(out);
  msg(7, (g) => {
    let x = "x";
    for (let l = 0; l < layers; l++) {
      const n = (s: string) => `l${l}.${s}`;
      const h1 = layerNorm(g, init, d, n("ln1"), x);
      const a = attention(g, init, d, `l${l}`, h1, h1);
      node("Add", [x, a], [n("x1")], n("x1"), g);
      const h2 = layerNorm(g, init, d, n("ln2"), n("x1"));
      const y = l === layers - 1 ? "y" : n("x2");
      x = feedForward(g, init, d, ff, `l${l}`, n("x1"), h2, y, "random");
    }
    str(2, "attention", g);
    init.write(g);
    attentionConstants(g, d, h);
    valueInfo(11, "x", ["N", "S", d], g);
    valueInfo(12, "y", ["N", "S", d], g);
  }, out);
  return Uint8Array.from(out);
}

/** Collects initializers while a graph is written, then writes them. */
export function initializers(seed: number, scale: number) {
  const rand = lcg(seed, scale);
  const list: [string, number[], number | Float32Array | undefined][] = [];
  return {
    /** A float initializer: random, filled with `fill`, or given. */
    add(name: string, dims: number[], fill?: number | Float32Array): string {
      list.push([name, dims, fill]);
      return name;
    },
    write(g: Bytes): void {
      for (const [name, dims, fill] of list) {
        const k = dims.reduce((a, b) => a * b, 1);
        const data = fill instanceof Float32Array ? fill : Float32Array.from(
          { length: k },
          fill === undefined ? rand : () => fill,
        );
        tensor(5, name, dims, data, g);
      }
    },
  };
}

/** What `initializers` returns. */
export type Initializers = ReturnType<typeof initializers>;

/**
 * Writes multi-head attention (`q` from `qIn`, keys and values from `kvIn`;
 * `[N, T, d]` each) into graph `g` under `prefix`; returns the output's
 * name (`[N, Tq, d]`, after the output projection). Uses the `split4`,
 * `merge3` and `scale` initializers.
 */
export function attention(
  g: Bytes,
  init: Initializers,
  d: number,
  prefix: string,
  qIn: string,
  kvIn: string,
): string {
  const n = (s: string) => `${prefix}.${s}`;
  for (const t of ["q", "k", "v"]) {
    node(
      "MatMul",
      [t === "q" ? qIn : kvIn, init.add(n(`w${t}`), [d, d])],
      [n(t)],
      n(t),
      g,
    );
    node("Reshape", [n(t), "split4"], [n(`${t}4`)], n(`${t}4`), g);
    node("Transpose", [n(`${t}4`)], [n(`${t}h`)], n(`${t}h`), g, {
      perm: t === "k" ? [0, 2, 3, 1] : [0, 2, 1, 3],
    });
  }
  node("MatMul", [n("qh"), n("kh")], [n("s")], n("s"), g);
  node("Mul", [n("s"), "scale"], [n("ss")], n("ss"), g);
  node("Softmax", [n("ss")], [n("p")], n("p"), g);
  node("MatMul", [n("p"), n("vh")], [n("o")], n("o"), g);
  node("Transpose", [n("o")], [n("ot")], n("ot"), g, { perm: [0, 2, 1, 3] });
  node("Reshape", [n("ot"), "merge3"], [n("om")], n("om"), g);
  node("MatMul", [n("om"), init.add(n("wo"), [d, d])], [n("a")], n("a"), g);
  return n("a");
}

/** LayerNormalization of `x` under `name` (unit gain, zero bias). */
export function layerNorm(
  g: Bytes,
  init: Initializers,
  d: number,
  name: string,
  x: string,
): string {
  node(
    "LayerNormalization",
    [x, init.add(`${name}.g`, [d], 1), init.add(`${name}.b`, [d], 0)],
    [name],
    name,
    g,
  );
  return name;
}

/**
 * `x + W2 relu(W1 hN + b1)` under `prefix` (weights `<prefix>.w1`, ...);
 * returns the sum's name, `out`. `b1` is filled with `bias`, or random.
 */
export function feedForward(
  g: Bytes,
  init: Initializers,
  d: number,
  ff: number,
  prefix: string,
  x: string,
  hN: string,
  out = `${prefix}.out`,
  bias: number | "random" = 0,
): string {
  const n = (s: string) => `${prefix}.${s}`;
  node("MatMul", [hN, init.add(n("w1"), [d, ff])], [n("f1")], n("f1"), g);
  node(
    "Add",
    [n("f1"), init.add(n("b1"), [ff], bias === "random" ? undefined : bias)],
    [n("f1b")],
    n("f1b"),
    g,
  );
  node("Relu", [n("f1b")], [n("f1r")], n("f1r"), g);
  node("MatMul", [n("f1r"), init.add(n("w2"), [ff, d])], [n("f2")], n("f2"), g);
  node("Add", [x, n("f2")], [out], out, g);
  return out;
}

/** The int64 and scalar initializers `attention` needs. */
export function attentionConstants(g: Bytes, d: number, h: number): void {
  tensor(5, "scale", [], Float32Array.of(1 / Math.sqrt(d / h)), g);
  tensor(
    5,
    "split4",
    [4],
    BigInt64Array.of(0n, 0n, BigInt(h), BigInt(d / h)),
    g,
  );
  tensor(5, "merge3", [3], BigInt64Array.of(0n, 0n, BigInt(d)), g);
}
