/**
 * `deno task examples`: runs every `examples/*.ts` (found, not listed), each
 * in its own process with `deno run -A`, and fails when any fails.
 *
 * @module
 */

import { root } from "./_workspace.ts";

const files: string[] = [];
for await (const entry of Deno.readDir(new URL("examples/", root))) {
  if (entry.isFile && entry.name.endsWith(".ts")) files.push(entry.name);
}
files.sort();

const failed: string[] = [];
for (const file of files) {
  console.log(`examples: ${file}`);
  const started = performance.now();
  const { code } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", `examples/${file}`],
    cwd: root,
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (code === 0) {
    console.log(`examples: ${file} ok (${seconds} s)`);
  } else {
    console.error(`examples: ${file} failed with exit code ${code}`);
    failed.push(file);
  }
}
console.log(
  `examples: ${files.length - failed.length} of ${files.length} ran clean`,
);
if (failed.length) Deno.exit(1);
