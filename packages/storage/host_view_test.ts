import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { UseAfterFreeError } from "@allot/core";
import { Buffer } from "./buffer.ts";
import { ShapeError } from "./errors.ts";

describe("Buffer.hostView()", () => {
  it("is the view's elements in order, shares memory, and matches toData() for any contiguous slice", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 6 }),
        fc.nat(),
        fc.constantFrom("f32", "i32", "u8", "f64", "i16") as fc.Arbitrary<
          "f32" | "i32" | "u8" | "f64" | "i16"
        >,
        (rows, cols, pick, dtype) => {
          const data = Array.from({ length: rows * cols }, (_, i) => i + 1);
          using b = Buffer.fromData(dtype, data, { shape: [rows, cols] });
          const start = pick % rows;
          using s = b.slice(0, { start });
          const view = s.hostView();
          assert.equal(view.length, s.length);
          assert.deepEqual([...view], [...s.toData()]);
          assert.equal(view.constructor, s.toData().constructor);
          if (view.length > 0) {
            view[0] = 100;
            assert.equal(b.get([start, 0]), 100);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("refuses a strided view and a released buffer", () => {
    using b = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
    using t = b.transpose();
    assert.throws(() => t.hostView(), ShapeError);
    const c = b.clone();
    c.release();
    assert.throws(() => c.hostView(), UseAfterFreeError);
  });
});
