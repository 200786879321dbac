/**
 * Internal: {@linkcode _throwCachingOom}, the caching policy's
 * out-of-memory error: PyTorch's message (what was asked, the device's
 * capacity and free bytes, what this allocator holds) with a hint at the
 * likely cause (fences, fragmentation).
 *
 * @module
 */

import { formatSize, type Stream } from "@allot/core";
import type { _CachingPolicy } from "./_caching_policy.ts";
import { CachingOutOfMemoryError } from "./errors.ts";

/**
 * Counts the out-of-memory event, records it in the history and throws.
 *
 * @throws {CachingOutOfMemoryError} Always.
 */
export function _throwCachingOom<M>(
  p: _CachingPolicy<M>,
  requested: number,
  size: number,
  stream: Stream,
  tag: string | undefined,
): never {
  p.stats.numOoms++;
  const source = p.source;
  const capacity = source.capacityBytes;
  const deviceReserved = (source as { reservedBytes?: unknown })
    .reservedBytes;
  const used = typeof deviceReserved === "number"
    ? deviceReserved
    : p.stats.reservedBytes;
  const free = Math.max(0, capacity - used);
  const allocated = p.stats.allocatedBytes;
  const reserved = p.stats.reservedBytes;
  const unallocated = reserved - allocated;
  let pendingBytes = 0;
  p.deferred.forEach((b) => {
    pendingBytes += b.size;
  });
  let largest = 0;
  for (const pool of p.pools()) {
    for (const b of pool.all()) if (b.size > largest) largest = b.size;
  }
  if (p.history !== null) {
    p.record("oom", free, size, requested, stream.id, tag);
  }
  const allowed = p.allowedBytes;
  let message = `Cannot allocate ${requested} bytes: tried to allocate ${
    formatSize(size)
  } on ${p.source.device}, which ${
    Number.isFinite(capacity)
      ? `has a total capacity of ${formatSize(capacity)} of which ${
        formatSize(free)
      } is free`
      : "reports no capacity limit but refused the segment"
  }`;
  if (p.fraction < 1) {
    message += `; this allocator may reserve ${
      formatSize(allowed)
    } (memory fraction ${p.fraction})`;
  }
  message += `; of the allocated memory ${
    formatSize(allocated)
  } is allocated by this allocator, and ${
    formatSize(unallocated)
  } is reserved by this allocator but unallocated`;
  if (pendingBytes > 0) {
    message += `; ${
      formatSize(pendingBytes)
    } is freed but waits for fences of other streams (await synchronize() or use allocateAsync())`;
  }
  // Pending blocks count as reserved but unallocated: the cache itself
  // holds only the rest.
  const cached = unallocated - pendingBytes;
  if (pendingBytes > 0 && cached < size) {
    message += cached + pendingBytes >= size
      ? `; the memory is only waiting on fences, not fragmented: it returns once that work completes`
      : "";
  } else if (cached >= size) {
    message +=
      `; reserved but unallocated memory is large, so fragmentation is the likely cause: free long-lived blocks early, call emptyCache(), or set maxSplitByteLength to keep large blocks whole`;
  }
  throw new CachingOutOfMemoryError(message, {
    requestedBytes: size,
    requestedByteLength: requested,
    capacityBytes: capacity,
    freeBytes: free,
    largestFreeBytes: largest,
    allocatedBytes: allocated,
    reservedBytes: reserved,
    allowedBytes: allowed,
    pendingFreeBytes: pendingBytes,
  });
}
