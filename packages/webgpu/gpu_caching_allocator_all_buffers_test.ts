// Every buffer of each real runtime trace (traces/<runtime>/*.jsonl.gz:
// storage, uniforms, staging copies) replayed through GpuCachingAllocators
// with their defaults, one per usage, on a mock GPUDevice (exact): what
// `traces/figures.ts` reports as `allot-caching`, all buffers. Peak held
// over peak live, one pass and over 8 warm passes, and the buffers made
// after the first pass, at or below what the defaults reached when they
// were chosen; and on one pass of each trace, the pools' invariants, the
// group's held bytes equal to the device's buffers, everything given back.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { traceOps } from "@allot/trace";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { mockGpu } from "./_test_mock_device.ts";
import { _Usage } from "./_flags.ts";
import { readRecordedTrace } from "../trace/_test_traces.ts";
import { recordedTraceNames } from "../../scripts/bench/recorded_traces.ts";
import { gpuCachingPolicy, measure } from "../../traces/figures.ts";

/**
 * All buffers: [one pass, warm, made after the first pass], 2026-11-25
 * (main's storage policy at b5672b2).
 */
const CEILINGS: Record<string, [number, number, number]> = {
  "onnxruntime-web/attention-varshape.jsonl.gz": [1.0801, 1.0923, 1],
  "onnxruntime-web/conv-varbatch.jsonl.gz": [1.0069, 1.0069, 0],
  "onnxruntime-web/gru-decode.jsonl.gz": [1.0752, 1.2352, 2],
  "onnxruntime-web/mlp-varbatch.jsonl.gz": [1.0044, 1.2796, 1],
  "onnxruntime-web/unet-multisize.jsonl.gz": [1.0254, 1.0254, 0],
  "tfjs-webgpu/beam-search.jsonl.gz": [1.0296, 1.0846, 6],
  "tfjs-webgpu/cnn-training.jsonl.gz": [1.1812, 1.1812, 0],
  "tfjs-webgpu/crnn-gradaccum.jsonl.gz": [1.0915, 1.0915, 0],
  "tfjs-webgpu/detector-fpn.jsonl.gz": [1.0679, 1.1052, 1],
  "tfjs-webgpu/diffusion-denoise.jsonl.gz": [1.1023, 1.2163, 2],
  "tfjs-webgpu/efficientnet-multires.jsonl.gz": [1.0725, 1.0778, 1],
  "tfjs-webgpu/gan-step.jsonl.gz": [1.0285, 1.0285, 0],
  "tfjs-webgpu/kv-decode.jsonl.gz": [1.0536, 1.0536, 0],
  "tfjs-webgpu/layers-fit.jsonl.gz": [1.048, 1.048, 0],
  "tfjs-webgpu/lstm-textgen.jsonl.gz": [1.0814, 1.0831, 1],
  "tfjs-webgpu/mobilenet-224-batch2.jsonl.gz": [1.0163, 1.0163, 0],
  "tfjs-webgpu/mobilenet-inference.jsonl.gz": [1.0194, 1.0194, 0],
  "tfjs-webgpu/resnet-varbatch.jsonl.gz": [1.0675, 1.2112, 34],
  "tfjs-webgpu/seq2seq-decode.jsonl.gz": [1.0272, 1.0272, 0],
  "tfjs-webgpu/transformer-training.jsonl.gz": [1.0602, 1.0602, 0],
  "tfjs-webgpu/transformer-varlen.jsonl.gz": [1.0469, 1.0469, 0],
  "tfjs-webgpu/unet-training.jsonl.gz": [1.1025, 1.1323, 1],
  "tfjs-webgpu/vae-training.jsonl.gz": [1.0986, 1.0986, 0],
  "tfjs-webgpu/vit-varbatch.jsonl.gz": [1.0449, 1.059, 10],
};

const MAPPED = _Usage.MAP_READ | _Usage.MAP_WRITE;

describe("GpuCachingAllocator defaults, all buffers of real runtime traces", () => {
  const policy = gpuCachingPolicy("allot-caching");
  for (const [name, [one, warm, made]] of Object.entries(CEILINGS)) {
    it(`${name}: all buffers at most ${one} one pass, ${warm} warm, ${made} buffers made after the first pass`, async () => {
      const ops = traceOps(await readRecordedTrace(name), "all");
      const m = measure(ops, policy);
      assert.ok(m.onePass <= one, `${m.onePass.toFixed(4)} > ${one}`);
      assert.ok(m.warm <= warm, `warm ${m.warm.toFixed(4)} > ${warm}`);
      assert.ok(m.madeAfterFirst <= made, `${m.madeAfterFirst} > ${made}`);
    });
  }

  it("every recorded trace has its ceiling", () => {
    assert.deepEqual(recordedTraceNames(), Object.keys(CEILINGS).sort());
  });

  it("one pass of every recorded trace: invariants hold, the group counts the device's buffers, everything comes back", async () => {
    for (const name of recordedTraceNames()) {
      const ops = traceOps(await readRecordedTrace(name), "all");
      const gpu = mockGpu();
      Object.assign(gpu.device.limits as unknown as Record<string, number>, {
        minUniformBufferOffsetAlignment: 256,
        maxUniformBufferBindingSize: 64 * 1024,
      });
      const group = GpuCachingAllocator.deviceGroup(gpu.device);
      const pools = new Map<number, GpuCachingAllocator>();
      const live = new Map<number, GpuAllocation>();
      const held = (): number => {
        let n = 0;
        for (const b of gpu.live) n += b.size;
        return n;
      };
      for (let i = 0; i < ops.length; i++) {
        const c = ops.code[i];
        if (c === 0) {
          const usage = ops.usage[i];
          let a = pools.get(usage);
          if (a === undefined) {
            const pooled = (usage & MAPPED) !== 0 ? usage & ~MAPPED : usage;
            a = new GpuCachingAllocator(gpu.device, {
              source: { usage: pooled === 0 ? _Usage.COPY_SRC : pooled },
            });
            pools.set(usage, a);
          }
          live.set(ops.id[i], a.allocate(Math.max(1, ops.size[i])));
        } else if (c === 1) {
          live.get(ops.id[i])!.release();
          live.delete(ops.id[i]);
        } else if (c === 3) {
          group.endStep();
          assert.equal(group.heldBytes, held(), `${name}: held at a step`);
        }
      }
      assert.equal(group.heldBytes, held(), name);
      assert.ok(group.heldBytes <= group.peakHeldBytes, name);
      for (const a of pools.values()) a.validate();
      for (const a of live.values()) a.release();
      for (const a of pools.values()) {
        a.validate();
        assert.equal(a.stats().allocatedBytes.all.current, 0, name);
        a.emptyCache();
      }
      assert.equal(gpu.live.size, 0, name);
      assert.equal(group.heldBytes, 0, name);
    }
  });
});
