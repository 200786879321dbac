// CachingGroup: the held bound shared by the caching allocators of one
// device, outside in: what a member's miss gives back, the back-off, and
// hostile members, groups and sources.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  Device,
  InvalidArgumentError,
  type MockMemory,
  MockSegmentSource,
  type Segment,
} from "@allot/core";
import { type CachedBlock, CachingAllocator } from "./caching_allocator.ts";
import { CachingGroup } from "./caching_group.ts";

const KiB = 1024, MiB = 2 ** 20;

type Memory = MockMemory;

/**
 * Makes `a`'s misses cycle (a miss at a low after a peak): two 1 MiB
 * blocks, freed, the cache emptied, then a 64 KiB block (kept, returned).
 */
function cycle(a: CachingAllocator<Memory>): CachedBlock<Memory> {
  const x = a.allocate(MiB), y = a.allocate(MiB);
  a.free(x);
  a.free(y);
  a.emptyCache();
  return a.allocate(64 * KiB);
}

/** A group of two: `storage` cycled, `uploads` holding a free 4 MiB segment. */
function twoPools(uploadSource = new MockSegmentSource()) {
  const group = new CachingGroup();
  const storageSource = new MockSegmentSource();
  const storage = new CachingAllocator(storageSource, { group });
  const uploads = new CachingAllocator(uploadSource, { group });
  const small = cycle(storage);
  uploads.free(uploads.allocate(4 * MiB));
  return { group, storage, storageSource, uploads, uploadSource, small };
}

