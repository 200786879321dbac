import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  Device,
  DoubleFreeError,
  type Fence,
  FenceError,
  InvalidArgumentError,
  ManualStream,
  type MockMemory,
  MockSegmentSource,
  type Segment,
  type SegmentSource,
  UnsupportedOperationError,
  UseAfterFreeError,
} from "@allot/core";
import {
  type BufferEvent,
  DebugVerbosity,
  SegmentSourceError,
  WatermarkAllocator,
  type WatermarkAllocatorOptions,
  WatermarkOutOfMemoryError,
} from "./mod.ts";
import { SMALL } from "./_test_options.ts";

const KiB = 1024;
const MiB = 1024 * KiB;

function setup(
  capacityBytes = 4 * MiB,
  options: WatermarkAllocatorOptions = {},
  backed = false,
) {
  const device = new MockSegmentSource({ capacityBytes, backed });
  const allocator = new WatermarkAllocator(device, { ...SMALL, ...options });
  const events: BufferEvent[] = [];
  allocator.addCallback((e) => events.push(e));
  return { device, allocator, events };
}

function heapSizes(
  device: MockSegmentSource,
  allocator: WatermarkAllocator<MockMemory>,
) {
  return allocator.snapshot().segments.map((s) => s.byteLength).concat(
    [device.reservedBytes],
  );
}

