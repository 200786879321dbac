import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { _PeakWindow } from "./_peak_window.ts";

describe("_PeakWindow", () => {
  it("max is the highest of the last `size` values (model)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.nat({ max: 1000 }), { maxLength: 60 }),
        (size, values) => {
          const w = new _PeakWindow(size);
          const seen: number[] = [];
          assert.equal(w.max, 0);
          for (const v of values) {
            w.push(v);
            seen.push(v);
            assert.equal(w.max, Math.max(0, ...seen.slice(-size)));
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
