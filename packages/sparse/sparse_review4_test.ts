/**
 * Fourth outside-in review of `@allot/sparse`: option bags. A misspelt key
 * (`regsitry`, `blockStrategy.rowPerBlock`) did nothing, silently: the
 * matrix went to the default registry, the block size stayed the default.
 * They are refused now, naming the key and the accepted ones, before
 * anything is allocated or registered.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { OwnershipRegistry } from "@allot/registry";
import { blockElements, SparseMatrix } from "./mod.ts";

function refusesKey(f: () => unknown, key: string): void {
  assert.throws(
    f,
    (e: unknown) =>
      e instanceof InvalidArgumentError &&
      e.message.includes(`"${key}"`) &&
      Array.isArray(e.limit),
  );
}

const csr = () => ({
  values: new Float32Array([1, 2, 3]),
  indices: new Int32Array([0, 1, 1]),
  indptr: new Int32Array([0, 2, 3]),
});

describe("sparse fourth review", () => {
  it("SparseMatrix.build() and wrap() refuse unknown option keys, registering nothing", () => {
    using registry = new OwnershipRegistry();
    refusesKey(
      () =>
        SparseMatrix.build(csr(), {
          shape: [2, 2],
          regsitry: registry,
        } as never),
      "regsitry",
    );
    refusesKey(
      () =>
        SparseMatrix.build(csr(), {
          shape: [2, 2],
          registry,
          blockStrategy: { rowPerBlock: 2 },
        } as never),
      "rowPerBlock",
    );
    refusesKey(
      () => SparseMatrix.wrap(csr(), { shape: [2, 2], layuot: "csc" } as never),
      "layuot",
    );
    assert.equal(registry.pointerCount, 0);
    using m = SparseMatrix.build(csr(), { shape: [2, 2], registry });
    assert.equal(m.nnz, 3);
  });

  it("toLayout(), toContiguous() and blockElements() refuse unknown option keys", () => {
    using registry = new OwnershipRegistry();
    using m = SparseMatrix.build(csr(), { shape: [2, 2], registry });
    const records = registry.pointerCount;
    refusesKey(() => m.toLayout("csc", { shape: [2, 2] } as never), "shape");
    refusesKey(
      () => m.toContiguous({ regsitry: registry } as never),
      "regsitry",
    );
    assert.equal(registry.pointerCount, records);
    refusesKey(() => blockElements(10, 2, { min: 1 } as never), "min");
    assert.equal(blockElements(10, 2, { minElements: 1 }), 40);
    using t = m.toLayout("csc", { registry });
    assert.equal(t.layout, "csc");
    assert.deepEqual(
      [...t.toContiguous().values],
      [1, 2, 3],
    );
  });
});