describe("WatermarkAllocator heaps and pools", () => {
  it("WatermarkAllocator picks the heap size by request size", () => {
    const { device, allocator } = setup(8 * MiB, { highWatermarkRatio: 0 });
    allocator.allocateBuffer(KiB); // small heap
    allocator.allocateBuffer(5 * KiB); // large heap
    allocator.allocateBuffer(100 * KiB); // extra-large heap
    allocator.allocateBuffer(999 * KiB); // own heap, rounded to 2 KiB
    assert.deepEqual(heapSizes(device, allocator), [
      8 * KiB,
      32 * KiB,
      1024 * KiB,
      1000 * KiB,
      (8 + 32 + 1024 + 1000) * KiB,
    ]);
    const s = allocator.snapshot().segments;
    assert.deepEqual(s.map((x) => x.split), [true, true, true, false]);
  });

  it("WatermarkAllocator packs buffers of a class into one heap", () => {
    const { device, allocator } = setup();
    const a = allocator.allocateBuffer(1000);
    const b = allocator.allocateBuffer(1000, { pool: "shared" });
    const c = allocator.allocateBuffer(1000);
    assert.equal(a.heapId, c.heapId);
    assert.notEqual(a.heapId, b.heapId);
    assert.equal(a.memory, c.memory);
    assert.notEqual(a.byteOffset, c.byteOffset);
    assert.equal(device.liveSegmentCount, 2);
    assert.equal(b.shared, true);
    assert.equal(a.shared, false);
  });

  it("WatermarkAllocator makes no extra-large heap under pressure or one that would reach the low watermark", () => {
    const { device, allocator } = setup(8 * MiB, {
      recommendedMaxBytes: 4 * MiB,
      highWatermarkRatio: 2,
      lowWatermarkRatio: 0.5, // 2 MiB
    });
    const a = allocator.allocateBuffer(400 * KiB); // 1 MiB heap: 0 + 1 < 2
    allocator.allocateBuffer(700 * KiB); // 1 + 1 MiB would reach 2: own heap
    allocator.allocateBuffer(400 * KiB); // fits in the first heap
    allocator.allocateBuffer(300 * KiB); // own heap
    assert.deepEqual(
      allocator.snapshot().segments.map((s) => s.byteLength),
      [MiB, 700 * KiB, 300 * KiB],
    );
    assert.equal(device.reservedBytes, 2024 * KiB);
    allocator.allocateBuffer(250 * KiB); // now under pressure: own heap
    assert.equal(allocator.lowWatermarkValue, 0);
    assert.equal(allocator.snapshot().segments.at(-1)?.byteLength, 250 * KiB);
    a.release();
  });

  it("WatermarkAllocator scales the default extra-large heap to small devices", () => {
    // Heaps grow with the bytes held: a buffer of half the device first
    // (a heap of its own) makes the next extra-large heap the largest.
    const heapOf = (capacityBytes: number) => {
      const allocator = new WatermarkAllocator(
        new MockSegmentSource({ capacityBytes }),
        { lowWatermarkRatio: 0 },
      );
      allocator.allocateBuffer(capacityBytes / 2);
      allocator.allocateBuffer(10 * MiB);
      return (allocator.totalAllocatedBytes - capacityBytes / 2) / MiB;
    };
    assert.equal(heapOf(64 * 1024 * MiB), 1024); // 1 GiB as in MPS
    assert.equal(heapOf(4 * 1024 * MiB), 256); // a sixteenth
    assert.equal(heapOf(256 * MiB), 32); // at least the large heap...
  });

  it("WatermarkAllocator falls back to an exact heap when a class heap breaks the high watermark", () => {
    const { device, allocator } = setup(200 * KiB, {
      highWatermarkRatio: 1,
      lowWatermarkRatio: 1,
    });
    const a = allocator.allocateBuffer(100 * KiB); // 1 MiB heap > 200 KiB limit
    assert.equal(device.reservedBytes, 100 * KiB);
    a.release();
  });

  it("WatermarkAllocator reuses a cached buffer by best fit within the slack", () => {
    const { allocator, events } = setup(4 * MiB, {
      maxSlackByteLength: 4 * KiB,
    });
    const bufs = [20, 30, 40].map((k) => allocator.allocateBuffer(k * KiB));
    for (const b of bufs) b.release();
    const ids = bufs.map((b) => b.id);
    const r = allocator.allocateBuffer(27 * KiB); // best fit: the 30 KiB one
    assert.equal(r.id, ids[1]);
    assert.equal(r.byteLength, 30 * KiB);
    assert.equal(r.requestedByteLength, 27 * KiB);
    assert.equal(events.at(-1)?.type, "recycled");
    // 40 KiB is more than 4 KiB larger than 12 KiB, and the 1 MiB heap has
    // room: a new buffer is made instead of reusing the oversize one.
    const n = allocator.allocateBuffer(12 * KiB);
    assert.ok(!ids.includes(n.id));
    assert.equal(events.at(-1)?.type, "allocated");
  });

  it("WatermarkAllocator releases an idle oversize buffer when no heap has room", () => {
    const { allocator, events } = setup(MiB, {
      maxSlackByteLength: 2 * KiB,
      highWatermarkRatio: 1,
      lowWatermarkRatio: 1,
    });
    // 1000 KiB: a heap of its own, full
    const big = allocator.allocateBuffer(1000 * KiB);
    const bigHeap = big.heapId;
    big.release();
    const small = allocator.allocateBuffer(50 * KiB);
    const released = events.find((e) => e.type === "released");
    assert.equal(released?.bufferId, big.id);
    assert.equal(released?.reason, "oversize");
    assert.equal(small.heapId, bigHeap); // reused the heap space
  });

  it("WatermarkAllocator releases an own heap with its oversize buffer rather than pin it with a small one", () => {
    const { device, allocator, events } = setup(4 * MiB, {
      lowWatermarkRatio: 0,
      maxSlackByteLength: 2 * KiB,
    });
    const big = allocator.allocateBuffer(600 * KiB); // a heap of its own
    const bigHeap = big.heapId;
    big.release();
    const small = allocator.allocateBuffer(5 * KiB); // belongs in a 32 KiB heap
    assert.notEqual(small.heapId, bigHeap);
    assert.equal(device.reservedBytes, 32 * KiB);
    assert.deepEqual(
      events.slice(-2).map((e) => e.reason ?? e.type),
      ["oversize", "allocated"],
    );
  });

  it("WatermarkAllocator narrows the reuse slack under memory pressure", () => {
    const run = (lowWatermarkRatio: number) => {
      const { allocator, events } = setup(MiB, {
        highWatermarkRatio: 1,
        lowWatermarkRatio,
        xlargeHeapByteLength: 64 * KiB, // 600 KiB gets a heap of its own
        minXlargeHeapByteLength: 64 * KiB,
        maxSlackByteLength: 200 * KiB,
      });
      const big = allocator.allocateBuffer(600 * KiB);
      big.release();
      const next = allocator.allocateBuffer(500 * KiB);
      return { next, big, events: events.slice(2).map((e) => e.type) };
    };
    const calm = run(0); // no pressure: the whole 600 KiB buffer is reused
    assert.equal(calm.next.id, calm.big.id);
    assert.equal(calm.next.byteLength, 600 * KiB);
    const pressed = run(0.5); // 600 KiB >= 512 KiB: only 2 KiB of slack
    assert.notEqual(pressed.next.id, pressed.big.id);
    assert.equal(pressed.next.byteLength, 500 * KiB);
    assert.deepEqual(pressed.events, ["released", "allocated"]);
  });

  it("WatermarkAllocator sends tiny requests to the shared pool on unified memory only", () => {
    const unified = setup().allocator.allocateBuffer(4);
    assert.equal(unified.pool, "shared");
    const discrete = setup(4 * MiB, { unifiedMemory: false }).allocator
      .allocateBuffer(4);
    assert.equal(discrete.pool, "private");
  });
});

