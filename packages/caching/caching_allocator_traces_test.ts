// Each real runtime trace (traces/<runtime>/<name>.jsonl.gz, recorded by
// @allot/trace) replayed through CachingAllocator with its default options,
// one allocator per WebGPU usage as GpuCachingAllocator and the
// `allot-caching` replay policy keep them: the invariants (no overlap, stats
// equal a recount, everything returned), and peak held / peak live at or
// below what the defaults reached when they were chosen (traces/README.md),
// for storage buffers and for all buffers. Bytes are exact and
// deterministic: a change to the defaults that holds more fails here.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MockSegmentSource } from "@allot/core";
import { assertDisjoint } from "../core/_test_faults.ts";
import {
  allotCachingQueueOrderPolicy,
  replayTrace,
  type Trace,
  traceOps,
} from "@allot/trace";
import { type CachedBlock, CachingAllocator } from "./caching_allocator.ts";
import { readRecordedTrace } from "../trace/_test_traces.ts";

const root = new URL("../../traces/", import.meta.url);

/**
 * Peak held / peak live the defaults reach: [storage, all buffers]. CNN
 * training rose from 1.1402 (1.1607) with the back-off of giving back
 * (`releaseCachedAboveRatio`): in its first step two 3 MiB segments were
 * given back and made again at the next request; the back-off keeps them and
 * the slack it widened to, and makes 2 fewer buffers after the first step.
 * The MobileNets fell from 1.029 (1.0417) and 1.0126 (1.0229) when a request
 * that would leave a seldom-used tail of an adaptive segment got a segment
 * of its own size. Transformer var-len fell from 1.0408 (1.0542) when a
 * miss above the ratio gave back whole free segments under a quarter of the
 * request after the others. KV decode rose from 1.0475 (1.0557), by 5,120
 * bytes, with room for growing requests (a new segment one step larger once
 * a request has grown by the same step three times; see `WARM`). ResNet
 * var-batch fell from 1.1126 (1.1924), U-Net training's all buffers from
 * 1.1091 and onnxruntime conv's from 1.0456 when a miss at a low, or with
 * nothing active, stopped raising the held peak while whole free segments
 * could make room (ResNet's first batch-1 step after batch 8 made new
 * segments beside 5 MiB of batch-8 ones; the upload pools held one idle
 * segment per batch size). ResNet var-batch fell again, from 1.0683
 * (1.1661), when a miss above the ratio within a cycle kept whole free
 * segments of its pool just short of the request (back11, 2026-11-24).
 * storage13 (2026-11-25): 256-byte granules (WebGPU's storage offset
 * alignment, PyTorch's 512 before) and a segment of just the request at a
 * miss while nothing held is free. Lower: mlp storage 1.0068 -> 1.0000,
 * MobileNets 1.0036/1.0097 -> 1.0000/1.0001, conv 1.0046 -> 1.0005, LSTM
 * 1.0618 -> 1.0422 (all buffers 1.1108 -> 1.0700), CNN 1.1623 -> 1.1597,
 * transformer var-len 1.0362 -> 1.0349. Higher: U-Net training 1.0907 ->
 * 1.1220 (1.1035 -> 1.1336), ResNet 1.0646 -> 1.0789 (1.1489 -> 1.1668), KV
 * decode 1.0502 -> 1.0515, and the mlp trace's all buffers 1.0943 -> 1.1686
 * (its storage pool's first segments are exact, and its peak of all
 * buffers moves to where a 4 MiB upload segment lies free): the layout of
 * free blocks shifts with the granule (the 256-byte granule alone gave
 * U-Net 1.128, ResNet 1.076); see the package README.
 * bytes14 (2026-11-25): a miss whose new segment would raise the held peak
 * counts that segment when giving back (the peak rule, see the package
 * README). Tightened to the new figures (hold-out sets: plus 0.005), one
 * pass [storage, all]: CNN 1.1597 -> 1.1381 (1.1783 -> 1.1567), KV decode
 * 1.0515 -> 1.0409 (1.0557 -> 1.0451), LSTM 1.0422 -> 1.0308 (1.07 ->
 * 1.0585), ResNet 1.079 -> 1.0518 (1.1669 -> 1.1464), U-Net 1.1221 ->
 * 1.1146 (1.1336 -> 1.1262), EfficientNet 1.0631 -> 1.0610, layers-fit
 * 1.0498 -> 1.0135, detector (all buffers), graph network 1.0525 -> 1.0472,
 * super-resolution 1.3240 -> 1.0467 (1.3402 -> 1.0808); warm likewise, and
 * ResNet 28 -> 25 (31 -> 28) buffers made after the first pass. Raised:
 * wide-deep one pass 1.2228 -> 1.2679 (1.2309 -> 1.2761; warm better,
 * 1.4189 -> 1.4045, but 24 -> 29 made), buffers made after the first pass
 * on layers-fit 0 -> 1, beam search 9 -> 12 (warm 1.0634 -> 1.0538),
 * super-resolution 2 -> 21 (warm 1.3867 -> 1.3621). Seq2seq decode 1.0139
 * -> 1.0142 stays under its ceiling.
 */
