// GpuCachingAllocator.forUsage from the outside (review 8): hostile usages
// (lying valueOf, 2^32, -1, fractions, NaN, mapped bits mixed with storage,
// boxed numbers) are refused with InvalidArgumentError and make nothing,
// before and after a device's first allocator; another device's allocators,
// and allocators of the same device made by hand (`group: null` or the
// device group's), are never handed out; a lost device's allocators refuse
// allocation with DeviceLostError and take frees quietly. On a real device:
// an upload's blocks and storage tensors share the storage pool's buffers,
// each live block keeps its byte pattern through frees in shuffled order and
// emptyCache() called through another usage's allocator.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { _DEFAULT_SEGMENT_USAGE, _Usage as U } from "./_flags.ts";
import { mockGpu, mockGpuWithUniforms } from "./_test_mock_device.ts";
import { newDevice, skip } from "./_test_device.ts";
import { DeviceLostError } from "./device_lost_error.ts";

const STORAGE = _DEFAULT_SEGMENT_USAGE;

/** Usages forUsage must refuse, with what they would become if coerced. */
function hostileUsages(): unknown[] {
  let asked = 0;
  return [
    0,
    -0,
    -1,
    -U.COPY_SRC,
    2 ** 32,
    2 ** 32 + U.COPY_SRC, // COPY_SRC in its low 32 bits
    2 ** 53,
    U.COPY_SRC + 0.5,
    Number.NaN,
    Infinity,
    -Infinity,
    Number.MAX_VALUE,
    U.MAP_READ | U.STORAGE,
    U.MAP_WRITE | U.STORAGE | U.COPY_SRC,
    U.MAP_READ | U.COPY_DST,
    "4",
    "",
    null,
    true,
    BigInt(U.COPY_SRC),
    Symbol("usage"),
    [U.COPY_SRC],
    new Number(U.COPY_SRC),
    { valueOf: () => U.COPY_SRC },
    // a value that answers differently each time it is read
    { valueOf: () => (asked++ === 0 ? U.COPY_SRC : U.MAP_READ) },
    { [Symbol.toPrimitive]: () => U.UNIFORM },
  ];
}

describe("GpuCachingAllocator.forUsage (review 8)", () => {
  it("refuses every hostile usage with InvalidArgumentError naming it, making nothing, before and after the first allocator", () => {
    const gpu = mockGpu();
    const group = GpuCachingAllocator.deviceGroup(gpu.device);
    const check = (made: number) => {
      for (const usage of hostileUsages()) {
        let caught: unknown;
        try {
          GpuCachingAllocator.forUsage(gpu.device, usage as number);
        } catch (e) {
          caught = e;
        }
        assert.ok(
          caught instanceof InvalidArgumentError,
          `${String(usage)}: ${String(caught)}`,
        );
        assert.equal(caught.argument, "usage");
        assert.ok(Object.is(caught.value, usage), String(usage));
        assert.equal(group.size, made, String(usage));
        assert.equal(gpu.live.size, 0);
      }
    };
    check(0);
    const storage = GpuCachingAllocator.forUsage(gpu.device, U.COPY_DST);
    check(1);
    assert.equal(GpuCachingAllocator.forUsage(gpu.device), storage);
    assert.equal(group.size, 1);
  });

  it("never hands out another device's allocators, or one made by hand for the same device", () => {
    const a = mockGpu(), b = mockGpu();
    const byHand = new GpuCachingAllocator(a.device);
    const alone = new GpuCachingAllocator(a.device, { group: null });
    const aUploads = GpuCachingAllocator.forUsage(a.device, U.COPY_SRC);
    assert.notEqual(aUploads, byHand);
    assert.notEqual(aUploads, alone);
    assert.equal(aUploads.group, byHand.group);
    assert.equal(alone.group, undefined);
    const bUploads = GpuCachingAllocator.forUsage(b.device, U.COPY_SRC);
    assert.notEqual(bUploads, aUploads);
    assert.equal(bUploads.gpuDevice, b.device);
    assert.equal(bUploads.group, GpuCachingAllocator.deviceGroup(b.device));
    // b's allocators make b's buffers, a's a's
    using x = bUploads.allocate(1024);
    assert.equal(b.live.size, 1);
    assert.equal(a.live.size, 0);
    using y = aUploads.allocate(1024);
    assert.equal(a.live.size, 1);
    assert.ok(x.buffer !== y.buffer);
    // the hand-made and alone ones keep their own pools
    using z = alone.allocate(1024);
    assert.equal(a.live.size, 2);
    assert.equal(aUploads.stats().reservedBytes.all.current, 1024);
    assert.equal(z.size, 1024);
  });

  it("a usage's allocator emptied while another usage's holds blocks: only free segments go", () => {
    const gpu = mockGpuWithUniforms();
    const storage = GpuCachingAllocator.forUsage(gpu.device);
    const uploads = GpuCachingAllocator.forUsage(gpu.device, U.COPY_SRC);
    const uniforms = GpuCachingAllocator.forUsage(
      gpu.device,
      U.UNIFORM | U.COPY_DST,
    );
    const held = [storage.allocate(4096), uploads.allocate(8192)];
    const u = uniforms.allocate(256);
    u.release();
    const spare = uploads.allocate(1 << 20);
    spare.release();
    const before = gpu.live.size;
    uniforms.emptyCache(); // the uniform pool's free segment only
    assert.equal(gpu.live.size, before - 1);
    uploads.emptyCache(); // storage's free segments (the upload's spare)
    for (const h of held) {
      assert.equal(
        (h.buffer as unknown as { destroyed: boolean }).destroyed,
        false,
      );
      assert.ok(
        [...gpu.live].some((b) => b === (h.buffer as unknown)),
        "a live block's buffer is kept",
      );
    }
    storage.validate();
    uniforms.validate();
    for (const h of held) h.release();
    storage.emptyCache();
    assert.equal(gpu.live.size, 0);
    assert.equal(storage.stats().reservedBytes.all.current, 0);
  });
});

