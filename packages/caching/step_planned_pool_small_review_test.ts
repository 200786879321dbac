/**
 * Outside-in review of `StepPlannedPool` and `StepPoolGroup` on the paths
 * added for drifting steps: small requests (<= 512 B) in shared 2 KiB
 * segments, the pool's and group's bounds, outgrown segments given back,
 * room for growth, and the arena kept at a group's step end. Public API
 * only. Every live block carries a byte pattern written through the
 * segment memory of a backed `MockSegmentSource`; a ledger source counts
 * each segment made and given back, remembers the given-back ones (no live
 * block may sit in one), and misbehaves on demand (refuses, throws,
 * returns short, misaligned or overlapping memory, re-enters the pool).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  ContractViolationError,
  DoubleFreeError,
  InvalidArgumentError,
  type MockMemory,
  MockSegmentSource,
  type Segment,
  type SegmentRequestOptions,
  type SegmentSource,
  SegmentSourceError,
  UseAfterFreeError,
} from "@allot/core";
import { PlannedBlock, StepPlannedPool, StepPoolGroup } from "./mod.ts";
import {
  assertDisjoint,
  checkPattern,
  FaultySegmentSource,
  modelRuns,
  type SegmentFault,
  writePattern,
} from "../core/_test_faults.ts";

type Fault = "refuse" | "overlap" | Exclude<SegmentFault, "free-throws">;

/**
 * The source under core's `FaultySegmentSource` (which throws, returns
 * short or misaligned segments and re-enters when armed): keeps the ledger,
 * and refuses or hands a live segment out again when armed.
 */
class Ledger implements SegmentSource<MockMemory> {
  readonly inner: MockSegmentSource;
  acquired = 0;
  released = 0;
  /** segments handed out and not given back */
  readonly live = new Set<Segment<MockMemory>>();
  /** memories of segments given back */
  readonly gone = new Set<MockMemory>();
  armed: "refuse" | "overlap" | undefined;
  overlapsGiven = 0;
  #overlaps = new Set<Segment<MockMemory>>();

  constructor(capacityBytes: number) {
    this.inner = new MockSegmentSource({
      backed: true,
      alignment: 256,
      capacityBytes,
    });
  }
  get device() {
    return this.inner.device;
  }
  get alignment(): number {
    return this.inner.alignment;
  }
  get maxSegmentByteLength(): number {
    return this.inner.maxSegmentByteLength;
  }
  get capacityBytes(): number {
    return this.inner.capacityBytes;
  }

  tryAllocateSegment(
    byteLength: number,
    options?: SegmentRequestOptions,
  ): Segment<MockMemory> | undefined {
    const fault = this.armed;
    this.armed = undefined;
    if (fault === "refuse") return undefined;
    if (fault === "overlap" && this.live.size > 0) {
      // a live segment handed out again (same memory and range)
      const [first] = this.live;
      if (first.byteLength >= byteLength) {
        const lie = { ...first };
        this.#overlaps.add(lie);
        this.overlapsGiven++;
        return lie;
      }
    }
    const segment = this.inner.tryAllocateSegment(byteLength, options);
    if (segment === undefined) return undefined;
    this.acquired++;
    this.live.add(segment);
    return segment;
  }

  freeSegment(segment: Segment<MockMemory>): void {
    // an overlapping lie given back: the real one stays live
    if (this.#overlaps.delete(segment)) return;
    if (!this.live.has(segment)) {
      throw new Error("freeSegment: not a live segment (double give-back)");
    }
    this.live.delete(segment);
    this.gone.add(segment.memory);
    this.released++;
    this.inner.freeSegment(segment);
  }
}

/** Core's faulty source over a {@linkcode Ledger}: one `armed` for both. */
class LedgerSource extends FaultySegmentSource<MockMemory> {
  readonly ledger: Ledger;
  #armed: Fault | undefined;

