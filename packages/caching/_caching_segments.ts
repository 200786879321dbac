/**
 * Internal: the caching policy's segments: taking one from the source
 * (of which size, with a smaller one when the device is too full), giving a
 * whole free one back, and expandable segments (PyTorch's
 * `expandable_segments`, in spirit): where the source can resize segments
 * in place, each pool keeps one segment per stream that grows at its end
 * ({@linkcode _growBlock}) instead of taking new segments; `emptyCache()`
 * and a full device give free tails back ({@linkcode _shrinkSegment}).
 *
 * @module
 */

import {
  acquireSegment,
  releaseSegment,
  resizeSegment,
  type Segment,
  type SegmentSource,
  SegmentSourceError,
  type Stream,
} from "@allot/core";
import { type _Block, type _BlockPool, _Segment, FREE } from "./_block_pool.ts";
import type { _CachingPolicy } from "./_caching_policy.ts";

/**
 * A free block of at least `size` bytes in a new segment (or, with
 * expandable segments, in the stream's grown segment), or `undefined` when
 * the device or the memory fraction refuses. A segment of the pool's size
 * is tried first, then a tighter one (PyTorch fails there; on small devices
 * this keeps large requests possible). `isRetry` counts the attempt in
 * `numAllocRetries`.
 */
export function _allocSegmentBlock<M>(
  p: _CachingPolicy<M>,
  pool: _BlockPool<M>,
  size: number,
  stream: Stream,
  isRetry: boolean,
): _Block<M> | undefined {
  if (isRetry) p.stats.numAllocRetries++;
  if (
    p.expandable && (pool.small || size < p.ownSegmentMinByteLength)
  ) {
    if (pool.small || !p.pressured) {
      return _growBlock(p, pool, size, stream);
    }
    const own = p.getFreeBlock(p.own, stream.id, size);
    if (own !== undefined) return own;
    pool = p.own;
  }
  let full = p.expandable
    ? Math.ceil(size / p.minBlockByteLength) * p.minBlockByteLength
    : _segmentSizeFor(p, pool, size);
  // Requests seen growing by a steady step: room for the next one.
  if (p.room > 0 && full < size + p.room && !p.expandable) {
    full = Math.min(size + p.room, p.maxBlockByteLength);
  }
  const allowed = p.allowedBytes;
  const reserved = p.stats.reservedBytes;
  let raw = undefined;
  let segSize = full;
  if (reserved + full <= allowed) raw = _trySegment(p, full, size, pool);
  if (raw === undefined && full > size) {
    // A device too small or too full for a whole segment: take just enough.
    // (PyTorch fails here; on small devices this keeps large requests
    // possible.)
    const granule = pool.small ? p.minBlockByteLength : p.largeRoundByteLength;
    let tight = Math.ceil(size / granule) * granule;
    if (tight > full) tight = full;
    if (tight < full && reserved + tight <= allowed) {
      segSize = tight;
      raw = _trySegment(p, tight, size, pool);
    }
    if (raw === undefined && tight !== size && reserved + size <= allowed) {
      segSize = size;
      raw = _trySegment(p, size, size, pool);
    }
  }
  if (raw === undefined) return undefined;
  return _addSegment(p, raw, segSize, pool, stream, false);
}

/**
 * While segment sizes adapt, a large-pool request of more than this share of
 * the adaptive segment size gets a segment of its own size.
 */
export const OWN_SEGMENT_SHARES = 3;
/**
 * While segment sizes adapt, a small-pool request that would leave a tail
 * under this share of the adaptive segment size gets a segment of its own
 * size.
 */
export const SMALL_TAIL_SHARES = 8;

/**
 * A whole free segment of the other pool moves to a miss's pool only when at
 * most this many times the request (see {@linkcode _movedSegmentBlock}).
 */
export const MOVE_SHARES = 2;

