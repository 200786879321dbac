/**
 * The allocator used when a caller gives none: one `ArrayBuffer` per
 * allocation, nothing shared. Internal; `@allot/cpu` has the real ones.
 *
 * @module
 */

import {
  AllocatorBase,
  DataPtr,
  Device,
  validateByteLength,
} from "@allot/core";

/** One `ArrayBuffer` per allocation; the deleter only counts. */
export class _ArrayBufferAllocator
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
    const memory = new ArrayBuffer(byteLength);
    this.liveBytes += byteLength;
    return new DataPtr(memory, 0, byteLength, this.device, {
      context: memory,
      deleter: (m) => {
        this.liveBytes -= m.byteLength;
      },
    });
  }
}

/** The shared default allocator. */
export const _defaultAllocator: _ArrayBufferAllocator =
  new _ArrayBufferAllocator();
