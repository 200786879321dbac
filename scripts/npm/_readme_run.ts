/**
 * The README examples on Node: every TypeScript block of the root and
 * package READMEs that imports `@allot/*` is lowered to JavaScript with the
 * pinned TypeScript (`using` included) into `<scratch>/readme/`, where
 * `tests/npm/readme_check.mjs` imports each against the installed tarballs,
 * as an npm user who copies the example would run it.
 *
 * A block is left out, with its reason printed, when it cannot run on Node
 * as written: it imports `npm:`/`jsr:` specifiers or calls `Deno.*` (a Deno
 * example), or imports nothing of allot's (a type sketch). A block that
 * reads `navigator.gpu` runs twice: as written (Node 20 has no `navigator`:
 * it must still not throw), and after `readme_gpu.mjs` puts the `webgpu`
 * npm package's `navigator.gpu` in place, so its GPU part runs too.
 *
 * @module
 */

import { createRequire } from "node:module";
import { toolsDir } from "./_tools.ts";
import { codeBlocks, readReadmes } from "./_types_check.ts";

/** One README block written for the Node run. */
export interface ReadmeRun {
  /** `packages/storage/README.md:12`. */
  origin: string;
  /** The file name in `<scratch>/readme/`. */
  file: string;
}

/**
 * Why a README block cannot run on Node as written, or `undefined`.
 *
 * @param text The block's TypeScript.
 * @returns The reason, or `undefined` when it runs.
 */
export function skipReason(text: string): string | undefined {
  if (/from\s+["'](npm|jsr):/.test(text)) {
    return "imports npm:/jsr: specifiers (Deno)";
  }
  if (/\bDeno\.[a-zA-Z]/.test(text)) return "calls Deno.*";
  if (!/from\s+["']@allot\//.test(text)) return "imports nothing of allot's";
  return undefined;
}

/**
 * Writes every runnable README block into `<scratch>/readme/` as `.mjs`.
 *
 * @param scratch The scratch project folder.
 * @returns The blocks written, in order.
 */
export async function writeReadmeRuns(scratch: string): Promise<ReadmeRun[]> {
  const ts = createRequire(toolsDir)("typescript") as {
    transpileModule(
      input: string,
      options: { compilerOptions: Record<string, unknown> },
    ): { outputText: string };
  };
  const dir = `${scratch}readme/`;
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(dir, { recursive: true });
  const runs: ReadmeRun[] = [];
  for (const { readme, stem, markdown } of await readReadmes()) {
    for (const { line, text, ignore } of codeBlocks(markdown)) {
      const origin = `${readme}:${line}`;
      const reason = ignore ? "marked ignore" : skipReason(text);
      if (reason) {
        console.log(`npm: README block ${origin} not run on Node: ${reason}`);
        continue;
      }
      const { outputText } = ts.transpileModule(`${text}\nexport {};\n`, {
        compilerOptions: { target: "ES2022", module: "ESNext" },
      });
      const file = `${stem}_${line}.mjs`;
      const gpu = /\bnavigator\.gpu\b/.test(text)
        ? `import "../readme_gpu.mjs";\n`
        : "";
      await Deno.writeTextFile(`${dir}${file}`, gpu + outputText);
      runs.push({ origin, file });
    }
  }
  await Deno.writeTextFile(
    `${dir}runs.json`,
    JSON.stringify(runs, null, 2) + "\n",
  );
  return runs;
}
