// Sparse matrices from the outside (review 9): an allocator whose `allocate`
// getter changes its answer, and a fast-check model in which matrices built
// over a heap allocator are sliced, selected, transposed, converted and
// released in any order while the heap's other blocks carry byte patterns:
// every matrix reads exactly the entries of its model, no pattern changes,
// the registry's and the heap's figures add up, and everything goes back.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { AllotError } from "@allot/core";
import { CpuAllocator, CpuHeap } from "@allot/cpu";
import { OwnershipRegistry } from "@allot/registry";
import { checkPattern, modelRuns, writePattern } from "../core/_test_faults.ts";
import { SparseMatrix } from "./sparse_matrix.ts";

type Entry = [row: number, col: number, value: number];

function csrOf(rows: number, entries: Entry[]) {
  const sorted = [...entries].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const indptr = new Int32Array(rows + 1);
  for (const [r] of sorted) indptr[r + 1]++;
  for (let r = 0; r < rows; r++) indptr[r + 1] += indptr[r];
  return {
    values: new Float64Array(sorted.map((e) => e[2])),
    indices: new Int32Array(sorted.map((e) => e[1])),
    indptr,
  };
}

function key(entries: Iterable<Entry>): string[] {
  return [...entries].map(([r, c, v]) => `${r},${c},${v}`).sort();
}

describe("SparseMatrix collaborators (review 9)", () => {
  it("build() over an allocator whose allocate getter changes its answer: built exactly or a typed refusal, nothing left", () => {
    const heap = new CpuHeap(new ArrayBuffer(1 << 16));
    const cpu = new CpuAllocator({ heap });
    using registry = new OwnershipRegistry();
    const arrays = csrOf(4, [[0, 1, 1], [1, 2, 2], [3, 0, 3], [3, 3, 4]]);
    for (let good = 0; good < 6; good++) {
      let reads = 0;
      const allocator = {
        get allocate() {
          return reads++ < good
            ? (n: number) => cpu.allocate(n)
            : (7 as unknown as never);
        },
      };
      let m: SparseMatrix | undefined;
      try {
        m = SparseMatrix.build(arrays, {
          shape: [4, 4],
          registry,
          allocator: allocator as never,
          blockStrategy: { minElements: 1, maxElements: 2, rowsPerBlock: 1 },
        });
      } catch (error) {
        assert.ok(error instanceof AllotError, String(error));
      }
      if (m !== undefined) {
        assert.deepEqual(
          key(m.entries()),
          key([[0, 1, 1], [1, 2, 2], [3, 0, 3], [3, 3, 4]]),
        );
        m.release();
      }
      assert.equal(cpu.allocatedBytes, 0, `good ${good}`);
      assert.equal(registry.requestedBytes, 0);
    }
    heap.checkIntegrity();
  });
});

describe("SparseMatrix.build() over an allocator that changes the source (review 9)", () => {
  it("an allocator that detaches the values' buffer mid-build: a typed refusal, nothing left", () => {
    const heap = new CpuHeap(new ArrayBuffer(1 << 16));
    const cpu = new CpuAllocator({ heap });
    using registry = new OwnershipRegistry();
    const arrays = csrOf(4, [[0, 1, 1], [1, 2, 2], [3, 0, 3], [3, 3, 4]]);
    const before = registry.stats();
    let calls = 0;
    const detacher = {
      allocate(n: number) {
        if (++calls === 2) (arrays.values.buffer as ArrayBuffer).transfer(0);
        return cpu.allocate(n);
      },
    };
    assert.throws(
      () =>
        SparseMatrix.build(arrays, {
          shape: [4, 4],
          registry,
          allocator: detacher as never,
          blockStrategy: { minElements: 1, maxElements: 2, rowsPerBlock: 1 },
        }),
      AllotError,
    );
    assert.equal(cpu.allocatedBytes, 0);
    assert.equal(registry.stats().requestedBytes.current, 0);
    assert.equal(registry.stats().pointers, before.pointers);
    heap.checkIntegrity();
  });

  it("an allocator that rewrites indptr mid-build: every row stays inside its block and nnz adds up", () => {
    const cpu = new CpuAllocator();
    using registry = new OwnershipRegistry();
    const arrays = csrOf(4, [[0, 1, 1], [1, 2, 2], [3, 0, 3], [3, 3, 4]]);
    let calls = 0;
    const rewriter = {
      allocate(n: number) {
        if (++calls === 1) arrays.indptr.set([0, 4, 4, 4, 4]);
        return cpu.allocate(n);
      },
    };
    let m: SparseMatrix | undefined;
    try {
      m = SparseMatrix.build(arrays, {
        shape: [4, 4],
        registry,
        allocator: rewriter as never,
        blockStrategy: { minElements: 1, maxElements: 2, rowsPerBlock: 1 },
      });
    } catch (error) {
      assert.ok(error instanceof AllotError, String(error));
    }
    if (m !== undefined) {
      const t = m.rowTable();
      let sum = 0;
      for (let r = 0; r < m.primaryLength; r++) {
        const block = t.values[t.rowBlock[r]];
        assert.ok(
          t.rowStart[r] + t.rowLength[r] <= block.length,
          `row ${r} reaches past its block`,
        );
        sum += t.rowLength[r];
      }
      assert.equal(sum, m.nnz);
      assert.equal([...m.entries()].length, m.nnz);
      m.release();
    }
    assert.equal(cpu.allocatedBytes, 0);
  });
});

