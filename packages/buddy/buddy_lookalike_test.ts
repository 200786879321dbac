/**
 * Outside-in checks of `@allot/buddy` against look-alike pointers
 * (`Object.create(DataPtr.prototype)`: `instanceof` accepts it, its getters
 * throw a `TypeError`): refused with typed errors, changing nothing.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AllocatorBase,
  ContractViolationError,
  DataPtr,
  Device,
  InvalidArgumentError,
} from "@allot/core";
import { BuddyAllocator, PlaceAllocator } from "./mod.ts";

class LookAlike extends AllocatorBase<ArrayBuffer, null> {
  readonly device: Device = Device.cpu();
  allocate(): DataPtr<ArrayBuffer, null> {
    return Object.create(DataPtr.prototype);
  }
}

describe("@allot/buddy look-alikes", () => {
  it("PlaceAllocator.free refuses a look-alike DataPtr with InvalidArgumentError, changing nothing", () => {
    const memory = new PlaceAllocator({ initialPoolByteLength: 1 << 16 });
    const p = memory.alloc("cpu", 4096);
    const fake = Object.create(DataPtr.prototype);
    assert.throws(() => memory.free("cpu", fake), InvalidArgumentError);
    assert.equal(memory.used("cpu"), 4096);
    memory.free("cpu", p);
    assert.equal(memory.used("cpu"), 0);
  });

  it("BuddyAllocator refuses a backing that returns a look-alike DataPtr with ContractViolationError", () => {
    const buddy = new BuddyAllocator({
      backing: new LookAlike(),
      initialPoolByteLength: 1 << 12,
    });
    assert.throws(() => buddy.alloc(64), ContractViolationError);
    assert.equal(buddy.allocatedBytes, 0);
  });
});
