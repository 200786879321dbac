/**
 * `deno task build:npm`: one npm package per workspace member in `npm/<pkg>/`.
 *
 * For each member found under `packages/*` it runs `deno pack` (ESM
 * JavaScript, `.d.ts` from the exported types, `package.json` with
 * `exports`), then fixes what `deno pack` leaves out:
 *
 * - JavaScript is lowered to ES2022 with the pinned TypeScript, so `using`
 *   declarations become code Node 20 can parse;
 * - sibling members (`@allot/core`) are recorded as peer dependencies
 *   (`^0.1.0`), so that an install holds one copy of each and `instanceof`
 *   on their classes (errors, `Buffer`) works across packages, as TF.js
 *   backends do with `@tensorflow/tfjs-core` (npm 7 and later install peers);
 *   npm dependencies are pinned to the exact version the member imports;
 * - `.d.ts` files that name WebGPU types reference `@webgpu/types`;
 * - optional properties in `.d.ts` files also take `undefined` (for users
 *   with `exactOptionalPropertyTypes`), and an `any` there fails the build;
 * - modules that run code on import are listed in `sideEffects`, and a
 *   `./cli` export becomes the package's `bin` (`allot-<pkg>`);
 * - the license file, `engines` (Node 20.4 or later), `description`,
 *   `sideEffects` and a `./package.json` export (which bundlers and tools
 *   read) are added.
 *
 * Then every package must pass `publint --strict` and
 * `attw --pack <dir> --profile esm-only`, and every emitted module must parse
 * as an ES module under the installed Node.
 *
 * Usage: `deno task build:npm [--no-lint] [pkg...]`
 *
 * @module
 */

import { createRequire } from "node:module";
import {
  abs,
  entryFiles,
  exec,
  mapConcurrent,
  type Member,
  members,
  root,
} from "../_workspace.ts";
import { bin, ensureTools, pinnedVersion, toolsDir } from "./_tools.ts";
import {
  computedMembers,
  restoreComputedMembers,
  type TypeScriptApi,
} from "./_computed_members.ts";
import {
  importedPackages,
  parseNpmSpecifier,
  stripComments,
} from "./_specifiers.ts";
import {
  anyLeaks,
  sideEffectStatements,
  widenOptionalProperties,
} from "./_package_facts.ts";

/** Where the built packages go (ignored by git and by Deno). */
export const outDir: string = abs("npm/");

/** The built package folder of a member. */
export function packageDir(member: Member): string {
  return `${outDir}${member.pkg}/`;
}

interface TypeScript extends TypeScriptApi {
  version: string;
  transpileModule(
    input: string,
    options: { compilerOptions: Record<string, unknown>; fileName: string },
  ): { outputText: string; diagnostics?: unknown[] };
  ModuleKind: Record<string, number>;
}

function loadTypeScript(): TypeScript {
  return createRequire(toolsDir)("typescript") as TypeScript;
}

async function* walk(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}${entry.name}`;
    if (entry.isDirectory) yield* walk(`${path}/`);
    else if (entry.isFile) yield path;
  }
}

async function npmVersions(member: Member): Promise<Map<string, string>> {
  const rootConfig = JSON.parse(
    await Deno.readTextFile(new URL("deno.json", root)),
  );
  const versions = new Map<string, string>();
  for (
    const value of [
      ...Object.values(rootConfig.imports ?? {}),
      ...Object.values(member.config.imports ?? {}),
    ]
  ) {
    const parsed = typeof value === "string"
      ? parseNpmSpecifier(value)
      : undefined;
    if (parsed) versions.set(parsed.name, parsed.version);
  }
  // Direct `npm:` specifiers in the member's sources.
  for await (const path of walk(abs(`${member.dir}/`))) {
    if (!path.endsWith(".ts")) continue;
    const text = await Deno.readTextFile(path);
    for (const [, value] of text.matchAll(/["'](npm:[^"']+)["']/g)) {
      const parsed = parseNpmSpecifier(value);
      if (parsed) versions.set(parsed.name, parsed.version);
    }
  }
  return versions;
}

/**
 * The Node versions the packages claim: 20.4 is the first Node 20 with
 * `Symbol.dispose` and `Symbol.asyncDispose`, which every handle class uses
 * (before it, `using` and `[Symbol.dispose]()` silently do nothing).
 */
export const NODE_ENGINES = ">=20.4";

/**
 * The built files of a member's `./cli` export (a command line program),
 * which become the package's `bin` (`allot-<pkg>`) with a `#!` line.
 */
