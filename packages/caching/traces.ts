/**
 * Deterministic allocation traces of tensor workloads, for replaying against
 * pooling allocators (`@allot/caching`, `@allot/watermark`, `@allot/webgpu`)
 * and peers on the same input:
 *
 * - {@linkcode transformerInferenceTrace}: a GPT-style decoder serving
 *   requests of changing prompt lengths, with a key/value cache that grows by
 *   concatenation on every generated token, attention scores, MLP
 *   activations and per-layer temporaries;
 * - {@linkcode trainingStepTrace}: training steps of the same kind of model:
 *   forward activations kept for backward, backward freeing them as it goes,
 *   weight gradients made and dropped every step, and Adam state made on the
 *   first step;
 * - {@linkcode churnTrace}: a stress trace, log-uniform sizes allocated and
 *   freed at random, where one request reaches a fifth of the peak.
 *
 * A trace is a list of {@linkcode TraceOp}: `alloc` (an id and a byte length),
 * `free` (an id) and `mark` (a label between phases). Every id is freed by the
 * end. `warmupOps` is the index of the first op after warm-up: the first round
 * of requests, or the first two training steps.
 *
 * @example Replay a trace
 * ```ts
 * import { replayTrace, trainingStepTrace } from "@allot/caching/traces";
 * import { CachingAllocator } from "@allot/caching";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const trace = trainingStepTrace({ layers: 2, hidden: 128, sequence: 32, batch: 2, vocab: 512, steps: 4 });
 * const device = new MockSegmentSource();
 * const allocator = new CachingAllocator(device);
 * let afterWarmup = 0;
 * replayTrace(trace, {
 *   allocate: (byteLength) => allocator.allocate(byteLength),
 *   free: (block) => block.release(),
 *   onOp: (index) => {
 *     if (index === trace.warmupOps) afterWarmup = device.allocationCount;
 *   },
 * });
 * assert.equal(device.allocationCount, afterWarmup); // shapes repeat: no new segments
 * assert.equal(allocator.allocatedBytes, 0);
 * ```
 *
 * @module
 */

import {
  describeValue,
  InvalidArgumentError,
  validateFlag,
  validateInteger,
  validateObject,
  validateOptionKeys,
} from "@allot/core";

/** One event of a trace. */
export type TraceOp =
  | {
    /** Allocate `byteLength` bytes under `id`. */
    kind: "alloc";
    /** Id, unique among live allocations; never reused within a trace. */
    id: number;
    /** Bytes requested. */
    byteLength: number;
    /** What the tensor is, such as `layer3.mlp.up`. */
    tag: string;
  }
  | {
    /** Free the allocation `id`. */
    kind: "free";
    /** Id of a live allocation. */
    id: number;
  }
  | {
    /** A phase boundary. */
    kind: "mark";
    /** Such as `request 4` or `step 2`. */
    label: string;
  };

/** A generated trace. */
export interface AllocationTrace {
  /** Short name, such as `transformer-inference`. */
  name: string;
  /** The parameters, in words. */
  description: string;
  /** The events. */
  ops: TraceOp[];
  /** Index of the first op after warm-up. */
  warmupOps: number;
}

/** Figures of a trace. */
export interface TraceSummary {
  /** Number of allocations. */
  allocations: number;
  /** Highest sum of live requested bytes. */
  peakRequestedBytes: number;
  /** Highest number of live allocations. */
  peakLiveCount: number;
  /** Number of distinct byte lengths. */
  distinctSizes: number;
  /** Highest sum of live requested bytes after warm-up. */
  peakRequestedBytesAfterWarmup: number;
  /**
   * Same as `peakRequestedBytes`.
   *
   * @deprecated Use `peakRequestedBytes` (one name per figure across allot);
   * removed in the next minor version.
   */
  peakLiveBytes: number;
  /**
   * Same as `peakRequestedBytesAfterWarmup`.
   *
   * @deprecated Use `peakRequestedBytesAfterWarmup`; removed in the next
   * minor version.
   */
  peakLiveBytesAfterWarmup: number;
}

class _Builder {
  ops: TraceOp[] = [];
  #next = 1;
  alloc(byteLength: number, tag: string): number {
    if (!Number.isSafeInteger(byteLength)) {
      // the options' product passed 2^53: refused, not traced as a rounded size
      throw new InvalidArgumentError(
        `Cannot make the trace: tensor ${tag} would have ${byteLength} bytes, past 2^53 - 1 (${Number.MAX_SAFE_INTEGER}); use smaller shapes`,
        { name: "options", value: byteLength, limit: Number.MAX_SAFE_INTEGER },
      );
    }
    const id = this.#next++;
    this.ops.push({ kind: "alloc", id, byteLength, tag });
    return id;
  }
  free(...ids: number[]): void {
    for (const id of ids) this.ops.push({ kind: "free", id });
  }
  mark(label: string): void {
    this.ops.push({ kind: "mark", label });
  }
}

