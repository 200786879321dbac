import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { PoolStats } from "./pool_stats.ts";
import { StatRecount } from "./stat_recount.ts";
import { STAT_ARRAY_NAMES, type StatArray } from "./memory_stats.ts";
import { Stat } from "./stat.ts";
import { AllotError } from "./errors.ts";
import { modelRuns } from "./_test_faults.ts";

// A pool as a pooling allocator sees it: segments cut into blocks that are
// free, allocated or pending (freed, waiting for fences). The model keeps
// every figure as a plain core `Stat` per pool, moved the naive way (every
// figure on every event, active counted directly); `PoolStats` derives the
// active figures and keeps its totals apart. Both must agree on every
// figure after every step, and `verify()` must accept a recount of the
// blocks and refuse a wrong one.

type BlockState = "free" | "allocated" | "pending";
interface Block {
  size: number;
  requested: number;
  state: BlockState;
}
interface Seg {
  small: boolean;
  blocks: Block[];
}

type Figure = typeof STAT_ARRAY_NAMES[number];

class Model {
  segs: Seg[] = [];
  stats = new PoolStats();
  naive: Record<Figure, [Stat, Stat]> = Object.fromEntries(
    STAT_ARRAY_NAMES.map((n) => [n, [new Stat(), new Stat()]]),
  ) as Record<Figure, [Stat, Stat]>;
  pendingCount = 0;

  move(name: Figure, small: boolean, delta: number): void {
    const s = this.naive[name][small ? 0 : 1];
    if (delta >= 0) s.increase(delta);
    else s.decrease(-delta);
  }

  /** A free block shares its segment with others: counts as split. */
  split(seg: Seg): boolean {
    return seg.blocks.length > 1;
  }

  /**
   * Runs `change` on `seg` and moves the split figures by the net change,
   * in both the model and PoolStats (decreases first, as the policies do).
   */
  reshape(seg: Seg, change: () => void): [number, number] {
    const before = this.splitCount(seg);
    change();
    const after = this.splitCount(seg);
    const dn = after[0] - before[0], dbytes = after[1] - before[1];
    if (dn < 0) this.move("inactiveSplit", seg.small, dn);
    if (dbytes < 0) this.move("inactiveSplitBytes", seg.small, dbytes);
    if (dn > 0) this.move("inactiveSplit", seg.small, dn);
    if (dbytes > 0) this.move("inactiveSplitBytes", seg.small, dbytes);
    return [dn, dbytes];
  }

  /** Reports a net split change to PoolStats: decreases, then increases. */
  applySplit(small: boolean, dn: number, dbytes: number): void {
    const nDown = dn < 0 ? -dn : 0, bDown = dbytes < 0 ? -dbytes : 0;
    if (nDown !== 0 || bDown !== 0) this.stats.splitTaken(small, bDown, nDown);
    if (dn > 0 || dbytes > 0) {
      this.stats.split(small, dn > 0 ? dn : 0, dbytes > 0 ? dbytes : 0);
    }
  }

  splitCount(seg: Seg): [number, number] {
    if (!this.split(seg)) return [0, 0];
    let n = 0, bytes = 0;
    for (const b of seg.blocks) {
      if (b.state === "free") {
        n++;
        bytes += b.size;
      }
    }
    return [n, bytes];
  }

  addSegment(small: boolean, size: number): void {
    this.segs.push({ small, blocks: [{ size, requested: 0, state: "free" }] });
    this.stats.reserved(small, 1, size);
    this.stats.numDeviceAlloc++;
    this.move("segment", small, 1);
    this.move("reservedBytes", small, size);
  }

  /** Takes `size` bytes from the front of a free block (split if larger). */
  allocate(segIndex: number, blockIndex: number, fraction: number): void {
    const seg = this.segs[segIndex % this.segs.length];
    const free = seg.blocks.filter((b) => b.state === "free");
    if (free.length === 0) return;
    const b = free[blockIndex % free.length];
    const size = Math.max(1, Math.floor(b.size * fraction));
    const requested = Math.max(1, size - (size >> 3));
    const [dn, dbytes] = this.reshape(seg, () => {
      if (size < b.size) {
        const i = seg.blocks.indexOf(b);
        seg.blocks.splice(i, 0, { size, requested, state: "allocated" });
        b.size -= size;
      } else {
        b.state = "allocated";
        b.requested = requested;
      }
    });
    this.applySplit(seg.small, dn, dbytes);
    this.stats.allocated(seg.small, size, requested, this.pendingCount !== 0);
    this.move("allocation", seg.small, 1);
    this.move("allocatedBytes", seg.small, size);
    this.move("active", seg.small, 1);
    this.move("activeBytes", seg.small, size);
    this.move("requestedBytes", seg.small, requested);
  }

