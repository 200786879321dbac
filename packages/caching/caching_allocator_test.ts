import { describe, it } from "node:test";
import fc from "fast-check";
import assert from "node:assert/strict";
import {
  DoubleFreeError,
  FenceError,
  InvalidArgumentError,
  JUNK_BYTE,
  LeakDetector,
  ManualStream,
  MockSegmentSource,
  OutOfMemoryError,
  type Stream,
  UseAfterFreeError,
} from "@allot/core";
import {
  type CachedBlock,
  CachingAllocator,
  PYTORCH_SEGMENTS,
} from "./caching_allocator.ts";
import { CachingOutOfMemoryError, SegmentSourceError } from "./errors.ts";
import { modelRuns } from "../core/_test_faults.ts";

const MiB = 2 ** 20;
const gc = (globalThis as { gc?: () => void }).gc;

function setup(
  capacityBytes = Infinity,
  options: ConstructorParameters<typeof CachingAllocator>[1] = {},
) {
  const device = new MockSegmentSource({ capacityBytes });
  // PyTorch's segment sizes: these tests check its rules.
  const allocator = new CachingAllocator(device, {
    ...PYTORCH_SEGMENTS,
    ...options,
  });
  return { device, allocator };
}

describe("CachingAllocator", () => {
  it("CachingAllocator.allocate() rounds to 512 bytes and picks the pool and segment size", () => {
    const { device, allocator } = setup();
    const a = allocator.allocate(1);
    assert.equal(a.blockByteLength, 512);
    assert.equal(a.byteLength, 1);
    const b = allocator.allocate(MiB); // small pool limit
    assert.equal(device.allocationCount, 1);
    const c = allocator.allocate(MiB + 1); // large pool: 20 MiB segment
    assert.equal(c.blockByteLength, MiB + 512);
    assert.equal(device.reservedBytes, 2 * MiB + 20 * MiB);
    const d = allocator.allocate(19 * MiB + 1); // own segment rounded to 2 MiB
    assert.equal(device.reservedBytes, 2 * MiB + 20 * MiB + 20 * MiB);
    const stats = allocator.memoryStats();
    assert.equal(stats.segment.smallPool.current, 1);
    assert.equal(stats.segment.largePool.current, 2);
    assert.equal(
      stats.requestedBytes.all.current,
      1 + MiB + MiB + 1 + 19 * MiB + 1,
    );
    for (const x of [a, b, c, d]) x.release();
    allocator.validate();
  });

  it("CachingAllocator.allocate() splits small blocks when at least 512 bytes remain", () => {
    const { allocator } = setup();
    const a = allocator.allocate(MiB);
    const b = allocator.allocate(MiB - 512); // 512 bytes remain: split
    const c = allocator.allocate(512);
    assert.equal(allocator.memoryStats().segment.all.current, 1);
    assert.equal(c.byteOffset, 2 * MiB - 512);
    a.release();
    b.release();
    c.release();
    allocator.validate();
  });

  it("CachingAllocator.allocate() splits large blocks only when more than 1 MiB remains", () => {
    const { allocator } = setup();
    const a = allocator.allocate(9 * MiB); // 20 MiB segment, 11 MiB left: split
    assert.equal(a.blockByteLength, 9 * MiB);
    const stats = allocator.memoryStats();
    assert.equal(stats.inactiveSplit.largePool.current, 1);
    assert.equal(stats.inactiveSplitBytes.largePool.current, 11 * MiB);
    const b = allocator.allocate(10 * MiB); // 1 MiB left: not split
    assert.equal(b.blockByteLength, 11 * MiB);
    assert.equal(b.byteLength, 10 * MiB);
    assert.equal(allocator.memoryStats().inactiveSplit.all.current, 0);
    a.release();
    b.release();
    assert.equal(allocator.memoryStats().inactiveSplit.all.current, 0);
    allocator.validate();
  });

  it("CachingAllocator.free() merges a block with its free neighbours", () => {
    const { allocator } = setup();
    const blocks = [1, 2, 3].map(() => allocator.allocate(4096));
    blocks[0].release();
    blocks[2].release();
    let snap = allocator.snapshot().segments[0].blocks;
    assert.deepEqual(snap.map((b) => b.state), [
      "inactive",
      "active_allocated",
      "inactive",
    ]);
    blocks[1].release();
    snap = allocator.snapshot().segments[0].blocks;
    assert.deepEqual(snap.map((b) => [b.state, b.byteLength]), [[
      "inactive",
      2 * MiB,
    ]]);
    allocator.validate();
  });

  it("CachingAllocator.allocate() takes the best-fitting free block", () => {
    const { allocator } = setup();
    const held: CachedBlock[] = [];
    const sizes = [8192, 2048, 4096];
    const blocks = sizes.map((s) => {
      const b = allocator.allocate(s);
      held.push(allocator.allocate(512)); // keep them apart
      return b;
    });
    const addresses = blocks.map((b) => b.address);
    for (const b of blocks) b.release();
    const c = allocator.allocate(3000);
    assert.equal(c.address, addresses[2]); // the 4096 block, not the 8192 one
    const d = allocator.allocate(2048);
    assert.equal(d.address, addresses[1]);
    for (const b of [c, d, ...held]) b.release();
    allocator.validate();
  });

  it("CachingAllocator.emptyCache() returns only whole free segments", () => {
    const { device, allocator } = setup();
    const a = allocator.allocate(4096);
    const b = allocator.allocate(3 * MiB);
    b.release();
    allocator.emptyCache();
    assert.equal(device.reservedBytes, 2 * MiB); // small segment still in use
    a.release();
    allocator.emptyCache();
    assert.equal(device.reservedBytes, 0);
    const stats = allocator.memoryStats();
    assert.equal(stats.numDeviceAlloc, 2);
    assert.equal(stats.numDeviceFree, 2);
    allocator.validate();
  });

  it("CachingAllocator keeps blocks on their stream", () => {
    const { allocator } = setup();
    const s1 = new ManualStream(), s2 = new ManualStream();
    const a = allocator.allocate(4096, { stream: s1 });
    const address = a.address;
    a.release();
    const b = allocator.allocate(4096, { stream: s2 });
    assert.notEqual(b.address, address);
    assert.equal(allocator.memoryStats().segment.all.current, 2);
    const c = allocator.allocate(4096, { stream: s1 });
    assert.equal(c.address, address);
    b.release();
    c.release();
    allocator.validate();
  });

  it("CachingAllocator.recordStream() delays reuse until every fence completes", async () => {
    const { allocator } = setup();
    const s1 = new ManualStream(), s2 = new ManualStream();
    const a = allocator.allocate(4096);
    const address = a.address;
    a.recordStream(s1);
    a.recordStream(s2);
    a.recordStream(s2);
    a.release();
    assert.equal(allocator.pendingFreeCount, 1);
    let stats = allocator.memoryStats();
    assert.equal(stats.allocation.all.current, 0);
    assert.equal(stats.active.all.current, 1);
    assert.equal(
      allocator.snapshot().segments[0].blocks[0].state,
      "active_pending_free",
    );
    s1.completeAll();
    const b = allocator.allocate(4096);
    assert.notEqual(b.address, address);
    s2.completeAll();
    const c = allocator.allocate(4096);
    assert.equal(c.address, address);
    stats = allocator.memoryStats();
    assert.equal(stats.active.all.current, 2);
    c.recordStream(s1);
    c.release();
    const done = allocator.synchronize();
    s1.completeAll();
    await done;
    assert.equal(allocator.pendingFreeCount, 0);
    b.release();
    allocator.validate();
  });

  it("CachingAllocator.free() throws DoubleFreeError for a freed or foreign block", () => {
    const { allocator } = setup();
    const other = setup().allocator;
    const a = allocator.allocate(100);
    const x = other.allocate(100);
    assert.throws(() => allocator.free(x as never), DoubleFreeError);
    a.release();
    assert.throws(() => a.release(), DoubleFreeError);
    // no CachedBlock at all: not a handle of this verb
    assert.throws(() => allocator.free({} as never), InvalidArgumentError);
    assert.throws(() => allocator.free(null as never), InvalidArgumentError);
    a[Symbol.dispose](); // disposing after release is quiet
    x.release();
    allocator.validate();
    assert.equal(allocator.memoryStats().allocation.all.freed, 1);
  });

  it("CachedBlock throws UseAfterFreeError after release", () => {
    const { allocator } = setup();
    const a = allocator.allocate(100);
    a.release();
    assert.throws(() => a.memory, UseAfterFreeError);
    assert.throws(() => a.byteOffset, UseAfterFreeError);
    assert.throws(() => a.address, UseAfterFreeError);
    assert.throws(() => a.recordStream(new ManualStream()), UseAfterFreeError);
    assert.equal(a.released, true);
  });

  it("CachingAllocator.allocate() refuses bad sizes and streams and changes nothing", () => {
    const { device, allocator } = setup(Infinity);
    const before = JSON.stringify(allocator.memoryStats());
    for (const bad of [-1, 1.5, NaN, Infinity, 2 ** 53]) {
      assert.throws(() => allocator.allocate(bad), InvalidArgumentError);
    }
    assert.throws(
      () => allocator.allocate(10, { stream: {} as never }),
      InvalidArgumentError,
    );
    const small = new CachingAllocator(
      new MockSegmentSource({ maxSegmentByteLength: 4 * MiB }),
    );
    assert.throws(() => small.allocate(4 * MiB + 1), /largest segment/);
    assert.equal(JSON.stringify(allocator.memoryStats()), before);
    assert.equal(device.allocationCount, 0);
  });

  it("CachingAllocator refuses options out of range", () => {
    const device = new MockSegmentSource();
    assert.throws(
      () => new CachingAllocator(device, { memoryFraction: 0 }),
      InvalidArgumentError,
    );
    assert.throws(
      () => new CachingAllocator(device, { memoryFraction: 1.5 }),
      InvalidArgumentError,
    );
    assert.throws(
      () => new CachingAllocator(device, { garbageCollectionThreshold: 1 }),
      InvalidArgumentError,
    );
    assert.throws(
      () => new CachingAllocator(device, { maxSplitByteLength: MiB }),
      /maxSplitByteLength/,
    );
    assert.throws(
      () => new CachingAllocator(device, { roundupPower2Divisions: 3 }),
      /power of two/,
    );
    assert.throws(
      () => new CachingAllocator(device, { smallSegmentByteLength: 1000 }),
      /multiple/,
    );
    assert.throws(
      () => new CachingAllocator(device, { minBlockByteLength: 48 }),
      /power of two/,
    );
  });

  it("CachingAllocator.allocate() throws an explaining OutOfMemoryError and stays consistent", () => {
    const { device, allocator } = setup(4 * MiB);
    const a = allocator.allocate(MiB);
    const before = allocator.snapshot();
    assert.throws(() => allocator.allocate(3 * MiB), (error: unknown) => {
      assert.ok(error instanceof CachingOutOfMemoryError);
      assert.ok(error instanceof OutOfMemoryError);
      assert.match(
        error.message,
        /^Cannot allocate 3145728 bytes: tried to allocate 3\.00 MiB on mock:0/,
      );
      assert.match(
        error.message,
        /total capacity of 4\.00 MiB of which 2\.00 MiB is free/,
      );
      assert.match(
        error.message,
        /1\.00 MiB is allocated by this allocator, and 1\.00 MiB is reserved by this allocator but unallocated/,
      );
      assert.equal(error.requestedBytes, 3 * MiB);
      assert.equal(error.freeBytes, 2 * MiB);
      assert.equal(error.allocatedBytes, MiB);
      return true;
    });
    assert.deepEqual(allocator.snapshot(), before);
    assert.equal(allocator.memoryStats().numOoms, 1);
    assert.equal(device.reservedBytes, 2 * MiB);
    a.release();
    allocator.validate();
  });

  it("CachingAllocator.allocate() explains a refusal by a device without a capacity limit", () => {
    const { device, allocator } = setup();
    device.failNext(10);
    assert.throws(
      () => allocator.allocate(100),
      /reports no capacity limit but refused the segment/,
    );
    allocator.validate();
  });

  it("CachingAllocator.allocate() frees cached segments and retries when the device is full", () => {
    const { device, allocator } = setup(26 * MiB);
    const a = allocator.allocate(8 * MiB); // 20 MiB segment
    a.release();
    const b = allocator.allocate(MiB); // small: 2 MiB segment fits
    b.release();
    // A 24 MiB own segment does not fit next to the cached ones.
    const c = allocator.allocate(24 * MiB);
    assert.equal(c.blockByteLength, 24 * MiB);
    const stats = allocator.memoryStats();
    assert.equal(stats.numAllocRetries, 1);
    assert.equal(stats.numDeviceFree, 2);
    assert.equal(device.reservedBytes, 24 * MiB);
    c.release();
    allocator.validate();
  });

  it("CachingAllocator.allocate() takes a tighter segment when a whole one does not fit", () => {
    const { device, allocator } = setup(8 * MiB);
    const a = allocator.allocate(3 * MiB); // 20 MiB would not fit: 4 MiB
    assert.equal(device.reservedBytes, 4 * MiB);
    a.release();
    allocator.validate();
  });

  it("CachingAllocator.allocateAsync() waits for fences before failing", async () => {
    const { allocator } = setup(2 * MiB);
    const stream = new ManualStream();
    const a = allocator.allocate(MiB);
    a.recordStream(stream);
    a.release();
    assert.throws(() => allocator.allocate(2 * MiB), /waits for fences/);
    const later = allocator.allocateAsync(2 * MiB);
    stream.completeAll();
    const b = await later;
    assert.equal(b.blockByteLength, 2 * MiB);
    b.release();
    await assert.rejects(
      allocator.allocateAsync(4 * MiB),
      CachingOutOfMemoryError,
    );
    allocator.validate();
    assert.equal(allocator.memoryStats().numSyncAllStreams, 1);
  });

  it("CachingAllocator keeps pools consistent when the device throws", () => {
    const { device, allocator } = setup();
    const a = allocator.allocate(100);
    device.throwNext();
    const before = JSON.stringify(allocator.memoryStats());
    assert.throws(() => allocator.allocate(3 * MiB), SegmentSourceError);
    allocator.validate();
    assert.equal(JSON.stringify(allocator.memoryStats()), before);
    const b = allocator.allocate(3 * MiB);
    a.release();
    b.release();
    allocator.validate();
  });

  it("CachingAllocator with maxSplitByteLength never splits oversize blocks and bounds their slack", () => {
    const { device, allocator } = setup(Infinity, {
      maxSplitByteLength: 40 * MiB,
      maxNonSplitRoundingByteLength: 4 * MiB,
    });
    const a = allocator.allocate(60 * MiB);
    a.release();
    // A small large-pool request must not take the oversize block.
    const b = allocator.allocate(5 * MiB);
    assert.equal(device.allocationCount, 2);
    // An oversize request within 4 MiB of 60 MiB reuses it whole.
    const c = allocator.allocate(57 * MiB);
    assert.equal(c.blockByteLength, 60 * MiB);
    assert.equal(allocator.memoryStats().oversizeAllocations.current, 1);
    c.release();
    // 50 MiB is more than 4 MiB below: a new segment.
    const d = allocator.allocate(50 * MiB);
    assert.equal(d.blockByteLength, 50 * MiB);
    assert.equal(allocator.memoryStats().oversizeSegments.current, 2);
    for (const x of [b, d]) x.release();
    allocator.validate();
  });

  it("CachingAllocator with maxSplitByteLength frees oversize cached blocks before the whole cache", () => {
    const { device, allocator } = setup(100 * MiB, {
      maxSplitByteLength: 40 * MiB,
      maxNonSplitRoundingByteLength: 4 * MiB,
    });
    const small = allocator.allocate(100);
    small.release();
    const a = allocator.allocate(60 * MiB);
    a.release();
    const b = allocator.allocate(50 * MiB); // 60 MiB is too loose a fit
    const stats = allocator.memoryStats();
    assert.equal(stats.numAllocRetries, 0); // freed the oversize block only
    assert.equal(device.reservedBytes, 52 * MiB); // small segment kept
    b.release();
    allocator.validate();
  });

  it("CachingAllocator.setMemoryFraction() caps reserved bytes", () => {
    const { allocator } = setup(100 * MiB, { memoryFraction: 0.5 });
    const a = allocator.allocate(40 * MiB);
    assert.throws(() => allocator.allocate(20 * MiB), /memory fraction 0\.5/);
    allocator.setMemoryFraction(1);
    const b = allocator.allocate(20 * MiB);
    a.release();
    b.release();
    allocator.validate();
  });

  it("CachingAllocator garbage collection frees the oldest cached segments past the threshold", () => {
    const { device, allocator } = setup(100 * MiB, {
      garbageCollectionThreshold: 0.3,
    });
    const old = allocator.allocate(12 * MiB);
    const young = allocator.allocate(14 * MiB);
    old.release();
    for (let i = 0; i < 10; i++) allocator.allocate(16 * MiB).release();
    young.release();
    // Reserved 12 + 14 + 16 = 42 MiB > 30 MiB: the oldest (12 MiB) goes.
    const big = allocator.allocate(18 * MiB);
    assert.equal(device.reservedBytes, 14 * MiB + 16 * MiB + 18 * MiB);
    big.release();
    allocator.validate();
  });

  it("CachingAllocator.roundSize() applies roundupPower2Divisions", () => {
    const { allocator } = setup(Infinity, { roundupPower2Divisions: [4] });
    assert.equal(allocator.roundSize(1000), 1024);
    assert.equal(allocator.roundSize(1153434), 1310720);
    assert.equal(allocator.roundSize(5 * MiB + 1), 6 * MiB);
  });

  it("CachingAllocator.memoryStats() keeps current, peak, allocated and freed per pool", () => {
    const { allocator } = setup();
    const a = allocator.allocate(1000);
    const big = allocator.allocate(3 * MiB);
    a.release();
    let stats = allocator.memoryStats();
    assert.deepEqual(stats.allocatedBytes.smallPool, {
      current: 0,
      peak: 1024,
      allocated: 1024,
      freed: 1024,
    });
    assert.deepEqual(stats.allocatedBytes.all, {
      current: 3 * MiB,
      peak: 3 * MiB + 1024,
      allocated: 3 * MiB + 1024,
      freed: 1024,
    });
    assert.deepEqual(stats.segment.all, {
      current: 2,
      peak: 2,
      allocated: 2,
      freed: 0,
    });
    allocator.resetAccumulatedStats();
    allocator.allocate(512).release();
    stats = allocator.memoryStats();
    assert.deepEqual(stats.allocation.all, {
      current: 1,
      peak: 2,
      allocated: 1,
      freed: 1,
    });
    big.release();
    allocator.resetPeakStats();
    assert.equal(allocator.memoryStats().allocatedBytes.all.peak, 0);
    allocator.validate();
  });

  it("CachingAllocator.resetPeakStats() sets peaks to current values", () => {
    const { allocator } = setup();
    const a = allocator.allocate(10000);
    allocator.allocate(10000).release();
    assert.equal(allocator.memoryStats().allocatedBytes.all.peak, 2 * 10240);
    allocator.resetPeakStats();
    assert.equal(allocator.memoryStats().allocatedBytes.all.peak, 10240);
    allocator.resetAccumulatedStats();
    assert.equal(allocator.memoryStats().allocation.all.allocated, 0);
    a.release();
  });

  it(
    "CachingAllocator reports a handle dropped without release to its LeakDetector",
    {
      skip: gc ? false : "needs --v8-flags=--expose-gc",
    },
    async () => {
      const leaks: string[] = [];
      const leakDetector = new LeakDetector({
        onLeak: (r) => leaks.push(r.label),
      });
      const allocator = new CachingAllocator(new MockSegmentSource(), {
        leakDetector,
      });
      (() => {
        allocator.allocate(100); // dropped: nothing in the allocator keeps it
        allocator.allocate(200).release();
      })();
      for (let i = 0; i < 10 && leaks.length === 0; i++) {
        gc!();
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(leaks.length, 1);
      assert.match(leaks[0], /block of 100 bytes/);
      assert.equal(leakDetector.watching, 0);
      // The detector only reports: the block stays allocated.
      assert.equal(allocator.memoryStats().allocation.all.current, 1);
      allocator.validate();
    },
  );

  it("CachingAllocator watches handles with a LeakDetector until they are released", () => {
    const leakDetector = new LeakDetector();
    const allocator = new CachingAllocator(new MockSegmentSource(), {
      leakDetector,
    });
    const a = allocator.allocate(100);
    const b = allocator.allocate(100);
    assert.equal(leakDetector.watching, 2);
    a.release();
    assert.equal(leakDetector.watching, 1);
    b.release();
    assert.equal(leakDetector.watching, 0);
  });

  it("CachingAllocator.snapshot() records history with stacks and survives JSON", () => {
    const { allocator } = setup(4 * MiB);
    allocator.recordHistory({ maxEntries: 100, captureStack: true });
    const a = allocator.allocate(1000);
    assert.throws(() => allocator.allocate(8 * MiB));
    const snap = allocator.snapshot();
    assert.match(snap.segments[0].blocks[0].stack!, /caching_allocator_test/);
    a.release();
    allocator.emptyCache();
    const json = JSON.parse(JSON.stringify(allocator.snapshot()));
    assert.deepEqual(json.history.map((e: { action: string }) => e.action), [
      "segment_alloc",
      "alloc",
      "oom",
      "snapshot",
      "free_requested",
      "free_completed",
      "segment_free",
      "snapshot",
    ]);
    assert.equal(json.version, 1);
    assert.equal(json.segments.length, 0);
    assert.match(allocator.memorySummary(), /Oversize segments/);
  });
  it("CachingAllocator.allocate() survives a fence that throws: typed error, consistent pending frees, later allocations work", async () => {
    const { allocator } = setup(8 * MiB);
    let throws = true;
    let done = false;
    const stream: Stream = {
      id: 4242,
      fence: () => ({
        get completed() {
          if (throws) throw new Error("device lost");
          return done;
        },
        wait: () => Promise.resolve(),
      }),
    };
    const a = allocator.allocate(MiB);
    a.recordStream(stream);
    const address = a.address;
    throws = false;
    a.release(); // fence taken, not complete
    throws = true;
    assert.equal(allocator.pendingFreeCount, 1);
    assert.throws(() => allocator.allocate(MiB), FenceError);
    allocator.validate();
    for (let i = 0; i < 3; i++) {
      const b = allocator.allocate(MiB); // never the pending block
      assert.notEqual(b.address, address);
      b.release();
      allocator.validate();
    }
    assert.equal(allocator.pendingFreeCount, 1);
    await allocator.synchronize();
    assert.equal(allocator.pendingFreeCount, 0);
    allocator.validate();
    done = true;
  });

  it("CachingAllocator.allocate() does not blame fragmentation when memory only waits on fences", () => {
    const { allocator } = setup(2 * MiB);
    const stream = new ManualStream();
    const a = allocator.allocate(2 * MiB);
    a.recordStream(stream);
    a.release();
    assert.throws(() => allocator.allocate(MiB), (e: Error) => {
      assert.ok(e instanceof CachingOutOfMemoryError);
      assert.doesNotMatch(e.message, /fragmentation/);
      assert.match(e.message, /only waiting on fences/);
      return true;
    });
    stream.completeAll();
    allocator.allocate(MiB).release();
  });

  it("CachingAllocator.allocate() costs about the same with 10,000 frees pending (one fence read per stream)", () => {
    const { allocator } = setup();
    const stream = new ManualStream();
    const held = [];
    for (let i = 0; i < 10_000; i++) {
      const b = allocator.allocate(512);
      b.recordStream(stream);
      held.push(b);
    }
    let reads = 0;
    const counting: Stream = {
      id: stream.id,
      fence() {
        const f = stream.fence();
        return {
          get completed() {
            reads++;
            return f.completed;
          },
          wait: () => f.wait(),
        };
      },
    };
    for (const b of held) {
      b.recordStream(counting);
      b.release();
    }
    reads = 0;
    for (let i = 0; i < 100; i++) allocator.allocate(512).release();
    assert.ok(reads <= 100, `${reads} fence reads for 100 allocations`);
    stream.completeAll();
    allocator.allocate(512).release();
    assert.equal(allocator.pendingFreeCount, 0);
    allocator.validate();
  });
  it("CachingAllocator.allocate() refuses a segment shorter than asked with SegmentSourceError, and gives it back", () => {
    const device = new MockSegmentSource();
    let short = true;
    const lying = {
      device: device.device,
      alignment: device.alignment,
      maxSegmentByteLength: device.maxSegmentByteLength,
      capacityBytes: device.capacityBytes,
      tryAllocateSegment(byteLength: number) {
        const seg = device.tryAllocateSegment(byteLength);
        return seg && short ? { ...seg, byteLength: byteLength / 2 } : seg;
      },
      freeSegment: (seg: Parameters<typeof device.freeSegment>[0]) =>
        device.freeSegment(seg),
    };
    const allocator = new CachingAllocator(lying, PYTORCH_SEGMENTS);
    assert.throws(
      () => allocator.allocate(4096),
      (e: Error) =>
        e instanceof SegmentSourceError &&
        /returned a segment of 1048576 bytes for a 2097152-byte request/.test(
          e.message,
        ),
    );
    assert.equal(allocator.reservedBytes, 0);
    allocator.validate();
    short = false;
    allocator.allocate(4096).release();
    allocator.validate();
  });
  it("CachingAllocator.allocate() keeps a tag in snapshots and history, counts dropped entries, and records the caller's frames first", () => {
    const { allocator } = setup(Infinity, {
      recordHistory: { maxEntries: 4, captureStack: true },
    });
    const a = allocator.allocate(4096, { tag: "conv1" });
    const b = allocator.withTag("attention", () => allocator.allocate(512));
    assert.throws(
      () => allocator.allocate(64, { tag: 5 as unknown as string }),
      InvalidArgumentError,
    );
    const snapshot = allocator.snapshot();
    const tags = snapshot.segments.flatMap((s) => s.blocks).map((b) => b.tag);
    assert.ok(tags.includes("conv1") && tags.includes("attention"));
    const alloc = snapshot.history.filter((e) => e.action === "alloc");
    assert.deepEqual(alloc.map((e) => e.tag), ["conv1", "attention"]);
    assert.match(alloc[0].stack!, /caching_allocator_test\.ts/);
    a.release();
    b.release();
    const later = allocator.snapshot();
    assert.ok(later.droppedEntries! > 0);
    assert.equal(
      later.history.find((e) => e.action === "free_completed")?.tag,
      "conv1",
    );
    allocator.validate();
  });
  it("CachingAllocator.allocateId() serves disjoint blocks by id, refuses stale and foreign ids, and matches the handle API's accounting (model)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ alloc: fc.integer({ min: 0, max: 3 * MiB }) }),
            fc.record({ free: fc.nat(), stale: fc.boolean() }),
            fc.constant({ empty: true }),
          ),
          { maxLength: 80 },
        ),
        (ops) => {
          const { device, allocator } = setup(64 * MiB);
          const live: {
            id: number;
            start: number;
            end: number;
            m: unknown;
            bytes: number;
          }[] = [];
          const dead: number[] = [];
          for (const op of ops) {
            if ("alloc" in op) {
              let id: number;
              try {
                id = allocator.allocateId(op.alloc);
              } catch (e) {
                assert.ok(e instanceof CachingOutOfMemoryError, String(e));
                continue;
              }
              const start = allocator.blockByteOffset(id);
              const bytes = allocator.blockByteLength(id);
              assert.ok(bytes >= allocator.roundSize(op.alloc));
              const entry = {
                id,
                start,
                end: start + bytes,
                m: allocator.blockMemory(id),
                bytes,
              };
              for (const o of live) {
                assert.ok(
                  o.m !== entry.m || o.end <= start || entry.end <= o.start,
                  "overlap",
                );
              }
              assert.ok(
                !live.some((o) => o.id === id) && !dead.includes(id),
                "id reused",
              );
              live.push(entry);
            } else if ("free" in op) {
              if (op.stale && dead.length > 0) {
                const id = dead[op.free % dead.length];
                assert.throws(() => allocator.freeById(id), DoubleFreeError);
                assert.throws(
                  () => allocator.blockByteOffset(id),
                  UseAfterFreeError,
                );
              } else if (live.length > 0) {
                const [e] = live.splice(op.free % live.length, 1);
                allocator.freeById(e.id);
                dead.push(e.id);
              }
            } else allocator.emptyCache();
            allocator.validate();
            assert.equal(
              allocator.allocatedBytes,
              live.reduce((n, e) => n + e.bytes, 0),
            );
          }
          for (const e of live) allocator.freeById(e.id);
          allocator.emptyCache();
          assert.equal(device.reservedBytes, 0);
        },
      ),
      { numRuns: modelRuns() },
    );
    const { allocator } = setup();
    const handle = allocator.allocate(512);
    for (const junk of [-1, 0.5, NaN, 2 ** 53, 12345]) {
      assert.throws(() => allocator.freeById(junk), DoubleFreeError);
    }
    assert.equal(allocator.allocatedBytes, 512);
    handle.release();
  });

  it("CachingAllocator.allocateId() makes no garbage on the hit path", {
    skip: gc === undefined,
  }, () => {
    const { allocator } = setup();
    allocator.freeById(allocator.allocateId(65536));
    for (let i = 0; i < 10_000; i++) {
      allocator.freeById(allocator.allocateId(65536));
    }
    const deltas: number[] = [];
    for (let r = 0; r < 5; r++) {
      gc!();
      const h0 = Deno.memoryUsage().heapUsed;
      for (let i = 0; i < 100_000; i++) {
        allocator.freeById(allocator.allocateId(65536));
      }
      deltas.push(Deno.memoryUsage().heapUsed - h0);
    }
    deltas.sort((a, b) => a - b);
    // 200,000 operations: under half a byte each (one object per operation
    // would be 16 bytes or more each: 3 MB)
    assert.ok(deltas[2] < 100_000, `heap grew ${deltas.join(", ")} bytes`);
  });
  it("CachingAllocator in strict mode junk-fills freed blocks (also after their fences) and is off by default", async () => {
    for (const strict of [true, false]) {
      const device = new MockSegmentSource({ backed: true });
      const allocator = new CachingAllocator(device, { strict });
      const a = allocator.allocate(1000);
      const bytes = (a.memory as { bytes: Uint8Array }).bytes;
      const view = bytes.subarray(a.byteOffset, a.byteOffset + 1000);
      view.fill(7);
      a.release();
      assert.equal(view.every((x) => x === JUNK_BYTE), strict);
      const stream = new ManualStream();
      const b = allocator.allocate(1000);
      const later = bytes.subarray(b.byteOffset, b.byteOffset + 1000);
      later.fill(9);
      b.recordStream(stream);
      b.release();
      assert.ok(later.every((x) => x === 9)); // still in use by the stream
      stream.completeAll();
      await allocator.synchronize();
      assert.equal(later.every((x) => x === JUNK_BYTE), strict);
      const id = allocator.allocateId(512);
      allocator.freeById(id);
      allocator.emptyCache();
    }
  });
});

describe("CachingAllocator strict mode hook", () => {
  it("CachingAllocator in strict mode runs the instance's validate() on every allocation, free and cache call; off, never", () => {
    for (const strict of [true, false]) {
      const allocator = new CachingAllocator(new MockSegmentSource(), {
        strict,
      });
      let calls = 0;
      const validate = allocator.validate.bind(allocator);
      Object.defineProperty(allocator, "validate", {
        value: () => {
          calls++;
          validate();
        },
      });
      const a = allocator.allocate(100); // 1
      a.release(); // 1
      allocator.freeById(allocator.allocateId(100)); // 2
      allocator.emptyCache(); // 1
      assert.equal(calls, strict ? 5 : 0);
    }
  });
});
