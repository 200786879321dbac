/**
 * The allocator contract run against the pools: caching, step-planned,
 * watermark, and storage's buffer pool.
 *
 * @module
 */

import { conformance } from "./_contract.ts";
import {
  bufferPool,
  cachingAllocator,
  managedBufferPool,
  ownershipRegistry,
  stepPlannedPool,
  watermarkAllocator,
} from "./_pool_subjects.ts";

conformance("CachingAllocator", cachingAllocator);
conformance("StepPlannedPool", stepPlannedPool);
conformance("WatermarkAllocator", watermarkAllocator);
conformance("BufferPool", bufferPool);
conformance("OwnershipRegistry", ownershipRegistry);
conformance("ManagedBufferPool", managedBufferPool);
