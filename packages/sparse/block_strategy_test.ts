import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError } from "@allot/core";
import { blockElements } from "./block_strategy.ts";

describe("blockElements", () => {
  it("blockElements() is average nnz per row times rows per block, clamped to [min, max]", () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 1e12 }),
        fc.nat({ max: 1e7 }),
        fc.integer({ min: 1, max: 1 << 20 }),
        fc.integer({ min: 1, max: 1 << 20 }),
        fc.integer({ min: 1, max: 64 }),
        (nnz, primary, a, b, rowsPerBlock) => {
          const [minElements, maxElements] = a <= b ? [a, b] : [b, a];
          const size = blockElements(nnz, primary, {
            minElements,
            maxElements,
            rowsPerBlock,
          });
          const average = primary === 0 ? 0 : Math.floor(nnz / primary);
          assert.equal(
            size,
            Math.min(
              Math.max(average * rowsPerBlock, minElements),
              maxElements,
            ),
          );
          assert.ok(size >= minElements && size <= maxElements);
        },
      ),
    );
  });

  it("blockElements() uses SCL's defaults: 8 rows per block within [4096, 262144]", () => {
    assert.equal(blockElements(0, 0), 4096);
    assert.equal(blockElements(100 * 1000, 1000), 4096);
    assert.equal(blockElements(1000 * 1000, 1000), 8000);
    assert.equal(blockElements(1e9, 10), 262144);
  });

  it("blockElements() refuses negative counts and inverted bounds", () => {
    assert.throws(() => blockElements(-1, 10), /nnz/);
    assert.throws(() => blockElements(10, -1), /primaryLength/);
    assert.throws(() => blockElements(10, 1.5), InvalidArgumentError);
    assert.throws(
      () => blockElements(10, 10, { rowsPerBlock: 0 }),
      /rowsPerBlock: must be an integer in \[1, /,
    );
    assert.throws(
      () => blockElements(10, 10, { minElements: 9, maxElements: 8 }),
      /minElements must be at most maxElements 8, received 9/,
    );
  });
});
