/**
 * `deno task test:node`: packs the npm build, installs the tarballs into a
 * scratch project and runs `tests/npm/node_check.mjs` there on Node (real
 * code against every package, and the WebGPU path through the `webgpu` npm
 * package on Dawn's OpenGL ES backend).
 *
 * @module
 */

import { abs, exec } from "../_workspace.ts";
import { installScratch, unbuiltMembers } from "./_scratch.ts";
import { ensureTools } from "./_tools.ts";

if (import.meta.main) {
  await ensureTools();
  const dir = await installScratch();
  for (const file of ["node_check.mjs", "sections.mjs"]) {
    await Deno.copyFile(abs(`tests/npm/${file}`), `${dir}${file}`);
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
  const missing = await unbuiltMembers();
  if (missing.length) {
    console.error(
      `node check failed: not checked, no npm build: ${missing.join(", ")}`,
    );
    Deno.exit(1);
  }
}
