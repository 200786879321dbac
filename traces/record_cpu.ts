/**
 * Records the CPU traces in `traces/cpu/`: TF.js 4.22 on the CPU in Deno,
 * unmodified, the WebAssembly backend (every `_malloc`/`_free` of tensor
 * memory) and the plain JavaScript backend (every tensor's data in its data
 * store), running the small random-weight models of `_models.ts`; and, for
 * the fourth hold-out set, jax-js 0.1.25's wasm device (every allocation of
 * its WebAssembly memory's allocator) running the models of
 * `_cpu_jax_models.ts`.
 *
 *   deno task traces:record-cpu [wasm/<name>|cpu/<name>|jax-wasm/<name>|<name>...]
 *
 * (all when none is given). Each recording runs in a fresh process, so that
 * the runtime and the wasm memory start empty. Writes
 * `traces/cpu/tfjs-<backend>/<name>.jsonl.gz` (checked at every step against
 * TF.js's own counters: live bytes and live allocations) and
 * `traces/cpu/jax-wasm/<name>.jsonl.gz` (checked against jax-js's memory:
 * see `_cpu_jax.ts`).
 *
 * @module
 */
import { type CpuBackendName, startCpuTfjs } from "./_cpu_tfjs.ts";
import type { TfjsRecording } from "./_tfjs.ts";
import {
  cnnTraining,
  kvDecode,
  mobilenet,
  transformerVarLen,
} from "./_models.ts";
import { mlpTraining } from "./_cpu_models.ts";

type Workload = (rec: TfjsRecording) => Promise<void>;
/** The recorded runtimes: TF.js's two CPU backends, and jax-js's wasm device. */
type Runtime = CpuBackendName | "jax-wasm";

const workloads: Record<string, Workload> = {
  "mobilenet-inference": mobilenet,
  "cnn-training": cnnTraining,
  "transformer-varlen": transformerVarLen,
  "kv-decode": kvDecode,
  "mlp-training": mlpTraining,
};

/**
 * Workloads each runtime runs (TF.js's wasm backend has no conv filter
 * gradient; jax-js's are the fourth hold-out set's, `_cpu_jax_models.ts`).
 */
const plan: Record<Runtime, string[]> = {
  cpu: [
    "mobilenet-inference",
    "cnn-training",
    "transformer-varlen",
    "kv-decode",
    "mlp-training",
  ],
  wasm: [
    "mobilenet-inference",
    "transformer-varlen",
    "kv-decode",
    "mlp-training",
  ],
  "jax-wasm": ["mlp-training", "transformer-varlen", "kv-decode", "cnn-jit"],
};

async function gzip(text: string): Promise<Uint8Array> {
  return new Uint8Array(
    await new Response(
      new Blob([text]).stream().pipeThrough(new CompressionStream("gzip")),
    ).arrayBuffer(),
  );
}

/** One jax-js recording: `traces/cpu/jax-wasm/<name>.jsonl.gz`. */
async function recordJax(name: string) {
  const { startCpuJax } = await import("./_cpu_jax.ts");
  const models = await import("./_cpu_jax_models.ts");
  const run = {
    "mlp-training": models.jaxMlpTraining,
    "transformer-varlen": models.jaxTransformerVarlen,
    "kv-decode": models.jaxKvDecode,
    "cnn-jit": models.jaxCnnJit,
  }[name];
  if (!run) throw new Error(`no jax-wasm workload ${name}`);
  const started = performance.now();
  const rec = await startCpuJax(`jax-js 0.1.25 wasm ${name}`, {
    workload: name,
  });
  await run(rec);
  const extra = rec.finish();
  const gz = await gzip(rec.recorder.toJsonLines());
  const dir = new URL("./cpu/jax-wasm/", import.meta.url);
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeFile(new URL(`${name}.jsonl.gz`, dir), gz);
  const { steps, mismatches, uploads, uploadMismatches, foreign } = rec.checks;
  console.log(
    `jax-wasm/${name}: ${rec.recorder.events.length} events, ${
      (gz.length / 1024).toFixed(0)
    } KiB gz, ${steps} steps checked, ${mismatches} mismatches, ${uploads} uploads found at their pointer (${uploadMismatches} not), ${foreign} foreign slots, live at end ${rec.live.bytes} B in ${rec.live.count}, ${
      ((performance.now() - started) / 1000).toFixed(1)
    } s ${JSON.stringify(extra)}`,
  );
  if (mismatches || uploadMismatches || foreign) Deno.exitCode = 1;
}

async function recordOne(backend: CpuBackendName, name: string) {
  const run = workloads[name];
  const started = performance.now();
  const rec = await startCpuTfjs(backend, `tfjs-${backend} 4.22 ${name}`, {
    workload: name,
  });
  await run(rec as unknown as TfjsRecording);
  const extra = rec.finish();
  const text = rec.recording.recorder.toJsonLines();
  const gz = await gzip(text);
  const dir = new URL(`./cpu/tfjs-${backend}/`, import.meta.url);
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeFile(new URL(`${name}.jsonl.gz`, dir), gz);
  const { steps, mismatches, exact, foreignFrees, overwrites } = rec.checks;
  console.log(
    `${backend}/${name}: ${rec.recording.recorder.events.length} events, ${
      (gz.length / 1024).toFixed(0)
    } KiB gz, ${steps} steps checked, ${mismatches} mismatches (${exact} equal numBytes uncorrected), ${foreignFrees} foreign frees, ${overwrites} overwrites, live at end ${rec.live.bytes} B, ${
      ((performance.now() - started) / 1000).toFixed(1)
    } s ${JSON.stringify(extra)}`,
  );
  if (mismatches || foreignFrees || overwrites) {
    Deno.exitCode = 1;
  }
}

if (Deno.args[0] === "--one") {
  if (Deno.args[1] === "jax-wasm") await recordJax(Deno.args[2]);
  else await recordOne(Deno.args[1] as CpuBackendName, Deno.args[2]);
} else {
  const all = (Object.keys(plan) as Runtime[]).flatMap((b) =>
    plan[b].map((w) => [b, w] as const)
  );
  const chosen = Deno.args.length
    ? all.filter(([b, w]) =>
      Deno.args.some((a) => a === w || a === `${b}/${w}`)
    )
    : all;
  if (chosen.length === 0) {
    throw new Error(
      `no workload matches ${Deno.args.join(" ")}; known: ${
        all.map(([b, w]) => `${b}/${w}`).join(", ")
      }`,
    );
  }
  for (const [backend, name] of chosen) {
    const child = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-all",
        import.meta.filename!,
        "--one",
        backend,
        name,
      ],
      stdout: "inherit",
      stderr: "inherit",
    }).output();
    if (!child.success) Deno.exitCode = 1;
  }
}
