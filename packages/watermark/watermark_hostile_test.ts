/**
 * Hostile tests of `@allot/watermark` beyond the adversarial table: callbacks
 * that throw or re-enter the allocator, segment sources that re-enter it or
 * fail to free, stale handles after `emptyCache()`, and setters taking -0.
 * Live buffers carry byte patterns (the mock source has memory behind it)
 * that are checked after each later operation.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AllotError,
  InvalidArgumentError,
  ManualStream,
  type MockMemory,
  MockSegmentSource,
  type Segment,
  type SegmentRequestOptions,
  SegmentSourceError,
  UseAfterFreeError,
} from "@allot/core";
import {
  WatermarkAllocator,
  type WatermarkBuffer,
  WatermarkOutOfMemoryError,
} from "./mod.ts";
import {
  assertRefused,
  assertRejectsAll,
  hostileObjectsBut,
} from "../core/_test_hostile.ts";
import {
  attempt,
  checkPattern,
  FaultySegmentSource,
  writePattern,
} from "../core/_test_faults.ts";
import { SMALL } from "./_test_options.ts";

const KiB = 1024;

function bytesOf(b: WatermarkBuffer<MockMemory>): Uint8Array {
  return b.memory.bytes!.subarray(b.byteOffset, b.byteOffset + b.byteLength);
}

/** Live buffers with patterns, checked and validated on demand. */
class Live {
  readonly buffers = new Map<number, WatermarkBuffer<MockMemory>>();
  #next = 1;
  constructor(readonly allocator: WatermarkAllocator<MockMemory>) {}
  add(b: WatermarkBuffer<MockMemory>): WatermarkBuffer<MockMemory> {
    const id = this.#next++;
    writePattern(bytesOf(b), id);
    this.buffers.set(id, b);
    return b;
  }
  check(): void {
    for (const [id, b] of this.buffers) {
      assert.equal(b.released, false, `buffer ${id} released behind our back`);
      checkPattern(bytesOf(b), id, "buffer");
    }
    this.allocator.validate();
  }
}

function setup(
  source = new MockSegmentSource({
    capacityBytes: 8 << 20,
    backed: true,
  }),
) {
  const allocator = new WatermarkAllocator<MockMemory>(source, SMALL);
  const live = new Live(allocator);
  for (const n of [100, 3 * KiB, 20 * KiB, 600]) {
    live.add(allocator.allocateBuffer(n));
  }
  live.add(allocator.allocateBuffer(5 * KiB, { pool: "shared" }));
  return { allocator, live };
}

const SIZES = [64, 900, 2 * KiB, 12 * KiB, 40 * KiB];

describe("@allot/watermark hostile callbacks", () => {
  for (
    const action of ["allocate", "free-own", "empty-cache", "free-inactive"]
  ) {
    it(`a callback that re-enters (${action}) on every event keeps state and bytes`, () => {
      const { allocator, live } = setup();
      let depth = 0;
      const made: WatermarkBuffer<MockMemory>[] = [];
      allocator.addCallback(() => {
        if (depth > 0) return;
        depth++;
        try {
          if (action === "allocate") {
            made.push(live.add(allocator.allocateBuffer(700)));
          } else if (action === "free-own") {
            const b = made.pop();
            if (b !== undefined && !b.released) {
              for (const [id, x] of live.buffers) {
                if (x === b) live.buffers.delete(id);
              }
              b.release();
            }
          } else if (action === "empty-cache") {
            allocator.emptyCache();
          } else {
            allocator.freeInactiveBuffers();
          }
        } finally {
          depth--;
        }
      });
      for (let round = 0; round < 3; round++) {
        const bs = SIZES.map((n) => live.add(allocator.allocateBuffer(n)));
        if (action === "free-own") made.push(...bs);
        live.check();
        for (const b of bs) {
          if (b.released) continue;
          for (const [id, x] of live.buffers) {
            if (x === b) live.buffers.delete(id);
          }
          b.release();
          live.check();
        }
        allocator.emptyCache();
        live.check();
      }
    });
  }

  it("a callback that throws on every event leaves state and bytes intact", () => {
    const { allocator, live } = setup();
    allocator.addCallback(() => {
      throw new Error("callback threw");
    });
    for (const n of SIZES) {
      live.add(allocator.allocateBuffer(n));
      live.check();
    }
    allocator.emptyCache();
    live.check();
  });

  for (
    const [name, thrown, logger] of [
      ["an unprintable value", Object.create(null), undefined],
      ["a symbol", Symbol("thrown"), undefined],
      ["an error, to a throwing logger", new Error("x"), () => {
        throw new Error("logger threw");
      }],
    ] as const
  ) {
    it(`a callback that throws ${name} leaves state and bytes intact`, () => {
      const allocator = new WatermarkAllocator<MockMemory>(
        new MockSegmentSource({ capacityBytes: 8 << 20, backed: true }),
        { ...SMALL, ...(logger ? { logger } : {}) },
      );
      const live = new Live(allocator);
      allocator.addCallback(() => {
        throw thrown;
      });
      for (const n of SIZES) {
        live.add(allocator.allocateBuffer(n));
        live.check();
      }
      const [id, first] = [...live.buffers][0];
      live.buffers.delete(id);
      first.release();
      allocator.emptyCache();
      live.check();
    });
  }

  it("a callback that frees a live buffer while its allocation fails keeps bytes", () => {
    const source = new MockSegmentSource({
      capacityBytes: 256 * KiB,
      backed: true,
    });
    const allocator = new WatermarkAllocator<MockMemory>(source, {
      ...SMALL,
      highWatermarkRatio: 1,
      lowWatermarkRatio: 1,
    });
    const live = new Live(allocator);
    const victims = [
      allocator.allocateBuffer(100 * KiB),
      allocator.allocateBuffer(100 * KiB),
    ];
    const keep = live.add(allocator.allocateBuffer(20 * KiB));
    allocator.addCallback((e) => {
      if (e.type === "allocation-failed") {
        for (const v of victims.splice(0)) v.release();
      }
    });
    live.add(allocator.allocateBuffer(150 * KiB));
    live.check();
    assert.equal(keep.released, false);
  });
});

