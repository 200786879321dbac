// CachingGroup from the outside (review 5): random workloads over three
// members with deletes, peak resets, emptied caches, refusing, throwing and
// lying sources, checked after every step; and a group left empty.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  Device,
  InvalidArgumentError,
  type MockMemory,
  MockSegmentSource,
  type Segment,
  type SegmentRequestOptions,
} from "@allot/core";
import { type CachedBlock, CachingAllocator } from "./caching_allocator.ts";
import { CachingGroup } from "./caching_group.ts";
import { modelRuns } from "../core/_test_faults.ts";

const KiB = 1024, MiB = 2 ** 20;
type Memory = MockMemory;

/** A mock device that can throw while freeing and lie about a size. */
class Hostile extends MockSegmentSource {
  throwOnFree = false;
  lieOnce = false;
  override freeSegment(segment: Segment<Memory>): void {
    if (this.throwOnFree) {
      this.throwOnFree = false;
      throw new Error("device says no");
    }
    super.freeSegment(segment);
  }
  override tryAllocateSegment(
    byteLength: number,
    options?: SegmentRequestOptions,
  ): Segment<Memory> | undefined {
    const s = super.tryAllocateSegment(byteLength, options);
    if (s !== undefined && this.lieOnce) {
      this.lieOnce = false;
      return { ...s, byteLength: Math.max(1, s.byteLength - 256) };
    }
    return s;
  }
}

type Op =
  | { k: "alloc"; m: number; size: number }
  | { k: "free"; at: number }
  | { k: "empty"; m: number }
  | { k: "reset" }
  | { k: "delete"; m: number }
  | { k: "fail"; m: number }
  | { k: "throwFree"; m: number }
  | { k: "lie"; m: number }
  | { k: "cycle"; m: number };

const member = fc.integer({ min: 0, max: 2 });
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      k: fc.constant("alloc" as const),
      m: member,
      size: fc.oneof(
        fc.integer({ min: 1, max: 64 * KiB }),
        fc.integer({ min: 64 * KiB, max: 8 * MiB }),
      ),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      k: fc.constant("free" as const),
      at: fc.nat(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant("empty" as const), m: member }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("reset" as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant("delete" as const), m: member }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant("fail" as const), m: member }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant("throwFree" as const), m: member }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant("lie" as const), m: member }),
  },
);

