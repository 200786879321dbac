import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  Device,
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
  UseAfterFreeError,
} from "@allot/core";
import { CpuAllocator } from "./cpu_allocator.ts";
import { CpuHeap } from "./heap.ts";
import { ProfiledMemoryReporter } from "./memory_reporter.ts";
import { modelRuns } from "../core/_test_faults.ts";

describe("CpuAllocator", () => {
  it("CpuAllocator.allocate() hands out aligned cpu pointers into the heap", () => {
    const allocator = new CpuAllocator({ byteLength: 1 << 16 });
    const a = allocator.allocate(100);
    assert.ok(a.device.equals(Device.cpu()));
    assert.equal(a.memory, allocator.heap.memory);
    assert.equal(a.byteOffset % 64, 0);
    assert.equal(a.byteLength, 100);
    assert.equal(allocator.allocatedBytes, 100);
    a.release();
    assert.equal(allocator.allocatedBytes, 0);
    assert.equal(allocator.heap.allocatedBytes, 0);
    assert.throws(() => a.byteOffset, UseAfterFreeError);
  });

  it("CpuAllocator uses 16-byte alignment on the mobile setting", () => {
    const allocator = new CpuAllocator({ byteLength: 4096, mobile: true });
    const a = allocator.allocate(1);
    const b = allocator.allocate(1);
    assert.equal(b.byteOffset - a.byteOffset, 16);
  });

  it("CpuAllocator.allocate(0) gives a pointer that owns nothing", () => {
    const allocator = new CpuAllocator({ byteLength: 4096 });
    const zero = allocator.allocate(0);
    assert.equal(zero.byteLength, 0);
    assert.ok(zero.device.equals(Device.cpu()));
    zero.release();
    assert.equal(allocator.heap.allocationCount, 0);
    assert.throws(() => allocator.allocate(0, 48), InvalidArgumentError);
  });

  it("CpuAllocator zero-fills and junk-fills fresh and freed bytes", () => {
    const heap = new CpuHeap(4096);
    new Uint8Array(heap.buffer).fill(1);
    const zeroing = new CpuAllocator({ heap, zeroFill: true });
    const z = zeroing.allocate(64);
    assert.ok(zeroing.view(z, Uint8Array).every((x) => x === 0));
    z.release();
    const junking = new CpuAllocator({ heap, junkFill: true });
    const j = junking.allocate(10);
    const at = j.byteOffset;
    assert.equal(junking.view(j, Uint32Array)[0], 0x7fedbeef);
    assert.ok(Number.isNaN(junking.view(j, Float32Array)[1]));
    assert.deepEqual([...new Uint8Array(heap.buffer, at + 8, 2)], [0xef, 0xbe]);
    junking.view(j, Uint8Array).fill(5);
    j.release();
    assert.deepEqual([...new Uint8Array(heap.buffer, at, 4)], [
      0xef,
      0xbe,
      0xed,
      0x7f,
    ]);
  });

  it("CpuAllocator reports allocations, frees and out-of-memory with current and peak", () => {
    const lines: string[] = [];
    const reporter = new ProfiledMemoryReporter({ log: (l) => lines.push(l) });
    const allocator = new CpuAllocator({
      byteLength: 4096,
      maxByteLength: 4096,
      reporter,
    });
    const a = allocator.allocate(1000);
    const b = allocator.allocate(2000);
    a.release();
    assert.throws(() => allocator.allocate(4000), OutOfMemoryError);
    b.release();
    assert.deepEqual(reporter.bytes.values(), {
      current: 0,
      peak: 3000,
      allocated: 3000,
      freed: 3000,
    });
    assert.equal(reporter.outOfMemoryCount, 1);
    assert.equal(reporter.lastFailedByteLength, 4000);
    assert.match(
      lines[1],
      /allocate 2000 B at \d+ on cpu:0 \(current 3000 B, peak 3000 B\)/,
    );
    assert.match(lines[3], /out of memory: 4000 B/);
    assert.equal(allocator.allocate(3000).byteLength, 3000); // still works
  });

  it("CpuAllocator survives a reporter that throws", () => {
    const allocator = new CpuAllocator({
      byteLength: 4096,
      reporter: {
        onAllocate: () => {
          throw new Error("boom");
        },
      },
    });
    const a = allocator.allocate(10);
    a.release();
    assert.equal(allocator.allocatedBytes, 0);
  });

  it("CpuAllocator.rawDeallocate() refuses double frees and allocations of another heap", () => {
    const allocator = new CpuAllocator({ byteLength: 4096 });
    const other = new CpuAllocator({ byteLength: 4096 });
    const context = allocator.rawAllocate(100);
    const foreign = other.rawAllocate(100);
    assert.equal(context.byteOffset, foreign.byteOffset);
    const before = allocator.heap.stats();
    assert.throws(() => allocator.rawDeallocate(foreign), /another allocator/);
    assert.deepEqual(allocator.heap.stats(), before);
    allocator.rawDeallocate(context);
    assert.throws(() => allocator.rawDeallocate(context), DoubleFreeError);
    assert.equal(other.heap.allocationCount, 1);
    other.rawDeallocate(foreign);
  });

  it("CpuAllocator.clone() copies bytes and adds a heap on demand", () => {
    const allocator = new CpuAllocator({
      byteLength: 1024,
      maxByteLength: 1 << 16,
    });
    const a = allocator.allocate(1000);
    allocator.view(a, Uint8Array).fill(3);
    const b = allocator.clone(a);
    assert.equal(allocator.heaps.length, 2);
    assert.notEqual(b.memory, a.memory);
    assert.ok(b.memory instanceof ArrayBuffer && !b.memory.resizable);
    assert.ok(allocator.view(b, Uint8Array).every((x) => x === 3));
    assert.equal(allocator.reservedBytes, 1024 + 2048);
    a.release();
    b.release();
    assert.equal(allocator.trim(), 2048);
    assert.equal(allocator.heaps.length, 1);
  });

  it("CpuAllocator grows by heaps up to maxByteLength, then states what is free", () => {
    const allocator = new CpuAllocator({
      byteLength: 4096,
      maxByteLength: 3 * 4096,
    });
    const a = allocator.allocate(4096);
    const b = allocator.allocate(8000);
    assert.equal(allocator.heaps.length, 2);
    assert.throws(
      () => allocator.allocate(200),
      (e: unknown) =>
        e instanceof OutOfMemoryError && e.requestedBytes === 200 &&
        /largest free region 192 bytes, 12096 of 12288 bytes in use in 2 heaps/
          .test(e.message),
    );
    b.release();
    assert.equal(allocator.allocate(100).byteLength, 100);
    a.release();
  });

  it("CpuAllocator keeps pointers in place across growth", () => {
    fc.assert(
      fc.property(
        fc.array(fc.nat(20000), { minLength: 1, maxLength: 60 }),
        (sizes) => {
          const allocator = new CpuAllocator({ byteLength: 4096 });
          const ptrs = sizes.map((n, i) => {
            const p = allocator.allocate(n + 1);
            allocator.view(p, Uint8Array).fill(i & 255);
            return p;
          });
          ptrs.forEach((p, i) =>
            assert.ok(
              allocator.view(p, Uint8Array).every((x) => x === (i & 255)),
            )
          );
          for (const p of ptrs) p.release();
          assert.equal(allocator.allocatedBytes, 0);
          for (const heap of allocator.heaps) heap.checkIntegrity();
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("CpuAllocator keeps byte totals equal to its live pointers over random sequences", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.boolean(), fc.nat(5000), fc.nat()), {
          maxLength: 400,
          size: "max",
        }),
        (ops) => {
          const allocator = new CpuAllocator({
            byteLength: 1 << 14,
            maxByteLength: 1 << 14,
            junkFill: true,
          });
          const live: ReturnType<CpuAllocator["allocate"]>[] = [];
          for (const [doAlloc, size, pick] of ops) {
            if (doAlloc || live.length === 0) {
              try {
                live.push(allocator.allocate(size));
              } catch (error) {
                assert.ok(error instanceof OutOfMemoryError);
              }
            } else {
              live.splice(pick % live.length, 1)[0].release();
            }
            const sum = live.reduce((s, p) => s + p.byteLength, 0);
            assert.equal(allocator.allocatedBytes, sum);
            assert.equal(allocator.heap.requestedBytes, sum);
          }
          for (const p of live) p.release();
          allocator.heap.checkIntegrity();
          assert.equal(allocator.heap.freeRegionCount, 1);
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});
