import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { collectByAge } from "./collect_by_age.ts";
import { modelRuns } from "./_test_faults.ts";

interface Item {
  age: number;
  size: number;
  /** The release callback refuses it (taken meanwhile). */
  taken: boolean;
}

/**
 * The reference: the loop both policies wrote before it moved to core,
 * released in the order of `candidates`; `stopAtTarget` is MPS's early
 * break. Returns the released items in order.
 */
function reference(items: Item[], target: number, stopAtTarget: boolean) {
  const left = items.map((item, i) => ({ item, i }));
  let totalAge = 0;
  for (const { item } of left) totalAge += item.age;
  const released: number[] = [];
  let bytes = 0;
  let progress = true;
  while (bytes < target && progress && left.length > 0) {
    const threshold = totalAge / left.length;
    progress = false;
    for (let k = 0; k < left.length;) {
      if (stopAtTarget && bytes >= target) break;
      const { item, i } = left[k];
      if (item.age >= threshold) {
        progress = true;
        totalAge -= item.age;
        left.splice(k, 1);
        released.push(i);
        if (!item.taken) bytes += item.size;
      } else k++;
    }
  }
  return { released, bytes };
}

const items = fc.array(
  fc.record({
    age: fc.nat({ max: 1000 }),
    size: fc.integer({ min: 1, max: 1 << 20 }),
    taken: fc.boolean(),
  }),
  { maxLength: 40 },
);

describe("collectByAge", () => {
  it("collectByAge releases what the policies' own loops released, in the same order, and stops where they stopped (random candidates, ages, sizes, targets, both stop rules)", () => {
    fc.assert(
      fc.property(
        items,
        fc.nat({ max: 1 << 24 }),
        fc.boolean(),
        (list, target, stopAtTarget) => {
          const calls: number[] = [];
          const result = collectByAge(
            list.map((_, i) => i),
            list.map((x) => x.age),
            list.map((x) => x.size),
            target,
            (i) => {
              calls.push(i);
              return !list[i].taken;
            },
            { stopAtTarget },
          );
          const want = reference(list, target, stopAtTarget);
          assert.deepEqual(calls, want.released);
          assert.equal(result.releasedBytes, want.bytes);
          assert.equal(
            result.releasedCount,
            calls.filter((i) => !list[i].taken).length,
          );
          // Each candidate at most once.
          assert.equal(new Set(calls).size, calls.length);
          // Stops only when the target is met, nothing is left, or a pass
          // released nothing (every candidate left is younger than the
          // average of those left).
          const left = list.filter((_, i) => !calls.includes(i));
          if (result.releasedBytes < target && left.length > 0) {
            const average = left.reduce((a, x) => a + x.age, 0) / left.length;
            assert.ok(left.every((x) => x.age < average));
          }
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("collectByAge with stopAtTarget stops at the release that reaches the target", () => {
    const released: number[] = [];
    const result = collectByAge(
      [0, 1, 2, 3],
      [9, 9, 9, 9],
      [100, 100, 100, 100],
      150,
      (i) => {
        released.push(i);
        return true;
      },
      { stopAtTarget: true },
    );
    assert.deepEqual(released, [0, 1]);
    assert.equal(result.releasedBytes, 200);
    const exact: number[] = [];
    collectByAge([0, 1, 2], [5, 5, 5], [100, 100, 100], 200, (i) => {
      exact.push(i);
      return true;
    }, { stopAtTarget: true });
    assert.deepEqual(exact, [0, 1]); // the target reached exactly: stop
    const all: number[] = [];
    collectByAge([0, 1, 2, 3], [9, 9, 9, 9], [100, 100, 100, 100], 150, (i) => {
      all.push(i);
      return true;
    });
    assert.deepEqual(all, [0, 1, 2, 3]); // PyTorch finishes the pass
  });
});