describe("CachingGroup", () => {
  it("CachingGroup counts its members' held bytes and their peak after misses", () => {
    const group = new CachingGroup();
    assert.equal(group.size, 0);
    assert.equal(group.heldBytes, 0);
    const s1 = new MockSegmentSource(), s2 = new MockSegmentSource();
    const a = new CachingAllocator(s1, { group });
    const b = new CachingAllocator(s2, { group });
    assert.equal(group.size, 2);
    assert.ok(group.has(a) && group.has(b));
    assert.ok(!group.has(new CachingAllocator(new MockSegmentSource())));
    const x = a.allocate(100 * KiB), y = b.allocate(3 * MiB);
    assert.equal(group.heldBytes, s1.reservedBytes + s2.reservedBytes);
    assert.equal(group.peakHeldBytes, group.heldBytes);
    a.free(x);
    b.free(y);
    a.emptyCache();
    assert.equal(group.heldBytes, s2.reservedBytes);
    assert.ok(group.peakHeldBytes > group.heldBytes);
    group.resetPeak();
    assert.equal(group.peakHeldBytes, group.heldBytes);
  });

  it("A small member whose misses cycle does not take a much larger active member's segments, only once that one holds nothing", () => {
    const group = new CachingGroup();
    const storage = new CachingAllocator(new MockSegmentSource(), { group });
    const uploads = new CachingAllocator(new MockSegmentSource(), { group });
    // the upload pool's misses cycle: a peak, then a miss at a low
    const x = uploads.allocate(64 * KiB), y = uploads.allocate(64 * KiB);
    uploads.free(x);
    uploads.free(y);
    uploads.emptyCache();
    const u = uploads.allocate(4 * KiB);
    // storage holds 8 MiB live and a whole free 1 MiB segment
    const a = storage.allocate(8 * MiB);
    storage.free(storage.allocate(MiB));
    const cached = storage.memoryStats().reservedBytes.all.current;
    assert.ok(cached >= 9 * MiB);
    // an upload above the group's peak: storage is active and holds more
    // than 8 times the upload pool with it, so its segment stays
    const v = uploads.allocate(256 * KiB);
    assert.equal(group.givenBackSegments, 0);
    assert.equal(storage.memoryStats().reservedBytes.all.current, cached);
    assert.ok(group.heldBytes > group.peakHeldBytes - 256 * KiB);
    // once storage holds nothing, the next upload above the peak takes it
    storage.free(a);
    const w = uploads.allocate(
      group.peakHeldBytes - group.heldBytes + 64 * KiB,
    );
    assert.equal(group.givenBackSegments, 1);
    assert.ok(storage.memoryStats().reservedBytes.all.current < cached);
    storage.validate();
    uploads.validate();
    for (const b of [u, v, w]) uploads.free(b);
    storage.emptyCache();
    uploads.emptyCache();
    assert.equal(group.heldBytes, 0);
  });

  it("A member's miss above the group's peak gives back a sibling's whole free segment", () => {
    const { group, storage, storageSource, uploads, uploadSource, small } =
      twoPools();
    const peak = group.peakHeldBytes;
    assert.ok(uploadSource.reservedBytes >= 4 * MiB);
    // storage grows past what the group ever held: the idle upload segment
    // goes first
    const big = storage.allocate(peak);
    assert.equal(uploadSource.reservedBytes, 0);
    assert.equal(group.givenBackSegments, 1);
    assert.equal(group.givenBackBytes, 4 * MiB);
    assert.equal(group.heldBytes, storageSource.reservedBytes);
    assert.ok(group.heldBytes <= Math.max(peak, storageSource.reservedBytes));
    uploads.validate();
    storage.validate();
    assert.equal(uploads.memoryStats().reservedBytes.all.current, 0);
    storage.free(big);
    storage.free(small);
  });

  it("A miss within the peak gives nothing back", () => {
    const group = new CachingGroup();
    const storage = new CachingAllocator(new MockSegmentSource(), { group });
    const uploadSource = new MockSegmentSource();
    const uploads = new CachingAllocator(uploadSource, { group });
    const small = cycle(storage);
    const wide = storage.allocate(2 * MiB); // live while the uploads peak
    uploads.free(uploads.allocate(4 * MiB));
    storage.free(wide);
    storage.emptyCache();
    const x = storage.allocate(MiB); // held still under the peak
    assert.equal(uploadSource.reservedBytes, 4 * MiB);
    assert.equal(group.givenBackSegments, 0);
    assert.ok(group.heldBytes <= group.peakHeldBytes);
    storage.free(x);
    storage.free(small);
  });

  it("A member whose given-back segment was wanted again is not asked again (back-off)", () => {
    const { group, storage, uploads, uploadSource, small } = twoPools();
    const big = storage.allocate(group.peakHeldBytes);
    assert.equal(group.givenBackSegments, 1);
    // the uploads want their 4 MiB again: regretted, made again
    const u = uploads.allocate(4 * MiB);
    assert.ok(uploadSource.reservedBytes >= 4 * MiB);
    uploads.free(u);
    storage.free(big);
    storage.emptyCache();
    storage.free(small);
    // storage cycles and grows again: the uploads keep their segment
    const s2 = cycle(storage);
    const held = uploadSource.reservedBytes;
    const big2 = storage.allocate(group.peakHeldBytes);
    assert.equal(uploadSource.reservedBytes, held);
    assert.equal(group.givenBackSegments, 1);
    storage.free(big2);
    storage.free(s2);
  });

  it("A member's first miss gives back nothing of a sibling used lately", () => {
    const group = new CachingGroup();
    const storage = new CachingAllocator(new MockSegmentSource(), { group });
    const uploadSource = new MockSegmentSource();
    const uploads = new CachingAllocator(uploadSource, { group });
    uploads.free(uploads.allocate(4 * MiB));
    const x = storage.allocate(8 * MiB); // a first miss: still growing
    assert.equal(uploadSource.reservedBytes, 4 * MiB);
    assert.equal(group.givenBackSegments, 0);
    storage.free(x);
  });

  it("Before its misses cycle, a growing member gives back only siblings idle for 32 of the group's misses", () => {
    const group = new CachingGroup();
    const storage = new CachingAllocator(new MockSegmentSource(), { group });
    const uploadSource = new MockSegmentSource();
    const uploads = new CachingAllocator(uploadSource, { group });
    uploads.free(uploads.allocate(4 * MiB)); // weights uploaded at load
    // a small upload stays live: the member holds something, so only the
    // idle rule (no requests) can ask it, not the one for members holding
    // nothing (caching_group_step_test.ts)
    const pinned = uploads.allocate(4 * KiB);
    const live: CachedBlock<Memory>[] = [];
    // storage grows, a miss each time (each 1 MiB block stays live)
    for (let i = 0; i < 30; i++) live.push(storage.allocate(MiB));
    const pinnedBytes = uploadSource.reservedBytes - 4 * MiB;
    assert.ok(pinnedBytes > 0 && pinnedBytes < MiB);
    assert.ok(
      uploadSource.reservedBytes >= 4 * MiB,
      "idle, but not long",
    );
    for (let i = 0; i < 10; i++) live.push(storage.allocate(MiB));
    assert.equal(uploadSource.reservedBytes, pinnedBytes);
    assert.equal(group.givenBackSegments, 1);
    assert.ok(group.heldBytes <= group.peakHeldBytes);
    // the uploads want it back: regretted, and not given back for being
    // idle again
    uploads.free(uploads.allocate(4 * MiB));
    for (let i = 0; i < 40; i++) live.push(storage.allocate(MiB));
    assert.equal(uploadSource.reservedBytes, pinnedBytes + 4 * MiB);
    uploads.free(pinned);
    for (const b of live) storage.free(b);
    storage.validate();
    uploads.validate();
  });

  it("CachingGroup.delete() takes a member out: not counted, not given back", () => {
    const { group, storage, uploads, uploadSource, small } = twoPools();
    assert.equal(group.delete(uploads), true);
    assert.equal(group.delete(uploads), false);
    assert.equal(group.delete({}), false);
    assert.equal(group.delete(null), false);
    assert.equal(group.size, 1);
    assert.ok(!group.has(uploads));
    assert.equal(
      group.heldBytes,
      storage.memoryStats().reservedBytes.all.current,
    );
    const big = storage.allocate(group.peakHeldBytes + MiB);
    assert.equal(uploadSource.reservedBytes, 4 * MiB);
    // the member left works alone
    uploads.free(uploads.allocate(MiB));
    uploads.validate();
    storage.free(big);
    storage.free(small);
  });
});

