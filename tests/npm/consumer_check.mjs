// A hostile npm consumer's checks of the installed tarballs (run by
// `deno task test:node` in the scratch project, after node_check.mjs):
//
// - one copy of every @allot package is installed (siblings are peer
//   dependencies), so `instanceof` on error classes works across packages:
//   an error thrown by each package is an instance of @allot/core's classes;
// - every package.json is what an npm user and a bundler need: ESM only,
//   `exports` with `types` first and files that exist, a `./package.json`
//   export that resolves to the manifest, `main`/`types`,
//   `engines.node` from 20.4 (Symbol.dispose), `sideEffects` false or the
//   files that run on import, siblings as peers whose range allows the
//   installed version,
//   `bin` files that start with `#!`;
// - no public entry point exports an internal (`_`-prefixed) name;
// - the trace CLI runs through `node_modules/.bin`, and a user's own
//   `cli.js` that imports it does not start it.
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const problems = [];
const require = createRequire(join(process.cwd(), "package.json"));

/** Whether a caret range (`^0.1.0`) allows `version` (semver's 0.x rule). */
function caretAllows(range, version) {
  const want = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(range)?.slice(1).map(Number);
  const got = /^(\d+)\.(\d+)\.(\d+)$/.exec(version ?? "")?.slice(1).map(Number);
  if (!want || !got) return false;
  const [a, b, c] = want, [x, y, z] = got;
  if (a > 0) return x === a && (y > b || (y === b && z >= c));
  return x === 0 && y === b && z >= c;
}
const problem = (line) => problems.push(line);
const root = "node_modules/@allot";
const pkgs = readdirSync(root).sort();
const manifests = Object.fromEntries(
  pkgs.map((
    p,
  ) => [p, JSON.parse(readFileSync(join(root, p, "package.json"), "utf8"))]),
);

// One copy of each @allot package anywhere in node_modules.
const copies = new Map();
(function walk(dir, depth) {
  if (depth > 8 || !existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (!e.isDirectory()) continue;
    const path = join(dir, e.name);
    if (e.name === "@allot") {
      for (const p of readdirSync(path)) {
        copies.set(p, [...(copies.get(p) ?? []), join(path, p)]);
        walk(join(path, p, "node_modules"), depth + 1);
      }
    } else if (e.name.startsWith("@")) walk(path, depth);
    else walk(join(path, "node_modules"), depth + 1);
  }
})("node_modules", 0);
for (const [p, where] of copies) {
  if (where.length !== 1) {
    problem(`@allot/${p} installed ${where.length} times: ${where.join(", ")}`);
  }
}

// package.json fields.
for (const p of pkgs) {
  const m = manifests[p];
  const dir = join(root, p);
  const at = `@allot/${p} package.json`;
  if (m.type !== "module") problem(`${at}: type is ${m.type}, not module`);
  if (m.engines?.node !== ">=20.4") {
    problem(`${at}: engines.node ${m.engines?.node}, want >=20.4`);
  }
  for (const field of ["main", "types"]) {
    if (!m[field] || !existsSync(join(dir, m[field]))) {
      problem(`${at}: ${field} ${m[field]} missing`);
    }
  }
  // bundlers and tools read the manifest through `exports`
  if (m.exports?.["./package.json"] !== "./package.json") {
    problem(`${at}: exports has no "./package.json": "./package.json"`);
  } else if (require(`@allot/${p}/package.json`).name !== m.name) {
    problem(`${at}: @allot/${p}/package.json resolves to another manifest`);
  }
  for (const [sub, target] of Object.entries(m.exports ?? {})) {
    if (sub === "./package.json") continue;
    const keys = Object.keys(target);
    if (keys[0] !== "types") {
      problem(`${at}: exports["${sub}"] lists ${keys[0]} before types`);
    }
    for (const file of Object.values(target)) {
      if (!existsSync(join(dir, file))) {
        problem(`${at}: exports["${sub}"] names ${file}, which is missing`);
      }
    }
  }
  if (m.sideEffects !== false) {
    if (!Array.isArray(m.sideEffects)) {
      problem(`${at}: sideEffects ${JSON.stringify(m.sideEffects)}`);
    } else {for (const f of m.sideEffects) {
        if (!existsSync(join(dir, f))) {
          problem(`${at}: sideEffects names ${f}, missing`);
        }
      }}
  }
  for (const name of Object.keys(m.dependencies ?? {})) {
    if (name.startsWith("@allot/")) {
      problem(
        `${at}: ${name} is a dependency, not a peer (a second copy may be installed)`,
      );
    }
  }
  for (const [name, range] of Object.entries(m.peerDependencies ?? {})) {
    const installed = manifests[name.slice(7)]?.version;
    if (!name.startsWith("@allot/") || !caretAllows(range, installed)) {
      problem(`${at}: peer ${name}@${range}, installed ${installed}`);
    }
  }
  const dts = readdirSync(dir, { recursive: true }).filter((f) =>
    String(f).endsWith(".d.ts")
  );
  const gpuTypes = dts.some((f) =>
    readFileSync(join(dir, String(f)), "utf8").includes('types="@webgpu/types"')
  );
  if (gpuTypes !== Boolean(m.dependencies?.["@webgpu/types"])) {
    problem(
      `${at}: references @webgpu/types ${gpuTypes}, depends on it ${
        Boolean(m.dependencies?.["@webgpu/types"])
      }`,
    );
  }
  for (const [name, file] of Object.entries(m.bin ?? {})) {
    const path = join(dir, file);
    if (!existsSync(path) || !readFileSync(path, "utf8").startsWith("#!")) {
      problem(`${at}: bin ${name} (${file}) has no #! line`);
    }
  }
}

