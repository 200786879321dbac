/**
 * A module of this working tree's `packages/` loaded from a fresh copy: its
 * own module instances (and so its own compiled code and type feedback),
 * shared with no other peer. `trace_ab.ts` and `real_traces.ts` load each
 * allot peer this way (`trace_ab.ts` the ref's through `importAtRef`), so
 * that no peer runs code that another peer has warmed or compiled for its
 * own shapes, and each has its own module state (a `GpuCachingAllocator`'s
 * device group among it).
 *
 * @module
 */

/**
 * Imports `packages/<path>` from a temporary copy of this working tree's
 * packages (their top-level `.ts` files, `@allot/<name>` imports made
 * relative, as `importAtRef` does for a git ref); the copy is removed once
 * loaded.
 *
 * @param path The module, relative to `packages/` (`webgpu/mod.ts`).
 * @returns The module's namespace.
 */
export async function importTreeCopy<T>(path: string): Promise<T> {
  return (await importTreeCopyModules([path]))[0] as T;
}

/**
 * Imports several modules of one temporary copy of this working tree's
 * packages, so that they share that copy's module instances (a peer built
 * from two packages, `@allot/caching`'s `StepPlannedPool` on
 * `@allot/webgpu`'s `GpuSegmentSource`), and no other peer's.
 *
 * @param paths The modules, relative to `packages/` (`caching/mod.ts`).
 * @returns Their namespaces, in the order of `paths`.
 */
export async function importTreeCopyModules(
  paths: readonly string[],
): Promise<unknown[]> {
  const packages = new URL("../../", import.meta.url);
  const dir = await Deno.makeTempDir({ prefix: "allot-aa-" });
  try {
    for (const pkg of Deno.readDirSync(packages)) {
      if (!pkg.isDirectory) continue;
      const to = `${dir}/packages/${pkg.name}`;
      Deno.mkdirSync(to, { recursive: true });
      for (const entry of Deno.readDirSync(new URL(`${pkg.name}/`, packages))) {
        if (!entry.isFile || !entry.name.endsWith(".ts")) continue;
        const text = Deno.readTextFileSync(
          new URL(`${pkg.name}/${entry.name}`, packages),
        );
        Deno.writeTextFileSync(
          `${to}/${entry.name}`,
          text.replace(/from "@allot\/([a-z]+)"/g, 'from "../$1/mod.ts"'),
        );
      }
    }
    const modules: unknown[] = [];
    for (const path of paths) {
      modules.push(await import(`file://${dir}/packages/${path}`));
    }
    return modules;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
