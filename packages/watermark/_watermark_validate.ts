/**
 * Internal: {@linkcode _validateWatermark}, the watermark policy's
 * invariant check (what `WatermarkAllocator.validate()` and strict mode
 * run).
 *
 * @module
 */

import { AllotError, describeValue, StatRecount } from "@allot/core";
import type { _Block } from "./_block.ts";
import type { _Handle } from "./_handle.ts";
import type { _WatermarkPolicy } from "./_watermark_policy.ts";

/**
 * Checks every internal invariant: each heap belongs to its pool and is
 * tiled exactly by its buffers and its free ranges (sorted, merged, no
 * overlap), each buffer's state matches where it is listed (live handles,
 * pending frees, cached buckets), and every stat equals a recount.
 *
 * @throws {AllotError} Naming the first broken invariant.
 */
export function _validateWatermark<M>(p: _WatermarkPolicy<M>): void {
  const fail = (what: string): never => {
    throw new AllotError(`WatermarkAllocator is inconsistent: ${what}`);
  };
  const deferred = new Set<_Block<unknown>>();
  p.deferred.forEach((b) => deferred.add(b));
  const c = new StatRecount();
  let pending = 0, live = 0;
  for (const pool of p.poolList) {
    let poolBytes = 0, cachedBytes = 0, cachedCount = 0;
    for (const heap of pool.heaps) {
      const h = `heap #${heap.id} (${pool.name})`;
      if (heap.pool !== pool) fail(`${h} is listed in another pool`);
      const n = heap.byteLength;
      if (!Number.isSafeInteger(n) || n <= 0) {
        fail(`${h} has byteLength ${describeValue(n)}`);
      }
      c.segment(pool.small, n);
      if (!heap.isSplit) c.oversizeSegments++;
      const ranges: [number, number, string][] = [];
      let largest = 0, prevEnd = -1;
      for (const r of heap.freeRanges()) {
        if (!(r.byteLength > 0)) fail(`${h} has an empty free range`);
        if (r.offset <= prevEnd) {
          fail(
            `${h} has free ranges out of order or unmerged at ${r.offset}`,
          );
        }
        prevEnd = r.offset + r.byteLength;
        largest = Math.max(largest, r.byteLength);
        ranges.push([r.offset, r.byteLength, "free range"]);
      }
      if (largest !== heap.largestFree) {
        fail(
          `${h} says its largest free range is ${heap.largestFree}, counted ${largest}`,
        );
      }
      for (const b of heap.blocks) {
        const what = `buffer #${b.id} in ${h}`;
        if (b.heap !== heap) fail(`${what} names another heap`);
        ranges.push([b.offset, b.byteLength, `buffer #${b.id}`]);
        poolBytes += b.byteLength;
        if (b.offset % p.alignment !== 0) {
          fail(`${what} is at unaligned offset ${b.offset}`);
        }
        const small = pool.small;
        if (b.state === "active") {
          const handle = b.handle as _Handle<M> | undefined;
          if (handle === undefined || p.live.get(handle) !== b) {
            fail(`${what} is active but has no live handle`);
          }
          live++;
          c.allocatedBlock(small, b.byteLength, b.requestedByteLength);
          if (!heap.isSplit) c.oversizeAllocations++;
        } else if (b.state === "pending-free") {
          if (!pool.pendingFree.has(b) || !deferred.has(b)) {
            fail(`${what} is pending free but not waiting`);
          }
          pending++;
          c.activeBlock(small, b.byteLength, b.requestedByteLength);
        } else if (b.state === "cached") {
          if (b.availableIndex < 0) fail(`${what} is cached but not listed`);
          cachedBytes += b.byteLength;
          cachedCount++;
          if (heap.isSplit) c.inactiveSplitBlock(small, b.byteLength);
        } else fail(`${what} is ${b.state} but still in its heap`);
        if (b.state !== "cached" && b.availableIndex !== -1) {
          fail(`${what} is listed as cached`);
        }
      }
      ranges.sort((a, b) => a[0] - b[0]);
      let end = 0;
      for (const [offset, byteLength, what] of ranges) {
        if (offset !== end) {
          fail(
            `${h}: ${what} at ${offset} ${
              offset < end ? "overlaps" : "leaves a gap after"
            } byte ${end}`,
          );
        }
        end = offset + byteLength;
      }
      if (end !== n) fail(`${h} of ${n} bytes is tiled up to byte ${end}`);
    }
    for (const b of pool.pendingFree) {
      if (
        b.state !== "pending-free" || !b.heap.blocks.has(b) ||
        b.heap.pool !== pool
      ) {
        fail(`buffer #${b.id} waits in ${pool.name} but is ${b.state}`);
      }
    }
    for (const b of pool.availableList()) {
      if (
        b.state !== "cached" || b.heap.pool !== pool ||
        !pool.heaps.has(b.heap)
      ) {
        fail(
          `buffer #${b.id} is listed as cached in ${pool.name} but is ${b.state}`,
        );
      }
    }
    if (poolBytes !== pool.allocatedBytes) {
      fail(
        `${pool.name} pool says ${pool.allocatedBytes} bytes in buffers, counted ${poolBytes}`,
      );
    }
    if (
      cachedBytes !== pool.availableBytes ||
      cachedCount !== pool.availableCount
    ) {
      fail(
        `${pool.name} pool says ${pool.availableCount} cached buffers of ${pool.availableBytes} bytes, counted ${cachedCount} of ${cachedBytes}`,
      );
    }
  }
  if (live !== p.live.size) {
    fail(`${p.live.size} live handles for ${live} active buffers`);
  }
  if (pending !== p.pendingCount) {
    fail(`pending count ${p.pendingCount}, counted ${pending}`);
  }
  p.stats.verify(c, "WatermarkAllocator");
}
