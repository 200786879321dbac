/**
 * {@linkcode Kernel}: a compute kernel as data (name, cache key of
 * compile-time facts, WGSL source, binding types), the per-device pipeline
 * cache, and {@linkcode dispatchSize}, which folds a dispatch into the
 * device's `maxComputeWorkgroupsPerDimension`.
 *
 * @module
 */

import { _COMPUTE_STAGE } from "./_flags.ts";
import {
  describeValue,
  InvalidArgumentError,
  validateInteger,
} from "@allot/core";

/** A compute kernel as data: everything a pipeline is built from. */
export interface Kernel {
  /** Human name, used in labels. */
  readonly name: string;
  /**
   * Cache key made of compile-time facts only (dtype width, aliasing,
   * workgroup size); never of shapes, strides or offsets.
   */
  readonly key: string;
  /** WGSL source with one `main` entry point. */
  readonly source: string;
  /** Binding types of group 0, in binding order. */
  readonly bindings: readonly GPUBufferBindingType[];
  /** Invocations per workgroup (`@workgroup_size(n)`). */
  readonly workgroupSize: number;
}

/** Refuses a kernel that is not an object of the documented fields. */
function _checkKernel(kernel: unknown): asserts kernel is Kernel {
  const k = kernel as Kernel;
  const ok = typeof kernel === "object" && kernel !== null &&
    typeof k.name === "string" && typeof k.key === "string" &&
    typeof k.source === "string" && Array.isArray(k.bindings);
  if (!ok) {
    throw new InvalidArgumentError(
      `Cannot build a pipeline: kernel must be an object with string name, key and source and an array of bindings, received ${
        describeValue(kernel)
      }`,
      { name: "kernel", value: kernel, limit: "Kernel" },
    );
  }
}

const caches = new WeakMap<GPUDevice, Map<string, GPUComputePipeline>>();

/**
 * The compute pipeline of `kernel` on `device`, built on first use and cached
 * per device (in a `WeakMap` keyed by the device) under `kernel.key`.
 *
 * @param device The device.
 * @param kernel The kernel.
 * @returns The cached pipeline.
 *
 * @example Build once, reuse
 * ```ts
 * import { kernelPipeline } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const kernel = {
 *     name: "noop",
 *     key: "noop",
 *     source: "@group(0) @binding(0) var<storage, read_write> a: array<u32>;\n" +
 *       "@compute @workgroup_size(1) fn main() { a[0] = 1u; }",
 *     bindings: ["storage"] as const,
 *     workgroupSize: 1,
 *   };
 *   assert.equal(kernelPipeline(device, kernel), kernelPipeline(device, kernel));
 *   device.destroy();
 * }
 * ```
 */
export function kernelPipeline(
  device: GPUDevice,
  kernel: Kernel,
): GPUComputePipeline {
  if (typeof kernel !== "object" || kernel === null) _checkKernel(kernel);
  let cache = caches.get(device);
  if (cache === undefined) {
    cache = new Map();
    caches.set(device, cache);
  }
  let pipeline = cache.get(kernel.key);
  if (pipeline === undefined) {
    _checkKernel(kernel);
    const label = `allot:${kernel.name}[${kernel.key}]`;
    const layout = device.createBindGroupLayout({
      label,
      entries: kernel.bindings.map((type, binding) => ({
        binding,
        visibility: _COMPUTE_STAGE,
        buffer: { type },
      })),
    });
    pipeline = device.createComputePipeline({
      label,
      layout: device.createPipelineLayout({
        label,
        bindGroupLayouts: [layout],
      }),
      compute: {
        module: device.createShaderModule({ label, code: kernel.source }),
        entryPoint: "main",
      },
    });
    cache.set(kernel.key, pipeline);
  }
  return pipeline;
}

/**
 * Number of pipelines cached for `device`.
 *
 * @param device The device.
 * @returns How many kernels were compiled on it.
 *
 * @example
 * ```ts
 * import { GpuKernels, pipelineCacheSize } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   assert.equal(pipelineCacheSize(device), 0);
 *   const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
 *   const a = device.createBuffer({ size: 16, usage });
 *   const kernels = GpuKernels.of(device);
 *   kernels.fill({ buffer: a, offset: 0, size: 16 }, 1, { dtype: "f32" });
 *   kernels.fill({ buffer: a, offset: 0, size: 16 }, 2, { dtype: "f32" });
 *   await kernels.flush();
 *   assert.equal(pipelineCacheSize(device), 1); // compiled once, reused
 *   device.destroy();
 * }
 * ```
 */
export function pipelineCacheSize(device: GPUDevice): number {
  return caches.get(device)?.size ?? 0;
}

/**
 * Workgroup counts for `invocations` threads of `workgroupSize`, folded into
 * two dimensions so neither passes `maxComputeWorkgroupsPerDimension`. A
 * kernel recovers its linear index as `gid.x + gid.y * nwg.x * workgroupSize`
 * and returns when it is past the count.
 *
 * @param invocations Threads needed.
 * @param workgroupSize Threads per workgroup.
 * @param maxPerDimension The device's `maxComputeWorkgroupsPerDimension`.
 * @returns `[x, y]` workgroup counts.
 * @throws {InvalidArgumentError} When even two dimensions cannot hold it.
 *
 * @example
 * ```ts
 * import { dispatchSize } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(dispatchSize(1000, 256, 65535), [4, 1]);
 * assert.deepEqual(dispatchSize(2 ** 26, 256, 65535), [52429, 5]);
 * ```
 */
export function dispatchSize(
  invocations: number,
  workgroupSize: number,
  maxPerDimension: number,
): [number, number] {
  validateInteger(invocations, 0, Number.MAX_SAFE_INTEGER, "invocations");
  validateInteger(workgroupSize, 1, 2 ** 31, "workgroupSize");
  validateInteger(maxPerDimension, 1, 2 ** 31, "maxPerDimension");
  const groups = Math.ceil(invocations / workgroupSize);
  if (groups <= maxPerDimension) return [groups, 1];
  const y = Math.ceil(groups / maxPerDimension);
  if (y > maxPerDimension) {
    throw new InvalidArgumentError(
      `Cannot dispatch ${invocations} invocations: at most ${
        maxPerDimension * maxPerDimension * workgroupSize
      } fit in two dimensions`,
      {
        name: "invocations",
        value: invocations,
        limit: maxPerDimension * maxPerDimension * workgroupSize,
      },
    );
  }
  return [Math.ceil(groups / y), y];
}