/** The segment size of `pool` for a request of `size` bytes. */
export function _segmentSizeFor<M>(
  p: _CachingPolicy<M>,
  pool: _BlockPool<M>,
  size: number,
): number {
  let s = pool.small
    ? p.smallSegmentByteLength
    : size < p.ownSegmentMinByteLength
    ? p.largeSegmentByteLength
    : Math.ceil(size / p.largeRoundByteLength) * p.largeRoundByteLength;
  if (p.segmentGrowth > 0 && (pool.small || size < p.ownSegmentMinByteLength)) {
    // Adaptive: a share of what is reserved, between the smallest segment
    // and the pool's fixed size.
    const g = p.minBlockByteLength;
    const share = Math.ceil(p.stats.reservedBytes * p.segmentGrowth / g) * g;
    const adaptive = Math.max(p.minSegmentByteLength, share);
    if (adaptive < s) {
      // A segment of the request's own size where the adaptive size would
      // leave a tail that is seldom used: in the large pool, room for fewer
      // than two more requests of its size (PyTorch gives requests of half a
      // segment or more their own, at adaptive sizes; layer after layer of
      // slowly growing weights leaves tails just short of the next one); in
      // the small pool, whose tails serve any small request, a tail under
      // an eighth of the segment.
      s = (pool.small
          ? (adaptive - size) * SMALL_TAIL_SHARES < adaptive
          : adaptive < OWN_SEGMENT_SHARES * size)
        ? size
        : adaptive;
    }
  }
  if (p.segmentGrowth > 0 && p.stats.reservedBytes === p.stats.activeBytes) {
    // Nothing held is free: the program is growing into new memory. A
    // segment of just the request holds no byte that is not live, as an
    // exact-size pool would (TF.js's, onnxruntime's); a larger one leaves a
    // tail that later requests may never fit. The adaptive size applies once
    // something held is free, where a tail can take requests that the free
    // blocks do not fit. See `bench/held_breakdown.ts`.
    s = size;
  }
  if (s > p.maxBlockByteLength) s = p.maxBlockByteLength;
  return s < size ? size : s;
}

/** A new segment's one free block, in the pool; stats and history. */
export function _addSegment<M>(
  p: _CachingPolicy<M>,
  raw: Segment<M>,
  segSize: number,
  pool: _BlockPool<M>,
  stream: Stream,
  expandable: boolean,
): _Block<M> {
  const seg = new _Segment<M>(
    p.nextSegmentId++,
    p.nextAddress,
    raw,
    segSize,
    pool.small,
    stream,
    expandable,
  );
  // An expandable segment keeps the address range it may grow into.
  p.nextAddress += expandable ? p.maxBlockByteLength : segSize;
  p.segments.add(seg);
  const b = p.newBlock(seg);
  b.offset = 0;
  b.address = seg.address;
  b.size = segSize;
  b.streamId = stream.id;
  b.state = FREE;
  b.requested = 0;
  b.prev = b.next = null;
  b.stamp = p.clock;
  seg.head = b;
  pool.insert(b); // take() carves it from the pool like a cached one
  p.stats.reserved(pool.small, 1, segSize);
  if (segSize >= p.maxSplitByteLength) p.stats.oversizeSegment(1);
  p.stats.numDeviceAlloc++;
  if (p.history !== null) {
    p.record("segment_alloc", seg.address, segSize, 0, stream.id);
  }
  return b;
}

/**
 * Asks the source for a segment labelled with the allocator's label, the
 * pool and the `withTag()` scope it is made in (GPU buffers carry it, so a
 * device error names them).
 */
export function _trySegment<M>(
  p: _CachingPolicy<M>,
  segSize: number,
  size: number,
  pool: _BlockPool<M>,
): ReturnType<SegmentSource<M>["tryAllocateSegment"]> {
  const where = pool.small ? "small pool" : "large pool";
  const tag = p.tag === undefined ? "" : `, tag ${p.tag}`;
  p.segmentOptions.label = `${p.label} ${where}${tag}`;
  const raw = acquireSegment(p.source, segSize, size, p.segmentOptions);
  if (raw !== undefined) _checkNoOverlap(p, raw, segSize, size);
  return raw;
}

/**
 * Refuses a new segment over memory a live segment holds (a source that
 * handed the same memory out twice: blocks of both would overlap). It is not
 * given back: that would give back the live segment's memory. One pass over
 * the segments, on a miss only.
 */
function _checkNoOverlap<M>(
  p: _CachingPolicy<M>,
  raw: Segment<M>,
  segSize: number,
  size: number,
): void {
  const start = raw.byteOffset, end = start + segSize;
  for (const seg of p.segments) {
    const held = seg.raw;
    if (
      held.memory === raw.memory && start < held.byteOffset + seg.byteLength &&
      held.byteOffset < end
    ) {
      throw new SegmentSourceError(
        `Cannot allocate ${size} bytes: the segment source of ${p.source.device} returned a segment (bytes ${start} to ${end}) that overlaps segment ${seg.id} (bytes ${held.byteOffset} to ${
          held.byteOffset + seg.byteLength
        } of the same memory)`,
      );
    }
  }
}

/**
 * Returns a whole free segment (in its pool) to the device. Returns false,
 * doing nothing, when `b` is no longer a whole free segment of `p`: a
 * source's `freeSegment()` may re-enter the allocator while a caller walks a
 * list of candidates, and take one.
 */
