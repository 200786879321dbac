/**
 * Adversarial tests of `@allot/sparse` from the public API: hostile shapes,
 * layouts, arrays, indices and callbacks are refused with typed errors and
 * leave the registry as it was; a matrix whose registry was disposed refuses
 * every read with a typed error.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError, UseAfterFreeError } from "@allot/core";
import { OwnershipRegistry } from "@allot/registry";
import { SparseMatrix } from "./mod.ts";
import {
  assertRefused,
  type Hostile,
  hostileNumbers,
  hostileObjects,
  HostileTally,
} from "../core/_test_hostile.ts";

const tally = new HostileTally();

function arrays() {
  return {
    values: new Float32Array([1, 2, 3, 4]),
    indices: new Int32Array([0, 2, 1, 2]),
    indptr: new Int32Array([0, 2, 3, 4]),
  };
}

const { refuse } = tally;

describe("@allot/sparse adversarial", () => {
  after(() => {
    console.log(
      `sparse adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("SparseMatrix.wrap() and build() refuse hostile shapes, layouts and arrays, registering nothing", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    const state = () => [registry.pointerCount, registry.requestedBytes];
    const numbers = hostileNumbers();
    for (const make of ["wrap", "build"] as const) {
      const fn = (a: unknown, o: unknown) =>
        SparseMatrix[make](a as never, { registry, ...(o as object) } as never);
      refuse(
        `SparseMatrix.${make}(shape[0])`,
        numbers,
        (v) => fn(arrays(), { shape: [v, 3] }),
        { error: InvalidArgumentError, snapshot: state },
      );
      refuse(
        `SparseMatrix.${make}(shape)`,
        [...hostileObjects(), { name: "[3]", value: [3] }, {
          name: "[3, 3, 1]",
          value: [3, 3, 1],
        }],
        (v) => fn(arrays(), { shape: v }),
        { error: InvalidArgumentError, snapshot: state },
      );
      refuse(
        `SparseMatrix.${make}(layout)`,
        hostileObjects().filter((h) =>
          h.value !== undefined && h.value !== null
        ),
        (v) => fn(arrays(), { shape: [3, 3], layout: v }),
        { error: InvalidArgumentError, snapshot: state },
      );
      refuse(
        `SparseMatrix.${make}(arrays)`,
        hostileObjects().filter((h) => h.name !== "trap proxy"),
        (v) => fn(v, { shape: [3, 3] }),
        { error: InvalidArgumentError, snapshot: state },
      );
      const bad: Hostile[] = [
        {
          name: "indptr not monotonic",
          value: { ...arrays(), indptr: new Int32Array([0, 3, 2, 4]) },
        },
        {
          name: "index out of range",
          value: { ...arrays(), indices: new Int32Array([0, 2, 1, 3]) },
        },
        {
          name: "negative index",
          value: { ...arrays(), indices: new Int32Array([0, 2, -1, 2]) },
        },
        {
          name: "indptr too short",
          value: { ...arrays(), indptr: new Int32Array([0, 2, 4]) },
        },
        {
          name: "indptr NaN",
          value: {
            ...arrays(),
            indptr: new Float64Array([0, NaN, 3, 4]),
          },
        },
        {
          name: "indptr fractional",
          value: {
            ...arrays(),
            indptr: new Float64Array([0, 1.5, 3, 4]),
          },
        },
        {
          name: "values BigInt64Array",
          value: { ...arrays(), values: new BigInt64Array(4) },
        },
        {
          name: "indices Float32Array",
          value: { ...arrays(), indices: new Float32Array(4) },
        },
        {
          name: "values shorter than indices",
          value: { ...arrays(), values: new Float32Array(3) },
        },
      ];
      refuse(
        `SparseMatrix.${make}(arrays content)`,
        bad,
        (v) => fn(v, { shape: [3, 3] }),
        { error: InvalidArgumentError, snapshot: state },
      );
    }
    registry.dispose();
  });

  it("SparseMatrix row access, slice and select refuse hostile indices and change nothing", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    const m = SparseMatrix.build(arrays(), { shape: [3, 3], registry });
    const state = () => [registry.pointerCount, registry.requestedBytes, m.nnz];
    const numbers = [...hostileNumbers(), { name: "3", value: 3 }];
    refuse("SparseMatrix.row()", numbers, (v) => m.row(v as number), {
      error: InvalidArgumentError,
      snapshot: state,
    });
    refuse(
      "SparseMatrix.rowLength()",
      numbers,
      (v) => m.rowLength(v as number),
      { error: InvalidArgumentError, snapshot: state },
    );
    refuse(
      "SparseMatrix.slice(start)",
      [...hostileNumbers(), { name: "4", value: 4 }].filter((h) =>
        h.value !== undefined
      ),
      (v) => m.slice(v as number),
      { error: InvalidArgumentError, snapshot: state },
    );
    refuse(
      "SparseMatrix.slice(end)",
      [...hostileNumbers(), { name: "4", value: 4 }].filter((h) =>
        h.value !== undefined
      ),
      (v) => m.slice(1, v as number),
      { error: InvalidArgumentError, snapshot: state },
    );
    refuse(
      "SparseMatrix.select()",
      [
        ...hostileObjects().filter((h) =>
          h.name !== "[]" && h.name !== "trap proxy"
        ),
        ...hostileNumbers().map((h) => ({
          name: `[${h.name}]`,
          value: [h.value],
        })).filter((h) => h.name !== "[[8]]" && h.name !== "[new Number(8)]"),
        { name: "[0, 3]", value: [0, 3] },
      ],
      (v) => m.select(v as number[]),
      { error: InvalidArgumentError, snapshot: state },
    );
    refuse(
      "SparseMatrix.forEach()",
      hostileObjects().filter((h) => typeof h.value !== "function"),
      (v) => m.forEach(v as () => void),
      { error: InvalidArgumentError, snapshot: state },
    );
    m.release();
    registry.dispose();
  });

  it("SparseMatrix refuses every read after release and after its registry is disposed", () => {
    for (const end of ["release", "dispose"] as const) {
      const registry = new OwnershipRegistry({ onLeak: () => {} });
      const m = SparseMatrix.build(arrays(), { shape: [3, 3], registry });
      const t = m.transpose();
      if (end === "release") {
        m.release();
        t.release();
      } else registry.dispose();
      for (const x of [m, t]) {
        const calls: [string, () => unknown][] = [
          ["row", () => x.row(0)],
          ["rowLength", () => x.rowLength(0)],
          ["rowTable", () => x.rowTable()],
          ["toContiguous", () => x.toContiguous()],
          ["entries", () => [...x.entries()]],
          ["forEach", () => x.forEach(() => {})],
          ["slice", () => x.slice(0, 1)],
          ["select", () => x.select([0])],
          ["transpose", () => x.transpose()],
        ];
        for (const [name, call] of calls) {
          assertRefused(`SparseMatrix.${name}() after ${end}`, call, {
            error: UseAfterFreeError,
          });
          tally.add(`SparseMatrix.${name}() after ${end}`, { calls: 1 });
        }
      }
      if (end === "dispose") {
        // Releasing after dispose is allowed and does nothing.
        m.release();
        t.release();
      } else registry.dispose();
      assert.ok(m.released && t.released);
    }
  });
});