/** Largest count or size option a generator takes. */
const _MAX_OPTION = 2 ** 31 - 1;

/** An integer option in `[min, _MAX_OPTION]`, or its default. */
function _intOption(
  value: unknown,
  name: string,
  fallback: number,
  min = 1,
): number {
  return validateInteger(
    (value === undefined ? fallback : value) as number,
    min,
    _MAX_OPTION,
    name,
  );
}

/** The prompt lengths, checked and copied (read once). */
function _promptLengths(value: unknown): number[] {
  if (value === undefined) return [37, 128, 300, 64, 511, 200, 96, 17];
  if (!Array.isArray(value) || value.length === 0 || value.length > 4096) {
    throw new InvalidArgumentError(
      `Invalid promptLengths: must be an array of 1 to 4096 positive integers, received ${
        describeValue(value)
      }`,
      { name: "promptLengths", value, limit: [1, 4096] },
    );
  }
  const out: number[] = [];
  for (let i = 0; i < value.length; i++) {
    out.push(_intOption(value[i], `promptLengths[${i}]`, NaN));
  }
  return out;
}

/** Options of {@linkcode transformerInferenceTrace}. */
export interface TransformerInferenceOptions {
  /**
   * Decoder layers.
   *
   * @default {12}
   */
  layers?: number;
  /**
   * Model width.
   *
   * @default {768}
   */
  hidden?: number;
  /**
   * Attention heads.
   *
   * @default {12}
   */
  heads?: number;
  /**
   * Vocabulary size.
   *
   * @default {50257}
   */
  vocab?: number;
  /**
   * Bytes per element (4 for f32, 2 for f16).
   *
   * @default {4}
   */
  bytesPerElement?: number;
  /**
   * Prompt length of each request of a round.
   *
   * @default {[37, 128, 300, 64, 511, 200, 96, 17]}
   */
  promptLengths?: readonly number[];
  /**
   * Tokens generated per request.
   *
   * @default {16}
   */
  decodeSteps?: number;
  /**
   * Rounds over `promptLengths`; the first is the warm-up.
   *
   * @default {3}
   */
  rounds?: number;
  /**
   * Allocate the weights first (and free them last).
   *
   * @default {true}
   */
  weights?: boolean;
}

/**
 * A GPT-style decoder (GPT-2 small by default) serving rounds of requests of
 * changing prompt lengths. Per request: a prefill pass over the prompt, then
 * `decodeSteps` passes of one token (each pass starts with a `mark`, as each
 * is one session run in a runtime). In every pass and layer: layer-norm,
 * QKV projection, key/value caches grown by concatenation (a new tensor of
 * the new length, the old one freed), attention scores and probabilities
 * (`heads × t × T`), context, output projection, residual, layer-norm, MLP up
 * (4× width), activation, MLP down, residual. Logits are computed for the
 * last position only. The caches are freed at the end of each request.
 *
 * @param options Model shape and request mix.
 * @returns The trace; `warmupOps` ends the first round.
 * @throws {InvalidArgumentError} When `options` is not an object, holds a
 * key the generator does not read, or a value outside its range (counts and
 * shape sizes are integers up to 2^31 - 1), or makes a tensor past 2^53 - 1
 * bytes.
 *
 * @example
 * ```ts
 * import { summarizeTrace, transformerInferenceTrace } from "@allot/caching/traces";
 * import assert from "node:assert/strict";
 *
 * const trace = transformerInferenceTrace({
 *   layers: 2,
 *   hidden: 64,
 *   heads: 2,
 *   vocab: 256,
 *   promptLengths: [8, 16],
 *   decodeSteps: 2,
 *   rounds: 2,
 * });
 * const allocs = trace.ops.filter((op) => op.kind === "alloc").length;
 * assert.equal(summarizeTrace(trace).allocations, allocs);
 * assert.ok(trace.warmupOps > 0 && trace.warmupOps < trace.ops.length);
 * ```
 */
