/**
 * The GPU allocators with a hostile device (the fourth outside-in review,
 * from the public API only): `createBuffer` that throws on its Nth call or
 * makes a buffer smaller than asked, a Proxy of an allocation, and
 * `synchronize()` with a signal already aborted. The refused call throws a
 * typed error and changes nothing; the allocator works after, and every
 * buffer it made is destroyed by the end.
 *
 * @module
 */

import assert from "node:assert/strict";
import { AllotError } from "@allot/core";
import {
  type GpuAllocation,
  GpuCachingAllocator,
  GpuPlannedAllocator,
  GpuWatermarkAllocator,
} from "@allot/webgpu";
import { mockGpu } from "./_mock_gpu.ts";

const MiB = 2 ** 20;
const source = { capacityBytes: 64 * MiB };

type Lie = "throw" | "short";

/** A mock device whose `createBuffer` lies on its Nth call when armed. */
function lyingGpu() {
  const gpu = mockGpu();
  const make = gpu.device.createBuffer.bind(gpu.device);
  const ctl = { armed: undefined as Lie | undefined, countdown: 0 };
  (gpu.device as unknown as Record<string, unknown>).createBuffer = (
    d: GPUBufferDescriptor,
  ) => {
    if (ctl.armed !== undefined && ctl.countdown-- <= 0) {
      const lie = ctl.armed;
      ctl.armed = undefined;
      if (lie === "throw") throw new Error("device lost (injected)");
      const b = make(d);
      Object.defineProperty(b, "size", { value: 64 });
      return b;
    }
    return make(d);
  };
  return { ...gpu, ctl };
}

interface Subject {
  name: string;
  allocate(n: number): GpuAllocation;
  state(): unknown;
  inUse(): number;
  validate(): void;
  emptyCache(): void;
  synchronize(o?: { signal?: AbortSignal }): Promise<void>;
}

function subjects(device: GPUDevice): Subject[] {
  const caching = (reuse: "queue-order" | "after-fence") => {
    const a = new GpuCachingAllocator(device, { source, reuse });
    return {
      name: `GpuCachingAllocator ${reuse}`,
      allocate: (n: number) => a.allocate(n),
      state: () => ({ stats: a.stats(), snapshot: a.snapshot() }),
      inUse: () => a.stats().requestedBytes.all.current,
      validate: () => a.validate(),
      emptyCache: () => a.emptyCache(),
      synchronize: (o?: { signal?: AbortSignal }) => a.synchronize(o),
    };
  };
  const w = new GpuWatermarkAllocator(device, { source });
  const p = new GpuPlannedAllocator(device, { source });
  return [
    caching("queue-order"),
    caching("after-fence"),
    {
      name: "GpuWatermarkAllocator",
      allocate: (n) => w.allocate(n),
      state: () => ({ stats: w.stats(), snapshot: w.snapshot() }),
      inUse: () => w.stats().requestedBytes.current,
      validate: () => w.validate(),
      emptyCache: () => w.emptyCache(),
      synchronize: (o) => w.synchronize(o),
    },
    {
      name: "GpuPlannedAllocator",
      allocate: (n) => p.allocate(n),
      state: () => ({ stats: p.stats(), snapshot: p.snapshot() }),
      inUse: () => p.stats().requestedBytes.current,
      validate: () => p.validate(),
      emptyCache: () => p.emptyCache(),
      synchronize: (o) => p.synchronize(o),
    },
  ];
}

for (const lie of ["throw", "short"] as const) {
  for (const nth of [1, 2]) {
    Deno.test(`GPU allocators: createBuffer lies (${lie}) on call ${nth}: refused, nothing changes, works after`, async () => {
      for (let i = 0; i < 4; i++) {
        const gpu = lyingGpu();
        const s = subjects(gpu.device)[i];
        const where = `${s.name} ${lie} #${nth}`;
        const live = [s.allocate(64)];
        gpu.ctl.armed = lie;
        gpu.ctl.countdown = nth - 1;
        for (let k = 0; k < 40 && gpu.ctl.armed !== undefined; k++) {
          const before = s.state();
          try {
            live.push(s.allocate(3 * MiB + k * 4096));
          } catch (e) {
            assert.ok(e instanceof AllotError, `${where}: typed: ${e}`);
            assert.equal(gpu.ctl.armed, undefined, `${where}: ${e}`);
            assert.deepEqual(s.state(), before, `${where}: state changed`);
          }
        }
        assert.equal(gpu.ctl.armed, undefined, `${where}: the device lied`);
        s.validate();
        for (const n of [100, 5000, 3 * MiB]) live.push(s.allocate(n));
        for (const h of live) assert.ok(h.buffer.size >= h.offset + h.size);
        s.validate();
        for (const h of live.splice(0)) h.release();
        await s.synchronize();
        s.emptyCache();
        s.validate();
        assert.equal(s.inUse(), 0, `${where}: nothing in use`);
        assert.equal(gpu.live.size, 0, `${where}: every buffer destroyed`);
      }
    });
  }
}

Deno.test("GPU allocators: a Proxy of an allocation is refused with a typed error, nothing changes", async () => {
  const gpu = lyingGpu();
  for (const s of subjects(gpu.device)) {
    const h = s.allocate(1000);
    const before = s.state();
    for (const fake of [new Proxy(h, {}), Object.create(h)]) {
      assert.throws(
        () => GpuAllocationRelease(fake),
        (e: unknown) => e instanceof AllotError,
        `${s.name}: release() through a fake`,
      );
      assert.deepEqual(s.state(), before, `${s.name}: a fake changed state`);
    }
    h.release();
    await s.synchronize();
    s.emptyCache();
    assert.equal(s.inUse(), 0);
  }
  assert.equal(gpu.live.size, 0);
});

/** `release()` called on any object, as a user's wrapper would. */
function GpuAllocationRelease(h: GpuAllocation): void {
  h.release();
}

Deno.test("GPU allocators: synchronize() with a signal already aborted rejects with its reason and changes nothing", async () => {
  const gpu = lyingGpu();
  for (const s of subjects(gpu.device)) {
    const h = s.allocate(5000);
    h.release();
    // (frees waiting on the queue come back on their own: settle first)
    await s.synchronize();
    const keep = s.allocate(3000);
    const before = s.state();
    const reason = new Error("stop");
    await assert.rejects(
      s.synchronize({ signal: AbortSignal.abort(reason) }),
      (e: unknown) => e === reason,
      s.name,
    );
    assert.deepEqual(s.state(), before, `${s.name}: an aborted wait changed`);
    keep.release();
    await s.synchronize();
    s.emptyCache();
    assert.equal(s.inUse(), 0);
  }
  assert.equal(gpu.live.size, 0);
});
