/**
 * {@linkcode segmentTotals} and {@linkcode finishSnapshot}: the parts of
 * `snapshot()` that every pooling allocator shares (a segment's byte totals
 * from its blocks; the history marker, history and dropped count).
 *
 * @module
 */

import {
  type BlockSnapshot,
  type MemorySnapshot,
  type SegmentSnapshot,
  SNAPSHOT_FORMAT_VERSION,
  TraceRecorder,
} from "./memory_snapshot.ts";
import { InvalidArgumentError } from "./errors.ts";
import { describeValue } from "./validate.ts";

/** The byte totals of a {@linkcode SegmentSnapshot}. */
export interface SegmentTotals {
  /** Bytes of `active_allocated` blocks. */
  allocatedBytes: number;
  /** Bytes of `active_allocated` and `active_pending_free` blocks. */
  activeBytes: number;
  /** Requested bytes of active blocks. */
  requestedBytes: number;
}

/**
 * A segment's byte totals, summed from its blocks.
 *
 * @param blocks The segment's blocks.
 * @returns Allocated, active and requested bytes.
 *
 * @example
 * ```ts
 * import { segmentTotals } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(segmentTotals([
 *   { address: 0, offset: 0, byteLength: 512, requestedByteLength: 500, state: "active_allocated" },
 *   { address: 512, offset: 512, byteLength: 512, requestedByteLength: 0, state: "inactive" },
 * ]), { allocatedBytes: 512, activeBytes: 512, requestedBytes: 500 });
 * ```
 */
export function segmentTotals(blocks: readonly BlockSnapshot[]): SegmentTotals {
  if (!Array.isArray(blocks)) {
    throw new InvalidArgumentError(
      `Cannot total a segment: blocks must be an array, received ${
        describeValue(blocks)
      }`,
      { name: "blocks", value: blocks, limit: "an array" },
    );
  }
  let allocatedBytes = 0, activeBytes = 0, requestedBytes = 0;
  for (const b of blocks) {
    if (b.state === "inactive") continue;
    if (b.state === "active_allocated") allocatedBytes += b.byteLength;
    activeBytes += b.byteLength;
    requestedBytes += b.requestedByteLength;
  }
  return { allocatedBytes, activeBytes, requestedBytes };
}

/**
 * A whole snapshot from an allocator's segments: records the `snapshot`
 * marker in the history (as PyTorch does when a snapshot is taken, with the
 * bytes reserved), then adds the history and the count of dropped events.
 *
 * @typeParam S The segment type (an allocator may add fields).
 * @param device The device, such as `webgpu:0`.
 * @param allocator The allocator's label.
 * @param segments The segments in address order.
 * @param history The history recorder, or `null` when not recording.
 * @returns The snapshot.
 * @throws {InvalidArgumentError} When `segments` is not an array or `history`
 * neither a {@linkcode TraceRecorder} nor `null`; nothing is recorded.
 *
 * @example
 * ```ts
 * import { finishSnapshot, TraceRecorder } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const history = new TraceRecorder();
 * const snapshot = finishSnapshot("cpu:0", "mine", [], history);
 * assert.deepEqual(snapshot.history.map((e) => e.action), ["snapshot"]);
 * ```
 */
export function finishSnapshot<S extends SegmentSnapshot>(
  device: string,
  allocator: string,
  segments: S[],
  history: TraceRecorder | null,
): MemorySnapshot & { segments: S[] } {
  if (!Array.isArray(segments)) {
    throw new InvalidArgumentError(
      `Cannot finish a snapshot: segments must be an array, received ${
        describeValue(segments)
      }`,
      { name: "segments", value: segments, limit: "an array" },
    );
  }
  if (history !== null && !(history instanceof TraceRecorder)) {
    throw new InvalidArgumentError(
      `Cannot finish a snapshot: history must be a TraceRecorder or null, received ${
        describeValue(history)
      }`,
      { name: "history", value: history, limit: "TraceRecorder or null" },
    );
  }
  let reserved = 0;
  for (const seg of segments) reserved += seg.byteLength;
  history?.record("snapshot", 0, reserved, 0, 0);
  const snapshot: MemorySnapshot & { segments: S[] } = {
    version: SNAPSHOT_FORMAT_VERSION,
    device,
    allocator,
    segments,
    history: history?.entries() ?? [],
  };
  const dropped = history?.droppedEntries ?? 0;
  if (dropped > 0) snapshot.droppedEntries = dropped;
  return snapshot;
}
