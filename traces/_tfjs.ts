/**
 * Sets up TF.js 4.22's WebGPU backend on this runtime's WebGPU through the
 * allot recorder: the device is recorded, the backend's BufferManager too,
 * and a step check compares the trace's live bytes with TF.js's own count.
 */
import * as tf from "npm:@tensorflow/tfjs@4.22.0";
import { WebGPUBackend } from "npm:@tensorflow/tfjs-backend-webgpu@4.22.0";
import {
  type BufferPoolLike,
  type DeviceRecording,
  recordBufferPool,
  recordDevice,
  type TraceEvent,
} from "../packages/trace/mod.ts";

export { tf };

/** Seeded random normal weights (`tf.randomNormal`, mean 0). */
export const rnd = (shape: number[], scale = 0.1, seed = 7): tf.Tensor =>
  tf.randomNormal(shape, 0, scale, "float32", seed);

/** Sets (or clears) the tag of the recording's next events. */
export const tagger = (rec: TfjsRecording) => (t: string | undefined): void => {
  rec.recording.recorder.setTag(t);
};

export interface TfjsRecording {
  readonly recording: DeviceRecording<GPUDevice>;
  readonly pool: BufferPoolLike & {
    numBytesUsed: number;
    numBytesAllocated: number;
  };
  /** Marks a step and checks live and held bytes against TF.js's counters. */
  step(name: string): void;
  readonly checks: { steps: number; mismatches: number };
  finish(): void;
}

/** Live and held bytes of the trace so far. */
export function traceBytes(
  events: readonly TraceEvent[],
): { live: number; held: number } {
  const sizes = new Map<number, number>();
  const bufSizes = new Map<number, number>();
  let live = 0, held = 0;
  for (const e of events) {
    if (e.op === "alloc") {
      sizes.set(e.id, e.size);
      live += e.size;
    } else if (e.op === "free") {
      live -= sizes.get(e.id)!;
      sizes.delete(e.id);
    } else if (e.op === "create") {
      bufSizes.set(e.id, e.size);
      held += e.size;
    } else if (e.op === "destroy") {
      held -= bufSizes.get(e.id)!;
      bufSizes.delete(e.id);
    }
  }
  return { live, held };
}

export async function startTfjs(
  source: string,
  meta: Record<string, unknown> = {},
): Promise<TfjsRecording> {
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error("no WebGPU adapter");
  const raw = await adapter.requestDevice({
    requiredLimits: {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
    },
  });
  const info =
    (adapter as unknown as { info?: Record<string, unknown> }).info ?? {};
  const recording = recordDevice(raw, {
    source,
    meta: {
      runtime: "@tensorflow/tfjs-backend-webgpu@4.22.0",
      host: `Deno ${Deno.version.deno}`,
      adapter: {
        vendor: info.vendor,
        architecture: info.architecture,
        description: info.description,
      },
      ...meta,
    },
  });
  if (tf.findBackendFactory("webgpu")) tf.removeBackend("webgpu");
  const backend = new WebGPUBackend(recording.device);
  // deno-lint-ignore no-explicit-any
  const pool = (backend as any).bufferManager;
  recordBufferPool(pool, recording);
  tf.registerBackend("webgpu", () => backend);
  await tf.setBackend("webgpu");
  const checks = { steps: 0, mismatches: 0 };
  return {
    recording,
    pool,
    checks,
    step(name: string) {
      recording.recorder.step(name);
      const { live, held } = traceBytes(recording.recorder.events);
      checks.steps++;
      if (live !== pool.numBytesUsed || held !== pool.numBytesAllocated) {
        checks.mismatches++;
        console.error(
          `${name}: trace live ${live} held ${held}, TF.js used ${pool.numBytesUsed} allocated ${pool.numBytesAllocated}`,
        );
      }
    },
    finish() {
      recording.stop();
      tf.removeBackend("webgpu");
      recording.device.destroy();
    },
  };
}
