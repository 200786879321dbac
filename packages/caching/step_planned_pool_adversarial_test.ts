/**
 * Adversarial tests of `StepPlannedPool` and `StepPoolGroup` from the public
 * API outward (the rest of `@allot/caching` is in
 * `caching_adversarial_test.ts`): hostile options, step marks in odd
 * places, foreign, stale and forged blocks, and a segment source that
 * throws or lies on the paths that make and give back segments (a segment
 * made for a request, the arena of a plan, step-end trims, `trim()`, the
 * group's room-making). After each, the pool's stats equal a recount, what
 * it holds equals what its source has live, and live bytes are intact.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  DoubleFreeError,
  InvalidArgumentError,
  type MockMemory,
  MockSegmentSource,
  SegmentSourceError,
} from "@allot/core";
import { PlannedBlock, StepPlannedPool, StepPoolGroup } from "./mod.ts";
import {
  hostileHandles,
  hostileNumbers,
  hostileObjects,
  HostileTally,
} from "../core/_test_hostile.ts";
import {
  attempt,
  FaultySegmentSource,
  type SegmentFault,
} from "../core/_test_faults.ts";

const tally = new HostileTally();
const { refuse } = tally;

type Pool = StepPlannedPool<MockMemory>;

/** A live block and the byte it was filled with. */
interface Held {
  pool: Pool;
  block: PlannedBlock<MockMemory>;
  byte: number;
}

let nextByte = 1;

function take(pool: Pool, size: number, held: Held[]): Held {
  const block = pool.allocate(size);
  const byte = nextByte = (nextByte * 7 + 3) & 255 || 1;
  block.memory.bytes!.fill(byte, block.byteOffset, block.byteOffset + size);
  const h = { pool, block, byte };
  held.push(h);
  return h;
}

function give(h: Held, held: Held[]): void {
  held.splice(held.indexOf(h), 1);
  h.pool.free(h.block);
}

/** Every live block still holds its byte, and no two overlap. */
function intact(held: readonly Held[]): void {
  for (const h of held) {
    const { memory, byteOffset, requestedByteLength } = h.block;
    const bytes = memory.bytes!.subarray(
      byteOffset,
      byteOffset + requestedByteLength,
    );
    const bad = bytes.findIndex((b) => b !== h.byte);
    if (bad >= 0) {
      assert.fail(
        `block of ${requestedByteLength} bytes at ${byteOffset} overwritten at +${bad}`,
      );
    }
    for (const o of held) {
      if (
        o !== h && o.block.memory === h.block.memory &&
        o.block.byteOffset < byteOffset + h.block.byteLength &&
        byteOffset < o.block.byteOffset + o.block.byteLength
      ) {
        assert.fail(
          `blocks at ${byteOffset} and ${o.block.byteOffset} overlap`,
        );
      }
    }
  }
}

/** The pool's figures equal a recount and what its source holds. */
function consistent(
  pool: Pool,
  inner: MockSegmentSource,
  held: readonly Held[],
): void {
  pool.validate();
  assert.equal(pool.reservedBytes, inner.reservedBytes, "held != source");
  assert.equal(pool.segmentCount, inner.liveSegmentCount, "segments");
  let live = 0;
  for (const h of held) {
    if (h.pool === pool) live += h.block.requestedByteLength;
  }
  assert.equal(pool.requestedBytes, live);
  intact(held);
}

const backed = () => new MockSegmentSource({ backed: true });

