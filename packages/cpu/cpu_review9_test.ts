// The CPU heap and allocator from the outside (review 9): view types that
// lie about their element size, ignore their arguments or free the block
// they are asked to view; pointers of another allocator; values at the
// 32-bit edges; and a fast-check model under every placement in which each
// live block carries a byte pattern, checked through `bytes()` and `view()`
// after every operation, with the stats recounted from the model.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllotError,
  DataPtr,
  DoubleFreeError,
  type HostMemory,
  InvalidArgumentError,
  OutOfMemoryError,
  UnsupportedOperationError,
  UseAfterFreeError,
  viewSpan,
} from "@allot/core";
import { checkPattern, modelRuns, writePattern } from "../core/_test_faults.ts";
import { type CpuAllocation, CpuAllocator } from "./cpu_allocator.ts";
import { CpuHeap, type CpuHeapPlacement } from "./heap.ts";
import { SystemAllocator } from "./system_allocator.ts";
import { HostSegmentSource } from "./host_segment_source.ts";

/** A Float64Array that says its elements are one byte long. */
class LyingSize extends Float64Array {
  static override readonly BYTES_PER_ELEMENT = 1;
}

/** A Uint8Array over the whole buffer, whatever it is asked for. */
class WholeBuffer extends Uint8Array {
  constructor(buffer: ArrayBuffer, _byteOffset: number, _length: number) {
    super(buffer);
  }
}

/** A Uint8Array that starts one element early. */
class EarlyStart extends Uint8Array {
  constructor(buffer: ArrayBuffer, byteOffset: number, length: number) {
    super(buffer, Math.max(0, byteOffset - 64), length);
  }
}

const PLACEMENTS: CpuHeapPlacement[] = ["good-fit", "compact", "first-fit"];

function heapState(heap: CpuHeap) {
  return { stats: heap.stats(), snapshot: heap.snapshot() };
}

describe("CpuHeap and CpuAllocator views (review 9)", () => {
  it("CpuHeap.view() refuses a type that would view bytes outside the block, and changes nothing", () => {
    for (const placement of PLACEMENTS) {
      const heap = new CpuHeap(1 << 16, { placement });
      const b = heap.alloc(64);
      const a = heap.alloc(64); // the block viewed, above b
      heap.bytes(b, 64).fill(9);
      for (const type of [LyingSize, WholeBuffer, EarlyStart]) {
        const before = heapState(heap);
        assert.throws(
          () => heap.view(a, type as never),
          (e: unknown) =>
            e instanceof InvalidArgumentError && /64/.test(e.message),
          `${placement} ${type.name}`,
        );
        assert.deepEqual(heapState(heap), before);
      }
      // an honest subclass and the built-ins still work
      class Honest extends Float32Array {}
      assert.equal(heap.view(a, Honest).length, 16);
      assert.equal(heap.view(a, Float64Array).length, 8);
      assert.equal(heap.view(a, DataView).byteLength, 64);
      assert.deepEqual([...heap.bytes(b, 64)], new Array(64).fill(9));
      heap.checkIntegrity();
    }
  });

  it("CpuHeap.view() refuses a type whose constructor frees the block", () => {
    const heap = new CpuHeap(4096);
    const at = heap.alloc(64);
    class Freer extends Uint8Array {
      constructor(buffer: ArrayBuffer, byteOffset: number, length: number) {
        heap.free(at);
        super(buffer, byteOffset, length);
      }
    }
    assert.throws(() => heap.view(at, Freer as never), UseAfterFreeError);
    assert.equal(heap.allocationCount, 0);
    heap.checkIntegrity();
  });

  it("CpuAllocator.view() refuses a type that would view bytes outside the pointer", () => {
    const allocator = new CpuAllocator();
    const q = allocator.allocate(64);
    const p = allocator.allocate(64); // the pointer viewed, above q
    allocator.view(q, Uint8Array).fill(7);
    for (const type of [LyingSize, WholeBuffer, EarlyStart]) {
      const before = allocator.stats();
      assert.throws(
        () => allocator.view(p, type as never),
        (e: unknown) =>
          e instanceof InvalidArgumentError && /64/.test(e.message),
        type.name,
      );
      assert.deepEqual(allocator.stats(), before);
    }
    assert.equal(allocator.view(p, Float64Array).length, 8);
    assert.deepEqual([...allocator.view(q, Uint8Array)], new Array(64).fill(7));
    p.release();
    q.release();
    assert.equal(allocator.allocatedBytes, 0);
  });

  it("CpuAllocator.view() refuses a type whose constructor releases the pointer", () => {
    const allocator = new CpuAllocator();
    const p = allocator.allocate(64);
    class Releaser extends Uint8Array {
      constructor(buffer: ArrayBuffer, byteOffset: number, length: number) {
        p.release();
        super(buffer, byteOffset, length);
      }
    }
    assert.throws(
      () => allocator.view(p, Releaser as never),
      UseAfterFreeError,
    );
    assert.equal(allocator.allocatedBytes, 0);
  });

  it("CpuAllocator.view() refuses pointers of another allocator", () => {
    const allocator = new CpuAllocator();
    const mine = allocator.allocate(32);
    const other = new CpuAllocator().allocate(32);
    const system = new SystemAllocator().allocate(32);
    for (const ptr of [other, system]) {
      assert.throws(
        () => allocator.view(ptr as never, Uint8Array),
        InvalidArgumentError,
      );
    }
    // its own pointers, zero-byte ones included, are viewed
    assert.equal(allocator.view(mine, Uint8Array).length, 32);
    assert.equal(allocator.view(allocator.allocate(0), Uint8Array).length, 0);
    mine.release();
    assert.throws(() => allocator.view(mine, Uint8Array), UseAfterFreeError);
    other.release();
    system.release();
  });
});

