import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  alignUp,
  isPowerOfTwo,
  validateAlignment,
  validateByteLength,
  validateCapacity,
  validateInteger,
} from "./validate.ts";
import { AllotError, InvalidArgumentError } from "./errors.ts";

describe("validate", () => {
  it("validateByteLength() refuses NaN, infinities, fractions, negatives and oversize", () => {
    for (const v of [NaN, Infinity, -Infinity, 0.5, -1, 2 ** 53]) {
      assert.throws(() => validateByteLength(v), InvalidArgumentError);
    }
    const error = (() => {
      try {
        validateByteLength(2048, 1024);
      } catch (e) {
        return e as InvalidArgumentError;
      }
    })();
    assert.ok(error instanceof AllotError);
    assert.equal(error?.value, 2048);
    assert.equal(error?.limit, 1024);
    assert.match(error!.message, /at most 1024, received 2048/);
  });

  it("validateAlignment() accepts exactly the powers of two up to the limit", () => {
    fc.assert(
      fc.property(fc.integer({ min: -5, max: 70000 }), (v) => {
        const ok = v > 0 && (v & (v - 1)) === 0 && v <= 65536;
        if (ok) assert.equal(validateAlignment(v), v);
        else assert.throws(() => validateAlignment(v), InvalidArgumentError);
      }),
    );
  });

  it("isPowerOfTwo() works above 32 bits", () => {
    assert.ok(isPowerOfTwo(2 ** 40));
    assert.ok(!isPowerOfTwo(2 ** 40 + 2));
  });

  it("alignUp() returns the smallest aligned value not below the input", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 50 }),
        fc.integer({ min: 0, max: 16 }),
        (v, log) => {
          const a = 2 ** log;
          const r = alignUp(v, a);
          assert.ok(r >= v && r - v < a && r % a === 0);
        },
      ),
    );
  });

  it("validateInteger() names the argument and the range", () => {
    assert.throws(
      () => validateInteger(9, 0, 8, "axis"),
      /axis.*\[0, 8\], received 9/,
    );
  });
});

describe("validateCapacity", () => {
  it("validateCapacity() accepts whole byte counts and Infinity, refuses the rest", () => {
    assert.equal(validateCapacity(undefined), Infinity);
    assert.equal(validateCapacity(Infinity), Infinity);
    assert.equal(validateCapacity(0), 0);
    for (
      const v of [
        -1,
        NaN,
        0.5,
        2 ** 53,
        -Infinity,
        "5" as unknown as number,
        null as unknown as number,
      ]
    ) {
      assert.throws(() => validateCapacity(v), InvalidArgumentError);
    }
  });
});