  constructor(capacityBytes = 2 ** 30) {
    const ledger = new Ledger(capacityBytes);
    super(ledger);
    this.ledger = ledger;
  }
  get armed(): Fault | undefined {
    return this.#armed;
  }
  /** Misbehaves on the next segment made (`undefined`: disarms). */
  set armed(fault: Fault | undefined) {
    this.#armed = fault;
    const mine = fault === "refuse" || fault === "overlap";
    this.ledger.armed = mine ? fault : undefined;
    this.arm(mine ? undefined : fault);
  }
  get live(): Set<Segment<MockMemory>> {
    return this.ledger.live;
  }
  get gone(): Set<MockMemory> {
    return this.ledger.gone;
  }
  get acquired(): number {
    return this.ledger.acquired;
  }
  get released(): number {
    return this.ledger.released;
  }
  get overlapsGiven(): number {
    return this.ledger.overlapsGiven;
  }
  get liveBytes(): number {
    let n = 0;
    for (const s of this.live) n += s.byteLength;
    return n;
  }
}

/** A live block with its pattern id. */
interface Held {
  pool: StepPlannedPool<MockMemory>;
  block: PlannedBlock<MockMemory>;
  id: number;
}

let nextId = 1;
const tallies = {
  allocs: 0,
  steps: 0,
  fast: 0,
  made: 0,
  replans: 0,
  refused: 0,
};

function fill(h: Held): void {
  const { block } = h;
  writePattern(
    block.memory.bytes!.subarray(
      block.byteOffset,
      block.byteOffset + block.requestedByteLength,
    ),
    h.id,
  );
}

function checkOne(h: Held, full: boolean): void {
  const { block } = h;
  const n = block.requestedByteLength;
  const bytes = block.memory.bytes!;
  if (full || n <= 64) {
    checkPattern(
      bytes.subarray(block.byteOffset, block.byteOffset + n),
      h.id,
      `block@${block.byteOffset}+${n}`,
    );
    return;
  }
  // head and tail (a sample: the full check runs at step ends)
  const head = bytes.subarray(block.byteOffset, block.byteOffset + 16);
  checkPattern(head, h.id, `block@${block.byteOffset}+${n} head`);
  for (let k = n - 16; k < n; k++) {
    const want = (h.id * 131 + k * 7 + (h.id >>> 8)) & 0xff;
    if (bytes[block.byteOffset + k] !== want) {
      throw new Error(`Corruption: byte ${k} of block ${h.id} (tail)`);
    }
  }
}

/** Every invariant the review checks, for pools on ledger sources. */
function check(
  pools: readonly StepPlannedPool<MockMemory>[],
  sources: readonly LedgerSource[],
  held: readonly Held[],
  group: StepPoolGroup | undefined,
  full: boolean,
): void {
  let groupLive = 0, groupHeld = 0;
  for (let i = 0; i < pools.length; i++) {
    const pool = pools[i], source = sources[i];
    pool.validate();
    let live = 0;
    for (const h of held) {
      if (h.pool === pool) live += h.block.requestedByteLength;
    }
    assert.equal(pool.requestedBytes, live, "requested != recount");
    assert.equal(pool.reservedBytes, source.liveBytes, "held != source");
    assert.equal(pool.segmentCount, source.live.size, "segments != source");
    assert.ok(
      pool.reservedBytes >= pool.liveBytes,
      `held ${pool.reservedBytes} below live ${pool.liveBytes}`,
    );
    assert.ok(pool.liveBytes >= pool.requestedBytes);
    assert.equal(
      pool.segmentsCreated - pool.segmentsReleased,
      pool.segmentCount,
    );
    groupLive += live;
    groupHeld += pool.reservedBytes;
  }
  if (group !== undefined) {
    assert.equal(group.requestedBytes, groupLive, "group requested");
    assert.equal(group.reservedBytes, groupHeld, "group held");
  }
  for (const h of held) {
    const src = sources[pools.indexOf(h.pool)];
    assert.ok(
      !src.gone.has(h.block.memory),
      `live block ${h.id} in a segment given back`,
    );
    assert.ok(
      h.block.byteOffset + h.block.byteLength <= h.block.memory.bytes!.length,
      "block past its segment",
    );
    checkOne(h, full);
  }
  assertDisjoint(held.map((h) => [
    h.block.memory,
    h.block.byteOffset,
    h.block.byteOffset + h.block.byteLength,
  ]));
}

type Op =
  | { k: "alloc"; pool: number; size: number }
  | { k: "free"; at: number }
  | { k: "step" }
  | { k: "run"; pool: number; t: number; keep: number }
  | { k: "grow"; pool: number; by: number }
  | { k: "trim"; pool: number; frac: number }
  | { k: "empty"; pool: number }
  | { k: "fault"; pool: number; fault: Fault };

const smallSize = fc.oneof(
  fc.integer({ min: 1, max: 512 }),
  fc.constantFrom(1, 4, 255, 256, 257, 511, 512, 513),
);
const anySize = fc.oneof(
  { weight: 4, arbitrary: smallSize },
  { weight: 2, arbitrary: fc.integer({ min: 513, max: 8192 }) },
  { weight: 2, arbitrary: fc.integer({ min: 8192, max: 96 * 1024 }) },
);
/** a step's template: sizes in order; each freed after `life` more requests, or kept past the step (-1) */
const template = fc.array(
  fc.record({
    size: fc.oneof(smallSize, anySize),
    life: fc.integer({ min: -1, max: 4 }),
  }),
  { minLength: 1, maxLength: 10 },
);

function opArb(pools: number) {
  const pool = fc.nat(pools - 1);
  return fc.oneof(
    {
      weight: 4,
      arbitrary: fc.record({
        k: fc.constant("alloc" as const),
        pool,
        size: anySize,
      }),
    },
    {
      weight: 4,
      arbitrary: fc.record({ k: fc.constant("free" as const), at: fc.nat() }),
    },
    { weight: 3, arbitrary: fc.record({ k: fc.constant("step" as const) }) },
    {
      weight: 6,
      arbitrary: fc.record({
        k: fc.constant("run" as const),
        pool,
        t: fc.nat(3),
        keep: fc.nat(3),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        k: fc.constant("grow" as const),
        pool,
        by: fc.integer({ min: -30, max: 30 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        k: fc.constant("trim" as const),
        pool,
        frac: fc.double({ min: 0, max: 1.2, noNaN: true }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ k: fc.constant("empty" as const), pool }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        k: fc.constant("fault" as const),
        pool,
        fault: fc.constantFrom<Fault>(
          "refuse",
          "throw",
          "short",
          "misaligned",
          "overlap",
          "reenter",
        ),
      }),
    },
  ) as fc.Arbitrary<Op>;
}

/** Runs one sequence; returns nothing, throws on a broken invariant. */
function runModel(
  nPools: number,
  grouped: boolean,
  ratio: number,
  capacity: number,
  templates: { size: number; life: number }[][],
  ops: Op[],
): void {
  const group = grouped
    ? new StepPoolGroup({ maxHeldRatio: ratio })
    : undefined;
  const sources: LedgerSource[] = [];
  const pools: StepPlannedPool<MockMemory>[] = [];
  for (let i = 0; i < nPools; i++) {
    const s = new LedgerSource(capacity);
    sources.push(s);
    pools.push(
      new StepPlannedPool(s, {
        group,
        maxHeldRatio: grouped ? undefined : ratio,
      }),
    );
  }
  const held: Held[] = [];
  const growing: (Held | undefined)[] = pools.map(() => undefined);
  const take = (p: number, size: number): Held | undefined => {
    const pool = pools[p];
    let block: PlannedBlock<MockMemory> | undefined;
    const before = [pool.requestedBytes, pool.reservedBytes, pool.segmentCount];
    try {
      block = pool.tryAllocate(size);
    } catch (e) {
      if (!(e instanceof SegmentSourceError)) throw e;
      // a refused call changes nothing a caller sees but held bytes (a
      // trim may have run before the source failed)
      assert.equal(pool.requestedBytes, before[0]);
      return undefined;
    }
    if (block === undefined) {
      tallies.refused++;
      return undefined;
    }
    tallies.allocs++;
    assert.equal(block.requestedByteLength, size);
    assert.ok(block.byteLength >= size);
    assert.equal(block.byteOffset % 256, 0);
    const h = { pool, block, id: nextId++ };
    fill(h);
    held.push(h);
    return h;
  };
  const give = (h: Held) => {
    const i = held.indexOf(h);
    if (i < 0) return;
    held.splice(i, 1);
    h.pool.free(h.block);
    for (let p = 0; p < growing.length; p++) {
      if (growing[p] === h) growing[p] = undefined;
    }
  };
  const endStep = () => {
    if (group !== undefined) {
      try {
        group.endStep();
      } catch (e) {
        if (!(e instanceof SegmentSourceError)) throw e;
      }
    } else {
      for (const p of pools) {
        try {
          p.endStep();
        } catch (e) {
          if (!(e instanceof SegmentSourceError)) throw e;
        }
      }
    }
  };
  let reentries = 0;
  for (const op of ops) {
    switch (op.k) {
      case "alloc":
        take(op.pool, op.size);
        break;
      case "free":
        if (held.length > 0) give(held[op.at % held.length]);
        break;
      case "step":
        endStep();
        break;
      case "run": {
        const t = templates[op.t % templates.length];
        const mine: (Held | undefined)[] = [];
        for (let i = 0; i < t.length; i++) {
          mine.push(take(op.pool, t[i].size));
          for (let j = 0; j < i; j++) {
            if (t[j].life >= 0 && j + t[j].life === i && mine[j]) {
              give(mine[j]!);
              mine[j] = undefined;
            }
          }
        }
        // short-lived ones still live go at the step's end; `keep` more
        // of the long-lived stay (they outlive the step)
        let kept = 0;
        for (let j = 0; j < t.length; j++) {
          const h = mine[j];
          if (h === undefined) continue;
          if (t[j].life < 0 && kept < op.keep) kept++;
          else give(h);
        }
        endStep();
        check(pools, sources, held, group, true);
        break;
      }
      case "grow": {
        // a block that creeps up (a KV cache): the new one made before the
        // old one is freed
        const old = growing[op.pool];
        const base = old?.block.requestedByteLength ?? 3000;
        const size = Math.max(1, Math.round(base * (1 + op.by / 100)));
        const h = take(op.pool, size);
        if (old !== undefined) give(old);
        growing[op.pool] = h;
        break;
      }
      case "trim": {
        const pool = pools[op.pool];
        const target = Math.floor(pool.reservedBytes * op.frac);
        try {
          const after = pool.trim(target);
          assert.equal(after, pool.reservedBytes);
        } catch (e) {
          if (!(e instanceof SegmentSourceError)) throw e;
        }
        break;
      }
      case "empty":
        try {
          pools[op.pool].emptyCache();
        } catch (e) {
          if (!(e instanceof SegmentSourceError)) throw e;
        }
        break;
      case "fault": {
        const s = sources[op.pool];
        s.armed = op.fault;
        s.onReenter = () => {
          // re-enter the pool from inside the source: allocate and free a
          // small block, end a step
          if (reentries++ > 3) return;
          // (this pool, then the others: a pool the source grows may
          // make the group take back this pool's free segments)
          const h = take(
            (op.pool + reentries) % nPools,
            100 + reentries * 30_000,
          );
          if (h !== undefined) give(h);
          if (reentries % 2 === 0) endStep();
        };
        break;
      }
    }
    check(pools, sources, held, group, false);
  }
  for (const s of sources) s.armed = undefined;
  check(pools, sources, held, group, true);
  for (const h of [...held]) give(h);
  endStep();
  check(pools, sources, held, group, true);
  for (const p of pools) {
    tallies.steps += p.stepCount;
    tallies.fast += p.fastStepCount;
    tallies.made += p.segmentsCreated;
    tallies.replans += p.replanCount;
    p.dispose();
  }
  for (const s of sources) {
    assert.equal(s.live.size, 0, "segment leaked at the source");
    assert.equal(s.acquired, s.released, "acquire != release");
    assert.equal(s.ledger.inner.reservedBytes, 0);
  }
}

describe("StepPlannedPool small segments review: model", () => {
  it("random sequences over 1-3 pools, grouped or not, tight bounds, lying sources", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 }),
        fc.boolean(),
        fc.constantFrom(1, 1.05, 1.1, 1.5),
        fc.constantFrom(2 ** 30, 512 * 1024, 160 * 1024),
        fc.array(template, { minLength: 1, maxLength: 4 }),
        fc.array(opArb(3), { minLength: 1, maxLength: 60 }),
        (nPools, grouped, ratio, capacity, templates, ops) => {
          ops = ops.map((op) =>
            "pool" in op ? { ...op, pool: op.pool % nPools } : op
          );
          runModel(nPools, grouped, ratio, capacity, templates, ops);
        },
      ),
      { numRuns: modelRuns(1000) },
    );
    console.log("small review model:", tallies);
  });
});

