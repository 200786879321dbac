/**
 * `@allot/sparse`: CSR and CSC matrices stored discontiguously, after
 * SCL-Core's `Sparse<T, IsCSR>`: one view per primary row, carved out of
 * blocks owned through an `OwnershipRegistry` from `@allot/registry`, so
 * row slices share blocks without copying and keep them alive.
 *
 * @example Wrap, build, slice and convert
 * ```ts
 * import { SparseMatrix } from "@allot/sparse";
 * import { OwnershipRegistry } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * using registry = new OwnershipRegistry();
 * const csr = {
 *   values: new Float64Array([10, 20, 30, 40]),
 *   indices: new Int32Array([0, 3, 1, 2]),
 *   indptr: new Int32Array([0, 2, 2, 4]),
 * };
 * using m = SparseMatrix.build(csr, { shape: [3, 4], registry });
 * assert.equal(registry.bufferCount + registry.pointerCount, m.blockCount);
 * const last = m.slice(2, 3);
 * m.release(); // the block stays alive: the slice still references it
 * assert.deepEqual([...last.entries()], [[0, 1, 30], [0, 2, 40]]);
 * last.release();
 * assert.equal(registry.requestedBytes, 0);
 * ```
 *
 * @module
 */

export * from "./block_strategy.ts";
export * from "./sparse_matrix.ts";
