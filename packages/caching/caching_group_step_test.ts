// A member that holds nothing lately (a pool of staging copies or uniforms
// between its uses: after a whole step between CachingGroup.endStep() marks,
// or at 12 of the group's misses in a row) gives its whole free segments for
// another member's miss, outside in: not in its first step, not while it
// holds a block, not its tiny segments, and not again once such a give-back
// is regretted within a step (without step marks: only after a streak twice
// as long).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type MockMemory, MockSegmentSource } from "@allot/core";
import { type CachedBlock, CachingAllocator } from "./caching_allocator.ts";
import { CachingGroup } from "./caching_group.ts";

const KiB = 1024, MiB = 2 ** 20;

/**
 * A runtime's session: storage keeps its weights and grows a MiB per step;
 * uploads copies 4 MiB of weights in once, then 4 KiB per step.
 */
function session() {
  const group = new CachingGroup();
  const storageSource = new MockSegmentSource();
  const uploadSource = new MockSegmentSource();
  const storage = new CachingAllocator(storageSource, { group });
  const uploads = new CachingAllocator(uploadSource, { group });
  const kept: CachedBlock<MockMemory>[] = [storage.allocate(MiB)];
  uploads.free(uploads.allocate(4 * MiB));
  group.endStep(); // the session is made
  const step = (upload = true): void => {
    if (upload) uploads.free(uploads.allocate(4 * KiB));
    kept.push(storage.allocate(MiB));
  };
  /** Whether uploads still holds its 4 MiB segment. */
  const holdsWeights = (): boolean =>
    uploads.snapshot().segments.some((s) => s.byteLength >= 4 * MiB);
  const done = (): void => {
    for (const b of kept) storage.free(b);
    storage.emptyCache();
    uploads.emptyCache();
    assert.equal(storageSource.reservedBytes + uploadSource.reservedBytes, 0);
  };
  return { group, storage, uploads, uploadSource, step, holdsWeights, done };
}