describe("StepPlannedPool small segments review: repeated steps", () => {
  it("steps that repeat (the fast path), then drift, with small blocks kept past their step", () => {
    const fast = { before: tallies.fast };
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 }),
        fc.boolean(),
        fc.constantFrom(1, 1.1),
        fc.array(template, { minLength: 1, maxLength: 3 }),
        fc.array(
          fc.record({
            pool: fc.nat(2),
            t: fc.nat(3),
            times: fc.integer({ min: 1, max: 8 }),
            keep: fc.nat(2),
            then: opArb(3),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        (nPools, grouped, ratio, templates, runs) => {
          const ops: Op[] = [];
          for (const r of runs) {
            for (let i = 0; i < r.times; i++) {
              ops.push({
                k: "run",
                pool: r.pool % nPools,
                t: r.t,
                keep: r.keep,
              });
            }
            const then = r.then;
            ops.push(
              "pool" in then ? { ...then, pool: then.pool % nPools } : then,
            );
          }
          runModel(nPools, grouped, ratio, 2 ** 30, templates, ops);
        },
      ),
      { numRuns: modelRuns(300) },
    );
    console.log("repeated steps:", tallies.fast - fast.before, "fast steps");
    assert.ok(tallies.fast > fast.before, "no step on the fast path");
  });
});