describe("@allot/watermark hostile collaborators", () => {
  it("a segment source that re-enters the allocator keeps state and bytes", () => {
    const source = new FaultySegmentSource(
      new MockSegmentSource({ capacityBytes: 8 << 20, backed: true }),
    );
    const { allocator, live } = setup(
      source as unknown as MockSegmentSource,
    );
    source.onReenter = () => {
      live.add(allocator.allocateBuffer(40 * KiB));
      allocator.emptyCache();
    };
    for (const n of [40 * KiB, 100 * KiB, 300, 12 * KiB]) {
      source.arm("reenter");
      try {
        live.add(allocator.allocateBuffer(n));
      } catch (error) {
        assert.ok(error instanceof AllotError, String(error));
      }
      live.check();
    }
    allocator.emptyCache();
    live.check();
  });

  it("a segment source whose freeSegment throws does not corrupt the allocator", () => {
    const source = new FaultySegmentSource(
      new MockSegmentSource({ capacityBytes: 8 << 20, backed: true }),
    );
    const { allocator, live } = setup(
      source as unknown as MockSegmentSource,
    );
    const b = allocator.allocateBuffer(200 * KiB);
    b.release();
    source.arm("free-throws");
    const error = attempt(() => allocator.emptyCache());
    assert.equal(source.fired.get("free-throws"), 1);
    assert.ok(error instanceof SegmentSourceError, String(error));
    live.check();
    allocator.emptyCache();
    live.check();
    live.add(allocator.allocateBuffer(900 * KiB));
    live.check();
  });
});

