/**
 * The shape every package benchmark returns, so `deno task bench` can print
 * one report. A package's benchmark entry is `packages/<pkg>/bench/run.ts`,
 * which exports `run(options: BenchOptions): Promise<Scenario[]>` and prints
 * its own table when run directly (`if (import.meta.main)`).
 *
 * @module
 */

/** Options every package benchmark accepts. */
export interface BenchOptions {
  /** Small inputs and few iterations, for CI smoke runs. */
  quick: boolean;
  /** Called with a short progress message. */
  progress?: (message: string) => void;
}

/** One measured figure in a scenario. */
export interface Row {
  /** Who was measured: `allot CpuHeap`, `AssemblyScript TLSF`, `new ArrayBuffer`, ... */
  name: string;
  /** The figure, in the scenario's unit. */
  value: number;
  /** `true` for allot's own row (the numerator of every ratio). */
  ours?: boolean;
  /** A short caveat shown next to the figure. */
  note?: string;
}

/** A ratio of ours against a peer, with the target from the issue. */
export interface Ratio {
  /** For example `CpuHeap / AssemblyScript TLSF`. */
  label: string;
  /** The ratio, oriented so that greater is better for allot. */
  value: number;
  /** The target as written, for example `>= 1.5`. */
  target?: string;
  /** Whether the target was met. */
  met?: boolean;
}

/** One table of the report. */
export interface Scenario {
  /** Package name without scope, such as `cpu`. */
  package: string;
  /** Scenario title, such as `log-uniform trace, 200k ops, ~1000 live`. */
  scenario: string;
  /** Unit of every row, such as `ops/s`, `ns/op`, `GB/s`, `x peak live`. */
  unit: string;
  /** Whether larger values are better. */
  higherIsBetter: boolean;
  /** The figures, ours and the peers'. */
  rows: Row[];
  /** Ratios against peers, with targets. */
  ratios?: Ratio[];
  /** Free-form caveats. */
  notes?: string[];
}
