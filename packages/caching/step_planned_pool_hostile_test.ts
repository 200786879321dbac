// StepPlannedPool and StepPoolGroup from the public API with hostile
// callers: values of every wrong kind, re-entrant sources through a group,
// stale handles, `synchronize({ signal })`; each refused call changes
// nothing (the pool's figures and a recount are the same before and after).

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllotError,
  ContractViolationError,
  DoubleFreeError,
  InvalidArgumentError,
  type MockMemory,
  MockSegmentSource,
  UseAfterFreeError,
} from "@allot/core";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";
import { StepPoolGroup } from "./step_pool_group.ts";

/** What a refused call must leave as it was. */
function figures(pool: StepPlannedPool<MockMemory>) {
  pool.validate();
  return {
    requested: pool.requestedBytes,
    reserved: pool.reservedBytes,
    peakRequested: pool.peakRequestedBytes,
    peakReserved: pool.peakReservedBytes,
    segments: pool.segmentCount,
    created: pool.segmentsCreated,
    released: pool.segmentsReleased,
    steps: pool.stepCount,
    replans: pool.replanCount,
    arena: pool.arenaByteLength,
  };
}

const HOSTILE: unknown[] = [
  NaN,
  -1,
  1.5,
  2 ** 53,
  Number.MAX_VALUE,
  Infinity,
  -Infinity,
  "16",
  "",
  null,
  undefined,
  16n,
  true,
  {},
  { valueOf: () => 16 },
  [16],
  Symbol("x"),
];

function busyPool(): {
  pool: StepPlannedPool<MockMemory>;
  live: PlannedBlock<MockMemory>[];
} {
  const pool = new StepPlannedPool(
    new MockSegmentSource({ alignment: 256, capacityBytes: 1 << 24 }),
  );
  for (let s = 0; s < 3; s++) {
    const a = pool.allocate(4096), b = pool.allocate(300);
    pool.free(a);
    pool.free(b);
    pool.endStep();
  }
  const live = [pool.allocate(5000), pool.allocate(64), pool.allocate(4096)];
  pool.free(live.splice(1, 1)[0]);
  return { pool, live };
}

describe("StepPlannedPool hostile values", () => {
  it("allocate / tryAllocate / trim refuse every hostile value, changing nothing", () => {
    const { pool } = busyPool();
    const before = figures(pool);
    for (const v of HOSTILE) {
      for (const call of ["allocate", "tryAllocate"] as const) {
        assert.throws(
          () => pool[call](v as number),
          InvalidArgumentError,
          `${call}(${String(v)})`,
        );
      }
      if (v !== 0 && v !== undefined && !Object.is(v, -0)) {
        assert.throws(
          () => pool.trim(v as number),
          InvalidArgumentError,
          `trim(${String(v)})`,
        );
      }
      assert.deepEqual(figures(pool), before, String(v));
    }
    // a size past the source's largest segment
    assert.throws(
      () => pool.allocate(pool.source.maxSegmentByteLength + 1),
      InvalidArgumentError,
    );
    assert.deepEqual(figures(pool), before);
  });

  it("free() refuses non-blocks, foreign, stale and forged blocks, changing nothing", () => {
    const { pool, live } = busyPool();
    const other = busyPool();
    const freed = pool.allocate(700);
    pool.free(freed);
    const before = figures(pool);
    const offset = freed.byteOffset, length = freed.byteLength;
    for (const v of HOSTILE) {
      assert.throws(() => pool.free(v as never), InvalidArgumentError);
    }
    // another pool's live block: a handle this pool does not hold
    assert.throws(() => pool.free(other.live[0]), DoubleFreeError);
    assert.throws(
      () => pool.free({ ...live[0] } as never),
      InvalidArgumentError,
    );
    assert.throws(
      () => pool.free(Object.create(live[0]) as never),
      InvalidArgumentError,
    );
    assert.throws(() => pool.free(freed), DoubleFreeError);
    assert.deepEqual(figures(pool), before);
    // a stale handle keeps what it said while ranges around it merge, split
    // and serve later requests
    const more = [pool.allocate(700), pool.allocate(3000)];
    for (const b of more) pool.free(b);
    pool.free(live[0]);
    pool.endStep();
    pool.allocate(100);
    assert.equal(freed.byteOffset, offset);
    assert.equal(freed.byteLength, length);
    assert.equal(freed.requestedByteLength, 0);
    assert.equal(live[0].byteLength, 5120);
    assert.throws(() => pool.free(freed), DoubleFreeError);
    assert.throws(() => pool.free(live[0]), DoubleFreeError);
  });

  it("synchronize({ signal }): resolves, refuses bad options and aborted signals, changing nothing; after dispose UseAfterFreeError", async () => {
    const { pool, live } = busyPool();
    const before = figures(pool);
    await pool.synchronize();
    await pool.synchronize({});
    await pool.synchronize({ signal: new AbortController().signal });
    for (const v of [null, 1, "x", true]) {
      await assert.rejects(
        pool.synchronize(v as never),
        InvalidArgumentError,
      );
    }
    for (const signal of [{}, 1, Object.create(AbortSignal.prototype)]) {
      await assert.rejects(
        pool.synchronize({ signal } as never),
        InvalidArgumentError,
      );
    }
    const reason = new Error("stop");
    await assert.rejects(
      pool.synchronize({ signal: AbortSignal.abort(reason) }),
      (e) => e === reason,
    );
    assert.deepEqual(figures(pool), before);
    // a call that returns a promise rejects, never throws
    const p = pool.synchronize(1 as never);
    assert.ok(p instanceof Promise);
    await assert.rejects(p, InvalidArgumentError);
    for (const b of live) pool.free(b);
    pool.dispose();
    await assert.rejects(pool.synchronize(), UseAfterFreeError);
  });
});

