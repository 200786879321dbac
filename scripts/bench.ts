/**
 * `deno task bench [--quick] [pkg...]`: runs every package's benchmark entry
 * point (`packages/<pkg>/bench/run.ts`, found, not listed), each in its own
 * process, shows a progress line while they run, then prints one report (a
 * table per scenario: our figure, each peer's, the ratios with targets) with
 * the machine and runtime versions, and writes it as Markdown and JSON to
 * `bench-results/bench-<quick|full>.{md,json}`.
 *
 * Exits non-zero when a package's benchmark throws, times out or returns
 * malformed data; unmet targets are reported, not hidden, and do not fail
 * the run.
 *
 * @module
 */

import { abs, members, root } from "./_workspace.ts";
import { PROGRESS_MARK } from "./bench/_child.ts";
import {
  type BenchFailure,
  type BenchReport,
  environment,
  renderReport,
  validateScenarios,
} from "./bench/report.ts";
import type { Scenario } from "./bench/types.ts";

const quick = Deno.args.includes("--quick");
const only = Deno.args.filter((a) => !a.startsWith("--"));
const timeoutMs = (quick ? 180 : 900) * 1000;
const encoder = new TextEncoder();
const tty = Deno.stderr.isTerminal();

/** Shows the progress line: rewritten in place on a terminal, else a line. */
let shown = "";
let lastPrinted = 0;
function progress(line: string): void {
  if (tty) {
    const width = Deno.consoleSize?.().columns ?? 100;
    const text = line.slice(0, width - 1);
    Deno.stderr.writeSync(encoder.encode(`\r\x1b[2K${text}`));
    shown = text;
  } else if (Date.now() - lastPrinted > 1000) {
    // Logs: at most one progress line a second.
    console.error(line);
    lastPrinted = Date.now();
  }
}
function clearProgress(): void {
  if (tty && shown) Deno.stderr.writeSync(encoder.encode("\r\x1b[2K"));
  shown = "";
}

async function pipeLines(
  stream: ReadableStream<Uint8Array>,
  onLine: (line: string) => void,
): Promise<void> {
  let buffered = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    buffered += chunk;
    let newline;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      onLine(buffered.slice(0, newline));
      buffered = buffered.slice(newline + 1);
    }
  }
  if (buffered) onLine(buffered);
}

async function runPackage(
  pkg: string,
  label: string,
): Promise<{ scenarios: Scenario[] } | { error: string }> {
  const out = await Deno.makeTempFile({ suffix: ".json" });
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      "--v8-flags=--expose-gc",
      abs("scripts/bench/_child.ts"),
      `packages/${pkg}/bench/run.ts`,
      out,
      ...(quick ? ["--quick"] : []),
    ],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const started = performance.now();
  const tail: string[] = [];
  const passThrough = (line: string) => {
    if (line.startsWith(PROGRESS_MARK)) {
      const seconds = ((performance.now() - started) / 1000).toFixed(0);
      progress(`${label} ${line.slice(PROGRESS_MARK.length)} (${seconds} s)`);
      return;
    }
    tail.push(line);
    if (tail.length > 20) tail.shift();
  };
  progress(`${label} starting`);
  const [status] = await Promise.all([
    child.status,
    pipeLines(child.stdout, passThrough),
    pipeLines(child.stderr, passThrough),
  ]);
  clearTimeout(timer);
  try {
    if (!status.success) {
      const why = status.signal === "SIGKILL"
        ? `timed out after ${timeoutMs / 1000} s`
        : `exited with code ${status.code}`;
      return { error: `${why}\n${tail.join("\n")}`.trim() };
    }
    const scenarios = JSON.parse(await Deno.readTextFile(out));
    const problems = validateScenarios(scenarios);
    if (problems.length) return { error: problems.join("; ") };
    return { scenarios };
  } finally {
    await Deno.remove(out).catch(() => {});
  }
}

const packages: string[] = [];
for (const member of await members()) {
  if (only.length && !only.includes(member.pkg)) continue;
  try {
    await Deno.stat(abs(`${member.dir}/bench/run.ts`));
    packages.push(member.pkg);
  } catch {
    // no benchmark entry point yet
  }
}

const command = `deno task bench${
  Deno.args.length ? ` ${Deno.args.join(" ")}` : ""
}`;
const report: BenchReport = {
  environment: await environment(quick ? "quick" : "full", command),
  scenarios: [],
  failures: [],
  seconds: {},
};
console.error(
  `bench: ${packages.length} package(s) with bench/run.ts (${
    quick ? "quick" : "full"
  } run): ${packages.join(", ")}`,
);
for (const [i, pkg] of packages.entries()) {
  const label = `bench [${i + 1}/${packages.length}] ${pkg}:`;
  const started = performance.now();
  const result = await runPackage(pkg, label);
  const seconds = (performance.now() - started) / 1000;
  report.seconds[pkg] = seconds;
  clearProgress();
  if ("error" in result) {
    const failure: BenchFailure = { package: pkg, error: result.error };
    report.failures.push(failure);
    console.error(
      `bench: ${pkg} FAILED after ${seconds.toFixed(1)} s: ${result.error}`,
    );
  } else {
    report.scenarios.push(...result.scenarios);
    console.error(
      `bench: ${pkg} done in ${
        seconds.toFixed(1)
      } s, ${result.scenarios.length} scenario(s)`,
    );
  }
}

const markdown = renderReport(report);
console.log(`\n${markdown}`);
const dir = abs("bench-results/");
await Deno.mkdir(dir, { recursive: true });
const base = `${dir}bench-${report.environment.mode}`;
await Deno.writeTextFile(`${base}.md`, markdown);
await Deno.writeTextFile(
  `${base}.json`,
  JSON.stringify(report, null, 2) + "\n",
);
console.error(
  `bench: wrote bench-results/bench-${report.environment.mode}.md and .json`,
);
if (report.failures.length) Deno.exit(1);
