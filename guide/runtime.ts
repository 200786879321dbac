/**
 * "Build a runtime on allot", the code of `guide/README.md`: a tensor class
 * over `Buffer`, CPU kernels, a WGSL kernel bound with `bindBuffers`, a
 * 2-layer MLP trained with `tidy`, and a memory summary at the end.
 *
 * Runs on Deno (`deno run -A guide/runtime.ts`), on Node from the npm
 * tarballs (`deno task test:node` compiles it with `tsc --strict` and runs
 * it), and its `train()` takes any `GPUDevice` (or none).
 *
 * @module
 */

import { CpuAllocator } from "@allot/cpu";
import { Registry } from "@allot/registry";
import {
  Buffer,
  type BufferOwner,
  ownedBuffers,
  type Shape,
  tidy,
} from "@allot/storage";
import {
  bindBuffers,
  createUniformBuffer,
  GpuBufferBackend,
  GpuCachingAllocator,
} from "@allot/webgpu";

// ---------------------------------------------------------------------------
// 1. A tensor class over Buffer. It owns one buffer, tells tidy() so
//    (ownedBuffers), and releases it with `using` or dispose().

/** The registry every tensor allocates from (set up in `train`). */
let registry = new Registry();

/** A dense f32 tensor that owns one allot `Buffer`. */
export class Tensor implements BufferOwner {
  constructor(readonly buffer: Buffer<"f32">) {}

  /** A tensor of the given shape from host values, on the CPU. */
  static from(values: ArrayLike<number>, shape: Shape): Tensor {
    const buffer = registry.buffer("f32", shape);
    buffer.hostView().set(Array.from(values));
    return new Tensor(buffer);
  }

  /** A tensor of zeros. */
  static zeros(shape: Shape): Tensor {
    return new Tensor(registry.buffer("f32", shape, { fill: 0 }));
  }

  get shape(): number[] {
    return this.buffer.shape;
  }

  /** The elements as a typed array over the tensor's memory (no copy). */
  data(): Float32Array {
    return this.buffer.hostView();
  }

  /** A transposed copy (the view is packed by `contiguous()`). */
  t(): Tensor {
    using view = this.buffer.transpose();
    return new Tensor(view.contiguous());
  }

  /** Tells tidy() and keep() which buffers this tensor owns. */
  [ownedBuffers](): Buffer<"f32">[] {
    return [this.buffer];
  }

