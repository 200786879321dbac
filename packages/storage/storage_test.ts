import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  DataPtr,
  Device,
  DoubleFreeError,
  IntrusivePtr,
  InvalidArgumentError,
  UnsupportedOperationError,
  UseAfterFreeError,
} from "@allot/core";
import { Storage } from "./mod.ts";
import { BumpAllocator, FakeDeviceAllocator } from "./_test_allocators.ts";

describe("Storage", () => {
  it("Storage.allocate() owns one allocation, freed once by the last reference", () => {
    const allocator = new BumpAllocator();
    const a = Storage.allocate(24, { allocator });
    const s = a.target;
    assert.equal(s.byteLength, 24);
    assert.equal(s.allocator, allocator);
    assert.ok(s.device.equals(Device.cpu()));
    assert.equal(s.resizable, false);
    assert.ok(s.isHost);
    const b = a.clone();
    a.release();
    assert.equal(allocator.live.size, 1);
    b.release();
    assert.equal(allocator.live.size, 0);
    assert.throws(() => b.release(), DoubleFreeError);
    assert.throws(() => s.data, UseAfterFreeError);
    assert.throws(() => s.bytes(), UseAfterFreeError);
  });

  it("Storage ids are stable and distinct, and storages never alias", () => {
    const allocator = new BumpAllocator();
    const list = Array.from(
      { length: 8 },
      (_, i) => Storage.allocate(i * 3 + 1, { allocator }),
    );
    const ids = new Set(list.map((p) => p.target.id));
    assert.equal(ids.size, 8);
    const ranges = list.map((
      p,
    ) => [
      p.target.data.byteOffset,
      p.target.data.byteOffset + p.target.byteLength,
    ]);
    for (let i = 0; i < ranges.length; i++) {
      for (let j = i + 1; j < ranges.length; j++) {
        assert.ok(ranges[i][1] <= ranges[j][0] || ranges[j][1] <= ranges[i][0]);
      }
    }
    for (const p of list) p.release();
  });

  it("Storage.resize() copies the kept bytes through its allocator", () => {
    const allocator = new BumpAllocator();
    using p = Storage.allocate(6, { allocator, resizable: true });
    const s = p.target;
    const id = s.id;
    s.bytes().set([1, 2, 3, 4, 5, 6]);
    s.resize(10);
    assert.deepEqual([...s.bytes().subarray(0, 6)], [1, 2, 3, 4, 5, 6]);
    s.resize(3);
    assert.deepEqual([...s.bytes()], [1, 2, 3]);
    assert.equal(s.id, id);
    assert.equal(allocator.live.size, 1);
  });

  it("Storage.resize() refuses bad input and changes nothing", () => {
    using fixed = Storage.allocate(4);
    assert.throws(() => fixed.target.resize(8), UnsupportedOperationError);
    assert.equal(fixed.target.byteLength, 4);
    using p = Storage.allocate(4, { resizable: true });
    const data = p.target.data;
    assert.throws(() => p.target.resize(-1), InvalidArgumentError);
    assert.throws(() => p.target.resize(1.5), InvalidArgumentError);
    assert.equal(p.target.data, data);
    assert.equal(p.target.byteLength, 4);
  });

  it("Storage.reset() frees the bytes and leaves an empty allocation", () => {
    const allocator = new BumpAllocator();
    using p = Storage.allocate(16, { allocator });
    p.target.reset();
    assert.equal(p.target.byteLength, 0);
    assert.equal(allocator.live.size, 1);
    assert.equal([...allocator.live.values()][0], 0);
  });

  it("Storage wraps an existing pointer and refuses a released one", () => {
    let freed = 0;
    const ptr = new DataPtr(new ArrayBuffer(8), 0, 8, Device.cpu(), {
      context: 1,
      deleter: () => freed++,
    });
    const owner = IntrusivePtr.make(new Storage(ptr));
    owner.release();
    assert.equal(freed, 1);
    assert.throws(() => new Storage(ptr), UseAfterFreeError);
  });

  it("Storage on device memory refuses host byte views", () => {
    using p = Storage.allocate(8, {
      allocator: new FakeDeviceAllocator(),
      resizable: true,
    });
    assert.equal(p.target.isHost, false);
    assert.throws(() => p.target.bytes(), /not host memory/);
    p.target.resize(16);
    assert.equal(p.target.byteLength, 16);
  });

  it("Storage.resize() leaves the storage unchanged when the allocator fails", () => {
    const allocator = new BumpAllocator(256);
    using p = Storage.allocate(16, { allocator, resizable: true });
    p.target.bytes().fill(9);
    const data = p.target.data;
    assert.throws(() => p.target.resize(1024), RangeError);
    assert.equal(p.target.data, data);
    assert.deepEqual([...p.target.bytes()], new Array(16).fill(9));
    assert.equal(allocator.live.size, 1);
  });
});