export function _releaseSegment<M>(
  p: _CachingPolicy<M>,
  b: _Block<M>,
): boolean {
  const seg = b.segment;
  if (
    b.state !== FREE || b.prev !== null || b.next !== null ||
    seg.head !== b || !p.segments.has(seg)
  ) return false;
  const pool = p.poolOf(seg);
  pool.remove(b);
  p.segments.delete(seg);
  p.foreign.delete(seg);
  if (seg.expandable) {
    const growing = p.growing[seg.small ? 0 : 1];
    if (growing.get(seg.stream.id) === seg) growing.delete(seg.stream.id);
  }
  p.stats.unreserved(seg.small, 1, seg.byteLength);
  if (seg.byteLength >= p.maxSplitByteLength) {
    p.stats.oversizeSegment(-1);
  }
  p.stats.numDeviceFree++;
  if (p.history !== null) {
    p.record(
      "segment_free",
      seg.address,
      seg.byteLength,
      0,
      seg.stream.id,
    );
  }
  p.recycle(b);
  releaseSegment(
    p.source,
    seg.raw,
    `segment ${seg.id} of ${seg.byteLength} bytes`,
  );
  return true;
}

/**
 * Expandable segments: a free block of at least `size` bytes at the end of
 * the stream's segment of `pool`, grown in place (its free tail extended,
 * or a new tail), or a new expandable segment when there is none.
 */
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
        raw = _trySegment(p, segSize, size, pool);
      }
      if (raw === undefined && segSize > size && reserved + size <= allowed) {
        segSize = size;
        raw = _trySegment(p, size, size, pool);
      }
    } finally {
      p.segmentOptions.resizable = undefined;
    }
    if (raw === undefined) return undefined;
    const b = _addSegment(p, raw, segSize, pool, stream, true);
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

/**
 * A whole free segment of the other pool (small or large), of at least
 * `size` bytes and at most `MOVE_SHARES` times `size`, on `stream`, moved
 * into `pool` (its one free block), or `undefined`: the smallest such
 * segment. No device buffer is made or given back.
 *
 * The caller ({@linkcode _CachingPolicy.allocSlow}) moves only where a new
 * segment would raise the most bytes held after any miss, once misses have
 * cycled. A program whose phases want their blocks in different pools
 * otherwise holds both pools' segments at once: EfficientNet at 128 x 128
 * then 96 x 96 (the recorded `efficientnet-multires` trace) kept 384 KiB
 * large-pool segments free through the 96 x 96 pass while its 216 KiB
 * requests took new small-pool segments, and warm passes held 1.19 x peak
 * live (1.066 x now). A segment more than twice the request is left alone:
 * the small pool would split its rest among other small requests and pin it
 * there while its own pool wants it back (ResNet var-batch, up to 4 x:
 * 1.071 -> 1.093 warm).
 *
 * At a low, or with nothing active (`homeOnly`), where the held peak gives
 * whole free segments back, only a segment moved out of `pool` before (in
 * `p.foreign`) comes home. Moving nothing there, a pool whose segments had
 * moved out made new ones at a low and gave its own back, and the held
 * bytes ratcheted up (two phases of 150 KiB and 257 KiB blocks, nothing
 * live between: 2 segments made a cycle from the 5th to the 10th, 5.8 MiB
 * held, where without moves 5.2 MiB and none after the 4th; now 4.4 MiB and
 * none after the 3rd); moving any segment there, EfficientNet's first pass
 * held 1.100 x.
 *
 * Oversize and expandable segments stay in their pools. The pools' stats
 * see the segment leave one pool and enter the other.
 */
export function _movedSegmentBlock<M>(
  p: _CachingPolicy<M>,
  pool: _BlockPool<M>,
  size: number,
  stream: Stream,
  homeOnly: boolean,
): _Block<M> | undefined {
  if (p.expandable) return undefined;
  let best: _Block<M> | undefined;
  for (const seg of p.segments) {
    const b = seg.head;
    if (
      seg.small !== pool.small && b.state === FREE && b.next === null &&
      b.size >= size && b.size <= MOVE_SHARES * size &&
      b.size < p.maxSplitByteLength &&
      seg.stream.id === stream.id && (!homeOnly || p.foreign.has(seg)) &&
      (best === undefined || b.size < best.size)
    ) best = b;
  }
  if (best === undefined) return undefined;
  const seg = best.segment;
  const moved = new _Segment<M>(
    seg.id,
    seg.address,
    seg.raw,
    seg.byteLength,
    pool.small,
    seg.stream,
    false,
  );
  p.poolOf(seg).remove(best);
  p.segments.delete(seg);
  p.segments.add(moved);
  // Two pools: a foreign segment that moves goes home.
  if (!p.foreign.delete(seg)) p.foreign.add(moved);
  moved.head = best;
  best.segment = moved;
  best.stamp = p.clock;
  pool.insert(best);
  p.stats.unreserved(seg.small, 1, seg.byteLength);
  p.stats.reserved(pool.small, 1, seg.byteLength);
  return best;
}
