// Both policies over the one pooling core, checked by one model: the same
// random allocate / free / free-after-use-on-a-stream / fence / emptyCache
// sequences run through `CachingAllocator` (PyTorch's policy) and
// `WatermarkAllocator` (MPS's policy), and after every step: live blocks do
// not overlap, a block freed while a stream still used it is not handed out
// again before that stream's fence completes, the core's stats equal a
// recount (`validate()`) and the live and pending bytes the model counts,
// and at the end everything goes back to the device.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  ManualStream,
  type MemoryStats,
  type MockMemory,
  MockSegmentSource,
} from "@allot/core";
import { CachingAllocator } from "@allot/caching";
import { WatermarkAllocator } from "./mod.ts";
import { modelRuns } from "../core/_test_faults.ts";

/** A block as the model sees it. */
interface Range {
  memory: MockMemory;
  start: number;
  end: number;
}

/** What the model needs from a policy. */
interface Policy {
  name: string;
  device: MockSegmentSource;
  /** Allocates; `undefined` when out of memory. */
  allocate(byteLength: number): Handle | undefined;
  /** Records that `stream` uses the block, then frees it. */
  freeAfterUse(handle: Handle, stream: ManualStream): void;
  emptyCache(): void;
  validate(): void;
  memoryStats(): MemoryStats;
}

interface Handle extends Range {
  release(): void;
}

function caching(): Policy {
  const device = new MockSegmentSource({ capacityBytes: 64 << 20 });
  const a = new CachingAllocator(device, {
    smallSegmentByteLength: 1 << 20,
    smallRequestMaxByteLength: 256 << 10,
    largeSegmentByteLength: 4 << 20,
    ownSegmentMinByteLength: 2 << 20,
    largeRoundByteLength: 1 << 20,
  });
  const blocks = new Map<Handle, ReturnType<typeof a.allocate>>();
  return {
    name: "CachingAllocator",
    device,
    allocate(byteLength) {
      let block;
      try {
        block = a.allocate(byteLength);
      } catch (e) {
        if ((e as Error).name === "CachingOutOfMemoryError") return undefined;
        throw e;
      }
      const h: Handle = {
        memory: block.memory as MockMemory,
        start: block.byteOffset,
        end: block.byteOffset + block.blockByteLength,
        release: () => block.release(),
      };
      blocks.set(h, block);
      return h;
    },
    freeAfterUse(h, stream) {
      blocks.get(h)!.recordStream(stream);
      h.release();
    },
    emptyCache: () => a.emptyCache(),
    validate: () => a.validate(),
    memoryStats: () => a.memoryStats(),
  };
}

function watermark(): Policy {
  const device = new MockSegmentSource({ capacityBytes: 64 << 20 });
  const a = new WatermarkAllocator(device, {
    maxSmallByteLength: 256 << 10,
    smallHeapByteLength: 1 << 20,
    minLargeByteLength: 2 << 20,
    largeHeapByteLength: 4 << 20,
    xlargeHeapByteLength: 8 << 20,
    largeRoundByteLength: 1 << 20,
    highWatermarkRatio: 1,
    lowWatermarkRatio: 0.75,
  });
  const buffers = new Map<Handle, ReturnType<typeof a.allocateBuffer>>();
  return {
    name: "WatermarkAllocator",
    device,
    allocate(byteLength) {
      const buffer = a.tryAllocateBuffer(Math.max(1, byteLength));
      if (buffer === undefined) return undefined;
      const h: Handle = {
        memory: buffer.memory as MockMemory,
        start: buffer.byteOffset,
        end: buffer.byteOffset + buffer.byteLength,
        release: () => buffer.release(),
      };
      buffers.set(h, buffer);
      return h;
    },
    freeAfterUse(h, stream) {
      a.recordEvents([buffers.get(h)!], stream);
      h.release();
    },
    emptyCache: () => a.emptyCache(),
    validate: () => a.validate(),
    memoryStats: () => a.memoryStats(),
  };
}

