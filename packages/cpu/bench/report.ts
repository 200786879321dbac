/**
 * Prints benchmark scenarios as Markdown tables (shared by the cpu and buddy
 * benchmarks).
 *
 * @module
 */

import type { Scenario } from "../../../scripts/bench/types.ts";

function format(value: number, unit: string): string {
  if (unit === "ops/s") {
    return value >= 1e6
      ? `${(value / 1e6).toFixed(2)} M`
      : `${(value / 1e3).toFixed(1)} k`;
  }
  return value.toFixed(3);
}

/**
 * Prints scenarios as Markdown tables.
 *
 * @param scenarios The scenarios.
 */
export function printScenarios(scenarios: Scenario[]): void {
  for (const s of scenarios) {
    console.log(`\n### ${s.scenario}\n`);
    console.log(`| allocator | ${s.unit} | note |\n|---|---:|---|`);
    for (const r of s.rows) {
      console.log(
        `| ${r.ours ? "**" + r.name + "**" : r.name} | ${
          format(r.value, s.unit)
        } | ${r.note ?? ""} |`,
      );
    }
    if (s.ratios?.length) console.log("");
    for (const r of s.ratios ?? []) {
      console.log(
        `- ${r.label}: **${r.value.toFixed(2)}**${
          r.target ? ` (target ${r.target}: ${r.met ? "met" : "not met"})` : ""
        }`,
      );
    }
  }
}
