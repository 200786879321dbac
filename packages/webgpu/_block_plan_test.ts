import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { _blockPlan, _collapse } from "./_block_plan.ts";

describe("_blockPlan", () => {
  it("_collapse() drops unit dimensions and merges what the source walks as one", () => {
    assert.deepEqual(_collapse([2, 1, 3, 4], [12, 99, 4, 1]), {
      shape: [24],
      strides: [1],
    });
    // a transposed 4x6 matrix: nothing merges
    assert.deepEqual(_collapse([6, 4], [1, 6]), {
      shape: [6, 4],
      strides: [1, 6],
    });
    // permuted [2, 0, 1] of a 2x3x4 tensor: dims 1 and 2 merge
    assert.deepEqual(_collapse([4, 2, 3], [1, 12, 4]), {
      shape: [4, 6],
      strides: [1, 4],
    });
  });

  it("_blockPlan() takes transposes whose rows and columns are whole vectors", () => {
    // 8x12 f32 matrix read as its 12x8 transpose
    const plan = _blockPlan([12, 8], [1, 12], 0, 0, 4)!;
    assert.deepEqual(
      [
        plan.per,
        plan.blockCols,
        plan.blockRows,
        plan.srcColStride,
        plan.dstRowStride,
        plan.invocations,
      ],
      [4, 2, 3, 3, 2, 6],
    );
    // a batch of 3 transposes, source batch stride 96, starting at element 8
    const batch = _blockPlan([3, 12, 8], [96, 1, 12], 8, 4, 4)!;
    assert.deepEqual(
      [batch.otherShape, batch.otherSrc, batch.otherDst, batch.srcBase],
      [[3], [24], [24], 2],
    );
    assert.equal(batch.dstBase, 1);
    // u16 needs multiples of 8, f64 of 2
    assert.ok(_blockPlan([16, 8], [1, 16], 0, 0, 2));
    assert.equal(_blockPlan([12, 8], [1, 12], 0, 0, 2), undefined);
    assert.ok(_blockPlan([2, 6], [1, 2], 0, 0, 8));
    // several blocks per invocation: the last extent in multiples of them
    assert.equal(_blockPlan([12, 16], [1, 12], 0, 0, 4, 4)!.invocations, 3);
    assert.equal(_blockPlan([12, 8], [1, 12], 0, 0, 4, 4), undefined);
  });

  it("_blockPlan() refuses what the block kernel cannot do", () => {
    // no unit stride off the last dimension: not a transpose
    assert.equal(_blockPlan([4, 4], [8, 1], 0, 0, 4), undefined);
    assert.equal(_blockPlan([4, 4], [2, 8], 0, 0, 4), undefined);
    // ragged edges, misaligned starts or strides
    assert.equal(_blockPlan([6, 8], [1, 6], 0, 0, 4), undefined);
    assert.equal(_blockPlan([8, 6], [1, 8], 0, 0, 4), undefined);
    assert.equal(_blockPlan([8, 8], [1, 8], 1, 0, 4), undefined);
    assert.equal(_blockPlan([8, 8], [1, 8], 0, 2, 4), undefined);
    assert.equal(_blockPlan([8, 8], [1, 10], 0, 0, 4), undefined);
    assert.equal(_blockPlan([2, 8, 8], [66, 1, 8], 0, 0, 4), undefined);
    // bytes and rank 1
    assert.equal(_blockPlan([16, 16], [1, 16], 0, 0, 1), undefined);
    assert.equal(_blockPlan([16], [1], 0, 0, 4), undefined);
  });

  it("_blockPlan() keeps negative and zero strides of the other dimensions", () => {
    const flipped = _blockPlan([2, 4, 4], [-16, 1, 4], 16, 0, 4)!;
    assert.deepEqual(flipped.otherSrc, [-4]);
    const broadcast = _blockPlan([4, 4], [1, 0], 0, 0, 4)!;
    assert.equal(broadcast.srcColStride, 0);
  });
});