describe("WatermarkAllocator watermarks", () => {
  it("WatermarkAllocator derives limits from the recommended size", () => {
    const { allocator } = setup(1000 * KiB);
    assert.equal(allocator.recommendedMaxBytes, 1000 * KiB);
    assert.equal(allocator.highWatermarkLimit, Math.floor(1.7 * 1000 * KiB));
    assert.equal(allocator.lowWatermarkLimit, Math.floor(1.4 * 1000 * KiB));
    const discrete = setup(1000 * KiB, { unifiedMemory: false }).allocator;
    assert.equal(discrete.lowWatermarkRatio, 1);
    const explicit = setup(1000 * KiB, { recommendedMaxBytes: 100 * KiB })
      .allocator;
    assert.equal(explicit.highWatermarkLimit, Math.floor(170 * KiB));
    const off = setup(MiB, { highWatermarkRatio: 0, lowWatermarkRatio: 0 })
      .allocator;
    assert.equal(off.highWatermarkLimit, Infinity);
    assert.equal(off.lowWatermarkValue, Infinity);
  });

  it("WatermarkAllocator refuses bad ratios and changes nothing", () => {
    const device = new MockSegmentSource({ capacityBytes: MiB });
    for (
      const options of [
        { highWatermarkRatio: -0.1 },
        { highWatermarkRatio: 2.5 },
        { highWatermarkRatio: NaN },
        { lowWatermarkRatio: 1.8 }, // above the default high 1.7
        { highWatermarkRatio: 1, lowWatermarkRatio: 1.2 },
        { smallHeapByteLength: 100 },
        { maxSlackByteLength: 1.5 },
        { recommendedMaxBytes: -1 },
      ]
    ) {
      assert.throws(
        () => new WatermarkAllocator(device, options),
        InvalidArgumentError,
        JSON.stringify(options),
      );
    }
    const allocator = new WatermarkAllocator(device);
    const before = allocator.stats();
    assert.throws(
      () => allocator.setHighWatermarkRatio(1.2), // below low 1.4
      /at least the low watermark ratio 1.4, received 1.2/,
    );
    assert.throws(() => allocator.setHighWatermarkRatio(3), /\[0, 2\]/);
    assert.throws(() => allocator.setLowWatermarkRatio(1.8), /\[0, 1.7\]/);
    assert.throws(() => allocator.setPerProcessMemoryFraction(-1));
    assert.deepEqual(allocator.stats(), before);
    allocator.setHighWatermarkRatio(0); // no limit: low may go up to 2
    allocator.setLowWatermarkRatio(2);
    assert.equal(allocator.lowWatermarkLimit, 2 * MiB);
  });

  it("WatermarkAllocator.setPerProcessMemoryFraction() sets the hard limit", () => {
    const { allocator } = setup(MiB);
    allocator.setPerProcessMemoryFraction(0.25);
    assert.equal(allocator.highWatermarkLimit, 256 * KiB);
    assert.equal(allocator.lowWatermarkRatio, 0.25);
    assert.throws(
      () => allocator.allocateBuffer(300 * KiB),
      WatermarkOutOfMemoryError,
    );
    allocator.setPerProcessMemoryFraction(0);
    allocator.allocateBuffer(300 * KiB).release();
  });

  it("WatermarkAllocator states allocated, other, max allowed and request when out of memory", () => {
    let other = 100 * KiB;
    const { allocator, events } = setup(MiB, {
      highWatermarkRatio: 1,
      lowWatermarkRatio: 1,
      driverAllocatedBytes: () => other + allocator.totalAllocatedBytes,
    });
    const a = allocator.allocateBuffer(500 * KiB);
    const before = allocator.stats();
    let error: WatermarkOutOfMemoryError | undefined;
    try {
      allocator.allocateBuffer(450 * KiB);
    } catch (e) {
      error = e as WatermarkOutOfMemoryError;
    }
    assert.ok(error instanceof WatermarkOutOfMemoryError);
    assert.match(
      error.message,
      /^Cannot allocate 450.00 KiB on the private pool: out of memory \(allocated: 500.00 KiB, other allocations: 100.00 KiB, max allowed: 1.00 MiB, requested: 450.00 KiB\)$/,
    );
    assert.equal(error.otherBytes, 100 * KiB);
    assert.equal(error.maxAllowedBytes, MiB);
    assert.equal(error.requestedBytes, 450 * KiB);
    assert.equal(events.at(-1)?.type, "allocation-failed");
    const after = allocator.stats();
    assert.equal(after.numAllocationFailures, 1);
    assert.deepEqual(
      { ...after, numAllocationFailures: 0 },
      { ...before, numAllocationFailures: 0 },
    );
    other = 0;
    allocator.allocateBuffer(450 * KiB).release(); // fits now
    a.release();
  });

  it("WatermarkAllocator collects cached buffers older than average only under pressure", () => {
    const { device, allocator, events } = setup(MiB, {
      highWatermarkRatio: 1,
      lowWatermarkRatio: 0.5,
      xlargeHeapByteLength: 64 * KiB, // requests of 32 KiB and more get own heaps
      minXlargeHeapByteLength: 64 * KiB,
    });
    const bufs = [100, 110, 120, 130].map((k) =>
      allocator.allocateBuffer(k * KiB)
    );
    assert.equal(allocator.stats().numGarbageCollections, 0);
    bufs[0].release();
    bufs[1].release();
    allocator.allocateBuffer(200 * KiB).release(); // ages 0 and 1 by one
    bufs[2].release();
    bufs[3].release();
    const driver = device.reservedBytes; // 660 KiB, low limit 512 KiB
    assert.equal(driver, 660 * KiB);
    assert.ok(driver >= allocator.lowWatermarkLimit);
    events.length = 0;
    allocator.allocateBuffer(300 * KiB);
    const gc = events.filter((e) => e.reason === "garbage-collection");
    assert.ok(gc.length >= 1);
    // the oldest (released first) go first
    assert.deepEqual(gc.map((e) => e.bufferId), [bufs[0].id, bufs[1].id]);
    assert.equal(device.reservedBytes, 750 * KiB);
    assert.equal(allocator.stats().numGarbageCollections, 1);
    assert.ok(device.reservedBytes <= allocator.highWatermarkLimit);
  });

  it("WatermarkAllocator collects small pools under pressure too", () => {
    const { device, allocator, events } = setup(MiB, {
      recommendedMaxBytes: 16 * KiB,
      highWatermarkRatio: 2,
      lowWatermarkRatio: 0.5, // 8 KiB
    });
    const bufs = Array.from(
      { length: 48 },
      () => allocator.allocateBuffer(256),
    );
    assert.equal(device.reservedBytes, 16 * KiB); // two small heaps
    for (const b of bufs) b.release();
    allocator.allocateBuffer(512); // no cached fit: collect, then allocate
    const gc = events.filter((e) => e.reason === "garbage-collection");
    assert.ok(gc.length >= 32, `${gc.length}`);
    assert.ok(device.freeCount >= 1); // a heap became empty and went back
    assert.ok(device.reservedBytes <= 16 * KiB);
  });

  it("WatermarkAllocator does not collect below the low watermark", () => {
    const { allocator, events } = setup(4 * MiB);
    const bufs = [100, 110, 120].map((k) => allocator.allocateBuffer(k * KiB));
    for (const b of bufs) b.release();
    allocator.allocateBuffer(300 * KiB);
    assert.equal(
      events.filter((e) => e.reason === "garbage-collection").length,
      0,
    );
    assert.equal(allocator.stats().numGarbageCollections, 0);
  });
});

