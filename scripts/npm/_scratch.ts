/**
 * The scratch project the Node and browser checks use: every built package
 * packed with `npm pack` into `./packs/`, then installed from those tarballs
 * with `npm install`, as a user would install them from the registry.
 *
 * @module
 */

import { abs, exec, members } from "../_workspace.ts";
import { outDir } from "./build.ts";
import { pinnedVersion } from "./_tools.ts";

/** The scratch project folder (inside the ignored `.out/`). */
export const scratchDir: string = abs(".out/npm-scratch/");

async function buildState(): Promise<{ built: string[]; missing: string[] }> {
  const built: string[] = [];
  const missing: string[] = [];
  for (const member of await members()) {
    try {
      await Deno.stat(`${outDir}${member.pkg}/package.json`);
      built.push(member.pkg);
    } catch {
      missing.push(member.config.name);
    }
  }
  return { built, missing };
}

/**
 * Lists the members that have a build in `npm/`; warns about the others.
 *
 * @returns The folder names of the built packages.
 * @throws {Error} When nothing is built.
 */
export async function builtPackages(): Promise<string[]> {
  const { built, missing } = await buildState();
  for (const name of missing) {
    console.warn(`npm: ${name} has no build in npm/, skipped`);
  }
  if (built.length === 0) {
    throw new Error(
      "Cannot find an npm build: run `deno task build:npm` first",
    );
  }
  return built;
}

/**
 * The members without a build in `npm/`; a check that ran without them must
 * still fail, since every package that exists must be exercised.
 *
 * @returns Their names, such as `@allot/cpu`.
 */
export async function unbuiltMembers(): Promise<string[]> {
  return (await buildState()).missing;
}

/**
 * Packs every built package into `<scratch>/packs/` and installs the
 * tarballs (plus the pinned `webgpu` npm package) into the scratch project.
 *
 * @returns The scratch project folder.
 */
export async function installScratch(): Promise<string> {
  const packages = await builtPackages();
  await Deno.remove(scratchDir, { recursive: true }).catch(() => {});
  await Deno.mkdir(`${scratchDir}packs`, { recursive: true });
  const dependencies: Record<string, string> = {};
  for (const pkg of packages) {
    const out = await exec([
      "npm",
      "pack",
      `${outDir}${pkg}`,
      "--pack-destination",
      "./packs",
      "--loglevel=error",
    ], { cwd: scratchDir, capture: "stdout" });
    const tarball = out.trim().split("\n").pop()!;
    const name = JSON.parse(
      await Deno.readTextFile(`${outDir}${pkg}/package.json`),
    ).name;
    dependencies[name] = `file:./packs/${tarball}`;
    console.log(`npm: packed ${name} -> ./packs/${tarball}`);
  }
  dependencies["webgpu"] = await pinnedVersion("webgpu");
  // For the strict-types check: TypeScript code that imports `node:*`.
  dependencies["@types/node"] = await pinnedVersion("@types/node");
  const manifest = {
    name: "allot-npm-scratch",
    private: true,
    type: "module",
    dependencies,
  };
  await Deno.writeTextFile(
    `${scratchDir}package.json`,
    JSON.stringify(manifest, null, 2) + "\n",
  );
  console.log(
    `npm: installing ${packages.length} tarball(s) into ${scratchDir}`,
  );
  await exec([
    "npm",
    "install",
    "--no-audit",
    "--no-fund",
    "--loglevel=error",
  ], { cwd: scratchDir });
  return scratchDir;
}

/**
 * Reuses the scratch project when it was installed after the last build of
 * every package (as `deno task test:node` leaves it), else installs it.
 *
 * @returns The scratch project folder.
 */
export async function reuseOrInstallScratch(): Promise<string> {
  const installed = await Deno.stat(
    `${scratchDir}node_modules/.package-lock.json`,
  )
    .then((s) => s.mtime?.getTime() ?? 0, () => 0);
  let newest = 0;
  for (const pkg of await builtPackages()) {
    const built = await Deno.stat(`${outDir}${pkg}/package.json`);
    newest = Math.max(newest, built.mtime?.getTime() ?? Infinity);
  }
  if (installed > newest) {
    console.log("npm: reusing the scratch project test:node installed");
    return scratchDir;
  }
  return await installScratch();
}
