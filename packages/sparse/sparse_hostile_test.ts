/**
 * Hostile tests of `@allot/sparse` from the public API, beyond
 * `sparse_adversarial_test.ts`: getters read twice, proxies and disguised
 * typed arrays, options that are not objects, collaborators that throw, and
 * callbacks that release the matrix they iterate.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllotError,
  DataPtr,
  Device,
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

  it("select() refuses a huge claimed length with a typed error, allocating nothing first", () => {
    using registry = new OwnershipRegistry({ onLeak: () => {} });
    using m = SparseMatrix.build(arrays(), { shape: [3, 3], registry });
    refuse(
      "SparseMatrix.select(huge length)",
      [
        { name: "length 1e15", value: { length: 1e15, 0: 1 } },
        { name: "length 2^31", value: { length: 2 ** 31, 0: 1 } },
        { name: "length 2^32", value: { length: 2 ** 32, 0: 1 } },
      ],
      (v) => m.select(v as never),
      {
        error: InvalidArgumentError,
        snapshot: () => [registry.pointerCount, registry.requestedBytes],
      },
    );
  });

  it("build() with an allocator that lies on a later block (misaligned, short, throwing) registers nothing and returns every block", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    const state = () => [
      registry.pointerCount + registry.bufferCount,
      registry.requestedBytes,
    ];
    for (const lie of ["misaligned", "short", "throwing"] as const) {
      let allocated = 0, released = 0;
      const allocator = {
        device: Device.cpu(),
        allocate: (bytes: number) => {
          if (++allocated === 2) {
            if (lie === "throwing") throw new Error("allocate failed (test)");
            const offset = lie === "misaligned" ? 4 : 0;
            const size = lie === "short" ? 4 : bytes;
            return new DataPtr(
              new ArrayBuffer(bytes + 8),
              offset,
              size,
              Device.cpu(),
              { context: 1, deleter: () => released++ },
            );
          }
          return new DataPtr(new ArrayBuffer(bytes), 0, bytes, Device.cpu(), {
            context: 1,
            deleter: () => released++,
          });
        },
      };
      const before = state();
      assert.throws(
        () =>
          SparseMatrix.build({
            values: new Float64Array([1, 2, 3, 4]),
            indices: new Int32Array([0, 2, 1, 2]),
            indptr: new Int32Array([0, 2, 3, 4]),
          }, {
            shape: [3, 3],
            registry,
            allocator: allocator as never,
            blockStrategy: { minElements: 1, maxElements: 1, rowsPerBlock: 1 },
          }),
        (e: unknown) => lie === "throwing" || e instanceof AllotError,
        lie,
      );
      assert.deepEqual(state(), before, `${lie}: state changed`);
      assert.equal(
        released,
        lie === "throwing" ? 1 : 2,
        `${lie}: a block was not returned`,
      );
    }
    registry.dispose();
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

  it("toContiguous({ registry }) unregisters what it allocated when a later allocation fails", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    const real = registry.newArray.bind(registry);
    let calls = 0;
    registry.newArray = ((...args: Parameters<typeof real>) => {
      if (++calls === 2) {
        throw new InvalidArgumentError("out of memory (test)", {
          name: "length",
          value: args[1],
          limit: 0,
        });
      }
      return real(...args);
    }) as typeof registry.newArray;
    using m = SparseMatrix.wrap(arrays(), { shape: [3, 3] });
    assertRefused(
      "SparseMatrix.toContiguous(failing registry)",
      () => m.toContiguous({ registry }),
      {
        error: InvalidArgumentError,
        snapshot: () => [registry.pointerCount, registry.requestedBytes],
      },
    );
  });

  it("slice() leaves no alias behind when the leak detector throws", () => {
    using registry = new OwnershipRegistry({ onLeak: () => {} });
    const detector = new LeakDetector();
    using m = SparseMatrix.build(arrays(), {
      shape: [3, 3],
      registry,
      leakDetector: detector,
    });
    detector.watch = () => {
      throw new InvalidArgumentError("watch refused", {
        name: "watch",
        value: 0,
        limit: 0,
      });
    };
    for (
      const [name, call] of [
        ["slice", () => m.slice(0, 2)],
        ["select", () => m.select([2, 0])],
        ["transpose", () => m.transpose()],
      ] as const
    ) {
      assertRefused(`SparseMatrix.${name}(throwing detector)`, call, {
        error: InvalidArgumentError,
        snapshot: () => [
          registry.pointerCount + registry.bufferCount,
          registry.requestedBytes,
        ],
      });
    }
    m.release();
    assert.equal(registry.requestedBytes, 0, "a block was left alive");
  });

  it("wrap() and build() trust the typed array's real length, not a subclass's", () => {
    class Liar extends Int32Array {
      override get length(): number {
        return 3;
      }
    }
    using registry = new OwnershipRegistry({ onLeak: () => {} });
    const a = arrays();
    const indptr = new Liar([0, 2, 3, 4]);
    for (const make of ["wrap", "build"] as const) {
      using m = SparseMatrix[make]({ ...a, indptr }, {
        shape: [3, 3],
        registry,
      });
      assert.equal(m.nnz, 4);
    }
  });

  it("random build/slice/select/transpose/toLayout/toContiguous sequences match a dense model", () => {
    const matrix = fc.integer({ min: 0, max: 6 }).chain((rows) =>
      fc.integer({ min: 0, max: 6 }).chain((cols) =>
        fc.record({
          rows: fc.constant(rows),
          cols: fc.constant(cols),
          dense: fc.array(
            fc.array(
              fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 99 })),
              { minLength: cols, maxLength: cols },
            ),
            { minLength: rows, maxLength: rows },
          ),
          layout: fc.constantFrom("csr" as const, "csc" as const),
          min: fc.integer({ min: 1, max: 5 }),
          ops: fc.array(fc.nat(1000), { maxLength: 6 }),
        })
      )
    );
    fc.assert(
      fc.property(matrix, ({ rows, cols, dense, layout, min, ops }) => {
        using registry = new OwnershipRegistry({ onLeak: () => {} });
        // compressed arrays of `dense` in `layout`
        const [p, q] = layout === "csr" ? [rows, cols] : [cols, rows];
        const at = (i: number, j: number) =>
          layout === "csr" ? dense[i][j] : dense[j][i];
        const values: number[] = [], indices: number[] = [], indptr = [0];
        for (let i = 0; i < p; i++) {
          for (let j = 0; j < q; j++) {
            if (at(i, j) !== 0) {
              values.push(at(i, j));
              indices.push(j);
            }
          }
          indptr.push(values.length);
        }
        const live: SparseMatrix[] = [];
        let m: SparseMatrix = SparseMatrix.build({
          values: new Float64Array(values),
          indices: new Int32Array(indices),
          indptr: new Int32Array(indptr),
        }, {
          shape: [rows, cols],
          layout,
          registry,
          blockStrategy: {
            minElements: min,
            maxElements: min,
            rowsPerBlock: 1,
          },
        });
        live.push(m);
        let model = dense.map((r) => [...r]);
        const check = () => {
          const got = model.map((r) => r.map(() => 0));
          for (const [r, c, v] of m.entries()) got[r][c] = v;
          assert.deepEqual(got, model);
          assert.deepEqual(m.shape, [model.length, model[0]?.length ?? m.cols]);
          const back = m.toContiguous();
          assert.equal(back.values.length, m.nnz);
        };
        check();
        for (const op of ops) {
          const n = m.primaryLength;
          const csr = m.layout === "csr";
          const cols0 = m.cols, rows0 = m.rows;
          const pick = (rowsWanted: number[]) => {
            if (csr) return rowsWanted.map((i) => [...model[i]]);
            return Array.from(
              { length: rows0 },
              (_, r) => rowsWanted.map((j) => model[r][j]),
            );
          };
          switch (op % 4) {
            case 0: {
              const s = n === 0 ? 0 : op % (n + 1);
              const e = s + ((op >> 3) % (n - s + 1));
              m = m.slice(s, e);
              model = pick(Array.from({ length: e - s }, (_, k) => s + k));
              break;
            }
            case 1: {
              if (n === 0) continue;
              const wanted = [op % n, (op >> 2) % n, (op >> 4) % n];
              m = m.select(wanted);
              model = pick(wanted);
              break;
            }
            case 2: {
              m = m.transpose();
              model = Array.from(
                { length: cols0 },
                (_, c) => Array.from({ length: rows0 }, (_, r) => model[r][c]),
              );
              break;
            }
            case 3:
              m = m.toLayout(csr ? "csc" : "csr", { registry });
              break;
          }
          live.push(m);
          if (model.length === 0) {
            // no rows left: the model cannot carry the width; compare counts
            assert.equal(m.rows, 0);
            assert.equal(m.nnz, 0);
            break;
          }
          check();
        }
        for (const x of live) x.release();
        assert.equal(registry.requestedBytes, 0);
      }),
      { numRuns: 150 },
    );
  });
});
