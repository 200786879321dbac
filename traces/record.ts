/**
 * Records the real traces in this folder: TF.js 4.22's WebGPU backend on
 * Deno's WebGPU, unmodified, through `recordDevice` + `recordBufferPool`.
 *
 *   deno task traces:record [name...]    (all when no name is given)
 *
 * Writes traces/tfjs-webgpu/<name>.jsonl.gz and checks at every step that
 * the trace's live and held bytes equal TF.js's own counters. The fifth
 * hold-out set adds jax-js 0.1.25's WebGPU device (`jax-<name>`, each in a
 * fresh process, `traces/jax-webgpu/<name>.jsonl.gz`, checked against its
 * slot table and its pool's rules: `_gpu_jax.ts`).
 */
import { startTfjs, tf } from "./_tfjs.ts";
import {
  ortAttentionVarShape,
  ortConvVarBatch,
  ortMlpVarBatch,
} from "./_ort.ts";
import {
  cnnTraining,
  kvDecode,
  mobilenet,
  transformerVarLen,
} from "./_models.ts";
import {
  ganStep,
  lstmTextgen,
  resnetVarBatch,
  transformerTraining,
  unetTraining,
} from "./_holdout.ts";
import {
  crnnGradAccum,
  diffusionDenoise,
  efficientnetMultires,
  layersFit,
  seq2seqDecode,
} from "./_holdout2.ts";
import {
  beamSearch,
  detectorFpn,
  ortGruDecode,
  ortUnetMultisize,
  vaeTraining,
  vitVarBatch,
} from "./_holdout3.ts";
import {
  graphNetwork,
  ortSpeechConv,
  superResolution,
  tidyKeep,
  wideDeep,
} from "./_holdout4.ts";
import { ortKvCacheDecode, ortSeq2seqGrowing } from "./_holdout5.ts";
import {
  bertBuckets,
  dqnAgent,
  moeRouting,
  ortRetrievalTopK,
  pointnetVarsize,
  streamingChunks,
} from "./_holdout6.ts";

const workloads = {
  "mobilenet-inference": mobilenet,
  "mobilenet-224-batch2": (rec: Parameters<typeof mobilenet>[0]) =>
    mobilenet(rec, { passes: 3, size: 224, batch: 2 }),
  "cnn-training": cnnTraining,
  "transformer-varlen": transformerVarLen,
  "kv-decode": kvDecode,
  // The hold-out set (traces/README.md): recorded after the policies were
  // chosen, no policy tuned on them.
  "lstm-textgen": lstmTextgen,
  "unet-training": unetTraining,
  "resnet-varbatch": resnetVarBatch,
  "transformer-training": transformerTraining,
  "gan-step": ganStep,
  // The second hold-out set (traces/README.md), recorded while other
  // engineers changed the pools without seeing them.
  "diffusion-denoise": diffusionDenoise,
  "seq2seq-decode": seq2seqDecode,
  "efficientnet-multires": efficientnetMultires,
  "crnn-gradaccum": crnnGradAccum,
  "layers-fit": layersFit,
  // The third hold-out set (traces/README.md), recorded while other
  // engineers changed the pools without seeing them.
  "beam-search": beamSearch,
  "vae-training": vaeTraining,
  "vit-varbatch": vitVarBatch,
  "detector-fpn": detectorFpn,
  // The fourth hold-out set (traces/README.md), recorded while other
  // engineers changed the pools without seeing them.
  "wide-deep": wideDeep,
  "super-resolution": superResolution,
  "graph-network": graphNetwork,
  "tidy-keep": tidyKeep,
  // The sixth hold-out set (traces/README.md), recorded while other
  // engineers changed the pools without seeing them.
  "dqn-agent": dqnAgent,
  "moe-routing": moeRouting,
  "pointnet-varsize": pointnetVarsize,
  "streaming-chunks": streamingChunks,
  "bert-buckets": bertBuckets,
} as const;

/** onnxruntime-web workloads: traces/onnxruntime-web/<file>.jsonl.gz. */
const ortWorkloads = {
  "ort-mlp-varbatch": { run: ortMlpVarBatch, file: "mlp-varbatch" },
  "ort-conv-varbatch": { run: ortConvVarBatch, file: "conv-varbatch" },
  "ort-attention-varshape": {
    run: ortAttentionVarShape,
    file: "attention-varshape",
  },
  "ort-unet-multisize": { run: ortUnetMultisize, file: "unet-multisize" },
  "ort-gru-decode": { run: ortGruDecode, file: "gru-decode" },
  "ort-speech-conv1d": { run: ortSpeechConv, file: "speech-conv1d" },
  // The fifth hold-out set (traces/README.md).
  "ort-seq2seq-growing": { run: ortSeq2seqGrowing, file: "seq2seq-growing" },
  "ort-kv-cache-decode": { run: ortKvCacheDecode, file: "kv-cache-decode" },
  // The sixth hold-out set (traces/README.md).
  "ort-retrieval-topk": { run: ortRetrievalTopK, file: "retrieval-topk" },
} as const;

/**
 * jax-js 0.1.25 WebGPU workloads of the fifth hold-out set
 * (`_holdout5.ts`): `jax-<name>` writes traces/jax-webgpu/<name>.jsonl.gz.
 */
