/**
 * The shape of {@linkcode WatermarkAllocator.snapshot}: every heap (segment)
 * with its buffers and free ranges.
 *
 * @module
 */

import type { PoolKind } from "./watermark_buffer.ts";
import type { WatermarkStats } from "./watermark_allocator.ts";

/**
 * State of a range in a heap: `active` (in use), `pending-free` (freed,
 * recorded work still running), `cached` (idle, reusable), `free` (no buffer).
 */
export type WatermarkBlockState = "active" | "pending-free" | "cached" | "free";

/** One range of a heap. */
export interface WatermarkBlockSnapshot {
  /** Buffer id; 0 for a free range. */
  id: number;
  /** Byte offset inside the heap. */
  byteOffset: number;
  /** Bytes of the range. */
  byteLength: number;
  /** Bytes the user asked for (0 unless active). */
  requestedByteLength: number;
  /** The range's state. */
  state: WatermarkBlockState;
  /** The buffer's shape (empty unless set). */
  shape: number[];
}

/** One heap. */
export interface WatermarkSegmentSnapshot {
  /** Heap id. */
  id: number;
  /** Pool of the heap. */
  pool: PoolKind;
  /** Whether the heap is in a small pool. */
  small: boolean;
  /** Whether the heap was made to hold several buffers. */
  split: boolean;
  /** Bytes of the heap. */
  byteLength: number;
  /** Buffers and free ranges, by offset; they tile the heap. */
  blocks: WatermarkBlockSnapshot[];
}

/** A snapshot of a {@linkcode WatermarkAllocator}. */
export interface WatermarkSnapshot {
  /** The device, as text. */
  device: string;
  /** Every heap, by id. */
  segments: WatermarkSegmentSnapshot[];
  /** The stats when the snapshot was taken. */
  stats: WatermarkStats;
}
