/**
 * Internal: the watermark policy's heaps: a new heap for a request (of the
 * size class it belongs to, or of exactly the request when the class size
 * would break the high watermark or the device refuses it), and an empty
 * heap given back to the device.
 *
 * @module
 */

import {
  acquireSegment,
  alignUp,
  formatBytes,
  releaseSegment,
  type Segment,
  SegmentSourceError,
} from "@allot/core";
import { _Heap } from "./_heap.ts";
import type { _Pool } from "./_pool.ts";
import type { _Params, _WatermarkPolicy } from "./_watermark_policy.ts";
import { DebugVerbosity } from "./debug_verbosity.ts";

/**
 * How much of the bytes the allocator holds a new heap of a class is: a
 * workload that holds `held` bytes of heaps gets a heap of `held / 8` to
 * `held / 4` (a power of two), so a small workload holds little and heap
 * sizes grow geometrically with what is held, up to the class's size.
 * (4 held 1.80x the peak live bytes on the recorded traces, geometric mean,
 * with 402 heaps; 8 held 1.51x with 613 heaps; 16, 1.47x with 821.)
 */
export const _HEAP_GROWTH_DIVISOR = 8;

/**
 * The size of a new heap of a class whose heaps are `min` to `max` bytes
 * while the allocator holds `held` bytes of heaps: the power of two at or
 * above `held / _HEAP_GROWTH_DIVISOR`, clamped to `[min, max]`.
 */
export function _adaptiveHeapSize(
  held: number,
  min: number,
  max: number,
): number {
  if (min >= max) return max;
  const share = held / _HEAP_GROWTH_DIVISOR;
  if (share <= min) return min;
  if (share >= max) return max;
  return Math.min(max, 2 ** Math.ceil(Math.log2(share)));
}

/**
 * A new heap for the request: small, large, extra-large or its own
 * size; a heap of exactly the request when that one breaks the high
 * watermark or the device refuses it.
 */
export function _createHeap<M>(
  p: _WatermarkPolicy<M>,
  params: _Params<M>,
): _Heap<M> | undefined {
  const size = params.size;
  const maxSegment = p.maxSegment;
  let heapSize: number;
  let isSplit = true;
  const held = p.stats.reservedBytes;
  let xlarge: number;
  if (size <= p.maxSmall) {
    heapSize = _adaptiveHeapSize(held, p.minSmallHeap, p.smallHeap);
  } else if (size < p.minLarge) {
    heapSize = _adaptiveHeapSize(held, p.minLargeHeap, p.largeHeap);
  } else if (
    size < (xlarge = _adaptiveHeapSize(held, p.minXlargeHeap, p.xlargeHeap)) /
        2 &&
    !params.pressure &&
    p.driverAllocatedBytes + xlarge < p.lowLimit
  ) {
    heapSize = xlarge;
  } else {
    heapSize = alignUp(size, p.roundLarge);
    isSplit = false;
  }
  heapSize = Math.max(
    size,
    Math.min(alignUp(heapSize, p.alignment), maxSegment),
  );
  const candidates: [number, boolean][] = [[heapSize, isSplit]];
  if (heapSize > size) candidates.push([size, false]);
  const driver = p.driverAllocatedBytes;
  const pool = params.pool;
  for (const [byteLength, split] of candidates) {
    if (driver + byteLength > p.highLimit) continue;
    const segment = acquireSegment(p.source, byteLength, size, {
      hostVisible: pool.hostVisible,
      label: `allot watermark ${pool.name} heap`,
    });
    if (segment === undefined) continue;
    _checkNoOverlap(p, segment, size);
    const heap = new _Heap(segment, pool, split, p.nextAddress);
    p.nextAddress += byteLength;
    if (p.history !== null) {
      p.record("segment_alloc", heap.address, byteLength, 0);
    }
    pool.heaps.add(heap);
    p.stats.reserved(pool.small, 1, byteLength);
    p.stats.numDeviceAlloc++;
    if (!split) p.stats.oversizeSegment(1);
    if (p.events.verbosity !== 0) {
      p.events.log(
        DebugVerbosity.allocations,
        pool,
        () =>
          `Allocated ${pool.name} heap #${heap.id} of size ${
            formatBytes(byteLength)
          } (#heaps: ${pool.heaps.size}, driver allocated: ${
            formatBytes(p.driverAllocatedBytes)
          })`,
      );
    }
    return heap;
  }
  return undefined;
}

/**
 * Refuses a segment over memory a heap holds (a source that handed the same
 * memory out twice: buffers of both heaps would overlap). It is not given
 * back: that would give back the memory of the heap that holds it.
 */
function _checkNoOverlap<M>(
  p: _WatermarkPolicy<M>,
  segment: Segment<M>,
  size: number,
): void {
  const { memory, byteOffset } = segment;
  const end = byteOffset + segment.byteLength;
  for (const pool of p.poolList) {
    for (const heap of pool.heaps) {
      const held = heap.segment;
      if (
        held.memory === memory && byteOffset < held.byteOffset +
            held.byteLength &&
        held.byteOffset < end
      ) {
        throw new SegmentSourceError(
          `Cannot allocate ${size} bytes: the segment source of ${p.source.device} returned a segment (bytes ${byteOffset} to ${end}) that overlaps heap #${heap.id} (bytes ${held.byteOffset} to ${
            held.byteOffset + held.byteLength
          } of the same memory)`,
        );
      }
    }
  }
}

/** Returns an empty heap to the device. */
export function _releaseHeap<M>(
  p: _WatermarkPolicy<M>,
  heap: _Heap<M>,
): void {
  // A callback may have released it already, re-entering the allocator.
  if (!heap.pool.heaps.has(heap)) return;
  // Forgotten first: a source whose freeSegment re-enters the allocator
  // (emptyCache, allocate) must not see the heap, or free or carve it again;
  // one whose freeSegment threw is never handed the heap a second time.
  _forgetHeap(p, heap);
  releaseSegment(
    p.source,
    heap.segment,
    `heap #${heap.id} of ${heap.byteLength} bytes`,
  );
}

function _forgetHeap<M>(p: _WatermarkPolicy<M>, heap: _Heap<M>): void {
  heap.pool.heaps.delete(heap);
  p.stats.unreserved(heap.pool.small, 1, heap.byteLength);
  p.stats.numDeviceFree++;
  if (!heap.isSplit) p.stats.oversizeSegment(-1);
  if (p.history !== null) {
    p.record("segment_free", heap.address, heap.byteLength, 0);
  }
  if (p.events.verbosity !== 0) {
    p.events.log(
      DebugVerbosity.releases,
      heap.pool,
      () =>
        `Released heap #${heap.id} of size ${
          formatBytes(heap.byteLength)
        } (driver allocated: ${formatBytes(p.driverAllocatedBytes)})`,
    );
  }
}
