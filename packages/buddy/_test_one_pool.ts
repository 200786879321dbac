/**
 * Test-only: a `BuddyAllocator` of one 4 KiB pool of 16-byte units (256
 * units, orders 0 to 8) and the model's view of it, shared by the tests that
 * drive many splits and merges through small pools.
 *
 * Not exported from `mod.ts`; excluded from publish (`**\/_test_*.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
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

/** A live block of the model: its address, first byte and length. */
export interface LiveBlock {
  /** What `alloc()` returned. */
  address: number;
  /** Byte offset in its pool. */
  start: number;
  /** Block length (a power of two). */
  length: number;
}

/**
 * The model's live blocks of one allocator, each filled with its own tag
 * byte: {@linkcode LiveBlocks.add} checks a block just handed out (long
 * enough, aligned to its length, overlapping no live block: never a block
 * already live, such as a stale free-list entry popped as free),
 * {@linkcode LiveBlocks.remove} checks a block's bytes before it frees it.
 */
export class LiveBlocks {
  /** The live blocks, oldest first. */
  readonly live: LiveBlock[] = [];
  #tags = new Map<number, number>();
  #tag = 1;

  /**
   * Tracks the live blocks of `buddy`.
   *
   * @param buddy The allocator.
   */
  constructor(readonly buddy: BuddyAllocator) {}

  /**
   * Checks and fills the block `alloc(byteLength)` returned.
   *
   * @param address The block.
   * @param byteLength The bytes asked for.
   * @returns The block's length.
   */
  add(address: number, byteLength: number): number {
    const { buddy } = this;
    const length = buddy.byteLengthOf(address);
    const start = buddy.byteOffsetOf(address);
    assert.ok(length >= byteLength && length >= MIN);
    assert.equal(start % length, 0);
    for (const b of this.live) {
      assert.ok(
        b.start + b.length <= start || start + length <= b.start,
        `block ${start}+${length} overlaps ${b.start}+${b.length}`,
      );
    }
    const t = this.#tag++ & 255 || 1;
    buddy.bytes(address, length).fill(t);
    this.#tags.set(address, t);
    this.live.push({ address, start, length });
    return length;
  }

  /**
   * Takes out live block `pick` (modulo their count), checks that its bytes
   * are its tag and frees it.
   *
   * @param pick Which block.
   * @returns The block freed.
   */
  remove(pick: number): LiveBlock {
    const [b] = this.live.splice(pick % this.live.length, 1);
    const t = this.#tags.get(b.address)!;
    assert.ok(this.buddy.bytes(b.address, b.length).every((x) => x === t));
    this.buddy.free(b.address);
    return b;
  }
}
