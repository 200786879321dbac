/**
 * Internal: {@linkcode _validateCaching}, the caching policy's invariant
 * check (what `CachingAllocator.validate()` and strict mode run).
 *
 * @module
 */

import { AllotError, StatRecount } from "@allot/core";
import { type _Block, ALLOCATED, FREE } from "./_block_pool.ts";
import type { _CachingPolicy } from "./_caching_policy.ts";

/**
 * Checks every internal invariant: blocks tile their segments, no two free
 * neighbours, the pools hold exactly the free blocks in order, pending
 * blocks wait, and every stat equals a recount.
 *
 * @throws {AllotError} Naming the first broken invariant.
 */
export function _validateCaching<M>(p: _CachingPolicy<M>): void {
  const fail = (what: string): never => {
    throw new AllotError(`${p.label} is inconsistent: ${what}`);
  };
  const c = new StatRecount();
  let freeSmall = 0, freeLarge = 0, pending = 0;
  const pendingSet = new Set<_Block<unknown>>();
  p.deferred.forEach((b) => pendingSet.add(b));
  for (const seg of p.segments) {
    const small = seg.small;
    const pool = p.poolOf(seg);
    c.segment(small, seg.byteLength);
    if (seg.byteLength >= p.maxSplitByteLength) c.oversizeSegments++;
    if (seg.head.prev !== null) fail(`segment ${seg.id} head has a prev`);
    let offset = 0;
    const split = seg.head.next !== null;
    for (let b: _Block<M> | null = seg.head; b !== null; b = b.next) {
      if (b.segment !== seg) {
        fail(`block at ${b.address} names another segment`);
      }
      if (b.offset !== offset) {
        fail(`segment ${seg.id} has a gap or overlap at ${offset}`);
      }
      if (b.address !== seg.address + b.offset) {
        fail(`bad address ${b.address}`);
      }
      if (b.size <= 0 || b.size % p.minBlockByteLength !== 0) {
        fail(
          `block size ${b.size} is not a positive multiple of the granule`,
        );
      }
      if (b.streamId !== seg.stream.id) {
        fail(`block stream differs from segment`);
      }
      if (b.next !== null && b.next.prev !== b) fail(`broken links`);
      offset += b.size;
      if (b.state === FREE) {
        if (b.next !== null && b.next.state === FREE) {
          fail(`two free neighbours at ${b.address}`);
        }
        if (!pool.has(b)) fail(`free block ${b.address} not in pool`);
        if (seg.small) freeSmall++;
        else freeLarge++;
        if (split) c.inactiveSplitBlock(small, b.size);
      } else if (b.state === ALLOCATED) {
        c.allocatedBlock(small, b.size, b.requested);
        if (b.size >= p.maxSplitByteLength) c.oversizeAllocations++;
      } else {
        if (!pendingSet.has(b)) fail(`pending block not in pending list`);
        if (b.waitingFences <= 0) fail(`pending block waits for no fence`);
        pending++;
        c.activeBlock(small, b.size, b.requested);
      }
    }
    if (offset !== seg.byteLength) {
      fail(`segment ${seg.id} blocks do not tile it`);
    }
  }
  if (freeSmall !== p.small.count) fail(`small pool size`);
  if (freeLarge !== p.large.count + p.own.count) {
    fail(`large pool size`);
  }
  if (pending !== p.deferred.count || pending !== pendingSet.size) {
    fail(`pending list size`);
  }
  for (const pool of p.pools()) {
    const bs = pool.all();
    if (bs.length !== pool.count) fail(`pool count`);
    for (let i = 1; i < bs.length; i++) {
      const a = bs[i - 1], b = bs[i];
      const ordered = a.streamId < b.streamId ||
        (a.streamId === b.streamId &&
          (a.size < b.size || (a.size === b.size && a.address < b.address)));
      if (!ordered) fail(`pool out of order at ${i}`);
    }
    for (const b of bs) {
      if (b.state !== FREE || !p.segments.has(b.segment)) {
        fail(`pool holds a non-free block`);
      }
      if (b.segment.small !== pool.small) fail(`block in the wrong pool`);
    }
  }
  p.stats.verify(c, p.label);
}
