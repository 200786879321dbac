import {
  type CachedBlock,
  CachingAllocator,
  CachingGroup,
} from "@allot/caching";
import { type MockMemory, MockSegmentSource } from "@allot/core";
import { WatermarkAllocator, type WatermarkBuffer } from "@allot/watermark";
import type { PolicyFactory, ReplayPolicy } from "./replay_policy.ts";

/** A mock device that counts the segments taken from it. */
class CountingSource extends MockSegmentSource {
  created = 0;
  override tryAllocateSegment(
    ...args: Parameters<MockSegmentSource["tryAllocateSegment"]>
  ): ReturnType<MockSegmentSource["tryAllocateSegment"]> {
    const s = super.tryAllocateSegment(...args);
    if (s) this.created++;
    return s;
  }
}

const CAPACITY = 2 ** 40;

/**
 * Freezes a policy factory and the function it holds: the exported
 * policies are shared by every replay that imports them, so a caller that
 * assigns to one (its `create`, its `name`) would change every other
 * caller's replays. Frozen, such an assignment throws in strict code.
 */
function _frozen(f: PolicyFactory): PolicyFactory {
  Object.freeze(f.create);
  return Object.freeze(f);
}

/**
 * One allot allocator per WebGPU usage (a buffer's usage is fixed at
 * creation, so blocks of different usages cannot share a segment), all over
 * mock devices; held bytes are the segments' bytes.
 */
function perUsage<A, B>(
  make: (source: CountingSource, group: CachingGroup) => A,
  allocate: (a: A, size: number) => B,
  release: (a: A, b: B) => void,
  deferUntilFence: boolean,
): ReplayPolicy {
  const pools = new Map<number, { a: A; source: CountingSource }>();
  // one device: the allocators that join a group join this one
  const group = new CachingGroup();
  const live = new Map<number, { a: A; b: B }>();
  let pending: { a: A; b: B }[] = [];
  return {
    alloc(id, size, usage) {
      let p = pools.get(usage);
      if (!p) {
        const source = new CountingSource({ capacityBytes: CAPACITY });
        pools.set(usage, p = { a: make(source, group), source });
      }
      live.set(id, { a: p.a, b: allocate(p.a, Math.max(1, size)) });
    },
    free(id) {
      const x = live.get(id)!;
      live.delete(id);
      if (deferUntilFence) pending.push(x);
      else release(x.a, x.b);
    },
    sync() {
      if (pending.length === 0) return;
      for (const x of pending) release(x.a, x.b);
      pending = [];
    },
    heldBytes() {
      let n = 0;
      for (const p of pools.values()) n += p.source.reservedBytes;
      return n;
    },
    buffersCreated() {
      let n = 0;
      for (const p of pools.values()) n += p.source.created;
      return n;
    },
  };
}

/**
 * `@allot/caching`'s `CachingAllocator` (PyTorch's caching policy), defaults,
 * frees reusable at once: WebGPU runs its one queue in order, so a range
 * freed after its last use was submitted can be handed out again.
 */
export const allotCachingQueueOrderPolicy: PolicyFactory = _frozen({
  name: "allot-caching",
  description: "@allot/caching CachingAllocator, defaults, queue-order reuse",
  create: () =>
    perUsage<CachingAllocator<MockMemory>, CachedBlock<MockMemory>>(
      (s) => new CachingAllocator(s),
      (a, size) => a.allocate(size),
      (a, b) => a.free(b),
      false,
    ),
});

/**
 * The same allocator with frees held back until the GPU is known to be done
 * (the next readback or step mark here), as `"after-fence"` reuse does.
 */
export const allotCachingAfterFencePolicy: PolicyFactory = _frozen({
  name: "allot-caching-fence",
  description:
    "@allot/caching CachingAllocator, defaults, frees reusable after the next fence",
  create: () =>
    perUsage<CachingAllocator<MockMemory>, CachedBlock<MockMemory>>(
      (s) => new CachingAllocator(s),
      (a, size) => a.allocate(size),
      (a, b) => a.free(b),
      true,
    ),
});

/**
 * The same allocators, one per usage, in one {@linkcode CachingGroup}: a miss
 * whose new segment would raise their held bytes together above the group's
 * peak first gives back whole free segments of the others. Queue-order reuse.
 */
export const allotCachingGroupPolicy: PolicyFactory = _frozen({
  name: "allot-caching-group",
  description:
    "@allot/caching CachingAllocator, defaults, one CachingGroup, queue-order reuse",
  create: () =>
    perUsage<CachingAllocator<MockMemory>, CachedBlock<MockMemory>>(
      (s, group) => new CachingAllocator(s, { group }),
      (a, size) => a.allocate(size),
      (a, b) => a.free(b),
      false,
    ),
});

/** {@linkcode allotCachingGroupPolicy} with frees reusable after the next fence. */
export const allotCachingGroupAfterFencePolicy: PolicyFactory = _frozen({
  name: "allot-caching-group-fence",
  description:
    "@allot/caching CachingAllocator, defaults, one CachingGroup, frees reusable after the next fence",
  create: () =>
    perUsage<CachingAllocator<MockMemory>, CachedBlock<MockMemory>>(
      (s, group) => new CachingAllocator(s, { group }),
      (a, size) => a.allocate(size),
      (a, b) => a.free(b),
      true,
    ),
});

/** `@allot/watermark`'s `WatermarkAllocator` (PyTorch's MPS policy), defaults, queue-order reuse. */
export const allotWatermarkPolicy: PolicyFactory = _frozen({
  name: "allot-watermark",
  description:
    "@allot/watermark WatermarkAllocator, defaults, queue-order reuse",
  create: () =>
    perUsage<WatermarkAllocator<MockMemory>, WatermarkBuffer>(
      (s) => new WatermarkAllocator(s),
      (a, size) => a.allocateBuffer(size),
      (_a, b) => b.release(),
      false,
    ),
});
