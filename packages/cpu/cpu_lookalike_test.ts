/**
 * Outside-in checks of `@allot/cpu` against look-alikes and shared state:
 * `view()` of `Object.create(DataPtr.prototype)` is refused with a typed
 * error (it used to throw a TypeError while writing its own message), and
 * `heaps` is a copy a caller cannot use to change the allocator.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DataPtr, InvalidArgumentError } from "@allot/core";
import { CpuAllocator } from "./mod.ts";

describe("@allot/cpu look-alikes", () => {
  it("CpuAllocator.view refuses a look-alike DataPtr with InvalidArgumentError", () => {
    const allocator = new CpuAllocator({ byteLength: 1 << 16 });
    const fake = Object.create(DataPtr.prototype);
    assert.throws(() => allocator.view(fake, Uint8Array), InvalidArgumentError);
    assert.equal(allocator.allocatedBytes, 0);
  });

  it("CpuAllocator.heaps is a copy: a caller's push or splice never reaches the allocator", () => {
    const allocator = new CpuAllocator({ byteLength: 1 << 16 });
    const heaps = allocator.heaps as CpuAllocator["heap"][];
    const first = heaps[0];
    heaps.splice(0, heaps.length);
    assert.equal(allocator.heaps.length, 1);
    assert.equal(allocator.heaps[0], first);
    using ptr = allocator.allocate(64);
    assert.equal(ptr.byteLength, 64);
  });
});
