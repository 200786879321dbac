// findStridedAlias from the outside (review 8): a shape or strides that are
// not arrays, extents that are not non-negative integers and strides that
// are not integers are refused with InvalidArgumentError naming them. They
// threw TypeErrors, or were answered: shape [2] with strides [NaN] said "no
// two elements alias", a shape of [-1] or [2.5] "none", an extent that is
// an object with a valueOf of 2 (stride 0) found an alias.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { findStridedAlias } from "./strided_alias.ts";
import { InvalidArgumentError } from "./errors.ts";

describe("findStridedAlias (review 8)", () => {
  it("refuses shapes and strides that are not arrays of integers", () => {
    const bad: [unknown, unknown, RegExp][] = [
      [null, [1], /^shape$/],
      [[2], null, /^strides$/],
      ["ab", "cd", /^shape$/],
      [{ length: 1, 0: 2 }, [1], /^shape$/],
      [[Number.NaN], [1], /^shape\[0\]$/],
      [[-1], [1], /^shape\[0\]$/],
      [[2.5], [1], /^shape\[0\]$/],
      [[Infinity], [1], /^shape\[0\]$/],
      [[{ valueOf: () => 2 }], [0], /^shape\[0\]$/],
      [[2, "2"], [1, 2], /^shape\[1\]$/],
      [[2], [Number.NaN], /^strides\[0\]$/],
      [[2], [1.5], /^strides\[0\]$/],
      [[2, 2], [Infinity, 1], /^strides\[0\]$/],
      [[2], [2 ** 53], /^strides\[0\]$/],
    ];
    for (const [shape, strides, name] of bad) {
      let caught: unknown;
      try {
        findStridedAlias(shape as number[], strides as number[]);
      } catch (e) {
        caught = e;
      }
      assert.ok(
        caught instanceof InvalidArgumentError,
        `${JSON.stringify(shape)} ${JSON.stringify(strides)}: ${
          String(caught)
        }`,
      );
      assert.match(caught.argument, name);
    }
    // negative strides (flipped views) and empty views are fine
    assert.equal(findStridedAlias([3], [-1]), undefined);
    assert.equal(findStridedAlias([0, 2], [0, 0]), undefined);
    assert.equal(findStridedAlias([], []), undefined);
  });
});