describe("WatermarkAllocator order of attempts and callbacks", () => {
  it("WatermarkAllocator fires allocation-failed before releasing cached buffers", () => {
    const { allocator, events } = setup(MiB, {
      highWatermarkRatio: 1,
      lowWatermarkRatio: 1,
    });
    const a = allocator.allocateBuffer(600 * KiB, { pool: "shared" });
    a.release(); // cached in the shared pool
    events.length = 0;
    const b = allocator.allocateBuffer(600 * KiB); // private: no room
    assert.deepEqual(
      events.map((e) => `${e.type}${e.reason ? ":" + e.reason : ""}`),
      ["allocation-failed", "released:release-cached", "allocated"],
    );
    b.release();
  });

  it("WatermarkAllocator retries after an allocation-failed callback frees memory", () => {
    const { allocator, events } = setup(MiB, {
      highWatermarkRatio: 1,
      lowWatermarkRatio: 1,
    });
    const held = [allocator.allocateBuffer(600 * KiB)];
    allocator.addCallback((e) => {
      if (e.type === "allocation-failed") held.pop()?.release();
    });
    events.length = 0;
    const b = allocator.allocateBuffer(600 * KiB);
    assert.deepEqual(events.map((e) => e.type), [
      "allocation-failed",
      "freed",
      "recycled",
    ]);
    b.release();
  });

  it("WatermarkAllocator.addCallback() registers and removes callbacks at run time", () => {
    const { allocator } = setup();
    const seen: string[] = [];
    const lines: string[] = [];
    const remove = allocator.addCallback((e) => seen.push(`a:${e.type}`));
    const b = (e: BufferEvent) => seen.push(`b:${e.type}`);
    allocator.addCallback(b);
    const x = allocator.allocateBuffer(64);
    remove();
    assert.equal(allocator.removeCallback(b), true);
    assert.equal(allocator.removeCallback(b), false);
    x.release();
    assert.deepEqual(seen, ["a:allocated", "b:allocated"]);
    assert.throws(
      () => allocator.addCallback(42 as unknown as () => void),
      InvalidArgumentError,
    );
    const quiet = setup(MiB, { logger: (l) => lines.push(l) }).allocator;
    quiet.addCallback(() => {
      throw new Error("boom");
    });
    quiet.allocateBuffer(64).release(); // still works
    assert.ok(lines.some((l) => l.includes("boom")));
  });

  it("WatermarkAllocator stays consistent when callbacks re-enter it", () => {
    const lines: string[] = [];
    const { device, allocator } = setup(MiB, {
      highWatermarkRatio: 1,
      lowWatermarkRatio: 0.5,
      xlargeHeapByteLength: 64 * KiB,
      minXlargeHeapByteLength: 64 * KiB,
      logger: (l) => lines.push(l),
    });
    const stream = new ManualStream();
    allocator.addCallback((e) => {
      if (e.type === "released") allocator.emptyCache();
      if (e.type === "freed") allocator.freeInactiveBuffers();
    });
    const bufs = [100, 110, 120, 130, 140].map((k) =>
      allocator.allocateBuffer(k * KiB)
    );
    allocator.recordEvents(bufs.slice(0, 2), stream);
    for (const b of bufs) b.release();
    stream.completeAll();
    const big = allocator.allocateBuffer(300 * KiB); // GC under pressure
    assert.deepEqual(lines, []);
    const s = allocator.stats();
    assert.equal(s.reservedBytes.current, device.reservedBytes);
    assert.equal(s.allocatedBytes.current, 300 * KiB);
    big.release();
    allocator.emptyCache();
    assert.equal(device.reservedBytes, 0);
  });

  it("WatermarkAllocator logs by verbosity mask through the logger", () => {
    const lines: string[] = [];
    const { allocator } = setup(4 * MiB, {
      debugVerbosity: DebugVerbosity.allocations | DebugVerbosity.recycles |
        DebugVerbosity.releases,
      logger: (l) => lines.push(l),
    });
    allocator.allocateBuffer(64).release();
    allocator.allocateBuffer(64).release();
    allocator.emptyCache();
    assert.ok(lines.some((l) => l.startsWith("Allocated private buffer")));
    assert.ok(lines.some((l) => l.startsWith("Allocated small private heap")));
    assert.ok(lines.some((l) => l.startsWith("Reusing")));
    assert.ok(lines.some((l) => l.startsWith("Released buffer")));
    assert.ok(lines.some((l) => l.startsWith("Released heap")));
    lines.length = 0;
    const large = setup(4 * MiB, {
      debugVerbosity: DebugVerbosity.allocations | DebugVerbosity.largeOnly,
      logger: (l) => lines.push(l),
    }).allocator;
    large.allocateBuffer(64);
    assert.deepEqual(lines, []);
    large.allocateBuffer(20 * KiB);
    assert.equal(lines.length, 2); // heap + buffer
  });
});

