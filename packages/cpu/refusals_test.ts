import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AllotError,
  DataPtr,
  type Device,
  DoubleFreeError,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import { CpuAllocator } from "./cpu_allocator.ts";
import { HostSegmentSource } from "./host_segment_source.ts";
import { SystemAllocator } from "./system_allocator.ts";
import { CpuHeap } from "./heap.ts";

// Hostile numbers every size, offset and alignment must refuse with a typed
// error (never a TypeError) and without a change.
const HOSTILE: unknown[] = [
  NaN,
  Infinity,
  -Infinity,
  -1,
  0.5,
  2 ** 53,
  5n,
  0n,
  -1n,
  null,
  "64",
  {},
  { valueOf: () => 64 },
];

function state(heap: CpuHeap): string {
  return JSON.stringify([heap.stats(), heap.snapshot()]);
}

describe("CpuHeap refusals", () => {
  it("CpuHeap refuses a second heap over bytes a live heap manages, until it is disposed", () => {
    const memory = new ArrayBuffer(1 << 16);
    const first = new CpuHeap(memory);
    assert.throws(() => new CpuHeap(memory), InvalidArgumentError);
    assert.throws(
      () => new CpuHeap(memory, { byteOffset: 4096 }),
      InvalidArgumentError,
    );
    assert.equal(first.alloc(64), 0);
    first.dispose();
    assert.throws(() => first.alloc(64), InvalidArgumentError);
    assert.throws(() => first.free(0), InvalidArgumentError);
    assert.throws(() => first.view(0, Uint8Array), InvalidArgumentError);
    assert.throws(() => first.grow(64), InvalidArgumentError);
    const second = new CpuHeap(memory);
    assert.equal(second.alloc(64), 0);
    second[Symbol.dispose]();
  });

  it("CpuHeap lets two heaps manage disjoint ranges of one memory", () => {
    const memory = new WebAssembly.Memory({ initial: 2 });
    const low = new CpuHeap(memory, { byteLength: 65536 });
    const high = new CpuHeap(memory, { byteOffset: 65536 });
    assert.equal(low.alloc(64), 0);
    assert.equal(high.alloc(64), 65536);
    assert.throws(
      () => new CpuHeap(memory, { byteOffset: 65536 - 64, byteLength: 128 }),
      InvalidArgumentError,
    );
    low.dispose();
    high.dispose();
  });

  it("CpuHeap refuses hostile sizes, offsets and alignments with typed errors and changes nothing", () => {
    const heap = new CpuHeap(1 << 16);
    const at = heap.alloc(100);
    const before = state(heap);
    for (const value of HOSTILE) {
      const v = value as number;
      assert.throws(() => heap.alloc(v), InvalidArgumentError, String(value));
      assert.throws(() => heap.tryAlloc(v), InvalidArgumentError);
      if (typeof value !== "number" || value >= 0) {
        assert.throws(() => heap.alloc(64, v), InvalidArgumentError);
      }
      assert.throws(
        () => heap.free(v),
        (e) =>
          e instanceof InvalidArgumentError || e instanceof DoubleFreeError,
      );
      assert.throws(
        () => heap.view(v, Uint8Array),
        (e) =>
          e instanceof InvalidArgumentError || e instanceof UseAfterFreeError,
      );
      assert.throws(() => heap.bytes(at, v), InvalidArgumentError);
      assert.throws(() => heap.resizeInPlace(at, v), InvalidArgumentError);
      assert.throws(() => heap.grow(v), InvalidArgumentError);
      assert.equal(heap.owns(v), false);
    }
    assert.equal(state(heap), before);
  });

  it("CpuHeap.bytes() refuses a length beyond the block and offsets of no live block", () => {
    const heap = new CpuHeap(4096);
    const at = heap.alloc(100); // a 128-byte block
    assert.equal(heap.bytes(at, 128).length, 128);
    assert.throws(() => heap.bytes(at, 129), InvalidArgumentError);
    assert.throws(() => heap.bytes(at + 64, 8), UseAfterFreeError);
    heap.free(at);
    assert.throws(() => heap.bytes(at, 8), UseAfterFreeError);
  });

  it("CpuHeap.view() with DataView spans the requested bytes", () => {
    const heap = new CpuHeap(4096);
    const at = heap.alloc(100);
    const view = heap.view(at, DataView);
    assert.ok(view instanceof DataView);
    assert.equal(view.byteLength, 100);
    assert.equal(view.byteOffset, at);
    assert.equal(heap.view(at, Float64Array).length, 12);
    assert.throws(
      () => heap.view(at, 5 as unknown as typeof Uint8Array),
      InvalidArgumentError,
    );
  });

  it("CpuHeap strict mode junk-fills freed bytes and checks its invariants on every call", () => {
    const heap = new CpuHeap(4096, { strict: true });
    const a = heap.alloc(64);
    const stale = heap.view(a, Uint32Array);
    stale.fill(1);
    heap.free(a);
    assert.equal(stale[0], 0x7fedbeef);
    assert.throws(() => heap.free(a), DoubleFreeError);
    // A plain heap keeps the bytes; strict mode is off by default.
    const plain = new CpuHeap(4096);
    const b = plain.alloc(64);
    plain.view(b, Uint32Array).fill(1);
    const old = plain.view(b, Uint32Array);
    plain.free(b);
    assert.equal(old[0], 1);
  });

  it("CpuHeap strict mode runs checkIntegrity() after each change", () => {
    const heap = new CpuHeap(4096, { strict: true });
    heap.alloc(64);
    const check = heap.checkIntegrity.bind(heap);
    let calls = 0;
    Object.defineProperty(heap, "checkIntegrity", {
      value: () => {
        calls++;
        check();
      },
    });
    heap.alloc(64);
    heap.free(heap.alloc(64));
    assert.equal(calls, 3);
  });
});