describe("StepPlannedPool re-entrant sources", () => {
  it("a source that calls synchronize() while the pool makes a segment is refused (typed)", async () => {
    const source = new MockSegmentSource({ alignment: 256 });
    const pool = new StepPlannedPool(source);
    const acquire = source.tryAllocateSegment.bind(source);
    let inner: Promise<void> | undefined;
    source.tryAllocateSegment = (size, options) => {
      inner ??= pool.synchronize();
      return acquire(size, options);
    };
    pool.free(pool.allocate(4096));
    await assert.rejects(inner!, ContractViolationError);
  });

  it("a strict pool's source that calls back is refused with ContractViolationError, not a broken-invariant Error", () => {
    const source = new MockSegmentSource({ alignment: 256 });
    const pool = new StepPlannedPool(source, { strict: true });
    const keep = pool.allocate(4096);
    const acquire = source.tryAllocateSegment.bind(source);
    const errors: unknown[] = [];
    source.tryAllocateSegment = (size, options) => {
      for (
        const f of [
          () => pool.allocate(256),
          () => pool.free(keep),
          () => pool.endStep(),
          () => pool.trim(0),
        ]
      ) {
        try {
          f();
          errors.push("accepted");
        } catch (e) {
          errors.push(e);
        }
      }
      return acquire(size, options);
    };
    const b = pool.allocate(1 << 16);
    assert.equal(errors.length, 4);
    for (const e of errors) {
      assert.ok(e instanceof ContractViolationError, String(e));
    }
    pool.free(b);
    pool.free(keep);
    pool.validate();
  });

  it("a pool is refused while it makes room in its group: another pool's source that calls back into it changes nothing", () => {
    const group = new StepPoolGroup();
    const sa = new MockSegmentSource({ alignment: 256 });
    const sb = new MockSegmentSource({ alignment: 256 });
    const a = new StepPlannedPool(sa, { group });
    const b = new StepPlannedPool(sb, { group });
    // b holds free segments the group's bound gives back once a grows
    const bs = [];
    for (let i = 0; i < 4; i++) bs.push(b.allocate(1 << 16));
    for (const x of bs) b.free(x);
    const release = sb.freeSegment.bind(sb);
    const seen: unknown[] = [];
    sb.freeSegment = (segment) => {
      release(segment);
      try {
        seen.push(a.allocate(4096));
      } catch (e) {
        seen.push(e);
      }
    };
    const big = a.allocate(1 << 20);
    assert.ok(seen.length > 0, "b gave a segment back while a grew");
    for (const e of seen) {
      assert.ok(e instanceof ContractViolationError, String(e));
    }
    assert.equal(a.requestedBytes, 1 << 20);
    a.validate();
    b.validate();
    sb.freeSegment = release;
    // the step recorded one request: it repeats from its plan
    a.free(big);
    for (let s = 0; s < 3; s++) {
      group.endStep();
      const x = a.allocate(1 << 20), y = a.allocate(4096);
      assert.ok(
        x.memory !== y.memory || x.byteOffset + x.byteLength <= y.byteOffset ||
          y.byteOffset + y.byteLength <= x.byteOffset,
      );
      a.free(x);
      a.free(y);
      a.validate();
    }
  });

  it("group.endStep() called by a pool's source while the group ends its step is refused; every pool's step ends once", () => {
    const group = new StepPoolGroup();
    const sa = new MockSegmentSource({ alignment: 256 });
    const sb = new MockSegmentSource({ alignment: 256 });
    const a = new StepPlannedPool(sa, { group });
    const b = new StepPlannedPool(sb, { group });
    const release = sb.freeSegment.bind(sb);
    const seen: unknown[] = [];
    sb.freeSegment = (segment) => {
      release(segment);
      try {
        group.endStep();
        seen.push("accepted");
      } catch (e) {
        seen.push(e);
      }
    };
    // b makes many segments in a step, then none: its free ones go back at
    // the step's end (the plan's arena replaces them)
    const xs = [];
    for (let i = 0; i < 8; i++) xs.push(b.allocate(1 << 16));
    a.free(a.allocate(4096));
    for (const x of xs) b.free(x);
    group.endStep();
    assert.ok(seen.length > 0, "b gave a segment back at the step's end");
    for (const e of seen) {
      assert.ok(e instanceof ContractViolationError, String(e));
    }
    assert.equal(a.stepCount, 1);
    assert.equal(b.stepCount, 1);
    sb.freeSegment = release;
    group.endStep();
    assert.equal(a.stepCount, 2);
  });
});