// No internal names in the public entry points.
for (const p of pkgs) {
  for (const sub of Object.keys(manifests[p].exports)) {
    if (sub === "./package.json") continue;
    const spec = `@allot/${p}${sub.slice(1)}`;
    const ns = await import(spec);
    const internal = Object.keys(ns).filter((k) => k.startsWith("_"));
    if (internal.length) {
      problem(`${spec} exports internal names: ${internal.join(", ")}`);
    }
  }
}

// instanceof across packages: one core, so its classes match every error.
const core = await import("@allot/core");
const throwers = {
  buddy: async () =>
    new (await import("@allot/buddy")).BuddyAllocator({
      minBlockByteLength: -1,
    }),
  caching: async () =>
    new (await import("@allot/caching")).CachingAllocator(
      new core.MockSegmentSource(),
    ).allocate(-1),
  core: () => core.validateByteLength(-1),
  cpu: async () =>
    new (await import("@allot/cpu")).CpuAllocator({ byteLength: -1 }),
  registry: async () =>
    new (await import("@allot/registry")).Registry().get("nowhere:7"),
  sparse: async () => (await import("@allot/sparse")).SparseMatrix.wrap(null),
  storage: async () =>
    (await import("@allot/storage")).Buffer.fromData("f32", [1], {
      shape: [-1],
    }),
  threads: async () => (await import("@allot/threads")).SharedHeap.create(-1),
  trace: async () => (await import("@allot/trace")).parseTrace("not a trace"),
  watermark: async () =>
    new (await import("@allot/watermark")).WatermarkAllocator(null),
  webgpu: async () =>
    new (await import("@allot/webgpu")).GpuCachingAllocator(null),
};
for (const p of pkgs) {
  const thrower = throwers[p];
  if (!thrower) {
    problem(
      `@allot/${p}: no typed-error case in tests/npm/consumer_check.mjs: add one`,
    );
    continue;
  }
  try {
    await thrower();
    problem(`@allot/${p}: the hostile call was accepted`);
  } catch (error) {
    if (!(error instanceof core.AllotError)) {
      problem(
        `@allot/${p}: threw ${error?.name} (${error?.message}), not an instance of @allot/core's AllotError`,
      );
    }
  }
}

// The trace CLI: through node_modules/.bin, and not started by a user's cli.js.
const traceBin = manifests.trace?.bin
  ? Object.keys(manifests.trace.bin)[0]
  : undefined;
if (manifests.trace && !traceBin) {
  problem("@allot/trace has no bin for its CLI");
}
if (traceBin) {
  let out = "";
  try {
    out = execFileSync(join("node_modules", ".bin", traceBin), [], {
      encoding: "utf8",
      stdio: "pipe",
    });
  } catch (error) {
    out = String(error.stdout) + String(error.stderr);
  }
  if (!/usage:/.test(out)) {
    problem(`${traceBin} printed no usage: ${out.slice(0, 200)}`);
  }
  mkdirSync("user", { recursive: true });
  writeFileSync(
    "user/cli.js",
    'import { main } from "@allot/trace/cli";\nconsole.log("user cli", typeof main);\n',
  );
  writeFileSync("user/package.json", '{ "type": "module" }\n');
  const own = execFileSync(
    "node",
    ["user/cli.js", "validate", "missing.jsonl"],
    { encoding: "utf8", stdio: "pipe" },
  );
  if (own.trim() !== "user cli function") {
    problem(
      `a user's cli.js importing @allot/trace/cli started the command: ${
        own.slice(0, 200)
      }`,
    );
  }
}

for (const line of problems) console.log(`  FAIL ${line}`);
console.log(
  `consumer check on node ${process.version}: ${pkgs.length} packages, ${problems.length} problem(s)`,
);
process.exit(problems.length ? 1 : 0);
