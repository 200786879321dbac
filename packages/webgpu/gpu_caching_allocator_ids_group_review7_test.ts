// GpuCachingAllocator's id path inside its device's group, from the outside
// (review 7): ids and handles side by side in several usage pools of one
// device's group, with after-fence members, step marks, emptyCache() of a
// member or of its caching allocator, a member deleted from the group, a
// buffer whose destroy() re-enters the allocators (frees an id, allocates,
// empties a cache, marks a step, loses the device), and device loss at any
// point. After every operation: every member validates, each live id reads
// what it read when given, live ranges are disjoint on live buffers, stale
// and foreign ids are refused without a change, and the counts agree (the
// group's held bytes, the members' reserved bytes, the device's live
// buffers). Everything goes back at the end.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import type { CachingGroup } from "@allot/caching";
import {
  AllotError,
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
  UseAfterFreeError,
} from "@allot/core";
import { assertDisjoint, modelRuns } from "../core/_test_faults.ts";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { _Usage as U } from "./_flags.ts";
import {
  type MockGpu,
  type MockGpuBuffer,
  mockGpuWithUniforms,
} from "./_test_mock_device.ts";

const KiB = 1024, MiB = 2 ** 20;
const USAGES = [
  undefined, // storage (the default usage)
  U.UNIFORM | U.COPY_DST,
  U.COPY_SRC | U.COPY_DST,
  U.VERTEX | U.COPY_DST,
] as const;

/** What a buffer's destroy() does once (armed by the model). */
type Reentry =
  | "none"
  | "freeId"
  | "allocId"
  | "empty"
  | "step"
  | "lose";

interface Gpu extends MockGpu {
  /** Runs once at the next buffer destroy(), then disarms. */
  onDestroy: (() => void) | undefined;
}

/** A mock device with uniform limits whose buffers' destroy() can re-enter. */
function gpuWithHooks(): Gpu {
  const gpu = mockGpuWithUniforms() as Gpu;
  gpu.onDestroy = undefined;
  const create = gpu.device.createBuffer.bind(gpu.device);
  (gpu.device as unknown as { createBuffer: unknown }).createBuffer = (
    d: GPUBufferDescriptor,
  ) => {
    const buffer = create(d) as unknown as MockGpuBuffer;
    const destroy = buffer.destroy;
    buffer.destroy = function () {
      destroy.call(this);
      const hook = gpu.onDestroy;
      gpu.onDestroy = undefined;
      hook?.();
    };
    return buffer;
  };
  return gpu;
}

/** The error of an operation that lost the device from inside. */
function assertLostError(error: unknown): void {
  assert.ok(error instanceof DeviceLostError, String(error));
}

function liveBytes(gpu: MockGpu): number {
  let n = 0;
  for (const b of gpu.live) n += b.size;
  return n;
}

/** A live id and what it read when given. */
interface IdRecord {
  m: number;
  id: number;
  buffer: GPUBuffer;
  offset: number;
  size: number;
}

