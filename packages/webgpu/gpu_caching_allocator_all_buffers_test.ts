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
import { mockGpuWithUniforms } from "./_test_mock_device.ts";
import { _Usage } from "./_flags.ts";
import { readRecordedTrace } from "../trace/_test_traces.ts";
import { recordedTraceNames } from "../../scripts/bench/recorded_traces.ts";
import { gpuCachingPolicy, measure } from "../../traces/figures.ts";

/**
 * All buffers: [one pass, warm, made after the first pass], 2026-11-25
 * (the storage policy's 256-byte granules and segments of just the request
 * while nothing held is free, with the device group); then the group's
 * holding-nothing rule at 12 misses, backing off at a regret instead of
 * stopping: tightened, attention 1.0576 -> 1.0333 one pass, GRU decode
 * 1.1888 -> 1.0416, MLP 1.1656 -> 1.0802, transformer training warm 1.0689
 * -> 1.065 (1 -> 0 made); raised, GRU warm 1.1888 -> 1.1952 (0 -> 1 made),
 * MLP warm 1.2725 -> 1.2731, attention 1 -> 2 made, transformer training
 * one pass 1.0588 -> 1.065. Then (eighth session) a member holding under
 * 1/8 of what an active member holds, with its miss, no longer takes that
 * member's segments once its misses cycle: tightened, wide-deep warm 1.4909
 * -> 1.4274 (28 -> 25 made; one pass raised 1.226 -> 1.2312), ViT 1.043,
 * 1.0654, 12 -> 1.0262, 1.063, 11, CRNN 1.0687 -> 1.0678, ResNet warm 1.2235
 * -> 1.2161; raised, ResNet one pass 1.0818 -> 1.0871 and 36 -> 38 made.
 * With bytes14's peak rule merged beside it (eighth session), every row
 * regenerated from the merged pools: tightened, CNN 1.1783 -> 1.1567, KV
 * 1.0543 -> 1.0437, LSTM 1.0618 -> 1.0504, U-Net 1.1336 -> 1.1262, ResNet
 * 1.0871 -> 1.0599 (warm 1.2107, 38 -> 36 made), layers-fit one pass 1.0486
 * -> 1.0137, graph network 1.057 -> 1.0517, super-resolution 1.3711 ->
 * 1.0919 (warm 1.4295 -> 1.4071), wide-deep warm 1.4274 -> 1.413; raised,
 * buffers made after the first pass: beam search 9 -> 12, layers-fit 0 -> 1,
 * super-resolution 5 -> 24, wide-deep 25 -> 30; wide-deep one pass 1.2312 ->
 * 1.2763, seq2seq decode 1.018 -> 1.0183. The fourth hold-out set's rows
 * (speech conv1d, graph network, super-resolution, tidy-keep, wide-deep) are
 * sorted in with the rest. The fifth hold-out set (jax-js 0.1.25 WebGPU,
 * onnxruntime-web seq2seq-growing and kv-cache-decode), recorded at 4cc36ce
 * (jit CNN 1.2546, jit training 1.1401 / 1.1597 and 41 made, jax KV 1.0641,
 * KV cache warm 1.0738 and 24 made) and judged on the merged pools before it
 * merged: the figures here. Then (ninth session, allbuf16) a copy pool in the
 * group borrows a storage pool's whole free segment of exactly the request's
 * size while storage is at most half allocated: tightened, attention warm
 * 1.0698 -> 1.0455 (2 -> 1 made), KV cache 19 -> 18 made, seq2seq growing
 * warm 1.0455 -> 1.0295 (1 -> 0 made), diffusion 1.1054 -> 1.0969 (warm
 * 1.2194 -> 1.2151), MobileNet 1.0127 -> 1.0001 and 1.0097 -> 1.0004, ResNet
 * warm 1.2107 -> 1.1941 (36 -> 28 made), transformer training 1.065 ->
 * 1.0638, U-Net training 1.1262 -> 1.1206; raised, diffusion 2 -> 3 made.
 * The sixth hold-out set (TF.js DQN agent, MoE
 * routing, PointNet var-size, streaming chunks, BERT buckets; onnxruntime-web
 * retrieval-topk; jax-js DP-SGD), recorded at de12950: its figures then.
 */
