/**
 * Helpers for in-process A/B benches (`packages/caching/bench/hit_path_ab.ts`,
 * `packages/webgpu/bench/trace_ab.ts`): command-line flags, and a module of
 * this repository's `packages/` as they are at a git ref, loaded beside the
 * working tree's.
 *
 * @module
 */

/** The value of `--<name>=<value>` on the command line, or `fallback`. */
export function flag(name: string, fallback: string): string {
  const arg = Deno.args.find((a) => a.startsWith(`--${name}=`));
  return arg === undefined ? fallback : arg.slice(name.length + 3);
}

/**
 * Imports `packages/<path>` as it is at git `ref`: the packages are extracted
 * (`git archive`) into a temporary folder, their `@allot/<name>` imports made
 * relative, the module imported, and the folder removed.
 *
 * @param ref A git ref of this repository (`main`, a commit).
 * @param path The module, relative to `packages/` (`caching/mod.ts`).
 * @returns The module's namespace.
 */
export async function importAtRef<T>(ref: string, path: string): Promise<T> {
  const root = new URL("../../", import.meta.url).pathname;
  const dir = await Deno.makeTempDir({ prefix: "allot-ab-" });
  try {
    const archive = new Deno.Command("git", {
      args: ["archive", ref, "packages"],
      cwd: root,
      stdout: "piped",
    });
    const { code, stdout } = await archive.output();
    if (code !== 0) throw new Error(`git archive ${ref} failed`);
    const tar = new Deno.Command("tar", {
      args: ["-x", "-C", dir],
      stdin: "piped",
    }).spawn();
    const writer = tar.stdin.getWriter();
    await writer.write(stdout);
    await writer.close();
    if (!(await tar.status).success) throw new Error("tar failed");
    for (const pkg of Deno.readDirSync(`${dir}/packages`)) {
      if (!pkg.isDirectory) continue;
      const folder = `${dir}/packages/${pkg.name}`;
      for (const entry of Deno.readDirSync(folder)) {
        if (!entry.name.endsWith(".ts")) continue;
        const file = `${folder}/${entry.name}`;
        const text = Deno.readTextFileSync(file);
        Deno.writeTextFileSync(
          file,
          text.replace(/from "@allot\/([a-z]+)"/g, 'from "../$1/mod.ts"'),
        );
      }
    }
    return await import(`file://${dir}/packages/${path}`) as T;
  } finally {
    await Deno.remove(dir, { recursive: true }); // loaded: the files can go
  }
}
