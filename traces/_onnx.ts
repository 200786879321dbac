/** A tiny ONNX protobuf writer: enough to build an MLP model offline with random weights. */
const enc = new TextEncoder();
type Bytes = number[];
function varint(n: number | bigint, out: Bytes): void {
  let v = BigInt(n);
  while (v > 127n) out.push(Number(v & 127n) | 128), v >>= 7n;
  out.push(Number(v));
}
const key = (field: number, wire: number, out: Bytes) =>
  varint((field << 3) | wire, out);
function int(field: number, v: number, out: Bytes) {
  key(field, 0, out), varint(v, out);
}
function bytes(field: number, b: ArrayLike<number>, out: Bytes) {
  key(field, 2, out), varint(b.length, out);
  for (let i = 0; i < b.length; i++) out.push(b[i]);
}
const str = (field: number, s: string, out: Bytes) =>
  bytes(field, enc.encode(s), out);
const msg = (field: number, build: (o: Bytes) => void, out: Bytes) => {
  const o: Bytes = [];
  build(o);
  bytes(field, o, out);
};

function tensor(
  field: number,
  name: string,
  dims: number[],
  data: Float32Array,
  out: Bytes,
) {
  msg(field, (o) => {
    for (const d of dims) int(1, d, o);
    int(2, 1, o); // FLOAT
    str(8, name, o);
    bytes(9, new Uint8Array(data.buffer), o);
  }, out);
}
function valueInfo(
  field: number,
  name: string,
  dims: (number | string)[],
  out: Bytes,
) {
  msg(field, (o) => {
    str(1, name, o);
    msg(2, (t) =>
      msg(1, (tt) => {
        int(1, 1, tt);
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
function node(
  op: string,
  inputs: string[],
  outputs: string[],
  name: string,
  out: Bytes,
) {
  msg(1, (o) => {
    for (const i of inputs) str(1, i, o);
    for (const x of outputs) str(2, x, o);
    str(3, name, o);
    str(4, op, o);
  }, out);
}

/** An MLP `x[N, d] -> (MatMul W_i, Add b_i, Relu) x layers -> y[N, d]` with seeded random weights. */
export function mlpModel(
  d: number,
  hidden: number,
  layers: number,
  seed = 1,
): Uint8Array {
  let s = seed;
  const rnd = () =>
    ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32 - 0.5) * 0.1;
  const out: Bytes = [];
  int(1, 8, out); // ir_version
  msg(8, (o) => {
    str(1, "", o);
    int(2, 17, o);
  }, out); // opset 17
  str(2, "allot-trace", out); // producer_name
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