function cliBins(member: Member): Set<string> {
  const exports = member.config.exports;
  const cli = typeof exports === "object" && exports !== null
    ? (exports as Record<string, string>)["./cli"]
    : undefined;
  return new Set(
    typeof cli === "string" ? [cli.replace(/\.ts$/, ".js")] : [],
  );
}

/** The first sentence of the module doc of the member's main entry. */
async function description(member: Member): Promise<string> {
  if (member.config.description) return member.config.description;
  const [entry] = entryFiles(member);
  const source = await readOptional(abs(entry)) ?? "";
  const doc = /^\s*\/\*\*([\s\S]*?)\*\//.exec(source)?.[1] ?? "";
  const text = doc
    .split("\n")
    .map((line) => line.replace(/^\s*\*\s?/, ""))
    .join(" ")
    .split(/\s@[a-z]+/)[0] // up to the first tag
    .replace(/\{@link(?:code|plain)?\s+([^}|]+)[^}]*\}/g, "$1")
    .replace(/[`*]/g, "")
    .replace(/\s+/g, " ")
    .trim()
    .replace(new RegExp(`^${member.config.name}:\\s*`), "");
  const sentence = /^(.+?)\.(\s|$)/.exec(text)?.[1] ?? text;
  if (!sentence) return `${member.config.name}, part of allot`;
  return sentence[0].toUpperCase() + sentence.slice(1);
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
}

/**
 * Builds one member into `npm/<pkg>/`.
 *
 * @param member The member to build.
 * @param all Every member, to resolve sibling dependencies.
 * @returns Problems that make the build unfit to publish (empty when fine).
 */
async function buildMember(
  member: Member,
  all: Member[],
): Promise<{ problems: string[]; notes: string[] }> {
  const problems: string[] = [];
  const notes: string[] = [];
  const dir = packageDir(member);
  const tarball = `${outDir}${member.pkg}.deno-pack.tgz`;
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(dir, { recursive: true });
  await exec([
    Deno.execPath(),
    "pack",
    "--allow-dirty",
    "--no-source-maps",
    "--quiet",
    "--output",
    tarball,
  ], { cwd: member.dir, capture: "all" });
  await exec(["tar", "-xzf", tarball, "-C", dir, "--strip-components=1"]);
  await Deno.remove(tarball);

  const ts = loadTypeScript();
  const sideEffects: string[] = [];
  const webgpuTypes = "@webgpu/types";
  const used = new Set<string>();
  let needsGpuTypes = false;
  for await (const path of walk(dir)) {
    if (/\.[mc]?tsx?$/.test(path) && !/\.d\.[mc]?ts$/.test(path)) {
      // `deno pack` copies sources outside the module graph as they are.
      console.warn(
        `npm: ${
          path.slice(outDir.length)
        } is not reachable from the exports; left out`,
      );
      await Deno.remove(path);
    } else if (path.endsWith(".js")) {
      const source = await Deno.readTextFile(path);
      const { outputText } = ts.transpileModule(source, {
        compilerOptions: {
          target: ts.ScriptTarget.ES2022,
          module: ts.ModuleKind.ESNext,
          useDefineForClassFields: true,
        },
        fileName: path.slice(dir.length),
      });
      const rel = path.slice(dir.length);
      const effects = sideEffectStatements(ts, rel, outputText);
      if (effects.length) {
        sideEffects.push(`./${rel}`);
        notes.push(`${rel}: runs on import (${effects[0]}); in sideEffects`);
      }
      const shebang = cliBins(member).has(`./${rel}`) &&
          !outputText.startsWith("#!")
        ? "#!/usr/bin/env node\n"
        : "";
      await Deno.writeTextFile(path, shebang + outputText);
      for (const name of importedPackages(outputText)) used.add(name);
      if (/\bDeno\.[a-zA-Z]/.test(stripComments(outputText))) {
        problems.push(
          `${
            path.slice(outDir.length)
          } uses the Deno namespace, which Node and browsers lack`,
        );
      }
    } else if (path.endsWith(".d.ts")) {
      let text = await Deno.readTextFile(path);
      for (const name of importedPackages(text)) used.add(name);
      // `deno pack` drops `[Symbol.dispose]()` and the other members with
      // computed names; copy them back from the source.
      const rel = path.slice(dir.length).replace(/\.d\.ts$/, ".ts");
      const source = await readOptional(abs(`${member.dir}/${rel}`));
      if (source !== undefined) {
        try {
          const restored = restoreComputedMembers(
            ts,
            rel,
            text,
            computedMembers(ts, rel, source),
          );
          if (restored.added.length) {
            text = restored.text;
            await Deno.writeTextFile(path, text);
            notes.push(`${rel}: restored ${restored.added.join(", ")}`);
          }
        } catch (error) {
          problems.push((error as Error).message);
        }
      }
      // `exactOptionalPropertyTypes` users may pass `undefined` for an
      // option, as every entry point accepts.
      const widened = widenOptionalProperties(ts, rel, text);
      if (widened.widened) {
        text = widened.text;
        await Deno.writeTextFile(path, text);
      }
      for (const leak of anyLeaks(ts, rel, text)) {
        problems.push(
          `${
            path.slice(outDir.length)
          } ${leak}: \`any\` in the public types (annotate the declaration in ${member.dir}/${rel})`,
        );
      }
      if (/\bGPU[A-Z][A-Za-z]*\b/.test(stripComments(text))) {
        needsGpuTypes = true;
        if (!text.includes(`types="${webgpuTypes}"`)) {
          text = `/// <reference types="${webgpuTypes}" />\n${text}`;
          await Deno.writeTextFile(path, text);
        }
      }
      if (/\bDeno\.[A-Z]/.test(stripComments(text))) {
        problems.push(
          `${path.slice(outDir.length)} names types from the Deno namespace`,
        );
      }
    }
  }

  const manifestPath = `${dir}package.json`;
  const manifest = JSON.parse(await Deno.readTextFile(manifestPath));
  const versions = await npmVersions(member);
  const dependencies: Record<string, string> = {};
  const peerDependencies: Record<string, string> = {};
  for (const name of [...used].sort()) {
    const sibling = all.find((m) => m.config.name === name);
    if (sibling) {
      if (sibling === member) continue;
      peerDependencies[name] = `^${sibling.config.version}`;
    } else if (versions.has(name)) {
      dependencies[name] = versions.get(name)!;
    } else {
      problems.push(
        `${member.config.name} imports ${name}, which no deno.json pins`,
      );
    }
  }
  if (needsGpuTypes) {
    dependencies[webgpuTypes] = await pinnedVersion(webgpuTypes);
  }

  const readme = await readOptional(abs(`${member.dir}/README.md`));
  if (readme === undefined) {
    problems.push(`${member.dir} has no README.md`);
  } else {
    await Deno.writeTextFile(`${dir}README.md`, readme);
  }
  const license = await readOptional(abs(`${member.dir}/LICENSE`)) ??
    await Deno.readTextFile(abs("LICENSE"));
  await Deno.writeTextFile(`${dir}LICENSE`, license);

  const ordered = {
    name: manifest.name,
    version: manifest.version,
    description: await description(member),
    license: manifest.license ?? member.config.license,
    type: "module",
    sideEffects: sideEffects.length ? sideEffects.sort() : false,
    engines: { node: NODE_ENGINES },
    main: manifest.main,
    types: manifest.types,
    // bundlers and tools read `<pkg>/package.json`, which `exports` would
    // otherwise hide from them
    exports: { ...manifest.exports, "./package.json": "./package.json" },
    ...(cliBins(member).size
      ? {
        bin: Object.fromEntries(
          [...cliBins(member)].map((file) => [`allot-${member.pkg}`, file]),
        ),
      }
      : {}),
    ...(Object.keys(dependencies).length ? { dependencies } : {}),
    ...(Object.keys(peerDependencies).length ? { peerDependencies } : {}),
  };
  await Deno.writeTextFile(
    manifestPath,
    JSON.stringify(ordered, null, 2) + "\n",
  );
  return { problems, notes };
}

