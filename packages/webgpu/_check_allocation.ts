/**
 * Internal: the checked path of `new GpuAllocation(...)`. allot's own
 * allocators make their handles through `_makeAllocation`, which passes
 * {@linkcode _allocationKey} and skips these checks (the allocation hit path
 * pays one comparison); any other caller's arguments are checked here and
 * refused with a typed error.
 *
 * @module
 */

import {
  describeValue,
  InvalidArgumentError,
  validateObject,
} from "@allot/core";
import { _checkDevice } from "./_validate_gpu.ts";
import { type GpuBinding, validateBinding } from "./gpu_binding.ts";
import type { GpuAllocationOwner } from "./gpu_allocation.ts";

/** Passed by allot's allocators, whose arguments are right by construction. */
export const _allocationKey: unique symbol = Symbol("allot:GpuAllocation");

/** What the constructor keeps, checked. */
export interface _CheckedAllocation extends GpuBinding {
  owner: GpuAllocationOwner;
  token: unknown;
}

/**
 * Checks a caller's arguments to `new GpuAllocation(device, binding)`, each
 * read once.
 *
 * @param device Must look like a `GPUDevice` with a `lost` promise.
 * @param binding A range inside its buffer, with an `owner` whose `free` is
 * a function.
 * @returns A plain copy to construct from.
 * @throws {InvalidArgumentError} For anything else; nothing is kept.
 */
export function _checkAllocation(
  device: unknown,
  binding: unknown,
): _CheckedAllocation {
  const what = "Cannot make a GpuAllocation";
  _checkDevice(device, what);
  const lost = (device as GPUDevice).lost;
  if (
    typeof lost !== "object" || lost === null ||
    typeof lost.then !== "function"
  ) {
    throw new InvalidArgumentError(
      `${what}: device.lost must be a promise, received ${describeValue(lost)}`,
      { name: "device.lost", value: lost, limit: "Promise" },
    );
  }
  validateObject(binding, "binding");
  const { owner, token } = binding as _CheckedAllocation;
  const range = validateBinding(device as GPUDevice, binding as GpuBinding, {
    what: "make a GpuAllocation",
    storage: false,
  });
  if (
    typeof owner !== "object" || owner === null ||
    typeof owner.free !== "function"
  ) {
    throw new InvalidArgumentError(
      `${what}: owner must be an object with a free(token) method, received ${
        describeValue(owner)
      }`,
      { name: "owner", value: owner, limit: "GpuAllocationOwner" },
    );
  }
  return {
    buffer: range.buffer,
    offset: range.offset,
    size: range.size,
    owner,
    token,
  };
}
