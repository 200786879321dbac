import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type Allocator,
  AllotError,
  DataPtr,
  Device,
  DoubleFreeError,
  InvalidArgumentError,
  UnsupportedOperationError,
} from "@allot/core";
import { HeapCorruptionError } from "@allot/cpu";
import { BuddyAllocator } from "./buddy_allocator.ts";
import { PlaceAllocator } from "./place_allocator.ts";

const HOSTILE: unknown[] = [
  NaN,
  Infinity,
  -Infinity,
  -1,
  0.5,
  2 ** 53,
  5n,
  -1n,
  null,
  "64",
  {},
];

function state(buddy: BuddyAllocator): string {
  return JSON.stringify(buddy.stats());
}

// A backing allocator whose pools start `skew` bytes into their buffer.
function skewed(skew: number): Allocator {
  return {
    device: Device.cpu(),
    allocate(byteLength: number) {
      return new DataPtr(
        new ArrayBuffer(byteLength + skew),
        skew,
        byteLength,
        Device.cpu(),
        { context: 0, deleter: () => {} },
      );
    },
  } as unknown as Allocator;
}

describe("BuddyAllocator refusals", () => {
  it("BuddyAllocator.bytes() refuses a length beyond the block", () => {
    const buddy = new BuddyAllocator({ initialPoolByteLength: 1 << 16 });
    const a = buddy.alloc(64); // one 256-byte block
    assert.equal(buddy.bytes(a, 256).length, 256);
    assert.throws(() => buddy.bytes(a, 257), InvalidArgumentError);
    assert.throws(() => buddy.bytes(a, 4096), InvalidArgumentError);
    const large = buddy.alloc(1 << 17); // longer than a pool: direct
    assert.equal(buddy.bytes(large, 1 << 17).length, 1 << 17);
    assert.throws(
      () => buddy.bytes(large, (1 << 17) + 1),
      InvalidArgumentError,
    );
    buddy.free(a);
    assert.throws(() => buddy.bytes(a, 8), DoubleFreeError);
  });

  it("BuddyAllocator refuses a misaligned pool with UnsupportedOperationError and changes nothing", () => {
    const buddy = new BuddyAllocator({
      initialPoolByteLength: 1 << 16,
      backing: skewed(8),
    });
    const before = state(buddy);
    assert.throws(() => buddy.alloc(64), UnsupportedOperationError);
    assert.equal(state(buddy), before);
  });

  it("BuddyAllocator refuses a backing that is neither an Allocator nor a SegmentSource", () => {
    for (const backing of [{}, null, 5, "cpu", { allocate: 1 }]) {
      assert.throws(
        () => new BuddyAllocator({ backing: backing as unknown as Allocator }),
        InvalidArgumentError,
        String(backing),
      );
    }
  });

  it("BuddyAllocator refuses hostile sizes and addresses with typed errors and changes nothing", () => {
    const buddy = new BuddyAllocator({ initialPoolByteLength: 1 << 16 });
    const a = buddy.alloc(100);
    const before = state(buddy);
    for (const value of HOSTILE) {
      const v = value as number;
      assert.throws(() => buddy.alloc(v), InvalidArgumentError, String(value));
      assert.throws(() => buddy.allocate(v), InvalidArgumentError);
      const typed = (e: unknown) =>
        e instanceof InvalidArgumentError || e instanceof DoubleFreeError;
      assert.throws(() => buddy.free(v), typed, String(value));
      assert.throws(() => buddy.bytes(v, 8), typed);
      assert.throws(() => buddy.bytes(a, v), InvalidArgumentError);
      assert.throws(() => buddy.view(v, Uint8Array), typed);
      assert.throws(() => buddy.byteOffsetOf(v), typed);
      assert.throws(() => buddy.byteLengthOf(v), typed);
      assert.throws(() => buddy.memoryOf(v), typed);
    }
    assert.equal(state(buddy), before);
    buddy.checkIntegrity();
  });

  it("BuddyAllocator strict mode junk-fills freed blocks and checks its invariants", () => {
    const buddy = new BuddyAllocator({
      initialPoolByteLength: 1 << 16,
      strict: true,
    });
    const a = buddy.alloc(64);
    const stale = new Uint32Array(buddy.bytes(a, 256).buffer, a, 4);
    stale.fill(1);
    buddy.free(a);
    assert.equal(stale[0], 0x7fedbeef);
    assert.throws(() => buddy.free(a), DoubleFreeError);
    let calls = 0;
    const check = buddy.checkIntegrity.bind(buddy);
    Object.defineProperty(buddy, "checkIntegrity", {
      value: () => {
        calls++;
        check();
      },
    });
    buddy.free(buddy.alloc(64));
    assert.equal(calls, 2);
    assert.ok(HeapCorruptionError);
  });
});