describe("StepPlannedPool small segments review: collaborators", () => {
  it("a source that calls back into the pool while it makes or gives back a segment is refused (typed), the pool unchanged", () => {
    // (before: a re-entrant allocate inside the small segment's making
    // recorded two requests as item 0; after a step and emptyCache the
    // free index lost a block)
    const source = new LedgerSource();
    const pool = new StepPlannedPool(source);
    const held: Held[] = [];
    const kept = pool.allocate(300);
    const k: Held = { pool, block: kept, id: nextId++ };
    fill(k);
    held.push(k);
    const other = pool.allocate(20_000);
    const o: Held = { pool, block: other, id: nextId++ };
    fill(o);
    held.push(o);
    const calls: [string, () => unknown][] = [
      ["allocate", () => pool.allocate(100)],
      ["tryAllocate", () => pool.tryAllocate(100_000)],
      ["free", () => pool.free(kept)],
      ["endStep", () => pool.endStep()],
      ["trim", () => pool.trim(0)],
      ["emptyCache", () => pool.emptyCache()],
      ["dispose", () => pool.dispose()],
    ];
    for (const [name, call] of calls) {
      let seen: unknown = "not called";
      source.armed = "reenter";
      source.onReenter = () => {
        const before = [
          pool.requestedBytes,
          pool.reservedBytes,
          pool.segmentCount,
        ];
        try {
          call();
          seen = undefined;
        } catch (e) {
          seen = e;
        }
        assert.deepEqual(
          [pool.requestedBytes, pool.reservedBytes, pool.segmentCount],
          before,
          name,
        );
      };
      const h: Held = { pool, block: pool.allocate(60_000), id: nextId++ };
      fill(h);
      held.push(h);
      assert.ok(seen instanceof ContractViolationError, `${name}: ${seen}`);
      assert.match(String(seen), /called back into the pool/);
      check([pool], [source], held, undefined, true);
      pool.free(h.block);
      held.pop();
      pool.endStep();
      pool.trim(0);
    }
    // giving back re-enters too
    let seen: unknown;
    source.onReenter = undefined;
    const release = source.freeSegment.bind(source);
    source.freeSegment = (s) => {
      try {
        pool.free(kept);
      } catch (e) {
        seen = e;
      }
      release(s);
    };
    held.splice(held.indexOf(o), 1);
    pool.free(other);
    pool.trim(0);
    assert.ok(seen instanceof ContractViolationError);
    source.freeSegment = release;
    check([pool], [source], held, undefined, true);
    pool.free(kept);
    pool.dispose();
    assert.equal(source.live.size, 0);
  });
});

