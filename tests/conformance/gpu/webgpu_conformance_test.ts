/**
 * The allocator contract run against `@allot/webgpu`'s allocators on Deno's
 * real WebGPU (a software adapter, llvmpipe, on the project's machines).
 * Skipped, with a message, where no adapter exists. Part of the GPU run of
 * `./scripts/allot test`.
 *
 * @module
 */

import { conformance } from "../_contract.ts";
import { gpuCaching, gpuPlanned, gpuWatermark } from "../_gpu_subjects.ts";

const adapter = await navigator.gpu?.requestAdapter();
const device = await adapter?.requestDevice();

if (device === undefined) {
  console.warn("webgpu_conformance_test: no WebGPU adapter; skipped");
} else {
  const options = { runs: 15, sanitizeResources: false };
  conformance(
    "GpuCachingAllocator (WebGPU)",
    () => gpuCaching(device),
    options,
  );
  conformance(
    "GpuCachingAllocator after-fence (WebGPU)",
    () => gpuCaching(device, "after-fence"),
    options,
  );
  conformance(
    "GpuWatermarkAllocator (WebGPU)",
    () => gpuWatermark(device),
    options,
  );
  conformance(
    "GpuPlannedAllocator (WebGPU)",
    () => gpuPlanned(device),
    options,
  );
}
