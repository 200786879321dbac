import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Stat } from "./stat.ts";
import { modelRuns } from "./_test_faults.ts";

describe("Stat", () => {
  it("Stat keeps current = allocated - freed and peak = max current", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -100, max: 100 })), (deltas) => {
        const s = new Stat();
        let current = 0, peak = 0;
        for (const d of deltas) {
          if (d >= 0) s.increase(d);
          else if (current + d >= 0) s.decrease(-d);
          else continue;
          current += d;
          peak = Math.max(peak, current);
        }
        assert.equal(s.current, current);
        assert.equal(s.peak, peak);
        assert.equal(s.allocated - s.freed, current);
      }),
      { numRuns: modelRuns() },
    );
  });

  it("Stat.resetPeak() sets the peak to the current value", () => {
    const s = new Stat();
    s.increase(10);
    s.decrease(7);
    s.resetPeak();
    assert.equal(s.peak, 3);
    s.resetAccumulated();
    assert.deepEqual(s.values(), {
      current: 3,
      peak: 3,
      allocated: 0,
      freed: 0,
    });
  });
});
