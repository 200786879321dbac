/**
 * Ninth outside-in review of `@allot/watermark`: hostile options, a device
 * that throws, lies or is lost, `emptyCache()` / `freeInactiveBuffers()`
 * with live and after-fence blocks, and refused calls against a twin that
 * never saw them. `largeRoundByteLength: 3` was accepted and the first
 * large request under memory pressure failed with core's `alignUp` message
 * (the rounding must be a power of two); `driverAllocatedBytes: 5` was
 * accepted and silently ignored (it is called as a function).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllotError,
  InvalidArgumentError,
  ManualStream,
  type MockMemory,
  MockSegmentSource,
} from "@allot/core";
import {
  checkPattern,
  FaultySegmentSource,
  modelRuns,
  SEGMENT_FAULTS,
  type SegmentFault,
  writePattern,
} from "../core/_test_faults.ts";
import { trapObject } from "../core/_test_hostile.ts";
import {
  WatermarkAllocator,
  type WatermarkBuffer,
  WatermarkOutOfMemoryError,
} from "./mod.ts";
import { SMALL } from "./_test_options.ts";

const KiB = 1024;

describe("watermark ninth review: options", () => {
  for (const round of [3, 3000, 1.5, 0, -2048, NaN, 2 ** 53]) {
    it(`the constructor refuses largeRoundByteLength ${round} (not a power of two) with an InvalidArgumentError naming it`, () => {
      const source = new MockSegmentSource({ capacityBytes: 64 << 20 });
      assert.throws(
        () =>
          new WatermarkAllocator(source, {
            ...SMALL,
            largeRoundByteLength: round,
          }),
        (e) =>
          e instanceof InvalidArgumentError &&
          e.argument === "largeRoundByteLength" &&
          e.message.includes("largeRoundByteLength"),
      );
      assert.equal(source.allocationCount, 0);
    });
  }

  it("a power-of-two largeRoundByteLength serves large requests under pressure (a rounding of 3 failed only there)", () => {
    const allocator = new WatermarkAllocator<MockMemory>(
      new MockSegmentSource({ capacityBytes: 1 << 20 }),
      {
        ...SMALL,
        largeRoundByteLength: 4 * KiB,
        highWatermarkRatio: 1,
        lowWatermarkRatio: 0.01,
      },
    );
    const bufs: WatermarkBuffer<MockMemory>[] = [];
    for (let i = 0; i < 8; i++) {
      bufs.push(allocator.allocateBuffer(11 * KiB + 7));
    }
    allocator.validate();
    for (const b of bufs) allocator.free(b);
    allocator.validate();
  });

  for (const fn of [5, "x", {}, null, true]) {
    it(`the constructor refuses driverAllocatedBytes ${JSON.stringify(fn)} (not a function)`, () => {
      assert.throws(
        () =>
          new WatermarkAllocator(new MockSegmentSource(), {
            driverAllocatedBytes: fn as never,
          }),
        (e) =>
          e instanceof InvalidArgumentError &&
          e.argument === "driverAllocatedBytes",
      );
    });
  }
});

type Op =
  | { k: "alloc"; n: number }
  | { k: "free"; i: number }
  | { k: "fence"; i: number }
  | { k: "complete" }
  | { k: "emptyCache" }
  | { k: "freeInactive" }
  | { k: "fault"; f: SegmentFault; n: number }
  | { k: "hostile"; h: number };

const OP: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      k: fc.constant("alloc" as const),
      n: fc.integer({ min: 0, max: 1400 }).map((x) =>
        Math.round(Math.exp(x / 100))
      ),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ k: fc.constant("free" as const), i: fc.nat() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant("fence" as const), i: fc.nat() }),
  },
  { weight: 2, arbitrary: fc.constant({ k: "complete" as const }) },
  { weight: 1, arbitrary: fc.constant({ k: "emptyCache" as const }) },
  { weight: 1, arbitrary: fc.constant({ k: "freeInactive" as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant("fault" as const),
      f: fc.constantFrom(...SEGMENT_FAULTS.filter((f) => f !== "reenter")),
      n: fc.integer({ min: 0, max: 1400 }).map((x) =>
        Math.round(Math.exp(x / 100))
      ),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ k: fc.constant("hostile" as const), h: fc.nat() }),
  },
);

/** Calls that must be refused with a typed error and change nothing. */
function hostileCalls(
  a: WatermarkAllocator<MockMemory>,
  stranger: WatermarkBuffer<MockMemory>,
  freed: WatermarkBuffer<MockMemory> | undefined,
): (() => unknown)[] {
  const calls: (() => unknown)[] = [
    () => a.allocateBuffer(NaN),
    () => a.allocateBuffer(-1),
    () => a.allocateBuffer(2 ** 53),
    () => a.allocateBuffer(1.5),
    () => a.allocateBuffer(Object.create(null)),
    () => a.allocateBuffer(8, { pool: "gpu" } as never),
    () => a.allocateBuffer(8, { sharred: true } as never),
    () => a.allocate(-0.5),
    () => a.setHighWatermarkRatio(NaN),
    () => a.setHighWatermarkRatio(2.5),
    () => a.setHighWatermarkRatio(Object.create(null)),
    () => a.setLowWatermarkRatio(-1),
    () => a.setLowWatermarkRatio(3),
    () => a.setPerProcessMemoryFraction(-1),
    () => a.setPerProcessMemoryFraction(Infinity),
    () => a.free(stranger),
    () => a.free(null as never),
    () => a.free(Object.create(null)),
    () => a.recordStream(stranger, new ManualStream()),
    () => a.memorySummary({ bogus: 1 } as never),
    () => a.recordHistory({ maxEntries: -1 }),
  ];
  if (freed !== undefined) calls.push(() => a.free(freed));
  return calls;
}