describe("StepPlannedPool small segments review: overlapping memory", () => {
  it("a source that hands out memory the pool holds is refused (SegmentSourceError), the live block intact", () => {
    let refused = 0;
    for (const first of [100, 5000, 40_000]) {
      const source = new LedgerSource();
      const pool = new StepPlannedPool(source);
      const a: Held = { pool, block: pool.allocate(first), id: nextId++ };
      fill(a);
      let tried = 0;
      for (const size of [64, 1000, 2000, 30_000]) {
        source.armed = "overlap";
        const before = [pool.requestedBytes, pool.reservedBytes];
        let error: unknown;
        let b: PlannedBlock<MockMemory> | undefined;
        try {
          b = pool.allocate(size);
        } catch (e) {
          error = e;
        }
        const fired = source.overlapsGiven > tried;
        tried = source.overlapsGiven;
        source.armed = undefined;
        if (!fired) {
          // served from memory the pool held, or a segment the source made
          assert.ok(b !== undefined, String(error));
          pool.free(b);
          continue;
        }
        refused++;
        assert.ok(error instanceof SegmentSourceError, String(error));
        assert.match(String(error), /overlaps one the pool holds/);
        assert.deepEqual([pool.requestedBytes, pool.reservedBytes], before);
        check([pool], [source], [a], undefined, true);
      }
      pool.free(a.block);
      pool.dispose();
      assert.equal(source.live.size, 0);
      assert.equal(source.acquired, source.released);
    }
    assert.ok(refused >= 4, `${refused} overlapping segments`);
  });
});