describe("CachingGroup.endStep()", () => {
  it("CachingGroup.endStep(): a member holding nothing after a whole step gives its idle segment for another's miss", () => {
    const s = session();
    s.step(); // the first step: uploads has not yet held nothing through one
    assert.ok(s.holdsWeights());
    assert.equal(s.group.givenBackSegments, 0);
    s.group.endStep();
    s.step(); // storage's miss: the 4 MiB upload segment goes first
    assert.equal(s.group.givenBackSegments, 1);
    assert.equal(s.group.givenBackBytes, 4 * MiB);
    assert.ok(!s.holdsWeights());
    // its small segment stays: under a quarter of the excess
    assert.ok(s.uploadSource.reservedBytes > 0);
    assert.ok(s.group.heldBytes <= s.group.peakHeldBytes);
    s.storage.validate();
    s.uploads.validate();
    s.done();
  });

  it("CachingGroup without endStep(): a member that held nothing at 12 of the group's misses in a row gives back, and backs off at a regret", () => {
    const group = new CachingGroup();
    const storage = new CachingAllocator(new MockSegmentSource(), { group });
    const uploadSource = new MockSegmentSource();
    const uploads = new CachingAllocator(uploadSource, { group });
    const kept: CachedBlock<MockMemory>[] = [];
    /**
     * Uploads copies its 4 MiB of weights in (a miss of its own after a
     * give-back), then a 4 KiB input before each of storage's 1 MiB misses
     * (a hit: not idle, but it holds nothing at them); storage's misses
     * until the weights' segment goes.
     */
    const missesToGiveBack = (): number => {
      uploads.free(uploads.allocate(4 * MiB));
      let n = 0;
      while (uploadSource.reservedBytes >= 4 * MiB && n < 300) {
        uploads.free(uploads.allocate(4 * KiB));
        kept.push(storage.allocate(MiB));
        n++;
      }
      return n;
    };
    // 12 misses in a row holding nothing (uploads' own two counted)
    assert.equal(missesToGiveBack(), 10);
    assert.equal(group.givenBackSegments, 1);
    assert.equal(group.givenBackBytes, 4 * MiB);
    // wanted again with no step mark between: regretted, so the streak
    // starts again and must be twice as long, each time: a back-off, not a
    // ban (the weights of a session uploaded in bursts, then idle for good)
    assert.equal(missesToGiveBack(), 23);
    assert.equal(missesToGiveBack(), 47);
    assert.equal(missesToGiveBack(), 95);
    assert.equal(group.givenBackSegments, 4);
    for (const b of kept) storage.free(b);
    storage.validate();
    uploads.validate();
  });

  it("CachingGroup: a member holding a block between the misses starts its count again", () => {
    const group = new CachingGroup();
    const storage = new CachingAllocator(new MockSegmentSource(), { group });
    const uploadSource = new MockSegmentSource();
    const uploads = new CachingAllocator(uploadSource, { group });
    uploads.free(uploads.allocate(4 * MiB));
    const kept: CachedBlock<MockMemory>[] = [];
    for (let i = 0; i < 12; i++) {
      // an upload in flight at every fourth of storage's misses
      const b = i % 4 === 0 ? uploads.allocate(4 * KiB) : undefined;
      kept.push(storage.allocate(MiB));
      if (b !== undefined) uploads.free(b);
    }
    assert.ok(uploadSource.reservedBytes >= 4 * MiB);
    assert.equal(group.givenBackSegments, 0);
    for (const b of kept) storage.free(b);
  });

  it("CachingGroup.endStep(): a member holding a block is not asked", () => {
    const s = session();
    const held = s.uploads.allocate(4 * KiB); // kept across the marks
    s.step(false);
    s.group.endStep();
    s.step(false);
    s.group.endStep();
    s.step(false);
    assert.ok(s.holdsWeights());
    assert.equal(s.group.givenBackSegments, 0);
    s.uploads.free(held);
    s.step(false); // now it holds nothing: asked
    assert.ok(!s.holdsWeights());
    s.done();
  });

  it("CachingGroup.endStep(): a give-back wanted again within a step is regretted, and not repeated", () => {
    const s = session();
    s.step();
    s.group.endStep();
    s.step();
    assert.equal(s.group.givenBackSegments, 1);
    // the same step wants the weights' upload again: made again
    s.uploads.free(s.uploads.allocate(4 * MiB));
    s.group.endStep();
    s.step();
    s.group.endStep();
    s.step();
    // regretted: that member's segments no longer go for holding nothing
    assert.equal(s.group.givenBackSegments, 1);
    assert.ok(s.holdsWeights());
    s.done();
  });

  it("CachingGroup.endStep(): a segment wanted again only steps later is not regretted", () => {
    const s = session();
    s.step();
    s.group.endStep();
    s.step();
    assert.equal(s.group.givenBackSegments, 1);
    s.group.endStep();
    s.step();
    s.group.endStep();
    s.step();
    s.group.endStep();
    // two marks later: a new session's weights (holding it through the
    // steps between cost more than making it again)
    s.uploads.free(s.uploads.allocate(4 * MiB));
    s.group.endStep();
    s.step();
    assert.equal(s.group.givenBackSegments, 2);
    assert.ok(!s.holdsWeights());
    s.done();
  });

  it("CachingGroup.endStep(): segments under a quarter of the excess stay (a pool of small blocks is not shredded)", () => {
    const group = new CachingGroup();
    const storage = new CachingAllocator(new MockSegmentSource(), { group });
    const uniformSource = new MockSegmentSource();
    const uniforms = new CachingAllocator(uniformSource, {
      group,
      minSegmentByteLength: 512,
    });
    const kept = [storage.allocate(MiB)];
    // a few small segments, each its own block at once
    const blocks = Array.from({ length: 6 }, () => uniforms.allocate(512));
    for (const b of blocks) uniforms.free(b);
    const segments = uniformSource.liveSegmentCount;
    assert.ok(segments > 1);
    group.endStep();
    group.endStep();
    kept.push(storage.allocate(MiB)); // excess ~1 MiB: each is far under
    assert.equal(group.givenBackSegments, 0);
    assert.equal(uniformSource.liveSegmentCount, segments);
    for (const b of kept) storage.free(b);
  });

  it("CachingGroup.delete(): a member leaves with its marks; one that joins later waits for its own whole step", () => {
    const s = session();
    s.step();
    s.group.endStep();
    assert.ok(s.group.delete(s.uploads));
    s.step();
    assert.equal(s.group.givenBackSegments, 0);
    // a newcomer has seen no step: its idle segment stays for now
    const late = new CachingAllocator(new MockSegmentSource(), {
      group: s.group,
    });
    late.free(late.allocate(4 * MiB));
    s.step();
    assert.equal(s.group.givenBackSegments, 0);
    s.group.endStep();
    s.step();
    assert.equal(s.group.givenBackSegments, 0);
    s.group.endStep();
    s.step(); // two marks seen: its 4 MiB segment goes
    assert.equal(s.group.givenBackSegments, 1);
    assert.equal(late.stats().reservedBytes.all.current, 0);
    s.uploads.emptyCache();
    s.done();
  });
});