const CEILINGS: Record<string, [number, number]> = {
  "onnxruntime-web/mlp-varbatch.jsonl.gz": [1.0, 1.1686],
  "tfjs-webgpu/cnn-training.jsonl.gz": [1.1381, 1.1567],
  "tfjs-webgpu/kv-decode.jsonl.gz": [1.0409, 1.0451],
  "tfjs-webgpu/mobilenet-224-batch2.jsonl.gz": [1.0001, 1.0127],
  "tfjs-webgpu/mobilenet-inference.jsonl.gz": [1.0002, 1.0097],
  "tfjs-webgpu/transformer-varlen.jsonl.gz": [1.0349, 1.0452],
  // The hold-out set (traces/README.md): recorded after the defaults were
  // chosen and not tuned on; the figures the defaults reached when they
  // were recorded.
  "onnxruntime-web/conv-varbatch.jsonl.gz": [1.0006, 1.0028],
  "tfjs-webgpu/gan-step.jsonl.gz": [1.0247, 1.0276],
  "tfjs-webgpu/lstm-textgen.jsonl.gz": [1.0308, 1.0585],
  "tfjs-webgpu/resnet-varbatch.jsonl.gz": [1.0518, 1.1464],
  "tfjs-webgpu/transformer-training.jsonl.gz": [1.0581, 1.065],
  "tfjs-webgpu/unet-training.jsonl.gz": [1.1146, 1.1262],
};

/**
 * Over {@linkcode PASSES} warm passes of one instance per trace (what is
 * left live at a pass's end freed), as the warm rows of
 * `packages/webgpu/bench/real_traces.ts`: [device buffers made after the
 * first pass, peak held / peak live] for storage buffers, then for all.
 * Why the buffers after the first pass are made
 * (`packages/trace/bench/warm_misses.ts`): the mlp trace's one, a
 * 4 MiB upload buffer given back before the first pass's peak and needed
 * again at the next pass's start (keeping it would raise the one-pass peak
 * of all buffers from 1.0943 to 1.2872; the back-off keeps it from then
 * on). KV decode made three, in the second and third passes, by
 * fragmentation (its sizes grow by 512 bytes a token, two steps live at a
 * time; a later pass starts from the first's last segments and the steps
 * rotate through them out of phase), at 1.0650 (1.0731), until the room for
 * growing requests (`_growth_room.ts`): none since, at its one-pass figure.
 * ResNet var-batch remade 35 (36) at 1.1126 (1.2391), and the mlp trace's
 * all buffers held 1.2869, until a miss at a low or with nothing active
 * stopped raising the held peak.
 */