describe("WatermarkAllocator events", () => {
  it("WatermarkAllocator frees a buffer in use by pending work only when the work completes", () => {
    const { allocator, events } = setup();
    const stream = new ManualStream();
    const a = allocator.allocateBuffer(5 * KiB);
    assert.equal(allocator.recordEvents([a], stream), true);
    a.release();
    assert.equal(events.at(-1)?.type, "allocated");
    assert.equal(allocator.stats().pendingFreeBytes, 5 * KiB);
    assert.equal(allocator.currentAllocatedBytes, 5 * KiB);
    const b = allocator.allocateBuffer(5 * KiB);
    assert.notEqual(b.id, a.id);
    assert.equal(allocator.freeInactiveBuffers(), 0);
    stream.complete();
    assert.equal(allocator.freeInactiveBuffers(), 1);
    assert.equal(events.at(-1)?.type, "freed");
    assert.equal(allocator.stats().pendingFreeBytes, 0);
    assert.equal(allocator.allocateBuffer(5 * KiB).id, a.id);
    assert.equal(allocator.recordEvents([], stream), false);
  });

  it("WatermarkAllocator.waitForEvents() waits for recorded work", async () => {
    const { allocator } = setup();
    const stream = new ManualStream();
    const a = allocator.allocateBuffer(64);
    assert.equal(await allocator.waitForEvents([a]), false);
    allocator.recordEvents([a], stream.fence());
    allocator.recordEvents([a], stream);
    const waited = allocator.waitForEvents([a]);
    stream.completeAll();
    assert.equal(await waited, true);
    a.release();
    assert.equal(allocator.stats().pendingFreeBytes, 0);
  });

  it("WatermarkAllocator.recordEvents() refuses released, foreign buffers and bad work, recording nothing", () => {
    const { allocator } = setup();
    const other = setup().allocator.allocateBuffer(64);
    const stream = new ManualStream();
    const a = allocator.allocateBuffer(64);
    const b = allocator.allocateBuffer(64);
    b.release();
    assert.throws(
      () => allocator.recordEvents([a, b], stream),
      UseAfterFreeError,
    );
    assert.throws(
      () => allocator.recordEvents([a, other], stream),
      InvalidArgumentError,
    );
    assert.throws(
      () => allocator.recordEvents([a], {} as unknown as ManualStream),
      InvalidArgumentError,
    );
    assert.equal(stream.submitted, 0);
    a.release(); // nothing was recorded: freed at once
    assert.equal(allocator.stats().pendingFreeBytes, 0);
  });

  it("WatermarkAllocator.allocateBufferAsync() waits for pending work, then releases everything", async () => {
    const { allocator, events } = setup(MiB, {
      highWatermarkRatio: 1,
      lowWatermarkRatio: 1,
    });
    const stream = new ManualStream();
    const a = allocator.allocateBuffer(600 * KiB);
    allocator.recordEvents([a], stream);
    a.release();
    assert.equal(
      allocator.tryAllocateBuffer(600 * KiB, { pool: "shared" }),
      undefined,
    );
    const p = allocator.allocateBufferAsync(600 * KiB, { pool: "shared" });
    setTimeout(() => stream.completeAll(), 1);
    const b = await p;
    assert.equal(b.pool, "shared");
    assert.ok(events.some((e) => e.type === "released" && e.bufferId === a.id));
    b.release();
    await assert.rejects(
      allocator.allocateBufferAsync(2 * MiB),
      WatermarkOutOfMemoryError,
    );
    await assert.rejects(
      allocator.allocateBufferAsync(-1),
      InvalidArgumentError,
    );
  });
});