export function transformerInferenceTrace(
  options: TransformerInferenceOptions = {},
): AllocationTrace {
  validateObject(options, "options");
  validateOptionKeys(options, [
    "layers",
    "hidden",
    "heads",
    "vocab",
    "bytesPerElement",
    "promptLengths",
    "decodeSteps",
    "rounds",
    "weights",
  ], "transformerInferenceTrace()");
  const L = _intOption(options.layers, "layers", 12);
  const d = _intOption(options.hidden, "hidden", 768);
  const h = _intOption(options.heads, "heads", 12);
  const V = _intOption(options.vocab, "vocab", 50257);
  const e = _intOption(options.bytesPerElement, "bytesPerElement", 4);
  const prompts = _promptLengths(options.promptLengths);
  const steps = _intOption(options.decodeSteps, "decodeSteps", 16, 0);
  const rounds = _intOption(options.rounds, "rounds", 3);
  const maxPos = Math.max(...prompts) + steps;
  const b = new _Builder();
  const weights: number[] = [];
  if (validateFlag(options.weights, "weights", true)) {
    weights.push(b.alloc(V * d * e, "wte"), b.alloc(maxPos * d * e, "wpe"));
    for (let l = 0; l < L; l++) {
      const p = `layer${l}`;
      weights.push(
        b.alloc(2 * d * e, `${p}.ln1`),
        b.alloc(d * 3 * d * e, `${p}.attn.qkv.w`),
        b.alloc(3 * d * e, `${p}.attn.qkv.b`),
        b.alloc(d * d * e, `${p}.attn.proj.w`),
        b.alloc(d * e, `${p}.attn.proj.b`),
        b.alloc(2 * d * e, `${p}.ln2`),
        b.alloc(d * 4 * d * e, `${p}.mlp.up.w`),
        b.alloc(4 * d * e, `${p}.mlp.up.b`),
        b.alloc(4 * d * d * e, `${p}.mlp.down.w`),
        b.alloc(d * e, `${p}.mlp.down.b`),
      );
    }
    weights.push(b.alloc(2 * d * e, "ln_f"));
  }
  let warmupOps = 0;
  let request = 0;
  for (let round = 0; round < rounds; round++) {
    for (const prompt of prompts) {
      b.mark(`request ${++request} (prompt ${prompt})`);
      const keys: number[] = new Array(L).fill(0);
      const values: number[] = new Array(L).fill(0);
      let total = 0;
      for (let step = 0; step <= steps; step++) {
        const t = step === 0 ? prompt : 1;
        total += t;
        const T = total;
        if (step > 0) b.mark(`request ${request} token ${step}`);
        const ids = b.alloc(t * 4, "input_ids");
        let x = b.alloc(t * d * e, "embeddings");
        b.free(ids);
        for (let l = 0; l < L; l++) {
          const p = `layer${l}`;
          const ln1 = b.alloc(t * d * e, `${p}.ln1`);
          const qkv = b.alloc(t * 3 * d * e, `${p}.qkv`);
          b.free(ln1);
          const k = b.alloc(T * d * e, `${p}.past_key`);
          const v = b.alloc(T * d * e, `${p}.past_value`);
          if (keys[l] !== 0) b.free(keys[l], values[l]);
          keys[l] = k;
          values[l] = v;
          const scores = b.alloc(h * t * T * e, `${p}.scores`);
          b.free(qkv);
          const probs = b.alloc(h * t * T * e, `${p}.probs`);
          b.free(scores);
          const ctx = b.alloc(t * d * e, `${p}.context`);
          b.free(probs);
          const proj = b.alloc(t * d * e, `${p}.proj`);
          b.free(ctx);
          const x2 = b.alloc(t * d * e, `${p}.residual1`);
          b.free(proj, x);
          const ln2 = b.alloc(t * d * e, `${p}.ln2`);
          const up = b.alloc(t * 4 * d * e, `${p}.mlp.up`);
          b.free(ln2);
          const act = b.alloc(t * 4 * d * e, `${p}.mlp.act`);
          b.free(up);
          const down = b.alloc(t * d * e, `${p}.mlp.down`);
          b.free(act);
          x = b.alloc(t * d * e, `${p}.residual2`);
          b.free(down, x2);
        }
        const lnf = b.alloc(d * e, "ln_f");
        b.free(x);
        const logits = b.alloc(V * e, "logits");
        b.free(lnf);
        const next = b.alloc(4, "next_token");
        b.free(logits, next);
      }
      for (let l = 0; l < L; l++) b.free(keys[l], values[l]);
    }
    if (round === 0) {
      b.mark("warm-up done");
      warmupOps = b.ops.length;
    }
  }
  b.mark("teardown");
  b.free(...weights);
  return {
    name: "transformer-inference",
    description:
      `${L} layers, width ${d}, ${h} heads, vocab ${V}, ${e} B/element; ${rounds} rounds of prompts [${prompts}] with ${steps} decode steps each; KV cache grown by concatenation`,
    ops: b.ops,
    warmupOps,
  };
}

