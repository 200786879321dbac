// GpuCachingAllocator in its device's group from the outside (review 7):
// every sequence of three of emptyCache(), the caching allocator's own
// emptyCache(), endStep(), synchronize(), group.delete(), resetPeak() and
// device loss, each followed by a miss of another pool, over live ids,
// handles and after-fence frees waiting for the queue: the members validate,
// live ids read what they read when given, the counts agree, and everything
// goes back (or, after loss, cleanup never throws).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { _Usage as U } from "./_flags.ts";
import { mockGpu } from "./_test_mock_device.ts";

const KiB = 1024, MiB = 2 ** 20;
const STEPS = [
  "empty",
  "emptyCaching",
  "step",
  "sync",
  "delete",
  "resetPeak",
  "lose",
] as const;
type Step = typeof STEPS[number];

describe("GpuCachingAllocator operations in odd orders (review 7)", () => {
  it("GpuCachingAllocator: every order of three cache, step, wait, leave, reset and loss operations between misses keeps ids, handles and counts exact", async () => {
    let runs = 0;
    for (const a of STEPS) {
      for (const b of STEPS) {
        for (const c of STEPS) {
          await run([a, b, c]);
          runs++;
        }
      }
    }
    assert.equal(runs, STEPS.length ** 3);
  });
});

async function run(order: readonly Step[]): Promise<void> {
  const gpu = mockGpu();
  const group = GpuCachingAllocator.deviceGroup(gpu.device);
  const storage = new GpuCachingAllocator(gpu.device);
  const uploads = new GpuCachingAllocator(gpu.device, {
    source: { usage: U.COPY_SRC | U.COPY_DST },
    reuse: "after-fence",
  });
  const all = [storage, uploads];
  const ids: [GpuCachingAllocator, number, GPUBuffer, number][] = [];
  const giveId = (x: GpuCachingAllocator, n: number) => {
    const id = x.allocateId(n);
    ids.push([x, id, x.bufferOf(id), x.offsetOf(id)]);
  };
  // a peak, a low, then live ids and a handle; uploads' frees wait
  const peak = [storage.allocateId(MiB), storage.allocateId(MiB)];
  for (const id of peak) storage.freeById(id);
  storage.emptyCache();
  giveId(storage, 64 * KiB);
  const handle = storage.allocate(3000);
  giveId(uploads, 2 * MiB);
  gpu.device.queue.submit([]);
  uploads.freeById(uploads.allocateId(MiB)); // waits for the queue
  let lost = false;
  for (const [i, step] of order.entries()) {
    const target = all[i % 2];
    switch (step) {
      case "empty":
        target.emptyCache();
        break;
      case "emptyCaching":
        target.caching.emptyCache();
        break;
      case "step":
        group.endStep();
        break;
      case "sync":
        gpu.complete();
        if (!lost) await target.synchronize();
        break;
      case "delete":
        group.delete(target);
        break;
      case "resetPeak":
        group.resetPeak();
        break;
      case "lose":
        gpu.device.destroy();
        lost = true;
        break;
    }
    // a miss of the other pool
    const other = all[(i + 1) % 2];
    if (lost) {
      assert.throws(() => other.allocateId(512 * KiB), DeviceLostError);
    } else {
      giveId(other, 512 * KiB + i * 4096);
    }
    for (const x of all) x.validate();
    let held = 0, total = 0;
    for (const x of all) {
      total += x.caching.reservedBytes;
      if (group.has(x)) held += x.caching.reservedBytes;
    }
    assert.equal(group.heldBytes, held, order.join(","));
    if (!lost) {
      let live = 0;
      for (const buffer of gpu.live) live += buffer.size;
      assert.equal(live, total, order.join(","));
      for (const [x, id, buffer, offset] of ids) {
        assert.equal(x.bufferOf(id), buffer);
        assert.equal(x.offsetOf(id), offset);
        assert.ok(
          gpu.live.has(buffer as never),
          `${order}: id on a destroyed buffer`,
        );
      }
      assert.ok(gpu.live.has(handle.buffer as never));
    }
  }
  handle.release();
  for (const [x, id] of ids) x.freeById(id);
  for (const x of all) assert.equal(x.liveIdCount, 0);
  if (lost) return;
  gpu.complete();
  for (const x of all) {
    await x.synchronize();
    x.emptyCache();
    assert.equal(x.caching.allocatedBytes, 0, order.join(","));
  }
  assert.equal(gpu.live.size, 0, order.join(","));
}