  dispose(): void {
    if (!this.buffer.released) this.buffer.release();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

// ---------------------------------------------------------------------------
// 2. CPU kernels: plain loops over hostView() arrays; each returns a new
//    tensor, which the enclosing tidy() releases unless it is returned.

export function matmul(a: Tensor, b: Tensor): Tensor {
  const [n, k] = a.shape, [k2, m] = b.shape;
  if (k !== k2) throw new Error(`matmul: ${a.shape} by ${b.shape}`);
  const out = Tensor.zeros([n, m]);
  const x = a.data(), y = b.data(), z = out.data();
  for (let i = 0; i < n; i++) {
    for (let p = 0; p < k; p++) {
      const v = x[i * k + p];
      for (let j = 0; j < m; j++) z[i * m + j] += v * y[p * m + j];
    }
  }
  return out;
}

/** `a + bias` with `bias` broadcast over the rows of `a`. */
export function addRow(a: Tensor, bias: Tensor): Tensor {
  const [n, m] = a.shape;
  const out = Tensor.zeros([n, m]);
  const x = a.data(), b = bias.data(), z = out.data();
  for (let i = 0; i < n * m; i++) z[i] = x[i] + b[i % m];
  return out;
}

export function relu(a: Tensor): Tensor {
  const out = Tensor.zeros(a.shape);
  const x = a.data(), z = out.data();
  for (let i = 0; i < x.length; i++) z[i] = x[i] > 0 ? x[i] : 0;
  return out;
}

/** `grad` where `a > 0`, else 0 (the backward of relu). */
export function reluGrad(grad: Tensor, a: Tensor): Tensor {
  const out = Tensor.zeros(a.shape);
  const g = grad.data(), x = a.data(), z = out.data();
  for (let i = 0; i < x.length; i++) z[i] = x[i] > 0 ? g[i] : 0;
  return out;
}

/** Sums the rows: `[n, m]` to `[1, m]`. */
export function sumRows(a: Tensor): Tensor {
  const [n, m] = a.shape;
  const out = Tensor.zeros([1, m]);
  const x = a.data(), z = out.data();
  for (let i = 0; i < n * m; i++) z[i % m] += x[i];
  return out;
}

/** In place: `param -= lr * grad` (parameters live across steps). */
export function sgd(param: Tensor, grad: Tensor, lr: number): void {
  const p = param.data(), g = grad.data();
  for (let i = 0; i < p.length; i++) p[i] -= lr * g[i];
}

// ---------------------------------------------------------------------------
// 3. A WGSL kernel with correct bindings: the SGD update on the GPU. The
//    parameter and its gradient come from one caching allocator, so they
//    often share a GPUBuffer; bindBuffers() sees it and declares both
//    read_write (a read-only and a writable binding of one GPUBuffer in one
//    dispatch is refused by WebGPU, and the kernel would silently do
//    nothing). The dispatch runs in error scopes, so a mistake throws.

export async function sgdOnGpu(
  device: GPUDevice,
  param: Float32Array,
  grad: Float32Array,
  lr: number,
): Promise<Float32Array> {
  const allocator = new GpuCachingAllocator(device).asAllocator();
  const backend = new GpuBufferBackend(device);
  using p = Buffer.fromData("f32", param, { allocator, backend });
  using g = Buffer.fromData("f32", grad, { allocator, backend });
  const bound = bindBuffers(device, [
    { name: "param", buffer: p, access: "read_write" },
    { name: "grad", buffer: g, access: "read" },
  ]);
  // Kernel parameters in a UNIFORM block: element offsets, count, lr.
  const params = new ArrayBuffer(16);
  new Uint32Array(params, 0, 3).set([
    bound.inputs[0].elementOffset,
    bound.inputs[1].elementOffset,
    param.length,
  ]);
  new Float32Array(params, 12, 1)[0] = lr;
  const uniform = createUniformBuffer(device, params, "guide:sgd:params");
  const code = `${bound.declarations("f32")}
struct Params { param_at: u32, grad_at: u32, n: u32, lr: f32 }
@group(0) @binding(2) var<uniform> u: Params;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  if (id.x >= u.n) { return; }
  param[u.param_at + id.x] -= u.lr * grad[u.grad_at + id.x];
}`;
  device.pushErrorScope("validation");
  const pipeline = device.createComputePipeline({
    label: "guide:sgd",
    layout: "auto",
    compute: {
      module: device.createShaderModule({ code }),
      entryPoint: "main",
    },
  });
  const group = device.createBindGroup({
    label: "guide:sgd",
    layout: pipeline.getBindGroupLayout(0),
    entries: [...bound.entries, { binding: 2, resource: { buffer: uniform } }],
  });
  const encoder = device.createCommandEncoder({ label: "guide:sgd" });
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, group);
  pass.dispatchWorkgroups(Math.ceil(param.length / 64));
  pass.end();
  device.queue.submit([encoder.finish()]);
  const error = await device.popErrorScope();
  uniform.destroy();
  if (error) throw new Error(`sgd kernel: ${error.message}`);
  return await p.read();
}

// ---------------------------------------------------------------------------
// 4. Training: a 2-layer MLP (2 -> 8 -> 1, relu) learns y = x0 - 2 x1 with
//    mean squared error and SGD. Every step runs in tidy(): the
//    intermediates (activations, gradients) are released when it returns;
//    the loss comes out as a number, the parameters are updated in place.

/** What {@linkcode train} reports. */
export interface TrainReport {
  /** Loss before and after training. */
  firstLoss: number;
  lastLoss: number;
  /** Live storages and bytes after training, per device (`memory()`). */
  memoryAfterTraining: ReturnType<Registry["memory"]>;
  /** Live storages once everything is disposed (0). */
  storagesAtEnd: number;
  /** Whether the GPU SGD step matched the CPU's (`undefined`: no GPU). */
  gpuMatches?: boolean;
}

/** A small deterministic random generator, so every run is the same. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
}

/**
 * Trains the MLP on the CPU, runs one SGD step on the GPU when given a
 * device, and reports the loss and the memory.
 *
 * @param device A GPU device, or `undefined` for CPU only.
 * @param steps Training steps.
 * @returns The report.
 */
export async function train(
  device?: GPUDevice,
  steps = 300,
): Promise<TrainReport> {
  registry = new Registry();
  registry.set("cpu", new CpuAllocator());
  const rand = random(42);
  const n = 64;
  const xs: number[] = [], ys: number[] = [];
  for (let i = 0; i < n; i++) {
    const [a, b] = [rand(), rand()];
    xs.push(a, b);
    ys.push(a - 2 * b);
  }
  using x = Tensor.from(xs, [n, 2]);
  using y = Tensor.from(ys, [n, 1]);
  using w1 = Tensor.from(Array.from({ length: 16 }, () => rand() * 0.5), [
    2,
    8,
  ]);
  using b1 = Tensor.zeros([1, 8]);
  using w2 = Tensor.from(Array.from({ length: 8 }, () => rand() * 0.5), [8, 1]);
  using b2 = Tensor.zeros([1, 1]);
  const lr = 0.05;

  const step = (): number =>
    tidy(() => {
      // forward
      const pre = addRow(matmul(x, w1), b1);
      const h = relu(pre);
      const out = addRow(matmul(h, w2), b2);
      const diff = out.data().map((v, i) => v - y.data()[i]);
      const loss = diff.reduce((s, d) => s + d * d, 0) / n;
      // backward
      const dOut = Tensor.from(diff.map((d) => (2 * d) / n), [n, 1]);
      const dW2 = matmul(h.t(), dOut);
      const dB2 = sumRows(dOut);
      const dH = reluGrad(matmul(dOut, w2.t()), pre);
      const dW1 = matmul(x.t(), dH);
      const dB1 = sumRows(dH);
      // update in place
      sgd(w1, dW1, lr);
      sgd(b1, dB1, lr);
      sgd(w2, dW2, lr);
      sgd(b2, dB2, lr);
      return loss; // a number: every tensor made above is released
    });

  const firstLoss = step();
  let lastLoss = firstLoss;
  for (let i = 1; i < steps; i++) lastLoss = step();

  // A tidy() that returns a Tensor keeps its buffer (the ownedBuffers
  // protocol) and releases the rest.
  using prediction = tidy(() =>
    addRow(matmul(relu(addRow(matmul(x, w1), b1)), w2), b2)
  );
  if (prediction.shape[0] !== n) throw new Error("prediction lost");

  let gpuMatches: boolean | undefined;
  if (device !== undefined) {
    const grad = Float32Array.from(w1.data(), (v) => v / 10);
    const expected = Float32Array.from(w1.data(), (v, i) => v - lr * grad[i]);
    const got = await sgdOnGpu(device, w1.data().slice(), grad, lr);
    gpuMatches = got.every((v, i) => Math.abs(v - expected[i]) < 1e-6);
  }

  // 5. The memory summary: 7 tensors live (x, y, 4 parameters, prediction).
  const memoryAfterTraining = registry.memory();
  for (const t of [x, y, w1, b1, w2, b2, prediction]) t.dispose();
  return {
    firstLoss,
    lastLoss,
    memoryAfterTraining,
    storagesAtEnd: registry.memory().numStorages,
    gpuMatches,
  };
}

if ((import.meta as { main?: boolean }).main) {
  const adapter = await navigator.gpu?.requestAdapter();
  const device = await adapter?.requestDevice();
  const report = await train(device);
  console.log(
    `loss ${report.firstLoss.toFixed(4)} -> ${report.lastLoss.toFixed(4)}`,
  );
  console.log("memory after training:", report.memoryAfterTraining);
  console.log(`storages at the end: ${report.storagesAtEnd}`);
  console.log(
    report.gpuMatches === undefined
      ? "no GPU: the WGSL kernel was skipped"
      : `GPU SGD step matches the CPU's: ${report.gpuMatches}`,
  );
  device?.destroy();
}