describe("CpuAllocator.view() of look-alike pointers (review 9)", () => {
  it("a DataPtr subclass carrying a real allocation and deleter but lying getters views only that allocation", () => {
    const allocator = new CpuAllocator();
    const real = allocator.allocate(64);
    const neighbour = allocator.allocate(64);
    allocator.view(neighbour, Uint8Array).fill(3);
    class Liar extends DataPtr<HostMemory, CpuAllocation> {
      override get byteLength(): number {
        return 1 << 20;
      }
    }
    const liar = new Liar(real.memory, real.byteOffset, 64, real.device, {
      context: real.getContext()!,
      deleter: allocator.rawDeleter(),
    });
    let view: Uint8Array | undefined;
    try {
      view = allocator.view(liar, Uint8Array);
    } catch (error) {
      assert.ok(error instanceof AllotError, String(error));
    }
    if (view !== undefined) {
      assert.ok(view.byteLength <= 64, `${view.byteLength}`);
    }
    // an empty pointer whose byteLength getter answers 0, then more
    let reads = 0;
    class Growing extends DataPtr<HostMemory, CpuAllocation> {
      override get byteLength(): number {
        return reads++ === 0 ? 0 : 1 << 20;
      }
    }
    const empty = allocator.allocate(0);
    const growing = new Growing(
      empty.memory,
      empty.byteOffset,
      0,
      empty.device,
    );
    view = undefined;
    try {
      view = allocator.view(growing, Uint8Array);
    } catch (error) {
      assert.ok(error instanceof AllotError, String(error));
    }
    if (view !== undefined) assert.equal(view.byteLength, 0);
    assert.deepEqual(
      [...allocator.view(neighbour, Uint8Array)],
      new Array(64).fill(3),
    );
    real.release();
    neighbour.release();
    assert.equal(allocator.allocatedBytes, 0);
  });
});

describe("CpuAllocator.view() after the deleter ran outside release() (review 9)", () => {
  it("a live pointer whose allocation its deleter freed is a UseAfterFreeError, not a view of freed bytes", () => {
    const allocator = new CpuAllocator();
    const ptr = allocator.allocate(64);
    ptr.getDeleter()!(ptr.getContext()!);
    assert.equal(allocator.allocatedBytes, 0);
    assert.throws(() => allocator.view(ptr, Uint8Array), UseAfterFreeError);
  });
});

