// ManagedBufferPool and BufferPool from the outside (review 8): options that
// are not an object (null included) are refused with InvalidArgumentError
// naming them, as every allot constructor does, never a TypeError from
// reading them.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { BufferPool, ManagedBufferPool } from "./mod.ts";
import { BumpAllocator } from "./_test_allocators.ts";

describe("ManagedBufferPool options (review 8)", () => {
  it("refuses options that are not an object with InvalidArgumentError", () => {
    const allocator = new BumpAllocator();
    for (const bad of [null, 1, "x", true]) {
      for (
        const make of [
          () => new ManagedBufferPool(allocator, bad as unknown as object),
          () => new BufferPool(allocator, bad as unknown as object),
        ]
      ) {
        let caught: unknown;
        try {
          make();
        } catch (e) {
          caught = e;
        }
        assert.ok(
          caught instanceof InvalidArgumentError,
          `${String(bad)}: ${String(caught)}`,
        );
        assert.equal(caught.argument, "options");
        assert.equal(caught.value, bad);
      }
    }
    // undefined takes the defaults
    using pool = new ManagedBufferPool(allocator, undefined);
    assert.equal(pool.closed, false);
  });
});