describe("StepPlannedPool hostile model", () => {
  it("random calls with hostile values mixed in: refused ones change nothing, live bytes keep their pattern, figures equal a recount", () => {
    type Op =
      | { k: "alloc"; size: number }
      | { k: "free"; i: number }
      | { k: "stale"; i: number }
      | { k: "step" }
      | { k: "trim"; t: number }
      | { k: "bad"; v: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.oneof(
          fc.integer({ min: 1, max: 600 }),
          fc.integer({ min: 1, max: 70000 }),
        ).map((size) => ({ k: "alloc", size }) as Op),
      },
      { weight: 5, arbitrary: fc.nat(99).map((i) => ({ k: "free", i }) as Op) },
      {
        weight: 1,
        arbitrary: fc.nat(99).map((i) => ({ k: "stale", i }) as Op),
      },
      { weight: 2, arbitrary: fc.constant({ k: "step" } as Op) },
      {
        weight: 1,
        arbitrary: fc.nat(1 << 18).map((t) => ({ k: "trim", t }) as Op),
      },
      {
        weight: 1,
        arbitrary: fc.integer({ min: 0, max: HOSTILE.length - 1 }).map((v) =>
          ({ k: "bad", v }) as Op
        ),
      },
    );
    fc.assert(
      fc.property(
        fc.array(op, { minLength: 1, maxLength: 160 }),
        fc.boolean(),
        (ops, grouped) => {
          const group = grouped ? new StepPoolGroup() : undefined;
          const source = new MockSegmentSource({
            alignment: 256,
            backed: true,
            capacityBytes: 1 << 24,
          });
          const pool = new StepPlannedPool(source, { group });
          const live: {
            b: PlannedBlock<MockMemory>;
            seed: number;
            size: number;
          }[] = [];
          const stale: PlannedBlock<MockMemory>[] = [];
          const staleAt: [number, number][] = [];
          let seed = 1;
          const fill = (b: PlannedBlock<MockMemory>, s: number, n: number) => {
            const bytes = b.memory.bytes!;
            for (let i = 0; i < n; i++) {
              bytes[b.byteOffset + i] = (s * 31 + i * 7) & 255;
            }
          };
          const check = () => {
            let requested = 0;
            for (const { b, seed: s, size } of live) {
              requested += size;
              const bytes = b.memory.bytes!;
              for (let i = 0; i < size; i += 13) {
                assert.equal(bytes[b.byteOffset + i], (s * 31 + i * 7) & 255);
              }
              assert.equal(
                bytes[b.byteOffset + size - 1],
                (s * 31 + (size - 1) * 7) & 255,
              );
            }
            assert.equal(pool.requestedBytes, requested);
            assert.equal(pool.reservedBytes, source.reservedBytes);
            // a freed handle says what it was, whatever became of its range
            stale.forEach((b, i) => {
              assert.deepEqual([b.byteOffset, b.byteLength], staleAt[i]);
              assert.equal(b.requestedByteLength, 0);
            });
            pool.validate();
          };
          for (const o of ops) {
            if (o.k === "alloc") {
              const b = pool.allocate(o.size);
              assert.equal(b.requestedByteLength, o.size);
              assert.ok(b.byteLength >= o.size && b.byteOffset % 256 === 0);
              fill(b, ++seed, o.size);
              live.push({ b, seed, size: o.size });
            } else if (o.k === "free" && live.length > 0) {
              const [x] = live.splice(o.i % live.length, 1);
              pool.free(x.b);
              stale.push(x.b);
              staleAt.push([x.b.byteOffset, x.b.byteLength]);
            } else if (o.k === "stale" && stale.length > 0) {
              const before = figures(pool);
              assert.throws(
                () => pool.free(stale[o.i % stale.length]),
                DoubleFreeError,
              );
              assert.deepEqual(figures(pool), before);
            } else if (o.k === "step") {
              (group ?? pool).endStep();
            } else if (o.k === "trim") {
              assert.ok(pool.trim(o.t) >= 0);
            } else if (o.k === "bad") {
              const before = figures(pool);
              const v = HOSTILE[o.v];
              assert.throws(() => pool.allocate(v as number));
              assert.throws(() => pool.free(v as never));
              assert.deepEqual(figures(pool), before);
            }
            check();
          }
          for (const x of live) pool.free(x.b);
          pool.trim(0);
          assert.equal(pool.requestedBytes, 0);
          assert.equal(pool.reservedBytes, 0);
          assert.equal(source.reservedBytes, 0);
        },
      ),
      { numRuns: 150 },
    );
  });

  it("a pool disposed by another pool's source while the group ends its step: the pools after it still end their step", () => {
    const group = new StepPoolGroup();
    const a = new StepPlannedPool(
      new MockSegmentSource({ alignment: 256 }),
      { group },
    );
    const sb = new MockSegmentSource({ alignment: 256 });
    const b = new StepPlannedPool(sb, { group });
    const c = new StepPlannedPool(
      new MockSegmentSource({ alignment: 256 }),
      { group },
    );
    const xs = [];
    for (let i = 0; i < 8; i++) xs.push(b.allocate(1 << 16));
    for (const x of xs) b.free(x);
    const release = sb.freeSegment.bind(sb);
    sb.freeSegment = (segment) => {
      release(segment);
      a.dispose();
    };
    group.endStep();
    sb.freeSegment = release;
    assert.ok(a.disposed);
    assert.equal(group.poolCount, 2);
    assert.equal(b.stepCount, 1);
    assert.equal(c.stepCount, 1);
  });

  it("validate() reports a block whose internal fields a caller overwrote with AllotError naming the broken invariant", () => {
    const pool = new StepPlannedPool(new MockSegmentSource());
    const a = pool.allocate(4096), b = pool.allocate(300);
    pool.validate();
    const poked = b as unknown as { _offset: number };
    const offset = poked._offset;
    poked._offset = offset + 8;
    assert.throws(
      () => pool.validate(),
      (error: unknown) =>
        error instanceof AllotError && error.constructor === AllotError &&
        /^StepPlannedPool is inconsistent: block tiling broken at \d+$/.test(
          error.message,
        ),
    );
    poked._offset = offset;
    pool.validate();
    pool.free(a);
    pool.free(b);
    pool.validate();
  });
});
