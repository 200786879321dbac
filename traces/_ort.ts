/**
 * onnxruntime-web 1.22's WebGPU execution provider (JSEP) on this runtime's
 * WebGPU, unmodified: the device it requests is recorded (the adapter's
 * `requestDevice` hands back a recorded device), and a model built offline
 * (`_onnx.ts`, random weights: an MLP, a residual CNN) runs with a batch
 * size that changes each run.
 */
import type { DeviceRecording } from "../packages/trace/mod.ts";
import { ort, recordOrtSession } from "./_ort_session.ts";
import { attentionModel, convNetModel, mlpModel } from "./_onnx.ts";

/**
 * Runs `model` once per batch size on onnxruntime-web's WebGPU EP with the
 * device it requests recorded; `input(n)` gives the input's dims at batch n.
 */
function recordOrt(
  source: string,
  meta: Record<string, unknown>,
  model: Uint8Array,
  batches: readonly number[],
  input: (n: number, run: number) => number[],
): Promise<DeviceRecording<GPUDevice>> {
  return recordOrtSession(source, meta, model, async (session, recording) => {
    for (const [i, n] of batches.entries()) {
      recording.recorder.setTag(`batch ${n}`);
      const dims = input(n, i);
      const x = new ort.Tensor(
        "float32",
        new Float32Array(dims.reduce((a, b) => a * b, 1)).fill(0.25),
        dims,
      );
      const out = await session.run({ x });
      if (out.y.dims[0] !== n) throw new Error(`bad output dims ${out.y.dims}`);
      recording.recorder.setTag(undefined);
      recording.recorder.step(`run ${i} (batch ${n})`);
    }
  });
}

export function ortMlpVarBatch(
  source: string,
  opts = {
    d: 256,
    hidden: 1024,
    layers: 4,
    batches: [8, 64, 32, 128, 16, 96, 48, 8, 64, 32],
  },
): Promise<DeviceRecording<GPUDevice>> {
  return recordOrt(
    source,
    opts,
    mlpModel(opts.d, opts.hidden, opts.layers),
    opts.batches,
    (n) => [n, opts.d],
  );
}

/** A residual CNN (`convNetModel`) on 32×32 images, batch changing each run. */
export function ortConvVarBatch(
  source: string,
  opts = {
    size: 32,
    channels: 16,
    classes: 10,
    batches: [1, 4, 2, 8, 1, 4, 8, 2],
  },
): Promise<DeviceRecording<GPUDevice>> {
  return recordOrt(
    source,
    opts,
    convNetModel(opts.size, opts.channels, opts.classes),
    opts.batches,
    (n) => [n, 3, opts.size, opts.size],
  );
}

/**
 * A 2-layer transformer encoder (`attentionModel`, d 64, 4 heads) with the
 * batch and the sequence length both changing each run (shapes that come
 * back).
 */
export function ortAttentionVarShape(
  source: string,
  opts = {
    d: 64,
    heads: 4,
    ff: 256,
    layers: 2,
    runs: [[1, 16], [4, 32], [2, 8], [4, 16], [1, 32], [2, 24], [4, 8], [
      1,
      16,
    ]],
  },
): Promise<DeviceRecording<GPUDevice>> {
  return recordOrt(
    source,
    opts,
    attentionModel(opts.d, opts.heads, opts.ff, opts.layers),
    opts.runs.map(([n]) => n),
    (n, i) => [n, opts.runs[i][1], opts.d],
  );
}
