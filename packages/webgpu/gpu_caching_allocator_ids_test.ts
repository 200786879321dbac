// GpuCachingAllocator's id path (allocateId / bufferOf / offsetOf / sizeOf /
// freeById), outside in: hostile ids, stale, freed and foreign ids, double
// frees, device loss, emptyCache, after-fence reuse, no garbage per
// operation, and a model: ids and handles driven by the same operations
// place every allocation at the same offset of the same-numbered buffer.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { mockGpu } from "./_test_mock_device.ts";
import { modelRuns } from "../core/_test_faults.ts";

const gc = (globalThis as { gc?: () => void }).gc;

/** Every read and the free of `id`, each expected to throw `error`. */
function assertRefused(
  a: GpuCachingAllocator,
  id: unknown,
  read: new (...args: never[]) => Error,
  free: (new (...args: never[]) => Error) | null,
): void {
  const n = id as number;
  assert.throws(() => a.bufferOf(n), read);
  assert.throws(() => a.offsetOf(n), read);
  assert.throws(() => a.sizeOf(n), read);
  if (free === null) a.freeById(n);
  else assert.throws(() => a.freeById(n), free);
}

describe("GpuCachingAllocator ids", () => {
  it("an id binds like a handle: buffer, aligned offset, size; freed, it serves the next request", () => {
    const { device } = mockGpu();
    // (fixed segment sizes: blocks share a buffer from the first request,
    // where the default gives a growing pool's misses buffers of their own)
    const a = new GpuCachingAllocator(device, { segmentGrowthFraction: 0 });
    const x = a.allocateId(1000);
    const y = a.allocateId(1000);
    assert.ok(Number.isSafeInteger(x) && x >= 0 && x < 2 ** 30);
    assert.equal(a.bufferOf(x), a.bufferOf(y));
    assert.equal(a.offsetOf(x) % 256, 0);
    assert.equal(a.offsetOf(y) - a.offsetOf(x), 1024);
    assert.equal(a.sizeOf(x), 1000);
    assert.equal(a.liveIdCount, 2);
    assert.equal(a.stats().allocatedBytes.all.current, 2048);
    const offset = a.offsetOf(x);
    a.freeById(x);
    assert.equal(a.liveIdCount, 1);
    const z = a.allocateId(900);
    assert.notEqual(z, x);
    assert.equal(a.offsetOf(z), offset); // queue-order: reused at once
    a.freeById(y);
    a.freeById(z);
    assert.equal(a.stats().allocatedBytes.all.current, 0);
    a.validate();
  });

  it("refuses what cannot be an id with InvalidArgumentError, changing nothing", () => {
    const { device } = mockGpu();
    const a = new GpuCachingAllocator(device);
    const live = a.allocateId(512);
    let calls = 0;
    const hostile: unknown[] = [
      NaN,
      -1,
      -0.5,
      1.5,
      2 ** 30,
      2 ** 31,
      2 ** 32 + live,
      -(2 ** 31),
      Infinity,
      -Infinity,
      String(live),
      `${live}`,
      null,
      undefined,
      true,
      BigInt(live),
      { valueOf: () => (calls++, live) },
      [live],
      Symbol("id"),
    ];
    for (const id of hostile) {
      assertRefused(a, id, InvalidArgumentError, InvalidArgumentError);
    }
    assert.equal(calls, 0, "an object's valueOf is never called");
    // the refusal states the value and the limit
    try {
      a.freeById(2 ** 31);
      assert.fail("not refused");
    } catch (e) {
      assert.ok(e instanceof InvalidArgumentError);
      assert.match(e.message, /2147483648/);
      assert.match(e.message, /0 to 1073741823/);
    }
    assert.equal(a.liveIdCount, 1);
    assert.equal(a.sizeOf(live), 512);
    a.freeById(live);
    a.validate();
  });

  it("refuses a freed id (double free), one never given, and another allocator's", () => {
    const { device } = mockGpu();
    const a = new GpuCachingAllocator(device);
    const b = new GpuCachingAllocator(device);
    const x = a.allocateId(4096);
    const y = b.allocateId(4096);
    assert.notEqual(x, y, "two allocators start at other generations");
    a.freeById(x);
    assertRefused(a, x, UseAfterFreeError, DoubleFreeError);
    // b's live id, and never-given ids, are not a's
    assertRefused(a, y, UseAfterFreeError, DoubleFreeError);
    assertRefused(a, 12345, UseAfterFreeError, DoubleFreeError);
    assertRefused(a, 2 ** 30 - 1, UseAfterFreeError, DoubleFreeError);
    assert.equal(b.sizeOf(y), 4096, "b's id is untouched");
    assert.equal(b.liveIdCount, 1);
    // a freed id stays refused, and is never given again, over many reuses
    // of its slot (a window of 40 ids live, so slots cycle)
    const window: number[] = [];
    const given = new Set<number>();
    for (let i = 0; i < 5000; i++) {
      const id = a.allocateId(256 + (i % 9));
      assert.notEqual(id, x);
      assert.ok(!given.has(id), `id ${id} given twice`);
      given.add(id);
      window.push(id);
      if (window.length > 40) a.freeById(window.shift()!);
      if (i % 500 === 0) {
        assertRefused(a, x, UseAfterFreeError, DoubleFreeError);
      }
    }
    assertRefused(a, x, UseAfterFreeError, DoubleFreeError);
    for (const id of window) a.freeById(id);
    b.freeById(y);
    assert.equal(a.stats().allocatedBytes.all.current, 0);
    a.validate();
    b.validate();
  });

  it("a full table refuses allocateId before any change; -1 never matches a free slot", () => {
    const { device } = mockGpu();
    // (fixed segment sizes: blocks share a buffer from the first request,
    // where the default gives a growing pool's misses buffers of their own)
    const a = new GpuCachingAllocator(device, { segmentGrowthFraction: 0 });
    const ids: number[] = [];
    for (let i = 0; i < 2 ** 18; i++) ids.push(a.allocateId(0));
    const before = a.stats().allocation.all.allocated;
    try {
      a.allocateId(8);
      assert.fail("not refused");
    } catch (e) {
      assert.ok(e instanceof InvalidArgumentError);
      assert.match(e.message, /262144 ids are live/);
    }
    assert.equal(a.stats().allocation.all.allocated, before);
    assert.equal(a.liveIdCount, 2 ** 18);
    // the last slot (2^18 - 1, which is what -1 & the slot mask gives) free
    a.freeById(ids.pop()!);
    assertRefused(a, -1, InvalidArgumentError, InvalidArgumentError);
    for (const id of ids) a.freeById(id);
    assert.equal(a.liveIdCount, 0);
    assert.equal(a.stats().allocatedBytes.all.current, 0);
  });

  it("a handle's block is not an id, and ids and handles share the pool", () => {
    const { device } = mockGpu();
    // (fixed segment sizes: blocks share a buffer from the first request,
    // where the default gives a growing pool's misses buffers of their own)
    const a = new GpuCachingAllocator(device, { segmentGrowthFraction: 0 });
    const h = a.allocate(1000);
    const id = a.allocateId(1000);
    assert.notEqual(`${a.offsetOf(id)}`, `${h.offset}`);
    h.release();
    a.freeById(id);
    assert.equal(a.stats().allocatedBytes.all.current, 0);
    assert.equal(a.stats().allocation.all.allocated, 2);
    a.validate();
  });

  it("ids outlive emptyCache; a freed id stays refused after it", () => {
    const { device, live } = mockGpu();
    const a = new GpuCachingAllocator(device);
    const keep = a.allocateId(3 << 20);
    const gone = a.allocateId(1000);
    const buffer = a.bufferOf(keep), offset = a.offsetOf(keep);
    a.freeById(gone);
    a.emptyCache(); // gives back the small segment, keeps the live one
    assert.equal(a.bufferOf(keep), buffer);
    assert.equal(a.offsetOf(keep), offset);
    assertRefused(a, gone, UseAfterFreeError, DoubleFreeError);
    a.freeById(keep);
    a.emptyCache();
    assert.equal(live.size, 0);
    assertRefused(a, keep, UseAfterFreeError, DoubleFreeError);
  });

  it("after device loss: reads throw DeviceLostError, frees of given ids do nothing, allocateId throws", () => {
    const { device } = mockGpu();
    const a = new GpuCachingAllocator(device);
    const x = a.allocateId(1000);
    const y = a.allocateId(1000);
    a.freeById(y);
    device.destroy();
    assert.throws(() => a.allocateId(8), DeviceLostError);
    assertRefused(a, x, DeviceLostError, null); // live: freed, silently
    assertRefused(a, x, DeviceLostError, null); // and again: still silent
    assertRefused(a, y, DeviceLostError, null); // freed before the loss
    // what can never be an id is still refused
    assertRefused(a, NaN, InvalidArgumentError, InvalidArgumentError);
    assertRefused(a, -1, InvalidArgumentError, InvalidArgumentError);
    assert.equal(a.liveIdCount, 0);
  });

  it("after-fence reuse: a freed id's range comes back only after the queue's fence", async () => {
    const gpu = mockGpu();
    const a = new GpuCachingAllocator(gpu.device, { reuse: "after-fence" });
    const x = a.allocateId(4096);
    const place = `${a.bufferOf(x).label}@${a.offsetOf(x)}`;
    gpu.device.queue.submit([]);
    a.freeById(x);
    assertRefused(a, x, UseAfterFreeError, DoubleFreeError);
    assert.equal(a.pendingFreeCount, 1);
    const y = a.allocateId(4096);
    assert.notEqual(`${a.bufferOf(y).label}@${a.offsetOf(y)}`, place);
    gpu.complete();
    await a.synchronize();
    assert.equal(a.pendingFreeCount, 0);
    const z = a.allocateId(4096);
    assert.equal(`${a.bufferOf(z).label}@${a.offsetOf(z)}`, place);
    a.freeById(y);
    a.freeById(z);
    await a.synchronize();
    assert.equal(a.stats().allocatedBytes.all.current, 0);
    a.validate();
  });

  it("refuses bad sizes before taking a slot; -0 is 0", () => {
    const { device } = mockGpu();
    const a = new GpuCachingAllocator(device);
    for (const bad of [-1, NaN, 1.5, "8", 2 ** 53, 512 * 2 ** 20]) {
      assert.throws(() => a.allocateId(bad as number), InvalidArgumentError);
    }
    assert.equal(a.liveIdCount, 0);
    assert.equal(a.stats().allocation.all.allocated, 0);
    const x = a.allocateId(0); // an ordinary 0-byte allocation
    assert.equal(a.sizeOf(x), 0);
    a.freeById(x);
    const z = a.allocateId(-0);
    assert.ok(Object.is(a.sizeOf(z), 0), "-0 comes back as 0");
    a.freeById(z);
  });

  it("a leak detector watches handles, not ids: the id path still pools", () => {
    const { device } = mockGpu();
    const watched: unknown[] = [];
    const a = new GpuCachingAllocator(device, {
      leakDetector: {
        watch: (h: unknown) => void watched.push(h),
        forget() {},
      } as never,
    });
    const x = a.allocateId(1000);
    assert.equal(watched.length, 0);
    a.freeById(x);
    assert.equal(a.stats().allocatedBytes.all.current, 0);
  });

  it(
    "makes no garbage per operation once warm",
    { skip: gc === undefined },
    () => {
      const { device } = mockGpu();
      const a = new GpuCachingAllocator(device);
      const sizes = [256, 4096, 65536, 3 << 20];
      let sink = 0;
      const run = (n: number) => {
        for (let i = 0; i < n; i++) {
          const id = a.allocateId(sizes[i & 3]);
          sink += a.offsetOf(id) + (a.bufferOf(id) === null ? 1 : 0);
          a.freeById(id);
        }
      };
      run(20_000); // warm: slots, ring, pools
      const deltas: number[] = [];
      for (let k = 0; k < 5; k++) {
        gc!();
        const h0 = Deno.memoryUsage().heapUsed;
        run(100_000);
        deltas.push(Deno.memoryUsage().heapUsed - h0);
      }
      deltas.sort((x, y) => x - y);
      // 100,000 pairs: under one byte each (a handle is ~50)
      assert.ok(deltas[2] < 100_000, `heap grew ${deltas.join(", ")} bytes`);
      assert.ok(sink >= 0);
    },
  );

  it("model: ids and handles given the same operations get the same places", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              op: fc.constant("alloc" as const),
              size: fc.oneof(
                fc.integer({ min: 0, max: 70_000 }),
                fc.integer({ min: 250_000, max: 12 << 20 }),
              ),
            }),
            fc.record({ op: fc.constant("free" as const), at: fc.nat() }),
            fc.constant({ op: "empty" as const }),
          ),
          { maxLength: 80 },
        ),
        fc.boolean(),
        (ops, afterFence) => {
          const reuse = afterFence ? "after-fence" : "queue-order";
          const gh = mockGpu(), gi = mockGpu();
          const byHandle = new GpuCachingAllocator(gh.device, { reuse });
          const byId = new GpuCachingAllocator(gi.device, { reuse });
          // buffers numbered in the order each side first saw them
          const number = (seen: Map<GPUBuffer, number>, b: GPUBuffer) => {
            if (!seen.has(b)) seen.set(b, seen.size);
            return seen.get(b)!;
          };
          const seenH = new Map<GPUBuffer, number>();
          const seenI = new Map<GPUBuffer, number>();
          const handles: GpuAllocation[] = [];
          const ids: number[] = [];
          for (const o of ops) {
            if (o.op === "alloc") {
              const h = byHandle.allocate(o.size);
              const id = byId.allocateId(o.size);
              handles.push(h);
              ids.push(id);
              assert.equal(
                `${number(seenI, byId.bufferOf(id))}@${byId.offsetOf(id)}`,
                `${number(seenH, h.buffer)}@${h.offset}`,
              );
              assert.equal(byId.sizeOf(id), h.size);
            } else if (o.op === "free" && handles.length > 0) {
              const k = o.at % handles.length;
              handles.splice(k, 1)[0].release();
              const id = ids.splice(k, 1)[0];
              byId.freeById(id);
              assert.throws(() => byId.freeById(id), DoubleFreeError);
            } else if (o.op === "empty") {
              byHandle.emptyCache();
              byId.emptyCache();
            }
            assert.equal(byId.liveIdCount, ids.length);
            assert.deepEqual(byId.stats(), byHandle.stats());
            byId.validate(); // every live id holds its block's place
          }
          for (const h of handles) h.release();
          for (const id of ids) byId.freeById(id);
          assert.deepEqual(byId.stats(), byHandle.stats());
          byId.validate();
          byHandle.validate();
        },
      ),
      { numRuns: modelRuns(300) },
    );
  });
});
