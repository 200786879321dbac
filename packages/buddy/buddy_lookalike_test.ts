/**
 * Outside-in checks of `@allot/buddy` against look-alike pointers
 * (`Object.create(DataPtr.prototype)`: `instanceof` accepts it, its getters
 * throw a `TypeError`): refused with typed errors, changing nothing.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ContractViolationError, InvalidArgumentError } from "@allot/core";
import { LookAlikeAllocator, lookAlikePtr } from "../core/_test_lookalike.ts";
import { BuddyAllocator, PlaceAllocator } from "./mod.ts";

describe("@allot/buddy look-alikes", () => {
  it("PlaceAllocator.free refuses a look-alike DataPtr with InvalidArgumentError, changing nothing", () => {
    const memory = new PlaceAllocator({ initialPoolByteLength: 1 << 16 });
    const p = memory.alloc("cpu", 4096);
    assert.throws(
      () => memory.free("cpu", lookAlikePtr()),
      InvalidArgumentError,
    );
    assert.equal(memory.used("cpu"), 4096);
    memory.free("cpu", p);
    assert.equal(memory.used("cpu"), 0);
  });

  it("BuddyAllocator refuses a backing that returns a look-alike DataPtr with ContractViolationError", () => {
    const buddy = new BuddyAllocator({
      backing: new LookAlikeAllocator(),
      initialPoolByteLength: 1 << 12,
    });
    assert.throws(() => buddy.alloc(64), ContractViolationError);
    assert.equal(buddy.allocatedBytes, 0);
  });
});