describe("GpuCachingAllocator ids in the device group (review 7)", () => {
  it("model: ids and handles of several members, after-fence, re-entrant destroy(), device loss at any point", async () => {
    type Op =
      | { op: "alloc"; m: number; size: number }
      | { op: "allocId"; m: number; size: number }
      | { op: "release"; i: number }
      | { op: "freeId"; i: number }
      | { op: "staleId"; i: number }
      | { op: "foreignId"; i: number; m: number }
      | { op: "freeAll"; m: number }
      | { op: "empty"; m: number; caching: boolean }
      | { op: "step" }
      | { op: "delete"; m: number }
      | { op: "settle" }
      | { op: "arm"; what: Reentry; m: number; size: number }
      | { op: "lose" };
    const m = fc.nat(USAGES.length - 1);
    const size = fc.oneof(
      fc.integer({ min: 0, max: 300 }),
      fc.integer({ min: 1, max: 64 * KiB }),
      fc.integer({ min: 1, max: 6 * MiB }),
    );
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 4,
        arbitrary: fc.record({ op: fc.constant("alloc"), m, size }),
      },
      {
        weight: 5,
        arbitrary: fc.record({ op: fc.constant("allocId"), m, size }),
      },
      {
        weight: 3,
        arbitrary: fc.record({ op: fc.constant("release"), i: fc.nat() }),
      },
      {
        weight: 4,
        arbitrary: fc.record({ op: fc.constant("freeId"), i: fc.nat() }),
      },
      {
        weight: 1,
        arbitrary: fc.record({ op: fc.constant("staleId"), i: fc.nat() }),
      },
      {
        weight: 1,
        arbitrary: fc.record({ op: fc.constant("foreignId"), i: fc.nat(), m }),
      },
      { weight: 2, arbitrary: fc.record({ op: fc.constant("freeAll"), m }) },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("empty"),
          m,
          caching: fc.boolean(),
        }),
      },
      { weight: 1, arbitrary: fc.constant({ op: "step" as const }) },
      { weight: 1, arbitrary: fc.record({ op: fc.constant("delete"), m }) },
      { weight: 1, arbitrary: fc.constant({ op: "settle" as const }) },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("arm"),
          what: fc.constantFrom<Reentry>(
            "freeId",
            "allocId",
            "empty",
            "step",
            "lose",
          ),
          m,
          size,
        }),
      },
      { weight: 1, arbitrary: fc.constant({ op: "lose" as const }) },
    );
    let givenBack = 0, lostRuns = 0, reentered = 0, ooms = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
        // a budget per member: misses past it are refused (out of memory)
        fc.option(fc.constantFrom(6 * MiB, 12 * MiB)),
        fc.array(op, { maxLength: 100, size: "max" }),
        async (afterFence, capacity, ops) => {
          const gpu = gpuWithHooks();
          const group: CachingGroup = GpuCachingAllocator.deviceGroup(
            gpu.device,
          );
          const all = USAGES.map((usage, i) =>
            new GpuCachingAllocator(gpu.device, {
              source: {
                ...(usage === undefined ? {} : { usage }),
                capacityBytes: capacity ?? Infinity,
              },
              reuse: afterFence[i] ? "after-fence" : "queue-order",
            })
          );
          const handles: GpuAllocation[] = [];
          const owner = new Map<GpuAllocation, number>();
          const ids: IdRecord[] = [];
          const stale: { m: number; id: number }[] = [];
          let lost = false;
          const unchanged = (fn: () => void, error: unknown) => {
            const before = all.map((a) => [
              a.liveIdCount,
              a.caching.allocatedBytes,
              a.caching.reservedBytes,
            ]);
            assert.throws(fn, error as never);
            assert.deepEqual(
              all.map((a) => [
                a.liveIdCount,
                a.caching.allocatedBytes,
                a.caching.reservedBytes,
              ]),
              before,
            );
          };
          /** Gives an id (or refuses on a lost device). */
          const allocId = (mi: number, n: number) => {
            const a = all[mi];
            if (lost) {
              assert.throws(() => a.allocateId(n), DeviceLostError);
              return;
            }
            let id: number;
            try {
              id = a.allocateId(n);
            } catch (error) {
              if (isOom(error, a)) return;
              // the device was lost from inside (a re-entrant destroy())
              assertLostError(error);
              assert.ok(a.lost);
              lost = true;
              return;
            }
            assert.ok(Number.isInteger(id) && id >= 0 && id < 2 ** 30);
            if (a.lost) {
              // lost from inside after the buffer was made: reads refuse
              lost = true;
              assert.throws(() => a.bufferOf(id), DeviceLostError);
              ids.push({ m: mi, id, buffer: null!, offset: 0, size: n });
              return;
            }
            const r: IdRecord = {
              m: mi,
              id,
              buffer: a.bufferOf(id),
              offset: a.offsetOf(id),
              size: a.sizeOf(id),
            };
            assert.equal(r.size, n);
            assert.equal(r.offset % a.source.alignment, 0);
            ids.push(r);
          };
          /** An out-of-memory refusal (the budget), the device alive. */
          const isOom = (error: unknown, a: GpuCachingAllocator) => {
            if (!(error instanceof OutOfMemoryError) || a.lost) return false;
            assert.ok(capacity !== null, String(error));
            ooms++;
            return true;
          };
          const freeId = (r: IdRecord) => {
            all[r.m].freeById(r.id);
            stale.push({ m: r.m, id: r.id });
          };
          const check = () => {
            let inGroup = 0, total = 0;
            for (const a of all) {
              a.validate();
              total += a.caching.reservedBytes;
              if (group.has(a)) inGroup += a.caching.reservedBytes;
            }
            assert.equal(group.heldBytes, inGroup);
            let liveIds = 0;
            for (const [i, a] of all.entries()) {
              liveIds = ids.filter((r) => r.m === i).length;
              assert.equal(a.liveIdCount, liveIds);
            }
            if (lost) {
              for (const r of ids) {
                assert.throws(() => all[r.m].bufferOf(r.id), DeviceLostError);
              }
              return;
            }
            assert.equal(liveBytes(gpu), total);
            for (const a of all) {
              assert.equal(a.source.reservedBytes, a.caching.reservedBytes);
            }
            const ranges: (readonly [unknown, number, number])[] = [];
            for (const h of handles) {
              assert.equal(h.released, false);
              const b = h.buffer as unknown as MockGpuBuffer;
              assert.equal(b.destroyed, false, `${h} on a destroyed buffer`);
              assert.ok(h.offset + h.size <= b.size);
              if (h.size > 0) {
                ranges.push([h.buffer, h.offset, h.offset + h.size]);
              }
            }
            for (const r of ids) {
              const a = all[r.m];
              assert.equal(a.bufferOf(r.id), r.buffer);
              assert.equal(a.offsetOf(r.id), r.offset);
              assert.equal(a.sizeOf(r.id), r.size);
              const b = r.buffer as unknown as MockGpuBuffer;
              assert.equal(
                b.destroyed,
                false,
                `id ${r.id} on a destroyed buffer`,
              );
              assert.ok(r.offset + r.size <= b.size);
              if (r.size > 0) {
                ranges.push([r.buffer, r.offset, r.offset + r.size]);
              }
            }
            assertDisjoint(ranges);
          };
          // storage's misses cycle and the copies pool caches a segment it
          // no longer uses: the group's give-backs are reachable
          const prefix: Op[] = [
            { op: "allocId", m: 0, size: MiB },
            { op: "alloc", m: 0, size: MiB },
            { op: "freeAll", m: 0 },
            { op: "settle" },
            { op: "empty", m: 0, caching: false },
            { op: "allocId", m: 0, size: 64 * KiB },
            { op: "allocId", m: 2, size: 2 * MiB },
            { op: "freeAll", m: 2 },
            { op: "settle" },
          ];
          for (const o of [...prefix, ...ops]) {
            switch (o.op) {
              case "alloc": {
                if (lost) {
                  assert.throws(
                    () => all[o.m].allocate(o.size),
                    DeviceLostError,
                  );
                  break;
                }
                let h: GpuAllocation;
                try {
                  h = all[o.m].allocate(o.size);
                } catch (error) {
                  if (isOom(error, all[o.m])) break;
                  assertLostError(error);
                  lost = true;
                  break;
                }
                assert.equal(h.size, o.size);
                if (all[o.m].lost) lost = true;
                else {
                  owner.set(h, o.m);
                  handles.push(h);
                }
                break;
              }
              case "allocId":
                allocId(o.m, o.size);
                break;
              case "release": {
                if (handles.length === 0) break;
                const [h] = handles.splice(o.i % handles.length, 1);
                h.release();
                assert.throws(() => h.buffer, AllotError);
                break;
              }
              case "freeId": {
                if (ids.length === 0) break;
                freeId(ids.splice(o.i % ids.length, 1)[0]);
                break;
              }
              case "staleId": {
                if (stale.length === 0) break;
                const s = stale[o.i % stale.length];
                const a = all[s.m];
                if (lost) {
                  // cleanup loops never throw; reads refuse
                  a.freeById(s.id);
                  assert.throws(() => a.sizeOf(s.id), DeviceLostError);
                  break;
                }
                unchanged(() => a.freeById(s.id), DoubleFreeError);
                unchanged(() => a.bufferOf(s.id), UseAfterFreeError);
                unchanged(() => a.offsetOf(s.id), UseAfterFreeError);
                break;
              }
              case "foreignId": {
                if (ids.length === 0 || lost) break;
                const r = ids[o.i % ids.length];
                if (r.m === o.m) break;
                unchanged(() => all[o.m].freeById(r.id), DoubleFreeError);
                unchanged(() => all[o.m].sizeOf(r.id), UseAfterFreeError);
                break;
              }
              case "freeAll":
                for (let i = handles.length - 1; i >= 0; i--) {
                  if (owner.get(handles[i]) === o.m) {
                    handles.splice(i, 1)[0].release();
                  }
                }
                for (let i = ids.length - 1; i >= 0; i--) {
                  if (ids[i].m === o.m) freeId(ids.splice(i, 1)[0]);
                }
                break;
              case "empty":
                if (o.caching) all[o.m].caching.emptyCache();
                else all[o.m].emptyCache();
                break;
              case "step":
                group.endStep();
                break;
              case "delete":
                group.delete(all[o.m]);
                assert.equal(group.has(all[o.m]), false);
                assert.equal(group.has(all[o.m].caching), false);
                break;
              case "settle":
                gpu.complete();
                if (!lost) {
                  await Promise.all(all.map((a) => a.synchronize()));
                  for (const a of all) assert.equal(a.pendingFreeCount, 0);
                }
                break;
              case "arm": {
                const target = all[o.m];
                gpu.onDestroy = () => {
                  reentered++;
                  switch (o.what) {
                    case "freeId": {
                      const at = ids.findIndex((r) => r.m === o.m);
                      if (at >= 0) freeId(ids.splice(at, 1)[0]);
                      break;
                    }
                    case "allocId":
                      allocId(o.m, o.size);
                      break;
                    case "empty":
                      target.emptyCache();
                      break;
                    case "step":
                      group.endStep();
                      break;
                    case "lose":
                      gpu.device.destroy();
                      lost = true;
                      break;
                  }
                };
                break;
              }
              case "lose":
                gpu.device.destroy();
                lost = true;
                break;
            }
            // (a submit: after-fence frees of this step wait for the queue)
            gpu.device.queue.submit([]);
            check();
          }
          gpu.onDestroy = undefined;
          if (group.givenBackSegments > 0) givenBack++;
          if (lost) lostRuns++;
          // everything goes back
          for (const h of handles) h.release();
          for (const r of ids) freeId(r);
          for (const a of all) {
            assert.equal(a.liveIdCount, 0);
            a.validate();
          }
          if (lost) {
            for (const s of stale) all[s.m].freeById(s.id); // never throws
            return;
          }
          gpu.complete();
          await Promise.all(all.map((a) => a.synchronize()));
          for (const a of all) {
            a.emptyCache();
            assert.equal(a.caching.allocatedBytes, 0);
            assert.equal(a.caching.reservedBytes, 0);
          }
          assert.equal(gpu.live.size, 0);
          assert.equal(group.heldBytes, 0);
        },
      ),
      { numRuns: modelRuns(400) },
    );
    // (the runs reached the group's give-backs, losses and re-entries)
    assert.ok(givenBack > 0 && lostRuns > 0 && reentered > 0 && ooms > 0);
  });

  it("a device lost from inside a miss (a buffer's destroy() during the group's give-back) throws DeviceLostError, not a SegmentSourceError", async () => {
    for (const path of ["allocate", "allocateId", "allocateAsync"] as const) {
      const gpu = gpuWithHooks();
      const group = GpuCachingAllocator.deviceGroup(gpu.device);
      const storage = new GpuCachingAllocator(gpu.device);
      const copies = new GpuCachingAllocator(gpu.device, {
        source: { usage: U.COPY_SRC | U.COPY_DST },
      });
      // storage's misses cycle (a peak, then a miss at a low) ...
      const peak = [storage.allocateId(MiB), storage.allocate(MiB)] as const;
      storage.freeById(peak[0]);
      peak[1].release();
      storage.emptyCache();
      const small = storage.allocateId(64 * KiB);
      // ... and the copies pool caches a segment it no longer uses
      copies.freeById(copies.allocateId(2 * MiB));
      const given = group.givenBackSegments;
      // the copies buffer's destroy() loses the device
      gpu.onDestroy = () => gpu.device.destroy();
      let error: unknown;
      try {
        if (path === "allocate") storage.allocate(2 * MiB);
        else if (path === "allocateId") storage.allocateId(2 * MiB);
        else await storage.allocateAsync(2 * MiB);
      } catch (e) {
        error = e;
      }
      assert.equal(group.givenBackSegments, given + 1, "a give-back ran");
      assert.ok(storage.lost);
      assert.ok(
        error instanceof DeviceLostError,
        `${path}: ${(error as Error)?.constructor?.name}: ${error}`,
      );
      // nothing else changed, and cleanup never throws
      assert.equal(storage.liveIdCount, 1);
      storage.validate();
      copies.validate();
      storage.freeById(small);
      assert.equal(storage.liveIdCount, 0);
    }
  });

  it("a device lost from inside a miss that empties the cache for a full budget throws DeviceLostError, not out of memory", async () => {
    for (const path of ["allocate", "allocateId", "allocateAsync"] as const) {
      const gpu = gpuWithHooks();
      const a = new GpuCachingAllocator(gpu.device, {
        group: null,
        source: { capacityBytes: 4 * MiB },
      });
      const kept = a.allocateId(512 * KiB);
      a.freeById(a.allocateId(3 * MiB)); // cached
      gpu.onDestroy = () => gpu.device.destroy();
      let error: unknown;
      try {
        if (path === "allocate") a.allocate(3.75 * MiB);
        else if (path === "allocateId") a.allocateId(3.75 * MiB);
        else await a.allocateAsync(3.75 * MiB);
      } catch (e) {
        error = e;
      }
      assert.ok(a.lost, "the cached buffer was destroyed for the request");
      assert.ok(
        error instanceof DeviceLostError,
        `${path}: ${(error as Error)?.constructor?.name}: ${error}`,
      );
      assert.equal(a.liveIdCount, 1);
      a.validate();
      a.freeById(kept);
    }
  });

  it("hostile ids on every member of a group: refused with typed errors, nothing changes, no valueOf runs", () => {
    const gpu = gpuWithHooks();
    const all = USAGES.map((usage) =>
      new GpuCachingAllocator(
        gpu.device,
        usage === undefined ? {} : {
          source: { usage },
        },
      )
    );
    const live = all.map((a) => a.allocateId(1000));
    let ran = 0;
    const lying = {
      valueOf() {
        ran++;
        return live[0];
      },
      [Symbol.toPrimitive]() {
        ran++;
        return live[0];
      },
      toString() {
        ran++;
        return String(live[0]);
      },
    };
    const bad: unknown[] = [
      NaN,
      -1,
      -Infinity,
      Infinity,
      1.5,
      live[0] + 0.5,
      2 ** 30,
      2 ** 31,
      2 ** 32 + live[0],
      2 ** 53,
      -(2 ** 53),
      Number.MAX_VALUE,
      "0",
      String(live[0]),
      null,
      undefined,
      true,
      {},
      [live[0]],
      lying,
      BigInt(live[0]),
      Symbol("id"),
      new Number(live[0]),
    ];
    for (const a of all) {
      for (const value of bad) {
        const before = [a.liveIdCount, a.caching.allocatedBytes];
        for (
          const fn of [
            () => a.freeById(value as number),
            () => a.bufferOf(value as number),
            () => a.offsetOf(value as number),
            () => a.sizeOf(value as number),
          ]
        ) {
          assert.throws(fn, InvalidArgumentError, String(typeof value));
        }
        assert.deepEqual([a.liveIdCount, a.caching.allocatedBytes], before);
        a.validate();
      }
    }
    assert.equal(ran, 0, "no valueOf / toPrimitive / toString ran");
    for (const [i, a] of all.entries()) {
      assert.equal(a.sizeOf(live[i]), 1000);
      a.freeById(live[i]);
      a.emptyCache();
    }
    assert.equal(gpu.live.size, 0);
  });
});