const WARM: Record<string, [number, number, number, number]> = {
  "onnxruntime-web/mlp-varbatch.jsonl.gz": [0, 1.0, 1, 1.2731],
  "tfjs-webgpu/cnn-training.jsonl.gz": [0, 1.1381, 0, 1.1567],
  "tfjs-webgpu/kv-decode.jsonl.gz": [0, 1.0409, 0, 1.0451],
  "tfjs-webgpu/mobilenet-224-batch2.jsonl.gz": [0, 1.0001, 0, 1.0127],
  "tfjs-webgpu/mobilenet-inference.jsonl.gz": [0, 1.0002, 0, 1.0097],
  "tfjs-webgpu/transformer-varlen.jsonl.gz": [0, 1.0349, 0, 1.0452],
  // The hold-out set. ResNet with batches 1, 4, 8, 1, 4, 8, 1 remakes 26
  // storage buffers after the first pass (35 as recorded, 30 until a miss
  // kept segments just short of it, back11); U-Net training (batches 4, 8,
  // 2, ...) one (traces/README.md says why).
  "onnxruntime-web/conv-varbatch.jsonl.gz": [0, 1.0006, 0, 1.0028],
  "tfjs-webgpu/gan-step.jsonl.gz": [0, 1.0247, 0, 1.0276],
  "tfjs-webgpu/lstm-textgen.jsonl.gz": [0, 1.0308, 0, 1.0585],
  "tfjs-webgpu/resnet-varbatch.jsonl.gz": [25, 1.0656, 28, 1.2101],
  "tfjs-webgpu/transformer-training.jsonl.gz": [0, 1.0581, 0, 1.065],
  "tfjs-webgpu/unet-training.jsonl.gz": [0, 1.1146, 0, 1.1262],
};
const PASSES = 8;

/**
 * The second hold-out set (traces/README.md): recorded while the pools were
 * being changed by engineers who did not see these traces. [storage, all]
 * one pass, then warm as in {@linkcode WARM}: main's figures when they were
 * recorded (b5d1ad3) plus 0.005 (buffer counts as they were), so that a
 * change to the defaults that holds more on them fails here.
 */
const HOLDOUT2_CEILINGS: Record<string, [number, number]> = {
  "onnxruntime-web/attention-varshape.jsonl.gz": [1.0052, 1.0748],
  "tfjs-webgpu/crnn-gradaccum.jsonl.gz": [1.0604, 1.0757],
  "tfjs-webgpu/diffusion-denoise.jsonl.gz": [1.0924, 1.1104],
  // One pass improved with fit10's held-peak rule (1.115 -> 1.088 storage,
  // 1.130 -> 1.100 all buffers), then with fix11's segments moved between
  // the pools within a cycle (1.066 storage, 1.078 all buffers): tightened.
  "tfjs-webgpu/efficientnet-multires.jsonl.gz": [1.066, 1.0782],
  "tfjs-webgpu/layers-fit.jsonl.gz": [1.0185, 1.0187],
  "tfjs-webgpu/seq2seq-decode.jsonl.gz": [1.0189, 1.023],
};
const HOLDOUT2_WARM: Record<string, [number, number, number, number]> = {
  "onnxruntime-web/attention-varshape.jsonl.gz": [0, 1.0052, 0, 1.0748],
  "tfjs-webgpu/crnn-gradaccum.jsonl.gz": [0, 1.0604, 0, 1.0757],
  "tfjs-webgpu/diffusion-denoise.jsonl.gz": [2, 1.2064, 2, 1.2244],
  // The held-peak rule (fit10, which never saw this trace) made the warm
  // passes worse here (1.176 -> 1.190 storage, 1.191 -> 1.203 all buffers,
  // 12 -> 13 buffers remade after the first pass): the 96 x 96 passes' 216
  // KiB requests took new small-pool segments while the 128 x 128 passes'
  // 384 KiB large-pool segments lay free. fix11 moves such a segment to the
  // pool of a miss that would raise the held peak: 1.066 storage, 1.078 all
  // buffers, none remade. Tightened.
  "tfjs-webgpu/efficientnet-multires.jsonl.gz": [0, 1.066, 0, 1.0782],
  "tfjs-webgpu/layers-fit.jsonl.gz": [1, 1.0548, 1, 1.0536],
  "tfjs-webgpu/seq2seq-decode.jsonl.gz": [0, 1.0189, 0, 1.023],
};