const CEILINGS: Record<string, [number, number, number]> = {
  "jax-webgpu/cnn-jit.jsonl.gz": [1.0374, 1.0374, 0],
  "jax-webgpu/dp-sgd.jsonl.gz": [1.1253, 1.2126, 16],
  "jax-webgpu/jit-training.jsonl.gz": [1.1331, 1.1401, 38],
  "jax-webgpu/kv-decode.jsonl.gz": [1.0411, 1.0411, 0],
  "jax-webgpu/mlp-training.jsonl.gz": [1.0546, 1.0546, 22],
  "jax-webgpu/transformer-varlen.jsonl.gz": [1.0238, 1.0238, 0],
  "onnxruntime-web/attention-varshape.jsonl.gz": [1.0333, 1.0455, 1],
  "onnxruntime-web/conv-varbatch.jsonl.gz": [1.0018, 1.0018, 0],
  "onnxruntime-web/gru-decode.jsonl.gz": [1.0416, 1.1952, 1],
  "onnxruntime-web/kv-cache-decode.jsonl.gz": [1.0328, 1.053, 18],
  "onnxruntime-web/mlp-varbatch.jsonl.gz": [1.0802, 1.2731, 1],
  "onnxruntime-web/retrieval-topk.jsonl.gz": [1.0721, 1.0721, 0],
  "onnxruntime-web/seq2seq-growing.jsonl.gz": [1.0295, 1.0295, 0],
  "onnxruntime-web/speech-conv1d.jsonl.gz": [1.0293, 1.0293, 0],
  "onnxruntime-web/unet-multisize.jsonl.gz": [1.0179, 1.0179, 0],
  "tfjs-webgpu/beam-search.jsonl.gz": [1.0226, 1.0593, 12],
  "tfjs-webgpu/bert-buckets.jsonl.gz": [1.1172, 1.1172, 0],
  "tfjs-webgpu/cnn-training.jsonl.gz": [1.1567, 1.1567, 0],
  "tfjs-webgpu/crnn-gradaccum.jsonl.gz": [1.0677, 1.0677, 0],
  "tfjs-webgpu/detector-fpn.jsonl.gz": [1.0613, 1.0985, 1],
  "tfjs-webgpu/diffusion-denoise.jsonl.gz": [1.0969, 1.2151, 3],
  "tfjs-webgpu/dqn-agent.jsonl.gz": [1.1688, 1.1688, 0],
  "tfjs-webgpu/efficientnet-multires.jsonl.gz": [1.0679, 1.0732, 1],
  "tfjs-webgpu/gan-step.jsonl.gz": [1.0276, 1.0276, 0],
  "tfjs-webgpu/graph-network.jsonl.gz": [1.0517, 1.0517, 0],
  "tfjs-webgpu/kv-decode.jsonl.gz": [1.0437, 1.0437, 0],
  "tfjs-webgpu/layers-fit.jsonl.gz": [1.0137, 1.0486, 1],
  "tfjs-webgpu/lstm-textgen.jsonl.gz": [1.0504, 1.0504, 0],
  "tfjs-webgpu/mobilenet-224-batch2.jsonl.gz": [1.0001, 1.0001, 0],
  "tfjs-webgpu/mobilenet-inference.jsonl.gz": [1.0004, 1.0004, 0],
  "tfjs-webgpu/moe-routing.jsonl.gz": [1.1757, 1.1757, 0],
  "tfjs-webgpu/pointnet-varsize.jsonl.gz": [1.198, 1.256, 10],
  "tfjs-webgpu/resnet-varbatch.jsonl.gz": [1.0599, 1.1941, 28],
  "tfjs-webgpu/seq2seq-decode.jsonl.gz": [1.0183, 1.0183, 0],
  "tfjs-webgpu/streaming-chunks.jsonl.gz": [1.2316, 1.2316, 1],
  "tfjs-webgpu/super-resolution.jsonl.gz": [1.0919, 1.4071, 24],
  "tfjs-webgpu/tidy-keep.jsonl.gz": [1.2592, 1.292, 8],
  "tfjs-webgpu/transformer-training.jsonl.gz": [1.0638, 1.0638, 0],
  "tfjs-webgpu/transformer-varlen.jsonl.gz": [1.0452, 1.0452, 0],
  "tfjs-webgpu/unet-training.jsonl.gz": [1.1206, 1.1206, 0],
  "tfjs-webgpu/vae-training.jsonl.gz": [1.1019, 1.1019, 0],
  "tfjs-webgpu/vit-varbatch.jsonl.gz": [1.0261, 1.0583, 11],
  "tfjs-webgpu/wide-deep.jsonl.gz": [1.2763, 1.413, 30],
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
      const gpu = mockGpuWithUniforms();
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