describe("WatermarkAllocator buffer metadata", () => {
  it("WatermarkBuffer keeps id, sizes and a shape that resets on free", () => {
    const { allocator } = setup();
    const a = allocator.allocateBuffer(1000);
    assert.equal(a.requestedByteLength, 1000);
    assert.equal(a.byteLength, 1024);
    assert.deepEqual(a.shape, []);
    a.shape = [2, 5, 25];
    assert.deepEqual(a.shape, [2, 5, 25]);
    assert.throws(() => {
      a.shape = [2, -1];
    }, /dimension 1 must be a non-negative integer, received -1/);
    assert.deepEqual(a.shape, [2, 5, 25]);
    const id = a.id;
    a.release();
    assert.equal(a.released, true);
    assert.throws(() => a.shape, UseAfterFreeError);
    assert.throws(() => a.memory, UseAfterFreeError);
    const b = allocator.allocateBuffer(900);
    assert.equal(b.id, id);
    assert.deepEqual(b.shape, []);
    assert.equal(b.requestedByteLength, 900);
    assert.equal(
      allocator.snapshot().segments[0].blocks[0].requestedByteLength,
      900,
    );
  });

  it("WatermarkBuffer.sharedView() reads the host bytes of shared buffers", () => {
    const { allocator } = setup(4 * MiB, {}, true);
    const s = allocator.allocateBuffer(100, { pool: "shared" });
    const p = allocator.allocateBuffer(100);
    assert.equal(p.sharedView(), undefined);
    const view = s.sharedView()!;
    assert.equal(view.byteLength, 100);
    view.fill(7);
    assert.equal(s.sharedView()![99], 7);
    const unbacked = setup().allocator.allocateBuffer(100, { pool: "shared" });
    assert.equal(unbacked.sharedView(), undefined);
  });

  it("WatermarkAllocator serves an ArrayBuffer segment source with shared views", () => {
    const live = new Set<Segment<ArrayBuffer>>();
    const source: SegmentSource<ArrayBuffer> = {
      device: Device.cpu(),
      alignment: 64,
      maxSegmentByteLength: 64 * MiB,
      capacityBytes: 64 * MiB,
      tryAllocateSegment(byteLength) {
        const s = {
          memory: new ArrayBuffer(byteLength),
          byteOffset: 0,
          byteLength,
        };
        live.add(s);
        return s;
      },
      freeSegment(segment) {
        live.delete(segment);
      },
    };
    const allocator = new WatermarkAllocator(source, SMALL);
    const a = allocator.allocateBuffer(16, { pool: "shared" });
    a.sharedView()!.set([1, 2, 3]);
    assert.deepEqual(
      [...new Uint8Array(a.memory, a.byteOffset, 3)],
      [1, 2, 3],
    );
    const p = allocator.allocate(16);
    const q = allocator.allocate(16);
    new Uint8Array(p.memory!, p.byteOffset, 16).fill(9);
    allocator.copyData(q, p, 16);
    assert.equal(new Uint8Array(q.memory!, q.byteOffset, 16)[15], 9);
    p.release();
    q.release();
    a.release();
    allocator.emptyCache();
    assert.equal(live.size, 0);
  });

  it("WatermarkAllocator.allocScalarBufferWithValue() writes the value into the scalar pool", () => {
    const { allocator } = setup(4 * MiB, {}, true);
    const s = allocator.allocScalarBufferWithValue(Int32Array.of(-5, 7));
    assert.equal(s.pool, "scalar");
    assert.equal(s.shared, true);
    assert.deepEqual(
      [...new Int32Array(s.sharedView()!.slice().buffer)],
      [-5, 7],
    );
    s.release();
    assert.throws(
      () => allocator.allocScalarBufferWithValue(new Uint8Array(0)),
      InvalidArgumentError,
    );
    assert.throws(
      () => allocator.allocScalarBufferWithValue(new Uint8Array(2 * KiB)),
      /must be in \[1, 1024\]/,
    );
    const unbacked = setup().allocator;
    assert.throws(
      () => unbacked.allocScalarBufferWithValue(Float32Array.of(1)),
      UnsupportedOperationError,
    );
    assert.equal(unbacked.currentAllocatedBytes, 0);
  });

  it("WatermarkAllocator.allocate() gives owning data pointers and a raw interface", () => {
    const { allocator } = setup();
    const zero = allocator.allocate(0);
    assert.equal(zero.byteLength, 0);
    assert.equal(zero.owns, false);
    const ptr = allocator.allocate(300);
    assert.equal(allocator.currentAllocatedBytes, 512);
    ptr.release();
    assert.equal(allocator.currentAllocatedBytes, 0);
    const raw = allocator.rawAllocate(100);
    assert.equal(raw.requestedByteLength, 100);
    allocator.rawDeallocate(raw);
    assert.equal(allocator.currentAllocatedBytes, 0);
    const a = allocator.allocate(8);
    const b = allocator.allocate(8);
    assert.throws(() => allocator.copyData(a, b, 8), UnsupportedOperationError);
    assert.throws(() => allocator.copyData(a, b, 9), InvalidArgumentError);
  });
});

