/**
 * Second outside-in review of `@allot/registry`, from the public API only:
 * typed-array subclasses whose getters lie, buffers the engine cannot
 * detach, aliases arrays with their own iterator or throwing getters, and
 * owners (`ArrayOwner`, `RegistryGuard`) whose release the registry
 * refuses without changing anything.
 *
 * @module
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AllotError,
  DoubleFreeError,
  InvalidArgumentError,
  UnsupportedOperationError,
  UseAfterFreeError,
} from "@allot/core";
import { BuddyAllocator } from "@allot/buddy";
import { ArrayOwner, OwnershipRegistry, RegistryGuard } from "./mod.ts";

describe("OwnershipRegistry hostile views", () => {
  it("adopt() refuses a subclass whose byteOffset/byteLength lie, so freeing it cannot detach the rest of its buffer", () => {
    using registry = new OwnershipRegistry();
    class Whole extends Uint8Array {
      override get byteOffset(): number {
        return 0;
      }
      override get byteLength(): number {
        return this.buffer.byteLength;
      }
    }
    const buffer = new ArrayBuffer(64);
    const neighbour = new Uint8Array(buffer, 0, 32).fill(7);
    const liar = new Whole(buffer, 32, 32);
    assert.throws(() => registry.adopt(liar), InvalidArgumentError);
    assert.equal(registry.pointerCount, 0);
    assert.equal(registry.requestedBytes, 0);
    assert.equal(buffer.detached, false);
    assert.equal(neighbour[0], 7);
    // A plain view of half the buffer is adopted, and freeing it leaves the
    // buffer attached (it does not own all of it).
    const half = new Uint8Array(buffer, 32, 32);
    registry.adopt(half);
    registry.unregister(half);
    assert.equal(buffer.detached, false);
    assert.equal(neighbour[0], 7);
    // An honest subclass is fine, and one over its whole buffer is detached.
    class Honest extends Float32Array {}
    const whole = new Honest(8);
    registry.adopt(whole);
    registry.unregister(whole);
    assert.equal(whole.length, 0);
  });

  it("unregister() of an adopted buffer the engine cannot detach (a WebAssembly.Memory's) frees the record without a raw TypeError", () => {
    using registry = new OwnershipRegistry();
    const memory = new WebAssembly.Memory({ initial: 1 });
    const view = new Uint8Array(memory.buffer);
    registry.adopt(view);
    assert.equal(registry.requestedBytes, 65536);
    assert.equal(registry.unregister(view), true);
    assert.equal(registry.pointerCount, 0);
    assert.equal(registry.requestedBytes, 0);
    assert.equal(registry.isRegistered(view), false);
    assert.equal(view.length, 65536, "still the Memory's");
    assert.throws(() => registry.unregister(view), DoubleFreeError);
  });
});

describe("OwnershipRegistry hostile places", () => {
  it("a place whose memory's getters throw still gets typed errors, a report, and a dispose() that frees everything", () => {
    const leaks: number[] = [];
    const registry = new OwnershipRegistry({
      onLeak: (report) => leaks.push(report.records.length),
    });
    const memory = {
      get constructor(): never {
        throw new Error("a hostile constructor getter");
      },
      get byteLength(): never {
        throw new Error("a hostile byteLength getter");
      },
    };
    const place = { memory, byteOffset: 0 };
    registry.register(place, { byteLength: 8 });
    const before = JSON.stringify(registry.stats());
    assert.throws(
      () => registry.register(place, { byteLength: 8 }),
      InvalidArgumentError,
    );
    assert.throws(
      () =>
        registry.registerBuffer({ memory, byteOffset: 4 }, {
          byteLength: 4,
          aliases: [{ memory, byteOffset: 16 }],
        }),
      InvalidArgumentError,
    );
    assert.throws(() => registry.transferOut(place), AllotError);
    assert.equal(JSON.stringify(registry.stats()), before);
    assert.match(registry.report(), /memory\+0/);
    const data = registry.newArray("f32", 4);
    const report = registry.dispose();
    assert.equal(report?.records.length, 2);
    assert.deepEqual(leaks, [2]);
    assert.equal(registry.pointerCount, 0);
    assert.equal(registry.requestedBytes, 0);
    assert.equal(data.length, 0, "freed by dispose()");
  });
});

describe("OwnershipRegistry hostile aliases", () => {
  it("registerBuffer() reads aliases by index: an array's own iterator is not called, a throwing getter is a typed refusal", () => {
    using registry = new OwnershipRegistry();
    const main = new Uint8Array(16);
    const tail = main.subarray(8);
    const aliases = [tail];
    let iterated = false;
    Object.defineProperty(aliases, Symbol.iterator, {
      value: function* () {
        iterated = true;
        yield main.subarray(4);
        throw new Error("a hostile iterator");
      },
    });
    assert.equal(typeof registry.registerBuffer(main, { aliases }), "number");
    assert.equal(iterated, false);
    assert.ok(registry.isRegistered(tail));
    assert.ok(!registry.isRegistered(main.subarray(4)));
    registry.unregister(tail);
    registry.unregister(main);
    assert.equal(registry.bufferCount, 0);

    const throwing: Uint8Array[] = [];
    Object.defineProperty(throwing, 0, {
      get() {
        throw new Error("a hostile getter");
      },
    });
    const before = JSON.stringify(registry.stats());
    assert.throws(
      () => registry.registerBuffer(main, { aliases: throwing }),
      InvalidArgumentError,
    );
    assert.equal(JSON.stringify(registry.stats()), before);
    assert.ok(!registry.isRegistered(main));
  });
});

// A strict registry with a live heap array; `dirty()` frees it (into the
// quarantine) and writes it through a stale view, so that the next checked
// call is refused with a UseAfterFreeError before anything changes.
function strictRegistry(): {
  registry: OwnershipRegistry;
  allocator: BuddyAllocator;
  dirty: () => void;
} {
  const allocator = new BuddyAllocator({
    initialPoolByteLength: 4096,
    minBlockByteLength: 64,
  });
  const registry = new OwnershipRegistry({ strict: true, onLeak: () => {} });
  const a = registry.newArray("u8", 64, { allocator });
  const stale = a.subarray(0);
  const dirty = () => {
    registry.unregister(a);
    stale[3] = 1;
  };
  return { registry, allocator, dirty };
}

describe("owners whose release the registry refuses", () => {
  it("ArrayOwner.release() refused before any change keeps ownership, and releases on the next call", () => {
    const { registry, allocator, dirty } = strictRegistry();
    const b = registry.newArray("u8", 64, { allocator });
    const owner = new ArrayOwner(registry, b);
    dirty();
    assert.throws(() => owner.release(), UseAfterFreeError);
    assert.equal(owner.released, false);
    assert.ok(registry.isRegistered(b));
    assert.equal(owner.array, b);
    owner.release(); // the stale write was reported once: this one goes
    assert.equal(owner.released, true);
    assert.ok(!registry.isRegistered(b));
    assert.throws(() => owner.release(), DoubleFreeError);
    assert.equal(registry.pointerCount, 0);
    registry.dispose();
  });

  it("RegistryGuard disposal refused before any change keeps the array, and frees it on the next disposal", () => {
    const { registry, allocator, dirty } = strictRegistry();
    const guard = new RegistryGuard(registry, "u8", 64, { allocator });
    const array = guard.array;
    dirty();
    assert.throws(() => guard[Symbol.dispose](), UseAfterFreeError);
    assert.equal(guard.owns, true);
    assert.ok(registry.isRegistered(array));
    guard[Symbol.dispose]();
    assert.equal(guard.owns, false);
    assert.ok(!registry.isRegistered(array));
    assert.equal(registry.pointerCount, 0);
    registry.dispose();
  });

  it("an owner whose release threw after the record went (a throwing deleter) counts as released", () => {
    using registry = new OwnershipRegistry();
    const data = new Uint8Array(8);
    registry.register(data, {
      deleter: () => {
        throw new AllotError("the deleter failed");
      },
    });
    const owner = new ArrayOwner(registry, data);
    assert.throws(() => owner.release(), AllotError);
    assert.equal(owner.released, true);
    assert.ok(!registry.isRegistered(data));
    assert.throws(() => owner.release(), DoubleFreeError);
  });
});

describe("Worker hand-off edge cases", () => {
  it("transferOut() refuses a buffer that holds another registered allocation, and changes nothing", () => {
    using registry = new OwnershipRegistry({ onLeak: () => {} });
    const buffer = new ArrayBuffer(64);
    const whole = new Uint8Array(buffer);
    const part = new Uint8Array(buffer, 8, 8);
    registry.adopt(whole);
    registry.register(part);
    const before = JSON.stringify(registry.stats());
    assert.throws(
      () => registry.transferOut(whole),
      UnsupportedOperationError,
    );
    assert.equal(JSON.stringify(registry.stats()), before);
    assert.ok(registry.isRegistered(whole));
    assert.equal(buffer.detached, false);
    // Once the other allocation is gone, the buffer moves.
    registry.unregister(part);
    const moved = registry.transferOut(whole);
    const received = structuredClone(moved, { transfer: [moved] });
    assert.equal(received.byteLength, 64);
    assert.equal(whole.length, 0);
    assert.equal(registry.pointerCount, 0);
  });
});
