/**
 * Test-only: a `BuddyAllocator` of one 4 KiB pool of 16-byte units (256
 * units, orders 0 to 8) and the model's view of it, shared by the tests that
 * drive many splits and merges through small pools.
 *
 * Not exported from `mod.ts`; excluded from publish (`**\/_test_*.ts`).
 *
 * @module
 */

import { BuddyAllocator } from "./buddy_allocator.ts";

/** The smallest block, in bytes. */
export const MIN = 16;
/** The one pool's bytes: 256 units, orders 0 to 8. */
export const POOL = 4096;

/**
 * A buddy allocator that never takes a second pool.
 *
 * @param quickListLength The option of that name (default: the allocator's).
 * @returns The allocator.
 */
export function onePool(quickListLength?: number): BuddyAllocator {
  return new BuddyAllocator({
    initialPoolByteLength: POOL,
    maxPoolByteLength: POOL,
    minBlockByteLength: MIN,
    quickListLength,
  });
}

/**
 * The largest free block eager merging leaves beside the live blocks of one
 * pool (byte offset, length): the largest aligned power-of-two block that
 * holds no live byte.
 *
 * @param live The live blocks.
 * @returns Its byte length, 0 when none.
 */
export function largestFree(live: { start: number; length: number }[]): number {
  for (let length = POOL; length >= MIN; length /= 2) {
    for (let start = 0; start < POOL; start += length) {
      if (
        live.every((b) =>
          b.start + b.length <= start || start + length <= b.start
        )
      ) {
        return length;
      }
    }
  }
  return 0;
}