/** Stats, memory stats and snapshot; `twin` leaves out the ids (they are global, so twins' differ). */
function figures(a: WatermarkAllocator<MockMemory>, twin = false): string {
  return JSON.stringify(
    [a.stats(), a.memoryStats(), a.snapshot()],
    twin
      ? (k, v) => (k === "id" || k === "bufferId" ? undefined : v)
      : undefined,
  );
}

describe("watermark ninth review: model with refused calls, faults and fences", () => {
  it("refused calls change nothing (a twin that never saw them agrees), live buffers keep their bytes, faults are typed", () => {
    fc.assert(
      fc.property(
        fc.array(OP, { minLength: 1, maxLength: 60 }),
        fc.boolean(),
        (ops, adaptive) => {
          const make = () => {
            const source = new FaultySegmentSource(
              new MockSegmentSource({ capacityBytes: 4 << 20, backed: true }),
            );
            const allocator = new WatermarkAllocator<MockMemory>(source, {
              ...SMALL,
              ...(adaptive ? { minSmallHeapByteLength: 512 } : {}),
              highWatermarkRatio: 1,
            });
            return { source, allocator };
          };
          const a = make(), b = make();
          const other: WatermarkAllocator<MockMemory> = make().allocator;
          const stranger = other.allocateBuffer(64);
          const live: {
            x: WatermarkBuffer<MockMemory>;
            y: WatermarkBuffer<MockMemory>;
            id: number;
          }[] = [];
          const streams: [ManualStream, ManualStream][] = [];
          let lastFreed: WatermarkBuffer<MockMemory> | undefined;
          let nextId = 1;
          const bytesOf = (w: WatermarkBuffer<MockMemory>) =>
            w.memory.bytes!.subarray(w.byteOffset, w.byteOffset + w.byteLength);
          const alloc = (n: number) => {
            let x, y;
            let ex: unknown, ey: unknown;
            try {
              x = a.allocator.allocateBuffer(n);
            } catch (e) {
              ex = e;
            }
            try {
              y = b.allocator.allocateBuffer(n);
            } catch (e) {
              ey = e;
            }
            if (ex !== undefined || ey !== undefined) {
              assert.ok(ex instanceof AllotError, String(ex));
              assert.ok(ey instanceof AllotError, String(ey));
              assert.equal(
                (ex as Error).constructor,
                (ey as Error).constructor,
              );
              return;
            }
            const id = nextId++;
            writePattern(bytesOf(x!), id);
            writePattern(bytesOf(y!), id);
            live.push({ x: x!, y: y!, id });
          };
          for (const op of ops) {
            switch (op.k) {
              case "alloc":
                alloc(op.n);
                break;
              case "fault":
                a.source.arm(op.f);
                b.source.arm(op.f);
                alloc(op.n);
                a.source.arm(undefined);
                b.source.arm(undefined);
                break;
              case "free": {
                if (live.length === 0) break;
                const [e] = live.splice(op.i % live.length, 1);
                a.allocator.free(e.x);
                b.allocator.free(e.y);
                lastFreed = e.x;
                break;
              }
              case "fence": {
                if (live.length === 0) break;
                const e = live[op.i % live.length];
                const s: [ManualStream, ManualStream] = [
                  new ManualStream(),
                  new ManualStream(),
                ];
                a.allocator.recordStream(e.x, s[0]);
                b.allocator.recordStream(e.y, s[1]);
                streams.push(s);
                break;
              }
              case "complete":
                for (const [s, t] of streams.splice(0)) {
                  s.completeAll();
                  t.completeAll();
                }
                break;
              case "emptyCache":
                a.allocator.emptyCache();
                b.allocator.emptyCache();
                break;
              case "freeInactive":
                assert.equal(
                  a.allocator.freeInactiveBuffers(),
                  b.allocator.freeInactiveBuffers(),
                );
                break;
              case "hostile": {
                const calls = hostileCalls(a.allocator, stranger, lastFreed);
                const before = figures(a.allocator);
                const call = calls[op.h % calls.length];
                assert.throws(call, AllotError);
                assert.equal(figures(a.allocator), before);
                break;
              }
            }
            for (const e of live) {
              checkPattern(bytesOf(e.x), e.id, "buffer");
              checkPattern(bytesOf(e.y), e.id, "twin buffer");
            }
            assert.equal(
              figures(a.allocator, true),
              figures(b.allocator, true),
            );
          }
          a.allocator.validate();
          b.allocator.validate();
        },
      ),
      { numRuns: modelRuns(150) },
    );
  });
});