/** Options of {@linkcode trainingStepTrace}. */
export interface TrainingStepOptions {
  /**
   * Layers.
   *
   * @default {6}
   */
  layers?: number;
  /**
   * Model width.
   *
   * @default {512}
   */
  hidden?: number;
  /**
   * Attention heads.
   *
   * @default {8}
   */
  heads?: number;
  /**
   * Vocabulary size.
   *
   * @default {8192}
   */
  vocab?: number;
  /**
   * Sequence length.
   *
   * @default {256}
   */
  sequence?: number;
  /**
   * Batch size.
   *
   * @default {8}
   */
  batch?: number;
  /**
   * Bytes per element.
   *
   * @default {4}
   */
  bytesPerElement?: number;
  /**
   * Training steps.
   *
   * @default {5}
   */
  steps?: number;
  /**
   * Steps counted as warm-up. The first step makes the optimizer state, so
   * the second is the first with the steady live set.
   *
   * @default {2}
   */
  warmupSteps?: number;
}

/**
 * Training steps of a GPT-style model with Adam. Weights are allocated first.
 * Each step: inputs and targets; a forward pass keeping per layer the tensors
 * backward needs (layer-norm outputs, QKV, attention probabilities, context,
 * residual, MLP up and activation) and freeing temporaries (scores,
 * projections); logits and loss; a backward pass in reverse layer order that
 * allocates activation gradients as temporaries and one gradient per weight,
 * and frees each layer's saved tensors once used; an Adam update (moment
 * buffers made on the first step and kept; one temporary per weight); then
 * the gradients are dropped (`zero_grad(set_to_none=True)`).
 *
 * @param options Model shape and step count.
 * @returns The trace; `warmupOps` ends step `warmupSteps`.
 * @throws {InvalidArgumentError} When `options` is not an object, holds a
 * key the generator does not read, or a value outside its range (counts and
 * shape sizes are integers up to 2^31 - 1), or makes a tensor past 2^53 - 1
 * bytes.
 *
 * @example
 * ```ts
 * import { summarizeTrace, trainingStepTrace } from "@allot/caching/traces";
 * import assert from "node:assert/strict";
 *
 * const trace = trainingStepTrace({
 *   layers: 2,
 *   hidden: 64,
 *   heads: 2,
 *   vocab: 256,
 *   sequence: 16,
 *   batch: 2,
 *   steps: 3,
 *   warmupSteps: 1,
 * });
 * const allocs = trace.ops.filter((op) => op.kind === "alloc").length;
 * assert.equal(summarizeTrace(trace).allocations, allocs);
 * assert.ok(trace.warmupOps > 0 && trace.warmupOps < trace.ops.length);
 * ```
 */
