/**
 * Internal: how allot's GPU allocators make {@linkcode GpuAllocation}s, with
 * shapes that never die.
 *
 * V8 keeps the shape (map) of an object only while some object has it, and
 * the shapes every `GpuAllocation`, its binding literal and its caching block
 * reach are held only weakly. A runtime that frees all its handles before a
 * full GC (between two inferences, say) would lose them, and with them every
 * optimized function that checks them ("embedded weak objects cleared"): the
 * next allocations run unoptimized until V8 compiles them again. On the
 * real-trace replay (`bench/real_traces.ts`, a `gc()` between passes) that
 * made `GpuCachingAllocator` 2-4x slower per op. The objects below (a binding
 * literal, a released handle, a caching block with no memory behind it)
 * never die, so the shapes stay.
 *
 * @module
 */

import { CachingAllocator } from "@allot/caching";
import { MockSegmentSource } from "@allot/core";
import { _allocationKey } from "./_check_allocation.ts";
import { GpuAllocation, type GpuAllocationOwner } from "./gpu_allocation.ts";

const noOwner: GpuAllocationOwner = { free() {} };
// the same literal shape as in _makeAllocation (same keys, same order)
const binding = {
  buffer: { label: "allot:anchor" } as GPUBuffer,
  offset: 0,
  size: 0,
  owner: noOwner,
  token: null as unknown,
};
const anchors: unknown[] = [
  binding,
  new GpuAllocation(
    {
      label: "allot:anchor",
      lost: new Promise<never>(() => {}),
    } as unknown as GPUDevice,
    binding,
    _allocationKey,
  ),
  new CachingAllocator(new MockSegmentSource()).allocate(1),
];
(anchors[1] as GpuAllocation).release();

/**
 * A handle over `[offset, offset + size)` of `buffer`.
 *
 * @param device The device of the buffer.
 * @param buffer The buffer.
 * @param offset Byte offset of the range.
 * @param size Bytes of the range.
 * @param owner Gives the range back.
 * @param token What `owner.free` gets.
 * @returns The handle.
 */
export function _makeAllocation(
  device: GPUDevice,
  buffer: GPUBuffer,
  offset: number,
  size: number,
  owner: GpuAllocationOwner,
  token: unknown,
): GpuAllocation {
  if (anchors.length === 0) throw new Error("unreachable"); // keeps them
  return new GpuAllocation(
    device,
    { buffer, offset, size, owner, token },
    _allocationKey,
  );
}
