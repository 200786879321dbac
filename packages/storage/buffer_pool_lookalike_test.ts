/**
 * Outside-in check of `@allot/storage`'s `BufferPool` against an allocator
 * that returns a look-alike pointer (`Object.create(DataPtr.prototype)`:
 * `instanceof` accepts it, its getters throw a `TypeError`) and a look-alike
 * handed to `recycle`: both refused with typed errors.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ContractViolationError, InvalidArgumentError } from "@allot/core";
import { LookAlikeAllocator, lookAlikePtr } from "../core/_test_lookalike.ts";
import { BufferPool } from "./mod.ts";

describe("@allot/storage BufferPool look-alikes", () => {
  it("acquire refuses a look-alike from the allocator, recycle refuses one from the caller, with typed errors", () => {
    const pool = new BufferPool(new LookAlikeAllocator());
    assert.throws(() => pool.acquire(64), ContractViolationError);
    // a look-alike is no DataPtr: not a handle of the verb's kind
    assert.throws(() => pool.recycle(lookAlikePtr()), InvalidArgumentError);
    assert.equal(pool.stats().allocatedBytes, 0);
  });
});