/** The pattern of block `tag`: bytes no other block has at that index. */
function pattern(tag: number, size: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size);
  for (let k = 0; k < size; k++) {
    bytes[k] = (tag * 97 + k * 13 + (k >>> 8)) & 0xff;
  }
  return bytes;
}

/** A deterministic generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

describe("GpuCachingAllocator.forUsage on a real device (review 8)", {
  skip,
}, () => {
  it("uploads and tensors share storage's buffers and keep their bytes through shuffled frees, copies and emptyCache through other usages", async () => {
    const device = await newDevice("review8-for-usage");
    try {
      const storage = GpuCachingAllocator.forUsage(device);
      const uploads = GpuCachingAllocator.forUsage(device, U.COPY_SRC);
      const downloads = GpuCachingAllocator.forUsage(device, U.COPY_DST);
      const uniforms = GpuCachingAllocator.forUsage(
        device,
        U.UNIFORM | U.COPY_DST | U.COPY_SRC, // read back by the check
      );
      assert.ok(uploads === storage && downloads === storage);
      assert.equal(storage.source.usage, STORAGE);
      const pools = [storage, uploads, uniforms];
      const random = rng(8);
      const live: { h: GpuAllocation; tag: number; pool: number }[] = [];
      let tag = 1;
      let shared = 0; // uploads and tensors live in one buffer
      const check = async () => {
        const total = live.reduce((n, l) => n + l.h.size, 0);
        if (total === 0) return;
        const read = device.createBuffer({
          size: total,
          usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
        });
        const encoder = device.createCommandEncoder();
        let at = 0;
        for (const l of live) {
          encoder.copyBufferToBuffer(
            l.h.buffer,
            l.h.offset,
            read,
            at,
            l.h.size,
          );
          at += l.h.size;
        }
        device.queue.submit([encoder.finish()]);
        await read.mapAsync(GPUMapMode.READ);
        const bytes = new Uint8Array(read.getMappedRange());
        at = 0;
        for (const l of live) {
          assert.deepEqual(
            bytes.subarray(at, at + l.h.size),
            pattern(l.tag, l.h.size),
            `block ${l.tag} of pool ${l.pool}`,
          );
          at += l.h.size;
        }
        read.unmap();
        read.destroy();
      };
      for (let step = 0; step < 60; step++) {
        const r = random();
        if (r < 0.55 || live.length === 0) {
          const pool = Math.floor(random() * pools.length);
          const size = 256 * (1 + Math.floor(random() * 24));
          const h = pools[pool].allocate(size);
          const t = tag++;
          if (pool === 1 && live.some((l) => l.pool === 0)) {
            // an upload filled from a storage tensor: a copy inside the pool
            const src = live.find((l) => l.pool === 0)!;
            device.queue.writeBuffer(h.buffer, h.offset, pattern(t, size));
            const n = Math.min(src.h.size, size);
            const scratch = storage.allocate(n);
            const encoder = device.createCommandEncoder();
            encoder.copyBufferToBuffer(
              src.h.buffer,
              src.h.offset,
              scratch.buffer,
              scratch.offset,
              n,
            );
            device.queue.submit([encoder.finish()]);
            scratch.release(); // queue order: the copy is done before reuse
          } else {
            device.queue.writeBuffer(h.buffer, h.offset, pattern(t, size));
          }
          if (
            pool !== 2 &&
            live.some((l) => l.pool === 1 - pool && l.h.buffer === h.buffer)
          ) shared++;
          live.push({ h, tag: t, pool });
        } else if (r < 0.85) {
          const at = Math.floor(random() * live.length);
          live.splice(at, 1)[0].h.release();
        } else if (r < 0.95) {
          pools[Math.floor(random() * pools.length)].emptyCache();
        } else {
          await check();
        }
        for (const p of pools) p.validate();
      }
      await check();
      assert.ok(shared > 0, "an upload and a tensor shared a buffer");
      // shuffled frees: each free leaves the others' bytes
      while (live.length > 0) {
        const at = Math.floor(random() * live.length);
        live.splice(at, 1)[0].h.release();
        if (live.length % 4 === 0) await check();
      }
      for (const p of pools) p.emptyCache();
      assert.equal(storage.stats().reservedBytes.all.current, 0);
      assert.equal(uniforms.stats().reservedBytes.all.current, 0);
    } finally {
      device.destroy();
    }
  });

  it("a lost device's allocators: the same ones again, allocation refused with DeviceLostError, frees and emptyCache quiet", async () => {
    const device = await newDevice("review8-for-usage-lost");
    const storage = GpuCachingAllocator.forUsage(device);
    const h = storage.allocate(1024);
    device.destroy();
    await device.lost;
    assert.equal(GpuCachingAllocator.forUsage(device, U.COPY_SRC), storage);
    const uniforms = GpuCachingAllocator.forUsage(device, U.UNIFORM);
    for (const a of [storage, uniforms]) {
      assert.throws(() => a.allocate(16), DeviceLostError);
      assert.equal(a.lost, true);
    }
    h.release();
    storage.emptyCache();
    uniforms.emptyCache();
    // (release() after loss is a no-op, as the README says: the stats keep
    // what was live at the loss)
    h.release();
    assert.equal(GpuCachingAllocator.forUsage(device, U.UNIFORM), uniforms);
    assert.throws(
      () => GpuCachingAllocator.forUsage(device, U.MAP_READ),
      InvalidArgumentError,
    );
  });
});