describe("StepPlannedPool adversarial", () => {
  after(() => {
    console.log(
      `planned adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("options: hostile strict, group and ratio values are refused", () => {
    const source = new MockSegmentSource();
    refuse(
      "new StepPlannedPool({ strict })",
      hostileNumbers().filter((h) => !["undefined", "true"].includes(h.name))
        .concat([{ name: "1", value: 1 }, { name: '"yes"', value: "yes" }]),
      (v) => new StepPlannedPool(source, { strict: v as boolean }),
    );
    refuse(
      "new StepPlannedPool({ group })",
      hostileObjects().filter((h) => h.name !== "undefined").concat([
        { name: "a pool", value: new StepPlannedPool(source) },
        {
          name: "group look-alike",
          value: Object.create(StepPoolGroup.prototype),
        },
      ]),
      (v) => new StepPlannedPool(source, { group: v as StepPoolGroup }),
    );
    refuse(
      "new StepPoolGroup(options)",
      hostileObjects().filter((h) =>
        !["undefined", "{}", "[]", "() => {}"].includes(h.name)
      ),
      (v) => new StepPoolGroup(v as object),
    );
    refuse(
      "new StepPoolGroup({ maxHeldRatio })",
      hostileNumbers().filter((h) =>
        !["undefined", "null", "1.5", "2^53", "2^53+2", "1e308"].includes(
          h.name,
        )
      ).concat([{ name: "0.999", value: 0.999 }, { name: "0", value: 0 }]),
      (v) => new StepPoolGroup({ maxHeldRatio: v as number }),
    );
    // a refused pool does not join the group
    const group = new StepPoolGroup();
    assert.throws(
      () => new StepPlannedPool(source, { group, maxHeldRatio: 0.5 }),
      InvalidArgumentError,
    );
    assert.throws(
      () => new StepPlannedPool(source, { group, strict: 1 as never }),
      InvalidArgumentError,
    );
    assert.equal(group.poolCount, 0);
  });

  it("trim(target): a hostile target is refused naming the value and the limit, changing nothing", () => {
    const pool = new StepPlannedPool(backed());
    const held: Held[] = [];
    take(pool, 1000, held);
    pool.free(pool.allocate(50_000));
    const state = () => [pool.reservedBytes, pool.segmentCount];
    refuse(
      "StepPlannedPool.trim(target)",
      hostileNumbers().filter((h) => h.name !== "undefined").concat([
        { name: "-0.5", value: -0.5 },
      ]),
      (v) => pool.trim(v as number),
      { snapshot: state, error: InvalidArgumentError },
    );
    const bad: [number, RegExp][] = [
      [NaN, /NaN/],
      [-1, /-1/],
      [2 ** 60, /1152921504606847000/],
      [-Infinity, /-Infinity/],
    ];
    for (const [v, re] of bad) {
      assert.throws(
        () => pool.trim(v),
        (e) =>
          e instanceof InvalidArgumentError && re.test(e.message) &&
          /targetByteLength/.test(e.message) &&
          e.limit === Number.MAX_SAFE_INTEGER,
      );
    }
    assert.equal(pool.trim(Number.MAX_SAFE_INTEGER), pool.reservedBytes);
    assert.equal(pool.trim(), 1024);
    intact(held);
  });

  it("endStep() with no step, twice, after emptyCache(), and blocks freed steps later", () => {
    const inner = backed();
    const pool = new StepPlannedPool(inner);
    const held: Held[] = [];
    pool.endStep();
    pool.endStep();
    assert.equal(pool.stepCount, 2);
    consistent(pool, inner, held);
    const old = take(pool, 3000, held);
    for (let s = 0; s < 5; s++) {
      const a = take(pool, 4096, held);
      const b = take(pool, 8192, held);
      give(a, held);
      take(pool, 2048, held); // outlives the step
      give(b, held);
      pool.endStep();
      pool.endStep(); // a step with no request between
      consistent(pool, inner, held);
      if (s === 2) {
        pool.emptyCache();
        pool.endStep();
        consistent(pool, inner, held);
      }
    }
    // blocks of earlier steps freed now, in the middle of a planned step
    const a = take(pool, 4096, held);
    give(old, held);
    while (held.length > 1) give(held[0], held);
    consistent(pool, inner, held);
    give(a, held);
    pool.endStep();
    pool.emptyCache();
    consistent(pool, inner, held);
    assert.equal(inner.reservedBytes, 0);
  });

  it("free(): foreign, other group's, forged and stale blocks are refused, changing nothing", () => {
    const inner = backed();
    const group = new StepPoolGroup();
    const pool = new StepPlannedPool(inner, { group });
    const otherGroup = new StepPoolGroup();
    const elsewhere = new StepPlannedPool(backed(), { group: otherGroup });
    const sibling = new StepPlannedPool(backed(), { group });
    const held: Held[] = [];
    for (let s = 0; s < 3; s++) {
      take(pool, 1000, held);
      give(take(pool, 4000, held), held);
      group.endStep();
    }
    const state = () => ({
      live: pool.requestedBytes,
      held: pool.reservedBytes,
      group: [group.requestedBytes, group.reservedBytes],
      blocks: held.map((h) => [h.block.byteOffset, h.block.byteLength]),
    });
    const forged = Object.create(PlannedBlock.prototype);
    const copied = Object.assign(
      Object.create(PlannedBlock.prototype),
      held[0].block,
    );
    refuse(
      "StepPlannedPool.free(block)",
      hostileHandles({
        otherInstance: () => elsewhere.allocate(64),
        foreign: () => sibling.allocate(64),
        stale: () => {
          const b = pool.allocate(64);
          pool.free(b);
          return b;
        },
        lookalike: () => ({ ...held[0].block }),
      }).concat([
        { name: "forged prototype", value: forged },
        { name: "copied fields", value: copied },
      ]),
      (v) => pool.free(v as never),
      { snapshot: state },
    );
    // stale after its segment was given back (trim, emptyCache): a double free
    const b = pool.allocate(100_000);
    pool.free(b);
    const c = pool.allocate(200_000);
    pool.free(c);
    pool.emptyCache();
    for (const stale of [b, c]) {
      assert.throws(() => pool.free(stale), DoubleFreeError);
    }
    consistent(pool, inner, held);
  });

  it("a block left in an arena is never given back when pins from a plan made for a larger arena reach past it", () => {
    const inner = backed();
    const pool = new StepPlannedPool(inner);
    const held: Held[] = [];
    // plan A: the large request at 0, the small one above it
    for (let s = 0; s < 2; s++) {
      const small = take(pool, 256, held);
      const large = take(pool, 102400, held);
      give(small, held);
      give(large, held);
      pool.endStep();
    }
    pool.emptyCache(); // A's arena goes; the plan is kept
    // plan C: an arena of 102,400 bytes, its small request at the top
    for (let s = 0; s < 2; s++) {
      const a = take(pool, 1024, held);
      const b = take(pool, 101376, held);
      give(b, held);
      give(a, held);
      pool.endStep();
    }
    // C again, its small block outlives the step (left in the arena)
    const a = take(pool, 1024, held);
    give(take(pool, 101376, held), held);
    pool.endStep();
    // A's requests: its pins put the small one just past this arena
    for (let s = 0; s < 3; s++) {
      const small = take(pool, 256, held);
      const large = take(pool, 102400, held);
      give(small, held);
      give(large, held);
      pool.endStep();
      consistent(pool, inner, held);
      assert.ok(
        inner.liveSegmentCount > 0 &&
          pool.segmentCount === inner.liveSegmentCount,
      );
    }
    give(a, held);
    pool.endStep();
    pool.emptyCache();
    assert.equal(inner.reservedBytes, 0);
  });
});

/** The faults a source can show, and where in the pool each is met. */
const MAKE_FAULTS: SegmentFault[] = ["throw", "short", "misaligned"];

describe("StepPlannedPool with a segment source that throws or lies", () => {
  it("a step's first request that fails on the fast path (source throws) leaves the blocks kept in the arena guarded for the next first request", () => {
    const inner = backed();
    const source = new FaultySegmentSource(inner);
    const pool = new StepPlannedPool(source) as Pool;
    const held: Held[] = [];
    // P1: [K 4096 outlives its step (out of the arena), A 8192]
    let k = take(pool, 4096, held);
    for (let s = 0; s < 4; s++) {
      const next = take(pool, 4096, held);
      give(k, held);
      k = next;
      give(take(pool, 8192, held), held);
      pool.endStep();
    }
    give(k, held);
    // P2: [Z 1024, W 4096], both live at once: W at 0, Z above it
    for (let s = 0; s < 3; s++) {
      const z = take(pool, 1024, held);
      const w = take(pool, 4096, held);
      give(z, held);
      give(w, held);
      pool.endStep();
    }
    // P2 again, W left live in the arena
    give(take(pool, 1024, held), held);
    const w = take(pool, 4096, held);
    pool.endStep();
    pool.trim(0); // no free segment outside the arena
    consistent(pool, inner, held);
    // P1's first request: out of the arena, the source throws
    source.arm("throw");
    assert.throws(() => pool.allocate(4096), SegmentSourceError);
    // P2's requests: W's range is still taken
    take(pool, 1024, held);
    take(pool, 4096, held);
    consistent(pool, inner, held);
    for (const h of held.slice()) give(h, held);
    assert.ok(!held.includes(w));
    pool.endStep();
    pool.emptyCache();
    assert.equal(inner.reservedBytes, 0);
  });

  for (const fault of MAKE_FAULTS) {
    it(`a segment made for a request (${fault}): SegmentSourceError, nothing changed`, () => {
      const inner = backed();
      const source = new FaultySegmentSource(inner);
      const pool = new StepPlannedPool(source);
      const held: Held[] = [];
      take(pool as Pool, 4096, held);
      const before = [pool.reservedBytes, pool.requestedBytes];
      source.arm(fault);
      assert.throws(() => pool.allocate(1 << 20), SegmentSourceError);
      assert.equal(source.fired.get(fault), 1);
      assert.deepEqual([pool.reservedBytes, pool.requestedBytes], before);
      consistent(pool as Pool, inner, held);
      take(pool as Pool, 1 << 20, held);
      consistent(pool as Pool, inner, held);
    });

    it(`the arena of a new plan (${fault}): SegmentSourceError, the step still ends and best fit serves the next`, () => {
      const inner = backed();
      const source = new FaultySegmentSource(inner);
      const pool = new StepPlannedPool(source) as Pool;
      const held: Held[] = [];
      const keep = take(pool, 512, held);
      const a = take(pool, 4096, held);
      const b = take(pool, 8192, held);
      give(a, held);
      give(b, held);
      source.arm(fault);
      assert.throws(() => pool.endStep(), SegmentSourceError);
      assert.equal(source.fired.get(fault), 1);
      assert.equal(pool.stepCount, 1);
      assert.equal(pool.arenaByteLength, 0);
      consistent(pool, inner, held);
      for (let s = 0; s < 4; s++) {
        const c = take(pool, 4096, held);
        const d = take(pool, 8192, held);
        give(c, held);
        give(d, held);
        pool.endStep();
        consistent(pool, inner, held);
      }
      assert.equal(pool.stepCount, 5);
      give(keep, held);
      pool.emptyCache();
      assert.equal(inner.reservedBytes, 0);
    });
  }

  it("freeSegment() throws on each give-back path: a typed error, the segment counted gone, state consistent", () => {
    const paths: [string, (pool: Pool, held: Held[]) => void][] = [
      ["trim()", (pool) => pool.trim(0)],
      ["emptyCache()", (pool) => pool.emptyCache()],
      // segments too small for a request go first when one is made
      ["too-small-first", (pool, held) => take(pool, 300_000, held)],
      // a larger plan gives the arena and the free segments back
      ["arena growth", (pool, held) => {
        const x = take(pool, 200_000, held);
        const y = take(pool, 180_000, held);
        give(x, held);
        give(y, held);
        pool.endStep();
      }],
      // a step's end far above the ratio
      ["step-end trim", (pool, held) => {
        for (const h of held.slice()) give(h, held);
        take(pool, 256, held);
        pool.endStep();
      }],
    ];
    for (const [name, path] of paths) {
      const inner = backed();
      const source = new FaultySegmentSource(inner);
      const pool = new StepPlannedPool(source) as Pool;
      const held: Held[] = [];
      // a planned arena, and free segments of several sizes outside it
      for (let s = 0; s < 2; s++) {
        give(take(pool, 8192, held), held);
        pool.endStep();
      }
      const keep = take(pool, 10_000, held);
      const frees = [20_000, 40_000, 60_000].map((n) => take(pool, n, held));
      for (const f of frees) give(f, held);
      source.arm("free-throws");
      const error = attempt(() => path(pool, held));
      assert.equal(source.fired.get("free-throws"), 1, name);
      assert.ok(error instanceof SegmentSourceError, `${name}: ${error}`);
      consistent(pool, inner, held);
      // the pool goes on
      for (let s = 0; s < 3; s++) {
        give(take(pool, 8192, held), held);
        pool.endStep();
        consistent(pool, inner, held);
      }
      assert.ok(keep.block.requestedByteLength > 0 || !held.includes(keep));
      for (const h of held.slice()) give(h, held);
      pool.emptyCache();
      assert.equal(inner.reservedBytes, 0, name);
    }
  });

  it("a group's step ends every pool's step when one pool's source throws", () => {
    const group = new StepPoolGroup();
    const inners = [backed(), backed()];
    const sources = inners.map((i) => new FaultySegmentSource(i));
    const pools = sources.map((s) => new StepPlannedPool(s, { group }) as Pool);
    const held: Held[] = [];
    for (const p of pools) give(take(p, 4096, held), held);
    sources[0].arm("throw");
    assert.throws(() => group.endStep(), SegmentSourceError);
    assert.deepEqual(pools.map((p) => p.stepCount), [1, 1]);
    pools.forEach((p, i) => consistent(p, inners[i], held));
    // room made in a sibling when its source throws on release
    const big = take(pools[1], 400_000, held);
    give(big, held);
    for (let s = 0; s < 3; s++) group.endStep(); // its arena goes idle
    assert.ok(pools[1].arenaByteLength >= 400_000);
    sources[1].arm("free-throws");
    assert.throws(() => take(pools[0], 400_000, held), SegmentSourceError);
    assert.equal(sources[1].fired.get("free-throws"), 1);
    assert.equal(pools[1].arenaByteLength, 0);
    pools.forEach((p, i) => consistent(p, inners[i], held));
    for (const h of held.slice()) give(h, held);
    group.endStep();
    for (const p of pools) p.emptyCache();
    for (const i of inners) assert.equal(i.reservedBytes, 0);
  });

  it("a source that hands out a segment over memory another segment holds is refused (short segment)", () => {
    // a short segment accepted would put the block's tail in the next
    // segment's memory: the pool refuses it and gives it back
    const inner = backed();
    const source = new FaultySegmentSource(inner);
    const pool = new StepPlannedPool(source) as Pool;
    source.arm("short");
    assert.throws(() => pool.allocate(8192), SegmentSourceError);
    assert.equal(inner.reservedBytes, 0);
    pool.validate();
  });
});
