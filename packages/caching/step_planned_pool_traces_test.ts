// Each real runtime trace (traces/<runtime>/<name>.jsonl.gz, recorded by
// @allot/trace) replayed through StepPlannedPool, one pool per WebGPU usage
// as a WebGPU runtime would keep them: invariants only (the figures belong
// to packages/webgpu/bench/real_traces.ts).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MockSegmentSource } from "@allot/core";
import { assertDisjoint } from "../core/_test_faults.ts";
import { traceOps } from "@allot/trace";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";
import { StepPoolGroup } from "./step_pool_group.ts";
import { readRecordedTrace } from "../trace/_test_traces.ts";

const root = new URL("../../traces/", import.meta.url);
const names = [...Deno.readDirSync(root)].filter((d) => d.isDirectory)
  .flatMap((d) =>
    [...Deno.readDirSync(new URL(`${d.name}/`, root))].map((e) =>
      `${d.name}/${e.name}`
    )
  ).filter((n) => n.endsWith(".jsonl.gz")).sort();

/** Live bytes now, and the peaks of live and held bytes so far. */
interface Figures {
  live: number;
  peakLive: number;
  peakHeld: number;
}

/** Where a pass sends each request, and what it reads and marks. */
interface PassTarget {
  /** The pool that serves op `i`. */
  poolOf(i: number): StepPlannedPool;
  /** Bytes held now (one pool's, or a group's). */
  held(): number;
  /** A step mark. */
  endStep(): void;
}

/** A target of one pool. */
function onePool(pool: StepPlannedPool): PassTarget {
  return {
    poolOf: () => pool,
    held: () => pool.reservedBytes,
    endStep: () => pool.endStep(),
  };
}

/**
 * One pass over `ops` as a runtime reruns its loop: requests and frees,
 * a step mark at each mark, what is left live at the end freed, then a step
 * mark. `figures` goes on from the pass before.
 */
function replayPass(
  ops: ReturnType<typeof traceOps>,
  target: PassTarget,
  figures: Figures,
): void {
  const blocks = new Map<number, [StepPlannedPool, PlannedBlock]>();
  for (let i = 0; i < ops.length; i++) {
    const code = ops.code[i];
    if (code === 0) {
      const pool = target.poolOf(i);
      const size = Math.max(1, ops.size[i]);
      blocks.set(ops.id[i], [pool, pool.allocate(size)]);
      figures.live += size;
      if (figures.live > figures.peakLive) figures.peakLive = figures.live;
      const held = target.held();
      if (held > figures.peakHeld) figures.peakHeld = held;
    } else if (code === 1) {
      const [pool, block] = blocks.get(ops.id[i])!;
      figures.live -= block.requestedByteLength;
      pool.free(block);
      blocks.delete(ops.id[i]);
    } else if (code === 3) target.endStep();
  }
  for (const [pool, block] of blocks.values()) {
    figures.live -= block.requestedByteLength;
    pool.free(block);
  }
  target.endStep();
}

