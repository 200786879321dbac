// Gives Node the `navigator.gpu` a browser has, from the `webgpu` npm package
// (Dawn on OpenGL ES), for the README examples' GPU parts. The instance is
// kept for the process: Dawn crashes when it is collected.
import { create, globals } from "webgpu";

Object.assign(globalThis, globals);
const gpu = create(["backend=opengles"]);
globalThis.__readmeGpu = gpu;
const requestAdapter = gpu.requestAdapter.bind(gpu);
gpu.requestAdapter = (options) =>
  requestAdapter({ featureLevel: "compatibility", ...options });
if (globalThis.navigator === undefined) {
  Object.defineProperty(globalThis, "navigator", {
    value: {},
    configurable: true,
  });
}
Object.defineProperty(globalThis.navigator, "gpu", {
  value: gpu,
  configurable: true,
});
