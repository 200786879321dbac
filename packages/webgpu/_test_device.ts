/**
 * Test helper: a WebGPU adapter when one exists, and a visible message when
 * not, so GPU tests skip instead of failing.
 *
 * @module
 */

/** The adapter, or `undefined` when this runtime has none. */
export const adapter: GPUAdapter | undefined = await (async () => {
  try {
    return (await navigator.gpu?.requestAdapter()) ?? undefined;
  } catch {
    return undefined;
  }
})();

/** `false` when a GPU exists, else the skip message for `describe`. */
export const skip: false | string = adapter
  ? false
  : "no WebGPU adapter in this runtime: GPU tests skipped";

if (skip) console.warn(`[@allot/webgpu] ${skip}`);

/**
 * A fresh device (tests that destroy their device need their own).
 *
 * @param label Device label.
 * @returns The device.
 */
export async function newDevice(label = "test"): Promise<GPUDevice> {
  if (!adapter) throw new Error("No WebGPU adapter");
  const device = await adapter.requestDevice({ label });
  device.addEventListener("uncapturederror", (event) => {
    const error = (event as GPUUncapturedErrorEvent).error;
    console.error(`[${label}] uncaptured WebGPU error:`, error.message);
  });
  return device;
}

let shared: Promise<GPUDevice> | undefined;

/**
 * One device shared by the tests of a process.
 *
 * @returns The shared device.
 */
export function sharedDevice(): Promise<GPUDevice> {
  shared ??= newDevice("shared-test");
  return shared;
}
