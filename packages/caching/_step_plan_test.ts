import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { type _PlanItem, _PlanMemo, _planStep } from "./_step_plan.ts";
import { modelRuns } from "../core/_test_faults.ts";

/** How long an item lives (one past the last op while live at the end). */
const life = (it: _PlanItem) =>
  (it.end === Infinity ? Number.MAX_SAFE_INTEGER : it.end) - it.start;

/** Greedy-by-size written plainly: what `_planStep` must lay out. */
function reference(
  items: readonly _PlanItem[],
  alignment: number,
  limit = Infinity,
) {
  const offsets = new Float64Array(items.length);
  const placed: number[] = [];
  let size = 0;
  const put = (i: number) => {
    let at = placed.findIndex((j) => offsets[j] > offsets[i]);
    if (at < 0) at = placed.length;
    placed.splice(at, 0, i);
  };
  items.forEach((it, i) => {
    if (it.fixed === undefined) return;
    offsets[i] = it.fixed;
    put(i);
    size = Math.max(size, it.fixed + it.size);
  });
  const order = items.map((_, i) => i).filter((i) =>
    items[i].fixed === undefined
  )
    .sort((a, b) =>
      items[b].size - items[a].size ||
      life(items[b]) - life(items[a]) ||
      items[a].start - items[b].start
    );
  for (const i of order) {
    const { size: need, start, end } = items[i];
    let best = -1, bestGap = Infinity, cursor = 0;
    for (const j of placed) {
      if (items[j].start >= end || start >= items[j].end) continue;
      const gap = offsets[j] - cursor;
      if (gap >= need && gap < bestGap) [best, bestGap] = [cursor, gap];
      cursor = Math.max(cursor, offsets[j] + items[j].size);
    }
    const at = best >= 0 ? best : cursor;
    if (at + need > limit) {
      offsets[i] = -1;
      continue;
    }
    offsets[i] = at;
    size = Math.max(size, at + need);
    put(i);
  }
  return { offsets, size: Math.ceil(size / alignment) * alignment };
}

const itemsArb = fc.array(
  fc.record({
    size: fc.integer({ min: 1, max: 16 }).map((u) => u * 256),
    start: fc.nat(40),
    life: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.constant(Infinity)),
    fixed: fc.option(fc.nat(16).map((u) => u * 256), { freq: 8 }),
  }).map(({ size, start, life, fixed }): _PlanItem => ({
    size,
    start,
    end: start + life,
    fixed: fixed ?? undefined,
  })),
  { maxLength: 40 },
);

describe("_planStep and _PlanMemo", () => {
  it("lay out what plain greedy-by-size does; a kept layout is the one laid out", () => {
    const memo = new _PlanMemo(4);
    fc.assert(
      fc.property(
        itemsArb,
        fc.oneof(fc.constant(Infinity), fc.integer({ min: 256, max: 8192 })),
        fc.nat(3),
        (items, limit, again) => {
          const want = reference(items, 256, limit);
          const got = _planStep(items, 256, limit);
          assert.deepEqual(Array.from(got.offsets), Array.from(want.offsets));
          assert.equal(got.size, want.size);
          // the memo, asked again (and after other layouts), agrees
          for (let k = 0; k <= again; k++) {
            const kept = memo.plan(items, 256, limit);
            assert.deepEqual(
              Array.from(kept.offsets),
              Array.from(want.offsets),
            );
            assert.equal(kept.size, want.size);
          }
          // an input that differs in one field is laid out afresh
          if (items.length > 0) {
            const i = again % items.length;
            for (
              const other of [
                { ...items[i], size: items[i].size + 256 },
                { ...items[i], start: items[i].start - 1 },
                { ...items[i], end: items[i].end + 1 },
                { ...items[i], fixed: (items[i].fixed ?? 256) + 256 },
              ]
            ) {
              const changed = items.map((it, k) => k === i ? other : it);
              const o = memo.plan(changed, 256, limit);
              assert.deepEqual(
                Array.from(o.offsets),
                Array.from(reference(changed, 256, limit).offsets),
              );
            }
          }
          // items that live at once never overlap (fixed ones aside)
          for (let i = 0; i < items.length; i++) {
            for (let j = i + 1; j < items.length; j++) {
              const a = items[i], b = items[j];
              const oa = got.offsets[i], ob = got.offsets[j];
              if (oa < 0 || ob < 0) continue;
              if (a.fixed !== undefined && b.fixed !== undefined) continue;
              if (a.start >= b.end || b.start >= a.end) continue;
              assert.ok(oa + a.size <= ob || ob + b.size <= oa, "overlap");
            }
          }
        },
      ),
      { numRuns: modelRuns(300) },
    );
  });
});
