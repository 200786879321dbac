import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DataPtr } from "./data_ptr.ts";
import { Device } from "./device.ts";
import { UseAfterFreeError } from "./errors.ts";

describe("DataPtr", () => {
  it("DataPtr carries memory, offset, length and device", () => {
    const memory = new ArrayBuffer(32);
    const ptr = new DataPtr(memory, 8, 16, Device.parse("wasm:1"));
    assert.equal(ptr.memory, memory);
    assert.equal(ptr.byteOffset, 8);
    assert.equal(ptr.byteLength, 16);
    assert.equal(String(ptr.device), "wasm:1");
    assert.equal(ptr.owns, false);
  });

  it("DataPtr of zero bytes is an ordinary value that keeps its device", () => {
    const ptr = new DataPtr(null, 0, 0, Device.parse("webgpu:2"));
    assert.equal(ptr.byteLength, 0);
    assert.equal(String(ptr.device), "webgpu:2");
    ptr.release();
    assert.equal(String(ptr.device), "webgpu:2");
  });

  it("DataPtr.release() runs the deleter once and forbids reading the place", () => {
    const freed: number[] = [];
    const ptr = new DataPtr(new ArrayBuffer(8), 0, 8, Device.cpu(), {
      context: 3,
      deleter: (c) => freed.push(c),
    });
    ptr.release();
    ptr.release();
    assert.deepEqual(freed, [3]);
    assert.ok(ptr.released);
    assert.throws(() => ptr.memory, UseAfterFreeError);
    assert.throws(() => ptr.byteOffset, UseAfterFreeError);
    assert.match(String(ptr), /released/);
  });

  it("DataPtr.releaseContext() hands the context out without freeing", () => {
    let calls = 0;
    const ptr = new DataPtr(new ArrayBuffer(8), 0, 8, Device.cpu(), {
      context: "c",
      deleter: () => calls++,
    });
    assert.equal(ptr.releaseContext(), "c");
    ptr.release();
    assert.equal(calls, 0);
    assert.throws(() => ptr.memory, UseAfterFreeError);
  });
});