export function trainingStepTrace(
  options: TrainingStepOptions = {},
): AllocationTrace {
  validateObject(options, "options");
  validateOptionKeys(options, [
    "layers",
    "hidden",
    "heads",
    "vocab",
    "sequence",
    "batch",
    "bytesPerElement",
    "steps",
    "warmupSteps",
  ], "trainingStepTrace()");
  const L = _intOption(options.layers, "layers", 6);
  const d = _intOption(options.hidden, "hidden", 512);
  const h = _intOption(options.heads, "heads", 8);
  const V = _intOption(options.vocab, "vocab", 8192);
  const s = _intOption(options.sequence, "sequence", 256);
  const B = _intOption(options.batch, "batch", 8);
  const e = _intOption(options.bytesPerElement, "bytesPerElement", 4);
  const steps = _intOption(options.steps, "steps", 5);
  // the default 2 is never reached by a 1-step trace: no warm-up (as before)
  const warmupSteps = options.warmupSteps === undefined
    ? (steps >= 2 ? 2 : 0)
    : validateInteger(options.warmupSteps, 0, steps, "warmupSteps");
  const n = B * s;
  const b = new _Builder();
  const paramSizes: [string, number][] = [
    ["wte", V * d],
    ["wpe", s * d],
  ];
  for (let l = 0; l < L; l++) {
    const p = `layer${l}`;
    paramSizes.push(
      [`${p}.ln1`, 2 * d],
      [`${p}.attn.qkv.w`, 3 * d * d],
      [`${p}.attn.qkv.b`, 3 * d],
      [`${p}.attn.proj.w`, d * d],
      [`${p}.attn.proj.b`, d],
      [`${p}.ln2`, 2 * d],
      [`${p}.mlp.up.w`, 4 * d * d],
      [`${p}.mlp.up.b`, 4 * d],
      [`${p}.mlp.down.w`, 4 * d * d],
      [`${p}.mlp.down.b`, d],
    );
  }
  paramSizes.push(["ln_f", 2 * d]);
  const params = paramSizes.map(([tag, count]) => b.alloc(count * e, tag));
  const adam: number[] = [];
  let warmupOps = 0;
  for (let step = 1; step <= steps; step++) {
    b.mark(`step ${step}`);
    const ids = b.alloc(n * 4, "input_ids");
    const targets = b.alloc(n * 4, "targets");
    let x = b.alloc(n * d * e, "embeddings");
    const saved: number[][] = [];
    for (let l = 0; l < L; l++) {
      const p = `layer${l}`;
      const ln1 = b.alloc(n * d * e, `${p}.ln1`);
      const qkv = b.alloc(n * 3 * d * e, `${p}.qkv`);
      const scores = b.alloc(B * h * s * s * e, `${p}.scores`);
      const probs = b.alloc(B * h * s * s * e, `${p}.probs`);
      b.free(scores);
      const ctx = b.alloc(n * d * e, `${p}.context`);
      const proj = b.alloc(n * d * e, `${p}.proj`);
      const x2 = b.alloc(n * d * e, `${p}.residual1`);
      b.free(proj);
      const ln2 = b.alloc(n * d * e, `${p}.ln2`);
      const up = b.alloc(n * 4 * d * e, `${p}.mlp.up`);
      const act = b.alloc(n * 4 * d * e, `${p}.mlp.act`);
      const down = b.alloc(n * d * e, `${p}.mlp.down`);
      const x3 = b.alloc(n * d * e, `${p}.residual2`);
      b.free(down);
      saved.push([x, ln1, qkv, probs, ctx, x2, ln2, up, act]);
      x = x3;
    }
    const lnf = b.alloc(n * d * e, "ln_f");
    const logits = b.alloc(n * V * e, "logits");
    const loss = b.alloc(e, "loss");
    // Backward.
    const grads: number[] = [];
    const dlogits = b.alloc(n * V * e, "grad.logits");
    b.free(logits, loss);
    let dx = b.alloc(n * d * e, "grad.ln_f.out");
    grads.push(b.alloc(V * d * e, "grad.wte.head"));
    b.free(dlogits, lnf, x);
    for (let l = L - 1; l >= 0; l--) {
      const p = `layer${l}`;
      const [xin, ln1, qkv, probs, ctx, x2, ln2, up, act] = saved[l];
      const dact = b.alloc(n * 4 * d * e, `grad.${p}.mlp.act`);
      grads.push(b.alloc(4 * d * d * e, `grad.${p}.mlp.down.w`));
      grads.push(b.alloc(d * e, `grad.${p}.mlp.down.b`));
      b.free(act);
      const dup = b.alloc(n * 4 * d * e, `grad.${p}.mlp.up`);
      b.free(dact, up);
      grads.push(b.alloc(4 * d * d * e, `grad.${p}.mlp.up.w`));
      grads.push(b.alloc(4 * d * e, `grad.${p}.mlp.up.b`));
      const dln2 = b.alloc(n * d * e, `grad.${p}.ln2`);
      b.free(dup, ln2);
      grads.push(b.alloc(2 * d * e, `grad.${p}.ln2`));
      const dx2 = b.alloc(n * d * e, `grad.${p}.residual1`);
      b.free(dln2, x2, dx);
      const dctx = b.alloc(n * d * e, `grad.${p}.context`);
      grads.push(b.alloc(d * d * e, `grad.${p}.attn.proj.w`));
      grads.push(b.alloc(d * e, `grad.${p}.attn.proj.b`));
      b.free(ctx);
      const dprobs = b.alloc(B * h * s * s * e, `grad.${p}.probs`);
      const dscores = b.alloc(B * h * s * s * e, `grad.${p}.scores`);
      b.free(dprobs, probs, dctx);
      const dqkv = b.alloc(n * 3 * d * e, `grad.${p}.qkv`);
      b.free(dscores, qkv);
      grads.push(b.alloc(3 * d * d * e, `grad.${p}.attn.qkv.w`));
      grads.push(b.alloc(3 * d * e, `grad.${p}.attn.qkv.b`));
      const dln1 = b.alloc(n * d * e, `grad.${p}.ln1`);
      b.free(dqkv, ln1);
      grads.push(b.alloc(2 * d * e, `grad.${p}.ln1`));
      dx = b.alloc(n * d * e, `grad.${p}.input`);
      b.free(dln1, dx2, xin);
    }
    grads.push(b.alloc(s * d * e, "grad.wpe"));
    grads.push(b.alloc(V * d * e, "grad.wte"));
    grads.push(b.alloc(2 * d * e, "grad.ln_f"));
    b.free(dx, ids, targets);
    // Adam: moments made on the first step, one temporary per weight.
    paramSizes.forEach(([tag, count], i) => {
      if (step === 1) {
        adam.push(b.alloc(count * e, `adam.m.${tag}`));
        adam.push(b.alloc(count * e, `adam.v.${tag}`));
      }
      const update = b.alloc(count * e, `adam.update.${tag}`);
      b.free(update);
      void params[i];
    });
    b.free(...grads);
    if (step === warmupSteps) {
      b.mark("warm-up done");
      warmupOps = b.ops.length;
    }
  }
  b.mark("teardown");
  b.free(...adam, ...params);
  return {
    name: "training-step",
    description:
      `${L} layers, width ${d}, ${h} heads, vocab ${V}, batch ${B} x sequence ${s}, ${e} B/element, ${steps} Adam steps`,
    ops: b.ops,
    warmupOps,
  };
}

