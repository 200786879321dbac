/**
 * `deno task test:browser [--fresh]`: installs the npm build into the
 * scratch project as `deno task test:node` does (or reuses that install when
 * it is newer than the build, unless `--fresh`), then runs `tests/npm/browser_check.mjs`,
 * which serves it on 127.0.0.1 with an import map and opens it in Debian's
 * `chromium` through `playwright-core`, with WebGPU on SwiftShader.
 *
 * Needs `/usr/bin/chromium` (`apt-get install chromium`; `.ci/run` installs
 * it) or a path in `CHROMIUM`.
 *
 * @module
 */

import { abs, exec } from "../_workspace.ts";
import {
  installScratch,
  reuseOrInstallScratch,
  unbuiltMembers,
} from "./_scratch.ts";
import { ensureTools, toolsDir } from "./_tools.ts";
import { writeGuide } from "./_guide.ts";

if (import.meta.main) {
  await ensureTools();
  const dir = Deno.args.includes("--fresh")
    ? await installScratch()
    : await reuseOrInstallScratch();
  for (
    const file of ["browser_check.mjs", "browser_page.mjs", "sections.mjs"]
  ) {
    await Deno.copyFile(abs(`tests/npm/${file}`), `${dir}${file}`);
  }
  await writeGuide(dir);
  try {
    await exec(["node", "browser_check.mjs", toolsDir], { cwd: dir });
  } catch (error) {
    console.error(`browser check failed: ${(error as Error).message}`);
    Deno.exit(1);
  }
  const missing = await unbuiltMembers();
  if (missing.length) {
    console.error(
      `browser check failed: not checked, no npm build: ${missing.join(", ")}`,
    );
    Deno.exit(1);
  }
}
