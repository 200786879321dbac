// GpuCachingAllocator on a real WebGPU device (review 7): three pools of one
// device's group (storage, uniforms, copies; one under after-fence reuse)
// take blocks by id and by handle in a seeded random run with frees, step
// marks, emptyCache() and queue waits, so that the group gives segments of
// one pool back for another's miss. Every live block holds its own byte
// pattern, written through the queue when it is taken; at checkpoints every
// live block is copied out and read back: each must still hold its pattern
// (a block on a destroyed buffer, or two that overlap, cannot). Skipped
// without an adapter.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { _Usage as U } from "./_flags.ts";
import { newDevice, skip } from "./_test_device.ts";
import { DeviceLostError } from "./device_lost_error.ts";

const KiB = 1024;

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

function pattern(tag: number, size: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size);
  for (let k = 0; k < size; k++) {
    bytes[k] = (tag * 131 + k * 7 + (tag >>> 8)) & 0xff;
  }
  return bytes;
}

interface Live {
  m: number;
  tag: number;
  size: number;
  id?: number;
  h?: GpuAllocation;
}

describe("GpuCachingAllocator byte patterns on a real device (review 7)", {
  skip,
}, () => {
  it("GpuCachingAllocator: ids and handles of three pools in the device group keep their bytes through give-backs, emptyCache and steps", async () => {
    const device = await newDevice("review7-bytes");
    try {
      const group = GpuCachingAllocator.deviceGroup(device);
      const pools = [
        new GpuCachingAllocator(device),
        new GpuCachingAllocator(device, {
          source: { usage: U.UNIFORM | U.COPY_DST | U.COPY_SRC },
        }),
        new GpuCachingAllocator(device, {
          source: { usage: U.COPY_SRC | U.COPY_DST },
          reuse: "after-fence",
        }),
      ];
      const where = (l: Live): [GPUBuffer, number] => {
        const p = pools[l.m];
        return l.h !== undefined
          ? [l.h.buffer, l.h.offset]
          : [p.bufferOf(l.id!), p.offsetOf(l.id!)];
      };
      const live: Live[] = [];
      let tag = 1;
      const take = (m: number, size: number, byId: boolean) => {
        const p = pools[m];
        const l: Live = byId
          ? { m, tag: tag++, size, id: p.allocateId(size) }
          : { m, tag: tag++, size, h: p.allocate(size) };
        const [buffer, offset] = where(l);
        device.queue.writeBuffer(buffer, offset, pattern(l.tag, size));
        live.push(l);
      };
      const give = (l: Live) => {
        live.splice(live.indexOf(l), 1);
        if (l.h !== undefined) l.h.release();
        else pools[l.m].freeById(l.id!);
      };
      let checked = 0;
      const checkpoint = async () => {
        for (const p of pools) p.validate();
        let total = 0;
        for (const l of live) total += l.size;
        if (total === 0) return;
        const read = device.createBuffer({
          size: total,
          usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
        });
        const encoder = device.createCommandEncoder();
        let at = 0;
        for (const l of live) {
          const [buffer, offset] = where(l);
          encoder.copyBufferToBuffer(buffer, offset, read, at, l.size);
          at += l.size;
        }
        device.pushErrorScope("validation");
        device.queue.submit([encoder.finish()]);
        const error = await device.popErrorScope();
        assert.equal(
          error,
          null,
          `a copy from a live block failed: ${error?.message}`,
        );
        await read.mapAsync(GPUMapMode.READ);
        const bytes = new Uint8Array(read.getMappedRange());
        at = 0;
        for (const l of live) {
          const want = pattern(l.tag, l.size);
          for (let k = 0; k < l.size; k++) {
            if (bytes[at + k] !== want[k]) {
              assert.fail(
                `pool ${l.m} block ${l.tag} (${l.size} bytes, ${
                  l.id !== undefined ? "id" : "handle"
                }) lost byte ${k}`,
              );
            }
          }
          at += l.size;
        }
        read.unmap();
        read.destroy();
        checked++;
      };
      const random = rng(7);
      const sizes = [
        4,
        256,
        1000 & ~3,
        4 * KiB,
        60 * KiB,
        300 * KiB,
        1200 * KiB,
      ];
      for (let step = 0; step < 400; step++) {
        const r = random();
        const m = Math.floor(random() * 3);
        // uniforms stay within a uniform binding
        const size = m === 1
          ? sizes[Math.floor(random() * 5)]
          : sizes[Math.floor(random() * sizes.length)];
        if (r < 0.45) take(m, size, random() < 0.5);
        else if (r < 0.85) {
          if (live.length > 0) give(live[Math.floor(random() * live.length)]);
        } else if (r < 0.9) {
          for (const l of live.filter((l) => l.m === m)) give(l);
        } else if (r < 0.93) pools[m].emptyCache();
        else if (r < 0.97) group.endStep();
        else await pools[2].synchronize();
        if (step % 40 === 39) await checkpoint();
      }
      await checkpoint();
      assert.ok(checked >= 5);
      assert.ok(group.givenBackSegments > 0, "the group gave segments back");
      for (const l of [...live]) give(l);
      for (const p of pools) {
        await p.synchronize();
        p.emptyCache();
        assert.equal(p.caching.allocatedBytes, 0);
        assert.equal(p.caching.reservedBytes, 0);
      }
      assert.equal(group.heldBytes, 0);
    } finally {
      device.destroy();
    }
  });
  it("GpuCachingAllocator: a real device destroyed in the middle: reads and allocations refuse with DeviceLostError, cleanup never throws, the group keeps its counts", async () => {
    const device = await newDevice("review7-loss");
    const group = GpuCachingAllocator.deviceGroup(device);
    const storage = new GpuCachingAllocator(device);
    const copies = new GpuCachingAllocator(device, {
      source: { usage: U.COPY_SRC | U.COPY_DST },
      reuse: "after-fence",
    });
    const ids = [storage.allocateId(4 * KiB), copies.allocateId(64 * KiB)];
    const handles = [storage.allocate(1000), copies.allocate(300 * KiB)];
    copies.freeById(copies.allocateId(8 * KiB)); // waits for the queue
    device.queue.writeBuffer(
      storage.bufferOf(ids[0]),
      storage.offsetOf(ids[0]),
      pattern(1, 4 * KiB),
    );
    device.destroy();
    for (const [x, id] of [[storage, ids[0]], [copies, ids[1]]] as const) {
      assert.throws(() => x.bufferOf(id), DeviceLostError);
      assert.throws(() => x.allocateId(100), DeviceLostError);
      assert.throws(() => x.allocate(100), DeviceLostError);
      await assert.rejects(x.allocateAsync(100), DeviceLostError);
    }
    for (const h of handles) assert.throws(() => h.buffer, DeviceLostError);
    // cleanup loops never throw
    storage.freeById(ids[0]);
    copies.freeById(ids[1]);
    storage.freeById(ids[0]);
    for (const h of handles) {
      h.release();
      h.release();
    }
    for (const x of [storage, copies]) {
      x.emptyCache();
      group.endStep();
      await x.synchronize();
      x.validate();
      assert.equal(x.liveIdCount, 0);
    }
    assert.equal(
      group.heldBytes,
      storage.caching.reservedBytes + copies.caching.reservedBytes,
    );
  });
});
