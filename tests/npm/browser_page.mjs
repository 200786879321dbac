// The page side of the browser check: imports the built packages through
// the page's import map and runs the shared sections with the browser's own
// WebGPU. The result lands in `globalThis.__allotResult` for the driver.
import { runAll } from "./sections.mjs";

const { packages, modules } = JSON.parse(
  document.getElementById("allot-packages").textContent,
);
const lines = [];
let device;
const env = {
  load: (pkg) => import(`@allot/${pkg}`),
  async gpuDevice() {
    if (device) return device;
    if (!navigator.gpu) throw new Error("navigator.gpu is missing");
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) throw new Error("navigator.gpu.requestAdapter() gave null");
    const info = adapter.info ?? {};
    lines.push(
      `adapter: ${info.vendor ?? "?"} ${info.architecture ?? ""} ${
        info.description ?? ""
      }`.trim(),
    );
    device = await adapter.requestDevice();
    return device;
  },
  // Every module file of the package loads in the browser.
  async loadAll(pkg) {
    for (const file of modules[pkg]) await import(file);
  },
  log: (line) => lines.push(line),
};

try {
  const result = await runAll(packages, env);
  globalThis.__allotResult = {
    ...result,
    lines,
    userAgent: navigator.userAgent,
  };
} catch (error) {
  globalThis.__allotResult = {
    passed: 0,
    failed: 1,
    results: [{
      name: "page",
      ok: false,
      error: String(error?.stack ?? error),
    }],
    lines,
    userAgent: navigator.userAgent,
  };
}
