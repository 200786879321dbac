// Build a discontiguous CSR matrix in registry-owned blocks carved from a
// CpuAllocator heap, slice rows without copying, hand a contiguous copy to a
// library that needs one, and watch blocks stay alive while views use them.
// Run: deno run -A examples/sparse.ts
import { CpuAllocator, CpuHeap } from "@allot/cpu";
import { OwnershipRegistry } from "@allot/registry";
import { SparseMatrix } from "@allot/sparse";

const rows = 20_000, cols = 20_000, perRow = 50;
const indptr = new Int32Array(rows + 1);
for (let i = 0; i < rows; i++) indptr[i + 1] = indptr[i] + perRow;
const nnz = indptr[rows];
const indices = new Int32Array(nnz).map((_, k) => (k * 7919) % cols);
const values = new Float32Array(nnz).map((_, k) => k % 13);

using registry = new OwnershipRegistry();
const allocator = new CpuAllocator({
  heap: new CpuHeap(new ArrayBuffer(nnz * 8 + (1 << 20))),
});

const matrix = SparseMatrix.build({ values, indices, indptr }, {
  shape: [rows, cols],
  registry,
  allocator,
});
console.log(`${matrix}`);
console.log(
  `blocks: ${registry.pointerCount} registered, ${registry.requestedBytes} bytes`,
);

// Zero-copy row slice: it takes a reference on each block it uses.
const middle = matrix.slice(5_000, 15_000);
matrix.release(); // blocks used by `middle` stay alive
console.log(
  `after releasing the matrix: ${middle} keeps ${registry.bufferCount} blocks`,
);

// A library that wants traditional CSR arrays gets a contiguous copy.
const { values: v, indptr: p } = middle.toContiguous();
console.log(
  `contiguous: ${v.length} values, indptr ends at ${p[p.length - 1]}`,
);

// Read rows without making views.
const t = middle.rowTable();
let total = 0;
for (let i = 0; i < middle.primaryLength; i++) {
  const block = t.values[t.rowBlock[i]];
  for (let k = t.rowStart[i]; k < t.rowStart[i] + t.rowLength[i]; k++) {
    total += block[k];
  }
}
console.log(`sum of the slice: ${total}`);

middle.release();
console.log(
  `released everything: ${registry.requestedBytes} bytes registered, heap in use ${allocator.allocatedBytes}`,
);

// Bad input is refused before anything is allocated.
try {
  SparseMatrix.build({ values, indices, indptr: indptr.subarray(1) }, {
    shape: [rows, cols],
    registry,
  });
} catch (error) {
  console.log(`refused: ${(error as Error).message}`);
}
