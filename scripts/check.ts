/**
 * `deno task check`: formatting, lint, type check, `doc --lint` of every
 * exported entry point, and `publish --dry-run`. Stops at the first failure
 * and exits non-zero.
 *
 * @module
 */

const root = new URL("../", import.meta.url);

interface MemberConfig {
  name: string;
  exports: string | Record<string, string>;
}

async function members(): Promise<{ dir: string; config: MemberConfig }[]> {
  const out: { dir: string; config: MemberConfig }[] = [];
  for await (const entry of Deno.readDir(new URL("packages/", root))) {
    if (!entry.isDirectory) continue;
    const dir = `packages/${entry.name}`;
    const text = await Deno.readTextFile(new URL(`${dir}/deno.json`, root));
    out.push({ dir, config: JSON.parse(text) });
  }
  return out.sort((a, b) => a.dir.localeCompare(b.dir));
}

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
    Deno.exit(code);
  }
}

const all = await members();
const entries = all.flatMap(({ dir, config }) =>
  (typeof config.exports === "string"
    ? [config.exports]
    : Object.values(config.exports)).map((e) =>
      `${dir}/${e.replace(/^\.\//, "")}`
    )
);

await run("fmt --check", ["fmt", "--check"]);
await run("lint", ["lint"]);
await run("type check", ["check", "packages/", "examples/", "scripts/"]);
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
console.log("check: all clean");