/**
 * The third hold-out set (traces/README.md), recorded while the pools were
 * changed by engineers who did not see it: [storage, all] one pass, then
 * warm as in {@linkcode WARM}; main's figures when they were recorded
 * (9808d3b) plus 0.005 (buffer counts as they were). onnxruntime's GRU
 * decode holds 1.280 of its 0.15 MiB peak in all buffers (its small
 * uniform, upload and readback buffers each in a 4 KiB minimum segment).
 */
const HOLDOUT3_CEILINGS: Record<string, [number, number]> = {
  "onnxruntime-web/gru-decode.jsonl.gz": [1.0095, 1.1922],
  "onnxruntime-web/unet-multisize.jsonl.gz": [1.0053, 1.0257],
  "tfjs-webgpu/beam-search.jsonl.gz": [1.022, 1.0276],
  "tfjs-webgpu/detector-fpn.jsonl.gz": [1.0266, 1.0662],
  "tfjs-webgpu/vae-training.jsonl.gz": [1.1023, 1.1069],
  // One pass fell from 1.0457 (1.0538) when a miss that would raise the held
  // peak, once misses cycle, halved the back-off's slack (hold13): tightened
  // to that plus 0.005.
  "tfjs-webgpu/vit-varbatch.jsonl.gz": [1.0314, 1.0395],
};
const HOLDOUT3_WARM: Record<string, [number, number, number, number]> = {
  "onnxruntime-web/gru-decode.jsonl.gz": [0, 1.0095, 0, 1.1922],
  "onnxruntime-web/unet-multisize.jsonl.gz": [0, 1.0053, 0, 1.0257],
  "tfjs-webgpu/beam-search.jsonl.gz": [12, 1.0588, 12, 1.0643],
  "tfjs-webgpu/detector-fpn.jsonl.gz": [1, 1.0638, 1, 1.1034],
  "tfjs-webgpu/vae-training.jsonl.gz": [0, 1.1023, 0, 1.1069],
  "tfjs-webgpu/vit-varbatch.jsonl.gz": [9, 1.0551, 9, 1.0627],
};

/**
 * The fourth hold-out set (traces/README.md), recorded while the pools were
 * changed by engineers who did not see it: [storage, all] one pass, then
 * warm as in {@linkcode WARM}; main's figures when they were recorded
 * (b5672b2) plus 0.005 (buffer counts as they were). The default pool
 * holds more here than on any earlier set: 1.325 on super-resolution, 1.258
 * on tidy-keep, 1.191 on wide-deep in one pass (1.442 warm, 37 buffers
 * remade); see the README's section for where. Judged after the seventh
 * session's pool changes were merged (256-byte granules, a segment of just
 * the request while nothing held is free, the device group, the back-off's
 * half slack), two rows are worse and raised to the new figures plus 0.005:
 * wide-deep one pass 1.191 -> 1.223 (storage), tidy-keep warm 7 -> 8
 * buffers made after the first pass.
 */
const HOLDOUT4_CEILINGS: Record<string, [number, number]> = {
  "onnxruntime-web/speech-conv1d.jsonl.gz": [1.0265, 1.0565],
  "tfjs-webgpu/graph-network.jsonl.gz": [1.0522, 1.058],
  "tfjs-webgpu/super-resolution.jsonl.gz": [1.0517, 1.0858],
  "tfjs-webgpu/tidy-keep.jsonl.gz": [1.2632, 1.271],
  "tfjs-webgpu/wide-deep.jsonl.gz": [1.2679, 1.2761],
};
const HOLDOUT4_WARM: Record<string, [number, number, number, number]> = {
  "onnxruntime-web/speech-conv1d.jsonl.gz": [0, 1.0265, 0, 1.0565],
  "tfjs-webgpu/graph-network.jsonl.gz": [0, 1.0522, 0, 1.058],
  "tfjs-webgpu/super-resolution.jsonl.gz": [21, 1.3671, 21, 1.38],
  "tfjs-webgpu/tidy-keep.jsonl.gz": [8, 1.2963, 8, 1.304],
  "tfjs-webgpu/wide-deep.jsonl.gz": [37, 1.4095, 37, 1.4176],
};

