/**
 * Benchmark of `@allot/registry`: what a record costs. Registering and
 * unregistering against a plain `Map` doing the same bookkeeping, and
 * `newArray` + `unregister` against `new Float32Array` left to the GC.
 *
 * Run: `deno run -A packages/registry/bench/run.ts [--quick]`
 *
 * @module
 */

import type { BenchOptions, Scenario } from "../../../scripts/bench/types.ts";
import { OwnershipRegistry } from "../mod.ts";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** Operations per second of each job, interleaved rounds, median. */
function opsPerSecond(
  rounds: number,
  ops: number,
  jobs: (() => void)[],
): number[] {
  const times: number[][] = jobs.map(() => []);
  for (let r = -1; r < rounds; r++) {
    jobs.forEach((job, j) => {
      const t0 = performance.now();
      job();
      const dt = performance.now() - t0;
      if (r >= 0) times[j].push(dt);
    });
  }
  return times.map((t) => ops / (median(t) / 1000));
}

/**
 * Runs the benchmark.
 *
 * @param options Quick mode and progress.
 * @returns The scenarios.
 */
export async function run(options: BenchOptions): Promise<Scenario[]> {
  const n = options.quick ? 5_000 : 100_000;
  const rounds = options.quick ? 3 : 9;
  options.progress?.(`registry: ${n} records per round`);
  const arrays = Array.from({ length: n }, () => new Float32Array(16));
  const registry = new OwnershipRegistry();

  const [ours, map] = opsPerSecond(rounds, n, [
    () => {
      for (const a of arrays) {
        registry.register(a, { kind: "custom", deleter: () => {} });
      }
      for (const a of arrays) registry.unregister(a);
    },
    () => {
      const m = new Map<object, Map<number, { n: number; free: () => void }>>();
      for (const a of arrays) {
        let inner = m.get(a.buffer);
        if (inner === undefined) m.set(a.buffer, inner = new Map());
        inner.set(a.byteOffset, { n: a.byteLength, free: () => {} });
      }
      for (const a of arrays) {
        const inner = m.get(a.buffer)!;
        const e = inner.get(a.byteOffset)!;
        inner.delete(a.byteOffset);
        if (inner.size === 0) m.delete(a.buffer);
        e.free();
      }
    },
  ]);

  const block = new Float32Array(n * 4);
  const aliases = Array.from({ length: n }, (_, i) => block.subarray(i * 4));
  const [aliasOps] = opsPerSecond(rounds, n, [
    () => {
      registry.register(block);
      for (const a of aliases) registry.addAlias(block, a);
      for (const a of aliases) registry.unregister(a);
      registry.unregister(block);
    },
  ]);

  const size = 1024;
  const [newArray, plain] = opsPerSecond(rounds, n / 10, [
    () => {
      for (let i = 0; i < n / 10; i++) {
        registry.unregister(registry.newArray("f32", size));
      }
    },
    () => {
      let keep = 0;
      for (let i = 0; i < n / 10; i++) keep += new Float32Array(size).length;
      if (keep < 0) throw new Error("unreachable");
    },
  ]);
  registry.dispose();
  await Promise.resolve();
  return [
    {
      package: "registry",
      scenario: `register + unregister, ${n} pointers`,
      unit: "ops/s",
      higherIsBetter: true,
      rows: [
        { name: "allot OwnershipRegistry", value: ours, ours: true },
        { name: "plain Map<buffer, Map<offset, record>>", value: map },
        {
          name: "allot addAlias + unregister (aliases of one buffer)",
          value: aliasOps,
        },
      ],
      ratios: [{
        label: "allot / plain Map (ops/s)",
        value: ours / map,
      }],
      notes: [
        "the registry validates every pointer and keeps counts, bytes and Stat figures; the Map baseline does none of that",
      ],
    },
    {
      package: "registry",
      scenario: `allocate and free 4 KiB arrays, ${n / 10} times`,
      unit: "ops/s",
      higherIsBetter: true,
      rows: [
        {
          name: "allot newArray + unregister",
          value: newArray,
          ours: true,
          note: "freed at once (detached)",
        },
        {
          name: "new Float32Array, left to the GC",
          value: plain,
          note: "freed whenever the GC runs",
        },
      ],
      ratios: [{
        label: "allot / new Float32Array (ops/s)",
        value: newArray / plain,
      }],
    },
  ];
}

if (import.meta.main) {
  const scenarios = await run({
    quick: Deno.args.includes("--quick"),
    progress: (m) => console.error(m),
  });
  for (const s of scenarios) {
    console.log(`\n${s.scenario} (${s.unit}, higher is better)`);
    for (const r of s.rows) {
      console.log(
        `  ${r.ours ? "*" : " "} ${r.name.padEnd(52)} ${
          Math.round(r.value).toLocaleString("en").padStart(14)
        }${r.note ? `  (${r.note})` : ""}`,
      );
    }
    for (const r of s.ratios ?? []) {
      console.log(`    ratio ${r.label}: ${r.value.toFixed(2)}`);
    }
  }
}
