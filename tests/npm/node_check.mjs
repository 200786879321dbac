// The Node check of the npm build (`deno task test:node`). It runs inside a
// scratch project where the packed `@allot/*` tarballs were installed with
// npm, and imports them by package name as a Node user would. WebGPU comes
// from the `webgpu` npm package (Dawn, OpenGL ES backend).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runAll } from "./sections.mjs";

const manifest = JSON.parse(readFileSync("package.json", "utf8"));
const packages = Object.keys(manifest.dependencies)
  .filter((name) => name.startsWith("@allot/"))
  .map((name) => name.slice("@allot/".length))
  .sort();

// Dawn's instance must outlive its devices: when the object `create()`
// returns is garbage collected, the process crashes. Keep it for the run.
let gpu;
let device;
const env = {
  load: (pkg) => import(`@allot/${pkg}`),
  async gpuDevice() {
    if (device) return device;
    const { create, globals } = await import("webgpu");
    Object.assign(globalThis, globals);
    gpu = create(["backend=opengles"]);
    const adapter = await gpu.requestAdapter({ featureLevel: "compatibility" });
    if (!adapter) throw new Error("the webgpu npm package gave no adapter");
    device = await adapter.requestDevice();
    return device;
  },
  // Every export path, and every module file, loads under Node.
  async loadAll(pkg) {
    const dir = join("node_modules", "@allot", pkg);
    const exports = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))
      .exports;
    for (const subpath of Object.keys(exports)) {
      if (subpath === "./package.json") continue;
      const ns = await import(`@allot/${pkg}${subpath.slice(1)}`);
      if (Object.keys(ns).length === 0) {
        throw new Error(`@allot/${pkg}${subpath.slice(1)} exports nothing`);
      }
    }
    for (const file of readdirSync(dir, { recursive: true })) {
      if (String(file).endsWith(".js")) {
        await import(`./${join(dir, String(file))}`);
      }
    }
  },
  log: (line) => console.log(line),
};

console.log(`node ${process.version}: checking ${packages.join(", ")}`);
const { passed, failed } = await runAll(packages, env);
device?.destroy();
console.log(`node check: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
