// review18: outside-in attacks on copy pools borrowing a storage pool's
// idle whole segments (allbuf16), from the public API only, on the mock
// device (buffers hold no bytes: a shadow byte array per buffer stands for
// them, written with a pattern per live allocation and checked after every
// op).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { CachingGroup } from "@allot/caching";
import { DoubleFreeError, LeakDetector, UseAfterFreeError } from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { _Usage } from "./_flags.ts";
import { mockGpu } from "./_test_mock_device.ts";

const U = _Usage;
const KiB = 1024;

function pools(opts: { storage?: object; uploads?: object } = {}) {
  const gpu = mockGpu();
  const storage = new GpuCachingAllocator(gpu.device, opts.storage);
  const uploads = new GpuCachingAllocator(gpu.device, {
    ...opts.uploads,
    source: { usage: U.COPY_SRC },
  });
  return { gpu, storage, uploads };
}

/** An upload that borrowed storage's freed 64 KiB segment. */
function borrowed(opts: { storage?: object; uploads?: object } = {}) {
  const p = pools(opts);
  const t = p.storage.allocate(64 * KiB);
  const buffer = t.buffer;
  t.release();
  const up = p.uploads.allocate(64 * KiB);
  assert.equal(up.buffer, buffer, "borrowed");
  return { ...p, up, buffer };
}

