/**
 * The shape of {@linkcode WatermarkAllocator.snapshot}: the snapshot format
 * of `@allot/caching` (PyTorch's `torch.cuda.memory._snapshot()`), so the
 * same tools read both allocators, plus the watermark allocator's facts:
 * pool kind, heap kind, buffer ids, cached buffers, shapes and stats.
 *
 * A heap is a segment. Its blocks tile it: buffers in use
 * (`active_allocated`), buffers freed while their work runs
 * (`active_pending_free`), and `inactive` ranges, which are either cached
 * buffers (`bufferId` set, `cached: true`) or free heap space
 * (`bufferId: 0`).
 *
 * @module
 */

import type {
  BlockSnapshot,
  MemorySnapshot,
  SegmentSnapshot,
} from "@allot/core";
import type { PoolKind } from "./watermark_buffer.ts";
import type { WatermarkStats } from "./watermark_stats.ts";

/** One range of a heap. */
export interface WatermarkBlockSnapshot extends BlockSnapshot {
  /** Buffer id; 0 for free heap space. */
  bufferId: number;
  /** Whether the range is a cached (idle, reusable) buffer. */
  cached: boolean;
  /** The buffer's shape (empty unless set). */
  shape: number[];
}

/** One heap. */
export interface WatermarkSegmentSnapshot extends SegmentSnapshot {
  /** Pool kind of the heap. */
  kind: PoolKind;
  /** Whether the heap was made to hold several buffers. */
  split: boolean;
  /** Buffers and free ranges, by offset; they tile the heap. */
  blocks: WatermarkBlockSnapshot[];
}

/** A snapshot of a {@linkcode WatermarkAllocator}. */
export interface WatermarkSnapshot extends MemorySnapshot {
  /** Every heap, in address order. */
  segments: WatermarkSegmentSnapshot[];
  /** The stats when the snapshot was taken. */
  stats: WatermarkStats;
}
