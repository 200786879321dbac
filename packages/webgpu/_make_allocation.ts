/**
 * Internal: how allot's GPU allocators make {@linkcode GpuAllocation}s on
 * their hot path: through one reused binding record (no object besides the
 * handle per allocation), with shapes that never die.
 *
 * V8 keeps the shape (map) of an object only while some object has it, and
 * the shapes that every `GpuAllocation` and its binding record reach are
 * held only weakly. A runtime that frees all its handles before a full GC
 * (between two inferences, say) would lose them, and with them every
 * optimized function that checks them ("embedded weak objects cleared"):
 * the next allocations run unoptimized until V8 compiles them again, and
 * after a few rounds V8 stops trying. On the real-trace replay
 * (`bench/real_traces.ts`, a `gc()` between passes) that cost 2-4x per op.
 * The record below and the released handle it holds never die, so the
 * shapes stay.
 *
 * @module
 */

import type { GpuBinding } from "./gpu_binding.ts";
import { GpuAllocation, type GpuAllocationOwner } from "./gpu_allocation.ts";

interface _Record {
  buffer: GPUBuffer;
  offset: number;
  size: number;
  owner: GpuAllocationOwner;
  token: unknown;
  /** A released handle kept for its shape. */
  anchor: GpuAllocation | null;
}

const noBuffer = { label: "allot:anchor" } as GPUBuffer;
const noOwner: GpuAllocationOwner = { free() {} };
const record: _Record = {
  buffer: noBuffer,
  offset: 0,
  size: 0,
  owner: noOwner,
  token: null,
  anchor: null,
};
record.anchor = new GpuAllocation(
  {
    label: "allot:anchor",
    lost: new Promise<never>(() => {}),
  } as unknown as GPUDevice,
  record as GpuBinding & _Record,
);
record.anchor.release();

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
  const r = record;
  r.buffer = buffer;
  r.offset = offset;
  r.size = size;
  r.owner = owner;
  r.token = token;
  const allocation = new GpuAllocation(device, r);
  r.buffer = noBuffer;
  r.owner = noOwner;
  r.token = null;
  return allocation;
}