describe("WatermarkAllocator snapshots and shared stats", () => {
  it("WatermarkAllocator.snapshot() records history in @allot/caching's actions", () => {
    const { allocator } = setup(MiB, {
      highWatermarkRatio: 1,
      lowWatermarkRatio: 1,
      recordHistory: { maxEntries: 100 },
    });
    const stream = new ManualStream();
    const a = allocator.allocateBuffer(20 * KiB);
    allocator.recordEvents([a], stream);
    a.release();
    assert.equal(allocator.tryAllocateBuffer(2 * MiB), undefined);
    stream.completeAll();
    allocator.emptyCache();
    const snap = allocator.snapshot();
    assert.deepEqual(snap.history.map((e) => e.action), [
      "segment_alloc",
      "alloc",
      "free_requested",
      "oom",
      "free_completed",
      "segment_free",
      "snapshot",
    ]);
    const [segAlloc, alloc] = snap.history;
    assert.equal(segAlloc.byteLength, 20 * KiB); // a heap of its own
    assert.equal(alloc.address, segAlloc.address);
    assert.equal(alloc.requestedByteLength, 20 * KiB);
    assert.equal(snap.version, 1);
    assert.equal(snap.allocator, "WatermarkAllocator");
    assert.deepEqual(JSON.parse(JSON.stringify(snap)), snap);
    allocator.recordHistory(false);
    assert.deepEqual(allocator.snapshot().history, []);
  });

  it("WatermarkAllocator.memoryStats() splits figures by small and large pools", () => {
    const { allocator } = setup(4 * MiB);
    const stream = new ManualStream();
    const small = allocator.allocateBuffer(512);
    const large = allocator.allocateBuffer(20 * KiB);
    const own = allocator.allocateBuffer(1010 * KiB); // no room left: own heap
    allocator.recordEvents([large], stream);
    large.release(); // pending: active, not allocated
    let m = allocator.memoryStats();
    assert.equal(m.allocation.all.current, 2);
    assert.equal(m.active.all.current, 3);
    assert.equal(m.allocatedBytes.smallPool.current, 512);
    assert.equal(m.allocatedBytes.largePool.current, 1010 * KiB);
    assert.equal(m.activeBytes.largePool.current, 1030 * KiB);
    assert.equal(m.segment.all.current, 3);
    assert.equal(m.oversizeSegments.current, 1);
    assert.equal(m.oversizeAllocations.current, 1);
    assert.equal(m.maxSplitByteLength, 512 * KiB);
    stream.completeAll();
    small.release();
    allocator.freeInactiveBuffers();
    m = allocator.memoryStats();
    assert.equal(m.inactiveSplit.all.current, 2);
    assert.equal(m.inactiveSplitBytes.all.current, 512 + 20 * KiB);
    assert.equal(m.requestedBytes.all.current, 1010 * KiB);
    own.release();
    allocator.emptyCache();
    m = allocator.memoryStats();
    assert.equal(m.numDeviceAlloc, 3);
    assert.equal(m.numDeviceFree, 3);
    assert.equal(m.reservedBytes.all.current, 0);
    assert.equal(m.reservedBytes.all.peak, (8 + 1024 + 1010) * KiB);
    allocator.resetPeakStats();
    assert.equal(allocator.memoryStats().reservedBytes.all.peak, 0);
    assert.match(allocator.memorySummary(), /WatermarkAllocator on mock:0/);
  });
});

describe("WatermarkAllocator bad input and faults", () => {
  it("WatermarkAllocator refuses bad sizes and pools, changing nothing", () => {
    const { device, allocator } = setup(4 * MiB);
    const keep = allocator.allocateBuffer(64);
    const before = JSON.stringify(allocator.snapshot());
    for (const bad of [-1, 1.5, NaN, 2 ** 41, Infinity]) {
      assert.throws(() => allocator.allocateBuffer(bad), InvalidArgumentError);
      assert.throws(
        () => allocator.tryAllocateBuffer(bad),
        InvalidArgumentError,
      );
    }
    assert.throws(
      () =>
        allocator.allocateBuffer(64, {
          pool: "scalar" as unknown as "private",
        }),
      /pool must be "private" or "shared", received "scalar"/,
    );
    assert.throws(() => allocator.allocate(-1), InvalidArgumentError);
    assert.equal(JSON.stringify(allocator.snapshot()), before);
    assert.equal(device.allocationCount, 1);
    keep.release();
  });

  it("WatermarkAllocator.free() refuses double frees and foreign buffers", () => {
    const { allocator } = setup();
    const a = allocator.allocateBuffer(64);
    const foreign = setup().allocator.allocateBuffer(64);
    a.release();
    const before = allocator.stats();
    assert.throws(() => a.release(), DoubleFreeError);
    assert.throws(() => allocator.free(a), DoubleFreeError);
    // another allocator's buffer: a handle this one does not hold
    assert.throws(() => allocator.free(foreign), DoubleFreeError);
    assert.throws(() => allocator.free({} as never), InvalidArgumentError);
    assert.deepEqual(allocator.stats(), before);
  });

  it("WatermarkAllocator survives a segment source that throws or refuses", () => {
    const { device, allocator } = setup(4 * MiB);
    const keep = allocator.allocateBuffer(64);
    const before = JSON.stringify(allocator.snapshot());
    device.throwNext();
    assert.throws(() => allocator.allocateBuffer(20 * KiB), SegmentSourceError);
    assert.equal(JSON.stringify(allocator.snapshot()), before);
    // a refused class heap falls back to an exact heap
    device.failNext(1);
    const b = allocator.allocateBuffer(20 * KiB);
    assert.equal(allocator.snapshot().segments.at(-1)?.byteLength, 20 * KiB);
    // the device refusing everything: out of memory, usable afterwards
    device.capacityBytes = device.reservedBytes;
    assert.equal(allocator.tryAllocateBuffer(40 * KiB), undefined);
    device.capacityBytes = 4 * MiB;
    const c = allocator.tryAllocateBuffer(40 * KiB);
    for (const x of [keep, b, c]) x?.release();
    allocator.emptyCache();
    assert.equal(device.reservedBytes, 0);
  });

  it("WatermarkAllocator.emptyCache() releases cached buffers and heaps, keeping live ones", () => {
    const { device, allocator } = setup();
    const a = allocator.allocateBuffer(64);
    const b = allocator.allocateBuffer(20 * KiB);
    b.release();
    allocator.emptyCache();
    assert.equal(device.reservedBytes, 8 * KiB);
    const s = allocator.stats();
    assert.equal(s.reservedBytes.current, 8 * KiB);
    assert.equal(s.reservedBytes.peak, (8 + 1024) * KiB);
    assert.equal(s.allocatedBytes.current, 256);
    assert.equal(s.cachedBytes, 0);
    assert.equal(s.heaps.current, 1);
    assert.equal(s.numReleases, 1);
    a.release();
    allocator.emptyCache();
    assert.equal(device.reservedBytes, 0);
  });
});

