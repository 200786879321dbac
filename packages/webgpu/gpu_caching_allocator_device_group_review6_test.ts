// GpuCachingAllocator's device group from the outside (review 6): hostile
// `group` option values and `deviceGroup()` arguments, foreign and stale
// handles across the members of one device's group, allocators of two
// devices, a member deleted from the group then used, a lost device while
// the group holds segments of several members, a buffer whose destroy()
// re-enters another member, and a fast-check model of several usage pools
// in the device's group (live ranges disjoint and on live buffers, the
// group's held bytes equal to its members' reserved bytes and to the mock
// device's live buffers, everything returned at the end).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { CachingGroup } from "@allot/caching";
import { AllotError, InvalidArgumentError } from "@allot/core";
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

/** A mock device with uniform limits, and a `lost` the test resolves. */
function gpuWithLoss(): MockGpu & { lose(): Promise<void> } {
  const gpu = mockGpuWithUniforms();
  let resolve!: (info: { reason: string; message: string }) => void;
  const lost = new Promise<{ reason: string; message: string }>((r) => {
    resolve = r;
  });
  Object.defineProperty(gpu.device, "lost", { value: lost });
  return Object.assign(gpu, {
    async lose() {
      resolve({ reason: "unknown", message: "review6" });
      await lost;
      await new Promise((r) => setTimeout(r, 0));
    },
  });
}

function members(gpu: MockGpu, group?: CachingGroup | null) {
  return USAGES.map((usage) =>
    new GpuCachingAllocator(gpu.device, {
      ...(usage === undefined ? {} : { source: { usage } }),
      ...(group === undefined ? {} : { group }),
    })
  );
}

function reserved(a: GpuCachingAllocator): number {
  return a.memoryStats().reservedBytes.all.current;
}

function liveBytes(gpu: MockGpu): number {
  let n = 0;
  for (const b of gpu.live) n += b.size;
  return n;
}

/** The group's count, the members' and the device's agree. */
function assertHeld(
  gpu: MockGpu,
  group: CachingGroup,
  all: readonly GpuCachingAllocator[],
): void {
  let inGroup = 0, total = 0;
  for (const a of all) {
    a.validate();
    total += reserved(a);
    if (group.has(a)) inGroup += reserved(a);
  }
  assert.equal(group.heldBytes, inGroup);
  assert.equal(liveBytes(gpu), total);
}

function assertLive(live: readonly GpuAllocation[]): void {
  for (const a of live) {
    assert.equal(a.released, false);
    const buffer = a.buffer as unknown as MockGpuBuffer;
    assert.equal(buffer.destroyed, false, `${a} sits on a destroyed buffer`);
    assert.ok(a.offset + a.size <= buffer.size, `${a} past its buffer`);
  }
  assertDisjoint(
    live.filter((a) => a.size > 0).map((
      a,
    ) => [a.buffer, a.offset, a.offset + a.size] as const),
  );
}