const MiB = 1048576;

/** Options of {@linkcode churnTrace}. */
export interface ChurnTraceOptions {
  /**
   * Allocations in the trace.
   *
   * @default {40000}
   */
  allocations?: number;
  /**
   * PRNG seed.
   *
   * @default {3}
   */
  seed?: number;
  /**
   * Smallest request.
   *
   * @default {256}
   */
  minByteLength?: number;
  /**
   * Largest request.
   *
   * @default {67108864}
   */
  maxByteLength?: number;
  /**
   * Live requested bytes are kept at or below this after each allocation
   * (random live blocks are freed), so the peak is at most this plus one
   * request.
   *
   * @default {268435456}
   */
  liveByteLength?: number;
}

/**
 * Random churn: request sizes log-uniform between the smallest and largest
 * request; after each allocation random live blocks are freed while live
 * bytes exceed the limit, and each live block at random (30 %). No warm-up.
 * With the defaults (256 B to 64 MiB under 256 MiB live) a single request
 * reaches a fifth of the peak: the fragmentation stress of non-moving pools.
 *
 * @param options Size range, live limit, length and seed.
 * @returns The trace.
 * @throws {InvalidArgumentError} When `options` is not an object, holds a
 * key the generator does not read, or a value outside its range (counts and
 * shape sizes are integers up to 2^31 - 1), or makes a tensor past 2^53 - 1
 * bytes.
 *
 * @example
 * ```ts
 * import { churnTrace, summarizeTrace } from "@allot/caching/traces";
 * import assert from "node:assert/strict";
 *
 * const trace = churnTrace({ allocations: 1000 });
 * assert.equal(summarizeTrace(trace).allocations, 1000);
 * assert.ok(summarizeTrace(trace).peakRequestedBytes <= 320 * 2 ** 20);
 * ```
 */
