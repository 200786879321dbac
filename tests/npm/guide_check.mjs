// Runs guide/runtime.ts on Node from the installed tarballs (test:node
// transpiles it to guide_runtime.mjs here), with a Dawn GPU device from the
// `webgpu` npm package when one is available.
import { create, globals } from "webgpu";

Object.assign(globalThis, globals);
let device;
const gpu = create(["backend=opengles"]);
try {
  const adapter = await gpu.requestAdapter({ featureLevel: "compatibility" });
  device = await adapter?.requestDevice();
} catch (error) {
  console.log(`guide: no GPU device (${error.message}); CPU only`);
}
const { train } = await import("./guide_runtime.mjs");
const report = await train(device);
const problems = [];
if (!(report.lastLoss < 0.05)) problems.push(`last loss ${report.lastLoss}`);
if (report.memoryAfterTraining.numStorages !== 7) {
  problems.push(`live storages ${report.memoryAfterTraining.numStorages}`);
}
if (report.storagesAtEnd !== 0) problems.push(`left ${report.storagesAtEnd}`);
if (device && report.gpuMatches !== true) problems.push("GPU step differs");
device?.destroy();
console.log(
  `guide on node ${process.version}: loss ${report.firstLoss.toFixed(4)} -> ${
    report.lastLoss.toFixed(4)
  }, GPU step ${report.gpuMatches ?? "skipped"}, ${
    problems.length ? `FAILED: ${problems.join(", ")}` : "ok"
  }`,
);
process.exit(problems.length ? 1 : 0);
