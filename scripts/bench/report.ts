/**
 * Renders `deno task bench` results: one Markdown table per scenario (our
 * figure, each peer's, and the ratios with their targets), with the machine
 * and runtime versions on top.
 *
 * @module
 */

import type { Scenario } from "./types.ts";

/** Facts about the machine and runtime a report was made on. */
export interface Environment {
  /** ISO date and time of the run. */
  date: string;
  /** `quick` (CI smoke) or `full`. */
  mode: "quick" | "full";
  /** CPU model, as the OS names it. */
  cpu: string;
  /** Logical cores. */
  cores: number;
  /** Total memory in bytes. */
  memoryBytes: number;
  /** Operating system and architecture. */
  os: string;
  /** Deno version. */
  deno: string;
  /** V8 version. */
  v8: string;
  /** TypeScript version. */
  typescript: string;
  /** The command that produced the report. */
  command: string;
}

/** A package whose benchmark failed. */
export interface BenchFailure {
  /** Package folder name. */
  package: string;
  /** What went wrong. */
  error: string;
}

/** The whole report, as written to JSON. */
export interface BenchReport {
  /** Machine and runtime. */
  environment: Environment;
  /** Every scenario of every package, in run order. */
  scenarios: Scenario[];
  /** Packages whose benchmark threw or returned malformed data. */
  failures: BenchFailure[];
  /** Seconds each package's benchmark took. */
  seconds: Record<string, number>;
}

/**
 * Collects the machine and runtime facts of this process.
 *
 * @param mode `quick` or `full`.
 * @param command The command line that made the report.
 * @returns The environment facts.
 */
export async function environment(
  mode: "quick" | "full",
  command: string,
): Promise<Environment> {
  let cpu = "unknown CPU";
  try {
    const info = await Deno.readTextFile("/proc/cpuinfo");
    cpu = /^model name\s*:\s*(.+)$/m.exec(info)?.[1]?.trim() ?? cpu;
  } catch {
    // not Linux
  }
  return {
    date: new Date().toISOString(),
    mode,
    cpu,
    cores: navigator.hardwareConcurrency,
    memoryBytes: Deno.systemMemoryInfo().total,
    os: `${Deno.build.os} ${Deno.osRelease()} ${Deno.build.arch}`,
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    typescript: Deno.version.typescript,
    command,
  };
}

/**
 * Checks a package's returned scenarios against the {@linkcode Scenario}
 * shape.
 *
 * @param value What `run()` returned.
 * @returns Problems found; empty when the value is well formed.
 */
export function validateScenarios(value: unknown): string[] {
  if (!Array.isArray(value)) return ["run() did not return an array"];
  const problems: string[] = [];
  value.forEach((s, i) => {
    const where = `scenario ${i}${s?.scenario ? ` (${s.scenario})` : ""}`;
    if (typeof s !== "object" || s === null) {
      problems.push(`${where} is not an object`);
      return;
    }
    for (const key of ["package", "scenario", "unit"]) {
      if (typeof s[key] !== "string") {
        problems.push(`${where} has no string ${key}`);
      }
    }
    if (typeof s.higherIsBetter !== "boolean") {
      problems.push(`${where} has no boolean higherIsBetter`);
    }
    if (!Array.isArray(s.rows) || s.rows.length === 0) {
      problems.push(`${where} has no rows`);
    } else {
      for (const row of s.rows) {
        if (typeof row?.name !== "string" || typeof row?.value !== "number") {
          problems.push(`${where} has a row without name and numeric value`);
        }
      }
    }
    for (const ratio of s.ratios ?? []) {
      if (
        typeof ratio?.label !== "string" || typeof ratio?.value !== "number"
      ) {
        problems.push(`${where} has a ratio without label and numeric value`);
      }
    }
  });
  return problems;
}

/**
 * Formats a figure with three significant digits and thousands separators.
 *
 * @param value The figure.
 * @returns Its text.
 */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 1000) {
    return Math.round(value).toLocaleString("en-US");
  }
  if (abs === 0) return "0";
  return Number(value.toPrecision(3)).toString();
}

