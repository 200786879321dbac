import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "../core/_test_faults.ts";
import {
  DoubleFreeError,
  InvalidArgumentError,
  LeakDetector,
  UseAfterFreeError,
} from "@allot/core";
import { OwnershipRegistry } from "@allot/registry";
import { type CompressedArrays, SparseMatrix } from "./sparse_matrix.ts";
import { blockElements } from "./block_strategy.ts";
import { CpuAllocator } from "@allot/cpu";

interface Case {
  primary: number;
  secondary: number;
  rows: number[][]; // secondary indices per primary row
  layout: "csr" | "csc";
  minElements: number;
}

const caseArb: fc.Arbitrary<Case> = fc
  .record({
    primary: fc.integer({ min: 0, max: 40 }),
    secondary: fc.integer({ min: 1, max: 30 }),
    layout: fc.constantFrom("csr" as const, "csc" as const),
    minElements: fc.integer({ min: 1, max: 20 }),
  })
  .chain((c) =>
    fc.record({
      primary: fc.constant(c.primary),
      secondary: fc.constant(c.secondary),
      layout: fc.constant(c.layout),
      minElements: fc.constant(c.minElements),
      rows: fc.array(
        fc.array(fc.integer({ min: 0, max: c.secondary - 1 }), {
          maxLength: 12,
        }),
        { minLength: c.primary, maxLength: c.primary },
      ),
    })
  );

function toArrays(c: Case): CompressedArrays<Float64Array> {
  const nnz = c.rows.reduce((s, r) => s + r.length, 0);
  const values = new Float64Array(nnz);
  const indices = new Int32Array(nnz);
  const indptr = new Int32Array(c.primary + 1);
  let k = 0;
  c.rows.forEach((r, i) => {
    for (const j of r) {
      values[k] = i * 1000 + j + k / 7;
      indices[k] = j;
      k++;
    }
    indptr[i + 1] = k;
  });
  return { values, indices, indptr };
}

function shapeOf(c: Case): [number, number] {
  return c.layout === "csr"
    ? [c.primary, c.secondary]
    : [c.secondary, c.primary];
}

/** The traditional arrays of primary rows `picked` of `a`. */
function pick(
  a: CompressedArrays<Float64Array>,
  picked: number[],
): { values: number[]; indices: number[]; indptr: number[] } {
  const values: number[] = [], indices: number[] = [], indptr = [0];
  for (const r of picked) {
    for (let k = a.indptr[r]; k < a.indptr[r + 1]; k++) {
      values.push(a.values[k]);
      indices.push(a.indices[k]);
    }
    indptr.push(values.length);
  }
  return { values, indices, indptr };
}

function plain(a: CompressedArrays) {
  return {
    values: [...a.values],
    indices: [...a.indices],
    indptr: [...a.indptr],
  };
}

