/**
 * The strict-types check of the npm build: inside the scratch project where
 * the packed tarballs are installed, `tsc --strict` (the pinned TypeScript
 * from `tools/npm`) compiles, as a Node user's TypeScript would,
 *
 * - every TypeScript code block of the READMEs that uses `using`,
 * - every example in `examples/` that uses `using`,
 * - every guide example (`guide/*.ts`),
 * - the runtime-style samples in `tests/npm/types/` (a tensor class over
 *   `Buffer`, `tidy`, kernels, `using` of every handle class).
 *
 * No module augmentation is allowed: the only ambient declaration added is a
 * small `Deno` namespace for the examples that read an environment variable
 * or exit early (`tests/npm/types/_deno_shim.d.ts`); it names nothing of
 * allot's.
 *
 * @module
 */

import { abs, exec } from "../_workspace.ts";
import { toolsDir } from "./_tools.ts";

/** One file the check compiles. */
export interface Snippet {
  /** Where it came from, such as `packages/storage/README.md:42`. */
  origin: string;
  /** The file name inside the check folder. */
  file: string;
  /** The TypeScript source. */
  text: string;
}

/** Whether TypeScript source uses a `using` or `await using` declaration. */
export function usesUsing(text: string): boolean {
  return /(^|[\s;({])(await\s+)?using\s+[A-Za-z_$[{]/m.test(text);
}

/**
 * The TypeScript code blocks of a Markdown file (```ts and ```typescript
 * fences), with the line each starts on.
 *
 * @param markdown The Markdown text.
 * @returns The blocks in order.
 */
export function codeBlocks(
  markdown: string,
): { line: number; text: string; ignore: boolean }[] {
  const blocks: { line: number; text: string; ignore: boolean }[] = [];
  const lines = markdown.split("\n");
  let start = -1;
  let ignore = false;
  let body: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (start < 0) {
      const fence = /^\s*```(ts|typescript)(\s.*)?$/.exec(line);
      if (fence) {
        start = i + 1;
        // `ignore`, as `deno test --doc` reads it: a sketch, not to be run
        ignore = /\bignore\b/.test(fence[2] ?? "");
        body = [];
      }
    } else if (/^\s*```\s*$/.test(line)) {
      blocks.push({ line: start, text: body.join("\n") + "\n", ignore });
      start = -1;
    } else {
      body.push(line);
    }
  }
  return blocks;
}

async function listDir(dir: string): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const entry of Deno.readDir(abs(dir))) {
      if (entry.isFile) names.push(entry.name);
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return names.sort();
}

/** One README of the workspace: its path, a file-name stem, its text. */
export interface Readme {
  /** `README.md` or `packages/<name>/README.md`. */
  readme: string;
  /** `root` or the package's folder name. */
  stem: string;
  /** The file's text. */
  markdown: string;
}

/** The root README and every package's README, sorted by path. */
export async function readReadmes(): Promise<Readme[]> {
  const readmes = ["README.md"];
  for await (const entry of Deno.readDir(abs("packages/"))) {
    if (entry.isDirectory) readmes.push(`packages/${entry.name}/README.md`);
  }
  const out: Readme[] = [];
  for (const readme of readmes.sort()) {
    let markdown: string;
    try {
      markdown = await Deno.readTextFile(abs(readme));
    } catch {
      continue;
    }
    const stem = readme.replace(/^packages\/|\/?README\.md$/g, "") || "root";
    out.push({ readme, stem, markdown });
  }
  return out;
}

/**
 * Every file the check compiles, read from the repository.
 *
 * @returns The snippets, samples and shim.
 */
export async function collectSnippets(): Promise<Snippet[]> {
  const snippets: Snippet[] = [];
  for (const { readme, stem, markdown } of await readReadmes()) {
    for (const { line, text } of codeBlocks(markdown)) {
      if (!usesUsing(text)) continue;
      snippets.push({
        origin: `${readme}:${line}`,
        file: `readme_${stem}_${line}.ts`,
        // A block without imports is a script; make it a module so that
        // top-level await and `using` work as they do in the README test.
        text: `${text}\nexport {};\n`,
      });
    }
  }
  for (const name of await listDir("examples/")) {
    if (!name.endsWith(".ts")) continue;
    const text = await Deno.readTextFile(abs(`examples/${name}`));
    if (!usesUsing(text)) continue;
    snippets.push({
      origin: `examples/${name}`,
      file: `example_${name}`,
      text,
    });
  }
  for (const name of await listDir("guide/")) {
    if (!name.endsWith(".ts") || name.endsWith("_test.ts")) continue;
    snippets.push({
      origin: `guide/${name}`,
      file: `guide_${name}`,
      text: await Deno.readTextFile(abs(`guide/${name}`)),
    });
  }
  for (const name of await listDir("tests/npm/types/")) {
    if (!name.endsWith(".ts")) continue;
    snippets.push({
      origin: `tests/npm/types/${name}`,
      file: name,
      text: await Deno.readTextFile(abs(`tests/npm/types/${name}`)),
    });
  }
  return snippets;
}

/** The compiler options of the check: strict, ESM for Node, no skipping. */
export const compilerOptions: Record<string, unknown> = {
  strict: true,
  noEmit: true,
  target: "ES2022",
  module: "NodeNext",
  moduleResolution: "NodeNext",
  lib: ["ES2022", "ESNext.Disposable", "DOM"],
  types: ["@webgpu/types", "node"],
  skipLibCheck: false,
  allowImportingTsExtensions: false,
  isolatedModules: true,
};

/** Where TypeScript 6's `lib.dom.d.ts` and `@webgpu/types` collide. */
const knownConflicts =
  /^(?:\S*\/typescript\/lib\/lib\.dom\.d\.ts|\S*\/@webgpu\/types\/dist\/index\.d\.ts)\(/;

/**
 * The tsc diagnostics that count: every error (with its continuation lines)
 * except those inside `lib.dom.d.ts` and `@webgpu/types`, which declare the
 * same WebGPU globals under TypeScript 6 (a conflict between those two, not
 * of allot's types, which stay checked: `skipLibCheck` is off).
 *
 * @param output tsc's output (`--pretty false`).
 * @returns The lines of the errors that count.
 */
export function relevantErrors(output: string): string[] {
  const kept: string[] = [];
  let keeping = false;
  for (const line of output.split("\n")) {
    if (/error TS\d+/.test(line)) {
      keeping = !knownConflicts.test(line.trim());
      if (keeping) kept.push(line);
    } else if (keeping && /^\s+\S/.test(line)) {
      kept.push(line);
    }
  }
  return kept;
}

/**
 * Writes the snippets into `<scratch>/types-check/` and compiles them with
 * `tsc --strict` against the installed tarballs.
 *
 * @param scratch The scratch project folder (with `node_modules`).
 * @param snippets What to compile, from {@linkcode collectSnippets}.
 * @throws {Error} When `tsc` reports an error; the message lists each
 *   diagnostic with the snippet's origin.
 */
export async function typesCheck(
  scratch: string,
  snippets: Snippet[],
): Promise<void> {
  const dir = `${scratch}types-check/`;
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(dir, { recursive: true });
  for (const snippet of snippets) {
    await Deno.writeTextFile(`${dir}${snippet.file}`, snippet.text);
  }
  await Deno.writeTextFile(
    `${dir}tsconfig.json`,
    JSON.stringify(
      { compilerOptions, include: ["*.ts"] },
      null,
      2,
    ) + "\n",
  );
  const tsc = `${toolsDir}node_modules/typescript/bin/tsc`;
  let output = "";
  try {
    await exec(
      ["node", tsc, "-p", `${dir}tsconfig.json`, "--pretty", "false"],
      {
        cwd: dir,
        capture: "all",
      },
    );
  } catch (error) {
    output = (error as Error).message;
  }
  const errors = relevantErrors(output);
  if (errors.length) {
    const origins = new Map(snippets.map((s) => [s.file, s.origin]));
    const lines = errors.map((line) =>
      line.replace(/^([\w.]+\.ts)\((\d+),(\d+)\)/, (all, file, row) => {
        const origin = origins.get(file);
        return origin ? `${all} [${origin}, line ${row} of the snippet]` : all;
      })
    );
    throw new Error(
      `tsc --strict failed on the packed types:\n${lines.join("\n")}`,
    );
  }
  const ignored = output.split("\n").filter((l) => / error TS/.test(l)).length;
  if (ignored) {
    console.log(
      `npm: ignored ${ignored} tsc error(s) inside lib.dom.d.ts and @webgpu/types (both declare WebGPU under TypeScript 6)`,
    );
  }
  console.log(
    `npm: tsc --strict compiled ${snippets.length} snippet(s) against the tarballs: ${
      snippets.map((s) => s.origin).join(", ")
    }`,
  );
}
