/**
 * Records the CPU traces in `traces/cpu/`: TF.js 4.22 on the CPU in Deno,
 * unmodified, the WebAssembly backend (every `_malloc`/`_free` of tensor
 * memory) and the plain JavaScript backend (every tensor's data in its data
 * store), running the small random-weight models of `_models.ts`.
 *
 *   deno task traces:record-cpu [wasm/<name>|cpu/<name>|<name>...]
 *
 * (all when none is given). Each recording runs in a fresh process, so that
 * TF.js's engine and the wasm memory start empty. Writes
 * `traces/cpu/tfjs-<backend>/<name>.jsonl.gz` and checks at every step that
 * the trace's live bytes and live allocations equal TF.js's own counters.
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

const workloads: Record<string, Workload> = {
  "mobilenet-inference": mobilenet,
  "cnn-training": cnnTraining,
  "transformer-varlen": transformerVarLen,
  "kv-decode": kvDecode,
  "mlp-training": mlpTraining,
};

/** Workloads each backend runs (the wasm backend has no conv filter gradient). */
const plan: Record<CpuBackendName, string[]> = {
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
};

async function gzip(text: string): Promise<Uint8Array> {
  return new Uint8Array(
    await new Response(
      new Blob([text]).stream().pipeThrough(new CompressionStream("gzip")),
    ).arrayBuffer(),
  );
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
  await recordOne(Deno.args[1] as CpuBackendName, Deno.args[2]);
} else {
  const all = (Object.keys(plan) as CpuBackendName[]).flatMap((b) =>
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