describe("watermark ninth review: option bags whose keys cannot be read", () => {
  it("the constructor, allocateBuffer(), memorySummary() and recordHistory() refuse a trap proxy as options, changing nothing", () => {
    const source = new MockSegmentSource({ capacityBytes: 64 << 20 });
    assert.throws(
      () => new WatermarkAllocator(source, trapObject() as never),
      InvalidArgumentError,
    );
    assert.equal(source.allocationCount, 0);
    const allocator = new WatermarkAllocator<MockMemory>(source, SMALL);
    const kept = allocator.allocateBuffer(100);
    const before = figures(allocator);
    for (
      const call of [
        () => allocator.allocateBuffer(8, trapObject() as never),
        () => allocator.memorySummary(trapObject() as never),
        () => allocator.recordHistory(trapObject() as never),
      ]
    ) {
      assert.throws(call, InvalidArgumentError);
      assert.equal(figures(allocator), before);
    }
    allocator.free(kept);
  });
});

describe("watermark ninth review: work that traps when read", () => {
  it("recordStream() and recordEvents() refuse a stream or fence that traps when read (or whose fence() returns one) with a typed error, recording nothing", () => {
    const allocator = new WatermarkAllocator<MockMemory>(
      new MockSegmentSource({ capacityBytes: 64 << 20, backed: true }),
      SMALL,
    );
    const b = allocator.allocateBuffer(100);
    const before = figures(allocator);
    const works: unknown[] = [
      trapObject(),
      { id: 1, fence: () => trapObject() },
      {
        fence: () => new ManualStream().fence(),
        get id(): never {
          throw new Error("id");
        },
      },
    ];
    for (const work of works) {
      assert.throws(
        () => allocator.recordStream(b, work as never),
        InvalidArgumentError,
      );
      assert.throws(
        () => allocator.recordEvents([b], work as never),
        InvalidArgumentError,
      );
      assert.equal(figures(allocator), before);
    }
    // the buffer has no fence: freed at once
    allocator.free(b);
    assert.equal(allocator.stats().pendingFreeBytes, 0);
    allocator.validate();
  });
});

describe("watermark ninth review: the out-of-memory message", () => {
  it("allocateBuffer() reads options.pool once: the out-of-memory error names the pool that was checked (a getter's second answer threw a raw error)", () => {
    const allocator = new WatermarkAllocator<MockMemory>(
      new MockSegmentSource({ capacityBytes: 1 << 20 }),
      { ...SMALL, highWatermarkRatio: 1 },
    );
    for (const second of [trapObject(), "shared", { toString: () => "x" }]) {
      let reads = 0;
      const options = {
        get pool() {
          return ++reads === 1 ? "private" : second;
        },
      };
      assert.throws(
        () => allocator.allocateBuffer(4 << 20, options as never),
        (e) =>
          e instanceof WatermarkOutOfMemoryError &&
          /on the private pool/.test(e.message) &&
          e.requestedBytes === 4 << 20,
      );
      assert.equal(reads, 1);
    }
    allocator.validate();
  });
});
