/**
 * `deno task test:node`: packs the npm build, installs the tarballs into a
 * scratch project and runs `tests/npm/node_check.mjs` there on Node (real
 * code against every package, and the WebGPU path through the `webgpu` npm
 * package on Dawn's OpenGL ES backend). Before that, `tsc --strict` compiles
 * every README and example snippet that uses `using`, the guide and the
 * runtime-style samples against the installed types
 * (`scripts/npm/_types_check.ts`), and, at the same time, a hostile
 * consumer's code under bundler and no-DOM (node16, @types/node only) settings
 * (`scripts/npm/_consumer_types.ts`). After it: every README example run on
 * Node (`tests/npm/readme_check.mjs`) and the consumer's checks of the
 * installed packages (`tests/npm/consumer_check.mjs`: one copy of each,
 * `instanceof` across packages, package.json fields, the CLI).
 *
 * @module
 */

import { abs, exec } from "../_workspace.ts";
import { installScratch, unbuiltMembers } from "./_scratch.ts";
import { ensureTools } from "./_tools.ts";
import { writeGuide } from "./_guide.ts";
import { collectSnippets, typesCheck } from "./_types_check.ts";
import { consumerTypesCheck } from "./_consumer_types.ts";
import { writeReadmeRuns } from "./_readme_run.ts";

/**
 * Runs `guide/runtime.ts` on Node against the installed tarballs (lowered to
 * JavaScript by `writeGuide`; its types were checked by the strict check),
 * through `tests/npm/guide_check.mjs`.
 */
async function runGuide(dir: string): Promise<void> {
  await writeGuide(dir);
  await Deno.copyFile(
    abs("tests/npm/guide_check.mjs"),
    `${dir}guide_check.mjs`,
  );
  await exec(["node", "guide_check.mjs"], {
    cwd: dir,
    env: { EGL_PLATFORM: "surfaceless" },
  });
}

if (import.meta.main) {
  await ensureTools();
  const dir = await installScratch();
  for (
    const file of [
      "node_check.mjs",
      "sections.mjs",
      "consumer_check.mjs",
      "readme_check.mjs",
      "readme_gpu.mjs",
    ]
  ) {
    await Deno.copyFile(abs(`tests/npm/${file}`), `${dir}${file}`);
  }
  let failed = false;
  const snippets = await collectSnippets();
  await Promise.all([
    typesCheck(dir, snippets).catch((error) => {
      console.error(`types check failed: ${(error as Error).message}`);
      failed = true;
    }),
    consumerTypesCheck(dir).catch((error) => {
      console.error(`consumer types check failed: ${(error as Error).message}`);
      failed = true;
    }),
  ]);
  try {
    await writeReadmeRuns(dir);
    await exec(["node", "readme_check.mjs"], {
      cwd: dir,
      env: { EGL_PLATFORM: "surfaceless" },
    });
  } catch (error) {
    console.error(`readme check failed: ${(error as Error).message}`);
    failed = true;
  }
  try {
    await runGuide(dir);
  } catch (error) {
    console.error(`guide check failed: ${(error as Error).message}`);
    failed = true;
  }
  try {
    await exec(["node", "node_check.mjs"], {
      cwd: dir,
      env: { EGL_PLATFORM: "surfaceless" },
    });
  } catch (error) {
    console.error(`node check failed: ${(error as Error).message}`);
    Deno.exit(1);
  }
  try {
    await exec(["node", "consumer_check.mjs"], { cwd: dir });
  } catch (error) {
    console.error(`consumer check failed: ${(error as Error).message}`);
    failed = true;
  }
  if (failed) Deno.exit(1);
  const missing = await unbuiltMembers();
  if (missing.length) {
    console.error(
      `node check failed: not checked, no npm build: ${missing.join(", ")}`,
    );
    Deno.exit(1);
  }
}