describe("WatermarkAllocator deferred frees", () => {
  it("WatermarkAllocator reads one fence per stream per allocation, however many frees wait", () => {
    const allocator = new WatermarkAllocator(
      new MockSegmentSource({ capacityBytes: 1 << 30 }),
    );
    const stream = new ManualStream();
    let reads = 0;
    const counting = {
      id: stream.id,
      fence(): Fence {
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
    const held = [];
    for (let i = 0; i < 2_000; i++) held.push(allocator.allocateBuffer(256));
    for (const b of held) {
      allocator.recordEvents([b], counting);
      b.release();
    }
    reads = 0;
    for (let i = 0; i < 100; i++) allocator.allocateBuffer(256).release();
    assert.ok(reads <= 100, `${reads} fence reads for 100 allocations`);
    stream.completeAll();
    assert.equal(allocator.freeInactiveBuffers(), 2_000);
    assert.equal(allocator.stats().pendingFreeBytes, 0);
  });

  it("WatermarkAllocator survives a fence that throws: FenceError, then allocations work and synchronize returns the buffer", async () => {
    const allocator = new WatermarkAllocator(
      new MockSegmentSource({ capacityBytes: 1 << 30 }),
    );
    let throws = false;
    const fence: Fence = {
      get completed() {
        if (throws) throw new Error("device lost");
        return false;
      },
      wait: () => Promise.resolve(),
    };
    const a = allocator.allocateBuffer(256);
    const id = a.id;
    allocator.recordEvents([a], fence);
    a.release();
    throws = true;
    assert.throws(() => allocator.allocateBuffer(256), FenceError);
    for (let i = 0; i < 3; i++) {
      const b = allocator.allocateBuffer(256);
      assert.notEqual(b.id, id);
      b.release();
    }
    assert.equal(allocator.stats().pendingFreeBytes, 256);
    await allocator.synchronize();
    assert.equal(allocator.stats().pendingFreeBytes, 0);
  });
});

describe("WatermarkAllocator segment source", () => {
  it("WatermarkAllocator refuses a heap shorter than asked with SegmentSourceError and stays usable", () => {
    const device = new MockSegmentSource({ capacityBytes: 1 << 30 });
    let short = true;
    const lying: SegmentSource<MockMemory> = {
      device: device.device,
      alignment: device.alignment,
      maxSegmentByteLength: device.maxSegmentByteLength,
      capacityBytes: device.capacityBytes,
      tryAllocateSegment(byteLength: number) {
        const seg = device.tryAllocateSegment(byteLength);
        return seg && short ? { ...seg, byteLength: 256 } : seg;
      },
      freeSegment: (seg: Segment<MockMemory>) => device.freeSegment(seg),
    };
    const allocator = new WatermarkAllocator(lying);
    assert.throws(
      () => allocator.allocateBuffer(4096),
      (e: Error) =>
        e instanceof SegmentSourceError &&
        /returned a segment of 256 bytes/.test(e.message),
    );
    assert.equal(allocator.stats().reservedBytes.current, 0);
    short = false;
    allocator.allocateBuffer(4096).release();
  });
});

describe("WatermarkAllocator over the pooling core", () => {
  it("WatermarkAllocator's snapshot counts a pending buffer's requested bytes like its stats, and says how many history events were dropped", () => {
    const allocator = new WatermarkAllocator(
      new MockSegmentSource({ capacityBytes: 1 << 30 }),
      { recordHistory: { maxEntries: 3 } },
    );
    const stream = new ManualStream();
    const a = allocator.allocateBuffer(1000);
    const b = allocator.allocateBuffer(3000);
    allocator.recordEvents([a], stream);
    a.release(); // pending: its work runs
    const snapshot = allocator.snapshot();
    const requested = snapshot.segments.reduce(
      (sum, s) => sum + s.requestedBytes,
      0,
    );
    assert.equal(requested, 4000);
    assert.equal(requested, allocator.memoryStats().requestedBytes.all.current);
    assert.equal(snapshot.stats.requestedBytes.current, 4000);
    assert.ok((snapshot.droppedEntries ?? 0) > 0);
    stream.completeAll();
    b.release();
    allocator.validate();
  });

  it("WatermarkAllocator.resetAccumulatedStats() zeroes totals and counters, keeps current values", () => {
    const allocator = new WatermarkAllocator(
      new MockSegmentSource({ capacityBytes: 1 << 30 }),
    );
    const a = allocator.allocateBuffer(4096);
    allocator.allocateBuffer(4096).release();
    allocator.resetAccumulatedStats();
    const s = allocator.memoryStats();
    assert.equal(s.allocation.all.current, 1);
    assert.equal(s.allocation.all.allocated, 0);
    assert.equal(s.allocatedBytes.all.freed, 0);
    assert.equal(s.numDeviceAlloc, 0);
    assert.equal(allocator.stats().allocatedBytes.allocated, 0);
    a.release();
    assert.equal(allocator.memoryStats().allocation.all.freed, 1);
    allocator.validate();
  });
});