describe("StepPlannedPool small segments review: refused calls", () => {
  it("double free, a foreign block, a block of a disposed pool, bad sizes: typed errors, nothing changed", () => {
    const sa = new LedgerSource(), sb = new LedgerSource();
    const group = new StepPoolGroup({ maxHeldRatio: 1 });
    const a = new StepPlannedPool(sa, { group });
    const b = new StepPlannedPool(sb, { group });
    const held: Held[] = [];
    const take = (pool: StepPlannedPool<MockMemory>, n: number) => {
      const h: Held = { pool, block: pool.allocate(n), id: nextId++ };
      fill(h);
      held.push(h);
      return h;
    };
    // small blocks sharing a 2 KiB segment; the middle ones freed first,
    // then the first and last (neighbours merge around the survivors)
    const smalls = [1, 255, 256, 257, 511, 512].map((n) => take(a, n));
    const big = take(a, 70_000);
    const bSmall = take(b, 40);
    const state = () =>
      JSON.stringify([
        a.requestedBytes,
        a.reservedBytes,
        a.segmentCount,
        b.requestedBytes,
        b.reservedBytes,
        group.requestedBytes,
        group.reservedBytes,
      ]);
    for (const i of [2, 3, 1, 4, 0, 5]) {
      const h = smalls[i];
      a.free(h.block);
      held.splice(held.indexOf(h), 1);
      const s = state();
      assert.throws(() => a.free(h.block), DoubleFreeError);
      assert.equal(state(), s);
      check([a, b], [sa, sb], held, group, true);
    }
    let s = state();
    // a live block of the other pool, a forged one, hostile values
    // (another pool's block: a handle this pool does not hold)
    assert.throws(() => a.free(bSmall.block), DoubleFreeError);
    for (
      const v of [undefined, null, {}, 1, Object.create(PlannedBlock.prototype)]
    ) {
      assert.throws(() => a.free(v as never), InvalidArgumentError);
    }
    for (const n of [-1, 0.5, NaN, Infinity, 2 ** 60, "8" as never]) {
      assert.throws(() => a.allocate(n), InvalidArgumentError);
      assert.throws(() => a.tryAllocate(n), InvalidArgumentError);
    }
    assert.equal(state(), s);
    // the small segment given back (trim), then its block freed again
    group.endStep();
    a.trim(0);
    assert.throws(() => a.free(smalls[0].block), DoubleFreeError);
    check([a, b], [sa, sb], held, group, true);
    // a disposed pool: its blocks and calls refused
    b.free(bSmall.block);
    held.splice(held.indexOf(bSmall), 1);
    b.dispose();
    assert.equal(sb.live.size, 0);
    assert.equal(sb.acquired, sb.released);
    assert.throws(() => b.free(bSmall.block), UseAfterFreeError);
    assert.throws(() => b.allocate(8), UseAfterFreeError);
    assert.throws(() => b.endStep(), UseAfterFreeError);
    assert.throws(() => b.trim(0), UseAfterFreeError);
    s = state();
    assert.throws(() => a.free(bSmall.block));
    assert.equal(state(), s);
    // the pool still works, the group counts it alone
    const again = take(a, 300);
    check([a], [sa], held, undefined, true);
    assert.equal(group.requestedBytes, a.requestedBytes);
    a.free(again.block);
    a.free(big.block);
    group.endStep();
    a.dispose();
    assert.equal(sa.live.size, 0);
    assert.equal(sa.acquired, sa.released);
  });

  it("a step that threw (source) still ends; the next steps follow their plan, blocks intact", () => {
    for (const fault of ["throw", "short", "misaligned", "refuse"] as const) {
      const source = new LedgerSource();
      const group = new StepPoolGroup();
      const pool = new StepPlannedPool(source, { group });
      const held: Held[] = [];
      const step = (throwAt: number) => {
        const mine: Held[] = [];
        const sizes = [300, 40_000, 12, 9000, 512, 513, 100_000, 4];
        for (let i = 0; i < sizes.length; i++) {
          if (i === throwAt) source.armed = fault;
          let block: PlannedBlock<MockMemory> | undefined;
          try {
            block = pool.tryAllocate(sizes[i]);
          } catch (e) {
            assert.ok(e instanceof SegmentSourceError, String(e));
          }
          source.armed = undefined;
          if (block === undefined) continue;
          const h: Held = { pool, block, id: nextId++ };
          fill(h);
          held.push(h);
          mine.push(h);
          if (i % 3 === 2) {
            const f = mine.shift()!;
            pool.free(f.block);
            held.splice(held.indexOf(f), 1);
          }
        }
        // one small and one large block outlive the step
        for (const h of mine.slice(2)) {
          pool.free(h.block);
          held.splice(held.indexOf(h), 1);
        }
        source.armed = throwAt < 0 ? fault : undefined;
        try {
          group.endStep();
        } catch (e) {
          assert.ok(e instanceof SegmentSourceError, String(e));
        }
        source.armed = undefined;
        check([pool], [source], held, group, true);
        // the kept ones go a step later
        for (const h of mine.slice(0, 2)) {
          pool.free(h.block);
          held.splice(held.indexOf(h), 1);
        }
      };
      // (the first step makes segments: its fault fires)
      for (let k = 0; k < 12; k++) {
        step(k === 0 ? 1 : k % 4 === 1 ? k % 8 : k % 4 === 3 ? -1 : 99);
      }
      check([pool], [source], held, group, true);
      group.endStep();
      pool.dispose();
      assert.equal(source.live.size, 0, fault);
      assert.equal(source.acquired, source.released, fault);
      // (core's faulty source fired the faults it shows)
      if (fault !== "refuse") assert.ok(source.fired.get(fault)! > 0, fault);
    }
  });
});