describe("GpuCachingAllocator ids: a device that re-enters at a miss (review 7)", () => {
  it("allocateId: a createBuffer() that fills the id table from inside a miss cannot make an id that aliases another slot", () => {
    const gpu = gpuWithHooks();
    const a = new GpuCachingAllocator(gpu.device, {
      group: null,
      segmentGrowthFraction: 0,
    });
    const ids: number[] = [];
    for (let i = 0; i < 2 ** 18 - 1; i++) ids.push(a.allocateId(0));
    // the device makes the next buffer only after taking the last free
    // slot through the allocator itself
    const create = gpu.device.createBuffer.bind(gpu.device);
    let entered = false;
    (gpu.device as unknown as { createBuffer: unknown }).createBuffer = (
      d: GPUBufferDescriptor,
    ) => {
      if (!entered) {
        entered = true;
        ids.push(a.allocateId(0));
      }
      return create(d);
    };
    const before = a.caching.allocatedBytes;
    let id: number | undefined;
    try {
      id = a.allocateId(4 * MiB); // a miss
    } catch (error) {
      // refused: the table filled inside the call; nothing is held for it
      assert.ok(error instanceof InvalidArgumentError, String(error));
      assert.match((error as Error).message, /262144 ids are live/);
    }
    assert.ok(entered);
    if (id !== undefined) {
      // given: it must be a live id that reads back and frees
      assert.equal(a.sizeOf(id), 4 * MiB);
      ids.push(id);
    } else {
      assert.equal(a.caching.allocatedBytes, before + 256);
    }
    assert.equal(a.liveIdCount, ids.length);
    assert.ok(a.liveIdCount <= 2 ** 18);
    a.validate();
    for (const x of ids) a.freeById(x);
    assert.equal(a.liveIdCount, 0);
    assert.equal(a.caching.allocatedBytes, 0);
    a.emptyCache();
    assert.equal(gpu.live.size, 0);
  });
});
