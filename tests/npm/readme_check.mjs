// Runs the README examples on Node against the installed tarballs
// (`scripts/npm/_readme_run.ts` lowered them into ./readme/), one import
// each, in order (a GPU example with the `webgpu` package's navigator.gpu).
import { readFileSync } from "node:fs";

const runs = JSON.parse(readFileSync("readme/runs.json", "utf8"));
let passed = 0, failed = 0;
const log = console.log;
for (const { origin, file } of runs) {
  console.log = () => {}; // the examples' own output
  try {
    await import(`./readme/${file}`);
    console.log = log;
    passed++;
    log(`  ok   README ${origin}`);
  } catch (error) {
    console.log = log;
    failed++;
    log(`  FAIL README ${origin}\n${error?.stack ?? error}`);
  }
}
log(
  `readme check on node ${process.version}: ${passed} passed, ${failed} failed`,
);
process.exit(failed ? 1 : 0);
