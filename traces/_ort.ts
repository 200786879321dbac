/**
 * onnxruntime-web 1.22's WebGPU execution provider (JSEP) on this runtime's
 * WebGPU, unmodified: the device it requests is recorded (the adapter's
 * `requestDevice` hands back a recorded device), and an MLP built offline
 * (`_onnx.ts`, random weights) runs with a batch size that changes each run.
 */
import * as ort from "npm:onnxruntime-web@1.22.0/webgpu";
import { type DeviceRecording, recordDevice } from "../packages/trace/mod.ts";
import { mlpModel } from "./_onnx.ts";

export async function ortMlpVarBatch(
  source: string,
  opts = {
    d: 256,
    hidden: 1024,
    layers: 4,
    batches: [8, 64, 32, 128, 16, 96, 48, 8, 64, 32],
  },
): Promise<DeviceRecording<GPUDevice>> {
  let recording: DeviceRecording<GPUDevice> | undefined;
  const proto = GPUAdapter.prototype;
  const requestDevice = proto.requestDevice;
  proto.requestDevice = async function (
    this: GPUAdapter,
    d?: GPUDeviceDescriptor,
  ) {
    const device = await requestDevice.call(this, d);
    recording = recordDevice(device, {
      source,
      meta: {
        runtime: "onnxruntime-web@1.22.0 (webgpu EP)",
        host: `Deno ${Deno.version.deno}`,
        model: opts,
      },
    });
    return recording.device;
  };
  try {
    ort.env.wasm.numThreads = 1;
    ort.env.logLevel = "warning";
    const session = await ort.InferenceSession.create(
      mlpModel(opts.d, opts.hidden, opts.layers),
      {
        executionProviders: ["webgpu"],
      },
    );
    if (!recording) {
      throw new Error("onnxruntime-web did not request a WebGPU device");
    }
    recording.recorder.step("session");
    for (const [i, n] of opts.batches.entries()) {
      recording.recorder.setTag(`batch ${n}`);
      const x = new ort.Tensor(
        "float32",
        new Float32Array(n * opts.d).fill(0.25),
        [n, opts.d],
      );
      const out = await session.run({ x });
      if (out.y.dims[0] !== n) throw new Error(`bad output dims ${out.y.dims}`);
      recording.recorder.setTag(undefined);
      recording.recorder.step(`run ${i} (batch ${n})`);
    }
    await session.release();
    recording.recorder.step("released");
    recording.stop();
    return recording;
  } finally {
    proto.requestDevice = requestDevice;
  }
}
