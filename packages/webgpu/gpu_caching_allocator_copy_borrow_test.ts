// A pool of copy buffers (usage within COPY_SRC | COPY_DST) in a group
// borrows, before its own miss, a storage pool's whole free segment of
// exactly the request's rounded size (at least that pool's smallest
// segment) while the storage pool holds at most half its bytes allocated;
// the block goes back to the storage pool when released.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { CachingGroup } from "@allot/caching";
import { LeakDetector } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { _Usage } from "./_flags.ts";
import { mockGpu, mockGpuWithUniforms } from "./_test_mock_device.ts";

const U = _Usage;
const KiB = 1024;

/** A storage pool and an upload pool of one device, in its group. */
function pools(gpu = mockGpu()) {
  const storage = new GpuCachingAllocator(gpu.device);
  const uploads = new GpuCachingAllocator(gpu.device, {
    source: { usage: U.COPY_SRC },
  });
  return { gpu, storage, uploads };
}

describe("GpuCachingAllocator: copy pools borrow storage's whole free segments", () => {
  it("an upload takes a storage pool's whole free segment of its size, no buffer made, and gives it back", () => {
    const { gpu, storage, uploads } = pools();
    const t = storage.allocate(64 * KiB);
    using keep = storage.allocate(64 * KiB);
    assert.equal(gpu.live.size, 2);
    const freed = t.buffer;
    t.release(); // half of storage's bytes allocated
    const up = uploads.allocate(64 * KiB);
    assert.equal(gpu.live.size, 2, "no buffer made");
    assert.equal(up.buffer, freed);
    assert.equal(up.offset, 0);
    assert.equal(uploads.caching.reservedBytes, 0);
    assert.equal(storage.caching.allocatedBytes, 128 * KiB);
    up.release();
    assert.equal(storage.caching.allocatedBytes, 64 * KiB);
    // back in storage's cache: storage's next request takes it
    using again = storage.allocate(64 * KiB);
    assert.equal(again.buffer, freed);
    assert.equal(gpu.live.size, 2);
    storage.validate();
    uploads.validate();
    assert.ok(keep.size === 64 * KiB);
  });

  it("a readback (COPY_DST) borrows too, and the buffer carries its usage", () => {
    const { gpu, storage } = pools();
    const readbacks = new GpuCachingAllocator(gpu.device, {
      source: { usage: U.COPY_DST },
    });
    storage.allocate(16 * KiB).release();
    using r = readbacks.allocate(16 * KiB);
    assert.equal(gpu.live.size, 1);
    assert.equal(r.buffer.usage & U.COPY_DST, U.COPY_DST);
    assert.equal(readbacks.caching.reservedBytes, 0);
  });

  it("its own cached block first", () => {
    const { gpu, storage, uploads } = pools();
    const own = uploads.allocate(64 * KiB);
    const ownBuffer = own.buffer;
    own.release();
    storage.allocate(64 * KiB).release();
    assert.equal(gpu.live.size, 2);
    using up = uploads.allocate(64 * KiB);
    assert.equal(up.buffer, ownBuffer);
    assert.equal(storage.caching.allocatedBytes, 0);
  });

  it("not while the storage pool holds more than half its bytes allocated", () => {
    const { gpu, storage, uploads } = pools();
    using a = storage.allocate(64 * KiB);
    using b = storage.allocate(64 * KiB);
    const c = storage.allocate(64 * KiB);
    const cBuffer = c.buffer;
    c.release(); // 128 of 192 KiB allocated
    using up = uploads.allocate(64 * KiB);
    assert.equal(gpu.live.size, 4, "a buffer of its own");
    assert.notEqual(up.buffer, cBuffer);
    assert.equal(uploads.caching.reservedBytes, 64 * KiB);
    assert.ok(a.size + b.size === 128 * KiB);
  });

  it("only a whole segment of exactly the rounded size: not a larger one, not a split piece", () => {
    const { gpu, storage, uploads } = pools();
    storage.allocate(64 * KiB).release();
    // 48 KiB would split storage's 64 KiB segment
    using up = uploads.allocate(48 * KiB);
    assert.equal(gpu.live.size, 2);
    assert.equal(storage.caching.allocatedBytes, 0);
    // a free piece of a split segment is not lent either
    const gpu2 = mockGpu();
    const p2 = pools(gpu2);
    const big = p2.storage.allocate(64 * KiB);
    big.release();
    using head = p2.storage.allocate(32 * KiB); // splits the segment
    assert.equal(gpu2.live.size, 1);
    using up2 = p2.uploads.allocate(32 * KiB);
    assert.equal(gpu2.live.size, 2);
    assert.notEqual(up2.buffer, head.buffer);
    assert.ok(up.size === 48 * KiB);
  });

  it("not below the storage pool's smallest segment", () => {
    // storage's segments of just the request: a whole free 2 KiB segment,
    // under the default smallest segment (4 KiB)
    const { gpu, storage, uploads } = pools();
    storage.allocate(2 * KiB).release();
    assert.deepEqual([...gpu.live].map((b) => b.size), [2 * KiB]);
    using up = uploads.allocate(2 * KiB);
    assert.equal(gpu.live.size, 2);
    assert.equal(storage.caching.allocatedBytes, 0);
    // the lender's own smallest segment decides
    const gpu2 = mockGpu();
    const st2 = new GpuCachingAllocator(gpu2.device, {
      minSegmentByteLength: 8 * KiB,
    });
    const up2 = new GpuCachingAllocator(gpu2.device, {
      source: { usage: U.COPY_SRC },
    });
    st2.allocate(4 * KiB).release();
    assert.deepEqual([...gpu2.live].map((b) => b.size), [4 * KiB]);
    using b = up2.allocate(4 * KiB);
    assert.equal(gpu2.live.size, 2);
    // at it, it borrows
    const p3 = pools();
    p3.storage.allocate(4 * KiB).release();
    using c = p3.uploads.allocate(4 * KiB);
    assert.equal(p3.gpu.live.size, 1);
    assert.ok(up.size + b.size + c.size > 0);
  });

  it("not outside a group, not from or for a pool taken out of the group, not for a watched pool or uniform pools", () => {
    // group: null
    const gpu = mockGpu();
    const storage = new GpuCachingAllocator(gpu.device);
    const alone = new GpuCachingAllocator(gpu.device, {
      source: { usage: U.COPY_SRC },
      group: null,
    });
    storage.allocate(64 * KiB).release();
    using a = alone.allocate(64 * KiB);
    assert.equal(gpu.live.size, 2);
    // the storage pool deleted from the group
    const p = pools();
    p.storage.allocate(64 * KiB).release();
    assert.ok(p.storage.group!.delete(p.storage));
    using b = p.uploads.allocate(64 * KiB);
    assert.equal(p.gpu.live.size, 2);
    // the copy pool deleted from the group
    const q = pools();
    q.storage.allocate(64 * KiB).release();
    assert.ok(q.uploads.group!.delete(q.uploads));
    using e = q.uploads.allocate(64 * KiB);
    assert.equal(q.gpu.live.size, 2);
    // a copy pool that watches its handles for leaks
    const w = mockGpu();
    const wst = new GpuCachingAllocator(w.device);
    const watched = new GpuCachingAllocator(w.device, {
      source: { usage: U.COPY_SRC },
      leakDetector: new LeakDetector(),
    });
    wst.allocate(64 * KiB).release();
    using f = watched.allocate(64 * KiB);
    assert.equal(w.live.size, 2);
    assert.equal(watched.caching.allocatedBytes, 64 * KiB);
    assert.ok(e.size + f.size > 0);
    // another group's storage pool
    const gpu3 = mockGpu();
    const other = new GpuCachingAllocator(gpu3.device, {
      group: new CachingGroup(),
    });
    const up3 = new GpuCachingAllocator(gpu3.device, {
      source: { usage: U.COPY_SRC },
    });
    other.allocate(64 * KiB).release();
    using c = up3.allocate(64 * KiB);
    assert.equal(gpu3.live.size, 2);
    // uniforms (not a copy usage)
    const gpu4 = mockGpuWithUniforms();
    const st4 = new GpuCachingAllocator(gpu4.device, {
      source: { usage: U.STORAGE | U.UNIFORM | U.COPY_DST | U.COPY_SRC },
    });
    const uni = new GpuCachingAllocator(gpu4.device, {
      source: { usage: U.UNIFORM | U.COPY_DST },
    });
    st4.allocate(16 * KiB).release();
    using d = uni.allocate(16 * KiB);
    assert.equal(gpu4.live.size, 2);
    assert.ok(a.size + b.size + c.size + d.size > 0);
  });

  it("a lender that reuses after the fence takes the block back after it", async () => {
    const gpu = mockGpu();
    const storage = new GpuCachingAllocator(gpu.device, {
      reuse: "after-fence",
    });
    const uploads = new GpuCachingAllocator(gpu.device, {
      source: { usage: U.COPY_SRC },
    });
    const t = storage.allocate(64 * KiB);
    const tBuffer = t.buffer;
    t.release();
    await storage.synchronize();
    const up = uploads.allocate(64 * KiB);
    assert.equal(up.buffer, tBuffer);
    up.release();
    assert.equal(storage.pendingFreeCount, 1, "waits for storage's fence");
    await storage.synchronize();
    assert.equal(storage.caching.allocatedBytes, 0);
    using again = storage.allocate(64 * KiB);
    assert.equal(again.buffer, tBuffer);
  });

  it("model: blocks never overlap, carry their usage, go back to their pool; the group counts every buffer", () => {
    const sizes = [4 * KiB, 8 * KiB, 16 * KiB, 24 * KiB, 64 * KiB];
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            pool: fc.integer({ min: 0, max: 2 }),
            size: fc.constantFrom(...sizes),
            free: fc.nat(),
          }),
          { minLength: 1, maxLength: 60 },
        ),
        (ops) => {
          const gpu = mockGpu();
          const storage = new GpuCachingAllocator(gpu.device);
          const uploads = new GpuCachingAllocator(gpu.device, {
            source: { usage: U.COPY_SRC },
          });
          const readbacks = new GpuCachingAllocator(gpu.device, {
            source: { usage: U.COPY_DST },
          });
          const all = [storage, uploads, readbacks];
          const need = [U.STORAGE, U.COPY_SRC, U.COPY_DST];
          const live: GpuAllocation[] = [];
          for (const op of ops) {
            if (op.free % 3 === 0 && live.length > 0) {
              live.splice(op.free % live.length, 1)[0].release();
              continue;
            }
            const a = all[op.pool].allocate(op.size);
            assert.equal(a.buffer.usage & need[op.pool], need[op.pool]);
            live.push(a);
            // no two live blocks share bytes of a buffer
            const byBuffer = new Map<GPUBuffer, [number, number][]>();
            for (const b of live) {
              const r = byBuffer.get(b.buffer) ?? [];
              for (const [o, n] of r) {
                assert.ok(
                  b.offset + b.size <= o || o + n <= b.offset,
                  "overlap",
                );
              }
              r.push([b.offset, b.size]);
              byBuffer.set(b.buffer, r);
            }
            let bytes = 0;
            for (const b of gpu.live) bytes += b.size;
            assert.equal(storage.group!.heldBytes, bytes);
          }
          for (const a of all) a.validate();
          for (const a of live) a.release();
          for (const a of all) {
            assert.equal(a.caching.allocatedBytes, 0);
            a.emptyCache();
          }
          assert.equal(gpu.live.size, 0);
        },
      ),
      { numRuns: 100 },
    );
  });
});