describe("CachingGroup (review 5)", () => {
  it("CachingGroup model: held bytes are the members' reserved bytes after every step", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80, size: "max" }), (ops) => {
        const group = new CachingGroup();
        const sources = [new Hostile(), new Hostile(), new Hostile()];
        const members = sources.map((s) => new CachingAllocator(s, { group }));
        const live: [number, CachedBlock<Memory>][] = [];
        const inGroup = [true, true, true];
        const check = () => {
          let sum = 0;
          for (let i = 0; i < 3; i++) {
            members[i].validate();
            assert.equal(group.has(members[i]), inGroup[i]);
            if (inGroup[i]) {
              sum += members[i].memoryStats().reservedBytes.all.current;
            }
          }
          assert.equal(group.heldBytes, sum);
          assert.equal(group.size, inGroup.filter((x) => x).length);
          assert.ok(group.givenBackBytes >= 0 && group.givenBackSegments >= 0);
        };
        for (const o of ops) {
          switch (o.k) {
            case "alloc": {
              const beforeHeld = members[o.m].memoryStats().allocation.all
                .current;
              const frees = sources.map((s) => s.freeCount);
              const given = [group.givenBackSegments, group.givenBackBytes];
              const heldBefore = sources.map((s) => s.reservedBytes);
              try {
                live.push([o.m, members[o.m].allocate(o.size)]);
                // the siblings' segments freed are the group's give-backs
                let n = 0, bytes = 0;
                for (let j = 0; j < 3; j++) {
                  if (j === o.m) continue;
                  n += sources[j].freeCount - frees[j];
                  bytes += heldBefore[j] - sources[j].reservedBytes;
                }
                assert.equal(group.givenBackSegments - given[0], n);
                assert.equal(group.givenBackBytes - given[1], bytes);
              } catch (e) {
                // a refused request takes no block
                assert.ok(e instanceof Error);
                assert.equal(
                  members[o.m].memoryStats().allocation.all.current,
                  beforeHeld,
                );
              }
              break;
            }
            case "free":
              if (live.length > 0) {
                const [m, b] = live.splice(o.at % live.length, 1)[0];
                members[m].free(b);
              }
              break;
            case "empty":
              try {
                members[o.m].emptyCache();
              } catch (e) {
                assert.ok(e instanceof Error);
              }
              break;
            case "reset":
              group.resetPeak();
              assert.equal(group.peakHeldBytes, group.heldBytes);
              break;
            case "delete": {
              const was = inGroup[o.m];
              assert.equal(group.delete(members[o.m]), was);
              inGroup[o.m] = false;
              break;
            }
            case "fail":
              sources[o.m].failNext();
              break;
            case "throwFree":
              sources[o.m].throwOnFree = true;
              break;
            case "lie":
              sources[o.m].lieOnce = true;
              break;
            case "cycle": {
              // a peak, then a low: the member's misses cycle
              const a = members[o.m];
              try {
                const x = a.allocate(MiB), y = a.allocate(MiB);
                a.free(x);
                a.free(y);
                a.emptyCache();
              } catch (e) {
                assert.ok(e instanceof Error);
              }
              break;
            }
          }
          check();
        }
        for (const [m, b] of live) members[m].free(b);
        for (const s of sources) {
          s.throwOnFree = false;
          s.lieOnce = false;
        }
        for (const a of members) a.emptyCache();
        check();
        assert.equal(group.heldBytes, 0);
      }),
      { numRuns: modelRuns(200) },
    );
  });

  it("CachingGroup.delete() of a member holding segments: its later misses leave the group alone", () => {
    const group = new CachingGroup();
    const a = new CachingAllocator(new MockSegmentSource(), { group });
    const b = new CachingAllocator(new MockSegmentSource(), { group });
    const x = a.allocate(4 * MiB);
    b.free(b.allocate(4 * MiB));
    const peak = group.peakHeldBytes;
    assert.equal(group.delete(a), true);
    assert.equal(group.delete(a), false);
    assert.equal(group.heldBytes, b.memoryStats().reservedBytes.all.current);
    const y = a.allocate(64 * MiB);
    assert.equal(group.peakHeldBytes, peak);
    assert.equal(group.givenBackSegments, 0);
    assert.equal(b.memoryStats().reservedBytes.all.current, 4 * MiB);
    a.free(x);
    a.free(y);
    a.validate();
    b.validate();
  });

  it("CachingGroup left empty takes an allocator of another device", () => {
    const group = new CachingGroup();
    const a = new CachingAllocator(new MockSegmentSource(), { group });
    assert.equal(group.delete(a), true);
    assert.equal(group.size, 0);
    const other = new MockSegmentSource({ device: new Device("mock", 1) });
    const b = new CachingAllocator(other, { group });
    assert.ok(group.has(b));
    // and now that device's: the first device's is refused again
    assert.throws(
      () => new CachingAllocator(new MockSegmentSource(), { group }),
      InvalidArgumentError,
    );
    assert.equal(group.size, 1);
  });

  it("A CachingAllocator refused for a bad recordHistory option does not join its group", () => {
    const group = new CachingGroup();
    const a = new CachingAllocator(new MockSegmentSource(), { group });
    for (
      const recordHistory of [{ bogus: 1 }, { maxEntries: -1 }, {
        maxEntries: 0.5,
      }]
    ) {
      assert.throws(
        () =>
          new CachingAllocator(new MockSegmentSource(), {
            group,
            recordHistory: recordHistory as { maxEntries: number },
          }),
        InvalidArgumentError,
      );
      assert.equal(group.size, 1);
    }
    assert.ok(group.has(a));
    // a member of another device after the refusals: still refused
    assert.throws(
      () =>
        new CachingAllocator(
          new MockSegmentSource({ device: new Device("mock", 2) }),
          { group },
        ),
      InvalidArgumentError,
    );
    assert.equal(group.size, 1);
  });

  it("A sibling's freeSegment() that deletes both members and resets the peak mid give-back leaves all consistent", () => {
    const hook: { fn?: () => void } = {};
    class Re extends MockSegmentSource {
      override freeSegment(segment: Segment<Memory>): void {
        super.freeSegment(segment);
        const f = hook.fn;
        hook.fn = undefined;
        f?.();
      }
    }
    const group = new CachingGroup();
    const storage = new CachingAllocator(new MockSegmentSource(), { group });
    const us = new Re();
    const uploads = new CachingAllocator(us, { group });
    const x = storage.allocate(MiB), y = storage.allocate(MiB);
    storage.free(x);
    storage.free(y);
    storage.emptyCache();
    const small = storage.allocate(64 * KiB);
    uploads.free(uploads.allocate(4 * MiB));
    hook.fn = () => {
      assert.equal(group.delete(uploads), true);
      assert.equal(group.delete(storage), true);
      group.resetPeak();
    };
    const big = storage.allocate(group.peakHeldBytes + 6 * MiB);
    assert.equal(hook.fn, undefined); // the give-back ran
    assert.equal(group.size, 0);
    assert.equal(group.heldBytes, 0);
    assert.equal(group.givenBackSegments, 1);
    assert.equal(
      us.reservedBytes,
      uploads.memoryStats().reservedBytes.all.current,
    );
    storage.validate();
    uploads.validate();
    storage.free(big);
    storage.free(small);
  });

  it("A request refused (bad size or out of memory) gives nothing back and leaves the bound", () => {
    for (const bad of [2 ** 53, 2 ** 45, -1, NaN, 1.5, 2 ** 41, 2 ** 40]) {
      const group = new CachingGroup();
      const storage = new CachingAllocator(
        new MockSegmentSource({ capacityBytes: 64 * MiB }),
        { group },
      );
      const us = new MockSegmentSource();
      const uploads = new CachingAllocator(us, { group });
      const x = storage.allocate(MiB), y = storage.allocate(MiB);
      storage.free(x);
      storage.free(y);
      storage.emptyCache();
      const small = storage.allocate(64 * KiB);
      uploads.free(uploads.allocate(4 * MiB));
      const before = [us.reservedBytes, group.peakHeldBytes, group.heldBytes];
      assert.throws(() => storage.allocate(bad), Error, String(bad));
      assert.deepEqual(
        [us.reservedBytes, group.peakHeldBytes, group.heldBytes],
        before,
        String(bad),
      );
      assert.equal(group.givenBackSegments, 0);
      storage.free(small);
    }
  });

  it("CachingGroup methods on a look-alike throw InvalidArgumentError naming `this`, and has/delete of non-members are false", () => {
    const group = new CachingGroup();
    for (const v of [undefined, null, 1, "x", {}, group, () => 0]) {
      assert.equal(group.has(v), false);
      assert.equal(group.delete(v), false);
    }
    const fake = Object.create(CachingGroup.prototype) as CachingGroup;
    const refused = (what: string) => (error: unknown) => {
      assert.ok(error instanceof InvalidArgumentError);
      assert.equal(error.argument, "this");
      assert.equal(error.value, fake);
      assert.equal(error.limit, "a CachingGroup");
      assert.match(
        error.message,
        new RegExp(
          `^Cannot use CachingGroup\\.${
            what.replace(/[()]/g, "\\$&")
          }: \`this\` is not a CachingGroup .*, received an object$`,
        ),
      );
      return true;
    };
    assert.throws(() => fake.resetPeak(), refused("resetPeak()"));
    assert.throws(() => fake.delete({}), refused("delete()"));
    assert.throws(() => fake.has({}), refused("has()"));
    // the receiver is checked before the argument: a look-alike is refused
    // even for a value that could never be a member
    assert.throws(() => fake.has(1), refused("has()"));
    assert.throws(() => fake.delete(1), refused("delete()"));
    assert.throws(() => fake.endStep(), refused("endStep()"));
    assert.throws(() => fake.size, refused("size"));
    assert.throws(() => fake.peakHeldBytes, refused("peakHeldBytes"));
    assert.throws(() => fake.givenBackSegments, refused("givenBackSegments"));
    assert.throws(() => fake.givenBackBytes, refused("givenBackBytes"));
    // a method borrowed onto another object, and a Proxy of a real group
    const proxy = new Proxy(group, {});
    assert.throws(() => proxy.heldBytes, InvalidArgumentError);
    assert.throws(
      () => CachingGroup.prototype.endStep.call({}),
      InvalidArgumentError,
    );
    assert.equal(group.size, 0);
    assert.equal(group.peakHeldBytes, 0);
  });
});
