// The fast path of StepPlannedPool (a request of the plan placed by one
// array read): steps that follow a plan, leave it midway, free late or
// early, switch between kept plans and leave blocks in the arena. Every
// allocation is checked against every live block for overlap.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { type MockMemory, MockSegmentSource } from "@allot/core";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";
import { modelRuns } from "../core/_test_faults.ts";

type Block = PlannedBlock<MockMemory>;

/** Live blocks; `add` fails on any overlap with one of them. */
class LiveSet {
  blocks = new Set<Block>();
  bytes = 0;
  add(b: Block, size: number) {
    assert.ok(b.byteLength >= size, `block of ${b.byteLength} for ${size}`);
    for (const o of this.blocks) {
      if (
        o.memory === b.memory && o.byteOffset < b.byteOffset + b.byteLength &&
        b.byteOffset < o.byteOffset + o.byteLength
      ) {
        assert.fail(
          `[${b.byteOffset}, +${b.byteLength}) overlaps live [${o.byteOffset}, +${o.byteLength})`,
        );
      }
    }
    this.blocks.add(b);
    this.bytes += size;
  }
  delete(b: Block, size: number) {
    assert.ok(this.blocks.delete(b));
    this.bytes -= size;
  }
}

/** A request of a step template: its size and after how many requests it is freed (-1: outlives the step). */
const requestArb = fc.record({
  size: fc.oneof(
    fc.constantFrom(256, 512, 4096, 8192, 65536),
    fc.integer({ min: 1, max: 40000 }),
  ),
  life: fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 5 }) },
    { weight: 1, arbitrary: fc.constant(-1) },
  ),
});
const templateArb = fc.array(requestArb, { minLength: 1, maxLength: 14 });

/** How a step departs from its template. */
const variantArb = fc.record({
  template: fc.nat(3),
  // a request of another size at this index (none past the end)
  resize: fc.option(fc.nat(16), { freq: 4 }),
  // frees shifted by this many requests from this index on (late, early)
  shiftFrom: fc.nat(16),
  shift: fc.oneof(
    { weight: 4, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: -2, max: 3 }) },
  ),
  // how many times it runs in a row
  times: fc.integer({ min: 1, max: 4 }),
});

function runStep(
  pool: StepPlannedPool<MockMemory>,
  live: LiveSet,
  carried: { b: Block; size: number; until: number }[],
  template: { size: number; life: number }[],
  v: { resize: number | null; shiftFrom: number; shift: number },
  step: number,
) {
  const pending: { b: Block; size: number; at: number }[] = [];
  template.forEach((req, i) => {
    const size = v.resize === i ? req.size + 256 : req.size;
    const b = pool.allocate(size);
    live.add(b, size);
    if (req.life < 0) carried.push({ b, size, until: step + 1 + (i % 3) });
    else {
      const shift = i >= v.shiftFrom ? v.shift : 0;
      pending.push({ b, size, at: Math.max(i, i + req.life + shift) });
    }
    for (let k = 0; k < pending.length; k++) {
      if (pending[k].at <= i) {
        pool.free(pending[k].b);
        live.delete(pending[k].b, pending[k].size);
        pending.splice(k--, 1);
      }
    }
    // blocks of earlier steps die in the middle of later ones
    if (i === template.length >> 1) {
      for (let k = 0; k < carried.length; k++) {
        if (carried[k].until <= step) {
          pool.free(carried[k].b);
          live.delete(carried[k].b, carried[k].size);
          carried.splice(k--, 1);
        }
      }
    }
  });
  for (const p of pending) {
    pool.free(p.b);
    live.delete(p.b, p.size);
  }
  pool.endStep();
}

