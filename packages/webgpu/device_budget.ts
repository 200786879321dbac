/**
 * {@linkcode deviceBudget}: how many bytes of buffers a WebGPU device can be
 * expected to hold, where that can be known.
 *
 * WebGPU tells how large one buffer may be (`maxBufferSize`) and how much
 * one binding may cover, never how much memory the device has. What can be
 * known: an adapter that runs on the CPU (`adapterInfo.isFallbackAdapter`,
 * or a software rasterizer by name: llvmpipe, lavapipe, SwiftShader, WARP)
 * keeps its buffers in host memory, and so does a GPU with memory shared
 * with the host (Apple's). For those the host's memory bounds the device's:
 * `Deno.systemMemoryInfo().total` in Deno (needs `--allow-sys`),
 * `navigator.deviceMemory` in a browser (a rounded value, 8 GiB at most).
 * The budget is half of it, leaving the rest to the host's own work. For any
 * other adapter nothing is known, and the budget is `Infinity`: the device's
 * out-of-memory reports (which `GpuSegmentSource` turns into a lower budget)
 * are then the only signal.
 *
 * @module
 */

import {
  describeValue,
  InvalidArgumentError,
  optionOr,
  validateObject,
} from "@allot/core";
import { _checkOptions } from "./_validate_gpu.ts";

/** A device budget and where it came from. */
export interface DeviceBudget {
  /** Bytes of buffers to allow (`Infinity` when nothing is known). */
  capacityBytes: number;
  /** Why: `"host memory"` (CPU or shared-memory adapter) or `"unknown"`. */
  basis: "host memory" | "unknown";
  /** Host memory the budget was taken from (0 when unknown). */
  hostMemoryBytes: number;
}

/** Options of {@linkcode deviceBudget}. */
export interface DeviceBudgetOptions {
  /**
   * Share of host memory given to the device when its buffers live there.
   *
   * @default {0.5}
   */
  hostShare?: number;
  /**
   * Host memory in bytes, when the caller knows it better (or in tests);
   * by default read from the runtime.
   */
  hostMemoryBytes?: number;
}

/** Adapter names of software rasterizers (buffers in host memory). */
const _SOFTWARE = /llvmpipe|lavapipe|swiftshader|\bwarp\b|softpipe/i;

/**
 * The budget of `device`: half of host memory for an adapter whose buffers
 * live in host memory, `Infinity` otherwise (see the module text).
 *
 * @param device The WebGPU device (its `adapterInfo` is read).
 * @param options The share of host memory, or host memory itself.
 * @returns The budget and its basis.
 * @throws {InvalidArgumentError} For a share outside (0, 1] or a negative
 * host memory.
 *
 * @example A software adapter's budget comes from host memory
 * ```ts
 * import { deviceBudget } from "@allot/webgpu";
 * import assert from "node:assert/strict";
 *
 * const device = {
 *   adapterInfo: { isFallbackAdapter: true, description: "llvmpipe" },
 * } as unknown as GPUDevice;
 * const budget = deviceBudget(device, { hostMemoryBytes: 16 * 2 ** 30 });
 * assert.equal(budget.capacityBytes, 8 * 2 ** 30);
 * assert.equal(budget.basis, "host memory");
 * ```
 */
export function deviceBudget(
  device: GPUDevice,
  options?: DeviceBudgetOptions,
): DeviceBudget {
  validateObject(device, "device");
  options = _checkOptions(
    options,
    "options",
    ["hostShare", "hostMemoryBytes"],
    "deviceBudget()",
  );
  const share = optionOr(options.hostShare, 0.5);
  if (typeof share !== "number" || !(share > 0 && share <= 1)) {
    throw new InvalidArgumentError(
      `Invalid hostShare: must be in (0, 1], received ${describeValue(share)}`,
      { name: "hostShare", value: share, limit: 1 },
    );
  }
  const given = options.hostMemoryBytes;
  if (
    given !== undefined &&
    !(typeof given === "number" && given >= 0 && given < Infinity)
  ) {
    throw new InvalidArgumentError(
      `Invalid hostMemoryBytes: must be a finite non-negative number, received ${
        describeValue(given)
      }`,
      { name: "hostMemoryBytes", value: given, limit: 0 },
    );
  }
  const unknown: DeviceBudget = {
    capacityBytes: Infinity,
    basis: "unknown",
    hostMemoryBytes: 0,
  };
  if (!_hostMemoryAdapter(device)) return unknown;
  const host = given ?? _hostMemory();
  if (!(host > 0)) return unknown;
  return {
    capacityBytes: Math.floor(host * share),
    basis: "host memory",
    hostMemoryBytes: host,
  };
}

/** Whether the device's buffers live in host memory, as far as it says. */
function _hostMemoryAdapter(device: GPUDevice): boolean {
  let info: Partial<GPUAdapterInfo> & { isFallbackAdapter?: boolean };
  try {
    info = (device as { adapterInfo?: typeof info }).adapterInfo ?? {};
  } catch {
    return false;
  }
  if (info.isFallbackAdapter === true) return true;
  const text = `${info.description ?? ""} ${info.device ?? ""}`;
  if (_SOFTWARE.test(text)) return true;
  // Apple GPUs share memory with the host
  return /^apple$/i.test(info.vendor ?? "");
}

/** Host memory in bytes from the runtime, 0 when it cannot be read. */
function _hostMemory(): number {
  const g = globalThis as {
    Deno?: { systemMemoryInfo?: () => { total: number } };
    navigator?: { deviceMemory?: number };
  };
  try {
    const total = g.Deno?.systemMemoryInfo?.().total;
    if (typeof total === "number" && total > 0) return total;
  } catch {
    // no --allow-sys: fall through
  }
  const gib = g.navigator?.deviceMemory;
  return typeof gib === "number" && gib > 0 ? gib * 2 ** 30 : 0;
}