  allocatedBlocks(): [Seg, Block][] {
    return this.segs.flatMap((s) =>
      s.blocks.filter((b) => b.state === "allocated").map((b) =>
        [s, b] as [Seg, Block]
      )
    );
  }

  free(index: number, pending: boolean): void {
    const all = this.allocatedBlocks();
    if (all.length === 0) return;
    const [seg, b] = all[index % all.length];
    this.stats.freed(seg.small, b.size);
    this.move("allocation", seg.small, -1);
    this.move("allocatedBytes", seg.small, -b.size);
    if (pending) {
      b.state = "pending";
      this.pendingCount++;
      this.stats.pending(seg.small, b.size);
    } else this.returnToPool(seg, b, false);
  }

  completeFences(): void {
    for (const seg of this.segs) {
      for (const b of [...seg.blocks]) {
        if (b.state === "pending") {
          this.pendingCount--;
          this.returnToPool(seg, b, true);
        }
      }
    }
  }

  /** A block back in the pool, merged with free neighbours. */
  returnToPool(seg: Seg, b: Block, wasPending: boolean): void {
    const size = b.size, requested = b.requested;
    const [dn, dbytes] = this.reshape(seg, () => {
      b.state = "free";
      b.requested = 0;
      for (let i = 0; i + 1 < seg.blocks.length;) {
        const x = seg.blocks[i], y = seg.blocks[i + 1];
        if (x.state === "free" && y.state === "free") {
          x.size += y.size;
          seg.blocks.splice(i + 1, 1);
        } else i++;
      }
    });
    this.stats.inactive(seg.small, size, requested, wasPending, dn, dbytes);
    this.move("active", seg.small, -1);
    this.move("activeBytes", seg.small, -size);
    this.move("requestedBytes", seg.small, -requested);
  }

  /** Returns every whole free segment. */
  emptyCache(): void {
    this.segs = this.segs.filter((seg) => {
      if (seg.blocks.length !== 1 || seg.blocks[0].state !== "free") {
        return true;
      }
      this.stats.unreserved(seg.small, 1, seg.blocks[0].size);
      this.stats.numDeviceFree++;
      this.move("segment", seg.small, -1);
      this.move("reservedBytes", seg.small, -seg.blocks[0].size);
      return false;
    });
  }

  resetPeak(): void {
    this.stats.resetPeak();
    for (const n of STAT_ARRAY_NAMES) {
      for (const s of this.naive[n]) s.resetPeak();
    }
  }

  resetAccumulated(): void {
    this.stats.resetAccumulated();
    for (const n of STAT_ARRAY_NAMES) {
      for (const s of this.naive[n]) s.resetAccumulated();
    }
  }

  recount(): StatRecount {
    const c = new StatRecount();
    for (const seg of this.segs) {
      let size = 0;
      for (const b of seg.blocks) size += b.size;
      c.segment(seg.small, size);
      for (const b of seg.blocks) {
        if (b.state === "allocated") {
          c.allocatedBlock(seg.small, b.size, b.requested);
        } else if (b.state === "pending") {
          c.activeBlock(seg.small, b.size, b.requested);
        } else if (seg.blocks.length > 1) {
          c.inactiveSplitBlock(seg.small, b.size);
        }
      }
    }
    return c;
  }

  check(): void {
    const stats = this.stats.memoryStats(Infinity);
    for (const name of STAT_ARRAY_NAMES) {
      const [small, large] = this.naive[name];
      const got: StatArray = stats[name];
      assert.deepEqual(got.smallPool, small.values(), `${name} small`);
      assert.deepEqual(got.largePool, large.values(), `${name} large`);
      assert.equal(
        got.all.current,
        small.current + large.current,
        `${name} all current`,
      );
      assert.ok(got.all.peak >= got.all.current, `${name} all peak`);
      assert.ok(
        got.all.peak <= small.peak + large.peak,
        `${name} all peak at most the pools' peaks`,
      );
      assert.equal(
        got.all.allocated,
        small.allocated + large.allocated,
        `${name} all allocated`,
      );
      assert.equal(got.all.freed, small.freed + large.freed, `${name} freed`);
    }
    const recount = this.recount();
    this.stats.verify(recount, "model");
    assert.equal(this.stats.reservedBytes, stats.reservedBytes.all.current);
    assert.equal(this.stats.activeBytes, stats.activeBytes.all.current);
  }
}

