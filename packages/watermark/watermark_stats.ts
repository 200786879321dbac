/**
 * {@linkcode WatermarkStats}: the figures of `WatermarkAllocator.stats()`.
 *
 * @module
 */

import type { StatValues } from "@allot/core";

/** The figures of `WatermarkAllocator.stats()`. All sizes are bytes. */
export interface WatermarkStats {
  /** Bytes of buffers in use, after alignment ("current allocated"). */
  allocatedBytes: StatValues;
  /** Bytes of buffers in use, as requested. */
  requestedBytes: StatValues;
  /** Bytes of heaps ("total allocated"; reserved from the device). */
  reservedBytes: StatValues;
  /** Number of heaps. */
  heaps: StatValues;
  /** Bytes of cached (idle, reusable) buffers. */
  cachedBytes: number;
  /** Bytes of freed buffers waiting for their work to complete. */
  pendingFreeBytes: number;
  /** Bytes the device reports for this process (see options). */
  driverAllocatedBytes: number;
  /** The recommended maximum working-set size. */
  recommendedMaxBytes: number;
  /** High watermark ratio (0: no limit). */
  highWatermarkRatio: number;
  /** Low watermark ratio (0: no garbage collection). */
  lowWatermarkRatio: number;
  /** Hard limit on driver bytes (`Infinity` when disabled). */
  highWatermarkLimit: number;
  /** Soft limit on driver bytes (`Infinity` when disabled). */
  lowWatermarkLimit: number;
  /** Bytes left below the low limit (0 under pressure). */
  lowWatermarkValue: number;
  /** New buffers made in heaps. */
  numAllocations: number;
  /** Cached buffers handed out again. */
  numRecycles: number;
  /** Cached buffers given back to their heaps. */
  numReleases: number;
  /** Garbage-collection passes under memory pressure. */
  numGarbageCollections: number;
  /** Buffers released by garbage collection. */
  numGarbageCollected: number;
  /** Requests that ran out of memory (thrown or `undefined`). */
  numAllocationFailures: number;
}