describe("GpuCachingAllocator device group (review 6)", () => {
  it("GpuCachingAllocator: a hostile group option is refused and changes nothing", () => {
    const gpu = gpuWithLoss();
    const group = GpuCachingAllocator.deviceGroup(gpu.device);
    const bad: unknown[] = [
      "group",
      "",
      0,
      -0,
      NaN,
      -1,
      1.5,
      Infinity,
      true,
      false,
      {},
      [],
      [group],
      { size: 0, heldBytes: 0 },
      Object.create(CachingGroup.prototype),
      () => group,
      Symbol("group"),
      10n,
      new Proxy(group, {}),
    ];
    for (const value of bad) {
      assert.throws(
        () => new GpuCachingAllocator(gpu.device, { group: value as never }),
        AllotError,
        `group: ${String(value)}`,
      );
      assert.equal(group.size, 0);
      assert.equal(gpu.live.size, 0);
    }
    // a getter that throws: its error, nothing joined
    const boom = new Error("boom");
    assert.throws(
      () =>
        new GpuCachingAllocator(gpu.device, {
          get group(): CachingGroup {
            throw boom;
          },
        }),
      (e) => e === boom,
    );
    assert.equal(group.size, 0);
    // a key the allocator does not read
    for (const key of ["groups", "Group", "deviceGroup"]) {
      assert.throws(
        () => new GpuCachingAllocator(gpu.device, { [key]: group } as never),
        InvalidArgumentError,
      );
      assert.equal(group.size, 0);
    }
  });

  it("GpuCachingAllocator: a group getter is read once (a getter that changes between reads cannot split the allocator)", () => {
    const gpu = gpuWithLoss();
    const mine = new CachingGroup();
    let reads = 0;
    const pool = new GpuCachingAllocator(gpu.device, {
      get group() {
        return reads++ === 0 ? mine : null;
      },
    });
    assert.equal(reads, 1);
    assert.equal(pool.group, mine);
    assert.ok(mine.has(pool));
    assert.equal(GpuCachingAllocator.deviceGroup(gpu.device).size, 0);
    pool.allocate(4 * KiB).release();
    assert.equal(mine.heldBytes, reserved(pool));
    // undefined is absent: the device's group
    const other = new GpuCachingAllocator(gpu.device, { group: undefined });
    assert.equal(other.group, GpuCachingAllocator.deviceGroup(gpu.device));
  });

  it("GpuCachingAllocator.deviceGroup(): a hostile device is refused and makes no group", () => {
    const gpu = gpuWithLoss();
    for (
      const bad of [
        "mock",
        NaN,
        -0,
        [],
        { createBuffer() {} },
        { limits: {}, queue: null, createBuffer() {} },
      ]
    ) {
      assert.throws(
        () => GpuCachingAllocator.deviceGroup(bad as unknown as GPUDevice),
        InvalidArgumentError,
      );
    }
    // two devices, two groups; each device's allocators in its own
    const other = gpuWithLoss();
    const [a] = members(gpu), [b] = members(other);
    assert.notEqual(a.group, b.group);
    // another device's group, non-empty: refused, and nothing joined
    assert.throws(
      () => new GpuCachingAllocator(gpu.device, { group: b.group }),
      InvalidArgumentError,
    );
    assert.equal(b.group!.size, USAGES.length);
    assert.equal(gpu.live.size + other.live.size, 0);
  });

  it("GpuCachingAllocator: a device's own group refuses another device's allocators even while empty (else the device's own allocators were refused)", () => {
    const a = gpuWithLoss(), b = gpuWithLoss();
    const groupA = GpuCachingAllocator.deviceGroup(a.device);
    assert.throws(
      () => new GpuCachingAllocator(b.device, { group: groupA }),
      InvalidArgumentError,
    );
    assert.equal(groupA.size, 0);
    assert.equal(b.live.size, 0);
    // the device's own allocators still join it
    const own = new GpuCachingAllocator(a.device);
    assert.equal(own.group, groupA);
    assert.equal(groupA.size, 1);
    // a caller's group left empty still takes any device's (review 5)
    const mine = new CachingGroup();
    const first = new GpuCachingAllocator(a.device, { group: mine });
    mine.delete(first);
    assert.ok(
      new GpuCachingAllocator(b.device, { group: mine }).group === mine,
    );
  });

  it("GpuCachingAllocator: a block of one member freed through another is refused, and both stay exact", () => {
    const gpu = gpuWithLoss();
    const [storage, uniforms, copies] = members(gpu);
    const group = storage.group!;
    const block = storage.caching.allocate(4 * KiB);
    const u = uniforms.caching.allocate(64);
    for (const other of [uniforms, copies]) {
      assert.throws(() => other.caching.free(block), AllotError);
    }
    assert.throws(() => storage.caching.free(u), AllotError);
    assert.equal(block.released, false);
    assertHeld(gpu, group, [storage, uniforms, copies]);
    assert.equal(storage.caching.allocatedBytes, block.blockByteLength);
    block.release();
    u.release();
    // stale: a released block freed again, through its own and another
    assert.throws(() => storage.caching.free(block), AllotError);
    assert.throws(() => copies.caching.free(block), AllotError);
    for (const a of [storage, uniforms, copies]) a.emptyCache();
    assert.equal(gpu.live.size, 0);
    assert.equal(group.heldBytes, 0);
  });

  it("GpuCachingAllocator: a member deleted from its device's group still works alone; the group no longer counts it", () => {
    const gpu = gpuWithLoss();
    const all = members(gpu);
    const [storage, uniforms] = all;
    const group = storage.group!;
    const s = storage.allocate(MiB);
    uniforms.allocate(256).release();
    assert.equal(group.delete(uniforms), true);
    assert.equal(group.delete(uniforms), false);
    assert.equal(group.has(uniforms.caching), false);
    // (the allocator keeps naming the group it was made in)
    assert.equal(uniforms.group, group);
    const u = uniforms.allocate(100);
    assertHeld(gpu, group, all);
    // storage's misses no longer take the deleted member's cache
    const big = storage.allocate(8 * MiB);
    assertHeld(gpu, group, all);
    assert.ok(reserved(uniforms) > 0);
    u.release();
    s.release();
    big.release();
    for (const a of all) a.emptyCache();
    assert.equal(gpu.live.size, 0);
  });

  it("GpuCachingAllocator: emptyCache() of one member while another misses (from the buffer's destroy())", () => {
    // the group gives back a member's idle segment for another's miss;
    // that segment's destroy() re-enters the allocators
    for (const action of ["emptyCache", "allocate", "release"] as const) {
      const gpu = gpuWithLoss();
      const all = members(gpu);
      const [storage, uniforms, copies] = all;
      const group = storage.group!;
      const held: GpuAllocation[] = [];
      let reentered = 0;
      const create = gpu.device.createBuffer.bind(gpu.device);
      (gpu.device as { createBuffer: unknown }).createBuffer = (
        d: GPUBufferDescriptor,
      ) => {
        const buffer = create(d) as unknown as MockGpuBuffer;
        const destroy = buffer.destroy;
        buffer.destroy = function () {
          destroy.call(this);
          if (reentered++ > 0) return;
          if (action === "emptyCache") uniforms.emptyCache();
          else if (action === "allocate") held.push(uniforms.allocate(300));
          else held.pop()?.release();
        };
        return buffer as unknown as GPUBuffer;
      };
      // storage's misses cycle (a peak, then a miss at a low)
      const a = storage.allocate(MiB), b = storage.allocate(MiB);
      a.release();
      b.release();
      storage.emptyCache();
      reentered = 0;
      held.push(storage.allocate(64 * KiB));
      held.push(uniforms.allocate(256));
      copies.allocate(4 * MiB).release(); // idle now
      reentered = 0;
      let big: GpuAllocation | undefined;
      try {
        big = storage.allocate(group.peakHeldBytes);
      } catch (error) {
        assert.ok(error instanceof AllotError, String(error));
      }
      if (big) held.push(big);
      // (the group gave the idle copies segment back: destroy() re-entered)
      assert.ok(group.givenBackSegments >= 1, action);
      assert.ok(reentered >= 1, action);
      assertLive(held);
      assertHeld(gpu, group, all);
      for (const h of held) h.release();
      for (const m of all) m.emptyCache();
      assert.equal(gpu.live.size, 0, action);
      assert.equal(group.heldBytes, 0);
    }
  });

  it("GpuCachingAllocator: a member's segment that still holds a live block is never given back for another's miss", () => {
    const gpu = gpuWithLoss();
    const all = members(gpu);
    const [storage, uniforms] = all;
    const group = storage.group!;
    // storage's misses cycle (a peak, then a miss at a low): any other
    // member's whole free segments may go at its next miss
    const a = storage.allocate(MiB), b = storage.allocate(MiB);
    a.release();
    b.release();
    storage.emptyCache();
    const small = storage.allocate(64 * KiB);
    // uniforms: a 1 KiB segment whose head is free and whose tail is live
    const first = uniforms.allocate(64), second = uniforms.allocate(600);
    first.release(); // something held is free
    const head = uniforms.allocate(512); // a 1 KiB segment
    const reused = uniforms.allocate(64); // (first's block)
    const tail = uniforms.allocate(64); // the 1 KiB segment's tail
    assert.equal(tail.buffer, head.buffer);
    assert.equal((head.buffer as unknown as MockGpuBuffer).size, KiB);
    for (const x of [head, reused, second]) x.release();
    uniforms.emptyCache(); // (the whole free segments go)
    assert.equal(reserved(uniforms), KiB);
    const big = storage.allocate(group.peakHeldBytes);
    assertLive([small, tail, big]);
    assertHeld(gpu, group, all);
    for (const x of [small, tail, big]) x.release();
    for (const m of all) m.emptyCache();
    assert.equal(gpu.live.size, 0);
  });

  it("GpuCachingAllocator: an after-fence member's blocks waiting for the queue are not given back for another member's miss", async () => {
    const gpu = gpuWithLoss();
    const storage = new GpuCachingAllocator(gpu.device);
    const uploads = new GpuCachingAllocator(gpu.device, {
      source: { usage: U.COPY_SRC | U.COPY_DST },
      reuse: "after-fence",
    });
    const group = storage.group!;
    assert.equal(uploads.group, group);
    // storage's misses cycle
    const a = storage.allocate(MiB), b = storage.allocate(MiB);
    a.release();
    b.release();
    storage.emptyCache();
    const small = storage.allocate(64 * KiB);
    // an upload in flight: freed, waiting for the queue
    const up = uploads.allocate(2 * MiB);
    const upBuffer = up.buffer as unknown as MockGpuBuffer;
    gpu.device.queue.submit([]);
    up.release();
    assert.equal(uploads.pendingFreeCount, 1);
    const big = storage.allocate(group.peakHeldBytes);
    assert.equal(upBuffer.destroyed, false, "a buffer the queue may still use");
    assertHeld(gpu, group, [storage, uploads]);
    gpu.complete();
    await uploads.synchronize();
    assert.equal(uploads.pendingFreeCount, 0);
    assertHeld(gpu, group, [storage, uploads]);
    small.release();
    big.release();
    storage.emptyCache();
    uploads.emptyCache();
    assert.equal(gpu.live.size, 0);
    assert.equal(group.heldBytes, 0);
  });

  it("GpuCachingAllocator: a lost device while the group holds segments of several members", async () => {
    const gpu = gpuWithLoss();
    const all = members(gpu);
    const group = all[0].group!;
    const live = all.map((m, i) => m.allocate(1000 * (i + 1)));
    for (const m of all) m.allocate(5000).release();
    assert.ok(group.heldBytes > 0);
    await gpu.lose();
    for (const m of all) {
      assert.equal(m.lost, true);
      assert.throws(() => m.allocate(64), DeviceLostError);
      assert.throws(() => m.tryAllocate(64), DeviceLostError);
    }
    for (const l of live) l.release(); // quiet after loss
    for (const m of all) m.emptyCache();
    // the group's count is its members' (whatever the loss left counted)
    let sum = 0;
    for (const m of all) sum += reserved(m);
    assert.equal(group.heldBytes, sum);
    // every buffer is gone with the device
    assert.equal(gpu.live.size, 0);
    // the lost members leave; the group, empty, is still the lost device's
    // own: another device's allocator is refused there, and joins its own
    for (const m of all) assert.equal(group.delete(m), true);
    assert.equal(group.heldBytes, 0);
    const next = gpuWithLoss();
    assert.throws(
      () => new GpuCachingAllocator(next.device, { group }),
      /is the own group of another GPUDevice/,
    );
    const joined = new GpuCachingAllocator(next.device);
    joined.allocate(64).release();
    assert.equal(group.heldBytes, 0);
    assert.equal(joined.group!.heldBytes, reserved(joined));
  });

  it("GpuCachingAllocator device group model: ranges disjoint on live buffers, the counts agree, everything returned", () => {
    type Op =
      | { op: "alloc"; m: number; size: number }
      | { op: "release"; i: number }
      | { op: "releaseAll"; m: number }
      | { op: "empty"; m: number }
      | { op: "step" }
      | { op: "delete"; m: number };
    const size = fc.oneof(
      fc.integer({ min: 0, max: 300 }),
      fc.integer({ min: 1, max: 64 * KiB }),
      fc.integer({ min: 1, max: 6 * MiB }),
    );
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          op: fc.constant("alloc" as const),
          m: fc.nat(USAGES.length - 1),
          size,
        }),
      },
      {
        weight: 5,
        arbitrary: fc.record({
          op: fc.constant("release" as const),
          i: fc.nat(),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          op: fc.constant("releaseAll" as const),
          m: fc.nat(USAGES.length - 1),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("empty" as const),
          m: fc.nat(USAGES.length - 1),
        }),
      },
      { weight: 1, arbitrary: fc.constant({ op: "step" as const }) },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("delete" as const),
          m: fc.nat(USAGES.length - 1),
        }),
      },
    );
    let givenBack = 0;
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120, size: "max" }), (ops) => {
        const gpu = gpuWithLoss();
        const all = members(gpu);
        const group = GpuCachingAllocator.deviceGroup(gpu.device);
        const live: GpuAllocation[] = [];
        const owner = new Map<GpuAllocation, number>();
        // a prefix that makes the group's give-backs reachable: storage's
        // misses cycle (a peak, then a miss at a low) and the copies pool
        // caches a segment it no longer uses
        const prefix: Op[] = [
          { op: "alloc", m: 0, size: MiB },
          { op: "alloc", m: 0, size: MiB },
          { op: "releaseAll", m: 0 },
          { op: "empty", m: 0 },
          { op: "alloc", m: 0, size: 64 * KiB },
          { op: "alloc", m: 2, size: 2 * MiB },
          { op: "releaseAll", m: 2 },
        ];
        for (const o of [...prefix, ...ops]) {
          if (o.op === "alloc") {
            const a = all[o.m].allocate(o.size);
            assert.ok(a.size >= o.size);
            owner.set(a, o.m);
            live.push(a);
          } else if (o.op === "release") {
            if (live.length === 0) continue;
            const [a] = live.splice(o.i % live.length, 1);
            a.release();
            assert.throws(() => a.buffer, AllotError);
          } else if (o.op === "releaseAll") {
            // a phase ends: every live block of one member goes back
            for (let i = live.length - 1; i >= 0; i--) {
              if (owner.get(live[i]) === o.m) live.splice(i, 1)[0].release();
            }
          } else if (o.op === "empty") {
            all[o.m].emptyCache();
          } else if (o.op === "step") {
            group.endStep();
          } else {
            group.delete(all[o.m]);
          }
          assertLive(live);
          assertHeld(gpu, group, all);
          assert.ok(group.heldBytes <= group.peakHeldBytes);
        }
        if (group.givenBackSegments > 0) givenBack++;
        for (const a of live) a.release();
        for (const m of all) {
          m.emptyCache();
          assert.equal(m.caching.allocatedBytes, 0);
        }
        assert.equal(gpu.live.size, 0);
        assert.equal(group.heldBytes, 0);
      }),
      { numRuns: modelRuns(150) },
    );
    // (the runs reached the group's give-backs)
    assert.ok(givenBack > 0);
  });

  it(
    "GpuCachingAllocator dropped while one of its allocations is live: kept until it is released, then its cache is destroyed",
    {
      skip: !gc,
    },
    async () => {
      // (defect found here: the allocation's owner did not hold the
      // allocator, which was collected while the block was live; the block
      // released later stayed cached in a pool outside the group for good.
      // Fixed in gpu_caching_allocator.ts: the owners reach it through this.)
      const gpu = gpuWithLoss();
      const group = GpuCachingAllocator.deviceGroup(gpu.device);
      const make = () => {
        const a = new GpuCachingAllocator(gpu.device);
        a.allocate(8 * KiB).release();
        return a.allocate(4 * KiB);
      };
      const live = make();
      await collectUntil(() => group.size === 0, 20);
      assert.equal(group.size, 1, "a live allocation keeps its allocator");
      assertLive([live]);
      live.release();
      await collectUntil(() => group.size === 0 && gpu.live.size === 0, 50);
      assert.equal(group.size, 0);
      assert.equal(gpu.live.size, 0, "its cache was destroyed");
    },
  );
});

async function collectUntil(done: () => boolean, rounds: number) {
  for (let i = 0; i < rounds && !done(); i++) {
    gc!();
    await new Promise((r) => setTimeout(r, 0));
  }
}

const gc = (globalThis as { gc?: () => void }).gc;
