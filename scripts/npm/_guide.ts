/**
 * The guide's code (`guide/runtime.ts`) for the Node and browser checks:
 * lowered to JavaScript with the pinned TypeScript into the scratch project
 * as `guide_runtime.mjs`, where it imports the installed tarballs by name.
 *
 * @module
 */

import { createRequire } from "node:module";
import { abs } from "../_workspace.ts";
import { toolsDir } from "./_tools.ts";

/**
 * Writes `<dir>guide_runtime.mjs` from `guide/runtime.ts`.
 *
 * @param dir The scratch project folder.
 * @returns Resolves when the file is written.
 */
export async function writeGuide(dir: string): Promise<void> {
  const ts = createRequire(toolsDir)("typescript") as {
    transpileModule(
      input: string,
      options: { compilerOptions: Record<string, unknown> },
    ): { outputText: string };
  };
  const source = await Deno.readTextFile(abs("guide/runtime.ts"));
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { target: "ES2022", module: "ESNext" },
  });
  await Deno.writeTextFile(`${dir}guide_runtime.mjs`, outputText);
}