type Op =
  | { kind: "slice"; pick: number; a: number; b: number }
  | { kind: "select"; pick: number; rows: number[] }
  | { kind: "transpose"; pick: number }
  | { kind: "toLayout"; pick: number }
  | { kind: "release"; pick: number }
  | { kind: "scratch"; byteLength: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant("slice" as const),
    pick: fc.nat(),
    a: fc.nat(),
    b: fc.nat(),
  }),
  fc.record({
    kind: fc.constant("select" as const),
    pick: fc.nat(),
    rows: fc.array(fc.nat(), { maxLength: 6 }),
  }),
  fc.record({ kind: fc.constant("transpose" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("toLayout" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }),
  fc.record({
    kind: fc.constant("scratch" as const),
    byteLength: fc.integer({ min: 1, max: 500 }),
  }),
);

/** A model matrix: its entries as (row, col) of its own shape. */
interface Model {
  m: SparseMatrix;
  rows: number;
  cols: number;
  entries: Entry[];
}

/** Primary index of an entry: the row for CSR, the column for CSC. */
function primary(model: Model, e: Entry): number {
  return model.m.layout === "csr" ? e[0] : e[1];
}

describe("SparseMatrix model with byte patterns (review 9)", () => {
  it("slices, selections, transposes and conversions read their model's entries; neighbours keep their patterns; all goes back", () => {
    const entryArb = fc.tuple(
      fc.integer({ min: 0, max: 5 }),
      fc.integer({ min: 0, max: 5 }),
      fc.integer({ min: 1, max: 99 }),
    );
    fc.assert(
      fc.property(
        fc.uniqueArray(entryArb, {
          selector: (e) => `${e[0]},${e[1]}`,
          maxLength: 20,
        }),
        fc.array(opArb, { maxLength: 25, size: "max" }),
        (entries, ops) => {
          const heap = new CpuHeap(new ArrayBuffer(1 << 18));
          const cpu = new CpuAllocator({ heap });
          const registry = new OwnershipRegistry();
          const strategy = { minElements: 1, maxElements: 4, rowsPerBlock: 2 };
          const first = SparseMatrix.build(csrOf(6, entries as Entry[]), {
            shape: [6, 6],
            registry,
            allocator: cpu,
            blockStrategy: strategy,
          });
          const live: Model[] = [
            { m: first, rows: 6, cols: 6, entries: entries as Entry[] },
          ];
          const scratch: {
            ptr: ReturnType<typeof cpu.allocate>;
            id: number;
          }[] = [];
          let nextId = 1;
          for (const op of ops) {
            if (op.kind === "scratch") {
              const ptr = cpu.allocate(op.byteLength);
              const id = nextId++;
              writePattern(cpu.view(ptr, Uint8Array), id);
              scratch.push({ ptr, id });
              continue;
            }
            if (live.length === 0) break;
            const i = op.pick % live.length;
            const model = live[i];
            const n = model.m.primaryLength;
            const csr = model.m.layout === "csr";
            if (op.kind === "slice") {
              const a = op.a % (n + 1);
              const b = a + (op.b % (n - a + 1));
              const m = model.m.slice(a, b);
              const kept = model.entries.filter((e) =>
                primary(model, e) >= a && primary(model, e) < b
              ).map(([r, c, v]): Entry => csr ? [r - a, c, v] : [r, c - a, v]);
              live.push({
                m,
                rows: csr ? b - a : model.rows,
                cols: csr ? model.cols : b - a,
                entries: kept,
              });
            } else if (op.kind === "select") {
              const rows = n === 0 ? [] : op.rows.map((r) => r % n);
              const m = model.m.select(rows);
              const kept: Entry[] = [];
              rows.forEach((p, k) => {
                for (const e of model.entries) {
                  if (primary(model, e) !== p) continue;
                  kept.push(csr ? [k, e[1], e[2]] : [e[0], k, e[2]]);
                }
              });
              live.push({
                m,
                rows: csr ? rows.length : model.rows,
                cols: csr ? model.cols : rows.length,
                entries: kept,
              });
            } else if (op.kind === "transpose") {
              live.push({
                m: model.m.transpose(),
                rows: model.cols,
                cols: model.rows,
                entries: model.entries.map(([r, c, v]): Entry => [c, r, v]),
              });
            } else if (op.kind === "toLayout") {
              live.push({
                m: model.m.toLayout(csr ? "csc" : "csr", {
                  registry,
                  allocator: cpu,
                  blockStrategy: strategy,
                }),
                rows: model.rows,
                cols: model.cols,
                entries: model.entries,
              });
            } else {
              model.m.release();
              live.splice(i, 1);
              assert.throws(() => [...model.m.entries()], AllotError);
            }
            for (const x of live) {
              assert.deepEqual(x.m.shape, [x.rows, x.cols]);
              assert.equal(x.m.nnz, x.entries.length);
              assert.deepEqual(key(x.m.entries()), key(x.entries));
            }
            for (const s of scratch) {
              checkPattern(cpu.view(s.ptr, Uint8Array), s.id, "scratch");
            }
          }
          for (const x of live) x.m.release();
          for (const s of scratch) s.ptr.release();
          assert.equal(registry.requestedBytes, 0);
          assert.equal(cpu.allocatedBytes, 0);
          heap.checkIntegrity();
          registry.dispose();
        },
      ),
      { numRuns: modelRuns(150) },
    );
  });
});
