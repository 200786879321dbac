import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  InvalidArgumentError,
  type MockMemory,
  MockSegmentSource,
} from "@allot/core";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";
import { StepPoolGroup } from "./step_pool_group.ts";
import { modelRuns } from "../core/_test_faults.ts";

const source = () => new MockSegmentSource({ alignment: 256 });

describe("StepPoolGroup", () => {
  it("an upload pool gives its idle arena back while storage grows", () => {
    const group = new StepPoolGroup();
    const upload = new StepPlannedPool(source(), { group });
    const storage = new StepPlannedPool(source(), { group });
    assert.equal(group.poolCount, 2);
    // one large upload at load, then small ones while weights pile up
    const weights: PlannedBlock<MockMemory>[] = [];
    upload.free(upload.allocate(4 << 20));
    weights.push(storage.allocate(1 << 20));
    group.endStep();
    for (let step = 0; step < 8; step++) {
      upload.free(upload.allocate(8192 * (step + 1)));
      weights.push(storage.allocate(1 << 20));
      group.endStep();
      assert.ok(
        group.reservedBytes <= 1.1 * group.peakRequestedBytes,
        `step ${step}: held ${group.reservedBytes}, peak live ${group.peakRequestedBytes}`,
      );
    }
    assert.ok(upload.reservedBytes < 1 << 20, `upload ${upload.reservedBytes}`);
    // alone, each pool keeps what its own peak allows
    const alone = new StepPlannedPool(source());
    alone.free(alone.allocate(4 << 20));
    alone.endStep();
    for (let step = 0; step < 8; step++) {
      alone.free(alone.allocate(8192 * (step + 1)));
      alone.endStep();
    }
    assert.ok(alone.reservedBytes >= 4 << 20);
    for (const w of weights) storage.free(w);
  });

  it("a pool that grows within a step takes other pools' idle segments first", () => {
    const group = new StepPoolGroup();
    const upload = new StepPlannedPool(source(), { group });
    const storage = new StepPlannedPool(source(), { group });
    const weights: PlannedBlock<MockMemory>[] = [];
    weights.push(storage.allocate(1 << 20));
    upload.free(upload.allocate(4 << 20));
    group.endStep();
    for (let step = 0; step < 3; step++) {
      upload.free(upload.allocate(8192));
      group.endStep();
    }
    // within bounds so far: nothing was given back
    assert.ok(upload.reservedBytes >= 4 << 20);
    for (let i = 0; i < 4; i++) {
      weights.push(storage.allocate(1 << 20));
      assert.ok(
        group.reservedBytes <= 1.1 * group.peakRequestedBytes,
        `held ${group.reservedBytes}, peak live ${group.peakRequestedBytes}`,
      );
    }
    for (const w of weights) storage.free(w);
  });

  it("an arena whose plan a step only started on goes back at the group's step end when another pool needs the bytes", () => {
    // (fast-check found it, seed 2056729839: each pool kept an arena of
    // the group's peak, 2.0 times it together; the arena of the pool whose
    // step took 256 bytes was kept for the plan its first request picked)
    const group = new StepPoolGroup();
    const a = new StepPlannedPool(source(), { group });
    const b = new StepPlannedPool(source(), { group });
    b.free(b.allocate(1));
    b.free(b.allocate(72193));
    group.endStep();
    b.free(b.allocate(1));
    a.free(a.allocate(72193));
    group.endStep();
    assert.ok(
      group.reservedBytes <= 1.1 * group.peakRequestedBytes,
      `held ${group.reservedBytes} for a peak of ${group.peakRequestedBytes}`,
    );
    a.validate();
    b.validate();
  });

  it("refuses a bad ratio and a group that is not one", () => {
    for (const maxHeldRatio of [0.5, NaN, Infinity, "2" as unknown as number]) {
      assert.throws(
        () => new StepPoolGroup({ maxHeldRatio }),
        InvalidArgumentError,
      );
      assert.throws(
        () => new StepPlannedPool(source(), { maxHeldRatio }),
        InvalidArgumentError,
      );
    }
    for (const options of [null, 7, "x"]) {
      assert.throws(
        () => new StepPoolGroup(options as unknown as { maxHeldRatio: number }),
        (e) => e instanceof InvalidArgumentError && /options/.test(e.message),
      );
    }
    assert.throws(
      () =>
        new StepPlannedPool(source(), {
          group: {} as unknown as StepPoolGroup,
        }),
      InvalidArgumentError,
    );
  });

  it("pools of a group (random steps): no overlap, live bytes add up, held within the bound at step ends", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.array(
            fc.record({
              pool: fc.nat(2),
              size: fc.integer({ min: 1, max: 1 << 18 }),
              keep: fc.boolean(),
            }),
            { maxLength: 10 },
          ),
          { minLength: 1, maxLength: 12 },
        ),
        (steps) => {
          const group = new StepPoolGroup();
          const sources = [source(), source(), source()];
          // Segment sizes by memory, to tell what live blocks pin.
          const segmentBytes = new Map<MockMemory, number>();
          for (const s of sources) {
            const take = s.tryAllocateSegment.bind(s);
            s.tryAllocateSegment = (size, options) => {
              const seg = take(size, options);
              if (seg !== undefined) {
                segmentBytes.set(seg.memory, seg.byteLength);
              }
              return seg;
            };
          }
          const pools = sources.map((s) => new StepPlannedPool(s, { group }));
          const kept: [
            StepPlannedPool<MockMemory>,
            PlannedBlock<MockMemory>,
          ][] = [];
          let live = 0;
          for (const step of steps) {
            const now: [
              StepPlannedPool<MockMemory>,
              PlannedBlock<MockMemory>,
            ][] = [];
            for (const r of step) {
              const pool = pools[r.pool];
              const b = pool.allocate(r.size);
              for (const [q, o] of [...kept, ...now]) {
                if (
                  q === pool && o.memory === b.memory &&
                  o.byteOffset < b.byteOffset + b.byteLength &&
                  b.byteOffset < o.byteOffset + o.byteLength
                ) assert.fail("overlap");
              }
              live += r.size;
              (r.keep ? kept : now).push([pool, b]);
            }
            assert.equal(group.requestedBytes, live);
            for (const [q, b] of now) {
              live -= b.requestedByteLength;
              q.free(b);
            }
            group.endStep();
            for (const p of pools) p.validate();
            assert.equal(group.requestedBytes, live);
            // A pool does not move blocks: a segment that holds a live block
            // cannot go back, however little of it is live, so the bound is
            // on the rest. (It used to be on all held bytes with 768 KiB of
            // slack: fast-check found, about 1 run in 155,000, 5 steps where
            // 1-byte blocks pinned 0.9 MB. Without the pinned segments 64 KiB
            // of slack holds over 200,000 runs, and a group that skips its
            // step-end trim fails at once.)
            const pinned = new Set<MockMemory>();
            for (const [, b] of kept) pinned.add(b.memory);
            let pinnedBytes = 0;
            for (const m of pinned) pinnedBytes += segmentBytes.get(m)!;
            assert.ok(
              group.reservedBytes - pinnedBytes <=
                1.1 * group.peakRequestedBytes + (1 << 16),
              `held ${group.reservedBytes}, pinned by live blocks ${pinnedBytes}`,
            );
          }
          for (const [q, b] of kept) q.free(b);
          for (const p of pools) p.emptyCache();
          for (const s of sources) assert.equal(s.reservedBytes, 0);
        },
      ),
      { numRuns: modelRuns(300) },
    );
  });
});