export function churnTrace(options: ChurnTraceOptions = {}): AllocationTrace {
  validateObject(options, "options");
  validateOptionKeys(options, [
    "allocations",
    "seed",
    "minByteLength",
    "maxByteLength",
    "liveByteLength",
  ], "churnTrace()");
  const allocations = _intOption(options.allocations, "allocations", 40000, 0);
  const minByteLength = validateInteger(
    (options.minByteLength ?? 256) as number,
    1,
    Number.MAX_SAFE_INTEGER,
    "minByteLength",
  );
  const maxByteLength = validateInteger(
    (options.maxByteLength ?? Math.max(64 * MiB, minByteLength)) as number,
    minByteLength,
    Number.MAX_SAFE_INTEGER,
    "maxByteLength",
  );
  const limit = validateInteger(
    (options.liveByteLength ?? 256 * MiB) as number,
    0,
    Number.MAX_SAFE_INTEGER,
    "liveByteLength",
  );
  let a = validateInteger(
    (options.seed ?? 3) as number,
    -Number.MAX_SAFE_INTEGER,
    Number.MAX_SAFE_INTEGER,
    "seed",
  ) >>> 0;
  const random = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const ops: TraceOp[] = [];
  const live: { id: number; bytes: number }[] = [];
  let liveBytes = 0;
  const lo = Math.log(minByteLength), hi = Math.log(maxByteLength);
  for (let id = 1; id <= allocations; id++) {
    const byteLength = Math.round(Math.exp(lo + random() * (hi - lo)));
    ops.push({ kind: "alloc", id, byteLength, tag: "churn" });
    live.push({ id, bytes: byteLength });
    liveBytes += byteLength;
    while (liveBytes > limit || (live.length > 0 && random() < 0.3)) {
      const [x] = live.splice((random() * live.length) | 0, 1);
      ops.push({ kind: "free", id: x.id });
      liveBytes -= x.bytes;
    }
  }
  for (const x of live) ops.push({ kind: "free", id: x.id });
  return {
    name: "log-uniform-churn",
    description:
      `${allocations} allocations, ${minByteLength} B to ${maxByteLength} B log-uniform, live bytes kept at or below ${limit} B`,
    ops,
    warmupOps: 0,
  };
}

/**
 * Counts a trace's allocations and its peak live bytes.
 *
 * @param trace The trace.
 * @returns Its figures.
 * @throws {InvalidArgumentError} When `trace` is not one, or at an op
 * that frees an id that is not live or is not an alloc, a free or a mark.
 *
 * @example
 * ```ts
 * import { summarizeTrace, transformerInferenceTrace } from "@allot/caching/traces";
 * import assert from "node:assert/strict";
 *
 * const summary = summarizeTrace(transformerInferenceTrace({ layers: 2, rounds: 1 }));
 * assert.ok(summary.peakRequestedBytes > 0);
 * ```
 */
export function summarizeTrace(trace: AllocationTrace): TraceSummary {
  const live = new Map<number, number>();
  const sizes = new Set<number>();
  let bytes = 0, peak = 0, peakCount = 0, allocations = 0, peakAfter = 0;
  _checkTrace(trace, "summarize").forEach((op, i) => {
    if (typeof op !== "object" || op === null) {
      _refuseOp(trace, i, op, "summarize");
    }
    if (op.kind === "alloc") {
      live.set(op.id, op.byteLength);
      sizes.add(op.byteLength);
      allocations++;
      bytes += op.byteLength;
      if (bytes > peak) peak = bytes;
      if (i >= trace.warmupOps && bytes > peakAfter) peakAfter = bytes;
      if (live.size > peakCount) peakCount = live.size;
    } else if (op.kind === "free") {
      const n = live.get(op.id);
      if (n === undefined) {
        throw new InvalidArgumentError(
          `Cannot summarize trace ${
            describeValue(trace.name)
          }: op ${i} frees id ${
            describeValue(op.id)
          }, which is not live (never allocated, or freed already)`,
          { name: `trace.ops[${i}].id`, value: op.id, limit: "a live id" },
        );
      }
      bytes -= n;
      live.delete(op.id);
    } else if (op.kind !== "mark") {
      _refuseOp(trace, i, op, "summarize");
    }
  });
  return {
    allocations,
    peakRequestedBytes: peak,
    peakLiveCount: peakCount,
    distinctSizes: sizes.size,
    peakRequestedBytesAfterWarmup: peakAfter,
    peakLiveBytes: peak,
    peakLiveBytesAfterWarmup: peakAfter,
  };
}

/** What {@linkcode replayTrace} drives. */
export interface TraceTarget<H> {
  /** Allocates; the result is passed to `free`. */
  allocate: (byteLength: number, tag: string) => H;
  /** Frees a result of `allocate`. */
  free: (handle: H) => void;
  /** Called before each op with its index. */
  onOp?: (index: number, op: TraceOp) => void;
}

