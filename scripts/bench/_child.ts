/**
 * Runs one package's `bench/run.ts` in its own process for `deno task bench`:
 * progress messages go to stderr behind a marker, the scenarios to the JSON
 * file named on the command line.
 *
 * Usage: `deno run -A scripts/bench/_child.ts <run.ts> <out.json> [--quick]`
 *
 * @module
 */

import type { BenchOptions, Scenario } from "./types.ts";

/** Marks a progress line on stderr; the parent turns it into its status line. */
export const PROGRESS_MARK = "\u0001progress ";

if (import.meta.main) {
  const [entry, out] = Deno.args;
  const quick = Deno.args.includes("--quick");
  const encoder = new TextEncoder();
  const module = await import(new URL(entry, `file://${Deno.cwd()}/`).href);
  if (typeof module.run !== "function") {
    throw new Error(`Cannot run ${entry}: it exports no run() function`);
  }
  const options: BenchOptions = {
    quick,
    progress: (message: string) => {
      const line = message.replace(/\s+/g, " ").trim();
      Deno.stderr.writeSync(encoder.encode(`${PROGRESS_MARK}${line}\n`));
    },
  };
  const scenarios: Scenario[] = await module.run(options);
  await Deno.writeTextFile(out, JSON.stringify(scenarios));
}
