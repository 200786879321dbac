import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "../core/_test_faults.ts";
import {
  type DataPtr,
  DoubleFreeError,
  InvalidArgumentError,
} from "@allot/core";
import {
  AllocationStrategy,
  Buffer,
  BufferPool,
  ManagedBufferPool,
} from "./mod.ts";
import { BumpAllocator } from "./_test_allocators.ts";

const strategies = [
  AllocationStrategy.exact(),
  AllocationStrategy.padded(64),
  AllocationStrategy.pooled({ minByteLength: 32 }),
];

function overlaps(a: DataPtr, b: DataPtr): boolean {
  return a.memory === b.memory && a.byteOffset < b.byteOffset + b.byteLength &&
    b.byteOffset < a.byteOffset + a.byteLength;
}

describe("AllocationStrategy", () => {
  it("AllocationStrategy rounds exact, padded and pooled requests", () => {
    assert.deepEqual([0, 1, 100].map((n) => strategies[0].reserve(n)), [
      0,
      1,
      100,
    ]);
    assert.deepEqual([0, 1, 64, 65].map((n) => strategies[1].reserve(n)), [
      0,
      64,
      64,
      128,
    ]);
    assert.deepEqual(
      [0, 33, 64, 65, 1000].map((n) => strategies[2].reserve(n)),
      [32, 64, 64, 128, 1024],
    );
    assert.throws(
      () => AllocationStrategy.padded(48),
      /power of two, received 48/,
    );
    assert.throws(() => strategies[2].reserve(-1), InvalidArgumentError);
  });
});

describe("BufferPool", () => {
  it("BufferPool never hands out memory that is still in use (model-based)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 }),
        fc.array(
          fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 300 }), fc.nat()),
          { maxLength: 60 },
        ),
        (s, ops) => {
          const allocator = new BumpAllocator(1 << 22);
          const pool = new BufferPool(allocator, {
            strategy: strategies[s],
            maxFreeBytes: 2048,
          });
          const live: {
            ptr: DataPtr<ArrayBuffer, number>;
            requested: number;
          }[] = [];
          for (const [take, n, pick] of ops) {
            if (take || live.length === 0) {
              const ptr = pool.acquire(n);
              assert.equal(ptr.byteLength, strategies[s].reserve(n));
              for (const other of live) {
                if (ptr.byteLength > 0 && other.ptr.byteLength > 0) {
                  assert.ok(
                    !overlaps(ptr, other.ptr),
                    "a live block was handed out again",
                  );
                }
                assert.notEqual(ptr, other.ptr);
              }
              live.push({ ptr, requested: n });
            } else {
              const [gone] = live.splice(pick % live.length, 1);
              pool.recycle(gone.ptr);
              assert.throws(() => pool.recycle(gone.ptr), DoubleFreeError);
            }
            const stats = pool.stats();
            assert.equal(stats.inUseHandles, live.length);
            assert.equal(
              stats.allocatedBytes,
              live.reduce((a, b) => a + b.ptr.byteLength, 0),
            );
            assert.equal(
              stats.requestedBytes,
              live.reduce((a, b) => a + b.requested, 0),
            );
            assert.ok(stats.freeBytes <= 2048);
            assert.equal(
              stats.reserved.current,
              stats.allocatedBytes + stats.freeBytes,
            );
            assert.equal(
              allocator.live.size,
              stats.inUseHandles + stats.freeHandles,
            );
          }
          for (const { ptr } of live) pool.recycle(ptr);
          pool.cleanup();
          assert.equal(allocator.live.size, 0);
          assert.equal(pool.stats().reserved.current, 0);
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("BufferPool.recycle() refuses foreign blocks and changes nothing", () => {
    const allocator = new BumpAllocator();
    const pool = new BufferPool(allocator);
    const foreign = allocator.allocate(10);
    const before = pool.stats();
    assert.throws(() => pool.recycle(foreign), /not handed out by this pool/);
    assert.deepEqual(pool.stats(), before);
  });
});

describe("ManagedBufferPool", () => {
  it("ManagedBufferPool takes back released buffers and reuses their blocks", () => {
    const allocator = new BumpAllocator();
    using pool = new ManagedBufferPool(allocator, {
      strategy: AllocationStrategy.pooled(),
    });
    const a = pool.alloc("f32", [100]);
    const t = a.withView(a.view.reshape([10, 10]).transpose());
    const offset = a.storage.data.byteOffset;
    a.release();
    assert.equal(pool.stats().inUseHandles, 1);
    using packed = t.contiguous();
    assert.deepEqual(packed.shape, [10, 10]);
    t.release();
    assert.equal(pool.stats().freeHandles, 1);
    assert.equal(
      pool.stats().inUseHandles,
      1,
      "contiguous() packs into pool memory",
    );
    using b = Buffer.zeros("u8", [300], { allocator: pool });
    assert.equal(
      b.storage.data.byteOffset,
      offset,
      "a 512-byte bucket is reused",
    );
    assert.equal(pool.stats().reuses, 1);
    assert.deepEqual(pool.stats().paddingBytes, 512 - 400 + 512 - 300);
  });

  it("ManagedBufferPool's recycler does not keep the pool alive", async () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (gc === undefined) {
      console.log("skipped: run with --v8-flags=--expose-gc");
      return;
    }
    const allocator = new BumpAllocator();
    let ref: WeakRef<object>;
    const buffer = (() => {
      const pool = new ManagedBufferPool(allocator);
      ref = new WeakRef(pool);
      return pool.alloc("f32", [16]);
    })();
    for (let i = 0; i < 5 && ref!.deref() !== undefined; i++) {
      await new Promise((r) => setTimeout(r, 0));
      gc();
    }
    assert.equal(
      ref!.deref(),
      undefined,
      "the pool was collected while a buffer lived",
    );
    assert.equal(allocator.live.size, 1);
    buffer.release();
    assert.equal(
      allocator.live.size,
      0,
      "the block went straight back to the allocator",
    );
  });

  it("ManagedBufferPool.dispose() frees kept blocks and later returns", () => {
    const allocator = new BumpAllocator();
    const pool = new ManagedBufferPool(allocator);
    const a = pool.alloc("u8", [10]);
    pool.alloc("u8", [10]).release();
    assert.equal(allocator.live.size, 2);
    pool.dispose();
    assert.equal(allocator.live.size, 1);
    assert.throws(() => pool.alloc("u8", [1]), /disposed/);
    a.release();
    assert.equal(allocator.live.size, 0);
  });
});