describe("StepPlannedPool fast path", () => {
  it("steps that follow, leave, switch and free late or early never overlap; the figures add up", () => {
    fc.assert(
      fc.property(
        fc.array(templateArb, { minLength: 1, maxLength: 4 }),
        fc.array(variantArb, { minLength: 1, maxLength: 12 }),
        (templates, schedule) => {
          // templates that share their first requests (plans switch midway)
          for (let t = 1; t < templates.length; t++) {
            templates[t] = [
              ...templates[0].slice(0, t * 2),
              ...templates[t],
            ];
          }
          const source = new MockSegmentSource({ alignment: 256 });
          const pool = new StepPlannedPool(source);
          const live = new LiveSet();
          const carried: { b: Block; size: number; until: number }[] = [];
          let step = 0;
          for (const v of schedule) {
            const template = templates[v.template % templates.length];
            for (let r = 0; r < v.times; r++) {
              runStep(pool, live, carried, template, v, step++);
              pool.validate();
              assert.equal(pool.requestedBytes, live.bytes);
            }
          }
          for (const c of carried) pool.free(c.b);
          pool.endStep();
          pool.validate();
          assert.equal(pool.requestedBytes, 0);
          pool.emptyCache();
          assert.equal(source.reservedBytes, 0);
        },
      ),
      { numRuns: modelRuns() * 2 },
    );
  });

  it("a repeating step is served on the fast path with no segment made", () => {
    const source = new MockSegmentSource({ alignment: 256 });
    const pool = new StepPlannedPool(source);
    const live = new LiveSet();
    const carried: { b: Block; size: number; until: number }[] = [];
    const template = [
      { size: 65536, life: 2 },
      { size: 4096, life: 0 },
      { size: 8192, life: 1 },
      { size: 65536, life: 1 },
      { size: 100, life: -1 },
      { size: 30000, life: 0 },
    ];
    const exact = { resize: null, shiftFrom: 0, shift: 0 };
    for (let s = 0; s < 3; s++) {
      runStep(pool, live, carried, template, exact, s);
    }
    const made = source.allocationCount, fast = pool.fastStepCount;
    for (let s = 3; s < 13; s++) {
      runStep(pool, live, carried, template, exact, s);
    }
    assert.equal(pool.fastStepCount - fast, 10);
    assert.equal(source.allocationCount, made);
    assert.equal(pool.replanCount, 1);
    // a late free leaves the fast path for that step; the next one is back
    const late = { resize: null, shiftFrom: 0, shift: 3 };
    runStep(pool, live, carried, template, late, 13);
    pool.validate();
    const back = pool.fastStepCount;
    runStep(pool, live, carried, template, exact, 14);
    runStep(pool, live, carried, template, exact, 15);
    assert.ok(pool.fastStepCount > back, "back on the fast path");
    pool.validate();
  });

  it("two steps that share their first requests each stay on the fast path", () => {
    const source = new MockSegmentSource({ alignment: 256 });
    const pool = new StepPlannedPool(source);
    const live = new LiveSet();
    const carried: { b: Block; size: number; until: number }[] = [];
    const head = [
      { size: 8192, life: 3 },
      { size: 4096, life: 0 },
      { size: 16384, life: 1 },
    ];
    const a = [...head, { size: 65536, life: 1 }, { size: 512, life: 0 }];
    const b = [...head, { size: 1024, life: 0 }, { size: 131072, life: 0 }];
    const exact = { resize: null, shiftFrom: 0, shift: 0 };
    let s = 0;
    for (let r = 0; r < 4; r++) {
      runStep(pool, live, carried, a, exact, s++);
      runStep(pool, live, carried, b, exact, s++);
    }
    const fast = pool.fastStepCount, made = source.allocationCount;
    for (let r = 0; r < 5; r++) {
      runStep(pool, live, carried, a, exact, s++);
      runStep(pool, live, carried, b, exact, s++);
    }
    assert.equal(pool.fastStepCount - fast, 10);
    assert.equal(source.allocationCount, made);
    pool.validate();
  });

  it("steps of more requests than the records first hold (64) are recorded whole: their repeats run on the fast path", () => {
    // the step's records are typed arrays that double as a step grows:
    // a step recorded short (a growth that lost the first records, or the
    // last) is planned from wrong sizes and its repeats never follow it
    const longArb = fc.array(
      fc.record({
        size: fc.oneof(
          fc.constantFrom(256, 4096, 65536),
          fc.integer({ min: 1, max: 40000 }),
        ),
        life: fc.integer({ min: 0, max: 6 }),
      }),
      { minLength: 65, maxLength: 300 },
    );
    fc.assert(
      fc.property(longArb, fc.nat(20), (template, bump) => {
        const source = new MockSegmentSource({ alignment: 256 });
        const pool = new StepPlannedPool(source);
        const live = new LiveSet();
        const carried: { b: Block; size: number; until: number }[] = [];
        const exact = { resize: null, shiftFrom: 0, shift: 0 };
        // the first step's end plans it (its records grew while it ran);
        // every repeat follows that plan, with no segment made
        runStep(pool, live, carried, template, exact, 0);
        pool.validate();
        const made = source.allocationCount;
        let s = 1;
        for (; s < 6; s++) {
          runStep(pool, live, carried, template, exact, s);
          pool.validate();
          assert.equal(pool.requestedBytes, 0);
          assert.equal(pool.fastStepCount, s);
        }
        assert.equal(pool.replanCount, 1);
        assert.equal(source.allocationCount, made);
        // a step that departs late in its requests (past the first 64)
        // leaves the plan there, and comes back
        const resize = { resize: 64 + (bump % (template.length - 64)) };
        runStep(pool, live, carried, template, { ...exact, ...resize }, s++);
        pool.validate();
        for (let r = 0; r < 3; r++) {
          runStep(pool, live, carried, template, exact, s++);
        }
        pool.validate();
        assert.equal(pool.requestedBytes, 0);
        pool.emptyCache();
        assert.equal(source.reservedBytes, 0);
      }),
      { numRuns: Math.max(20, modelRuns() / 10) },
    );
  });
});