/**
 * The fifth hold-out set (traces/README.md): jax-js 0.1.25's WebGPU device
 * (its own pool's requests, a runtime the pools had never seen) and two more
 * onnxruntime-web workloads, recorded while the pools were changed by
 * engineers who did not see them: [storage, all] one pass, then warm as in
 * {@linkcode WARM}; main's figures when they were recorded (4cc36ce) plus
 * 0.005 (buffer counts as they were). The jit CNN holds 1.254 (its 92
 * requests a pass: fused kernels, few and large), the jit-compiled
 * training 1.140 in one pass and 1.160 warm with 41 buffers remade. Judged
 * on the merged pools of the eighth session before it merged (the peak rule):
 * the jit CNN 1.037, jit training 1.133 / 1.140 warm with 38 remade, jax-js's
 * KV decode 1.040; those three rows are held at these figures plus 0.005.
 */
const HOLDOUT5_CEILINGS: Record<string, [number, number]> = {
  "jax-webgpu/cnn-jit.jsonl.gz": [1.042, 1.0424],
  "jax-webgpu/jit-training.jsonl.gz": [1.138, 1.138],
  "jax-webgpu/kv-decode.jsonl.gz": [1.0454, 1.046],
  "jax-webgpu/mlp-training.jsonl.gz": [1.0596, 1.0596],
  "jax-webgpu/transformer-varlen.jsonl.gz": [1.0286, 1.0287],
  "onnxruntime-web/kv-cache-decode.jsonl.gz": [1.0061, 1.0523],
  "onnxruntime-web/seq2seq-growing.jsonl.gz": [1.0061, 1.0504],
};
const HOLDOUT5_WARM: Record<string, [number, number, number, number]> = {
  "jax-webgpu/cnn-jit.jsonl.gz": [0, 1.042, 0, 1.0424],
  "jax-webgpu/jit-training.jsonl.gz": [38, 1.145, 38, 1.1451],
  "jax-webgpu/kv-decode.jsonl.gz": [0, 1.0454, 0, 1.046],
  "jax-webgpu/mlp-training.jsonl.gz": [22, 1.0596, 22, 1.0596],
  "jax-webgpu/transformer-varlen.jsonl.gz": [0, 1.0286, 0, 1.0287],
  "onnxruntime-web/kv-cache-decode.jsonl.gz": [0, 1.0061, 0, 1.0523],
  "onnxruntime-web/seq2seq-growing.jsonl.gz": [0, 1.0061, 0, 1.0504],
};

/**
 * The sixth hold-out set (traces/README.md): workloads shaped unlike the
 * earlier traces (a DQN agent's act and train steps interleaved, a
 * mixture-of-experts layer's data-dependent rows per expert, PointNet over
 * point clouds of changing size, a streaming model disposed by hand, a BERT
 * encoder on padding buckets; onnxruntime-web retrieval with `TopK` over a
 * growing bank; jax-js DP-SGD with `vmap`'d per-example gradients),
 * recorded while the pools were changed by engineers who did not see them:
 * [storage, all] one pass, then warm as in {@linkcode WARM}; main's figures
 * when they were recorded (de12950) plus 0.005 (buffer counts as they
 * were). The default pool holds 1.11 to 1.24 on the five TF.js traces and
 * jax-js's DP-SGD in one pass (streaming chunks 1.242, PointNet 1.197, warm
 * 1.255 with 10 buffers remade; DP-SGD warm 1.213, 16 remade).
 */
