/**
 * Second outside-in review of `@allot/watermark` from the public API:
 * what `watermark_hostile_test.ts` missed. `copyData` checks its pointers
 * and their ranges as core's `Allocator.copyData` does, and
 * `waitForEvents` survives a fence whose `completed` getter throws.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  DataPtr,
  InvalidArgumentError,
  type MockMemory,
  MockSegmentSource,
} from "@allot/core";
import { WatermarkAllocator } from "./mod.ts";

function setup() {
  const allocator = new WatermarkAllocator<MockMemory>(
    new MockSegmentSource({ capacityBytes: 64 << 20, backed: true }),
  );
  return allocator;
}

function bytes(ptr: DataPtr<MockMemory | null, unknown>): Uint8Array {
  return ptr.memory!.bytes!.subarray(
    ptr.byteOffset,
    ptr.byteOffset + ptr.byteLength,
  );
}

describe("@allot/watermark hostile (second review)", () => {
  it("copyData() refuses pointers that are not DataPtrs, changing nothing (null threw TypeError, {} was accepted)", () => {
    const allocator = setup();
    using a = allocator.allocate(64);
    bytes(a).fill(7);
    for (
      const junk of [
        null,
        undefined,
        {},
        { byteLength: 64, byteOffset: 0, memory: a.memory },
        Object.create(DataPtr.prototype),
        5,
      ]
    ) {
      for (const [dest, src] of [[junk, a], [a, junk]]) {
        for (const n of [0, 8]) {
          assert.throws(
            () => allocator.copyData(dest as never, src as never, n),
            InvalidArgumentError,
          );
        }
      }
    }
    assert.deepEqual([...new Set(bytes(a))], [7]);
    allocator.validate();
  });

  it("copyData() refuses a range that leaves its memory (was a raw RangeError, or a silently short copy)", () => {
    const allocator = setup();
    using a = allocator.allocate(64);
    using b = allocator.allocate(64);
    bytes(a).fill(7);
    bytes(b).fill(9);
    const memory = a.memory!;
    const end = memory.bytes!.byteLength;
    // pointers a user made over the allocator's memory, past its end
    const tail = new DataPtr(memory, end - 8, 64, allocator.device);
    const beyond = new DataPtr(memory, end + 4096, 64, allocator.device);
    const before = memory.bytes!.slice();
    for (const outside of [tail, beyond]) {
      assert.throws(
        () => allocator.copyData(outside as never, a, 64),
        (error) =>
          error instanceof InvalidArgumentError &&
          /dest range .* leaves its memory/.test(error.message),
      );
      assert.throws(
        () => allocator.copyData(b, outside as never, 64),
        (error) =>
          error instanceof InvalidArgumentError &&
          /src range .* leaves its memory/.test(error.message),
      );
    }
    assert.deepEqual(memory.bytes, before);
    // what stays in range still copies
    allocator.copyData(b, a, 64);
    assert.deepEqual([...new Set(bytes(b))], [7]);
    // a pointer over plain host memory is host bytes too
    const plain = new ArrayBuffer(64);
    new Uint8Array(plain).fill(3);
    using host = new DataPtr(plain, 0, 64, allocator.device);
    allocator.copyData(a, host as never, 64);
    assert.deepEqual([...new Set(bytes(a))], [3]);
  });

  it("waitForEvents() waits for a fence whose completed getter throws instead of rejecting with its raw error", async () => {
    const allocator = setup();
    const a = allocator.allocateBuffer(256);
    let waited = 0;
    const fence = {
      get completed(): boolean {
        throw new Error("completed boom");
      },
      wait(): Promise<void> {
        waited++;
        return Promise.resolve();
      },
    };
    allocator.recordEvents([a], fence);
    assert.equal(await allocator.waitForEvents([a]), true);
    assert.equal(waited, 1);
    // a completed that is truthy but not `true` is waited for as well
    const b = allocator.allocateBuffer(256);
    allocator.recordEvents([b], {
      completed: "yes" as never,
      wait: () => (waited++, Promise.resolve()),
    });
    assert.equal(await allocator.waitForEvents([b]), true);
    assert.equal(waited, 2);
    a.release();
    b.release();
    allocator.validate();
  });
});