describe("CpuAllocator refusals", () => {
  it("CpuAllocator refuses a fractional maxByteLength and a device that is not a Device", () => {
    assert.throws(
      () => new CpuAllocator({ byteLength: 4096, maxByteLength: 5000.5 }),
      InvalidArgumentError,
    );
    assert.throws(
      () => new CpuAllocator({ device: "cpu" as unknown as Device }),
      InvalidArgumentError,
    );
    assert.throws(
      () => new CpuAllocator({ maxByteLength: 5n as unknown as number }),
      InvalidArgumentError,
    );
    new CpuAllocator({ byteLength: 4096, maxByteLength: 8192 });
  });

  it("CpuAllocator refuses hostile sizes and alignments with typed errors and changes nothing", () => {
    const allocator = new CpuAllocator({ byteLength: 4096 });
    const before = JSON.stringify([allocator.stats(), allocator.heap.stats()]);
    for (const value of HOSTILE) {
      const v = value as number;
      assert.throws(() => allocator.allocate(v), InvalidArgumentError);
      if (typeof value !== "number" || value >= 0) {
        assert.throws(() => allocator.allocate(64, v), InvalidArgumentError);
      }
    }
    assert.equal(
      JSON.stringify([allocator.stats(), allocator.heap.stats()]),
      before,
    );
  });

  it("CpuAllocator strict mode junk-fills freed bytes and refuses views of released pointers", () => {
    const allocator = new CpuAllocator({ byteLength: 4096, strict: true });
    const ptr = allocator.allocate(64);
    const stale = allocator.view(ptr, Uint32Array);
    stale.fill(1);
    ptr.release();
    assert.equal(stale[0], 0x7fedbeef);
    assert.throws(() => allocator.view(ptr, Uint32Array), UseAfterFreeError);
    assert.ok(ptr instanceof DataPtr);
  });
});

describe("cpu entry points under hostile values", () => {
  it("every cpu constructor and entry point refuses hostile values with a typed error, never a TypeError", () => {
    const values: unknown[] = [
      NaN,
      -1,
      0.5,
      2 ** 53,
      5n,
      null,
      "64",
      {},
      Symbol("x"),
    ];
    // deno-lint-ignore no-explicit-any
    const cases: [string, (v: any) => unknown][] = [
      ["SystemAllocator()", (v) => new SystemAllocator(v)],
      ["SystemAllocator.allocate()", (v) => new SystemAllocator().allocate(v)],
      ["HostSegmentSource()", (v) => new HostSegmentSource(v)],
      [
        "HostSegmentSource.tryAllocateSegment()",
        (v) => new HostSegmentSource().tryAllocateSegment(v),
      ],
      ["CpuAllocator()", (v) => new CpuAllocator(v)],
      ["CpuAllocator({ heap })", (v) => new CpuAllocator({ heap: v })],
      [
        "CpuAllocator.view(ptr)",
        (v) => new CpuAllocator({ byteLength: 4096 }).view(v, Uint8Array),
      ],
      ["CpuAllocator.view(type)", (v) => {
        const a = new CpuAllocator({ byteLength: 4096 });
        return a.view(a.allocate(8), v);
      }],
      ["CpuHeap(memory)", (v) => new CpuHeap(v)],
      ["CpuHeap(options)", (v) => new CpuHeap(4096, v)],
      ["CpuHeap({ byteOffset })", (v) => new CpuHeap(4096, { byteOffset: v })],
      ["CpuHeap({ placement })", (v) => new CpuHeap(4096, { placement: v })],
      ["CpuHeap.realloc()", (v) => {
        const h = new CpuHeap(4096);
        return h.realloc(h.alloc(8), v);
      }],
      [
        "CpuHeap.usableByteLength()",
        (v) => new CpuHeap(4096).usableByteLength(v),
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
});
