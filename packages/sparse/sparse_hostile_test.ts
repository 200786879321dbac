/**
 * Hostile tests of `@allot/sparse` from the public API, beyond
 * `sparse_adversarial_test.ts`: getters read twice, proxies and disguised
 * typed arrays, options that are not objects, collaborators that throw, and
 * callbacks that release the matrix they iterate.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  InvalidArgumentError,
  LeakDetector,
  UseAfterFreeError,
} from "@allot/core";
import { OwnershipRegistry } from "@allot/registry";
import { blockElements, SparseMatrix } from "./mod.ts";
import {
  assertRefused,
  hostileObjectsBut,
  HostileTally,
} from "../core/_test_hostile.ts";

const tally = new HostileTally();
const { refuse } = tally;

function arrays() {
  return {
    values: new Float32Array([1, 2, 3, 4]),
    indices: new Int32Array([0, 2, 1, 2]),
    indptr: new Int32Array([0, 2, 3, 4]),
  };
}

describe("@allot/sparse hostile", () => {
  it("wrap() and build() read each array once (a getter cannot swap it after the check)", () => {
    for (const make of ["wrap", "build"] as const) {
      const registry = new OwnershipRegistry({ onLeak: () => {} });
      let reads = 0;
      const good = arrays();
      const liar = {
        values: good.values,
        indices: good.indices,
        get indptr() {
          // valid the first time, then one reaching past the arrays
          return reads++ === 0 ? good.indptr : new Int32Array([0, 2, 3, 9]);
        },
      };
      let m: SparseMatrix | undefined;
      try {
        m = SparseMatrix[make](liar, { shape: [3, 3], registry });
      } catch (error) {
        assert.ok(error instanceof InvalidArgumentError, String(error));
      }
      if (m !== undefined) {
        assert.deepEqual([...m.entries()], [[0, 0, 1], [0, 2, 2], [1, 1, 3], [
          2,
          2,
          4,
        ]]);
        m.release();
      }
      assert.equal(reads, 1, `${make} read indptr ${reads} times`);
      registry.dispose();
    }
  });

  it("wrap() and build() refuse proxies of typed arrays for indices and indptr", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    const state = () => [registry.pointerCount, registry.requestedBytes];
    for (const make of ["wrap", "build"] as const) {
      for (const key of ["indices", "indptr"] as const) {
        refuse(
          `SparseMatrix.${make}(${key} proxy)`,
          [{ name: "proxy", value: new Proxy(arrays()[key], {}) }],
          (v) =>
            SparseMatrix[make]({ ...arrays(), [key]: v } as never, {
              shape: [3, 3],
              registry,
            }),
          { error: InvalidArgumentError, snapshot: state },
        );
      }
    }
    registry.dispose();
  });

  it("build() copies by the values' real kind, not their constructor property", () => {
    using registry = new OwnershipRegistry({ onLeak: () => {} });
    const a = arrays();
    Object.defineProperty(a.values, "constructor", { value: Float64Array });
    using m = SparseMatrix.build(a, { shape: [3, 3], registry });
    assert.ok(m.row(0).values instanceof Float32Array);
    assert.deepEqual([...m.toContiguous().values], [1, 2, 3, 4]);
  });

  it("build() refuses hostile registry, allocator, leakDetector and blockStrategy options, registering nothing", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    const state = () => [registry.pointerCount, registry.requestedBytes];
    const options = {
      registry: hostileObjectsBut("undefined", "trap proxy"),
      allocator: hostileObjectsBut("undefined", "trap proxy"),
      leakDetector: hostileObjectsBut("undefined", "trap proxy"),
      blockStrategy: hostileObjectsBut("undefined", "{}", "[]", "trap proxy"),
    };
    for (const [key, values] of Object.entries(options)) {
      refuse(
        `SparseMatrix.build(${key})`,
        values,
        (v) =>
          SparseMatrix.build(arrays(), {
            shape: [3, 3],
            registry,
            [key]: v,
          } as never),
        { error: InvalidArgumentError, snapshot: state },
      );
    }
    registry.dispose();
  });

  it("blockElements() refuses a strategy that is not an object", () => {
    refuse(
      "blockElements(strategy)",
      hostileObjectsBut("undefined", "{}", "[]", "trap proxy"),
      (v) => blockElements(10, 2, v as never),
      { error: InvalidArgumentError },
    );
  });

  it("build() leaves nothing registered when the leak detector throws", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    const detector = new LeakDetector();
    detector.watch = () => {
      throw new InvalidArgumentError("watch refused", {
        name: "watch",
        value: 0,
        limit: 0,
      });
    };
    assertRefused(
      "SparseMatrix.build(throwing leakDetector)",
      () =>
        SparseMatrix.build(arrays(), {
          shape: [3, 3],
          registry,
          leakDetector: detector,
        }),
      {
        snapshot: () => [registry.pointerCount, registry.requestedBytes],
      },
    );
    registry.dispose();
  });

  it("toContiguous() and toLayout() refuse options that are not objects", () => {
    using registry = new OwnershipRegistry({ onLeak: () => {} });
    using m = SparseMatrix.build(arrays(), { shape: [3, 3], registry });
    const state = () => [registry.pointerCount, registry.requestedBytes];
    refuse(
      "SparseMatrix.toContiguous(options)",
      hostileObjectsBut("undefined", "{}", "[]", "trap proxy"),
      (v) => m.toContiguous(v as never),
      { error: InvalidArgumentError, snapshot: state },
    );
    refuse(
      "SparseMatrix.toContiguous(registry)",
      hostileObjectsBut("undefined", "trap proxy"),
      (v) => m.toContiguous({ registry: v } as never),
      { error: InvalidArgumentError, snapshot: state },
    );
    refuse(
      "SparseMatrix.toLayout(options)",
      hostileObjectsBut("undefined", "{}", "[]", "trap proxy"),
      (v) => m.toLayout("csc", v as never),
      { error: InvalidArgumentError, snapshot: state },
    );
  });

  it("select() reads each index once (a getter cannot swap it after the check)", () => {
    using registry = new OwnershipRegistry({ onLeak: () => {} });
    using m = SparseMatrix.build(arrays(), { shape: [3, 3], registry });
    let reads = 0;
    const rows = {
      length: 1,
      get 0() {
        return reads++ === 0 ? 2 : 2 ** 31;
      },
    };
    using s = m.select(rows);
    assert.equal(reads, 1);
    assert.deepEqual([...s.entries()], [[0, 2, 4]]);
  });

  it("forEach() and entries() stop with UseAfterFreeError when the matrix is released under them", () => {
    for (const how of ["forEach", "entries"] as const) {
      const registry = new OwnershipRegistry({ onLeak: () => {} });
      const m = SparseMatrix.build(arrays(), { shape: [3, 3], registry });
      let seen = 0;
      const visit = () => {
        seen++;
        if (seen === 1) m.release();
      };
      assert.throws(() => {
        if (how === "forEach") m.forEach(visit);
        else for (const _ of m.entries()) visit();
      }, UseAfterFreeError);
      assert.equal(seen, 1, `${how} read ${seen - 1} entries after release`);
      registry.dispose();
    }
  });
});
