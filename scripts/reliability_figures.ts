/**
 * The reliability figures of issue #17's closing note, from the tests
 * themselves:
 *
 * - fast-check runs per property: every `fc.assert(...)` in the packages'
 *   tests with its `numRuns` (`modelRuns(n)`: n in CI, `ALLOT_FC_RUNS` in the
 *   nightly task; no `numRuns`: fast-check's default, 100), read from the
 *   source;
 * - hostile-table entry points and hostile calls, and faults injected: the
 *   adversarial and fault tests print them (`<pkg> adversarial: N entry
 *   points, M hostile calls`, `<what> faults: N faults injected`); this runs
 *   those test files and adds the lines up.
 *
 * `deno run -A scripts/reliability_figures.ts [--static]` (`--static`: the
 * source count only, no test run).
 *
 * @module
 */

const root = new URL("../", import.meta.url);

async function* testFiles(dir: URL): AsyncGenerator<URL> {
  for await (const entry of Deno.readDir(dir)) {
    const url = new URL(entry.name + (entry.isDirectory ? "/" : ""), dir);
    if (entry.isDirectory) {
      if (entry.name !== "bench" && !entry.name.startsWith(".")) {
        yield* testFiles(url);
      }
    } else if (entry.name.endsWith("_test.ts")) yield url;
  }
}

interface Property {
  file: string;
  test: string;
  ciRuns: number;
  nightly: boolean;
}

function properties(file: string, text: string): Property[] {
  const out: Property[] = [];
  const starts = [...text.matchAll(/fc\.assert\(/g)].map((m) => m.index!);
  starts.forEach((at, i) => {
    const body = text.slice(at, starts[i + 1] ?? text.length);
    const before = text.slice(0, at);
    const names = [
      ...before.matchAll(/(?:\bit|Deno\.test)\(\s*(["'`])(.*?)\1/gs),
    ];
    const test = names.at(-1)?.[2] ?? "(unnamed)";
    const m = body.match(/numRuns:\s*(modelRuns\((\d[\d_]*)?\)|[\d_]+)/);
    let ciRuns = 100, nightly = false;
    // a property whose numRuns is a variable (a loop over real and mock
    // devices, say): modelRuns() named just before it counts
    const near = /numRuns\b/.test(body) && m === null
      ? text.slice(Math.max(0, at - 600), at).match(/modelRuns\((\d[\d_]*)?\)/)
      : null;
    if (near !== null) {
      nightly = true;
      ciRuns = near[1] ? Number(near[1].replaceAll("_", "")) : 1000;
    } else if (m !== null) {
      if (m[1].startsWith("modelRuns")) {
        nightly = true;
        ciRuns = m[2] ? Number(m[2].replaceAll("_", "")) : 1000;
      } else ciRuns = Number(m[1].replaceAll("_", ""));
    }
    out.push({ file, test, ciRuns, nightly });
  });
  return out;
}

const all: Property[] = [];
const runnable: string[] = [];
for await (const url of testFiles(new URL("packages/", root))) {
  const file = url.pathname.slice(root.pathname.length);
  const text = await Deno.readTextFile(url);
  all.push(...properties(file, text));
  if (/adversarial:|faults injected/.test(text)) runnable.push(file);
}
all.sort((a, b) => a.file.localeCompare(b.file));

console.log("fast-check properties (CI runs; * = modelRuns, more nightly):");
for (const p of all) {
  console.log(
    `  ${String(p.ciRuns).padStart(5)}${p.nightly ? "*" : " "} ${p.file}: ${
      p.test.slice(0, 90)
    }`,
  );
}
const model = all.filter((p) => p.nightly);
console.log(
  `${all.length} properties, ${model.length} read modelRuns() (at least ${
    Math.min(...model.map((p) => p.ciRuns))
  } runs in CI), ${
    all.reduce((s, p) => s + p.ciRuns, 0)
  } fast-check runs per CI test run`,
);

if (!Deno.args.includes("--static")) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["test", "--allow-all", ...runnable.sort()],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) +
    new TextDecoder().decode(out.stderr);
  let entryPoints = 0, calls = 0, faults = 0;
  for (
    const m of text.matchAll(
      /(\S+) adversarial: (\d+) entry points, (\d+) hostile calls/g,
    )
  ) {
    console.log(`  ${m[0]}`);
    entryPoints += Number(m[2]);
    calls += Number(m[3]);
  }
  for (const m of text.matchAll(/([\w ]+ faults): (\d+) faults injected/g)) {
    console.log(`  ${m[0].trim()}`);
    faults += Number(m[2]);
  }
  console.log(
    `hostile tables: ${entryPoints} entry points, ${calls} hostile calls; ${faults} faults injected (one CI run of ${runnable.length} files, ${
      out.success ? "all passed" : "SOME FAILED"
    })`,
  );
  if (!out.success) Deno.exit(1);
}
