/**
 * The hostile consumer's type check of the npm build: inside the scratch
 * project, `tsc` compiles a file that imports every public entry point of
 * every installed package, plus `tests/npm/consumer/*.ts` (a Node user's
 * strict code), under the compiler options npm users set:
 *
 * - `bundler`: `module` preserve, `moduleResolution` bundler, lib ES2022 +
 *   DOM;
 * - `node-no-dom`: `module`/`moduleResolution` node16 with Node's own types
 *   only (lib ES2022, `@types/node`), importing every package whose types do
 *   not name WebGPU.
 *
 * (NodeNext with the DOM lib is the snippet check's setting,
 * `_types_check.ts`, which runs at the same time; a third run here cost 9 s
 * of CPU on a 2-core machine for little more.)
 *
 * All with `strict`, `exactOptionalPropertyTypes`, `noUncheckedIndexedAccess`,
 * `noImplicitOverride`, `noPropertyAccessFromIndexSignature`,
 * `verbatimModuleSyntax` and `skipLibCheck: false`. Both runs go at once. Errors inside TypeScript's `lib.dom.d.ts` and `@webgpu/types`
 * (which both declare WebGPU under TypeScript 6) are left out, as in the
 * snippet check.
 *
 * @module
 */

import { abs, exec } from "../_workspace.ts";
import { toolsDir } from "./_tools.ts";
import { relevantErrors } from "./_types_check.ts";

const strict = {
  strict: true,
  noEmit: true,
  target: "ES2022",
  exactOptionalPropertyTypes: true,
  noUncheckedIndexedAccess: true,
  noImplicitOverride: true,
  noPropertyAccessFromIndexSignature: true,
  verbatimModuleSyntax: true,
  skipLibCheck: false,
};

/** The configurations, by name. */
export const consumerConfigs: Record<
  string,
  { options: Record<string, unknown>; gpu: boolean }
> = {
  "bundler": {
    options: {
      ...strict,
      module: "preserve",
      moduleResolution: "bundler",
      lib: ["ES2022", "DOM"],
      types: ["node"],
    },
    gpu: true,
  },
  "node-no-dom": {
    options: {
      ...strict,
      module: "node16",
      moduleResolution: "node16",
      lib: ["ES2022"],
      types: ["node"],
    },
    gpu: false,
  },
};

interface Manifest {
  exports: Record<string, unknown>;
  dependencies?: Record<string, string>;
}

/**
 * Writes `<scratch>/consumer-types/` and runs both compilations.
 *
 * @param scratch The scratch project folder (with `node_modules`).
 * @throws {Error} Listing every error, per configuration.
 */
export async function consumerTypesCheck(scratch: string): Promise<void> {
  const dir = `${scratch}consumer-types/`;
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(dir, { recursive: true });
  const entries: { spec: string; gpu: boolean }[] = [];
  for await (const e of Deno.readDir(`${scratch}node_modules/@allot/`)) {
    const m: Manifest = JSON.parse(
      await Deno.readTextFile(
        `${scratch}node_modules/@allot/${e.name}/package.json`,
      ),
    );
    const gpu = Boolean(m.dependencies?.["@webgpu/types"]);
    for (const sub of Object.keys(m.exports)) {
      if (sub === "./package.json") continue;
      entries.push({ spec: `@allot/${e.name}${sub.slice(1)}`, gpu });
    }
  }
  entries.sort((a, b) => a.spec.localeCompare(b.spec));
  const handwritten: string[] = [];
  for await (const e of Deno.readDir(abs("tests/npm/consumer/"))) {
    if (!e.name.endsWith(".ts")) continue;
    await Deno.copyFile(abs(`tests/npm/consumer/${e.name}`), `${dir}${e.name}`);
    handwritten.push(e.name);
  }
  // node16 reads the nearest package.json: these files are ES modules.
  await Deno.writeTextFile(
    `${dir}package.json`,
    '{ "type": "module", "private": true }\n',
  );
  const tsc = `${toolsDir}node_modules/typescript/bin/tsc`;
  const failures = await Promise.all(
    Object.entries(consumerConfigs).map(async ([name, config]) => {
      const chosen = entries.filter((e) => config.gpu || !e.gpu);
      const entry = `entry_${name}.ts`;
      await Deno.writeTextFile(
        `${dir}${entry}`,
        chosen.map((e, i) =>
          `import * as m${i} from "${e.spec}";\nexport const k${i}: string[] = Object.keys(m${i});\n`
        ).join(""),
      );
      await Deno.writeTextFile(
        `${dir}tsconfig.${name}.json`,
        JSON.stringify(
          { compilerOptions: config.options, files: [entry, ...handwritten] },
          null,
          2,
        ) + "\n",
      );
      let output = "";
      try {
        await exec(
          ["node", tsc, "-p", `tsconfig.${name}.json`, "--pretty", "false"],
          { cwd: dir, capture: "all" },
        );
      } catch (error) {
        output = (error as Error).message;
      }
      const errors = relevantErrors(output);
      console.log(
        `npm: consumer types (${name}): ${chosen.length} entry points${
          handwritten.length ? ` + ${handwritten.join(", ")}` : ""
        }, ${errors.length ? `${errors.length} error line(s)` : "clean"}`,
      );
      return errors.length ? `${name}:\n${errors.join("\n")}` : "";
    }),
  );
  const failed = failures.filter(Boolean);
  if (failed.length) {
    throw new Error(`the consumer's tsc failed:\n${failed.join("\n")}`);
  }
}
