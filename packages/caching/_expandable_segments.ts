/**
 * Internal: expandable segments (PyTorch's `expandable_segments`, in
 * spirit) for the caching policy. Where the source can resize segments in
 * place, each pool keeps one segment per stream that grows at its end
 * ({@linkcode _growBlock}) instead of taking new segments; `emptyCache()`
 * and a full device give free tails back ({@linkcode _shrinkSegment}).
 *
 * @module
 */

import { resizeSegment, type Segment, type Stream } from "@allot/core";
import {
  type _Block,
  type _BlockPool,
  type _Segment,
  FREE,
} from "./_block_pool.ts";
import type { _CachingPolicy } from "./_caching_policy.ts";

export function _growBlock<M>(
  p: _CachingPolicy<M>,
  pool: _BlockPool<M>,
  size: number,
  stream: Stream,
): _Block<M> | undefined {
  const growing = p.growing[pool.small ? 0 : 1];
  const seg = growing.get(stream.id);
  const allowed = p.allowedBytes;
  const reserved = p.stats.reservedBytes;
  // Grow in steps of a small segment or of the large rounding, down to the
  // block granule when the device is that full.
  const step = pool.small ? p.smallSegmentByteLength : p.largeRoundByteLength;
  if (seg === undefined) {
    let raw: Segment<M> | undefined;
    let segSize = Math.min(
      Math.ceil(size / step) * step,
      p.maxBlockByteLength,
    );
    p.segmentOptions.resizable = true;
    try {
      if (reserved + segSize <= allowed) {
        raw = p.trySegment(segSize, size, pool);
      }
      if (raw === undefined && segSize > size && reserved + size <= allowed) {
        segSize = size;
        raw = p.trySegment(size, size, pool);
      }
    } finally {
      p.segmentOptions.resizable = undefined;
    }
    if (raw === undefined) return undefined;
    const b = p.addSegment(raw, segSize, pool, stream, true);
    growing.set(stream.id, b.segment);
    return b;
  }
  let tail = seg.head;
  while (tail.next !== null) tail = tail.next;
  const need = tail.state === FREE ? size - tail.size : size;
  const room = p.maxBlockByteLength - seg.byteLength;
  if (need > room) return undefined;
  let grow = Math.min(Math.ceil(need / step) * step, room);
  let raw: Segment<M> | undefined;
  if (reserved + grow <= allowed) {
    raw = resizeSegment(p.source, seg.raw, seg.byteLength + grow, size);
  }
  if (raw === undefined && grow > need && reserved + need <= allowed) {
    grow = need;
    raw = resizeSegment(p.source, seg.raw, seg.byteLength + grow, size);
  }
  if (raw === undefined) return undefined;
  const at = seg.byteLength;
  seg.raw = raw;
  seg.byteLength += grow;
  let b: _Block<M>;
  if (tail.state === FREE) {
    b = tail;
    pool.resize(b, b.size + grow, b.address);
    if (b.prev !== null) {
      p.stats.split(pool.small, 0, grow);
    }
  } else {
    b = p.newBlock(seg);
    b.offset = at;
    b.address = seg.address + at;
    b.size = grow;
    b.streamId = stream.id;
    b.state = FREE;
    b.requested = 0;
    b.prev = tail;
    b.next = null;
    tail.next = b;
    pool.insert(b);
    p.stats.split(pool.small, 1, grow);
  }
  b.stamp = p.clock;
  p.stats.reserved(pool.small, 0, grow);
  if (p.history !== null) {
    p.record("segment_map", seg.address + at, grow, 0, stream.id);
  }
  return b;
}

/** Gives the free tail of expandable segment `seg` back to the device. */
export function _shrinkSegment<M>(
  p: _CachingPolicy<M>,
  seg: _Segment<M>,
): void {
  let tail = seg.head;
  while (tail.next !== null) tail = tail.next;
  if (tail.state !== FREE || tail.prev === null) return;
  const raw = resizeSegment(
    p.source,
    seg.raw,
    seg.byteLength - tail.size,
    0,
  );
  if (raw === undefined) return;
  const pool = p.poolOf(seg);
  const bytes = tail.size;
  pool.remove(tail);
  tail.prev.next = null;
  seg.raw = raw;
  seg.byteLength -= bytes;
  p.stats.splitTaken(seg.small, bytes, 1);
  p.stats.unreserved(seg.small, 0, bytes);
  if (p.history !== null) {
    p.record("segment_unmap", tail.address, bytes, 0, seg.stream.id);
  }
  p.recycle(tail);
}
