/**
 * Synthetic traces of phase changes, for `phase_traces.ts`: workloads whose
 * sizes change every few steps and come back later, with long-lived blocks
 * (updated weights, optimizer state) made in the middle of short-lived ones,
 * and a batch varying 8 -> 1024 between steps. Op codes as `ReplayOps`:
 * 0 alloc, 1 free, 2 fence, 3 step. Seeded: the same traces every run.
 *
 * @module
 */
import type { ReplayOps } from "../../trace/mod.ts";

const STORAGE = 0x80;

/** Builds `ReplayOps` from alloc/free/sync calls. */
class Builder {
  code: number[] = [];
  id: number[] = [];
  size: number[] = [];
  usage: number[] = [];
  next = 1;
  alloc(size: number, usage = STORAGE): number {
    const id = this.next++;
    this.code.push(0);
    this.id.push(id);
    this.size.push(Math.max(4, Math.ceil(size / 4) * 4));
    this.usage.push(usage);
    return id;
  }
  free(id: number): void {
    this.code.push(1);
    this.id.push(id);
    this.size.push(0);
    this.usage.push(0);
  }
  step(): void {
    this.code.push(3);
    this.id.push(0);
    this.size.push(0);
    this.usage.push(0);
  }
  fence(): void {
    this.code.push(2);
    this.id.push(0);
    this.size.push(0);
    this.usage.push(0);
  }
  ops(): ReplayOps {
    return {
      code: Uint8Array.from(this.code),
      id: Float64Array.from(this.id),
      size: Float64Array.from(this.size),
      usage: Float64Array.from(this.usage),
      length: this.code.length,
      from: "alloc",
    } as ReplayOps;
  }
}

/** A small seeded generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A CNN training loop whose image size changes every `stepsPerPhase` steps
 * (sizes coming back later): forward keeps activations, backward frees them
 * and makes gradients; the weights are remade mid-backward (long-lived,
 * small) while short-lived temporaries are live, and each update makes a
 * small optimizer-state block too.
 */
function cnnPhases(
  sizes: number[],
  batch: number[],
  stepsPerPhase: number,
  channels: number[],
  seed: number,
): ReplayOps {
  const b = new Builder();
  const r = rng(seed);
  const weights = channels.map((c, i) =>
    b.alloc(9 * (i === 0 ? 3 : channels[i - 1]) * c * 4)
  );
  const moments = channels.map((c, i) =>
    b.alloc(9 * (i === 0 ? 3 : channels[i - 1]) * c * 4)
  );
  for (let phase = 0; phase < sizes.length; phase++) {
    const res = sizes[phase], n = batch[phase % batch.length];
    for (let s = 0; s < stepsPerPhase; s++) {
      const input = b.alloc(n * 3 * res * res * 4);
      const acts: number[] = [];
      let hw = res;
      for (let i = 0; i < channels.length; i++) {
        hw = Math.max(1, Math.ceil(hw / (i === 0 ? 2 : 2)));
        const tmp = b.alloc(n * channels[i] * hw * hw * 4); // conv out
        acts.push(b.alloc(n * channels[i] * hw * hw * 4)); // relu out
        b.free(tmp);
        const stat = b.alloc(channels[i] * 4 * 2); // batch-norm stats
        acts.push(stat);
      }
      const logits = b.alloc(n * 10 * 4);
      b.fence();
      let grad = b.alloc(n * 10 * 4);
      b.free(logits);
      hw = 1;
      for (let i = channels.length - 1; i >= 0; i--) {
        const stat = acts.pop()!, act = acts.pop()!;
        const inC = i === 0 ? 3 : channels[i - 1];
        const wgrad = b.alloc(9 * inC * channels[i] * 4);
        // scratch of a random share of the activation
        const scratch = b.alloc(
          (0.25 + 0.5 * r()) * n * channels[i] * 4 *
            Math.max(1, (res >> (i + 1)) ** 2),
        );
        const g = b.alloc(
          n * inC * Math.max(1, (res >> i) ** 2) * 4,
        );
        b.free(act);
        b.free(stat);
        b.free(grad);
        b.free(scratch);
        grad = g;
        // the update: new weights and moments made mid-step, old freed
        const w = b.alloc(9 * inC * channels[i] * 4);
        const m = b.alloc(9 * inC * channels[i] * 4);
        b.free(weights[i]);
        b.free(moments[i]);
        b.free(wgrad);
        weights[i] = w;
        moments[i] = m;
      }
      b.free(grad);
      b.free(input);
      b.step();
    }
  }
  return b.ops();
}

/**
 * Inference with a batch varying 8 -> 1024 between steps (an MLP and a
 * small attention block), a few uniforms per step.
 */