describe("CpuAllocator.view() after its heap was disposed (review 9)", () => {
  it("a live pointer into a disposed heap is a UseAfterFreeError, not a view of the next heap's block", () => {
    const buffer = new ArrayBuffer(1 << 16);
    const first = new CpuHeap(buffer);
    const allocator = new CpuAllocator({ heap: first });
    const ptr = allocator.allocate(64);
    first.dispose();
    // the bytes are free to claim again: a new heap's block lies there
    const next = new CpuHeap(buffer);
    const at = next.alloc(64);
    next.bytes(at, 64).fill(7);
    assert.equal(at, ptr.byteOffset);
    assert.throws(() => allocator.view(ptr, Uint8Array), UseAfterFreeError);
    assert.deepEqual([...next.bytes(at, 64)], new Array(64).fill(7));
    next.free(at);
    next.dispose();
  });
});

describe("CpuHeap at the 32-bit edges (review 9)", () => {
  it("offsets and lengths of 2^31, 2^32 and past them never alias a live block", () => {
    for (const placement of PLACEMENTS) {
      const heap = new CpuHeap(1 << 16, { placement });
      const a = heap.alloc(100);
      heap.bytes(a, 100).fill(5);
      const before = heapState(heap);
      for (
        const v of [
          2 ** 31,
          2 ** 32,
          2 ** 32 + a,
          2 ** 31 + a,
          -(2 ** 32) + a,
          2 ** 53 - 1,
          a + 2 ** -20,
        ]
      ) {
        for (
          const call of [
            () => heap.free(v),
            () => heap.bytes(v, 1),
            () => heap.view(v, Uint8Array),
            () => heap.usableByteLength(v),
            () => heap.resizeInPlace(v, 8),
            () => heap.realloc(v, 8),
          ]
        ) {
          assert.throws(call, AllotError, `${placement} ${v} ${call}`);
        }
        assert.equal(heap.owns(v), false);
        for (
          const call of [
            () => heap.alloc(v),
            () => heap.alloc(8, v),
            () => heap.realloc(a, v),
          ]
        ) {
          assert.throws(
            call,
            (e: unknown) =>
              e instanceof InvalidArgumentError ||
              e instanceof OutOfMemoryError,
          );
        }
        if (Number.isInteger(v) && v > 0) {
          assert.equal(heap.tryAlloc(v), undefined);
        }
        assert.equal(heap.resizeInPlace(a, 2 ** 32), false);
      }
      // the OOM counter moved; nothing else did
      const after = heapState(heap);
      assert.deepEqual(after.snapshot, before.snapshot);
      assert.deepEqual(after.stats.allocations, before.stats.allocations);
      assert.deepEqual(after.stats.requestedBytes, before.stats.requestedBytes);
      assert.deepEqual([...heap.bytes(a, 100)], new Array(100).fill(5));
      heap.free(a);
      assert.equal(heap.largestFreeBytes, 1 << 16);
      heap.checkIntegrity();
    }
  });

  it("a refused free() leaves a later allocation sequence identical to a twin's", () => {
    for (const placement of PLACEMENTS) {
      const make = () => {
        const heap = new CpuHeap(1 << 16, { placement });
        const live = [heap.alloc(300), heap.alloc(64, 4096), heap.alloc(1)];
        heap.free(live[0]);
        return { heap, live };
      };
      const twin = make();
      const hit = make();
      const inside = hit.live[1] + 64;
      for (
        const v of [inside, hit.live[0], 2 ** 32 + hit.live[1], -0.5, "64"]
      ) {
        assert.throws(() => hit.heap.free(v as number), AllotError);
      }
      const seq = (heap: CpuHeap) =>
        [700, 64, 5000, 1, 128].map((n, i) => heap.alloc(n, 64 << (i % 3)));
      assert.deepEqual(seq(hit.heap), seq(twin.heap));
      assert.deepEqual(heapState(hit.heap), heapState(twin.heap));
    }
  });
});

