/**
 * The allocator used when a caller gives none: one `ArrayBuffer` per
 * allocation, nothing shared. `@allot/cpu` has the pooled ones.
 *
 * @module
 */

import {
  AllocatorBase,
  DataPtr,
  Device,
  OutOfMemoryError,
  validateByteLength,
} from "@allot/core";

/**
 * The allocator `Buffer` and `Storage` use when given none: one fresh
 * `ArrayBuffer` per allocation (zero-filled, freed by the garbage collector
 * once released); the deleter only counts live bytes. Use `@allot/cpu`'s
 * `CpuAllocator` to pool host memory.
 *
 * @example
 * ```ts
 * import { ArrayBufferAllocator, Buffer } from "@allot/storage";
 * import assert from "node:assert/strict";
 *
 * const allocator = new ArrayBufferAllocator();
 * {
 *   using b = Buffer.zeros("f32", [4], { allocator });
 *   assert.equal(allocator.liveBytes, 16);
 *   assert.deepEqual([...b.toData()], [0, 0, 0, 0]);
 * }
 * assert.equal(allocator.liveBytes, 0);
 * ```
 */
export class ArrayBufferAllocator
  extends AllocatorBase<ArrayBuffer, ArrayBuffer> {
  /** The CPU device. */
  readonly device: Device = Device.cpu();
  /** Bytes handed out and not yet freed. */
  liveBytes = 0;

  /**
   * Allocates a fresh `ArrayBuffer` of `byteLength` bytes (zero-filled by the
   * runtime).
   *
   * @param byteLength Number of bytes.
   * @returns An owning pointer.
   */
  allocate(byteLength: number): DataPtr<ArrayBuffer, ArrayBuffer> {
    validateByteLength(byteLength);
    let memory: ArrayBuffer;
    try {
      memory = new ArrayBuffer(byteLength);
    } catch (error) {
      throw new OutOfMemoryError(
        `Cannot allocate ${byteLength} bytes: the runtime refused an ArrayBuffer of that size (${
          error instanceof Error ? error.message : String(error)
        })`,
        { requestedBytes: byteLength },
      );
    }
    this.liveBytes += byteLength;
    return new DataPtr(memory, 0, byteLength, this.device, {
      context: memory,
      deleter: (m) => {
        this.liveBytes -= m.byteLength;
      },
    });
  }

  /**
   * Names the allocator for logs and errors.
   *
   * @returns `ArrayBufferAllocator(cpu:0, N live bytes)`.
   */
  override toString(): string {
    return `ArrayBufferAllocator(${this.device}, ${this.liveBytes} live bytes)`;
  }
}

/** The shared default allocator. */
export const _defaultAllocator: ArrayBufferAllocator =
  new ArrayBufferAllocator();
