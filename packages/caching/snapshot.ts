/**
 * The snapshot format of pooling allocators, re-exported from `@allot/core`
 * where it is defined once for every allocator.
 *
 * @module
 */

export {
  type BlockSnapshot,
  type BlockState,
  captureStack,
  type MemorySnapshot,
  type SegmentSnapshot,
  SNAPSHOT_FORMAT_VERSION,
  type TraceAction,
  type TraceEntry,
  TraceRecorder,
  type TraceRecorderOptions,
} from "@allot/core";