describe("SparseMatrix", () => {
  it("SparseMatrix round trips traditional -> discontiguous -> contiguous element for element", () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const registry = new OwnershipRegistry({ onLeak: () => {} });
        const arrays = toArrays(c);
        const options = {
          shape: shapeOf(c),
          layout: c.layout,
          registry,
          blockStrategy: { minElements: c.minElements, maxElements: 64 },
        };
        const built = SparseMatrix.build(arrays, options);
        const wrapped = SparseMatrix.wrap(arrays, options);
        const expected = plain(arrays);
        assert.deepEqual(plain(built.toContiguous()), expected);
        assert.deepEqual(plain(wrapped.toContiguous()), expected);
        assert.deepEqual(
          plain(built.toContiguous({ registry })),
          expected,
        );
        assert.equal(built.nnz, arrays.values.length);
        assert.deepEqual(built.shape, shapeOf(c));
        // Rows and entries.
        const triples: [number, number, number][] = [];
        for (let i = 0; i < c.primary; i++) {
          const row = built.row(i);
          assert.deepEqual([...row.indices], c.rows[i]);
          assert.equal(built.rowLength(i), c.rows[i].length);
          for (let k = 0; k < row.values.length; k++) {
            triples.push(
              c.layout === "csr"
                ? [i, row.indices[k], row.values[k]]
                : [row.indices[k], i, row.values[k]],
            );
          }
        }
        assert.deepEqual([...built.entries()], triples);
        const seen: [number, number, number][] = [];
        wrapped.forEach((r, col, v) => seen.push([r, col, v]));
        assert.deepEqual(seen, triples);
        // Block count follows the strategy: each block within the block
        // size unless a single row is longer.
        const size = blockElements(arrays.values.length, c.primary, {
          minElements: c.minElements,
          maxElements: 64,
        });
        assert.ok(built.blockCount <= Math.max(c.primary, 0));
        assert.ok(
          built.blockCount >=
              Math.ceil(arrays.values.length / Math.max(size, 1)) ||
            c.rows.some((r) => r.length > size),
        );
        built.release();
        wrapped.release();
        assert.equal(
          registry.requestedBytes,
          arrays.values.length * 8 + arrays.values.length * 4 +
            (c.primary + 1) * 4,
        );
        registry.dispose();
      }),
      { numRuns: modelRuns() },
    );
  });

  it("SparseMatrix.toLayout() and transpose() match a model on built, sliced and selected matrices", () => {
    fc.assert(
      fc.property(
        caseArb,
        fc.array(fc.nat(), { maxLength: 20 }),
        fc.boolean(),
        (c, picks, useSelect) => {
          const registry = new OwnershipRegistry({ onLeak: () => {} });
          const built = SparseMatrix.build(toArrays(c), {
            shape: shapeOf(c),
            layout: c.layout,
            registry,
            blockStrategy: { minElements: c.minElements, maxElements: 64 },
          });
          const m = useSelect && c.primary > 0
            ? built.select(picks.map((p) => p % c.primary))
            : built;
          const other = m.layout === "csr" ? "csc" : "csr";
          // model: new primary row j lists (old primary i, value) in the
          // order the old matrix stores them
          const secondary = m.layout === "csr" ? m.cols : m.rows;
          const model: [number, number][][] = Array.from(
            { length: secondary },
            () => [],
          );
          for (let i = 0; i < m.primaryLength; i++) {
            const row = m.row(i);
            row.indices.forEach((j, k) => model[j].push([i, row.values[k]]));
          }
          const converted = m.toLayout(other, {
            registry,
            blockStrategy: { minElements: c.minElements, maxElements: 64 },
          });
          assert.equal(converted.layout, other);
          assert.deepEqual(converted.shape, m.shape);
          assert.equal(converted.nnz, m.nnz);
          for (let j = 0; j < secondary; j++) {
            const row = converted.row(j);
            assert.deepEqual(
              [...row.indices].map((i, k) => [i, row.values[k]]),
              model[j],
            );
          }
          // the same (row, col, value) set either way
          const sorted = (x: SparseMatrix) =>
            [...x.entries()].sort((a, b) =>
              a[0] - b[0] || a[1] - b[1] || a[2] - b[2]
            );
          assert.deepEqual(sorted(converted), sorted(m));
          // back again, and the same layout: a compacted copy
          const back = converted.toLayout(m.layout, { registry });
          assert.deepEqual(sorted(back), sorted(m));
          const same = m.toLayout(m.layout, { registry });
          assert.deepEqual([...same.entries()], [...m.entries()]);
          // transpose: swapped coordinates, same order, shared blocks
          const t = m.transpose();
          assert.equal(t.layout, other);
          assert.deepEqual(t.shape, [m.shape[1], m.shape[0]]);
          assert.deepEqual(
            [...t.entries()],
            [...m.entries()].map(([r, col, v]) => [col, r, v]),
          );
          const expected = [...t.entries()];
          if (m !== built) m.release();
          built.release();
          // the transpose keeps the blocks alive
          assert.deepEqual([...t.entries()], expected);
          const tt = t.transpose();
          assert.equal(tt.layout, m.layout);
          assert.equal(tt.nnz, t.nnz);
          for (const x of [t, tt, converted, back, same]) x.release();
          // everything given back
          assert.equal(registry.requestedBytes, 0);
          registry.dispose();
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("SparseMatrix.toLayout() refuses a bad layout and transpose() a released matrix, changing nothing", () => {
    const registry = new OwnershipRegistry({ onLeak: () => {} });
    const m = SparseMatrix.build({
      values: new Float32Array([1, 2]),
      indices: new Int32Array([0, 1]),
      indptr: new Int32Array([0, 1, 2]),
    }, { shape: [2, 2], registry });
    const before = registry.requestedBytes;
    assert.throws(
      () => m.toLayout("coo" as "csr", { registry }),
      InvalidArgumentError,
    );
    assert.throws(
      () => m.toLayout("csc", { registry, blockStrategy: { minElements: -1 } }),
      InvalidArgumentError,
    );
    assert.equal(registry.requestedBytes, before);
    m.release();
    assert.throws(() => m.transpose(), UseAfterFreeError);
    assert.throws(() => m.toLayout("csc"), UseAfterFreeError);
    assert.equal(registry.requestedBytes, 0);
    registry.dispose();
  });

  it("SparseMatrix.slice() and select() share blocks, keep them alive, and free them with the last user", () => {
    fc.assert(
      fc.property(
        caseArb,
        fc.array(
          fc.record({
            parent: fc.nat(),
            a: fc.nat(),
            b: fc.nat(),
            rows: fc.array(fc.nat(), { maxLength: 6 }),
            select: fc.boolean(),
          }),
          { maxLength: 8 },
        ),
        fc.array(fc.nat(), { maxLength: 12 }),
        (c, derivations, releaseOrder) => {
          const registry = new OwnershipRegistry();
          const arrays = toArrays(c);
          const root = SparseMatrix.build(arrays, {
            shape: shapeOf(c),
            layout: c.layout,
            registry,
            blockStrategy: { minElements: c.minElements, maxElements: 64 },
          });
          const bytes = registry.requestedBytes;
          // Each matrix with the original primary rows it holds.
          const live: { m: SparseMatrix<Float64Array>; rows: number[] }[] = [
            { m: root, rows: [...Array(c.primary).keys()] },
          ];
          for (const d of derivations) {
            const parent = live[d.parent % live.length];
            const n = parent.rows.length;
            if (d.select) {
              if (n === 0) continue;
              const picks = d.rows.map((r) => r % n);
              live.push({
                m: parent.m.select(picks),
                rows: picks.map((p) => parent.rows[p]),
              });
            } else {
              const start = d.a % (n + 1);
              const end = start + d.b % (n - start + 1);
              live.push({
                m: parent.m.slice(start, end),
                rows: parent.rows.slice(start, end),
              });
            }
          }
          for (const { m, rows } of live) {
            assert.deepEqual(plain(m.toContiguous()), pick(arrays, rows));
          }
          assert.equal(
            registry.requestedBytes,
            bytes,
            "slicing allocates no block",
          );
          // Release in a random order; every survivor still reads correctly.
          const order = [...live];
          for (const r of releaseOrder) {
            if (order.length === 0) break;
            const [gone] = order.splice(r % order.length, 1);
            gone.m.release();
            assert.throws(() => gone.m.row(0), UseAfterFreeError);
            assert.throws(() => gone.m.release(), DoubleFreeError);
            for (const { m, rows } of order) {
              assert.deepEqual(plain(m.toContiguous()), pick(arrays, rows));
            }
          }
          for (const { m } of order) m.release();
          assert.equal(registry.requestedBytes, 0);
          assert.equal(registry.pointerCount + registry.bufferCount, 0);
          assert.equal(registry.dispose(), undefined);
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("SparseMatrix refuses malformed input with a typed error and allocates nothing", () => {
    const registry = new OwnershipRegistry();
    const values = new Float32Array([1, 2, 3, 4]);
    const indices = new Int32Array([0, 2, 1, 3]);
    const good = new Int32Array([0, 2, 2, 4]);
    const cases: [CompressedArrays, [number, number], RegExp][] = [
      [
        { values, indices, indptr: new Int32Array([0, 2, 4]) },
        [3, 4],
        /must have rows \+ 1 = 4 entries, received 3/,
      ],
      [
        { values, indices, indptr: new Int32Array([0, 3, 2, 4]) },
        [3, 4],
        /non-decreasing integers, received indptr\[1\] = 3 and indptr\[2\] = 2/,
      ],
      [
        { values, indices, indptr: new Int32Array([1, 2, 2, 4]) },
        [3, 4],
        /must start at 0, received 1/,
      ],
      [
        { values, indices, indptr: new Int32Array([0, 2, 2, 3]) },
        [3, 4],
        /must end at nnz = values.length = 4, received 3/,
      ],
      [
        { values, indices, indptr: new Float64Array([0, 1.5, 2, 4]) },
        [3, 4],
        /non-decreasing integers/,
      ],
      [
        { values, indices: new Int32Array([0, 2, 1, 4]), indptr: good },
        [3, 4],
        /indices\[3\] = 4 \(row 2\) must be in \[0, 4\)/,
      ],
      [
        { values, indices: new Int32Array([0, -1, 1, 3]), indptr: good },
        [3, 4],
        /indices\[1\] = -1 \(row 0\)/,
      ],
      [
        { values, indices: new Int32Array([0, 1]), indptr: good },
        [3, 4],
        /one entry per value \(4\), received 2/,
      ],
      [{ values: [1, 2] as unknown as Float32Array, indices, indptr: good }, [
        3,
        4,
      ], /numeric typed array/],
      [
        {
          values,
          indices: new Float32Array(4) as unknown as Int32Array,
          indptr: good,
        },
        [3, 4],
        /Int32Array or Uint32Array/,
      ],
      [{ values, indices, indptr: good }, [-3, 4], /rows: must be an integer/],
      [{ values, indices, indptr: good }, [3, 1.5], /cols: must be an integer/],
    ];
    for (const [arrays, shape, message] of cases) {
      for (const make of [SparseMatrix.build, SparseMatrix.wrap]) {
        assert.throws(
          () => make(arrays, { shape, registry }),
          (e: unknown) =>
            e instanceof InvalidArgumentError && message.test(e.message),
          String(message),
        );
      }
    }
    assert.throws(
      () =>
        SparseMatrix.build({ values, indices, indptr: good }, {
          shape: [3, 4],
          layout: "coo" as "csr",
          registry,
        }),
      /layout/,
    );
    assert.throws(
      () =>
        SparseMatrix.build({ values, indices, indptr: good }, {
          shape: [3, 4],
          registry,
          blockStrategy: { minElements: 10, maxElements: 5 },
        }),
      /minElements must be at most maxElements 5, received 10/,
    );
    // CSC names columns.
    assert.throws(
      () =>
        SparseMatrix.build({ values, indices, indptr: good }, {
          shape: [4, 2],
          layout: "csc",
          registry,
        }),
      /must have cols \+ 1 = 3 entries/,
    );
    assert.equal(registry.requestedBytes, 0);
    assert.equal(registry.records().length, 0);
    using m = SparseMatrix.build({ values, indices, indptr: good }, {
      shape: [3, 4],
      registry,
    });
    const before = registry.stats();
    assert.throws(
      () => m.slice(2, 1),
      /end: must be an integer in \[2, 3\], received 1/,
    );
    assert.throws(() => m.slice(0, 4), InvalidArgumentError);
    assert.throws(
      () => m.select([0, 3]),
      /rows\[1\]: must be an integer in \[0, 2\], received 3/,
    );
    assert.throws(() => m.row(3), /\[0, 3\), received 3/);
    assert.deepEqual(registry.stats(), before);
    registry.dispose();
  });

  it("SparseMatrix.build() uses SCL's block size and one registered allocation per block", () => {
    using registry = new OwnershipRegistry();
    const primary = 1000, perRow = 10;
    const nnz = primary * perRow;
    const indptr = new Int32Array(primary + 1).map((_, i) => i * perRow);
    const arrays = {
      values: new Float32Array(nnz).fill(1),
      indices: new Int32Array(nnz).map((_, k) => k % 50),
      indptr,
    };
    using m = SparseMatrix.build(arrays, { shape: [primary, 50], registry });
    // 10 per row * 8 = 80, clamped up to 4096: 409 rows per block.
    assert.equal(m.blockCount, Math.ceil(primary / 409));
    assert.equal(registry.pointerCount, m.blockCount);
    assert.equal(registry.requestedBytes, nnz * 8);
    using tail = m.slice(900);
    assert.equal(registry.bufferCount, 1); // the last block now has an alias
    assert.equal(tail.blockCount, 1);
    assert.equal(String(tail), "SparseMatrix(csr 100x50, nnz 1000, 1 block)");
  });

  it("SparseMatrix of a matrix with no rows or no non-zeros works", () => {
    using registry = new OwnershipRegistry();
    const empty = {
      values: new Float32Array(0),
      indices: new Int32Array(0),
      indptr: new Int32Array(4),
    };
    const allocator = new CpuAllocator({ byteLength: 1 << 12 });
    using m = SparseMatrix.build(empty, { shape: [3, 3], registry });
    using m2 = SparseMatrix.build(empty, {
      shape: [3, 3],
      registry,
      allocator,
    });
    using m3 = SparseMatrix.build(empty, {
      shape: [3, 3],
      registry,
      allocator,
    });
    assert.equal(m.nnz + m2.nnz + m3.nnz, 0);
    assert.equal(m.blockCount, 0);
    assert.equal(registry.records().length, 0);
    assert.deepEqual([...m.toContiguous().indptr], [0, 0, 0, 0]);
    using none = SparseMatrix.build(
      {
        values: new Float32Array(0),
        indices: new Int32Array(0),
        indptr: new Int32Array(1),
      },
      { shape: [0, 5], registry },
    );
    assert.equal(none.blockCount, 0);
    using nothing = none.slice(0, 0);
    assert.deepEqual([...nothing.toContiguous().indptr], [0]);
  });

  it("SparseMatrix.build() with an allocator carves blocks from its heap and frees them there", () => {
    fc.assert(
      fc.property(caseArb, fc.nat(), (c, cut) => {
        using registry = new OwnershipRegistry();
        const allocator = new CpuAllocator({ byteLength: 1 << 16 });
        const arrays = toArrays(c);
        const m = SparseMatrix.build(arrays, {
          shape: shapeOf(c),
          layout: c.layout,
          registry,
          allocator,
          blockStrategy: { minElements: c.minElements, maxElements: 64 },
        });
        assert.ok(m.nnz === 0 || allocator.allocatedBytes > 0);
        assert.ok(registry.records().every((r) => r.kind === "heap"));
        const start = cut % (c.primary + 1);
        const tail = m.slice(start);
        m.release();
        assert.deepEqual(
          plain(tail.toContiguous()),
          pick(arrays, [...Array(c.primary).keys()].slice(start)),
        );
        tail.release();
        assert.equal(allocator.allocatedBytes, 0);
        assert.equal(registry.requestedBytes, 0);
      }),
      { numRuns: modelRuns() },
    );
  });

  it("SparseMatrix.build() that runs out of memory midway frees the blocks it made and changes nothing", () => {
    using registry = new OwnershipRegistry();
    const heap = new CpuAllocator({ byteLength: 1 << 16 });
    class Failing extends CpuAllocator {
      left: number;
      constructor(left: number) {
        super({ heap: heap.heap });
        this.left = left;
      }
      override allocate(byteLength: number) {
        if (this.left-- <= 0) throw new RangeError("simulated out of memory");
        return super.allocate(byteLength);
      }
    }
    const primary = 64, perRow = 8;
    const arrays = {
      values: new Float64Array(primary * perRow).fill(2),
      indices: new Int32Array(primary * perRow).fill(3),
      indptr: new Int32Array(primary + 1).map((_, i) => i * perRow),
    };
    for (const left of [0, 1, 3]) {
      assert.throws(
        () =>
          SparseMatrix.build(arrays, {
            shape: [primary, 4],
            registry,
            allocator: new Failing(left),
            blockStrategy: { minElements: 16, maxElements: 16 },
          }),
        /simulated out of memory/,
      );
      assert.equal(heap.heap.allocatedBytes, 0);
      assert.equal(registry.records().length, 0);
    }
  });

  it("SparseMatrix with a leakDetector reports matrices collected without release", async () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (gc === undefined) return; // needs --v8-flags=--expose-gc
    using registry = new OwnershipRegistry({ onLeak: () => {} });
    const detector = new LeakDetector();
    const arrays = {
      values: new Float32Array([1, 2]),
      indices: new Int32Array([0, 1]),
      indptr: new Int32Array([0, 1, 2]),
    };
    const kept = SparseMatrix.build(arrays, {
      shape: [2, 2],
      registry,
      leakDetector: detector,
    });
    (() => {
      kept.slice(0, 1); // dropped without release
    })();
    assert.equal(detector.watching, 2);
    for (let i = 0; i < 20 && detector.leaks.length === 0; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(detector.leaks.length, 1);
    assert.match(detector.leaks[0].label, /SparseMatrix\(csr 1x2, 1 blocks\)/);
    kept.release();
    assert.equal(detector.watching, 0);
  });
});
