import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { findStridedAlias, MAX_ALIAS_SEARCH_SPAN } from "./strided_alias.ts";
import { InvalidArgumentError } from "./errors.ts";

/** Every element address of the view, row-major, by brute force. */
function addresses(shape: number[], strides: number[]): number[] {
  let out = [0];
  for (let d = 0; d < shape.length; d++) {
    const next: number[] = [];
    for (const a of out) {
      for (let i = 0; i < shape[d]; i++) next.push(a + i * strides[d]);
    }
    out = next;
  }
  return shape.includes(0) ? [] : out;
}

function addressOf(index: readonly number[], strides: number[]): number {
  return index.reduce((a, i, d) => a + i * strides[d], 0);
}

describe("findStridedAlias", () => {
  it("findStridedAlias() agrees with a brute-force search on small views", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4 }).chain((rank) =>
          fc.tuple(
            fc.array(fc.integer({ min: 0, max: 4 }), {
              minLength: rank,
              maxLength: rank,
            }),
            fc.array(fc.integer({ min: -7, max: 7 }), {
              minLength: rank,
              maxLength: rank,
            }),
          )
        ),
        ([shape, strides]) => {
          const all = addresses(shape, strides);
          const aliased = new Set(all).size !== all.length;
          const found = findStridedAlias(shape, strides);
          assert.equal(found !== undefined, aliased);
          if (found === undefined) return;
          // two distinct in-range tuples reaching the reported element, the
          // first one being the first in row-major order
          assert.notDeepEqual(found.first, found.second);
          for (const index of [found.first, found.second]) {
            assert.equal(index.length, shape.length);
            index.forEach((i, d) => assert.ok(i >= 0 && i < shape[d]));
            assert.equal(addressOf(index, strides), found.offset);
          }
          assert.equal(
            all.indexOf(found.offset),
            (() => {
              let flat = 0;
              found.first.forEach((i, d) => (flat = flat * shape[d] + i));
              return flat;
            })(),
          );
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("findStridedAlias() passes dense layouts, permuted, stepped and flipped", () => {
    assert.equal(findStridedAlias([2, 3, 4], [12, 4, 1]), undefined);
    assert.equal(findStridedAlias([2, 3, 4], [1, 2, 6]), undefined);
    assert.equal(findStridedAlias([4, 3], [-3, 2]), undefined);
    assert.equal(findStridedAlias([2, 3], [3, 2]), undefined); // exact search
    assert.equal(findStridedAlias([], []), undefined);
    assert.equal(findStridedAlias([0, 5], [0, 0]), undefined);
  });

  it("findStridedAlias() names the aliasing tuples of [1, 1] and of a broadcast", () => {
    assert.deepEqual(findStridedAlias([2, 2], [1, 1]), {
      first: [0, 1],
      second: [1, 0],
      offset: 1,
    });
    assert.deepEqual(findStridedAlias([3, 2], [1, 0]), {
      first: [0, 0],
      second: [0, 1],
      offset: 0,
    });
  });

  it("findStridedAlias() refuses mismatched ranks and views too wide to search", () => {
    assert.throws(() => findStridedAlias([2, 2], [1]), InvalidArgumentError);
    const wide = () =>
      findStridedAlias([2, 2, 3], [MAX_ALIAS_SEARCH_SPAN, 1, 1]);
    assert.throws(wide, (e: unknown) =>
      e instanceof InvalidArgumentError &&
      /spans \d+ elements, the exact search covers at most 268435456/.test(
        e.message,
      ));
  });
});
