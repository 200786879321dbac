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

/** The guide (guide/runtime.ts) in the browser, on its own WebGPU. */
async function guide() {
  const { train } = await import("./guide_runtime.mjs");
  let gpu;
  try {
    gpu = await env.gpuDevice();
  } catch {
    gpu = undefined;
  }
  const report = await train(gpu);
  const problems = [];
  if (!(report.lastLoss < 0.05)) problems.push(`last loss ${report.lastLoss}`);
  if (report.memoryAfterTraining.numStorages !== 7) {
    problems.push(`live storages ${report.memoryAfterTraining.numStorages}`);
  }
  if (report.storagesAtEnd !== 0) problems.push(`left ${report.storagesAtEnd}`);
  if (gpu && report.gpuMatches !== true) problems.push("GPU step differs");
  const name = `guide: 2-layer MLP, loss ${report.firstLoss.toFixed(4)} -> ${
    report.lastLoss.toFixed(4)
  }, GPU step ${report.gpuMatches ?? "skipped"}`;
  return { name, ok: problems.length === 0, error: problems.join(", ") };
}

try {
  const result = await runAll(packages, env);
  if (packages.includes("webgpu") && packages.includes("registry")) {
    const g = await guide().catch((error) => ({
      name: "guide",
      ok: false,
      error: String(error?.stack ?? error),
    }));
    result.results.push(g);
    lines.push(
      `  ${g.ok ? "ok  " : "FAIL"} ${g.name}${g.ok ? "" : `\n${g.error}`}`,
    );
    if (g.ok) result.passed++;
    else result.failed++;
  }
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