const HOLDOUT6_CEILINGS: Record<string, [number, number]> = {
  "jax-webgpu/dp-sgd.jsonl.gz": [1.1303, 1.1303],
  "onnxruntime-web/retrieval-topk.jsonl.gz": [1.0059, 1.0776],
  "tfjs-webgpu/bert-buckets.jsonl.gz": [1.1168, 1.1222],
  "tfjs-webgpu/dqn-agent.jsonl.gz": [1.1575, 1.1805],
  "tfjs-webgpu/moe-routing.jsonl.gz": [1.1419, 1.1796],
  "tfjs-webgpu/pointnet-varsize.jsonl.gz": [1.2021, 1.203],
  "tfjs-webgpu/streaming-chunks.jsonl.gz": [1.2469, 1.2366],
};
const HOLDOUT6_WARM: Record<string, [number, number, number, number]> = {
  "jax-webgpu/dp-sgd.jsonl.gz": [16, 1.2176, 16, 1.2176],
  "onnxruntime-web/retrieval-topk.jsonl.gz": [0, 1.0059, 0, 1.0776],
  "tfjs-webgpu/bert-buckets.jsonl.gz": [0, 1.1168, 0, 1.1222],
  "tfjs-webgpu/dqn-agent.jsonl.gz": [0, 1.1575, 0, 1.1805],
  "tfjs-webgpu/moe-routing.jsonl.gz": [0, 1.1419, 0, 1.1796],
  "tfjs-webgpu/pointnet-varsize.jsonl.gz": [10, 1.2601, 10, 1.261],
  "tfjs-webgpu/streaming-chunks.jsonl.gz": [1, 1.2469, 1, 1.2366],
};

/** Buffers made after the first of `PASSES` passes, and peak held / live. */
function warmPasses(trace: Trace, usage: "storage" | "all"): [number, number] {
  const ops = traceOps(trace, usage);
  const p = allotCachingQueueOrderPolicy.create();
  const size = new Map<number, number>();
  let afterFirst = 0, peak = 0, live = 0, peakLive = 0;
  try {
    for (let pass = 0; pass < PASSES; pass++) {
      for (let i = 0; i < ops.length; i++) {
        const c = ops.code[i];
        if (c === 0) {
          p.alloc(ops.id[i], ops.size[i], ops.usage[i]);
          size.set(ops.id[i], Math.max(1, ops.size[i]));
          live += Math.max(1, ops.size[i]);
          peak = Math.max(peak, p.heldBytes());
          peakLive = Math.max(peakLive, live);
        } else if (c === 1) {
          p.free(ops.id[i]);
          live -= size.get(ops.id[i])!;
          size.delete(ops.id[i]);
        } else p.sync(c === 2 ? "fence" : "step");
      }
      for (const [id, n] of size) {
        p.free(id);
        live -= n;
      }
      size.clear();
      p.sync("step");
      if (pass === 0) afterFirst = p.buffersCreated();
    }
    return [p.buffersCreated() - afterFirst, peak / peakLive];
  } finally {
    p.dispose?.();
  }
}

/** Replays all buffers, one default allocator per usage, checking as it goes. */
function replayChecked(trace: Trace): void {
  const ops = traceOps(trace, "all");
  const pools = new Map<
    number,
    { a: CachingAllocator<{ id: number }>; s: MockSegmentSource }
  >();
  const live = new Map<
    number,
    { a: CachingAllocator<{ id: number }>; b: CachedBlock<{ id: number }> }
  >();
  const checkAll = () => {
    // Keyed by the memory object: each mock source numbers its own.
    let count = 0;
    for (const { a, s } of pools.values()) {
      a.validate();
      const stats = a.memoryStats();
      assert.equal(stats.reservedBytes.all.current, s.reservedBytes);
      assert.equal(stats.segment.all.current, s.liveSegmentCount);
      count += stats.allocation.all.current;
    }
    assert.equal(count, live.size);
    assertDisjoint(
      [...live.values()].map(({ b }) =>
        [b.memory, b.byteOffset, b.byteOffset + b.blockByteLength] as const
      ),
    );
  };
  for (let i = 0; i < ops.length; i++) {
    const code = ops.code[i];
    if (code === 0) {
      const usage = ops.usage[i];
      let p = pools.get(usage);
      if (!p) {
        const s = new MockSegmentSource({ alignment: 256 });
        pools.set(usage, p = { a: new CachingAllocator(s), s });
      }
      live.set(ops.id[i], {
        a: p.a,
        b: p.a.allocate(Math.max(1, ops.size[i])),
      });
    } else if (code === 1) {
      const l = live.get(ops.id[i])!;
      l.a.free(l.b);
      live.delete(ops.id[i]);
    } else if (code === 3) {
      checkAll();
    }
  }
  checkAll();
  for (const l of live.values()) l.a.free(l.b);
  live.clear();
  for (const { a, s } of pools.values()) {
    a.emptyCache();
    assert.equal(s.reservedBytes, 0);
    assert.equal(a.memoryStats().allocatedBytes.all.current, 0);
  }
}

