/**
 * Benchmark of `@allot/sparse`: build, row-slice, select, convert and read a
 * discontiguous CSR matrix, against the same work on plain contiguous CSR
 * arrays (`values`, `indices`, `indptr` typed arrays), on the same input in
 * the same process. Full: 100k x 100k with 10M non-zeros. Quick: 5k x 5k
 * with 100k non-zeros.
 *
 * Run: `deno run -A packages/sparse/bench/run.ts [--quick]`
 *
 * @module
 */

import type {
  BenchOptions,
  Ratio,
  Row,
  Scenario,
} from "../../../scripts/bench/types.ts";
import { OwnershipRegistry } from "@allot/registry";
import { CpuAllocator, CpuHeap } from "@allot/cpu";
import { type CompressedArrays, SparseMatrix } from "../mod.ts";

interface Csr {
  values: Float32Array;
  indices: Int32Array;
  indptr: Int32Array;
}

/** xorshift32: the same matrix on every run. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

function makeMatrix(n: number, nnzTarget: number): Csr {
  const random = rng(12345);
  const average = nnzTarget / n;
  const indptr = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) {
    // Row lengths uniform in [0, 2 * average].
    indptr[i + 1] = indptr[i] + Math.floor(random() * (2 * average + 1));
  }
  const nnz = indptr[n];
  const indices = new Int32Array(nnz);
  const values = new Float32Array(nnz);
  for (let k = 0; k < nnz; k++) {
    indices[k] = Math.floor(random() * n);
    values[k] = random();
  }
  return { values, indices, indptr };
}

/** The validation a careful user would write for plain arrays. */
function plainValidate(a: Csr, cols: number): void {
  const { indptr, indices, values } = a;
  const n = indptr.length - 1;
  if (indptr[0] !== 0 || indptr[n] !== values.length) throw new Error("bad");
  for (let i = 0; i < n; i++) if (indptr[i + 1] < indptr[i]) throw new Error();
  for (let k = 0; k < indices.length; k++) {
    const c = indices[k];
    if (c < 0 || c >= cols) throw new Error("bad index");
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

interface Job<T = unknown> {
  body: () => T;
  after?: (value: T) => void;
}

/**
 * Median milliseconds of each job over `reps` rounds after one warm-up
 * round; the jobs run interleaved, round after round, so background load on
 * a shared machine hits them alike. `after` is untimed.
 */
// deno-lint-ignore no-explicit-any
function measure(reps: number, jobs: Job<any>[]): number[] {
  const times: number[][] = jobs.map(() => []);
  for (let r = -1; r < reps; r++) {
    jobs.forEach((job, j) => {
      const t0 = performance.now();
      const value = job.body();
      const dt = performance.now() - t0;
      job.after?.(value);
      if (r >= 0) times[j].push(dt);
    });
  }
  return times.map(median);
}

function scenario(
  title: string,
  ours: [string, number, string?],
  peers: [string, number, string?][],
  notes?: string[],
): Scenario {
  const rows: Row[] = [
    { name: ours[0], value: ours[1], ours: true, note: ours[2] },
    ...peers.map(([name, value, note]) => ({ name, value, note })),
  ];
  const ratios: Ratio[] = peers.map(([name, value]) => ({
    label: `${name} / ${ours[0]} (time)`,
    value: value / ours[1],
  }));
  return {
    package: "sparse",
    scenario: title,
    unit: "ms",
    higherIsBetter: false,
    rows,
    ratios,
    notes,
  };
}

/**
 * Runs the benchmark.
 *
 * @param options Quick mode and progress.
 * @returns One scenario per operation.
 */
export async function run(options: BenchOptions): Promise<Scenario[]> {
  const quick = options.quick;
  const n = quick ? 5_000 : 100_000;
  const target = quick ? 100_000 : 10_000_000;
  const reps = quick ? 5 : 9;
  const progress = options.progress ?? (() => {});
  progress(`sparse: generating ${n}x${n} with ~${target} non-zeros`);
  const csr = makeMatrix(n, target);
  const nnz = csr.values.length;
  const label = `${n / 1000}k x ${n / 1000}k, ${
    (nnz / 1e6).toFixed(nnz < 1e6 ? 2 : 1)
  }M nnz`;
  const registry = new OwnershipRegistry({ onLeak: () => {} });
  // A heap big enough for the matrix and a copy of it (the converted one):
  // no growth while timed. Over a fixed-length ArrayBuffer: typed arrays on
  // resizable buffers are slower to read in V8.
  const allocator = new CpuAllocator({
    heap: new CpuHeap(
      new ArrayBuffer(Math.ceil(nnz * 8 * 2.4) + (1 << 20)),
    ),
  });
  const shape: [number, number] = [n, n];
  const arrays = csr as CompressedArrays<Float32Array>;
  const copy = () => ({
    values: csr.values.slice(),
    indices: csr.indices.slice(),
    indptr: csr.indptr.slice(),
  });
  const release = (m: SparseMatrix) => m.release();
  const out: Scenario[] = [];

  // 1. Build.
  progress("sparse: build");
  const [buildHeap, buildSystem, buildCopy, buildCopyValidate, wrapOurs] =
    measure(reps, [
      {
        body: () => SparseMatrix.build(arrays, { shape, registry, allocator }),
        after: release,
      },
      {
        body: () => SparseMatrix.build(arrays, { shape, registry }),
        after: release,
      },
      { body: copy },
      {
        body: () => {
          plainValidate(csr, n);
          return copy();
        },
      },
      { body: () => SparseMatrix.wrap(arrays, { shape }) },
    ]);
  out.push(scenario(
    `build from traditional CSR, ${label}`,
    ["allot build, CpuAllocator blocks", buildHeap],
    [
      ["plain validate + copy", buildCopyValidate],
      ["plain copy (3x slice)", buildCopy, "no validation"],
      [
        "allot build, one ArrayBuffer per block",
        buildSystem,
        "zero-filled, GC-tracked",
      ],
      ["allot wrap (no copy)", wrapOurs, "validate + row table"],
    ],
    [
      "build validates indptr and every index, copies values and indices into blocks of ~4096 elements (SCL's rule: 100 nnz/row x 8 rows, clamped up) and registers each block",
    ],
  ));

  const matrix = SparseMatrix.build(arrays, { shape, registry, allocator });

  // 2. Row slice [n/4, 3n/4).
  progress("sparse: slice");
  const a = n / 4, b = (3 * n) / 4;
  const [sliceOurs, slicePlain] = measure(reps * 4, [
    { body: () => matrix.slice(a, b), after: release },
    {
      body: () => {
        const base = csr.indptr[a];
        const indptr = new Int32Array(b - a + 1);
        for (let i = a; i <= b; i++) indptr[i - a] = csr.indptr[i] - base;
        return {
          values: csr.values.subarray(base, csr.indptr[b]),
          indices: csr.indices.subarray(base, csr.indptr[b]),
          indptr,
        };
      },
    },
  ]);
  out.push(scenario(
    `row slice of half the rows, ${label}`,
    ["allot slice (shares blocks)", sliceOurs],
    [["plain subarray + rebased indptr", slicePlain, "zero-copy too"]],
    [
      "both copy no values; allot takes one registry reference per block used (~1250), plain rebases 50k indptr entries",
    ],
  ));

  // 3. Select 10% random rows.
  progress("sparse: select");
  const random = rng(99);
  const picks = Int32Array.from(
    { length: n / 10 },
    () => Math.floor(random() * n),
  );
  const [selectOurs, selectPlain] = measure(reps, [
    { body: () => matrix.select(picks), after: release },
    {
      body: () => {
        let count = 0;
        for (const r of picks) count += csr.indptr[r + 1] - csr.indptr[r];
        const values = new Float32Array(count);
        const indices = new Int32Array(count);
        const indptr = new Int32Array(picks.length + 1);
        let o = 0;
        for (let k = 0; k < picks.length; k++) {
          const s = csr.indptr[picks[k]], e = csr.indptr[picks[k] + 1];
          values.set(csr.values.subarray(s, e), o);
          indices.set(csr.indices.subarray(s, e), o);
          o += e - s;
          indptr[k + 1] = o;
        }
        return { values, indices, indptr };
      },
    },
  ]);
  out.push(scenario(
    `select ${picks.length} random rows, ${label}`,
    ["allot select (shares blocks)", selectOurs],
    [["plain gather copy", selectPlain, "contiguous CSR must copy"]],
  ));

  // 4. Convert to contiguous.
  progress("sparse: toContiguous");
  const half = matrix.slice(a, b);
  const [convertOurs, convertPlain, convertHalfOurs, convertHalfPlain] =
    measure(reps, [
      { body: () => matrix.toContiguous() },
      { body: copy },
      { body: () => half.toContiguous() },
      {
        body: () => {
          const base = csr.indptr[a], end = csr.indptr[b];
          const indptr = new Int32Array(b - a + 1);
          for (let i = a; i <= b; i++) indptr[i - a] = csr.indptr[i] - base;
          return {
            values: csr.values.slice(base, end),
            indices: csr.indices.slice(base, end),
            indptr,
          };
        },
      },
    ]);
  half.release();
  out.push(scenario(
    `convert to contiguous arrays, ${label}`,
    ["allot toContiguous", convertOurs, "one set() per block"],
    [["plain copy of contiguous arrays (3x slice)", convertPlain]],
  ));
  out.push(scenario(
    `convert a half-row slice to contiguous arrays, ${label}`,
    ["allot slice.toContiguous", convertHalfOurs],
    [["plain slice of ranges + rebased indptr", convertHalfPlain]],
  ));

  // 4b. CSR -> CSC.
  progress("sparse: toLayout");
  const [layoutOurs, layoutPlain, transposeOurs] = measure(reps, [
    {
      body: () => matrix.toLayout("csc", { registry, allocator }),
      after: release,
    },
    { body: () => plainToCsc(csr, n) },
    { body: () => matrix.transpose(), after: release },
  ]);
  out.push(scenario(
    `CSR to CSC, ${label}`,
    ['allot toLayout("csc"), CpuAllocator blocks', layoutOurs],
    [
      [
        "plain counting sort of contiguous arrays",
        layoutPlain,
        "output stays in three plain arrays",
      ],
      [
        "allot transpose() (no copy)",
        transposeOurs,
        "the CSC matrix of the transposed shape",
      ],
    ],
    [
      "toLayout counts per column, sorts stably into plain arrays, then builds registry-owned blocks from them (a second copy and a validation pass)",
    ],
  ));

  // 5. Read every row (sum of values per row).
  progress("sparse: row reads");
  const sums = new Float64Array(n);
  const [readTable, readPlain, readViews] = measure(reps, [
    {
      body: () => {
        const t = matrix.rowTable();
        for (let i = 0; i < n; i++) {
          const v = t.values[t.rowBlock[i]];
          const start = t.rowStart[i], end = start + t.rowLength[i];
          let s = 0;
          for (let k = start; k < end; k++) s += v[k];
          sums[i] = s;
        }
      },
    },
    {
      body: () => {
        const { values, indptr } = csr;
        for (let i = 0; i < n; i++) {
          let s = 0;
          for (let k = indptr[i]; k < indptr[i + 1]; k++) s += values[k];
          sums[i] = s;
        }
      },
    },
    {
      body: () => {
        for (let i = 0; i < n; i++) {
          const v = matrix.row(i).values;
          let s = 0;
          for (let k = 0; k < v.length; k++) s += v[k];
          sums[i] = s;
        }
      },
    },
  ]);
  out.push(scenario(
    `row sums, ${label}`,
    ["allot rowTable() loop", readTable, "no views"],
    [
      ["plain indptr loop", readPlain],
      ["allot row(i).values", readViews, "2 views per row"],
    ],
    [
      "row(i) makes two subarray views per call; hot loops over many short rows should use rowTable()",
    ],
  ));

  matrix.release();
  registry.dispose();
  await Promise.resolve();
  return out;
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  const scenarios = await run({
    quick,
    progress: (m) => console.error(m),
  });
  for (const s of scenarios) {
    console.log(`\n${s.scenario} (${s.unit}, lower is better)`);
    for (const r of s.rows) {
      console.log(
        `  ${r.ours ? "*" : " "} ${r.name.padEnd(44)} ${
          r.value.toFixed(3).padStart(10)
        }${r.note ? `  (${r.note})` : ""}`,
      );
    }
    for (const r of s.ratios ?? []) {
      console.log(`    ratio ${r.label}: ${r.value.toFixed(2)}`);
    }
    for (const note of s.notes ?? []) console.log(`    note: ${note}`);
  }
}

/** CSR to CSC of an n×n matrix over plain arrays: what a user would write. */
function plainToCsc(
  csr: { values: Float32Array; indices: Int32Array; indptr: Int32Array },
  n: number,
): { values: Float32Array; indices: Int32Array; indptr: Int32Array } {
  const { values, indices, indptr } = csr;
  const nnz = values.length;
  const colPtr = new Int32Array(n + 1);
  for (let k = 0; k < nnz; k++) colPtr[indices[k] + 1]++;
  for (let j = 0; j < n; j++) colPtr[j + 1] += colPtr[j];
  const next = colPtr.slice(0, n);
  const outValues = new Float32Array(nnz), outRows = new Int32Array(nnz);
  for (let i = 0; i < n; i++) {
    for (let k = indptr[i]; k < indptr[i + 1]; k++) {
      const at = next[indices[k]]++;
      outValues[at] = values[k];
      outRows[at] = i;
    }
  }
  return { values: outValues, indices: outRows, indptr: colPtr };
}