function varBatch(batches: number[], seed: number): ReplayOps {
  const b = new Builder();
  const r = rng(seed);
  const dims = [768, 3072, 768, 3072, 768];
  const w: number[] = [];
  for (let i = 1; i < dims.length; i++) {
    w.push(b.alloc(dims[i - 1] * dims[i] * 4));
  }
  for (const n of batches) {
    const seq = 16 + Math.floor(r() * 4) * 16;
    let x = b.alloc(n * dims[0] * 4);
    const uni = b.alloc(256, 0x40);
    for (let i = 1; i < dims.length; i++) {
      const y = b.alloc(n * dims[i] * 4);
      if (i === 2) {
        const scores = b.alloc(n * seq * 4);
        const soft = b.alloc(n * seq * 4);
        b.free(scores);
        b.free(soft);
      }
      b.free(x);
      x = y;
    }
    b.fence();
    b.free(x);
    b.free(uni);
    b.step();
  }
  return b.ops();
}

/**
 * Small-pool churn: 32-256 KiB short-lived blocks with long-lived ones
 * (optimizer state, updated weights) made among them, sizes changing by
 * phase and coming back.
 */
function smallMix(seed: number): ReplayOps {
  const b = new Builder();
  const r = rng(seed);
  const KiB = 1024;
  const long: number[] = [];
  for (let i = 0; i < 24; i++) {
    long.push(b.alloc((16 + Math.floor(r() * 16)) * KiB));
  }
  const phases = [64, 32, 128, 64, 256, 32, 128];
  for (const base of phases) {
    for (let s = 0; s < 4; s++) {
      const short: number[] = [];
      for (let k = 0; k < 20; k++) {
        short.push(b.alloc(base * KiB * (0.5 + r())));
        if (k % 4 === 3) {
          // a long-lived block remade among the short ones
          const j = Math.floor(r() * long.length);
          const nb = b.alloc((16 + Math.floor(r() * 16)) * KiB);
          b.free(long[j]);
          long[j] = nb;
        }
        if (short.length > 6) b.free(short.splice(Math.floor(r() * 3), 1)[0]);
      }
      for (const id of short) b.free(id);
      b.step();
    }
  }
  return b.ops();
}

/**
 * Inference of a small CNN whose batch changes by phase (sizes coming back
 * later): activations from a few KiB to MiBs, in both pools; a residual
 * block keeps its input alive across two layers.
 */
function cnnBatchPhases(batches: number[], stepsPerPhase: number): ReplayOps {
  const b = new Builder();
  const layers: [number, number][] = [
    [16, 64],
    [16, 64],
    [32, 32],
    [32, 32],
    [64, 16],
    [64, 16],
    [128, 8],
    [128, 8],
    [256, 4],
  ];
  for (const [c] of layers) b.alloc(9 * c * c * 4); // weights
  for (const n of batches) {
    for (let s = 0; s < stepsPerPhase; s++) {
      let x = b.alloc(n * 3 * 64 * 64 * 4);
      let skip = -1;
      for (let i = 0; i < layers.length; i++) {
        const [c, hw] = layers[i];
        const uni = b.alloc(64, 0x40);
        const y = b.alloc(n * c * hw * hw * 4);
        const tmp = b.alloc(n * c * hw * 4); // a per-row scratch
        b.free(tmp);
        b.free(uni);
        if (i % 2 === 0) {
          if (skip >= 0) b.free(skip);
          skip = x;
        } else b.free(x);
        x = y;
      }
      if (skip >= 0) b.free(skip);
      const out = b.alloc(n * 10 * 4);
      b.free(x);
      b.fence();
      b.free(out);
      b.step();
    }
  }
  return b.ops();
}

/** The synthetic traces, by name. */
export function syntheticPhaseTraces(): [string, ReplayOps][] {
  const logBatch = (seed: number, n: number) => {
    const r = rng(seed);
    return Array.from({ length: n }, () => 8 * 2 ** Math.floor(r() * 8));
  };
  return [
    [
      "syn/cnn-multires",
      cnnPhases([224, 160, 288, 224, 128, 288, 160, 224], [8], 3, [
        32,
        64,
        128,
        256,
      ], 1),
    ],
    [
      "syn/cnn-multires-batch",
      cnnPhases([128, 96, 160, 128, 64, 160], [8, 16, 4, 8], 4, [
        16,
        32,
        64,
        128,
      ], 2),
    ],
    ["syn/varbatch-8-1024", varBatch(logBatch(3, 40), 3)],
    [
      "syn/varbatch-phases",
      varBatch([
        ...Array(5).fill(64),
        ...Array(5).fill(1024),
        ...Array(5).fill(8),
        ...Array(5).fill(256),
        ...Array(5).fill(1024),
        ...Array(5).fill(64),
      ], 4),
    ],
    ["syn/small-mix", smallMix(5)],
    ["syn/cnn-batch-phases", cnnBatchPhases([4, 16, 8, 32, 4, 16, 8], 3)],
    ["syn/cnn-batch-1-64", cnnBatchPhases([1, 64, 2, 32, 1, 64, 8, 2], 2)],
  ];
}
