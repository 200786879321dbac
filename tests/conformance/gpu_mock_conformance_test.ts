/**
 * The allocator contract run against `@allot/webgpu`'s allocators on a mock
 * `GPUDevice` (the real device runs in `gpu/`).
 *
 * @module
 */

import { conformance } from "./_contract.ts";
import { gpuCaching, gpuPlanned, gpuWatermark } from "./_gpu_subjects.ts";
import { mockGpu } from "./_mock_gpu.ts";

conformance(
  "GpuCachingAllocator (mock device)",
  () => gpuCaching(mockGpu().device),
);
conformance(
  "GpuCachingAllocator after-fence (mock device)",
  () => gpuCaching(mockGpu().device, "after-fence"),
);
conformance(
  "GpuWatermarkAllocator (mock device)",
  () => gpuWatermark(mockGpu().device),
);
conformance(
  "GpuPlannedAllocator (mock device)",
  () => gpuPlanned(mockGpu().device),
);
