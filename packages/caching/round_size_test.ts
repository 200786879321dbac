import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError } from "@allot/core";
import {
  expandRoundupPower2Divisions,
  roundSize,
  roundupPower2NextDivision,
} from "./round_size.ts";

describe("roundSize", () => {
  it("roundSize() gives the smallest multiple of the granule that holds the request", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 40 }), (n) => {
        const r = roundSize(n);
        assert.ok(r >= n && r >= 512);
        assert.equal(r % 512, 0);
        assert.ok(r - n < 512 || n < 512);
      }),
    );
  });

  it("roundSize() with divisions rounds up to the next of d equal steps between powers of two", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 ** 36 }),
        fc.constantFrom(2, 4, 8, 16),
        (n, d) => {
          const r = roundSize(n, 512, expandRoundupPower2Divisions(d));
          assert.ok(r >= n);
          assert.equal(r % 512, 0);
          if (n > 512 * d) {
            const floor = 2 ** Math.floor(Math.log2(n));
            const step = floor / d;
            // At most one step above the request, and on a step boundary.
            assert.ok(r - n < step || r === n, `${n} -> ${r}`);
            assert.equal((r - floor) % step, 0);
          }
        },
      ),
    );
  });

  it("roundupPower2NextDivision() keeps powers of two and is monotonic", () => {
    assert.equal(roundupPower2NextDivision(2 ** 30, 8), 2 ** 30);
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 2 ** 40 }),
        fc.integer({ min: 2, max: 2 ** 40 }),
        (a, b) => {
          const [x, y] = a <= b ? [a, b] : [b, a];
          assert.ok(
            roundupPower2NextDivision(x, 4) <= roundupPower2NextDivision(y, 4),
          );
        },
      ),
    );
  });

  it("expandRoundupPower2Divisions() refuses bad entries", () => {
    assert.throws(() => expandRoundupPower2Divisions(3), /power of two/);
    assert.throws(() => expandRoundupPower2Divisions([]), /1 to 17/);
    assert.throws(() => expandRoundupPower2Divisions(new Array(18).fill(2)));
    assert.equal(expandRoundupPower2Divisions([0, 2]).length, 17);
  });
  it("roundSize() refuses a negative, fractional or non-number size and a bad granule", () => {
    for (const bad of [-1, -512, 0.5, NaN, Infinity, 2 ** 53, "4" as unknown]) {
      assert.throws(() => roundSize(bad as number), InvalidArgumentError);
    }
    assert.throws(() => roundSize(100, 0), InvalidArgumentError);
    assert.throws(() => roundSize(100, 384), InvalidArgumentError);
    assert.equal(roundSize(0), 512);
  });
});
