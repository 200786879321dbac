/**
 * onnxruntime-web 1.22's WebGPU execution provider (JSEP) on this runtime's
 * WebGPU, unmodified, with the device it requests recorded: the adapter's
 * `requestDevice` hands back a recorded device (restored afterwards). One
 * helper for every onnxruntime-web workload (`_ort.ts`, `_holdout3.ts`,
 * `_holdout4.ts`). Device events only: the EP's buffer pool is not
 * reachable.
 *
 * @module
 */
import * as ort from "npm:onnxruntime-web@1.22.0/webgpu";
import { type DeviceRecording, recordDevice } from "../packages/trace/mod.ts";

export { ort };

/**
 * Creates a session on `model` with the WebGPU EP, marks a `session` step,
 * runs `body`, releases the session and marks `released`.
 *
 * @param source The trace header's source.
 * @param meta The model's options, kept in the header.
 * @param model The ONNX protobuf.
 * @param body The runs.
 * @returns The recording, stopped.
 */
export async function recordOrtSession(
  source: string,
  meta: Record<string, unknown>,
  model: Uint8Array,
  body: (
    session: ort.InferenceSession,
    recording: DeviceRecording<GPUDevice>,
  ) => Promise<void>,
): Promise<DeviceRecording<GPUDevice>> {
  let recording: DeviceRecording<GPUDevice> | undefined;
  const proto = GPUAdapter.prototype;
  const requestDevice = proto.requestDevice;
  proto.requestDevice = async function (
    this: GPUAdapter,
    desc?: GPUDeviceDescriptor,
  ) {
    const device = await requestDevice.call(this, desc);
    recording = recordDevice(device, {
      source,
      meta: {
        runtime: "onnxruntime-web@1.22.0 (webgpu EP)",
        host: `Deno ${Deno.version.deno}`,
        model: meta,
      },
    });
    return recording.device;
  };
  try {
    ort.env.wasm.numThreads = 1;
    ort.env.logLevel = "warning";
    const session = await ort.InferenceSession.create(model, {
      executionProviders: ["webgpu"],
    });
    if (!recording) {
      throw new Error("onnxruntime-web did not request a WebGPU device");
    }
    recording.recorder.step("session");
    await body(session, recording);
    await session.release();
    recording.recorder.step("released");
    recording.stop();
    return recording;
  } finally {
    proto.requestDevice = requestDevice;
  }
}
