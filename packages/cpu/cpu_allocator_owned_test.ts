import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { AllotError, DoubleFreeError } from "@allot/core";
import { CpuAllocator } from "./cpu_allocator.ts";
import { CpuHeap } from "./heap.ts";

describe("CpuAllocator: stale ownership between DataPtr and the heap's free", () => {
  it("a raw heap.free of a DataPtr's block cannot free the next owner's block", () => {
    const cpu = new CpuAllocator({ byteLength: 4096 });
    const p = cpu.allocate(256);
    try {
      cpu.heap.free(p.byteOffset); // the misuse
    } catch {
      // refused (the fix)
    }
    const q = cpu.allocate(256);
    new Uint8Array(q.memory as ArrayBuffer, q.byteOffset, 256).fill(0xab);
    try {
      p.release();
    } catch {
      // p's own block is gone: the release must not touch q's
    }
    const r = cpu.allocate(256);
    new Uint8Array(r.memory as ArrayBuffer, r.byteOffset, 256).fill(0xcd);
    assert.notEqual(r.byteOffset, q.byteOffset, "q's block was freed");
    assert.ok(
      new Uint8Array(q.memory as ArrayBuffer, q.byteOffset, 256).every((b) =>
        b === 0xab
      ),
    );
    q.release();
    r.release();
    assert.equal(cpu.allocatedBytes, 0);
    assert.equal(cpu.heap.allocationCount, 0);
  });

  it("refuses heap.free and heap.realloc of an owned block; nothing changes", () => {
    const cpu = new CpuAllocator({ byteLength: 4096 });
    const p = cpu.allocate(256);
    const before = JSON.stringify(cpu.heap.stats());
    assert.throws(
      () => cpu.heap.free(p.byteOffset),
      (e: unknown) =>
        e instanceof DoubleFreeError &&
        /owned by a live DataPtr/.test(e.message),
    );
    assert.throws(() => cpu.heap.realloc(p.byteOffset, 1024), DoubleFreeError);
    assert.equal(JSON.stringify(cpu.heap.stats()), before);
    p.release();
    assert.equal(cpu.heap.allocationCount, 0);
    // raw blocks of the heap are still freed by the raw verb
    const raw = cpu.heap.alloc(64);
    cpu.heap.free(raw);
    assert.equal(cpu.heap.allocationCount, 0);
  });

  it("double release frees once; A's pointer never frees into B", () => {
    const a = new CpuAllocator({ byteLength: 4096 });
    const b = new CpuAllocator({ byteLength: 4096 });
    const p = a.allocate(64);
    p.release();
    const q = a.allocate(64);
    p.release();
    assert.equal(a.allocatedBytes, 64);
    const pb = b.allocate(64);
    const context = q.releaseContext()!;
    assert.throws(() => b.rawDeallocate(context), DoubleFreeError);
    assert.equal(b.allocatedBytes, 64);
    a.rawDeallocate(context);
    assert.throws(() => a.rawDeallocate(context), DoubleFreeError);
    assert.equal(a.allocatedBytes, 0);
    pb.release();
  });

  it("a context taken with releaseContext frees through rawDeallocate only", () => {
    const cpu = new CpuAllocator({ byteLength: 4096 });
    const p = cpu.allocate(64);
    const offset = p.byteOffset;
    const context = cpu.rawAllocate(64);
    // the raw context still names an owned allocation: heap.free refuses
    assert.throws(() => cpu.heap.free(context.byteOffset), DoubleFreeError);
    cpu.rawDeallocate(context);
    p.release();
    assert.equal(cpu.heap.allocationCount, 0);
    assert.ok(offset >= 0);
  });

  it("release after the heap was disposed is refused with a typed error", () => {
    const heap = new CpuHeap(4096);
    const cpu = new CpuAllocator({ heap });
    const p = cpu.allocate(64);
    heap.dispose();
    assert.throws(() => p.release(), AllotError);
    assert.equal(p.released, true);
    p.release(); // once only
  });
});