describe("CachingAllocator defaults on real runtime traces", () => {
  it("every recorded trace has a ceiling here", () => {
    const names = [...Deno.readDirSync(root)].filter((d) => d.isDirectory)
      .flatMap((d) =>
        [...Deno.readDirSync(new URL(`${d.name}/`, root))].map((e) =>
          `${d.name}/${e.name}`
        )
      ).filter((n) => n.endsWith(".jsonl.gz")).sort();
    assert.deepEqual(
      names,
      Object.keys({
        ...CEILINGS,
        ...HOLDOUT2_CEILINGS,
        ...HOLDOUT3_CEILINGS,
        ...HOLDOUT4_CEILINGS,
        ...HOLDOUT5_CEILINGS,
        ...HOLDOUT6_CEILINGS,
      }).sort(),
    );
  });
  for (
    const [name, [storage, all]] of Object.entries({
      ...CEILINGS,
      ...HOLDOUT2_CEILINGS,
      ...HOLDOUT3_CEILINGS,
      ...HOLDOUT4_CEILINGS,
      ...HOLDOUT5_CEILINGS,
      ...HOLDOUT6_CEILINGS,
    })
  ) {
    it(`${name}: peak held / peak live at most ${storage} (storage) and ${all} (all buffers); no overlap, stats add up, everything returned`, async () => {
      const trace = await readRecordedTrace(name);
      for (
        const [usage, ceiling] of [["storage", storage], ["all", all]] as const
      ) {
        const report = replayTrace(trace, {
          usage,
          repeat: 1,
          policies: [allotCachingQueueOrderPolicy],
        });
        const held = report.policies[0].peakReservedBytes;
        const ratio = held / report.peakRequestedBytes;
        assert.ok(
          ratio <= ceiling,
          `${usage}: ${ratio.toFixed(4)} > ${ceiling}`,
        );
      }
      replayChecked(trace);
    });
  }
  it("every recorded trace has warm ceilings here", () => {
    assert.deepEqual(Object.keys(WARM).sort(), Object.keys(CEILINGS).sort());
    assert.deepEqual(
      Object.keys(HOLDOUT2_WARM).sort(),
      Object.keys(HOLDOUT2_CEILINGS).sort(),
    );
    assert.deepEqual(
      Object.keys(HOLDOUT3_WARM).sort(),
      Object.keys(HOLDOUT3_CEILINGS).sort(),
    );
    assert.deepEqual(
      Object.keys(HOLDOUT4_WARM).sort(),
      Object.keys(HOLDOUT4_CEILINGS).sort(),
    );
    assert.deepEqual(
      Object.keys(HOLDOUT5_WARM).sort(),
      Object.keys(HOLDOUT5_CEILINGS).sort(),
    );
    assert.deepEqual(
      Object.keys(HOLDOUT6_WARM).sort(),
      Object.keys(HOLDOUT6_CEILINGS).sort(),
    );
  });
  for (
    const [name, [made, storage, madeAll, all]] of Object.entries({
      ...WARM,
      ...HOLDOUT2_WARM,
      ...HOLDOUT3_WARM,
      ...HOLDOUT4_WARM,
      ...HOLDOUT5_WARM,
      ...HOLDOUT6_WARM,
    })
  ) {
    it(`${name}, ${PASSES} warm passes: at most ${made} (${madeAll}) device buffers made after the first, peak held / peak live at most ${storage} (${all}) for storage (all) buffers`, async () => {
      const trace = await readRecordedTrace(name);
      for (
        const [usage, most, ceiling] of [
          ["storage", made, storage],
          ["all", madeAll, all],
        ] as const
      ) {
        const [after, ratio] = warmPasses(trace, usage);
        assert.ok(after <= most, `${usage}: ${after} > ${most} buffers`);
        assert.ok(
          ratio <= ceiling,
          `${usage}: ${ratio.toFixed(4)} > ${ceiling}`,
        );
      }
    });
  }
});
