/**
 * Outside-in checks of `CachingAllocator` against fences that call back into
 * it: a `completed` getter (read while the allocator polls its pending frees)
 * that allocates, frees, synchronizes or empties the cache. No recursion
 * without end, no block reused before its fence completes, stats that add up
 * (`validate()`), and every pending block back in the pool once the fence is
 * done. The suite is shared with `WatermarkAllocator`
 * (`../core/_test_reentrant_fences.ts`).
 */
import assert from "node:assert/strict";
import { MockSegmentSource } from "@allot/core";
import { CachingAllocator } from "./mod.ts";
import { describeReentrantFences } from "../core/_test_reentrant_fences.ts";

describeReentrantFences({
  name: "CachingAllocator",
  make: () => new CachingAllocator(new MockSegmentSource()),
  allocate: (allocator, n) => allocator.allocate(n),
  record: (allocator, b, stream) => allocator.recordStream(b, stream),
  placeOf: (b) => `${b.address}`,
  assertPending: (allocator, blocks, message) =>
    assert.equal(allocator.pendingFreeCount, blocks, message),
  allocatedBytes: (allocator) => allocator.allocatedBytes,
  reservedBytes: (allocator) => allocator.reservedBytes,
});