describe("review18: copy pools borrowing storage's segments, outside in", () => {
  it("a borrowed handle freed twice is refused and changes nothing", () => {
    const { storage, uploads, up } = borrowed();
    up.release();
    const before = storage.memoryStats();
    assert.throws(() => up.release(), DoubleFreeError);
    assert.throws(() => up.buffer, UseAfterFreeError);
    assert.deepEqual(storage.memoryStats(), before);
    storage.validate();
    uploads.validate();
    assert.equal(storage.caching.allocatedBytes, 0);
  });

  it("stats: a borrowed block counts in storage (and the group) while out, nowhere after", () => {
    const { gpu, storage, uploads, up } = borrowed();
    const group = storage.group!;
    assert.equal(storage.memoryStats().allocatedBytes.all.current, 64 * KiB);
    assert.equal(uploads.memoryStats().allocatedBytes.all.current, 0);
    assert.equal(uploads.memoryStats().reservedBytes.all.current, 0);
    let held = 0;
    for (const b of gpu.live) held += b.size;
    assert.equal(group.heldBytes, held);
    const snap = storage.snapshot();
    const active = snap.segments.flatMap((s) => s.blocks).filter((b) =>
      b.state === "active_allocated"
    );
    assert.equal(active.length, 1);
    assert.match(storage.memorySummary(), /allocated/i);
    up.release();
    assert.equal(storage.memoryStats().allocatedBytes.all.current, 0);
    assert.equal(uploads.memoryStats().allocatedBytes.all.current, 0);
    storage.validate();
  });

  it("emptyCache of either pool while a block is out leaves it alone; its free returns it", () => {
    const { gpu, storage, uploads, up, buffer } = borrowed();
    storage.emptyCache();
    uploads.emptyCache();
    assert.ok(gpu.live.has(buffer as never), "the borrowed buffer stays");
    up.release();
    storage.emptyCache();
    assert.equal(gpu.live.size, 0);
    storage.validate();
    uploads.validate();
  });

  it("the ids path of a copy pool does not borrow, and mixes with borrowed handles", () => {
    const { gpu, storage, uploads, up } = borrowed();
    const before = gpu.live.size;
    const id = uploads.allocateId(64 * KiB);
    assert.equal(storage.caching.allocatedBytes, 64 * KiB, "no id borrowed");
    assert.ok(gpu.live.size >= before);
    assert.notEqual(uploads.bufferOf(id), up.buffer);
    // an id freed through the wrong allocator: refused, nothing changes
    const stats = [storage.memoryStats(), uploads.memoryStats()];
    assert.throws(() => storage.freeById(id));
    assert.deepEqual([storage.memoryStats(), uploads.memoryStats()], stats);
    assert.equal(uploads.sizeOf(id), 64 * KiB);
    uploads.freeById(id);
    assert.throws(() => uploads.freeById(id), DoubleFreeError);
    up.release();
    storage.validate();
    uploads.validate();
  });

  it("a copy pool under after-fence reuse does not hand its freed range to a queue-order storage pool before the fence", async () => {
    const { gpu, storage, uploads } = pools({
      uploads: { reuse: "after-fence" },
    });
    const t = storage.allocate(64 * KiB);
    const buffer = t.buffer;
    t.release();
    const up = uploads.allocate(64 * KiB);
    const [b, o] = [up.buffer, up.offset];
    gpu.device.queue.submit([]); // work in flight that reads the upload
    up.release(); // under after-fence: the range waits for the queue
    using next = storage.allocate(64 * KiB);
    assert.ok(
      next.buffer !== b || next.offset !== o,
      "the upload's freed range served storage before the fence",
    );
    gpu.complete();
    await uploads.synchronize();
    await storage.synchronize();
    assert.ok(buffer !== undefined);
  });

  it("device loss while a block is out: its free does not throw, stats stay whole", async () => {
    const adapter = await navigator.gpu?.requestAdapter();
    if (!adapter) return;
    const device = await adapter.requestDevice();
    try {
      const storage = new GpuCachingAllocator(device);
      const uploads = new GpuCachingAllocator(device, {
        source: { usage: U.COPY_SRC },
      });
      const own = storage.allocate(64 * KiB);
      const t = storage.allocate(64 * KiB);
      const buffer = t.buffer;
      t.release();
      const up = uploads.allocate(64 * KiB);
      assert.equal(up.buffer, buffer);
      device.destroy();
      await device.lost;
      // a borrowed block's free after the loss acts as storage's own one's
      const a0 = storage.caching.allocatedBytes;
      own.release();
      const a1 = storage.caching.allocatedBytes;
      up.release();
      assert.equal(a0 - a1, a1 - storage.caching.allocatedBytes);
      const again = (a: GpuAllocation) => {
        try {
          a.release();
          return "none";
        } catch (e) {
          return (e as Error).name;
        }
      };
      assert.equal(again(up), again(own), "a second free: as storage's own");
      assert.throws(() => uploads.allocate(64 * KiB));
    } finally {
      device.destroy();
    }
  });

  it("a storage pool dropped while its block is out: the block's free still reaches it", () => {
    const gpu = mockGpu();
    const uploads = new GpuCachingAllocator(gpu.device, {
      source: { usage: U.COPY_SRC },
    });
    let up: GpuAllocation | undefined;
    (() => {
      const storage = new GpuCachingAllocator(gpu.device);
      storage.allocate(64 * KiB).release();
      up = uploads.allocate(64 * KiB);
      assert.equal(gpu.live.size, 1);
    })();
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    up!.release();
    assert.throws(() => up!.release(), DoubleFreeError);
    uploads.validate();
  });

  it("two devices: one explicit group refuses the second device; each device's pools borrow only their own", () => {
    const group = new CachingGroup();
    const g1 = mockGpu();
    const g2 = mockGpu();
    const s1 = new GpuCachingAllocator(g1.device, { group });
    assert.throws(
      () =>
        new GpuCachingAllocator(g2.device, {
          group,
          source: { usage: U.COPY_SRC },
        }),
      /another GPUDevice/,
    );
    const up2 = new GpuCachingAllocator(g2.device, {
      source: { usage: U.COPY_SRC },
    });
    const s2 = new GpuCachingAllocator(g2.device);
    s1.allocate(64 * KiB).release();
    using a = up2.allocate(64 * KiB);
    assert.ok(g2.live.has(a.buffer as never), "a buffer of its own device");
    assert.equal(s1.caching.allocatedBytes, 0);
    assert.equal(s2.caching.allocatedBytes, 0);
  });

  it("group: null never borrows", () => {
    const gpu = mockGpu();
    const storage = new GpuCachingAllocator(gpu.device);
    const uploads = new GpuCachingAllocator(gpu.device, {
      group: null,
      source: { usage: U.COPY_SRC },
    });
    storage.allocate(64 * KiB).release();
    using a = uploads.allocate(64 * KiB);
    assert.equal(gpu.live.size, 2);
    assert.equal(uploads.caching.allocatedBytes, a.size);
  });

  it("a storage pool that watches for leaks lends nothing; a storage pool taken out of the group lends nothing", () => {
    const gpu = mockGpu();
    const leaks = new LeakDetector();
    const watched = new GpuCachingAllocator(gpu.device, {
      leakDetector: leaks,
    });
    const uploads = new GpuCachingAllocator(gpu.device, {
      source: { usage: U.COPY_SRC },
    });
    watched.allocate(64 * KiB).release();
    const a = uploads.allocate(64 * KiB);
    assert.equal(gpu.live.size, 2);
    assert.equal(watched.caching.allocatedBytes, 0);
    a.release();
    uploads.emptyCache();
    const gpu2 = mockGpu();
    const storage = new GpuCachingAllocator(gpu2.device);
    const up2 = new GpuCachingAllocator(gpu2.device, {
      source: { usage: U.COPY_SRC },
    });
    storage.allocate(64 * KiB).release();
    assert.ok(storage.group!.delete(storage));
    using b = up2.allocate(64 * KiB);
    assert.equal(gpu2.live.size, 2);
    assert.equal(storage.caching.allocatedBytes, 0);
    assert.ok(b.size === 64 * KiB);
  });

  it("real device: bytes written into borrowed and storage blocks stay apart (Deno WebGPU)", async () => {
    const adapter = await navigator.gpu?.requestAdapter();
    if (!adapter) return;
    const device = await adapter.requestDevice();
    try {
      const storage = new GpuCachingAllocator(device);
      const uploads = new GpuCachingAllocator(device, {
        source: { usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST },
      });
      const size = 64 * KiB;
      const keep = storage.allocate(size); // storage half allocated
      storage.allocate(size).release();
      const up = uploads.allocate(size);
      assert.equal(uploads.caching.reservedBytes, 0, "borrowed");
      const other = storage.allocate(size); // storage's own, a new segment
      const blocks = [keep, up, other];
      blocks.forEach((b, i) =>
        device.queue.writeBuffer(
          b.buffer,
          b.offset,
          new Uint8Array(size).fill(0x11 * (i + 1)),
        )
      );
      const read = device.createBuffer({
        size: 3 * size,
        usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      });
      const enc = device.createCommandEncoder();
      blocks.forEach((b, i) =>
        enc.copyBufferToBuffer(b.buffer, b.offset, read, i * size, size)
      );
      device.queue.submit([enc.finish()]);
      await read.mapAsync(GPUMapMode.READ);
      const bytes = new Uint8Array(read.getMappedRange());
      blocks.forEach((_, i) => {
        const want = 0x11 * (i + 1);
        assert.ok(
          bytes.subarray(i * size, (i + 1) * size).every((x) => x === want),
          `block ${i} lost its bytes`,
        );
      });
      read.unmap();
      read.destroy();
      up.release();
      other.release();
      keep.release();
      assert.equal(storage.caching.allocatedBytes, 0);
      storage.validate();
      uploads.validate();
    } finally {
      device.destroy();
    }
  });

  it("model: byte patterns in every live block of both pools survive every op; stats add up; all returned", async () => {
    const sizes = [4 * KiB, 8 * KiB, 16 * KiB, 64 * KiB, 96 * KiB];
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.array(
          fc.record({
            kind: fc.integer({ min: 0, max: 9 }),
            size: fc.constantFrom(...sizes),
            pick: fc.nat(),
          }),
          { minLength: 1, maxLength: 50 },
        ),
        async (fence, ops) => {
          const gpu = mockGpu();
          const storage = new GpuCachingAllocator(gpu.device, {
            reuse: fence ? "after-fence" : "queue-order",
          });
          const uploads = new GpuCachingAllocator(gpu.device, {
            source: { usage: U.COPY_SRC },
          });
          const shadow = new Map<GPUBuffer, Uint8Array>();
          const live: { a: GpuAllocation; pool: number; tag: number }[] = [];
          const ids: { id: number; tag: number }[] = [];
          let tag = 1;
          const bytesOf = (b: GPUBuffer) => {
            let s = shadow.get(b);
            if (!s) shadow.set(b, s = new Uint8Array(b.size));
            return s;
          };
          const check = () => {
            for (const { a, tag } of live) {
              const s = bytesOf(a.buffer);
              for (let i = a.offset; i < a.offset + a.size; i += 509) {
                assert.equal(s[i], tag, "a live block's bytes were changed");
              }
            }
            for (const { id, tag } of ids) {
              const s = bytesOf(uploads.bufferOf(id));
              const o = uploads.offsetOf(id);
              assert.equal(s[o], tag);
              assert.equal(s[o + uploads.sizeOf(id) - 1], tag);
            }
            let held = 0;
            for (const b of gpu.live) held += b.size;
            assert.equal(storage.group!.heldBytes, held);
            let out = 0;
            for (const { a } of live) out += a.size;
            for (const { id } of ids) out += uploads.sizeOf(id);
            // (frees waiting for storage's fence still count as allocated)
            assert.equal(
              storage.caching.allocatedBytes + uploads.caching.allocatedBytes,
              out + storage.pendingFreeBytes + uploads.pendingFreeBytes,
            );
          };
          for (const op of ops) {
            if (op.kind <= 3 && live.length > 0) {
              live.splice(op.pick % live.length, 1)[0].a.release();
            } else if (op.kind === 4 && ids.length > 0) {
              uploads.freeById(ids.splice(op.pick % ids.length, 1)[0].id);
            } else if (op.kind === 5) {
              const id = uploads.allocateId(op.size);
              const t = (tag = tag % 250 + 1);
              const o = uploads.offsetOf(id);
              bytesOf(uploads.bufferOf(id)).fill(t, o, o + op.size);
              ids.push({ id, tag: t });
            } else if (op.kind === 6) {
              (op.pick % 2 ? storage : uploads).emptyCache();
            } else if (op.kind === 7) {
              gpu.device.queue.submit([]);
              if (op.pick % 2) {
                gpu.complete();
                await storage.synchronize();
              }
            } else {
              const pool = op.pick % 2;
              const a = (pool ? storage : uploads).allocate(op.size);
              const t = (tag = tag % 250 + 1);
              bytesOf(a.buffer).fill(t, a.offset, a.offset + a.size);
              live.push({ a, pool, tag: t });
            }
            check();
          }
          for (const { a } of live) a.release();
          for (const { id } of ids) uploads.freeById(id);
          gpu.complete();
          await storage.synchronize();
          await uploads.synchronize();
          storage.validate();
          uploads.validate();
          assert.equal(storage.caching.allocatedBytes, 0);
          assert.equal(uploads.caching.allocatedBytes, 0);
          storage.emptyCache();
          uploads.emptyCache();
          assert.equal(gpu.live.size, 0);
        },
      ),
      { numRuns: modelRuns(150) },
    );
  });
});
