/**
 * Test-only: the watermark heap classes scaled down 1024×, shared by the
 * unit, model and adversarial tests.
 *
 * @module
 */

import type { WatermarkAllocatorOptions } from "./mod.ts";

const KiB = 1024;

/** 1 KiB small, 10 KiB large, 8/32/1024 KiB heaps, 2 KiB large rounding. */
export const SMALL: WatermarkAllocatorOptions = {
  maxSmallByteLength: KiB,
  minLargeByteLength: 10 * KiB,
  smallHeapByteLength: 8 * KiB,
  largeHeapByteLength: 32 * KiB,
  xlargeHeapByteLength: 1024 * KiB,
  largeRoundByteLength: 2 * KiB,
};
