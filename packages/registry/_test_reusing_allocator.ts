/**
 * A test allocator that hands the most recently freed block out again first,
 * like a real heap, so tests can reuse a place on purpose. Test-only.
 *
 * @module
 */

import { AllocatorBase, DataPtr, Device } from "@allot/core";

/** Hands out 64-byte blocks of one `ArrayBuffer`, last freed first. */
export class ReusingAllocator extends AllocatorBase<ArrayBuffer, number> {
  /** The CPU device. */
  readonly device: Device = Device.cpu();
  /** The memory every block lives in. */
  readonly memory: ArrayBuffer = new ArrayBuffer(1 << 12);
  /** Byte offsets of the live blocks. */
  readonly live: Set<number> = new Set<number>();
  #next = 0;
  #free: number[] = [];

  /**
   * A block of at most 64 bytes.
   *
   * @param byteLength Bytes, at most 64.
   * @returns The block; releasing it twice throws.
   */
  allocate(byteLength: number): DataPtr<ArrayBuffer, number> {
    if (byteLength > 64) throw new Error(`test blocks are 64 bytes at most`);
    const offset = this.#free.pop() ?? this.#next;
    if (offset === this.#next) this.#next += 64;
    this.live.add(offset);
    return new DataPtr(this.memory, offset, byteLength, this.device, {
      context: offset,
      deleter: (ctx) => {
        if (!this.live.delete(ctx)) throw new Error(`double free of ${ctx}`);
        this.#free.push(ctx);
      },
    });
  }
}
