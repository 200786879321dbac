/**
 * Ninth outside-in review of `@allot/core`: the byte formatters, the
 * segment helpers every pooling allocator calls with its collaborator, and
 * the out-of-memory error's figures. `formatBytes(Object.create(null))`
 * threw a raw `TypeError` (it is called while building other errors'
 * messages); `acquireSegment(null, ...)`, `resizeSegment(null, ...)` and
 * `releaseSegment(null, ...)` threw a raw `TypeError` where a typed error is
 * expected, as did a source whose `device` cannot be printed. And
 * `validateOptionKeys()`, which every option bag of every package goes
 * through, let a raw error escape for options whose keys cannot be read (a
 * trap or revoked proxy). `formatMemorySummary()`,
 * `flattenMemoryStats()` and `formatStatsSummary()` let raw errors escape
 * for stats records that trap or hold a null-prototype object where a
 * number goes. `isHostMemory()`, `hostBuffer()`, `junkFill()`,
 * `MockSegmentSource.freeSegment()` / `tryResizeSegment()` and
 * `SegmentLedger` threw raw errors for a memory or segment that traps when
 * read.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  acquireSegment,
  AllotError,
  captureCallStack,
  flattenMemoryStats,
  formatBytes,
  formatMemorySummary,
  formatSize,
  formatStatsSummary,
  hostBuffer,
  InvalidArgumentError,
  isHostMemory,
  junkFill,
  LeakDetector,
  type MockMemory,
  MockSegmentSource,
  OutOfMemoryError,
  PoolStats,
  releaseSegment,
  resizeSegment,
  type Segment,
  SegmentLedger,
  SegmentSourceError,
  TraceRecorder,
  validateOptionKeys,
} from "./mod.ts";
import { modelRuns } from "./_test_faults.ts";
import { trapObject } from "./_test_hostile.ts";

const UNPRINTABLE: [string, unknown][] = [
  ["a null-prototype object", Object.create(null)],
  ["an object whose toString throws", {
    toString() {
      throw new Error("no");
    },
  }],
  ["an object whose Symbol.toPrimitive throws", {
    [Symbol.toPrimitive]() {
      throw new Error("no");
    },
  }],
  [
    "a revoked proxy",
    (() => {
      const { proxy, revoke } = Proxy.revocable({}, {});
      revoke();
      return proxy;
    })(),
  ],
];

describe("core ninth review: formatBytes() and formatSize()", () => {
  for (const [name, value] of UNPRINTABLE) {
    it(`formatBytes() and formatSize() describe ${name} instead of throwing`, () => {
      const a = formatBytes(value as number);
      const b = formatSize(value as number);
      assert.equal(typeof a, "string");
      assert.equal(typeof b, "string");
      assert.ok(a.length > 0 && b.length > 0);
    });
  }

  it("formatBytes() keeps its answers for numbers and the odd primitives", () => {
    assert.equal(formatBytes(512), "512 bytes");
    assert.equal(formatBytes(Infinity), "unlimited");
    assert.equal(formatBytes(NaN), "NaN");
    assert.equal(formatBytes(-Infinity), "-Infinity");
    assert.equal(formatBytes(-0), "0 bytes");
    assert.equal(formatBytes(1024), "1.00 KiB");
    assert.equal(typeof formatBytes(Symbol("s") as never), "string");
    assert.equal(typeof formatBytes(10n as never), "string");
    assert.equal(typeof formatBytes(undefined as never), "string");
  });

  it("formatBytes() never throws and always names a unit for finite numbers", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (n) => {
        const text = formatBytes(n);
        assert.match(text, /^-?[0-9.e+-]+ (bytes|KiB|MiB|GiB|TiB)$/);
      }),
      { numRuns: modelRuns() },
    );
    fc.assert(
      fc.property(fc.anything(), (v) => {
        assert.equal(typeof formatBytes(v as number), "string");
      }),
      { numRuns: modelRuns() },
    );
  });
});

function isSourceError(e: unknown): boolean {
  return e instanceof InvalidArgumentError && /source/.test(e.message) &&
    e.argument === "source";
}

describe("core ninth review: segment helpers with a missing or broken source", () => {
  const NOT_SOURCES: [string, unknown][] = [
    ["null", null],
    ["undefined", undefined],
    ["a number", 5],
    ["a string", "mock"],
  ];
  for (const [name, source] of NOT_SOURCES) {
    it(`acquireSegment(), resizeSegment() and releaseSegment() refuse ${name} as the source with an InvalidArgumentError`, () => {
      const real = new MockSegmentSource({ capacityBytes: 1 << 20 });
      const segment = real.tryAllocateSegment(4096, { resizable: true })!;
      assert.throws(
        () => acquireSegment(source as never, 4096, 100),
        isSourceError,
      );
      assert.throws(
        () => resizeSegment(source as never, segment, 8192, 100),
        isSourceError,
      );
      assert.throws(
        () => releaseSegment(source as never, segment, "segment 1"),
        isSourceError,
      );
      // the real source never saw any of it
      assert.equal(real.liveSegmentCount, 1);
      real.freeSegment(segment);
      assert.equal(real.liveSegmentCount, 0);
    });
  }

  for (const [name, device] of UNPRINTABLE) {
    it(`a source whose device is ${name} gets a SegmentSourceError, not a raw error, when it throws`, () => {
      const source = {
        device,
        alignment: 256,
        maxSegmentByteLength: 1 << 30,
        capacityBytes: 1 << 30,
        tryAllocateSegment(): Segment<unknown> {
          throw new Error("device lost");
        },
        tryResizeSegment(): Segment<unknown> {
          throw new Error("device lost");
        },
        freeSegment(): void {
          throw new Error("device lost");
        },
      };
      const segment = { memory: {}, byteOffset: 0, byteLength: 4096 };
      for (
        const call of [
          () => acquireSegment(source as never, 4096, 100),
          () => resizeSegment(source as never, segment, 8192, 100),
          () => releaseSegment(source as never, segment, "segment 1"),
        ]
      ) {
        assert.throws(call, (e) =>
          e instanceof SegmentSourceError &&
          /device lost/.test(e.message));
      }
    });
  }

  it("a source whose device getter throws gets a SegmentSourceError when it returns a short segment", () => {
    let freed = 0;
    const source = {
      get device(): never {
        throw new Error("gone");
      },
      alignment: 256,
      maxSegmentByteLength: 1 << 30,
      capacityBytes: 1 << 30,
      tryAllocateSegment(n: number) {
        return { memory: {}, byteOffset: 0, byteLength: n - 1 };
      },
      freeSegment() {
        freed++;
      },
    };
    assert.throws(
      () => acquireSegment(source as never, 4096, 100),
      SegmentSourceError,
    );
    assert.equal(freed, 1);
  });

  it("the helpers keep segments' bytes and the source's books over random runs with refused calls between them", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ k: fc.constant("take" as const), n: fc.nat(16) }),
            fc.record({ k: fc.constant("give" as const), i: fc.nat(64) }),
            fc.record({
              k: fc.constant("grow" as const),
              i: fc.nat(64),
              n: fc.nat(16),
            }),
            fc.record({
              k: fc.constant("junk" as const),
              v: fc.constantFrom<unknown>(null, undefined, 0, "x", true),
            }),
          ),
          { maxLength: 40 },
        ),
        (ops) => {
          const source = new MockSegmentSource({
            capacityBytes: 1 << 16,
            backed: true,
          });
          const live: { s: Segment<MockMemory>; b: number }[] = [];
          let pattern = 1;
          const fill = (x: { s: Segment<MockMemory>; b: number }) => {
            x.s.memory.bytes!.fill(
              x.b,
              x.s.byteOffset,
              x.s.byteOffset + x.s.byteLength,
            );
          };
          const check = () => {
            for (const x of live) {
              const bytes = x.s.memory.bytes!.subarray(
                x.s.byteOffset,
                x.s.byteOffset + x.s.byteLength,
              );
              assert.ok(bytes.every((b) => b === x.b));
            }
            assert.equal(source.liveSegmentCount, live.length);
          };
          for (const op of ops) {
            if (op.k === "take") {
              const s = acquireSegment(source, 256 * (op.n + 1), 1, {
                resizable: true,
              });
              if (s !== undefined) {
                const x = { s, b: pattern++ & 0xff || 1 };
                fill(x);
                live.push(x);
              }
            } else if (op.k === "give" && live.length > 0) {
              const [x] = live.splice(op.i % live.length, 1);
              releaseSegment(source, x.s, "segment");
            } else if (op.k === "grow" && live.length > 0) {
              const x = live[op.i % live.length];
              const next = 256 * (op.n + 1);
              const r = resizeSegment(source, x.s, next, 1);
              if (r !== undefined) {
                x.s = r;
                fill(x);
              }
            } else if (op.k === "junk") {
              for (
                const call of [
                  () => acquireSegment(op.v as never, 256, 1),
                  () =>
                    live.length > 0
                      ? resizeSegment(op.v as never, live[0].s, 512, 1)
                      : acquireSegment(op.v as never, 256, 1),
                  () =>
                    live.length > 0
                      ? releaseSegment(op.v as never, live[0].s, "s")
                      : acquireSegment(op.v as never, 256, 1),
                ]
              ) {
                assert.throws(call, AllotError);
              }
            }
            check();
          }
          for (const x of live) releaseSegment(source, x.s, "segment");
          assert.equal(source.liveSegmentCount, 0);
        },
      ),
      { numRuns: modelRuns(200) },
    );
  });
});

describe("core ninth review: OutOfMemoryError", () => {
  it("new OutOfMemoryError() with details that are not an object is still an OutOfMemoryError (it threw a raw TypeError)", () => {
    for (const details of [null, undefined, 5, Object.create(null)]) {
      const e = new OutOfMemoryError(
        "Cannot allocate 4 bytes",
        details as never,
      );
      assert.ok(e instanceof OutOfMemoryError);
      assert.equal(e.message, "Cannot allocate 4 bytes");
      assert.equal(e.freeBytes, undefined);
    }
    const e = new OutOfMemoryError("m", {
      requestedBytes: 4,
      freeBytes: 2,
      capacityBytes: 8,
    });
    assert.deepEqual(
      [e.requestedBytes, e.freeBytes, e.capacityBytes, e.reservedBytes],
      [4, 2, 8, undefined],
    );
  });
});

describe("core ninth review: option bags whose keys cannot be read", () => {
  const UNREADABLE: [string, () => object][] = [
    ["a trap proxy", () => trapObject()],
    ["a revoked proxy", () => {
      const { proxy, revoke } = Proxy.revocable({}, {});
      revoke();
      return proxy;
    }],
    ["a proxy whose ownKeys throws", () =>
      new Proxy({}, {
        ownKeys() {
          throw new Error("keys");
        },
      })],
  ];
  for (const [name, make] of UNREADABLE) {
    it(`validateOptionKeys() and the option bags of core refuse ${name} with an InvalidArgumentError (a raw error escaped)`, () => {
      assert.throws(
        () => validateOptionKeys(make(), ["a"], "X()"),
        (e) =>
          e instanceof InvalidArgumentError && /X\(\)/.test(e.message) &&
          e.cause !== undefined,
      );
      for (
        const call of [
          () => new MockSegmentSource(make() as never),
          () => new TraceRecorder(make() as never),
          () => new LeakDetector(make() as never),
          () => captureCallStack(make() as never),
        ]
      ) {
        assert.throws(call, InvalidArgumentError);
      }
    });
  }
});

describe("core ninth review: stats records that trap or hold non-numbers", () => {
  const good = () => new PoolStats().memoryStats(Infinity);
  const broken: [string, (s: Record<string, unknown>) => void][] = [
    ["a null-prototype counter", (s) => s.numOoms = Object.create(null)],
    ["a null-prototype stat value", (s) => {
      (s.allocatedBytes as Record<string, Record<string, unknown>>).all
        .current = Object.create(null);
    }],
    ["a trapping figure", (s) => s.allocatedBytes = trapObject()],
    ["a trapping pool", (s) => {
      (s.segment as Record<string, unknown>).largePool = trapObject();
    }],
    ["a trapping oversize figure", (s) => s.oversizeSegments = trapObject()],
    ["a throwing getter", (s) =>
      Object.defineProperty(s, "numDeviceFree", {
        get() {
          throw new Error("getter");
        },
      })],
    ["a string counter", (s) => s.numAllocRetries = "3"],
  ];
  for (const [name, spoil] of broken) {
    it(`formatMemorySummary() and flattenMemoryStats() refuse stats with ${name} with an InvalidArgumentError (raw errors escaped, or junk was printed)`, () => {
      const stats = good() as unknown as Record<string, unknown>;
      spoil(stats);
      assert.throws(
        () => formatMemorySummary(stats as never),
        InvalidArgumentError,
      );
      assert.throws(
        () => flattenMemoryStats(stats as never),
        InvalidArgumentError,
      );
    });
  }

  it("formatMemorySummary() and flattenMemoryStats() of a trap, and formatStatsSummary() of records that trap, are refused with an InvalidArgumentError", () => {
    for (
      const call of [
        () => formatMemorySummary(trapObject() as never),
        () => flattenMemoryStats(trapObject() as never),
        () => formatStatsSummary(trapObject()),
        () => formatStatsSummary({ requestedBytes: trapObject() }),
        () =>
          formatStatsSummary({
            get reservedBytes(): number {
              throw new Error("getter");
            },
          }),
      ]
    ) {
      assert.throws(call, InvalidArgumentError);
    }
    // good records still print
    assert.match(formatMemorySummary(good()), /Allocated memory/);
    assert.equal(flattenMemoryStats(good()).num_ooms, 0);
    assert.match(
      formatStatsSummary({ reservedBytes: 1024, a: Object.create(null) }),
      /reserved bytes: 1\.00 KiB/,
    );
  });
});

describe("core ninth review: memories and segments that trap when read", () => {
  it("isHostMemory() answers false, hostBuffer() refuses with an InvalidArgumentError and junkFill() fills nothing for a memory that traps", () => {
    assert.equal(isHostMemory(trapObject()), false);
    assert.throws(
      () => hostBuffer(trapObject() as never),
      InvalidArgumentError,
    );
    assert.equal(junkFill(trapObject(), 0, 4), false);
  });

  it("MockSegmentSource.freeSegment()/tryResizeSegment() and SegmentLedger refuse a segment that traps with a typed error, changing nothing", () => {
    const source = new MockSegmentSource({ capacityBytes: 1 << 20 });
    const live = source.tryAllocateSegment(4096, { resizable: true })!;
    assert.throws(() => source.freeSegment(trapObject() as never), AllotError);
    assert.throws(
      () => source.tryResizeSegment(trapObject() as never, 8192),
      AllotError,
    );
    const ledger = new SegmentLedger("test:0");
    assert.throws(() => ledger.add(trapObject() as never), AllotError);
    assert.throws(() => ledger.remove(trapObject() as never), AllotError);
    assert.throws(() => ledger.bytesOf(trapObject() as never), AllotError);
    assert.equal(ledger.liveSegmentCount, 0);
    assert.equal(source.liveSegmentCount, 1);
    assert.equal(source.reservedBytes, 4096);
    source.freeSegment(live);
  });

  it("resizeSegment()'s message names a segment whose length cannot be read in plain words", () => {
    const source = new MockSegmentSource({ capacityBytes: 1 << 20 });
    assert.throws(
      () => resizeSegment(source, trapObject() as never, 8192, 100),
      (e) =>
        e instanceof AllotError && !/a an /.test(e.message) &&
        /segment/.test(e.message),
    );
  });
});

describe("core ninth review: history recorder limits (held)", () => {
  it("TraceRecorder keeps the newest maxEntries in order, counts the dropped, and a refused record changes nothing", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(
          fc.oneof(
            fc.record({ ok: fc.constant(true), a: fc.nat(1 << 20) }),
            fc.record({
              ok: fc.constant(false),
              a: fc.constantFrom(-1, NaN, 1.5, 2 ** 53),
            }),
          ),
          { maxLength: 40 },
        ),
        (max, records) => {
          const r = new TraceRecorder({ maxEntries: max });
          const kept: number[] = [];
          for (const { ok, a } of records) {
            const before = [r.size, r.droppedEntries];
            if (ok) {
              r.record("alloc", a, 8, 8, 0);
              kept.push(a);
            } else {
              assert.throws(
                () => r.record("alloc", a, 8, 8, 0),
                InvalidArgumentError,
              );
              assert.deepEqual([r.size, r.droppedEntries], before);
            }
          }
          assert.deepEqual(
            r.entries().map((e) => e.address),
            kept.slice(-max),
          );
          assert.equal(r.droppedEntries, Math.max(0, kept.length - max));
          r.clear();
          assert.deepEqual([r.size, r.droppedEntries], [0, 0]);
        },
      ),
      { numRuns: modelRuns(300) },
    );
  });
});
