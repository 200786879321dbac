/**
 * Fourth outside-in review of `@allot/storage`: option bags of the per-call
 * verbs. A misspelt key (`end` for `stop`, `stride` for `strides`,
 * `alocator`) did nothing, silently: `slice(0, { end: 7 })` of 8 elements
 * gave all 8. They are refused now, naming the key and the accepted ones,
 * as the allocators' constructors refuse theirs.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import {
  ArrayBufferAllocator,
  Buffer,
  BufferView,
  ManagedBufferPool,
  Storage,
} from "./mod.ts";

function refusesKey(f: () => unknown, key: string): void {
  assert.throws(
    f,
    (e: unknown) =>
      e instanceof InvalidArgumentError &&
      e.message.includes(`"${key}"`) &&
      Array.isArray(e.limit),
  );
}

describe("storage fourth review", () => {
  it("BufferView.slice() refuses an unknown option key such as end (the key is stop)", () => {
    const v = BufferView.contiguous([8]);
    refusesKey(() => v.slice(0, { end: 7 } as never), "end");
    refusesKey(() => v.slice(0, { stop: 7, begin: 1 } as never), "begin");
    // the accepted keys still work, undefined values included
    assert.equal(v.slice(0, { start: 1, stop: 7, step: 2 }).length, 3);
    assert.equal(v.slice(0, { start: undefined }).length, 8);
  });

  it("the BufferView constructor refuses an unknown option key such as stride", () => {
    refusesKey(() => new BufferView([3], { stride: [2] } as never), "stride");
    assert.deepEqual(new BufferView([3], { strides: [2] }).strides, [2]);
  });

  it("Buffer's factories and contiguous() refuse unknown option keys, allocating nothing", () => {
    const allocator = new ArrayBufferAllocator();
    const before = allocator.liveBytes;
    refusesKey(
      () => Buffer.empty("f32", [2], { alocator: allocator } as never),
      "alocator",
    );
    refusesKey(
      () => Buffer.lazy("f32", [2], { allocator, backed: 1 } as never),
      "backed",
    );
    refusesKey(
      () => Buffer.zeros("f32", [2], { allocator, value: 3 } as never),
      "value",
    );
    refusesKey(
      () =>
        Buffer.filled("f32", [2], { allocator, value: 1, shape: [2] } as never),
      "shape",
    );
    refusesKey(
      () => Buffer.fromData("f32", [1, 2], { allocator, shap: [2] } as never),
      "shap",
    );
    assert.equal(allocator.liveBytes, before);
    using b = Buffer.fromData("f32", [1, 2, 3, 4], {
      allocator,
      shape: [2, 2],
    });
    refusesKey(() => b.transpose().contiguous({ alloc: 1 } as never), "alloc");
    assert.equal(allocator.liveBytes, before + 16);
    using f = Buffer.filled("i32", [2], { allocator, value: 7 });
    assert.deepEqual([...f.toData()], [7, 7]);
    using z = Buffer.zeros("i32", [2], { allocator });
    assert.deepEqual([...z.toData()], [0, 0]);
  });

  it("new Buffer(), Storage.allocate() and ManagedBufferPool.alloc() refuse unknown option keys", () => {
    const allocator = new ArrayBufferAllocator();
    refusesKey(
      () => Storage.allocate(8, { allocator, resizeable: true } as never),
      "resizeable",
    );
    assert.equal(allocator.liveBytes, 0);
    const storage = Storage.allocate(8, { allocator });
    refusesKey(
      () => new Buffer(storage, { dtype: "f32", veiw: undefined } as never),
      "veiw",
    );
    using b = new Buffer(storage, { dtype: "f32" });
    assert.equal(b.length, 2);
    const pool = new ManagedBufferPool(allocator);
    refusesKey(() => pool.alloc("f32", [2], { backnd: 1 } as never), "backnd");
    pool.alloc("f32", [2]).release();
  });
});
