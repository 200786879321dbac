/**
 * Benchmark of `@allot/trace`: the recorder's overhead per wrapped WebGPU
 * call against the bare call (same process, two devices, interleaved
 * rounds), report generation for a 100k-event trace, and the policies'
 * peak held over peak live on the recorded TF.js traces.
 *
 * Run: `deno run -A packages/trace/bench/run.ts [--quick]`
 *
 * @module
 */
import { gunzipSync } from "node:zlib";
import type { BenchOptions, Scenario } from "../../../scripts/bench/types.ts";
import { memoryReport, parseTrace, recordDevice, replayTrace } from "../mod.ts";
import { syntheticTrace } from "./_synthetic.ts";
import { haveBrowser, launch } from "../_test_browser.ts";

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** ns per call of `fn` over `n` calls. */
function time(n: number, fn: () => void): number {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) fn();
  return ((performance.now() - t0) * 1e6) / n;
}

async function overhead(quick: boolean): Promise<Scenario[]> {
  const adapter = await navigator.gpu?.requestAdapter();
  if (!adapter) return [];
  const bare = await adapter.requestDevice();
  const withStacks = recordDevice(await adapter.requestDevice());
  const noStacks = recordDevice(await adapter.requestDevice(), {
    stacks: "none",
  });
  const rounds = quick ? 3 : 9, n = quick ? 200 : 1000;
  const U = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
  const data = new Uint8Array(256);
  const devices = [["bare device", bare], [
    "recorded, stacks on create",
    withStacks.device,
  ], ["recorded, no stacks", noStacks.device]] as const;
  const create: number[][] = devices.map(() => []),
    write: number[][] = devices.map(() => []),
    submit: number[][] = devices.map(() => []);
  for (let r = 0; r < rounds; r++) {
    devices.forEach(([, d], k) => {
      create[k].push(
        time(n, () => d.createBuffer({ size: 256, usage: U }).destroy()),
      );
      const b = d.createBuffer({ size: 256, usage: U });
      write[k].push(time(n, () => d.queue.writeBuffer(b, 0, data)));
      b.destroy();
      submit[k].push(time(n, () => d.queue.submit([])));
    });
  }
  for (const d of [bare, withStacks.device, noStacks.device]) d.destroy();
  const scen = (what: string, xs: number[][]): Scenario => {
    const med = xs.map(median);
    return {
      package: "trace",
      scenario:
        `recorder overhead: ${what} (Deno WebGPU, median of ${rounds} interleaved rounds × ${n})`,
      unit: "ns/op",
      higherIsBetter: false,
      rows: devices.map(([name], k) => ({
        name,
        value: med[k],
        ours: k === 1,
        note: `range ${Math.min(...xs[k]).toFixed(0)}–${
          Math.max(...xs[k]).toFixed(0)
        }`,
      })),
      ratios: [
        { label: "bare / recorded (stacks)", value: med[0] / med[1] },
        { label: "bare / recorded (no stacks)", value: med[0] / med[2] },
      ],
    };
  };
  return [
    scen("createBuffer + destroy", create),
    scen("queue.writeBuffer 256 B", write),
    scen("queue.submit([])", submit),
  ];
}

/** The recorder's own cost per call, on a device whose calls do nothing. */
function recorderAlone(quick: boolean): Scenario {
  class B {
    constructor(readonly size: number, readonly usage: number) {}
    destroy() {}
    mapAsync() {
      return Promise.resolve();
    }
    unmap() {}
  }
  class Q {
    submit(_l: unknown[]) {}
    writeBuffer() {}
  }
  class D {
    readonly q = new Q();
    get queue() {
      return this.q;
    }
    createBuffer(d: { size: number; usage: number }) {
      return new B(d.size, d.usage);
    }
  }
  const bare = new D() as unknown as GPUDevice;
  const rec = recordDevice(new D() as unknown as GPUDevice).device;
  const noStacks =
    recordDevice(new D() as unknown as GPUDevice, { stacks: "none" }).device;
  const rounds = quick ? 3 : 9, n = quick ? 2000 : 20000;
  const devs = [["no-op device", bare], ["recorded, stacks on create", rec], [
    "recorded, no stacks",
    noStacks,
  ]] as const;
  const xs: number[][] = devs.map(() => []);
  const data = new Uint8Array(16);
  for (let r = 0; r < rounds; r++) {
    devs.forEach(([, d], k) => {
      xs[k].push(time(n, () => {
        const b = d.createBuffer({ size: 256, usage: 0x88 });
        d.queue.writeBuffer(b, 0, data);
        d.queue.submit([]);
        b.destroy();
      }));
    });
  }
  const med = xs.map(median);
  return {
    package: "trace",
    scenario:
      `recorder cost alone: createBuffer + writeBuffer + submit + destroy on a no-op device (median of ${rounds} × ${n})`,
    unit: "ns/op",
    higherIsBetter: false,
    rows: devs.map(([name], k) => ({
      name,
      value: med[k],
      ours: k === 1,
      note: `range ${Math.min(...xs[k]).toFixed(0)}–${
        Math.max(...xs[k]).toFixed(0)
      }`,
    })),
    notes: [
      "4 recorded calls per op; the stack capture (64 frames, on create only) dominates",
    ],
  };
}

