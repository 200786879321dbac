/**
 * Second outside-in review of `@allot/storage` from the public API: what
 * `storage_hostile_views_test.ts` missed. An allocator that hands out a
 * block a live storage holds (two storages would alias, and the first
 * release would free the other's bytes), `DynBuffer` over released
 * buffers or with a dtype that cannot be printed, and `Buffer.read()`
 * through a backend that answers with the wrong array.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type Allocator,
  ContractViolationError,
  type DataPtr,
  IntrusivePtr,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import {
  type AnyTypedArray,
  ArrayBufferAllocator,
  Buffer,
  DynBuffer,
  Storage,
  type StridedBinding,
} from "./mod.ts";
import { FakeBackend, FakeDeviceAllocator } from "./_test_allocators.ts";

/**
 * An allocator that hands out its last block again while it is live (a
 * pool that forgot it lent it); `frozen` freezes the pointers it makes.
 */
function repeating(frozen = false) {
  const inner = new ArrayBufferAllocator();
  let last: DataPtr | undefined;
  const allocator = {
    device: inner.device,
    repeat: true,
    allocate(byteLength: number): DataPtr {
      if (
        allocator.repeat && last !== undefined && !last.released &&
        last.byteLength >= byteLength
      ) return last;
      last = inner.allocate(byteLength);
      if (frozen) Object.freeze(last);
      return last;
    },
    copyData: inner.copyData.bind(inner),
    rawDeleter: inner.rawDeleter.bind(inner),
    clone: inner.clone.bind(inner),
  };
  return allocator as unknown as Allocator & { repeat: boolean };
}

describe("@allot/storage hostile (second review)", () => {
  for (const frozen of [false, true]) {
    it(
      `a block a live storage holds is refused by allocate, lazy, resize and reset, changing nothing${
        frozen ? " (frozen pointers)" : ""
      }`,
      () => {
        const allocator = repeating(frozen);
        using a = Buffer.filled("f32", [4], { value: 3, allocator });
        // was: b aliased a (b.fill(7) showed in a) and a.release() freed b
        assert.throws(
          () => Buffer.zeros("f32", [4], { allocator }),
          ContractViolationError,
        );
        using lazy = Buffer.lazy("f32", [4], { allocator });
        assert.throws(() => lazy.fill(7), ContractViolationError);
        assert.equal(lazy.storage.isAllocated, false);
        // resize and reset of another storage get the held block too
        allocator.repeat = false;
        const owner = Storage.allocate(8, { allocator, resizable: true });
        allocator.repeat = true;
        const before = owner.target.data;
        for (
          const change of [
            () => owner.target.resize(4),
            () => owner.target.reset(),
          ]
        ) {
          // the allocator hands out `owner`'s own block: refused as before
          assert.throws(change, ContractViolationError);
        }
        allocator.repeat = false;
        using other = Buffer.zeros("f32", [1], { allocator });
        allocator.repeat = true;
        // `other`'s block, asked for by owner's resize and reset
        for (
          const change of [
            () => owner.target.resize(2),
            () => owner.target.reset(),
          ]
        ) {
          assert.throws(change, ContractViolationError);
          assert.equal(owner.target.data, before);
          assert.equal(other.storage.data.released, false);
        }
        owner.release();
        assert.deepEqual([...a.toData()], [3, 3, 3, 3]);
        a.release();
        // once released, the block may be handed out again
        allocator.repeat = false;
        using c = Buffer.filled("f32", [4], { value: 5, allocator });
        assert.deepEqual([...c.toData()], [5, 5, 5, 5]);
      },
    );
  }

  it("new Storage() refuses a pointer another live storage owns, and takes it once that one is gone", () => {
    const allocator = new ArrayBufferAllocator();
    const ptr = allocator.allocate(16);
    const first = IntrusivePtr.make(new Storage(ptr, { allocator }));
    assert.throws(
      () => new Storage(ptr, { allocator }),
      InvalidArgumentError,
    );
    assert.equal(ptr.released, false);
    first.release();
    assert.equal(ptr.released, true);
    // a released pointer is refused as before
    assert.throws(() => new Storage(ptr, { allocator }), UseAfterFreeError);
  });

  it("DynBuffer refuses a released buffer and prints any dtype it is asked to downcast to", () => {
    const b = Buffer.zeros("f32", [2]);
    b.release();
    // was accepted: it answered dtype and shape, then failed on first use
    assert.throws(() => new DynBuffer(b), UseAfterFreeError);
    using d = new DynBuffer(Buffer.zeros("f32", [2]));
    for (
      const dtype of [
        Symbol("f32"), // threw TypeError while building the message
        { toString: () => assert.fail("ran our code") },
        Object.create(null), // threw TypeError
        "f64",
      ]
    ) {
      assert.throws(() => d.downcast(dtype as never), InvalidArgumentError);
      assert.equal(d.tryDowncast(dtype as never), undefined);
    }
    using same = d.downcast("f32");
    assert.equal(same.length, 2);
  });
});

describe("@allot/storage Buffer.read() and a lying backend", () => {
  it("rejects with ContractViolationError when the backend answers short, mistyped or junk (they were handed to the caller)", async () => {
    let answer: (src: StridedBinding) => unknown = () => undefined;
    class Lying extends FakeBackend {
      override read(src: StridedBinding): Promise<AnyTypedArray> {
        return Promise.resolve(answer(src)) as Promise<AnyTypedArray>;
      }
    }
    const backend = new Lying();
    const allocator = new FakeDeviceAllocator();
    using b = Buffer.fromData("f32", [1, 2, 3], { allocator, backend });
    for (
      const lie of [
        () => new Float32Array(1),
        () => new Uint8Array(3),
        () => new Float64Array(3),
        () => [1, 2, 3],
        () => 5,
        () => undefined,
      ]
    ) {
      answer = lie;
      await assert.rejects(b.read(), ContractViolationError);
    }
    answer = () => Float32Array.of(1, 2, 3);
    assert.deepEqual([...await b.read()], [1, 2, 3]);
  });
});
