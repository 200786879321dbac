/**
 * Second outside-in review of `@allot/sparse` from the public API: what
 * `sparse_hostile_test.ts` missed. Arrays whose memory is gone (detached
 * or shrunk) are refused with a typed error, changing nothing.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { OwnershipRegistry } from "@allot/registry";
import { SparseMatrix } from "./mod.ts";

function arrays() {
  return {
    values: new Float32Array([1, 2, 3, 4]),
    indices: new Int32Array([0, 2, 1, 2]),
    indptr: new Int32Array([0, 2, 3, 4]),
  };
}

/** A view whose memory was transferred away (detached). */
function detached<T extends Float32Array | Int32Array>(array: T): T {
  (array.buffer as ArrayBuffer).transfer();
  return array;
}

/** A length-tracking view of a resizable buffer, then shrunk to 0 bytes. */
function shrunk<T extends Float32Array | Int32Array>(
  make: (buffer: ArrayBuffer) => T,
): T {
  const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
  const view = make(buffer);
  buffer.resize(0);
  return view;
}

describe("@allot/sparse hostile (second review)", () => {
  for (
    const [name, spoil] of [
      ["detached values", (a: ReturnType<typeof arrays>) => {
        a.values = detached(a.values);
      }],
      ["detached indices", (a: ReturnType<typeof arrays>) => {
        a.indices = detached(a.indices);
      }],
      ["detached indptr", (a: ReturnType<typeof arrays>) => {
        a.indptr = detached(a.indptr);
      }],
      ["fixed-length values over a shrunk resizable buffer", (
        a: ReturnType<typeof arrays>,
      ) => {
        a.values = shrunk((b) => new Float32Array(b, 0, 4));
      }],
      ["fixed-length indptr over a shrunk resizable buffer", (
        a: ReturnType<typeof arrays>,
      ) => {
        a.indptr = shrunk((b) => new Int32Array(b, 0, 4));
      }],
    ] as const
  ) {
    it(`wrap() and build() refuse ${name} with InvalidArgumentError (a detached one threw a raw TypeError), registering nothing`, () => {
      const registry = new OwnershipRegistry();
      for (const make of ["wrap", "build"] as const) {
        const a = arrays();
        spoil(a);
        assert.throws(
          () =>
            make === "wrap"
              ? SparseMatrix.wrap(a, { shape: [3, 3] })
              : SparseMatrix.build(a, { shape: [3, 3], registry }),
          InvalidArgumentError,
        );
      }
      assert.deepEqual([registry.pointerCount, registry.requestedBytes], [
        0,
        0,
      ]);
      registry.dispose();
    });
  }
});