describe("StepPlannedPool small segments review: bounds and growth", () => {
  it("small blocks that outlive their step do not pin a growing block's memory", () => {
    // a KV cache grown each step by concatenation, with a 4-byte shape
    // upload and a 300-byte uniform kept alive a step or more each time
    const source = new LedgerSource();
    const pool = new StepPlannedPool(source);
    const held: Held[] = [];
    const take = (n: number) => {
      const h: Held = { pool, block: pool.allocate(n), id: nextId++ };
      fill(h);
      held.push(h);
      return h;
    };
    const give = (h: Held) => {
      held.splice(held.indexOf(h), 1);
      pool.free(h.block);
    };
    let cache = take(16_384);
    const small: Held[] = [];
    let peakLive = 0;
    for (let step = 0; step < 60; step++) {
      const next = take(16_384 + (step + 1) * 1024);
      const tmp = take(next.block.requestedByteLength);
      small.push(take(4), take(300));
      peakLive = pool.requestedBytes; // (this step's peak: growing)
      give(cache);
      cache = next;
      give(tmp);
      while (small.length > 4) give(small.shift()!);
      pool.endStep();
      check([pool], [source], held, undefined, step % 10 === 0);
    }
    // the small blocks sit in 2 KiB segments of their own: held bytes stay
    // near the peak (not a large segment pinned by each small block)
    assert.ok(
      pool.reservedBytes <= 1.25 * peakLive + 8192,
      `held ${pool.reservedBytes}, peak live ${peakLive}`,
    );
    assert.ok(pool.segmentCount <= 8, `${pool.segmentCount} segments`);
    for (const h of [...held]) give(h);
    pool.dispose();
    assert.equal(source.live.size, 0);
  });

  it("a pool of a few tiny requests keeps its one segment (bound at least blocks + 2 KiB)", () => {
    const source = new LedgerSource();
    const pool = new StepPlannedPool(source, { maxHeldRatio: 1 });
    for (let step = 0; step < 40; step++) {
      const a = pool.allocate(4), b = pool.allocate(4);
      pool.free(a);
      pool.free(b);
      pool.endStep();
    }
    // (a 2 KiB small segment in the first step, then the plan's arena)
    assert.ok(pool.segmentsCreated <= 2, `${pool.segmentsCreated} made`);
    assert.equal(pool.segmentCount, 1);
    assert.ok(pool.reservedBytes <= 2048);
    pool.dispose();
    assert.equal(source.live.size, 0);
  });

  it("growth seen once gets an exact segment, twice room; shrinking reuses; outgrown segments go back", () => {
    const source = new LedgerSource();
    const pool = new StepPlannedPool(source);
    let live = pool.allocate(100_000);
    const grow = (n: number) => {
      const next = pool.allocate(n);
      pool.free(live);
      live = next;
      pool.endStep();
      pool.validate();
      assert.equal(pool.reservedBytes, source.liveBytes);
    };
    pool.endStep();
    grow(110_000); // growth seen once: an exact segment
    const once = pool.reservedBytes;
    assert.ok(once <= 100_096 + 110_080, `${once}`);
    const made = pool.segmentsCreated;
    grow(121_000); // seen twice: the 100 KB one outgrown and gone
    assert.ok(
      pool.segmentCount <= 2,
      `${pool.segmentCount} segments after growth seen twice`,
    );
    for (let k = 0; k < 20; k++) grow(121_000 + (k + 1) * 2000);
    // room for growth: not a segment per step
    assert.ok(
      pool.segmentsCreated - made <= 12,
      `${pool.segmentsCreated - made} segments for 21 growth steps`,
    );
    assert.ok(pool.segmentCount <= 3, `${pool.segmentCount} segments`);
    const madeBefore = pool.segmentsCreated;
    for (let k = 0; k < 10; k++) grow(150_000 - k * 3000); // shrinking
    assert.ok(pool.segmentsCreated - madeBefore <= 1);
    pool.free(live);
    pool.endStep();
    pool.dispose();
    assert.equal(source.live.size, 0);
    assert.equal(source.acquired, source.released);
  });

  it("groups of 2 and 3 pools with tight bounds: small segments only while the group's bound allows", () => {
    for (const n of [2, 3]) {
      const group = new StepPoolGroup({ maxHeldRatio: 1 });
      const sources = Array.from({ length: n }, () => new LedgerSource());
      const pools = sources.map((s) => new StepPlannedPool(s, { group }));
      const held: Held[] = [];
      let peak = 0;
      for (let step = 0; step < 30; step++) {
        const mine: Held[] = [];
        for (let p = 0; p < n; p++) {
          const sizes = step % 2 === 0
            ? [64, 200, 512, 4, 90, 300, 1, 511]
            : [50_000 + p * 1000, 20_000, 3000];
          for (const size of sizes) {
            const h: Held = {
              pool: pools[p],
              block: pools[p].allocate(size),
              id: nextId++,
            };
            fill(h);
            held.push(h);
            mine.push(h);
          }
        }
        peak = Math.max(peak, group.requestedBytes);
        check(pools, sources, held, group, false);
        for (const h of mine) {
          if (h.block.requestedByteLength === 1 && step < 20) continue;
          h.pool.free(h.block);
          held.splice(held.indexOf(h), 1);
        }
        group.endStep();
        check(pools, sources, held, group, true);
      }
      for (const h of [...held]) h.pool.free(h.block);
      held.length = 0;
      group.endStep();
      // the group's held bytes near its peak: small segments count
      assert.ok(
        group.reservedBytes <= 1.3 * peak + n * 4096,
        `${n} pools: held ${group.reservedBytes}, peak ${peak}`,
      );
      for (const p of pools) p.dispose();
      for (const s of sources) {
        assert.equal(s.live.size, 0);
        assert.equal(s.acquired, s.released);
      }
    }
  });
});