type Op =
  | { kind: "alloc"; byteLength: number; alignShift: number }
  | { kind: "free"; pick: number }
  | { kind: "realloc"; pick: number; byteLength: number }
  | { kind: "resize"; pick: number; byteLength: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("alloc" as const),
      byteLength: fc.oneof(
        fc.integer({ min: 0, max: 200 }),
        fc.integer({ min: 0, max: 9000 }),
      ),
      alignShift: fc.integer({ min: 0, max: 12 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("free" as const),
      pick: fc.nat(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("realloc" as const),
      pick: fc.nat(),
      byteLength: fc.integer({ min: 0, max: 9000 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("resize" as const),
      pick: fc.nat(),
      byteLength: fc.integer({ min: 0, max: 9000 }),
    }),
  },
);

interface Live {
  at: number;
  byteLength: number;
  alignment: number;
  id: number;
}

function checkAll(heap: CpuHeap, live: Live[]): void {
  const g = heap.alignment;
  let requested = 0, allocated = 0;
  const spans: [number, number][] = [];
  for (const b of live) {
    assert.equal(b.at % b.alignment, 0, "alignment");
    const usable = heap.usableByteLength(b.at);
    assert.equal(usable, Math.max(1, Math.ceil(b.byteLength / g)) * g);
    // views are never longer than the block
    const view = heap.view(b.at, Uint8Array);
    assert.equal(view.byteLength, b.byteLength);
    const span = viewSpan(heap.view(b.at, DataView))!;
    assert.equal(span.byteLength, b.byteLength);
    assert.throws(() => heap.bytes(b.at, usable + 1), InvalidArgumentError);
    checkPattern(heap.bytes(b.at, b.byteLength), b.id, `block ${b.id}`);
    requested += b.byteLength;
    allocated += usable;
    spans.push([b.at, b.at + usable]);
  }
  spans.sort((x, y) => x[0] - y[0]);
  for (let i = 1; i < spans.length; i++) {
    assert.ok(spans[i - 1][1] <= spans[i][0], "blocks overlap");
  }
  const s = heap.stats();
  assert.equal(s.requestedBytes.current, requested);
  assert.equal(s.allocatedBytes.current, allocated);
  assert.equal(s.allocations.current, live.length);
  assert.equal(s.freeBytes, heap.byteLength - allocated);
  const snap = heap.snapshot();
  assert.equal(snap.filter((b) => !b.free).length, live.length);
  assert.equal(
    snap.reduce((n, b) => n + b.byteLength, 0),
    heap.byteLength,
  );
}

describe("CpuHeap model with byte patterns (review 9)", () => {
  for (const placement of PLACEMENTS) {
    it(`placement ${placement}: every live block keeps its pattern, stats equal a recount, everything goes back`, () => {
      fc.assert(
        fc.property(fc.array(opArb, { maxLength: 60, size: "max" }), (ops) => {
          const heap = new CpuHeap(1 << 16, { placement });
          const live: Live[] = [];
          let nextId = 1;
          for (const op of ops) {
            if (op.kind === "alloc") {
              const alignment = 1 << op.alignShift;
              let at: number;
              try {
                at = heap.alloc(op.byteLength, alignment);
              } catch (e) {
                assert.ok(e instanceof OutOfMemoryError);
                continue;
              }
              const b = {
                at,
                byteLength: op.byteLength,
                alignment,
                id: nextId++,
              };
              writePattern(heap.bytes(at, op.byteLength), b.id);
              live.push({
                ...b,
                alignment: Math.max(alignment, heap.alignment),
              });
            } else if (live.length === 0) {
              continue;
            } else {
              const i = op.pick % live.length;
              const b = live[i];
              if (op.kind === "free") {
                heap.free(b.at);
                live.splice(i, 1);
                assert.throws(() => heap.free(b.at), DoubleFreeError);
              } else if (op.kind === "resize") {
                const keep = Math.min(b.byteLength, op.byteLength);
                if (heap.resizeInPlace(b.at, op.byteLength)) {
                  b.byteLength = op.byteLength;
                  writePattern(heap.bytes(b.at, b.byteLength), b.id);
                } else {
                  checkPattern(heap.bytes(b.at, keep), b.id, "unresized");
                }
              } else {
                const old = heap.bytes(b.at, b.byteLength).slice();
                let to: number;
                try {
                  to = heap.realloc(b.at, op.byteLength);
                } catch (e) {
                  assert.ok(e instanceof OutOfMemoryError);
                  continue;
                }
                const keep = Math.min(b.byteLength, op.byteLength);
                assert.deepEqual(
                  heap.bytes(to, keep),
                  old.subarray(0, keep),
                  "realloc copies",
                );
                b.at = to;
                b.byteLength = op.byteLength;
                writePattern(heap.bytes(to, b.byteLength), b.id);
              }
            }
            checkAll(heap, live);
          }
          heap.checkIntegrity();
          for (const b of live) heap.free(b.at);
          assert.equal(heap.allocationCount, 0);
          assert.equal(heap.largestFreeBytes, heap.byteLength);
          heap.checkIntegrity();
        }),
        { numRuns: modelRuns(300) },
      );
    });
  }
});

/** Runs `fn` with `globalThis.SharedArrayBuffer` removed (as in a page that
 * is not cross-origin isolated), then puts it back. */
function withoutSharedArrayBuffer(fn: () => void): void {
  const g = globalThis as { SharedArrayBuffer?: unknown };
  const saved = g.SharedArrayBuffer;
  delete g.SharedArrayBuffer;
  try {
    fn();
  } finally {
    g.SharedArrayBuffer = saved;
  }
}

describe("CpuHeap and CpuAllocator when the engine refuses memory (review 9)", () => {
  it("a buffer the engine cannot make is an OutOfMemoryError, never a RangeError", () => {
    for (
      const make of [
        () => new CpuHeap(137438953408),
        () => new CpuHeap(137438953408, { shared: true }),
        () => new CpuAllocator({ byteLength: 137438953408 }),
      ]
    ) {
      let made: unknown;
      try {
        made = make();
      } catch (error) {
        assert.ok(error instanceof OutOfMemoryError, String(error));
      }
      if (made instanceof CpuHeap) made.dispose();
    }
  });

  it("shared memory without SharedArrayBuffer is a typed refusal, never a ReferenceError", () => {
    withoutSharedArrayBuffer(() => {
      assert.throws(
        () => new CpuHeap(1 << 16, { shared: true }),
        AllotError,
      );
      assert.throws(
        () => new CpuAllocator({ byteLength: 1 << 16, shared: true }),
        AllotError,
      );
      // plain memory still works
      const heap = new CpuHeap(1 << 16);
      heap.free(heap.alloc(100));
      heap.dispose();
    });
  });
});

describe("CpuHeap options read once (review 9)", () => {
  it("maxByteLength is read once: a getter that changes its answer is not asked twice", () => {
    let reads = 0;
    const heap = new CpuHeap(1 << 16, {
      get maxByteLength(): number {
        return reads++ === 0 ? 1 << 17 : 1 << 16;
      },
    });
    assert.equal(reads, 1);
    assert.equal(heap.maxByteLength, 1 << 17);
    // it grows as the first answer allowed
    const a = heap.alloc(1 << 16);
    const b = heap.alloc(1 << 15);
    assert.equal(heap.byteLength, 1 << 17);
    heap.free(a);
    heap.free(b);
    heap.dispose();
  });
});

describe("SystemAllocator and HostSegmentSource without SharedArrayBuffer (review 9)", () => {
  it("shared: true is refused at construction (UnsupportedOperationError), not an out-of-memory on every call", () => {
    withoutSharedArrayBuffer(() => {
      assert.throws(
        () => new SystemAllocator({ shared: true }),
        UnsupportedOperationError,
      );
      assert.throws(
        () => new HostSegmentSource({ shared: true }),
        UnsupportedOperationError,
      );
      // unshared ones still work
      new SystemAllocator().allocate(8).release();
      const source = new HostSegmentSource();
      source.freeSegment(source.tryAllocateSegment(64)!);
    });
  });
});