const op = fc.oneof(
  fc.record({
    kind: fc.constant("segment" as const),
    small: fc.boolean(),
    size: fc.integer({ min: 1, max: 1 << 20 }),
  }),
  fc.record({
    kind: fc.constant("allocate" as const),
    seg: fc.nat(),
    block: fc.nat(),
    fraction: fc.double({ min: 0.05, max: 1, noNaN: true }),
  }),
  fc.record({
    kind: fc.constant("free" as const),
    index: fc.nat(),
    pending: fc.boolean(),
  }),
  fc.record({ kind: fc.constant("complete" as const) }),
  fc.record({ kind: fc.constant("empty" as const) }),
  fc.record({ kind: fc.constant("resetPeak" as const) }),
  fc.record({ kind: fc.constant("resetAccumulated" as const) }),
);

describe("PoolStats model", () => {
  it("PoolStats equals a naive per-figure model and a recount after every step of random segment, allocate, free, fence, emptyCache and reset sequences", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
        const m = new Model();
        for (const o of ops) {
          switch (o.kind) {
            case "segment":
              m.addSegment(o.small, o.size);
              break;
            case "allocate":
              if (m.segs.length > 0) m.allocate(o.seg, o.block, o.fraction);
              break;
            case "free":
              m.free(o.index, o.pending);
              break;
            case "complete":
              m.completeFences();
              break;
            case "empty":
              m.emptyCache();
              break;
            case "resetPeak":
              m.resetPeak();
              break;
            case "resetAccumulated":
              m.resetAccumulated();
              break;
          }
          m.check();
        }
        // Everything returned at the end: every figure but the totals is 0.
        while (m.allocatedBlocks().length > 0) m.free(0, true);
        m.completeFences();
        m.emptyCache();
        m.check();
        const end = m.stats.memoryStats(Infinity);
        for (const name of STAT_ARRAY_NAMES) {
          assert.equal(end[name].all.current, 0, `${name} at the end`);
        }
      }),
      { numRuns: modelRuns() },
    );
  });

  it("PoolStats.verify() names a figure that differs from the recount", () => {
    const stats = new PoolStats();
    stats.reserved(true, 1, 4096);
    stats.allocated(true, 512, 500, false);
    const recount = new StatRecount();
    recount.segment(true, 4096);
    recount.allocatedBlock(true, 512, 500);
    stats.verify(recount, "ok");
    recount.add("requestedBytes", true, 1);
    assert.throws(
      () => stats.verify(recount, "mine"),
      (e) =>
        e instanceof AllotError &&
        /mine is inconsistent: stat requestedBytes\.all is 500, recount 501/
          .test(e.message),
    );
    const oversize = new StatRecount();
    oversize.segment(true, 4096);
    oversize.allocatedBlock(true, 512, 500);
    oversize.oversizeSegments = 1;
    assert.throws(() => stats.verify(oversize, "x"), /oversize segments/);
  });

  it("PoolStats active figures: a free waiting on fences stays active, and the active peak counts it", () => {
    const stats = new PoolStats();
    stats.reserved(false, 1, 1 << 20);
    stats.allocated(false, 1024, 1000, false);
    stats.freed(false, 1024);
    stats.pending(false, 1024);
    stats.allocated(false, 2048, 2000, true); // 1024 pending + 2048 live
    const s = stats.memoryStats(Infinity);
    assert.equal(s.activeBytes.largePool.current, 3072);
    assert.equal(s.activeBytes.all.peak, 3072);
    assert.equal(s.allocatedBytes.all.peak, 2048);
    assert.equal(stats.activeBytes, 3072);
    stats.resetAccumulated();
    assert.equal(stats.memoryStats(Infinity).activeBytes.all.allocated, 0);
  });
});