describe("StepPlannedPool on real runtime traces", () => {
  it("there are real traces to replay", () => {
    assert.ok(names.length >= 4, `found ${names.join(", ")}`);
  });
  for (const name of names) {
    it(`${name}: no overlap, stats add up, everything returned`, async () => {
      const trace = await readRecordedTrace(name);
      const ops = traceOps(trace, "all");
      const sources = new Map<number, MockSegmentSource>();
      const pools = new Map<number, StepPlannedPool>();
      const live = new Map<
        number,
        { pool: StepPlannedPool; block: PlannedBlock; size: number }
      >();
      let requestedBytes = 0;
      const checkAll = () => {
        let sum = 0;
        for (const [usage, pool] of pools) {
          pool.validate();
          assert.equal(pool.reservedBytes, sources.get(usage)!.reservedBytes);
          sum += pool.requestedBytes;
        }
        assert.equal(sum, requestedBytes);
        // live blocks of one memory never overlap
        assertDisjoint(
          [...live.values()].map(({ block }) =>
            [
              block.memory,
              block.byteOffset,
              block.byteOffset + block.byteLength,
            ] as const
          ),
        );
      };
      for (let i = 0; i < ops.length; i++) {
        const code = ops.code[i];
        if (code === 0) {
          const usage = ops.usage[i];
          let pool = pools.get(usage);
          if (!pool) {
            const source = new MockSegmentSource({ alignment: 256 });
            sources.set(usage, source);
            pools.set(usage, pool = new StepPlannedPool(source));
          }
          const size = Math.max(1, ops.size[i]);
          live.set(ops.id[i], { pool, block: pool.allocate(size), size });
          requestedBytes += size;
        } else if (code === 1) {
          const l = live.get(ops.id[i])!;
          l.pool.free(l.block);
          live.delete(ops.id[i]);
          requestedBytes -= l.size;
        } else if (code === 3) {
          for (const pool of pools.values()) pool.endStep();
          checkAll();
        }
      }
      checkAll();
      for (const l of live.values()) l.pool.free(l.block);
      for (const [usage, pool] of pools) {
        pool.emptyCache();
        assert.equal(pool.reservedBytes, 0);
        assert.equal(sources.get(usage)!.reservedBytes, 0);
      }
    });
  }

  // Storage requests in warm passes through one pool (what is left live at
  // a pass's end freed, then a step mark), as a runtime reuses its pool: the
  // pass after which no segment is made (passes repeat on every trace) and
  // the first pass's peak held / peak live (exact on a mock source)
  const settled: Record<string, number> = {
    "onnxruntime-web/mlp-varbatch": 1,
    "tfjs-webgpu/mobilenet-224-batch2": 1,
    "tfjs-webgpu/mobilenet-inference": 1,
    "tfjs-webgpu/transformer-varlen": 1,
    // the weights made each training step take turns in two places outside
    // the arena; a segment made for one gives back the free segments too
    // small for it first (giving back the least recently used made one in
    // the second pass)
    "tfjs-webgpu/cnn-training": 1,
    // the growing KV-cache blocks outlive their step: a request a little
    // larger than the planned one in its place (which outlived its step)
    // stays out of the arena, so the caches take turns in segments of their
    // own from the first pass on; two small segments given back within the
    // first pass (to keep held bytes in bounds) are made again in the second
    // (52 segments made after the first pass while the caches sat in the
    // arena and each pass placed them elsewhere; 60 over nine passes while
    // small blocks that outlived their step took the tails of the cache
    // blocks' segments, 230 when a plan 256 bytes over the arena made a new
    // arena and gave every free segment back)
    "tfjs-webgpu/kv-decode": 2,
  };
  /** Segments made after the first pass, at most. */
  const madeAfterFirst: Record<string, number> = {
    "tfjs-webgpu/kv-decode": 2,
  };
  for (const [name, after] of Object.entries(settled)) {
    it(`${name}: no segment made after pass ${after} of warm passes, peak held <= 1.10 peak live`, async () => {
      const trace = await readRecordedTrace(`${name}.jsonl.gz`);
      const ops = traceOps(trace, "storage");
      const source = new MockSegmentSource({ alignment: 256 });
      const pool: StepPlannedPool = new StepPlannedPool(source);
      const target = onePool(pool);
      const made: number[] = [];
      const f: Figures = { live: 0, peakLive: 0, peakHeld: 0 };
      for (let pass = 0; pass < after + 3; pass++) {
        replayPass(ops, target, f);
        made.push(source.allocationCount);
        if (pass === 0) {
          assert.ok(
            f.peakHeld <= 1.1 * f.peakLive,
            `first pass: peak held ${f.peakHeld}, peak live ${f.peakLive}`,
          );
        }
      }
      pool.validate();
      assert.equal(
        made.at(-1),
        made[after - 1],
        `segments made by pass: ${made}`,
      );
      assert.ok(
        made.at(-1)! - made[0] <= (madeAfterFirst[name] ?? 0),
        `segments made by pass: ${made}`,
      );
      // over all the passes too (kv-decode held 1.17 while small blocks
      // pinned the growing blocks' segments)
      assert.ok(
        f.peakHeld <= 1.1 * f.peakLive,
        `warm passes: peak held ${f.peakHeld}, peak live ${f.peakLive}`,
      );
    });
  }

  // All buffers through one pool per WebGPU usage in a StepPoolGroup (as
  // the bench's replay policy keeps them), one pass then warm passes: peak
  // held / peak live exact on mock sources, at most what the pools reach
  // now (packages/webgpu/BENCHMARKS.md). cnn-training's second step (no
  // optimizer state made) follows the first step's plan past the requests
  // it skips (it fell back to best fit and held 1.114); mobilenet-inference
  // paid 0.3% for it (a temporary the size of a weight next to it in the
  // first step is taken for the weight and kept out of the arena)
  // cnn-training: 1.068 before greedy-by-size broke size ties by the
  // longer life (the tie-break took U-Net training from 1.114 to 1.097 and
  // GAN's warm remakes from 32 to 5). gan-step, transformer-training,
  // unet-training: blocks that outlive their step, made while their
  // previous generation lives, take free arena ranges where a segment would
  // break the bound (1.177, 1.200, 1.114 before: the arena's peak and the
  // carried blocks' peak, kept apart, added up)
  const allBuffers: Record<string, [onePass: number, warm: number]> = {
    "onnxruntime-web/mlp-varbatch": [1.090, 1.100],
    "tfjs-webgpu/cnn-training": [1.075, 1.075],
    "tfjs-webgpu/gan-step": [1.097, 1.097],
    "tfjs-webgpu/transformer-training": [1.1, 1.102],
    "tfjs-webgpu/unet-training": [1.098, 1.098],
    // (1.042 in one pass while the caches sat in the arena, at the cost of
    // 24 buffers made over later passes)
    "tfjs-webgpu/kv-decode": [1.099, 1.1],
    "tfjs-webgpu/mobilenet-224-batch2": [1.013, 1.013],
    "tfjs-webgpu/mobilenet-inference": [1.015, 1.015],
    "tfjs-webgpu/transformer-varlen": [1.015, 1.015],
  };
  // The second hold-out set (traces/README.md), recorded while the pools
  // were changed by engineers who did not see it: main's figures at
  // recording (b5d1ad3) plus 0.005. Diffusion, seq2seq and the conv+GRU
  // training loop held more over warm passes than in one (buffers remade:
  // 1.2903, 1.2754, 1.2942 allowed); with the arena serving steps that
  // leave their plans as a heap (issue #15), their ceilings are the
  // figures they reach now (1.1108, 1.1038, 1.1020 warm) plus 0.001
  const holdout2: Record<string, [onePass: number, warm: number]> = {
    "onnxruntime-web/attention-varshape": [1.0402, 1.0798],
    "tfjs-webgpu/crnn-gradaccum": [1.1094, 1.1119],
    "tfjs-webgpu/diffusion-denoise": [1.1038, 1.1048],
    "tfjs-webgpu/efficientnet-multires": [1.0271, 1.0271],
    "tfjs-webgpu/layers-fit": [1.0898, 1.0898],
    "tfjs-webgpu/seq2seq-decode": [1.0362, 1.1030],
  };
  // The third hold-out set (traces/README.md), recorded while the pools
  // were changed by engineers who did not see it: main's figures at
  // recording (9808d3b) plus 0.005. Beam search and the VAE hold more over
  // warm passes than in one; onnxruntime's GRU decode holds 1.107 of a
  // 0.15 MiB peak in one pass
  const holdout3: Record<string, [onePass: number, warm: number]> = {
    "onnxruntime-web/gru-decode": [1.1122, 1.1362],
    "onnxruntime-web/unet-multisize": [1.0232, 1.0232],
    "tfjs-webgpu/beam-search": [1.0387, 1.0796],
    "tfjs-webgpu/detector-fpn": [1.0652, 1.0698],
    "tfjs-webgpu/vae-training": [1.1016, 1.1459],
    "tfjs-webgpu/vit-varbatch": [1.0226, 1.0226],
  };
  // The fourth hold-out set (traces/README.md), recorded while the pools
  // were changed by engineers who did not see it: main's figures at
  // recording (b5672b2) plus 0.005
  const holdout4: Record<string, [onePass: number, warm: number]> = {
    "onnxruntime-web/speech-conv1d": [1.0216, 1.0614],
    "tfjs-webgpu/graph-network": [1.0136, 1.0423],
    "tfjs-webgpu/super-resolution": [1.0753, 1.0753],
    "tfjs-webgpu/tidy-keep": [1.0336, 1.0336],
    "tfjs-webgpu/wide-deep": [1.3449, 1.3449],
  };
  // The fifth hold-out set (traces/README.md): jax-js 0.1.25's WebGPU
  // device and two more onnxruntime-web workloads, recorded while the pools
  // were changed by engineers who did not see them: main's figures at
  // recording (4cc36ce) plus 0.005
  const holdout5: Record<string, [onePass: number, warm: number]> = {
    "jax-webgpu/cnn-jit": [1.1813, 1.1813],
    "jax-webgpu/jit-training": [1.1116, 1.1116],
    "jax-webgpu/kv-decode": [1.0984, 1.1034],
    "jax-webgpu/mlp-training": [1.0228, 1.0799],
    "jax-webgpu/transformer-varlen": [1.0086, 1.0097],
    "onnxruntime-web/kv-cache-decode": [1.0474, 1.0685],
    "onnxruntime-web/seq2seq-growing": [1.0536, 1.0536],
  };
  // The sixth hold-out set (traces/README.md): a DQN agent's act and train
  // steps interleaved, MoE routing, PointNet over changing point clouds, a
  // streaming model disposed by hand, BERT on padding buckets, onnxruntime
  // retrieval with TopK, jax-js DP-SGD; recorded while the pools were
  // changed by engineers who did not see them: main's figures at recording
  // (de12950) plus 0.005
  const holdout6: Record<string, [onePass: number, warm: number]> = {
    "jax-webgpu/dp-sgd": [1.3773, 1.432],
    "onnxruntime-web/retrieval-topk": [1.1029, 1.103],
    "tfjs-webgpu/bert-buckets": [1.0562, 1.0947],
    "tfjs-webgpu/dqn-agent": [1.2219, 1.2316],
    "tfjs-webgpu/moe-routing": [1.0899, 1.0921],
    "tfjs-webgpu/pointnet-varsize": [1.1571, 1.1571],
    "tfjs-webgpu/streaming-chunks": [1.217, 1.217],
  };
  for (
    const [name, [onePass, warm]] of Object.entries({
      ...allBuffers,
      ...holdout2,
      ...holdout3,
      ...holdout4,
      ...holdout5,
      ...holdout6,
    })
  ) {
    it(`${name}, all buffers in a StepPoolGroup: peak held <= ${onePass} peak live in one pass, ${warm} over warm passes`, async () => {
      const trace = await readRecordedTrace(`${name}.jsonl.gz`);
      const ops = traceOps(trace, "all");
      const group = new StepPoolGroup();
      const pools = new Map<number, StepPlannedPool>();
      const f: Figures = { live: 0, peakLive: 0, peakHeld: 0 };
      const ratios: number[] = [];
      // one pool per WebGPU usage, made at its first request
      const target: PassTarget = {
        poolOf(i) {
          let pool = pools.get(ops.usage[i]);
          if (!pool) {
            const source = new MockSegmentSource({ alignment: 256 });
            pools.set(
              ops.usage[i],
              pool = new StepPlannedPool(source, { group }),
            );
          }
          return pool;
        },
        held: () => group.reservedBytes,
        endStep: () => group.endStep(),
      };
      for (let pass = 0; pass < 4; pass++) {
        replayPass(ops, target, f);
        ratios.push(f.peakHeld / f.peakLive);
      }
      for (const pool of pools.values()) pool.validate();
      assert.equal(group.peakRequestedBytes, f.peakLive);
      assert.ok(ratios[0] <= onePass, `one pass: ${ratios[0]}`);
      assert.ok(ratios[3] <= warm, `warm passes: ${ratios}`);
    });
  }

  // Training steps that carry state to the next step (a GAN's two models,
  // a transformer's backward pass and Adam slots, U-Net with batch sizes
  // that change): storage buffers, one pass and four warm passes
  const carried: Record<string, number> = {
    "tfjs-webgpu/gan-step": 1.094,
    "tfjs-webgpu/transformer-training": 1.1,
    "tfjs-webgpu/unet-training": 1.081,
  };
  for (const [name, most] of Object.entries(carried)) {
    it(`${name}, storage buffers: peak held <= ${most} peak live over one and four warm passes`, async () => {
      const trace = await readRecordedTrace(`${name}.jsonl.gz`);
      const ops = traceOps(trace, "storage");
      const pool: StepPlannedPool = new StepPlannedPool(
        new MockSegmentSource({ alignment: 256 }),
      );
      const target = onePool(pool);
      const f: Figures = { live: 0, peakLive: 0, peakHeld: 0 };
      for (let pass = 0; pass < 5; pass++) {
        replayPass(ops, target, f);
        assert.ok(
          f.peakHeld <= most * f.peakLive,
          `pass ${pass}: peak held ${f.peakHeld}, peak live ${f.peakLive}`,
        );
      }
      pool.validate();
    });
  }

  // Steps that never repeat within a pass (conv+GRU training with gradient
  // accumulation and a memory bank, seq2seq decoding, transformer training
  // that carries its state): storage buffers, one pass and four warm passes
  // of one pool. While one of its last steps left its plan, the arena
  // serves as a heap (issue #15): peak held within 1.10 peak live, and few
  // segments made after the first pass (main: 725, 88 and 28 over these
  // four passes, crnn at 1.167 peak held; now 46, 37 and 18)
  const neverRepeat: Record<string, number> = {
    "tfjs-webgpu/crnn-gradaccum": 50,
    "tfjs-webgpu/seq2seq-decode": 40,
    "tfjs-webgpu/transformer-training": 20,
  };
  for (const [name, most] of Object.entries(neverRepeat)) {
    it(`${name}, storage buffers: peak held <= 1.10 peak live over one and four warm passes, at most ${most} segments made after the first`, async () => {
      const trace = await readRecordedTrace(`${name}.jsonl.gz`);
      const ops = traceOps(trace, "storage");
      const source = new MockSegmentSource({ alignment: 256 });
      const pool: StepPlannedPool = new StepPlannedPool(source);
      const target = onePool(pool);
      const f: Figures = { live: 0, peakLive: 0, peakHeld: 0 };
      let afterFirst = 0;
      for (let pass = 0; pass < 5; pass++) {
        replayPass(ops, target, f);
        if (pass === 0) afterFirst = source.allocationCount;
        assert.ok(
          f.peakHeld <= 1.1 * f.peakLive,
          `pass ${pass}: peak held ${f.peakHeld}, peak live ${f.peakLive}`,
        );
      }
      pool.validate();
      const made = source.allocationCount - afterFirst;
      assert.ok(made <= most, `segments made after the first pass: ${made}`);
    });
  }

  it("tfjs-webgpu/cnn-training: state made mid-step does not pin freed activation segments", async () => {
    // before the first plan, a request does not split a free block more
    // than twice its size: optimizer state made in the middle of the first
    // training step gets its own segment, so the freed activation segments
    // are whole when the arena is made and go back (best fit into them held
    // 1.146x peak live)
    const trace = await readRecordedTrace("tfjs-webgpu/cnn-training.jsonl.gz");
    const ops = traceOps(trace, "storage");
    const source = new MockSegmentSource({ alignment: 256 });
    const pool: StepPlannedPool = new StepPlannedPool(source);
    const live = new Map<number, PlannedBlock>();
    for (let i = 0; i < ops.length; i++) {
      const code = ops.code[i];
      if (code === 0) {
        live.set(ops.id[i], pool.allocate(Math.max(1, ops.size[i])));
      } else if (code === 1) {
        pool.free(live.get(ops.id[i])!);
        live.delete(ops.id[i]);
      } else if (code === 3) pool.endStep();
    }
    pool.validate();
    const ratio = pool.peakHeldBytes / pool.peakLiveBytes;
    assert.ok(ratio <= 1.1, `peak held / peak live ${ratio}`);
  });

  it("warm passes of the steps that vary: planning stops and most steps are fast", async () => {
    // transformer-varlen: nine step shapes per pass; each keeps its plan,
    // and a step that leaves its plan the same way every pass is planned
    // again twice at most
    const trace = await readRecordedTrace(
      "tfjs-webgpu/transformer-varlen.jsonl.gz",
    );
    const ops = traceOps(trace, "storage");
    const pool: StepPlannedPool = new StepPlannedPool(
      new MockSegmentSource({ alignment: 256 }),
    );
    const replans: number[] = [], fast: number[] = [];
    for (let pass = 0; pass < 8; pass++) {
      replayPass(ops, onePool(pool), { live: 0, peakLive: 0, peakHeld: 0 });
      replans.push(pool.replanCount);
      fast.push(pool.fastStepCount);
    }
    pool.validate();
    assert.equal(replans[7], replans[4], `plans made by pass: ${replans}`);
    assert.ok(fast[7] - fast[4] >= 3 * 6, `fast steps by pass: ${fast}`);
  });
});