/**
 * Checks that every `.js` file in the built packages parses as an ES module
 * under the installed Node (`vm.SourceTextModule`, nothing is run).
 */
async function parseWithNode(dirs: string[]): Promise<void> {
  const script = `
    const vm = require("node:vm");
    const fs = require("node:fs");
    const path = require("node:path");
    let files = 0, bad = 0;
    function walk(dir) {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) { if (e.name !== "node_modules") walk(p); }
        else if (p.endsWith(".js")) {
          files++;
          try { new vm.SourceTextModule(fs.readFileSync(p, "utf8"), { identifier: p }); }
          catch (error) { bad++; console.error(p + ": " + error.message); }
        }
      }
    }
    for (const dir of process.argv.slice(1)) walk(dir);
    console.log("npm: node " + process.version + " parsed " + files + " modules, " + bad + " failed");
    process.exit(bad ? 1 : 0);`;
  await exec([
    "node",
    "--experimental-vm-modules",
    "--no-warnings",
    "-e",
    script,
    ...dirs,
  ]);
}

/** Runs publint and attw on one built package; returns failures. */
async function lint(member: Member): Promise<string[]> {
  const dir = packageDir(member);
  const failures: string[] = [];
  for (
    const command of [
      [bin("publint"), "--strict", dir],
      [bin("attw"), "--pack", dir, "--profile", "esm-only"],
    ]
  ) {
    const tool = command[0].split("/").pop();
    try {
      await exec(command, {
        env: { NO_COLOR: "1", FORCE_COLOR: "0" },
        capture: "all",
      });
      console.log(`npm: ${tool} ${member.config.name}: clean`);
    } catch (error) {
      console.log(`npm: ${tool} ${member.config.name}: FAILED`);
      failures.push(`${member.config.name}: ${(error as Error).message}`);
    }
  }
  return failures;
}

