/**
 * Internal: the watermark allocator's reports: {@linkcode _watermarkStats}
 * (its own figures, MPS's vocabulary) and {@linkcode _watermarkSegments}
 * (heaps as snapshot segments, with buffer ids, shapes and free ranges).
 *
 * @module
 */

import { segmentTotals } from "@allot/core";
import type { _WatermarkPolicy } from "./_watermark_policy.ts";
import type {
  WatermarkBlockSnapshot,
  WatermarkSegmentSnapshot,
} from "./watermark_snapshot.ts";
import type { WatermarkStats } from "./watermark_stats.ts";

/** The allocator's figures now, as plain data. */
export function _watermarkStats<M>(p: _WatermarkPolicy<M>): WatermarkStats {
  let cached = 0, pending = 0;
  for (const pool of p.poolList) {
    cached += pool.availableBytes;
    for (const b of pool.pendingFree) pending += b.byteLength;
  }
  return {
    allocatedBytes: p.stats.figure("activeBytes").all,
    requestedBytes: p.stats.figure("requestedBytes").all,
    reservedBytes: p.stats.figure("reservedBytes").all,
    heaps: p.stats.figure("segment").all,
    cachedBytes: cached,
    pendingFreeBytes: pending,
    driverAllocatedBytes: p.driverAllocatedBytes,
    recommendedMaxBytes: p.recommended,
    highWatermarkRatio: p.highRatio,
    lowWatermarkRatio: p.lowRatio,
    highWatermarkLimit: p.highLimit,
    lowWatermarkLimit: p.lowLimit,
    lowWatermarkValue: p.lowWatermarkValue,
    numAllocations: p.numAllocations,
    numRecycles: p.numRecycles,
    numReleases: p.numReleases,
    numGarbageCollections: p.numGc,
    numGarbageCollected: p.numGcReleased,
    numAllocationFailures: p.stats.numOoms,
  };
}
/**
 * Every heap as a snapshot segment in address order: its buffers and free
 * ranges, tiling it.
 */
export function _watermarkSegments<M>(
  p: _WatermarkPolicy<M>,
): WatermarkSegmentSnapshot[] {
  const segments: WatermarkSegmentSnapshot[] = [];
  for (const pool of p.poolList) {
    for (const heap of pool.heaps) {
      const blocks: WatermarkBlockSnapshot[] = [];
      for (const b of heap.blocks) {
        const state = b.state === "active"
          ? "active_allocated"
          : b.state === "pending-free"
          ? "active_pending_free"
          : "inactive";
        blocks.push({
          address: heap.address + b.offset,
          offset: b.offset,
          byteLength: b.byteLength,
          requestedByteLength: b.state === "cached" ? 0 : b.requestedByteLength,
          state,
          bufferId: b.id,
          cached: b.state === "cached",
          shape: [...b.shape],
        });
      }
      for (const r of heap.freeRanges()) {
        blocks.push({
          address: heap.address + r.offset,
          offset: r.offset,
          byteLength: r.byteLength,
          requestedByteLength: 0,
          state: "inactive",
          bufferId: 0,
          cached: false,
          shape: [],
        });
      }
      blocks.sort((a, b) => a.offset - b.offset);
      segments.push({
        id: heap.id,
        address: heap.address,
        byteLength: heap.byteLength,
        stream: 0,
        pool: pool.small ? "small" : "large",
        ...segmentTotals(blocks),
        memoryByteOffset: heap.segment.byteOffset,
        blocks,
        kind: pool.kind,
        split: heap.isSplit,
      });
    }
  }
  segments.sort((a, b) => a.address - b.address);
  return segments;
}