async function reportSize(quick: boolean): Promise<Scenario> {
  const n = quick || Deno.env.get("TRACE_BENCH_N")
    ? Number(Deno.env.get("TRACE_BENCH_N") ?? 10_000)
    : 100_000;
  const text = syntheticTrace(n);
  const t0 = performance.now();
  const html = memoryReport(text, { repeat: 1 });
  const ms = performance.now() - t0;
  const rows = [{
    name: "memoryReport (generate)",
    value: ms,
    ours: true,
    note: `${(html.length / 2 ** 20).toFixed(2)} MiB of HTML`,
  }];
  if (haveBrowser()) {
    const file = await Deno.makeTempFile({ suffix: ".html" });
    await Deno.writeTextFile(file, html);
    const browser = await launch();
    try {
      const opens: number[] = [];
      for (let r = 0; r < (quick ? 1 : 3); r++) {
        const page = await browser.newPage({
          viewport: { width: 1200, height: 900 },
        });
        await page.goto(`file://${file}`);
        await page.waitForFunction(
          "window.__reportReadyMs !== undefined",
          undefined,
          { timeout: 60000 },
        );
        opens.push(await page.evaluate("window.__reportReadyMs"));
        await page.close();
      }
      rows.push({
        name: "chromium: open until drawn",
        value: median(opens),
        ours: true,
        note: `range ${Math.min(...opens).toFixed(0)}–${
          Math.max(...opens).toFixed(0)
        } ms`,
      });
    } finally {
      await browser.close();
      await Deno.remove(file);
    }
  }
  return {
    package: "trace",
    scenario:
      `HTML report of a ${n}-event trace (parse, replay 5 policies, draw)`,
    unit: "ms",
    higherIsBetter: false,
    rows,
  };
}

async function realTraces(quick: boolean): Promise<Scenario[]> {
  const dir = new URL("../../../traces/tfjs-webgpu/", import.meta.url);
  const out: Scenario[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (!e.name.endsWith(".jsonl.gz")) continue;
    const trace = parseTrace(
      new TextDecoder().decode(
        gunzipSync(await Deno.readFile(new URL(e.name, dir))),
      ),
    );
    const r = replayTrace(trace, { usage: "storage", repeat: quick ? 1 : 3 });
    out.push({
      package: "trace",
      scenario: `real trace ${
        e.name.replace(".jsonl.gz", "")
      } (TF.js 4.22 WebGPU, storage buffers): peak held / peak live`,
      unit: "x peak live",
      higherIsBetter: false,
      rows: [
        ...(r.recordedPeakReservedBytes !== undefined
          ? [{
            name: "the app, as recorded",
            value: r.recordedPeakReservedBytes / r.peakRequestedBytes,
          }]
          : []),
        ...r.policies.map((p) => ({
          name: p.name,
          value: p.peakReservedBytes / r.peakRequestedBytes,
          ours: p.name === "allot-caching",
          note: `${p.buffersCreated} buffers, ${p.nsPerOp.toFixed(0)} ns/op`,
        })),
      ],
    });
  }
  return out.sort((a, b) => a.scenario.localeCompare(b.scenario));
}

/** Runs every scenario. */
export async function run(options: BenchOptions): Promise<Scenario[]> {
  options.progress?.("recorder overhead");
  const a = [recorderAlone(options.quick), ...await overhead(options.quick)];
  options.progress?.("report size");
  const b = await reportSize(options.quick);
  options.progress?.("real traces");
  const c = await realTraces(options.quick);
  return [...a, b, ...c];
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  for (const s of await run({ quick })) {
    console.log(`\n${s.scenario} [${s.unit}]`);
    for (const r of s.rows) {
      console.log(
        `  ${r.name.padEnd(28)} ${r.value.toFixed(2).padStart(10)}  ${
          r.note ?? ""
        }`,
      );
    }
    for (const q of s.ratios ?? []) {
      console.log(`  ${q.label}: ${q.value.toFixed(2)}`);
    }
  }
}