describe("CachingGroup, hostile", () => {
  it("A look-alike group is refused, and the allocator is not made", () => {
    const source = new MockSegmentSource();
    for (
      const bad of [
        {},
        Object.create(CachingGroup.prototype),
        new Proxy(new CachingGroup(), {}),
        1,
        "group",
        null,
      ]
    ) {
      assert.throws(
        () =>
          new CachingAllocator(source, {
            group: bad as unknown as CachingGroup,
          }),
        InvalidArgumentError,
      );
    }
    assert.equal(source.reservedBytes, 0);
    const fake = Object.create(CachingGroup.prototype) as CachingGroup;
    assert.throws(
      () => fake.heldBytes,
      (error: unknown) =>
        error instanceof InvalidArgumentError &&
        error.message.startsWith("Cannot use CachingGroup.heldBytes: `this`"),
    );
  });

  it("An allocator of another device is refused, and the group is unchanged", () => {
    const group = new CachingGroup();
    const a = new CachingAllocator(new MockSegmentSource(), { group });
    const other = new MockSegmentSource({ device: new Device("mock", 1) });
    assert.throws(
      () => new CachingAllocator(other, { group }),
      (e: unknown) =>
        e instanceof InvalidArgumentError && /mock:0/.test(e.message) &&
        /mock:1/.test(e.message),
    );
    assert.equal(group.size, 1);
    assert.ok(group.has(a));
    // an option getter is read once
    let reads = 0;
    const b = new CachingAllocator(new MockSegmentSource(), {
      get group() {
        reads++;
        return group;
      },
    });
    assert.equal(reads, 1);
    assert.ok(group.has(b));
  });

  it("A sibling whose source throws while giving back loses nothing and is not asked again", () => {
    let fail = false;
    class Throwing extends MockSegmentSource {
      override freeSegment(segment: Segment<Memory>): void {
        if (fail) throw new Error("device says no");
        super.freeSegment(segment);
      }
    }
    const uploadSource = new Throwing();
    const { group, storage, uploads, small } = twoPools(uploadSource);
    const live = uploads.allocate(64 * KiB); // a live upload block stays put
    fail = true;
    const want = group.peakHeldBytes + MiB;
    const big = storage.allocate(want);
    // the miss is served, both allocators are consistent
    assert.ok(big.byteLength >= want);
    storage.validate();
    uploads.validate();
    assert.equal(uploads.memoryStats().allocation.all.current, 1);
    assert.equal(group.givenBackSegments, 0);
    fail = false;
    uploads.free(live);
    storage.free(big);
    storage.free(small);
    storage.emptyCache();
    // the uploads are not asked again; their own verbs still work
    const s2 = cycle(storage);
    const before = uploads.memoryStats().reservedBytes.all.current;
    const big2 = storage.allocate(group.peakHeldBytes + MiB);
    assert.equal(uploads.memoryStats().reservedBytes.all.current, before);
    storage.free(big2);
    storage.free(s2);
    storage.emptyCache();
    uploads.emptyCache();
    assert.equal(uploads.memoryStats().reservedBytes.all.current, 0);
    assert.equal(storage.memoryStats().reservedBytes.all.current, 0);
  });

  it("A sibling's source that allocates from inside its freeSegment() is served without a nested give-back", () => {
    const into: { storage?: CachingAllocator<Memory> } = {};
    const nested: CachedBlock<Memory>[] = [];
    class Reentrant extends MockSegmentSource {
      override freeSegment(segment: Segment<Memory>): void {
        super.freeSegment(segment);
        if (into.storage !== undefined && nested.length === 0) {
          nested.push(into.storage.allocate(8 * MiB));
        }
      }
    }
    const { group, storage: s, uploads, small } = twoPools(new Reentrant());
    into.storage = s;
    const big = s.allocate(group.peakHeldBytes);
    assert.equal(nested.length, 1);
    s.validate();
    uploads.validate();
    assert.equal(group.givenBackSegments, 1);
    s.free(nested[0]);
    s.free(big);
    s.free(small);
    s.emptyCache();
    assert.equal(group.heldBytes, 0);
  });
});
