/**
 * The pinned npm tools in `tools/npm/` (TypeScript, publint, attw,
 * playwright-core, webgpu), installed with `npm ci` on first use.
 *
 * @module
 */

import { abs, exec } from "../_workspace.ts";

/** The folder holding the pinned tools' `package.json` and lockfile. */
export const toolsDir: string = abs("tools/npm/");

/**
 * Installs the pinned tools with `npm ci` unless they are already there.
 *
 * @returns Resolves when the tools are installed.
 */
export async function ensureTools(): Promise<void> {
  try {
    await Deno.stat(`${toolsDir}node_modules/.package-lock.json`);
    return;
  } catch {
    // not installed yet
  }
  console.log("npm: installing the pinned tools (tools/npm, npm ci)");
  await exec(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd: toolsDir,
  });
}

/**
 * The exact version `tools/npm/package.json` pins for a tool.
 *
 * @param name The npm package name.
 * @returns The pinned version.
 * @throws {Error} When the tool is not pinned there.
 */
export async function pinnedVersion(name: string): Promise<string> {
  const manifest = JSON.parse(
    await Deno.readTextFile(`${toolsDir}package.json`),
  );
  const version = manifest.dependencies?.[name];
  if (typeof version !== "string") {
    throw new Error(
      `Cannot find ${name}: tools/npm/package.json does not pin it`,
    );
  }
  return version;
}

/**
 * The path of a tool's executable in `tools/npm/node_modules/.bin/`.
 *
 * @param name The executable, such as `publint`.
 * @returns Its absolute path.
 */
export function bin(name: string): string {
  return `${toolsDir}node_modules/.bin/${name}`;
}