type Op =
  | { t: "alloc"; byteLength: number }
  | { t: "free"; index: number }
  | { t: "freeAfterUse"; index: number; stream: number }
  | { t: "complete"; stream: number }
  | { t: "emptyCache" };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      t: fc.constant("alloc" as const),
      byteLength: fc.oneof(
        fc.integer({ min: 0, max: 4096 }),
        fc.integer({ min: 4096, max: 3 << 20 }),
      ),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ t: fc.constant("free" as const), index: fc.nat() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("freeAfterUse" as const),
      index: fc.nat(),
      stream: fc.nat({ max: 1 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("complete" as const),
      stream: fc.nat({ max: 1 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ t: "emptyCache" as const }) },
);

const overlaps = (a: Range, b: Range): boolean =>
  a.memory === b.memory && a.start < b.end && b.start < a.end;

function run(policy: Policy, ops: Op[]): void {
  const streams = [new ManualStream(), new ManualStream()];
  const live: Handle[] = [];
  // Freed while a stream used it: not reusable before that stream's fence.
  let waiting: (Range & { stream: number })[] = [];
  // Fence complete, but the allocator has not polled yet (its next
  // allocation or emptyCache() does): counted active or not.
  let unpolled: Range[] = [];
  const bytes = (rs: Range[]) => rs.reduce((n, r) => n + r.end - r.start, 0);
  const check = (): void => {
    policy.validate();
    for (let i = 0; i < live.length; i++) {
      for (let j = i + 1; j < live.length; j++) {
        assert.ok(!overlaps(live[i], live[j]), `${policy.name}: overlap`);
      }
    }
    const s = policy.memoryStats();
    const liveBytes = bytes(live), pending = bytes(waiting);
    assert.equal(s.allocatedBytes.all.current, liveBytes, policy.name);
    const active = s.activeBytes.all.current;
    assert.ok(
      active >= liveBytes + pending &&
        active <= liveBytes + pending + bytes(unpolled),
      `${policy.name}: active bytes ${active}`,
    );
    assert.equal(s.reservedBytes.all.current, policy.device.reservedBytes);
  };
  for (const o of ops) {
    switch (o.t) {
      case "alloc": {
        const h = policy.allocate(o.byteLength);
        unpolled = []; // allocation polls the fences first
        if (h === undefined) break;
        for (const w of waiting) {
          assert.ok(
            !overlaps(h, w),
            `${policy.name}: a block was reused before its fence`,
          );
        }
        live.push(h);
        break;
      }
      case "free":
        if (live.length > 0) live.splice(o.index % live.length, 1)[0].release();
        break;
      case "freeAfterUse": {
        if (live.length === 0) break;
        const h = live.splice(o.index % live.length, 1)[0];
        policy.freeAfterUse(h, streams[o.stream]);
        waiting.push({ ...h, stream: o.stream });
        break;
      }
      case "complete":
        streams[o.stream].completeAll();
        unpolled.push(...waiting.filter((w) => w.stream === o.stream));
        waiting = waiting.filter((w) => w.stream !== o.stream);
        break;
      case "emptyCache":
        policy.emptyCache();
        unpolled = [];
        break;
    }
    check();
  }
  // Everything returned at the end.
  for (const h of live.splice(0)) h.release();
  for (const s of streams) s.completeAll();
  waiting = [];
  unpolled = [];
  policy.emptyCache();
  check();
  assert.equal(policy.device.reservedBytes, 0, `${policy.name}: kept bytes`);
  const s = policy.memoryStats();
  assert.equal(s.activeBytes.all.current, 0);
  assert.equal(s.segment.all.current, 0);
}

describe("pooling core, both policies", () => {
  for (const make of [caching, watermark]) {
    it(`${make().name} over the pooling core: no overlap, no reuse before a fence, stats equal a recount and the model's bytes, everything returned (random allocate, free, free after use on a stream, fence, emptyCache)`, () => {
      fc.assert(
        fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
          run(make(), ops);
        }),
        { numRuns: modelRuns() },
      );
    });
  }
});
