import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  AllocatorBase,
  DataPtr,
  Device,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import { Buffer } from "./buffer.ts";
import { Storage } from "./storage.ts";
import { ArrayBufferAllocator, TensorBuffer, TensorStorage } from "./mod.ts";
import { modelRuns } from "../core/_test_faults.ts";

/** Counts allocations and live bytes. */
class Counting extends AllocatorBase<ArrayBuffer, ArrayBuffer> {
  readonly device: Device = Device.cpu();
  allocations = 0;
  live = 0;
  allocate(byteLength: number): DataPtr<ArrayBuffer, ArrayBuffer> {
    this.allocations++;
    this.live += byteLength;
    const memory = new ArrayBuffer(byteLength);
    return new DataPtr(memory, 0, byteLength, this.device, {
      context: memory,
      deleter: (m) => void (this.live -= m.byteLength),
    });
  }
}

type Touch = "fill" | "set" | "get" | "toData" | "copyFrom" | "contiguous";

describe("lazy storage", () => {
  it("model: views allocate nothing; the first touch allocates once; release frees what was allocated", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.constantFrom("unsqueeze", "transpose", "slice"), {
          maxLength: 4,
        }),
        fc.option(
          fc.constantFrom<Touch>(
            "fill",
            "set",
            "get",
            "toData",
            "copyFrom",
            "contiguous",
          ),
          { nil: undefined },
        ),
        (rows, cols, views, touch) => {
          const allocator = new Counting();
          const b = Buffer.lazy("f32", [rows, cols], { allocator });
          assert.equal(b.storage.byteLength, rows * cols * 4);
          assert.equal(String(b.storage.device), "cpu:0");
          let v = b.clone();
          for (const op of views) {
            const next = op === "unsqueeze"
              ? v.unsqueeze(0)
              : op === "transpose"
              ? v.transpose()
              : v.slice(0, { stop: 1 });
            v.release();
            v = next;
          }
          assert.equal(allocator.allocations, 0);
          assert.equal(b.storage.isAllocated, false);
          if (touch !== undefined) {
            const zeros = new Array(v.rank).fill(0);
            if (touch === "fill") v.fill(2);
            else if (touch === "set") v.set(zeros, 2);
            else if (touch === "get") v.get(zeros);
            else if (touch === "toData") v.toData();
            else if (touch === "copyFrom") {
              using src = Buffer.zeros("f32", v.shape);
              v.copyFrom(src);
            } else v.contiguous({ allocator: new Counting() }).release();
            // contiguous() of a dense view from offset 0 shares it: no read
            const touched = touch !== "contiguous" ||
              !(v.isContiguous && v.offset === 0);
            assert.equal(allocator.allocations, touched ? 1 : 0);
            assert.equal(b.storage.isAllocated, touched);
            b.fill(1); // the first touch, or a later one: one allocation
            assert.equal(allocator.allocations, 1);
            assert.equal(allocator.allocations, 1);
          }
          v.release();
          b.release();
          assert.equal(allocator.live, 0);
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("resize() and reset() of an untouched lazy storage allocate nothing; after release it throws", () => {
    const allocator = new Counting();
    const s = Storage.lazy(64, { allocator, resizable: true });
    s.target.resize(128);
    assert.equal(s.target.byteLength, 128);
    assert.match(String(s.target), /byteLength=128, lazy/);
    s.target.reset();
    assert.equal(s.target.byteLength, 0);
    assert.equal(allocator.allocations, 0);
    const target = s.target;
    s.release();
    assert.throws(() => target.data, UseAfterFreeError);
    assert.equal(allocator.allocations, 0);
    assert.throws(() => Storage.lazy(-1), InvalidArgumentError);
  });
});

describe("storage names", () => {
  it("TensorBuffer and TensorStorage are Buffer and Storage; the default allocator names itself", () => {
    assert.equal(TensorBuffer, Buffer);
    assert.equal(TensorStorage, Storage);
    using b = Buffer.zeros("u8", [8]);
    assert.ok(b.storage.allocator instanceof ArrayBufferAllocator);
    assert.equal(b.storage.allocator.constructor.name, "ArrayBufferAllocator");
    assert.match(String(b.storage.allocator), /^ArrayBufferAllocator\(cpu:0, /);
  });
});