if (import.meta.main) {
  const args = Deno.args.filter((a) => !a.startsWith("--"));
  const noLint = Deno.args.includes("--no-lint");
  await ensureTools();
  const all = await members();
  const chosen = args.length ? all.filter((m) => args.includes(m.pkg)) : all;
  await Deno.mkdir(outDir, { recursive: true });
  const problems: string[] = [];
  const failed = new Set<Member>();
  await mapConcurrent(chosen, async (member) => {
    try {
      const result = await buildMember(member, all);
      problems.push(...result.problems);
      const notes = result.notes.map((n) => `\n  note: ${n}`).join("");
      console.log(
        `npm: built ${member.config.name} -> npm/${member.pkg}/${notes}`,
      );
    } catch (error) {
      console.log(`npm: ${member.config.name}: build FAILED`);
      problems.push(`${member.config.name}: ${(error as Error).message}`);
      failed.add(member);
    }
  });
  // Remove packages whose member has gone.
  for await (const entry of Deno.readDir(outDir)) {
    if (entry.isDirectory && !all.some((m) => m.pkg === entry.name)) {
      await Deno.remove(`${outDir}${entry.name}`, { recursive: true });
    }
  }
  const built = chosen.filter((m) => !failed.has(m));
  try {
    await parseWithNode(built.map(packageDir));
  } catch (error) {
    problems.push((error as Error).message);
  }
  if (!noLint) {
    for (const failures of await mapConcurrent(built, lint)) {
      problems.push(...failures);
    }
  }
  if (problems.length) {
    console.error(`npm: ${problems.length} problem(s):`);
    for (const p of problems.sort()) console.error(`  - ${p}`);
    Deno.exit(1);
  }
  console.log(
    `npm: built ${chosen.length} package(s) in npm/${
      noLint ? "" : " (publint --strict and attw clean)"
    }`,
  );
}
