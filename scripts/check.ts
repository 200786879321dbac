/**
 * `deno task check`: formatting, lint, type check, `doc --lint` of every
 * exported entry point, and `publish --dry-run`. Runs every step, lists the
 * ones that failed, and exits non-zero if any did.
 *
 * @module
 */

import { entryFiles, members, root } from "./_workspace.ts";

const failed: string[] = [];

async function run(label: string, args: string[]): Promise<void> {
  console.log(`check: ${label}`);
  const { code } = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: root,
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (code !== 0) {
    console.error(`check: ${label} failed (exit ${code})`);
    failed.push(label);
  }
}

const entries = (await members()).flatMap(entryFiles);

await run("fmt --check", ["fmt", "--check"]);
await run("lint", ["lint"]);
await run("type check", [
  "check",
  "packages/",
  "examples/",
  "scripts/",
  "guide/",
  "tests/conformance/",
  "traces/",
  "bench/",
]);
await run(`doc --lint (${entries.length} entry points)`, [
  "doc",
  "--lint",
  ...entries,
]);
await run("publish --dry-run", [
  "publish",
  "--dry-run",
  "--allow-dirty",
  "--quiet",
]);
if (failed.length) {
  console.error(`check: ${failed.length} step(s) failed: ${failed.join(", ")}`);
  Deno.exit(1);
}
console.log("check: all clean");
