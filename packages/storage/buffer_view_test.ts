import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "../core/_test_faults.ts";
import { InvalidArgumentError } from "@allot/core";
import {
  alignedStorageLength,
  alignedStrides,
  broadcastShapes,
  BufferView,
  columnMajorStrides,
  rowMajorStrides,
  ShapeError,
} from "./mod.ts";
import * as model from "./_test_model.ts";

/** Storage indices of a view's elements in row-major logical order. */
function indices(view: BufferView): number[] {
  const out: number[] = [];
  for (let f = 0; f < view.length; f++) {
    out.push(view.index(model.unravel(f, view.shape)));
  }
  return out;
}

describe("BufferView", () => {
  it("BufferView computes row-major and column-major strides", () => {
    assert.deepEqual(rowMajorStrides([2, 3, 4]), [12, 4, 1]);
    assert.deepEqual(columnMajorStrides([2, 3, 4]), [1, 2, 6]);
    assert.deepEqual(rowMajorStrides([]), []);
    assert.deepEqual(rowMajorStrides([3, 0, 2]), [2, 2, 1]);
  });

  it("alignedStrides() pads rows without changing the logical shape", () => {
    assert.deepEqual(alignedStrides([3, 5], 8), [8, 1]);
    assert.equal(alignedStorageLength([3, 5], 8), 24);
    assert.deepEqual(alignedStrides([7], 8), [1]);
    assert.equal(alignedStorageLength([], 8), 1);
    assert.equal(alignedStorageLength([0, 5], 8), 0);
    const v = new BufferView([3, 5], { strides: alignedStrides([3, 5], 8) });
    assert.deepEqual(v.shape, [3, 5]);
    assert.equal(v.isContiguous, false);
    assert.equal(v.index([2, 4]), 20);
    assert.throws(() => alignedStrides([2], 0), InvalidArgumentError);
  });

  it("BufferView works at rank 0", () => {
    const s = BufferView.contiguous([], 5);
    assert.equal(s.length, 1);
    assert.equal(s.rank, 0);
    assert.equal(s.index([]), 5);
    assert.ok(s.isContiguous && s.isFortranContiguous);
    assert.deepEqual(s.unsqueeze(0).shape, [1]);
    assert.deepEqual(s.broadcastTo([2, 2]).strides, [0, 0]);
    assert.deepEqual(s.reshape([1, 1]).shape, [1, 1]);
    assert.equal(s.transpose(), s);
    assert.equal(s.requiredLength, 6);
  });

  it("BufferView hands out copies of shape and strides", () => {
    const v = BufferView.contiguous([2, 3]);
    const shape = v.shape;
    shape[0] = 99;
    v.strides[0] = 99;
    assert.deepEqual(v.shape, [2, 3]);
    assert.deepEqual(v.strides, [3, 1]);
  });

  it("BufferView refuses invalid shapes, strides and offsets with typed errors", () => {
    assert.throws(() => BufferView.contiguous([2, -1]), ShapeError);
    assert.throws(
      () => BufferView.contiguous([2.5]),
      /non-negative integers, received 2.5 at dim 0/,
    );
    assert.throws(
      () => BufferView.contiguous([2 ** 30, 2 ** 30, 2 ** 10]),
      /exceed the safe integer limit/,
    );
    assert.throws(
      () => new BufferView([2], { strides: [1, 1] }),
      /expected 1 strides/,
    );
    assert.throws(() => new BufferView([2], { strides: [0.5] }), ShapeError);
    assert.throws(
      () => new BufferView([3], { strides: [-1] }),
      /reaches storage index -2/,
    );
    assert.throws(
      () => new BufferView([3], { offset: -1 }),
      InvalidArgumentError,
    );
    assert.throws(
      () => BufferView.contiguous(new Array(65).fill(1)),
      /rank must be at most 64/,
    );
    assert.doesNotThrow(() =>
      new BufferView([3], { strides: [-1], offset: 2 })
    );
  });

  it("BufferView.reshape() merges and splits dims without copying where the layout allows", () => {
    const base = BufferView.contiguous([4, 6]);
    const stepped = base.slice(1, { step: 2 });
    assert.deepEqual(stepped.reshape([2, 2, 3]).strides, [12, 6, 2]);
    assert.deepEqual(stepped.reshape([4, 3, 1]).strides, [6, 2, 2]);
    const t = base.transpose();
    try {
      t.reshape([24]);
      assert.fail("reshape should throw");
    } catch (error) {
      assert.ok(error instanceof ShapeError);
      assert.match(
        error.message,
        /shape \[6, 4\] with strides \[1, 6\] to \[24\] without copying/,
      );
      assert.deepEqual(error.strides, [1, 6]);
    }
    assert.throws(() => base.reshape([5, 5]), /element counts differ/);
    assert.throws(() => base.reshape([-1, -1]), /at most one size may be -1/);
    assert.throws(() => base.reshape([5, -1]), /cannot be inferred/);
    assert.deepEqual(base.reshape([-1]).shape, [24]);
    assert.deepEqual(BufferView.contiguous([0, 3]).reshape([3, 0]).shape, [
      3,
      0,
    ]);
  });

  it("BufferView.slice() handles negative steps, empty results and bounds", () => {
    const v = BufferView.contiguous([5]);
    assert.deepEqual(indices(v.slice(0, { step: -1 })), [4, 3, 2, 1, 0]);
    assert.deepEqual(indices(v.slice(0, { start: 3, stop: 0, step: -2 })), [
      3,
      1,
    ]);
    assert.deepEqual(v.slice(0, { start: 3, stop: 3 }).length, 0);
    assert.deepEqual(v.slice(0, { start: 4, stop: 1 }).length, 0);
    assert.throws(
      () => v.slice(0, { step: 0 }),
      /step must be a non-zero integer/,
    );
    assert.throws(
      () => v.slice(0, { start: 6 }),
      /start 6 is outside \[0, 5\]/,
    );
    assert.throws(() => v.slice(1), /must be in \[-1, 1\)/);
    assert.deepEqual(indices(v.slice(-1, { start: 1, stop: 5, step: 3 })), [
      1,
      4,
    ]);
  });

  it("BufferView.permute(), squeeze() and unsqueeze() check their arguments", () => {
    const v = BufferView.contiguous([2, 1, 3]);
    assert.throws(() => v.permute([0, 1]), /not a permutation/);
    assert.throws(() => v.permute([0, 1, 3]), /not a permutation/);
    assert.throws(() => v.squeeze(0), /its size is 2, not 1/);
    assert.deepEqual(v.squeeze().shape, [2, 3]);
    assert.deepEqual(v.squeeze(1).shape, [2, 3]);
    assert.deepEqual(v.unsqueeze(-1).shape, [2, 1, 3, 1]);
    assert.throws(() => v.unsqueeze(5), /must be in \[-4, 3\]/);
  });

  it("broadcastShapes() combines two or more shapes and names them when it cannot", () => {
    assert.deepEqual(broadcastShapes([[3, 1], [1, 4], [2, 1, 1]]), [2, 3, 4]);
    assert.deepEqual(broadcastShapes([[], [2]]), [2]);
    assert.deepEqual(broadcastShapes([[0], [1]]), [0]);
    assert.throws(
      () => broadcastShapes([[2, 3], [4, 3], [1]]),
      /\[2, 3\] and \[4, 3\] and \[1\]: sizes 2 and 4 differ at dim 0/,
    );
    assert.throws(() => broadcastShapes([]), /at least one shape/);
  });

  it("BufferView computes layout facts once, correctly", () => {
    assert.ok(BufferView.contiguous([2, 3]).isContiguous);
    assert.ok(BufferView.fortran([2, 3]).isFortranContiguous);
    assert.ok(!BufferView.fortran([2, 3]).isContiguous);
    assert.ok(BufferView.contiguous([1, 3]).transpose().isContiguous);
    assert.ok(BufferView.contiguous([2, 0, 3]).transpose(0, 2).isContiguous);
    const b = BufferView.contiguous([3]).broadcastTo([2, 3]);
    assert.ok(!b.isContiguous);
    assert.equal(b.requiredLength, 3);
  });

  it("BufferView operations agree with a naive reference on random chains (rank 0 to 6)", () => {
    const shapeArb = fc.array(fc.integer({ min: 0, max: 4 }), {
      minLength: 0,
      maxLength: 6,
    })
      .filter((s) => model.count(s) <= 600);
    const opArb = fc.record({
      kind: fc.integer({ min: 0, max: 7 }),
      a: fc.nat(),
      b: fc.nat(),
      c: fc.integer({ min: -3, max: 3 }),
    });
    fc.assert(
      fc.property(
        shapeArb,
        fc.nat(5),
        fc.array(opArb, { maxLength: 8 }),
        (shape, offset, ops) => {
          let view = BufferView.contiguous(shape, offset);
          let ref = model.modelOf(shape, offset);
          for (const op of ops) {
            const rank = view.rank;
            const before = view.toString();
            try {
              switch (op.kind) {
                case 0: {
                  if (rank < 2) break;
                  const a = op.a % rank, b = op.b % rank;
                  view = view.transpose(a, b);
                  ref = model.transpose(ref, a, b);
                  break;
                }
                case 1: {
                  const axes = ref.shape.map((_, i) => i);
                  for (let i = axes.length - 1; i > 0; i--) {
                    const j = (op.a + i * 7) % (i + 1);
                    [axes[i], axes[j]] = [axes[j], axes[i]];
                  }
                  view = view.permute(axes);
                  ref = model.permute(ref, axes);
                  break;
                }
                case 2: {
                  if (rank === 0) break;
                  const d = op.a % rank, n = ref.shape[d];
                  const step = op.c === 0 ? 1 : op.c;
                  const start = step > 0
                    ? op.b % (n + 1)
                    : (n === 0 ? -1 : op.b % n);
                  const stop = step > 0
                    ? start + ((op.a >> 3) % (n - start + 1))
                    : start - ((op.a >> 3) % (start + 2));
                  view = view.slice(d, { start, stop, step });
                  ref = model.slice(ref, d, start, stop, step);
                  break;
                }
                case 3: {
                  view = view.squeeze();
                  ref = model.reshape(ref, ref.shape.filter((n) => n !== 1));
                  break;
                }
                case 4: {
                  if (rank >= 6) break;
                  const d = op.a % (rank + 1);
                  view = view.unsqueeze(d);
                  const s = ref.shape.slice();
                  s.splice(d, 0, 1);
                  ref = model.reshape(ref, s);
                  break;
                }
                case 5: {
                  if (rank >= 6) break;
                  const target = [
                    1 + (op.a % 3),
                    ...ref.shape.map((n, i) =>
                      n === 1 && (op.b >> i) % 2 ? 1 + (op.b % 3) : n
                    ),
                  ];
                  if (model.count(target) > 2000) break;
                  view = view.broadcastTo(target);
                  ref = model.broadcast(ref, target);
                  break;
                }
                case 6: {
                  // reshape to a factorisation of the element count
                  const n = view.length;
                  const target = n === 0
                    ? [0, 1 + (op.a % 3)]
                    : factor(n, op.a);
                  try {
                    view = view.reshape(target);
                    ref = model.reshape(ref, target);
                  } catch (error) {
                    assert.ok(error instanceof ShapeError);
                    assert.match(error.message, /without copying/);
                    assert.ok(!view.isContiguous);
                    assert.equal(view.toString(), before);
                  }
                  break;
                }
                case 7: {
                  // invalid input changes nothing
                  assert.throws(() => view.permute([rank]), ShapeError);
                  assert.throws(() => view.slice(rank), ShapeError);
                  assert.equal(view.toString(), before);
                  break;
                }
              }
            } catch (error) {
              throw new Error(
                `op ${JSON.stringify(op)} on ${before}: ${error}`,
              );
            }
            assert.deepEqual(view.shape, ref.shape);
            assert.deepEqual(indices(view), ref.data);
            assert.equal(view.length, ref.data.length);
            if (view.length > 0) {
              assert.equal(view.minIndex, Math.min(...ref.data));
              assert.equal(view.maxIndex, Math.max(...ref.data));
            }
            const dense = ref.data.every((x, i) => x === ref.data[0] + i);
            if (dense && view.length > 0) assert.ok(view.isContiguous);
          }
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});

function factor(n: number, seed: number): number[] {
  const out: number[] = [];
  let rest = n;
  for (let p = 2; p <= rest && out.length < 4; p++) {
    while (rest % p === 0 && out.length < 4 && (seed >> out.length) % 2 === 1) {
      out.push(p);
      rest /= p;
    }
  }
  out.push(rest);
  return seed % 5 === 0 ? [...out, 1] : out;
}
