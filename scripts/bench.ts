/**
 * `deno task bench`: runs every package's benchmarks. (The full report with
 * peers and ratios is built in `scripts/bench/`, once packages have benches.)
 *
 * @module
 */

const { code } = await new Deno.Command(Deno.execPath(), {
  args: ["bench", "--allow-all", "--no-check", "packages/"],
  cwd: new URL("../", import.meta.url),
  stdout: "inherit",
  stderr: "inherit",
}).output();
Deno.exit(code);