/**
 * Replays a trace against an allocator.
 *
 * @param trace The trace.
 * @param target Allocate and free functions.
 * @throws {InvalidArgumentError} When `trace` or `target` is not one (nothing
 * is replayed), or at an op that frees an id that is not live, allocates
 * one that is, or is not an alloc, a free or a mark (the ops before it have
 * been replayed).
 *
 * @example Replay, and a trace that frees what it never allocated
 * ```ts
 * import { type AllocationTrace, replayTrace } from "@allot/caching/traces";
 * import { InvalidArgumentError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const trace: AllocationTrace = {
 *   name: "two",
 *   description: "one buffer, freed",
 *   ops: [
 *     { kind: "alloc", id: 1, byteLength: 64, tag: "x" },
 *     { kind: "free", id: 1 },
 *   ],
 *   warmupOps: 0,
 * };
 * const freed: ArrayBuffer[] = [];
 * replayTrace(trace, {
 *   allocate: (byteLength) => new ArrayBuffer(byteLength),
 *   free: (buffer) => freed.push(buffer),
 * });
 * assert.equal(freed[0].byteLength, 64);
 * assert.throws(
 *   () =>
 *     replayTrace({ ...trace, ops: [{ kind: "free", id: 2 }] }, {
 *       allocate: () => 0,
 *       free: () => {},
 *     }),
 *   InvalidArgumentError,
 * );
 * ```
 */
export function replayTrace<H>(
  trace: AllocationTrace,
  target: TraceTarget<H>,
): void {
  const ops = _checkReplay(trace, target);
  const live = new Map<number, H>();
  const onOp = target.onOp;
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i];
    onOp?.(i, op);
    if (typeof op !== "object" || op === null) _refuseOp(trace, i, op);
    if (op.kind === "alloc") {
      if (live.has(op.id)) {
        throw new InvalidArgumentError(
          `Cannot replay trace ${
            describeValue(trace.name)
          }: op ${i} allocates id ${
            describeValue(op.id)
          }, which is live (allocated and not freed; its handle would be dropped unfreed)`,
          { name: `trace.ops[${i}].id`, value: op.id, limit: "an id not live" },
        );
      }
      live.set(op.id, target.allocate(op.byteLength, op.tag));
    } else if (op.kind === "free") {
      const handle = live.get(op.id);
      if (handle === undefined && !live.has(op.id)) {
        throw new InvalidArgumentError(
          `Cannot replay trace ${describeValue(trace.name)}: op ${i} frees id ${
            describeValue(op.id)
          }, which is not live (never allocated, or freed already)`,
          { name: `trace.ops[${i}].id`, value: op.id, limit: "a live id" },
        );
      }
      live.delete(op.id);
      target.free(handle as H);
    } else if (op.kind !== "mark") {
      _refuseOp(trace, i, op);
    }
  }
}

/** replayTrace's arguments, checked before anything is replayed. */
function _checkReplay<H>(
  trace: AllocationTrace,
  target: TraceTarget<H>,
): readonly TraceOp[] {
  const ops = _checkTrace(trace, "replay");
  if (typeof target !== "object" || target === null) {
    throw new InvalidArgumentError(
      `Cannot replay trace ${
        describeValue(trace.name)
      }: the target must be an object, received ${describeValue(target)}`,
      { name: "target", value: target, limit: "a TraceTarget" },
    );
  }
  for (const key of ["allocate", "free", "onOp"] as const) {
    const f = target[key];
    if (typeof f !== "function" && (key !== "onOp" || f !== undefined)) {
      throw new InvalidArgumentError(
        `Cannot replay trace ${
          describeValue(trace.name)
        }: target.${key} must be a function, received ${describeValue(f)}`,
        { name: `target.${key}`, value: f, limit: "a function" },
      );
    }
  }
  return ops;
}

/** A trace's ops, once the trace is seen to be one (`what`: the verb). */
function _checkTrace(trace: AllocationTrace, what: string): TraceOp[] {
  if (typeof trace !== "object" || trace === null) {
    throw new InvalidArgumentError(
      `Cannot ${what} a trace: it must be an AllocationTrace, received ${
        describeValue(trace)
      }`,
      { name: "trace", value: trace, limit: "an AllocationTrace" },
    );
  }
  const ops = trace.ops;
  if (!Array.isArray(ops)) {
    throw new InvalidArgumentError(
      `Cannot ${what} trace ${
        describeValue(trace.name)
      }: its ops must be an array, received ${describeValue(ops)}`,
      { name: "trace.ops", value: ops, limit: "an array of TraceOp" },
    );
  }
  return ops;
}

/** Refuses an op that is not an alloc, a free or a mark. */
function _refuseOp(
  trace: AllocationTrace,
  i: number,
  op: unknown,
  what = "replay",
): never {
  throw new InvalidArgumentError(
    `Cannot ${what} trace ${
      describeValue(trace.name)
    }: op ${i} is not an alloc, a free or a mark, received ${
      describeValue(op)
    }`,
    {
      name: `trace.ops[${i}]`,
      value: op,
      limit: 'an op of kind "alloc", "free" or "mark"',
    },
  );
}