function table(header: string[], rows: string[][], align: string[]): string {
  const widths = header.map((h, i) =>
    Math.max(3, h.length, ...rows.map((r) => r[i].length))
  );
  const line = (cells: string[]) =>
    `| ${
      cells.map((c, i) =>
        align[i] === "r" ? c.padStart(widths[i]) : c.padEnd(widths[i])
      ).join(" | ")
    } |`;
  const rule = `| ${
    widths.map((w, i) =>
      align[i] === "r" ? `${"-".repeat(w - 1)}:` : "-".repeat(w)
    ).join(" | ")
  } |`;
  return [line(header), rule, ...rows.map(line)].join("\n");
}

/**
 * Renders one scenario as Markdown: a heading, the figures, the ratios.
 *
 * @param scenario The scenario.
 * @returns Markdown text.
 */
export function renderScenario(scenario: Scenario): string {
  const better = scenario.higherIsBetter
    ? "higher is better"
    : "lower is better";
  const out = [
    `### ${scenario.package}: ${scenario.scenario}`,
    "",
    table(
      ["", `${scenario.unit} (${better})`, "note"],
      scenario.rows.map((row) => [
        row.ours ? `**${row.name}**` : row.name,
        formatNumber(row.value),
        row.note ?? "",
      ]),
      ["l", "r", "l"],
    ),
  ];
  if (scenario.ratios?.length) {
    out.push(
      "",
      table(
        ["ratio (greater is better for allot)", "value", "target", "met"],
        scenario.ratios.map((r) => [
          r.label,
          `${r.value.toFixed(2)}x`,
          r.target ?? "",
          r.met === undefined ? "" : r.met ? "yes" : "**no**",
        ]),
        ["l", "r", "l", "l"],
      ),
    );
  }
  if (scenario.notes?.length) {
    out.push("", ...scenario.notes.map((note) => `- ${note}`));
  }
  return out.join("\n");
}

/**
 * Renders the whole report as Markdown.
 *
 * @param report The report.
 * @returns Markdown text.
 */
export function renderReport(report: BenchReport): string {
  const env = report.environment;
  const gib = (env.memoryBytes / 2 ** 30).toFixed(1);
  const out = [
    `## Benchmarks (${env.mode} run)`,
    "",
    `Made with \`${env.command}\` on ${
      env.date.slice(0, 16).replace("T", " ")
    } UTC.`,
    `Machine: ${env.cpu}, ${env.cores} logical cores, ${gib} GiB, ${env.os}.`,
    `Runtime: Deno ${env.deno}, V8 ${env.v8}, TypeScript ${env.typescript}.`,
    "Every peer runs in the same process on the same input; ratios are",
    "oriented so that greater is better for allot.",
  ];
  if (env.mode === "quick") {
    out.push(
      "",
      "This is a quick run (small inputs, few iterations): a smoke test of the",
      "benchmarks, not figures to compare. `deno task bench` makes the full one.",
    );
  }
  const ratios = report.scenarios.flatMap((s) =>
    (s.ratios ?? []).filter((r) => r.met !== undefined).map((r) => ({
      ...r,
      scenario: `${s.package}: ${s.scenario}`,
    }))
  );
  const met = ratios.filter((r) => r.met).length;
  if (ratios.length) {
    out.push(
      "",
      `### Summary: ${met} of ${ratios.length} targets met`,
      "",
      table(
        [
          "scenario",
          "ratio (greater is better for allot)",
          "value",
          "target",
          "met",
        ],
        ratios.map((r) => [
          r.scenario,
          r.label,
          `${r.value.toFixed(2)}x`,
          r.target ?? "",
          r.met ? "yes" : "**no**",
        ]),
        ["l", "l", "r", "l", "l"],
      ),
    );
  }
  let current = "";
  for (const scenario of report.scenarios) {
    if (scenario.package !== current) {
      current = scenario.package;
      const seconds = report.seconds[current];
      out.push(
        "",
        `## @allot/${current}${
          seconds === undefined ? "" : ` (${seconds.toFixed(1)} s)`
        }`,
      );
    }
    out.push("", renderScenario(scenario));
  }
  if (report.failures.length) {
    out.push("", "## Failed benchmarks", "");
    for (const f of report.failures) {
      const [first, ...rest] = f.error.split("\n");
      out.push(`- ${f.package}: ${first}`);
      if (rest.length) {
        out.push(
          "",
          "  ```",
          ...rest.map((l) => `  ${l}`),
          "  ```",
        );
      }
    }
  }
  return out.join("\n") + "\n";
}
