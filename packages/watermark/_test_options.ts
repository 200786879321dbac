/**
 * Test-only: the watermark heap classes scaled down 1024×, shared by the
 * unit, model and adversarial tests.
 *
 * @module
 */

import type { WatermarkAllocatorOptions } from "./mod.ts";

const KiB = 1024;

/**
 * 1 KiB small, 10 KiB large, 8/32/1024 KiB heaps, 2 KiB large rounding;
 * heaps of a fixed size per class (the smallest heap of each class is its
 * largest), as in MPS.
 */
export const SMALL: WatermarkAllocatorOptions = {
  maxSmallByteLength: KiB,
  minLargeByteLength: 10 * KiB,
  smallHeapByteLength: 8 * KiB,
  largeHeapByteLength: 32 * KiB,
  xlargeHeapByteLength: 1024 * KiB,
  minSmallHeapByteLength: 8 * KiB,
  minLargeHeapByteLength: 32 * KiB,
  minXlargeHeapByteLength: 1024 * KiB,
  largeRoundByteLength: 2 * KiB,
};

/**
 * {@linkcode SMALL} with heaps that grow with the bytes held, from 512 B
 * small, 2 KiB large and 32 KiB extra-large heaps.
 */
export const SMALL_ADAPTIVE: WatermarkAllocatorOptions = {
  ...SMALL,
  minSmallHeapByteLength: 512,
  minLargeHeapByteLength: 2 * KiB,
  minXlargeHeapByteLength: 32 * KiB,
};