describe("StepPlannedPool small segments review: placement rules", () => {
  const mock = () => new MockSegmentSource({ alignment: 256 });

  it("a small request the plan does not place takes a small segment, not the arena or a large free range", () => {
    // no plan yet: a large free segment is there
    const p1 = new StepPlannedPool(mock());
    const big = p1.allocate(50_000);
    p1.free(big);
    const s1 = p1.allocate(100);
    assert.notEqual(s1.memory, big.memory, "small block in a large segment");
    // a plan's arena, free: the step leaves the plan at once
    const p2 = new StepPlannedPool(mock());
    for (let i = 0; i < 4; i++) {
      p2.free(p2.allocate(50_000));
      p2.endStep();
    }
    const arena = p2.allocate(50_000);
    p2.free(arena);
    p2.endStep();
    assert.ok(p2.arenaByteLength >= 50_000);
    const s2 = p2.allocate(100);
    assert.notEqual(s2.memory, arena.memory, "small block in the arena");
    // it shares its 2 KiB segment with the next small ones
    const s3 = p2.allocate(300);
    assert.equal(s3.memory, s2.memory);
  });

  it("under a tight group bound a small request the plan does not place takes the arena; under a loose one a segment of its own", () => {
    for (const ratio of [1, 1.5]) {
      const group = new StepPoolGroup({ maxHeldRatio: ratio });
      const a = new StepPlannedPool(mock(), { group });
      const b = new StepPlannedPool(mock(), { group });
      const keep = a.allocate(100_000);
      let large = b.allocate(20_000);
      for (let i = 0; i < 4; i++) {
        b.free(large);
        group.endStep();
        large = b.allocate(20_000);
      }
      b.free(large);
      group.endStep();
      assert.ok(b.arenaByteLength >= 20_000, `ratio ${ratio}: no arena`);
      const s = b.allocate(60);
      if (ratio === 1) {
        assert.equal(
          s.memory,
          large.memory,
          "a small segment past the group's bound",
        );
      } else assert.notEqual(s.memory, large.memory);
      b.free(s);
      a.free(keep);
      group.endStep();
    }
  });

  it("under a tight group bound with no arena a small request gets an exact segment, not a shared 2 KiB one", () => {
    // (a pool that never ended a step has no arena to take it)
    const group = new StepPoolGroup({ maxHeldRatio: 1 });
    const a = new StepPlannedPool(mock(), { group });
    const b = new StepPlannedPool(mock(), { group });
    const keep = a.allocate(100_000);
    const s = b.allocate(60);
    assert.equal(b.arenaByteLength, 0);
    // the bound is 1x live bytes: only the 256-byte alignment of the one
    // block over it (a shared small segment held 2 KiB)
    assert.equal(b.reservedBytes, 256);
    assert.ok(group.reservedBytes <= 100_060 + 256 + 256);
    // under a loose bound the small segment is shared
    const loose = new StepPoolGroup({ maxHeldRatio: 2 });
    const c = new StepPlannedPool(mock(), { group: loose });
    const d = new StepPlannedPool(mock(), { group: loose });
    const keep2 = c.allocate(100_000);
    const t = d.allocate(60);
    assert.equal(d.reservedBytes, 2048);
    for (const [p, blk] of [[a, keep], [b, s], [c, keep2], [d, t]] as const) {
      p.free(blk);
    }
  });

  it("growth: an exact segment when seen once, room when seen twice; outgrown segments go back within the bound", () => {
    for (const ratio of [1.1, 4]) {
      const pool = new StepPlannedPool(mock(), { maxHeldRatio: ratio });
      let live = pool.allocate(100_000);
      pool.endStep();
      const seen: [number, number][] = [];
      for (const n of [110_000, 121_000, 133_000, 146_000, 160_000]) {
        const next = pool.allocate(n);
        seen.push([pool.segmentCount, pool.reservedBytes]);
        pool.free(live);
        live = next;
        pool.endStep();
      }
      // 121,000: the 100,096-byte segment it outgrew goes back, and growth
      // was seen once (110,000 was not made from a smaller free block), so
      // its segment is exact: 110,080 + 121,088
      assert.deepEqual(seen[1], [2, 231_168], `ratio ${ratio}`);
      // never more than the live one and the one just outgrown's successor
      for (const [count] of seen) assert.equal(count, 2, `ratio ${ratio}`);
      pool.free(live);
      pool.dispose();
    }
  });

  it("a request that outgrows a free segment gives back that one, never a free small segment", () => {
    const pool = new StepPlannedPool(mock(), { maxHeldRatio: 4 });
    pool.free(pool.allocate(100)); // a small segment, free
    pool.free(pool.allocate(2000)); // a 2,048-byte segment, free
    const made = pool.segmentsCreated;
    const grown = pool.allocate(2400); // outgrows the 2,048-byte one
    assert.equal(pool.segmentsCreated, made + 1);
    const small = pool.allocate(100); // the small segment is still there
    assert.equal(pool.segmentsCreated, made + 1, "small segment given back");
    pool.free(small);
    pool.free(grown);
    pool.dispose();
  });
});
