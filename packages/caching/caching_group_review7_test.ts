// CachingGroup from the outside (review 7): a member's segment source that
// re-enters the group or its members while the group gives that member's
// segment back for another member's miss (leaves the group and throws,
// allocates, frees, empties a cache, marks a step, resets the bound), with
// byte patterns in every live block (ids and handles) checked after each
// case, every member validated, and the group's held bytes equal to a
// recount of its members' and to the sources' own counts.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type CachedBlock,
  CachingAllocator,
  CachingGroup,
} from "@allot/caching";
import { MockSegmentSource } from "@allot/core";
import type { MockMemory, Segment } from "@allot/core";
import { checkPattern, writePattern } from "../core/_test_faults.ts";

const KiB = 1024, MiB = 2 ** 20;

/** What the giving member's source does inside its freeSegment(). */
type Reentry =
  | "leave-then-throw"
  | "leave"
  | "throw"
  | "asker-leaves"
  | "asker-allocates"
  | "asker-frees"
  | "asker-empties"
  | "giver-allocates"
  | "giver-empties"
  | "step"
  | "reset-peak";

const REENTRIES: readonly Reentry[] = [
  "leave-then-throw",
  "leave",
  "throw",
  "asker-leaves",
  "asker-allocates",
  "asker-frees",
  "asker-empties",
  "giver-allocates",
  "giver-empties",
  "step",
  "reset-peak",
];

/** A live block with its pattern: a handle or an id. */
type Live =
  | {
    kind: "handle";
    pool: CachingAllocator<MockMemory>;
    h: CachedBlock<MockMemory>;
    tag: number;
  }
  | {
    kind: "id";
    pool: CachingAllocator<MockMemory>;
    id: number;
    size: number;
    tag: number;
  };

function bytesOf(l: Live): Uint8Array {
  if (l.kind === "handle") {
    return l.h.memory.bytes!.subarray(
      l.h.byteOffset,
      l.h.byteOffset + l.h.byteLength,
    );
  }
  const at = l.pool.blockByteOffset(l.id);
  return l.pool.blockMemory(l.id).bytes!.subarray(at, at + l.size);
}

describe("CachingGroup re-entered from a member's source during a give-back (review 7)", () => {
  for (const what of REENTRIES) {
    it(`CachingGroup: the giving member's freeSegment() ${what}: the asker's miss is served, patterns survive, the counts add up`, () => {
      const group = new CachingGroup();
      const askerSource = new MockSegmentSource({ backed: true });
      const giverSource = new MockSegmentSource({ backed: true });
      const asker = new CachingAllocator(askerSource, { group });
      const giver = new CachingAllocator(giverSource, { group });
      const live: Live[] = [];
      let tag = 1;
      const take = (
        pool: CachingAllocator<MockMemory>,
        n: number,
        byId: boolean,
      ) => {
        const t = tag++;
        let l: Live;
        if (byId) {
          l = { kind: "id", pool, id: pool.allocateId(n), size: n, tag: t };
        } else l = { kind: "handle", pool, h: pool.allocate(n), tag: t };
        writePattern(bytesOf(l), t);
        live.push(l);
        return l;
      };
      const give = (l: Live) => {
        live.splice(live.indexOf(l), 1);
        if (l.kind === "handle") l.h.release();
        else l.pool.freeById(l.id);
      };
      const check = () => {
        asker.validate();
        giver.validate();
        for (const l of live) checkPattern(bytesOf(l), l.tag);
        let held = 0;
        for (const p of [asker, giver]) {
          if (group.has(p)) held += p.reservedBytes;
        }
        assert.equal(group.heldBytes, held);
        assert.equal(asker.reservedBytes, askerSource.reservedBytes);
        assert.equal(giver.reservedBytes, giverSource.reservedBytes);
      };
      // the asker's misses cycle: a peak, then a miss at a low
      const a = take(asker, MiB, true), b = take(asker, MiB, false);
      give(a);
      give(b);
      asker.emptyCache();
      take(asker, 64 * KiB, true);
      const spare = take(asker, 4 * KiB, false);
      // the giver caches two idle segments (and holds a small live block)
      const g1 = take(giver, 4 * MiB, true), g2 = take(giver, 3 * MiB, false);
      take(giver, 8 * KiB, true);
      give(g1);
      give(g2);
      check();
      const free = giverSource.freeSegment.bind(giverSource);
      let entered = 0;
      giverSource.freeSegment = (s: Segment<MockMemory>) => {
        free(s);
        if (entered++ > 0) return; // once
        switch (what) {
          case "leave-then-throw":
            group.delete(giver);
            throw new Error("a source that leaves, then fails");
          case "leave":
            group.delete(giver);
            break;
          case "throw":
            throw new Error("a failing source");
          case "asker-leaves":
            group.delete(asker);
            break;
          case "asker-allocates":
            take(asker, 2 * MiB, true);
            break;
          case "asker-frees":
            give(spare);
            break;
          case "asker-empties":
            asker.emptyCache();
            break;
          case "giver-allocates":
            take(giver, 3 * MiB, true);
            take(giver, 256, false);
            break;
          case "giver-empties":
            giver.emptyCache();
            break;
          case "step":
            group.endStep();
            break;
          case "reset-peak":
            group.resetPeak();
            break;
        }
      };
      const given = group.givenBackSegments;
      // a miss past the bound: the giver's idle segments go
      take(asker, group.peakHeldBytes, false);
      assert.ok(entered > 0, "a give-back ran");
      assert.ok(group.givenBackSegments >= given, "the count never goes down");
      check();
      // the group goes on: more misses of both, then everything back
      giverSource.freeSegment = free;
      take(giver, 5 * MiB, false);
      take(asker, 6 * MiB, true);
      group.endStep();
      check();
      for (const l of [...live]) give(l);
      for (const p of [asker, giver]) {
        p.emptyCache();
        assert.equal(p.allocatedBytes, 0);
        assert.equal(p.reservedBytes, 0);
      }
      assert.equal(askerSource.reservedBytes + giverSource.reservedBytes, 0);
      assert.equal(group.heldBytes, 0);
    });
  }
});