const jaxWorkloads = [
  "mlp-training",
  "transformer-varlen",
  "kv-decode",
  "cnn-jit",
  "jit-training",
  // The sixth hold-out set (`_holdout6.ts`).
  "dp-sgd",
] as const;

async function gzip(text: string): Promise<Uint8Array> {
  return new Uint8Array(
    await new Response(
      new Blob([text]).stream().pipeThrough(new CompressionStream("gzip")),
    ).arrayBuffer(),
  );
}

/**
 * One jax-js recording, in this process (jax-js is imported once per
 * process, its WebGPU backend made then).
 */
async function recordJax(name: string): Promise<void> {
  const { startGpuJax } = await import("./_gpu_jax.ts");
  const { jaxWebgpuWorkloads } = await import("./_holdout5.ts");
  const { jaxWebgpuWorkloads6 } = await import("./_holdout6.ts");
  const run = { ...jaxWebgpuWorkloads, ...jaxWebgpuWorkloads6 }[name];
  if (!run) throw new Error(`no jax-js workload ${name}`);
  const started = performance.now();
  const rec = await startGpuJax(`jax-js 0.1.25 webgpu ${name}`, {
    workload: name,
  });
  await run(rec);
  const extra = rec.finish();
  const gz = await gzip(rec.recorder.toJsonLines());
  const jaxDir = new URL("./jax-webgpu/", import.meta.url);
  await Deno.mkdir(jaxDir, { recursive: true });
  await Deno.writeFile(new URL(`${name}.jsonl.gz`, jaxDir), gz);
  const c = rec.checks;
  console.log(
    `jax-${name}: ${rec.recorder.events.length} events, ${
      (gz.length / 1024).toFixed(0)
    } KiB gz, ${c.steps} steps checked (${c.liveMismatches} live, ${c.heldMismatches} held mismatches), ${c.poolChecks} pool requests checked (${c.poolMismatches} mismatches), ${c.readbacks} read-backs, ${c.empty} empty arrays, ${c.others} other buffers, ${c.foreign} foreign slots, live at end ${rec.live.bytes} B in ${rec.live.count}, ${
      ((performance.now() - started) / 1000).toFixed(1)
    } s ${JSON.stringify(extra)}`,
  );
  if (
    c.liveMismatches || c.heldMismatches || c.poolMismatches || c.others ||
    c.foreign || rec.live.count
  ) {
    Deno.exitCode = 1;
  }
}

if (Deno.args[0] === "--jax") {
  await recordJax(Deno.args[1]);
  Deno.exit();
}

const dir = new URL("./tfjs-webgpu/", import.meta.url);
await Deno.mkdir(dir, { recursive: true });
const names = Deno.args.length ? Deno.args : [
  ...Object.keys(workloads),
  ...Object.keys(ortWorkloads),
  ...jaxWorkloads.map((n) => `jax-${n}`),
];
for (const name of names) {
  const jax = jaxWorkloads.find((n) => `jax-${n}` === name);
  if (jax) {
    const child = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", import.meta.filename!, "--jax", jax],
      stdout: "inherit",
      stderr: "inherit",
    }).output();
    if (!child.success) Deno.exitCode = 1;
    continue;
  }
  const ort = ortWorkloads[name as keyof typeof ortWorkloads];
  if (ort) {
    const started = performance.now();
    const rec = await ort.run(`onnxruntime-web 1.22 webgpu ${name}`);
    const text = rec.recorder.toJsonLines();
    const gz = await gzip(text);
    const ortDir = new URL("./onnxruntime-web/", import.meta.url);
    await Deno.mkdir(ortDir, { recursive: true });
    await Deno.writeFile(new URL(`${ort.file}.jsonl.gz`, ortDir), gz);
    console.log(
      `${name}: ${rec.recorder.events.length} events, ${
        (gz.length / 1024).toFixed(0)
      } KiB gz, ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    continue;
  }
  const run = workloads[name as keyof typeof workloads];
  if (!run) {
    throw new Error(
      `unknown workload ${name}; known: ${
        [
          ...Object.keys(workloads),
          ...Object.keys(ortWorkloads),
          ...jaxWorkloads.map((n) => `jax-${n}`),
        ].join(", ")
      }`,
    );
  }
  const started = performance.now();
  const rec = await startTfjs(`tfjs-webgpu 4.22 ${name}`, { workload: name });
  await run(rec);
  rec.finish();
  const text = rec.recording.recorder.toJsonLines();
  const gz = new Uint8Array(
    await new Response(
      new Blob([text]).stream().pipeThrough(new CompressionStream("gzip")),
    ).arrayBuffer(),
  );
  await Deno.writeFile(new URL(`${name}.jsonl.gz`, dir), gz);
  const events = rec.recording.recorder.events.length;
  console.log(
    `${name}: ${events} events, ${(text.length / 1024).toFixed(0)} KiB (${
      (gz.length / 1024).toFixed(0)
    } KiB gz), ${rec.checks.steps} steps checked, ${rec.checks.mismatches} mismatches, ${
      ((performance.now() - started) / 1000).toFixed(1)
    } s`,
  );
  if (rec.checks.mismatches) Deno.exitCode = 1;
}
void tf;
