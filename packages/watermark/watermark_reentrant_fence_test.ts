/**
 * Outside-in checks of `WatermarkAllocator` against fences that call back
 * into it: a `completed` getter (read while the allocator polls its pending
 * frees) that allocates, frees, synchronizes or empties the cache. No
 * recursion without end, no block reused before its fence completes, stats
 * that add up (`validate()`), and every pending block back in the pool once
 * the fence is done. The suite is shared with `CachingAllocator`
 * (`../core/_test_reentrant_fences.ts`).
 */
import assert from "node:assert/strict";
import { MockSegmentSource } from "@allot/core";
import { WatermarkAllocator } from "./mod.ts";
import { SMALL } from "./_test_options.ts";
import { describeReentrantFences } from "../core/_test_reentrant_fences.ts";

describeReentrantFences({
  name: "WatermarkAllocator",
  make: () =>
    new WatermarkAllocator(
      new MockSegmentSource({ capacityBytes: 1 << 30 }),
      SMALL,
    ),
  allocate: (allocator, n) => allocator.allocateBuffer(n),
  record: (allocator, b, stream) => allocator.recordEvents([b], stream),
  // places (heap, offset): two buffers at one place share memory
  placeOf: (b) => `${b.heapId}:${b.byteOffset}`,
  // the watermark allocator counts pending bytes, not buffers
  assertPending: (allocator, buffers, message) => {
    const bytes = allocator.stats().pendingFreeBytes;
    if (buffers === 0) assert.equal(bytes, 0, message);
    else assert.ok(bytes > 0, message);
  },
  allocatedBytes: (allocator) => allocator.stats().allocatedBytes.current,
  reservedBytes: (allocator) => allocator.stats().reservedBytes.current,
});
