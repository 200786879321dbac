import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { AllocatorBase } from "./allocator.ts";
import { DataPtr } from "./data_ptr.ts";
import { Device } from "./device.ts";
import {
  InvalidArgumentError,
  UnsupportedOperationError,
  UseAfterFreeError,
} from "./errors.ts";
import type { Deleter } from "./unique_void_ptr.ts";

class Bump extends AllocatorBase<ArrayBuffer, number> {
  readonly device: Device = Device.cpu();
  memory = new ArrayBuffer(1024);
  next = 0;
  live = new Set<number>();
  raw = false;
  allocate(byteLength: number): DataPtr<ArrayBuffer, number> {
    const offset = this.next;
    this.next += byteLength;
    this.live.add(offset);
    return new DataPtr(this.memory, offset, byteLength, this.device, {
      context: offset,
      deleter: (c) => this.live.delete(c),
    });
  }
  override rawDeleter(): Deleter<number> | undefined {
    return this.raw ? (c) => this.live.delete(c) : undefined;
  }
}

describe("AllocatorBase", () => {
  it("AllocatorBase.rawAllocate() throws without a raw deleter", () => {
    const a = new Bump();
    assert.throws(() => a.rawAllocate(8), UnsupportedOperationError);
    assert.throws(() => a.rawDeallocate(0), UnsupportedOperationError);
    assert.equal(a.live.size, 0);
  });

  it("AllocatorBase.rawAllocate() returns the context that rawDeallocate frees", () => {
    const a = new Bump();
    a.raw = true;
    const ctx = a.rawAllocate(16);
    assert.ok(a.live.has(ctx));
    a.rawDeallocate(ctx);
    assert.equal(a.live.size, 0);
  });

  it("AllocatorBase.clone() copies the bytes into a new allocation", () => {
    const a = new Bump();
    const src = a.allocate(4);
    new Uint8Array(a.memory, src.byteOffset, 4).set([9, 8, 7, 6]);
    const copy = a.clone(src);
    assert.notEqual(copy.byteOffset, src.byteOffset);
    assert.deepEqual([...new Uint8Array(a.memory, copy.byteOffset, 4)], [
      9,
      8,
      7,
      6,
    ]);
  });

  it("AllocatorBase.copyData() refuses lengths beyond either pointer", () => {
    const a = new Bump();
    const x = a.allocate(4), y = a.allocate(8);
    assert.throws(() => a.copyData(y, x, 5), InvalidArgumentError);
    assert.throws(() => a.copyData(y, x, -1), InvalidArgumentError);
    x.release();
    assert.throws(() => a.copyData(y, x, 4), UseAfterFreeError);
  });

  it("AllocatorBase.copyData() refuses memories that are not host memory", () => {
    const a = new Bump();
    const fake = new DataPtr<ArrayBuffer, number>(
      {} as ArrayBuffer,
      0,
      4,
      a.device,
    );
    assert.throws(
      () => a.copyData(a.allocate(4), fake, 4),
      UnsupportedOperationError,
    );
  });
});