/** A source that, when armed, hands out the memory of its last segment again. */
class AliasingSource extends MockSegmentSource {
  armed = false;
  #last: Segment<MockMemory> | undefined;
  override tryAllocateSegment(
    byteLength: number,
    options?: SegmentRequestOptions,
  ): Segment<MockMemory> | undefined {
    if (this.armed && this.#last !== undefined) {
      this.armed = false;
      return { ...this.#last, byteLength };
    }
    return this.#last = super.tryAllocateSegment(byteLength, options);
  }
}

describe("@allot/watermark hostile overlapping segments", () => {
  it("a segment over memory a heap holds is refused with a typed error, changing nothing", () => {
    const source = new AliasingSource({ capacityBytes: 8 << 20, backed: true });
    const { allocator, live } = setup(source);
    live.add(allocator.allocateBuffer(200 * KiB));
    const state = () => ({
      stats: allocator.stats(),
      memory: allocator.memoryStats(),
    });
    source.armed = true;
    assertRefused(
      "allocateBuffer() over an aliased segment",
      () => allocator.allocateBuffer(900 * KiB),
      { snapshot: state, error: SegmentSourceError },
    );
    live.check();
    live.add(allocator.allocateBuffer(900 * KiB));
    live.check();
  });
});

/** A source whose freeSegment calls back into the allocator once. */
class ReenteringFreeSource extends MockSegmentSource {
  onFree: (() => void) | undefined;
  override freeSegment(segment: Segment<MockMemory>): void {
    const f = this.onFree;
    this.onFree = undefined;
    f?.();
    super.freeSegment(segment);
  }
}

describe("@allot/watermark hostile re-entrant frees", () => {
  for (const action of ["empty-cache", "allocate", "free-inactive"]) {
    it(`a source whose freeSegment re-enters (${action}) frees each heap once`, () => {
      const source = new ReenteringFreeSource({
        capacityBytes: 8 << 20,
        backed: true,
      });
      const { allocator, live } = setup(source);
      for (const n of [200 * KiB, 900 * KiB, 300]) {
        allocator.allocateBuffer(n).release();
      }
      source.onFree = () => {
        if (action === "empty-cache") allocator.emptyCache();
        else if (action === "allocate") {
          live.add(allocator.allocateBuffer(900 * KiB));
        } else allocator.freeInactiveBuffers();
      };
      allocator.emptyCache();
      live.check();
      allocator.emptyCache();
      live.check();
    });
  }
});

describe("@allot/watermark hostile handles and settings", () => {
  it("buffers freed after emptyCache(), twice, or by another allocator are refused", () => {
    const { allocator, live } = setup();
    const other = new WatermarkAllocator<MockMemory>(
      new MockSegmentSource({ capacityBytes: 8 << 20, backed: true }),
      SMALL,
    );
    const state = () => ({
      stats: allocator.stats(),
      memory: allocator.memoryStats(),
    });
    const b = allocator.allocateBuffer(64);
    b.release();
    allocator.emptyCache();
    assertRefused("free(stale after emptyCache)", () => allocator.free(b), {
      snapshot: state,
    });
    assertRefused("stale.release() after emptyCache", () => b.release(), {
      snapshot: state,
    });
    const o = other.allocateBuffer(64);
    assertRefused("free(other's buffer)", () => allocator.free(o as never), {
      snapshot: state,
    });
    live.check();
    other.validate();
    assert.equal(o.released, false);
  });

  it("setters take -0 as 0 and refuse out-of-order values, changing nothing", () => {
    const { allocator } = setup();
    allocator.setLowWatermarkRatio(-0);
    assert.ok(Object.is(allocator.lowWatermarkRatio, 0));
    allocator.setHighWatermarkRatio(-0);
    assert.ok(Object.is(allocator.highWatermarkRatio, 0));
    allocator.setPerProcessMemoryFraction(-0);
    assert.ok(Object.is(allocator.highWatermarkRatio, 0));
    allocator.setHighWatermarkRatio(1);
    allocator.setLowWatermarkRatio(0.5);
    const state = () => [
      allocator.highWatermarkRatio,
      allocator.lowWatermarkRatio,
      allocator.highWatermarkLimit,
      allocator.lowWatermarkLimit,
    ];
    assertRefused(
      "setLowWatermarkRatio(1.5 > high)",
      () => allocator.setLowWatermarkRatio(1.5),
      { snapshot: state },
    );
    assertRefused(
      "setHighWatermarkRatio(0.4 < low)",
      () => allocator.setHighWatermarkRatio(0.4),
      { snapshot: state },
    );
    assertRefused(
      "setPerProcessMemoryFraction(2.5)",
      () => allocator.setPerProcessMemoryFraction(2.5),
      { snapshot: state },
    );
  });

  it("allocScalarBufferWithValue() refuses a view with lying getters before allocating", () => {
    const { allocator, live } = setup();
    const state = () => ({
      stats: allocator.stats(),
      memory: allocator.memoryStats(),
    });
    // always lying: refused with a typed error, nothing allocated
    const offset = Float32Array.of(2.5);
    Object.defineProperty(offset, "byteOffset", { get: () => 1e9 });
    assertRefused(
      "allocScalarBufferWithValue(lying byteOffset)",
      () => allocator.allocScalarBufferWithValue(offset),
      { snapshot: state },
    );
    // lying from the second read on: read once, so the truth is used
    const length = Float32Array.of(2.5);
    let reads = 0;
    Object.defineProperty(length, "byteLength", {
      get: () => reads++ === 0 ? 4 : 1e9,
    });
    const scalar = allocator.allocScalarBufferWithValue(length);
    assert.equal(scalar.requestedByteLength, 4);
    assert.equal(new Float32Array(bytesOf(scalar).slice(0, 4).buffer)[0], 2.5);
    live.check();
  });

  it("allocScalarBufferWithValue() writes the value even when a callback detaches it", () => {
    const { allocator, live } = setup();
    const value = Float32Array.of(2.5);
    allocator.addCallback(() => {
      if (!value.buffer.detached) value.buffer.transfer();
    });
    const scalar = allocator.allocScalarBufferWithValue(value);
    assert.equal(new Float32Array(bytesOf(scalar).slice(0, 4).buffer)[0], 2.5);
    live.check();
  });

  it("buffer.shape stores what it checked (elements read once, no iterator)", () => {
    const { allocator, live } = setup();
    const b = live.add(allocator.allocateBuffer(64));
    let reads = 0;
    const flipping = [2, 3];
    Object.defineProperty(flipping, 1, {
      get: () => reads++ === 0 ? 3 : -1,
    });
    b.shape = flipping;
    assert.deepEqual(b.shape, [2, 3]);
    const iterating = [4, 5];
    Object.defineProperty(iterating, Symbol.iterator, {
      value: function* () {
        yield "abc";
      },
    });
    b.shape = iterating;
    assert.deepEqual(b.shape, [4, 5]);
    live.check();
  });

  it("buffer.shape refuses a rank above 64 before walking it", () => {
    const { allocator, live } = setup();
    const b = live.add(allocator.allocateBuffer(64));
    b.shape = [1, 2];
    let reads = 0;
    const huge = new Proxy([] as number[], {
      get: (t, k) => {
        if (k === "length") return 2 ** 32 - 1;
        if (typeof k === "string" && /^\d+$/.test(k)) reads++;
        return Reflect.get(t, k);
      },
    });
    assertRefused("buffer.shape = array of length 2**32 - 1", () => {
      b.shape = huge;
    }, { snapshot: () => b.shape });
    assert.equal(reads, 0, "no element read");
    assertRefused("buffer.shape = 65 ones", () => {
      b.shape = new Array(65).fill(1);
    }, { snapshot: () => b.shape });
    b.shape = new Array(64).fill(1);
    assert.equal(b.shape.length, 64);
    live.check();
  });

  it("recordEvents() refuses a stream whose id is not a safe integer, reading it once", () => {
    const { allocator, live } = setup();
    const b = live.add(allocator.allocateBuffer(64));
    const state = () => ({
      stats: allocator.stats(),
      memory: allocator.memoryStats(),
    });
    const stream = new ManualStream();
    for (
      const id of [NaN, 0.5, "1", undefined, null, {}, 2 ** 53, Infinity]
    ) {
      let fences = 0;
      assertRefused(
        `recordEvents([b], stream with id ${String(id)})`,
        () =>
          allocator.recordEvents([b], {
            id,
            fence: () => (fences++, stream.fence()),
          } as never),
        { snapshot: state },
      );
      assert.equal(fences, 0, "fence() not taken for a refused stream");
    }
    let idReads = 0;
    const flipping = {
      get id() {
        return idReads++ === 0 ? 3 : NaN;
      },
      fence: () => stream.fence(),
    };
    assert.equal(allocator.recordEvents([b], flipping as never), true);
    assert.equal(idReads, 1);
    live.check();
  });

  it("recordEvents() reads a stream's fence once and refuses a bad or re-entrant one", () => {
    const { allocator, live } = setup();
    const b = live.add(allocator.allocateBuffer(64));
    const state = () => ({
      stats: allocator.stats(),
      memory: allocator.memoryStats(),
    });
    let reads = 0;
    const flipping = {
      id: 7,
      get fence() {
        return reads++ === 0 ? () => new ManualStream().fence() : undefined;
      },
    };
    assert.equal(allocator.recordEvents([b], flipping as never), true);
    for (
      const [name, fence] of [["null", null], ["42", 42], ["{}", {}]] as const
    ) {
      assertRefused(
        `recordEvents([b], stream whose fence() returns ${name})`,
        () =>
          allocator.recordEvents([b], { id: 8, fence: () => fence } as never),
        { snapshot: state },
      );
    }
    const victim = allocator.allocateBuffer(64);
    const freeing = {
      id: 9,
      fence: () => {
        victim.release();
        return new ManualStream().fence();
      },
    };
    assert.throws(
      () => allocator.recordEvents([victim], freeing),
      UseAfterFreeError,
    );
    live.check();
  });

  it("waitForEvents() refuses non-arrays and survives a fence whose wait() returns no promise", async () => {
    const { allocator, live } = setup();
    const state = () => ({
      stats: allocator.stats(),
      memory: allocator.memoryStats(),
    });
    await assertRejectsAll(
      "waitForEvents(buffers)",
      hostileObjectsBut("[]"),
      (v) => allocator.waitForEvents(v as never),
      { snapshot: state },
    );
    const b = live.add(allocator.allocateBuffer(64));
    const fence = { completed: false, wait: () => undefined };
    allocator.recordEvents([b], fence as never);
    assert.equal(await allocator.waitForEvents([b]), true);
    live.check();
  });

  for (
    const [name, hostView] of [
      ["a short view", () => new Uint8Array(1)],
      ["a non-view", () => ({ length: 4 })],
      ["a throw", () => {
        throw new RangeError("hostView threw");
      }],
    ] as const
  ) {
    it(`allocScalarBufferWithValue() with a hostView returning ${name} frees the buffer, keeping bytes`, () => {
      const allocator = new WatermarkAllocator<MockMemory>(
        new MockSegmentSource({ capacityBytes: 8 << 20, backed: true }),
        { ...SMALL, hostView: hostView as never },
      );
      const live = new Live(allocator);
      const before = allocator.currentAllocatedBytes;
      const error = attempt(() =>
        allocator.allocScalarBufferWithValue(Float32Array.of(1))
      );
      assert.ok(
        error instanceof AllotError ||
          (name === "a throw" && error instanceof RangeError),
        String(error),
      );
      assert.equal(allocator.currentAllocatedBytes, before);
      live.check();
    });
  }

  it("the constructor refuses a source whose alignment is not a power of two", () => {
    for (const alignment of [NaN, 0, 3, -256, 2 ** 31]) {
      const source = new MockSegmentSource({ capacityBytes: 8 << 20 });
      Object.defineProperty(source, "alignment", { get: () => alignment });
      assert.throws(
        () => new WatermarkAllocator(source, SMALL),
        InvalidArgumentError,
        `alignment ${alignment}`,
      );
    }
  });

  it("the constructor refuses a source whose maxSegmentByteLength is not an integer", () => {
    for (const max of [NaN, -1, 0.5, Infinity]) {
      const source = new MockSegmentSource({ capacityBytes: 8 << 20 });
      Object.defineProperty(source, "maxSegmentByteLength", { get: () => max });
      assert.throws(
        () => new WatermarkAllocator(source, SMALL),
        InvalidArgumentError,
        `maxSegmentByteLength ${max}`,
      );
    }
  });

  it("a throwing logger at full verbosity leaves state and bytes intact", () => {
    const source = new MockSegmentSource({
      capacityBytes: 8 << 20,
      backed: true,
    });
    const allocator = new WatermarkAllocator<MockMemory>(source, {
      ...SMALL,
      debugVerbosity: 0xff,
      logger: () => {
        throw new Error("logger threw");
      },
    });
    const live = new Live(allocator);
    for (const n of SIZES) live.add(allocator.allocateBuffer(n));
    const [id, first] = [...live.buffers][0];
    live.buffers.delete(id);
    first.release();
    allocator.emptyCache();
    live.check();
    for (const [, b] of live.buffers) b.release();
    live.buffers.clear();
    allocator.emptyCache();
    assert.equal(source.reservedBytes, 0);
  });

  for (
    const [name, driver] of [
      ["NaN", () => NaN],
      ["-1", () => -1],
      ["a throw", () => {
        throw new Error("driver threw");
      }],
    ] as const
  ) {
    it(`a driverAllocatedBytes returning ${name} does not lift the high watermark`, () => {
      const allocator = new WatermarkAllocator<MockMemory>(
        new MockSegmentSource({ capacityBytes: 8 << 20, backed: true }),
        {
          ...SMALL,
          recommendedMaxBytes: 1 << 20,
          highWatermarkRatio: 1,
          lowWatermarkRatio: 1,
          driverAllocatedBytes: driver as () => number,
        },
      );
      const live = new Live(allocator);
      live.add(allocator.allocateBuffer(600 * KiB));
      assert.throws(
        () => allocator.allocateBuffer(600 * KiB),
        WatermarkOutOfMemoryError,
      );
      live.check();
    });
  }
});