describe("PlaceAllocator refusals", () => {
  it("PlaceAllocator.free() and used() refuse non-pointers and bad places and create no place", () => {
    const places = new PlaceAllocator({ initialPoolByteLength: 1 << 16 });
    for (const ptr of [null, undefined, 5, {}, "ptr", 1n]) {
      assert.throws(
        () => places.free("cpu", ptr as unknown as DataPtr<unknown, number>),
        InvalidArgumentError,
      );
    }
    for (const place of [null, undefined, 5, {}, 1n]) {
      assert.throws(
        () => places.used(place as unknown as string),
        InvalidArgumentError,
      );
    }
    const p = places.alloc("cpu", 64);
    assert.throws(() => places.free("cpu:1", p), DoubleFreeError);
    assert.throws(
      () => places.alloc("cpu:2", -1),
      InvalidArgumentError,
    );
    assert.throws(
      () => places.alloc("cpu:2", 5n as unknown as number),
      InvalidArgumentError,
    );
    assert.deepEqual(places.places().map(String), [String(Device.cpu())]);
    places.free("cpu", p);
    assert.equal(places.used("cpu"), 0);
  });
});

describe("buddy entry points under hostile values", () => {
  it("every buddy constructor and entry point refuses hostile values with a typed error, never a TypeError", () => {
    const values: unknown[] = [NaN, -1, 0.5, 2 ** 53, 5n, null, "64", {}];
    // deno-lint-ignore no-explicit-any
    const cases: [string, (v: any) => unknown][] = [
      ["BuddyAllocator()", (v) => new BuddyAllocator(v)],
      [
        "BuddyAllocator({ initialPoolByteLength })",
        (v) => new BuddyAllocator({ initialPoolByteLength: v }),
      ],
      [
        "BuddyAllocator({ minBlockByteLength })",
        (v) => new BuddyAllocator({ minBlockByteLength: v }),
      ],
      [
        "BuddyAllocator({ maxPoolByteLength })",
        (v) => new BuddyAllocator({ maxPoolByteLength: v }),
      ],
      ["BuddyAllocator.view(type)", (v) => {
        const b = new BuddyAllocator({ initialPoolByteLength: 1 << 16 });
        return b.view(b.alloc(8), v);
      }],
      ["PlaceAllocator()", (v) => new PlaceAllocator(v)],
      ["PlaceAllocator.alloc(place)", (v) => new PlaceAllocator().alloc(v, 8)],
      [
        "PlaceAllocator.allocatorFor()",
        (v) => new PlaceAllocator().allocatorFor(v),
      ],
    ];
    for (const [name, call] of cases) {
      for (const value of values) {
        try {
          call(value);
        } catch (error) {
          assert.ok(
            error instanceof AllotError,
            `${name} with ${String(value)} threw ${error}`,
          );
        }
      }
    }
  });

  it("BuddyAllocator.view() with DataView spans the block", () => {
    const buddy = new BuddyAllocator({ initialPoolByteLength: 1 << 16 });
    const a = buddy.alloc(100);
    assert.equal(buddy.view(a, DataView).byteLength, 256);
  });
});
