/**
 * {@linkcode GpuAllocation}: an owning handle to a range of a `GPUBuffer`
 * from a pooling allocator, usable directly as a bind group resource.
 *
 * @module
 */

import {
  DoubleFreeError,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import { _allocationKey, _checkAllocation } from "./_check_allocation.ts";
import {
  type _DeviceState,
  _deviceState,
  _lostError,
} from "./_device_state.ts";
import type { GpuBinding } from "./gpu_binding.ts";

let nextId = 1;

/**
 * What a {@linkcode GpuAllocation} gives its range back to: `free(token)` is
 * called once, with the token given at construction.
 */
export interface GpuAllocationOwner {
  /**
   * Gives a range back.
   *
   * @param token What the owner needs to find the range (its block).
   */
  free(token: unknown): void;
}

/**
 * A live range of a `GPUBuffer`: `buffer`, `offset` and `size` (bytes, as in
 * WebGPU's `GPUBufferBinding`, so the handle itself can be a bind group
 * entry's `resource`). Release it exactly once with `release()` or `using`.
 *
 * After release, `buffer`, `offset` and `binding` throw
 * `UseAfterFreeError`; after device loss they throw `DeviceLostError` and
 * `release()` does nothing, so cleanup loops never throw.
 *
 * @example Allocate, bind, release
 * ```ts
 * import { GpuCachingAllocator } from "@allot/webgpu";
 * import { UseAfterFreeError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const device = await adapter.requestDevice();
 *   const allocator = new GpuCachingAllocator(device);
 *   const a = allocator.allocate(1000);
 *   assert.equal(a.size, 1000);
 *   assert.equal(a.offset % device.limits.minStorageBufferOffsetAlignment, 0);
 *   a.release();
 *   assert.throws(() => a.buffer, UseAfterFreeError);
 *   device.destroy();
 * }
 * ```
 */
export class GpuAllocation implements GpuBinding {
  /** A unique id, for messages. */
  readonly id: number;
  /** Bytes asked for; also `size`. */
  readonly byteLength: number;
  #device: GPUDevice;
  #state: _DeviceState;
  #buffer: GPUBuffer;
  #offset: number;
  #owner: GpuAllocationOwner | null;
  #token: unknown;

  /**
   * Wraps a range; called by allot's GPU allocators. A caller of its own
   * (wrapping a range it manages itself) has its arguments checked first.
   *
   * @param device The device of the buffer.
   * @param binding The range, inside its buffer, with `owner` and `token`:
   * `owner.free(token)` is called once, on the first release (for allot's
   * pools, `token` is the range's block).
   * @param key Internal to allot; leave it out.
   * @throws {InvalidArgumentError} When `device` is not a `GPUDevice`, the
   * range leaves its buffer or `owner.free` is not a function.
   */
  constructor(
    device: GPUDevice,
    binding: GpuBinding & { owner: GpuAllocationOwner; token: unknown },
    key?: unknown,
  ) {
    // allot's allocators pass the key: their arguments need no check, and
    // the hit path pays only this comparison.
    if (key !== _allocationKey) binding = _checkAllocation(device, binding);
    this.id = nextId++;
    this.#device = device;
    this.#state = _deviceState(device);
    this.#buffer = binding.buffer;
    this.#offset = binding.offset;
    this.byteLength = binding.size;
    this.#owner = binding.owner;
    this.#token = binding.token;
  }

  /** The buffer. */
  get buffer(): GPUBuffer {
    this.#check("buffer");
    return this.#buffer;
  }

  /** Byte offset in the buffer. */
  get offset(): number {
    this.#check("offset");
    return this.#offset;
  }

  /** Byte length (same as `byteLength`). */
  get size(): number {
    return this.byteLength;
  }

  /**
   * A detached plain binding for kernels and bind groups; valid until the
   * handle is released.
   *
   * @throws {UseAfterFreeError} After release.
   * @throws {DeviceLostError} After device loss.
   */
  get binding(): GpuBinding {
    this.#check("binding");
    return {
      buffer: this.#buffer,
      offset: this.#offset,
      size: this.byteLength,
    };
  }

  /** Whether the handle was released. */
  get released(): boolean {
    return this.#owner === null;
  }

  /**
   * Gives the range back to its pool; work already submitted that uses it
   * finishes before the range is reused.
   *
   * @throws {DoubleFreeError} When released twice (never after device loss).
   * @throws {InvalidArgumentError} When called on a Proxy of an allocation,
   * or an object made from one, instead of the allocation itself.
   */
  release(): void {
    if (!(#owner in this)) _notAnAllocation(this);
    const owner = this.#owner;
    if (owner === null) {
      if (this.#state.lost) return;
      throw new DoubleFreeError(
        `Cannot release ${this}: it was already released`,
      );
    }
    this.#owner = null;
    if (this.#state.lost) return;
    owner.free(this.#token);
  }

  /** Same as {@linkcode GpuAllocation.release}. */
  [Symbol.dispose](): void {
    if (this.#owner !== null) this.release();
  }

  /**
   * A short description.
   *
   * @returns Such as `GpuAllocation#3(1000 bytes at 256 of "allot:segment#1")`.
   */
  toString(): string {
    return `GpuAllocation#${this.id}(${this.byteLength} bytes at ${this.#offset} of ${
      JSON.stringify(this.#buffer.label)
    })`;
  }

  #check(what: string): void {
    if (this.#state.lost) {
      throw _lostError(this.#device, this.#state, `read ${what} of ${this}`);
    }
    if (this.#owner === null) {
      throw new UseAfterFreeError(
        `Cannot read ${what} of ${this}: it was released`,
      );
    }
  }
}

/** `release()` called with `this` not an allocation (a Proxy of one). */
function _notAnAllocation(value: unknown): never {
  throw new InvalidArgumentError(
    "Cannot release: `this` is not a GpuAllocation (a Proxy of one, or an object made from one); release the allocation itself",
    { name: "this", value, limit: "a GpuAllocation" },
  );
}
