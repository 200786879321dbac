/**
 * Adversarial tests of `@allot/core`, written from the public API outward:
 * every entry point gets the shared hostile-value table and must refuse each
 * value with a typed error and no change of state.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  AllocatorBase,
  DataPtr,
  Device,
  IntrusivePtr,
  IntrusiveTarget,
  InvalidArgumentError,
  LeakDetector,
  MockSegmentSource,
  SegmentLedger,
  Stat,
  UseAfterFreeError,
  validateAlignment,
  validateByteLength,
  validateCapacity,
  validateInteger,
  WeakIntrusivePtr,
} from "./mod.ts";
import {
  assertRefused,
  hostileHandles,
  hostileNumbers,
  hostileObjects,
  HostileTally,
} from "./_test_hostile.ts";

const tally = new HostileTally();
const cpu = Device.cpu();
const numbers = hostileNumbers();

/** A counting host allocator: its state is its live count and calls. */
class CountingAllocator extends AllocatorBase<ArrayBuffer, ArrayBuffer> {
  readonly device = cpu;
  live = 0;
  allocations = 0;
  allocate(byteLength: number): DataPtr<ArrayBuffer, ArrayBuffer> {
    validateByteLength(byteLength, 1 << 20);
    this.allocations++;
    this.live++;
    const memory = new ArrayBuffer(byteLength);
    return new DataPtr(memory, 0, byteLength, this.device, {
      context: memory,
      deleter: () => this.live--,
    });
  }
  override rawDeleter(): (context: ArrayBuffer) => void {
    return () => this.live--;
  }
  snapshot(): { live: number; allocations: number } {
    return { live: this.live, allocations: this.allocations };
  }
}

const { refuse } = tally;

describe("@allot/core adversarial", () => {
  after(() => {
    console.log(
      `core adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("new DataPtr() refuses hostile offsets, lengths, devices and deleters", () => {
    const memory = new ArrayBuffer(64);
    refuse(
      "new DataPtr(byteOffset)",
      numbers,
      (v) => new DataPtr(memory, v as number, 8, cpu),
      { error: InvalidArgumentError },
    );
    refuse(
      "new DataPtr(byteLength)",
      numbers,
      (v) => new DataPtr(memory, 0, v as number, cpu),
      { error: InvalidArgumentError },
    );
    refuse(
      "new DataPtr(device)",
      hostileObjects(),
      (v) => new DataPtr(memory, 0, 8, v as Device),
      { error: InvalidArgumentError },
    );
    refuse(
      "new DataPtr(ownership.deleter)",
      hostileObjects().filter((h) =>
        h.value !== null && h.value !== undefined &&
        typeof h.value !== "function"
      ),
      (v) =>
        new DataPtr(memory, 0, 8, cpu, {
          context: 1,
          deleter: v as () => void,
        }),
      { error: InvalidArgumentError },
    );
    refuse(
      "new DataPtr(ownership)",
      hostileObjects().filter((h) =>
        h.value !== undefined && h.name !== "{}" && h.name !== "[]" &&
        h.name !== "trap proxy" && h.name !== "() => {}"
      ),
      (v) => new DataPtr(memory, 0, 8, cpu, v as object),
      { error: InvalidArgumentError },
    );
  });

  it("new DataPtr() refuses a place past the end of host memory", () => {
    const memory = new ArrayBuffer(64);
    for (const [offset, length] of [[0, 65], [64, 1], [65, 0], [60, 8]]) {
      assertRefused(
        `new DataPtr(${offset}, ${length})`,
        () => new DataPtr(memory, offset, length, cpu),
        { error: InvalidArgumentError },
      );
    }
    assert.equal(new DataPtr(memory, 64, 0, cpu).byteLength, 0);
    assert.equal(new DataPtr(memory, -0, 64, cpu).byteOffset, 0);
    const growable = new ArrayBuffer(8, { maxByteLength: 64 });
    assert.equal(new DataPtr(growable, 8, 56, cpu).byteLength, 56);
    assertRefused(
      "new DataPtr(growable, 8, 57)",
      () => new DataPtr(growable, 8, 57, cpu),
      { error: InvalidArgumentError },
    );
    // Memory the core cannot measure (a GPU buffer, an id) is not bounded.
    assert.equal(new DataPtr({ id: 1 }, 2 ** 40, 8, cpu).byteLength, 8);
  });

  it("Allocator.clone() refuses a released or foreign pointer before it allocates", () => {
    const allocator = new CountingAllocator();
    const stale = allocator.allocate(8);
    stale.release();
    refuse(
      "Allocator.clone()",
      hostileHandles({
        stale: () => stale,
        lookalike: () => ({ byteLength: 8, released: false, memory: null }),
      }),
      (v) => allocator.clone(v as DataPtr<ArrayBuffer, ArrayBuffer>),
      { snapshot: () => allocator.snapshot() },
    );
    assert.throws(() => allocator.clone(stale), UseAfterFreeError);
    assert.deepEqual(allocator.snapshot(), { live: 0, allocations: 1 });
  });

  it("Allocator.copyData() refuses hostile lengths and pointers", () => {
    const allocator = new CountingAllocator();
    const a = allocator.allocate(8), b = allocator.allocate(8);
    new Uint8Array(a.memory).fill(7);
    const bytes = () => [...new Uint8Array(b.memory)];
    refuse(
      "Allocator.copyData(byteLength)",
      [...numbers, { name: "9", value: 9 }],
      (v) => allocator.copyData(b, a, v as number),
      { snapshot: bytes },
    );
    refuse(
      "Allocator.copyData(dest)",
      hostileObjects(),
      (v) => allocator.copyData(v as DataPtr<ArrayBuffer, ArrayBuffer>, a, 8),
      { snapshot: bytes },
    );
    refuse(
      "Allocator.copyData(src)",
      hostileObjects(),
      (v) => allocator.copyData(b, v as DataPtr<ArrayBuffer, ArrayBuffer>, 8),
      { snapshot: bytes },
    );
    a.release();
    b.release();
  });

  it("Allocator.rawAllocate() refuses hostile sizes", () => {
    const allocator = new CountingAllocator();
    refuse(
      "Allocator.rawAllocate()",
      numbers,
      (v) => allocator.rawAllocate(v as number),
      { snapshot: () => allocator.snapshot() },
    );
  });

  it("validators refuse every hostile number with InvalidArgumentError", () => {
    refuse(
      "validateByteLength()",
      numbers.filter((h) => h.name !== "2^53+2"),
      (v) => validateByteLength(v as number, 2 ** 50),
      { error: InvalidArgumentError },
    );
    refuse(
      "validateInteger()",
      numbers,
      (v) => validateInteger(v as number, 0, 2 ** 40, "count"),
      { error: InvalidArgumentError },
    );
    refuse(
      "validateAlignment()",
      [...numbers, { name: "48", value: 48 }, { name: "0", value: 0 }],
      (v) => validateAlignment(v as number),
      { error: InvalidArgumentError },
    );
    refuse(
      "validateCapacity()",
      // undefined is the default (no limit), Infinity means no limit; every
      // other value that is not a whole number of bytes is refused (0.5,
      // 2^53, 1e308 were accepted).
      numbers.filter((h) => h.value !== undefined && h.value !== Infinity),
      (v) => validateCapacity(v as number),
      { error: InvalidArgumentError },
    );
    for (const ok of [0, 1, 4096, Number.MAX_SAFE_INTEGER, Infinity]) {
      assert.equal(validateCapacity(ok), ok);
    }
    assert.equal(validateCapacity(undefined), Infinity);
  });

  it("new Device() and Device.parse() refuse hostile types, indices and text", () => {
    refuse(
      "new Device(index)",
      numbers.filter((h) => h.value !== undefined),
      (v) => new Device("cpu", v as number),
      { error: InvalidArgumentError },
    );
    refuse(
      "new Device(type)",
      [
        ...hostileObjects(),
        { name: '"CPU"', value: "CPU" },
        { name: '"cpu:0"', value: "cpu:0" },
        { name: '""', value: "" },
      ].filter((h) => h.name !== '"abc"'),
      (v) => new Device(v as "cpu"),
      { error: InvalidArgumentError },
    );
    refuse(
      "Device.parse()",
      [
        ...hostileObjects().filter((h) => h.name !== '"abc"'),
        { name: '"cpu:-1"', value: "cpu:-1" },
        { name: '"cpu:0.5"', value: "cpu:0.5" },
        { name: '"GPU:0"', value: "GPU:0" },
        { name: '"cpu:"', value: "cpu:" },
        { name: '"cpu:9007199254740993"', value: "cpu:9007199254740993" },
      ],
      (v) => Device.parse(v as string),
      { error: InvalidArgumentError },
    );
  });

  it("LeakDetector refuses non-object handles and bad info, and watches nothing then", () => {
    const detector = new LeakDetector();
    const state = () => detector.watching;
    refuse(
      "LeakDetector.watch(handle)",
      hostileObjects().filter((h) =>
        typeof h.value !== "object" && typeof h.value !== "function" ||
        h.value === null
      ),
      (v) => detector.watch(v as object, { label: "x" }),
      { error: InvalidArgumentError, snapshot: state },
    );
    refuse(
      "LeakDetector.watch(info)",
      hostileObjects().filter((h) => h.name !== "() => {}"),
      (v) => detector.watch({}, v as { label: string }),
      { error: InvalidArgumentError, snapshot: state },
    );
    refuse(
      "LeakDetector.watch(info.byteLength)",
      numbers.filter((h) => h.value !== undefined),
      (v) => detector.watch({}, { label: "x", byteLength: v as number }),
      { error: InvalidArgumentError, snapshot: state },
    );
    refuse(
      "LeakDetector.forget()",
      hostileObjects().filter((h) =>
        typeof h.value !== "object" && typeof h.value !== "function" ||
        h.value === null
      ),
      (v) => detector.forget(v as object),
      { error: InvalidArgumentError, snapshot: state },
    );
    refuse(
      "new LeakDetector(options.onLeak)",
      hostileObjects().filter((h) =>
        h.value !== undefined && typeof h.value !== "function"
      ),
      (v) => new LeakDetector({ onLeak: v as () => void }),
      { error: InvalidArgumentError },
    );
  });

  it("Stat.increase() and decrease() refuse hostile amounts and keep their values", () => {
    const stat = new Stat();
    stat.increase(10);
    refuse(
      "Stat.increase()",
      numbers,
      (v) => stat.increase(v as number),
      { snapshot: () => stat.values() },
    );
    refuse(
      "Stat.decrease()",
      [...numbers, { name: "11 (more than current)", value: 11 }],
      (v) => stat.decrease(v as number),
      { snapshot: () => stat.values() },
    );
  });

  it("MockSegmentSource and SegmentLedger refuse hostile sizes and foreign segments", () => {
    const source = new MockSegmentSource({ capacityBytes: 1 << 20 });
    const other = new MockSegmentSource({ capacityBytes: 1 << 20 });
    const live = source.tryAllocateSegment(256)!;
    const freed = source.tryAllocateSegment(256)!;
    source.freeSegment(freed);
    const state = () => ({
      reserved: source.reservedBytes,
      live: source.liveSegmentCount,
      allocs: source.allocationCount,
      frees: source.freeCount,
      failures: source.failureCount,
    });
    refuse(
      "MockSegmentSource.tryAllocateSegment()",
      numbers,
      (v) => source.tryAllocateSegment(v as number),
      { snapshot: state },
    );
    refuse(
      "MockSegmentSource.freeSegment()",
      hostileHandles({
        stale: () => freed,
        otherInstance: () => other.tryAllocateSegment(256),
        lookalike: () => ({ ...live }),
      }),
      (v) => source.freeSegment(v as typeof live),
      { snapshot: state },
    );
    refuse(
      "new MockSegmentSource(alignment)",
      numbers.filter((h) => h.value !== undefined && h.value !== null),
      (v) => new MockSegmentSource({ alignment: v as number }),
    );
    const ledger = new SegmentLedger<unknown>("test");
    refuse(
      "SegmentLedger.checkRequest()",
      numbers,
      (v) => ledger.checkRequest(v as number, 2 ** 40),
      { snapshot: () => ledger.reservedBytes },
    );
  });

  it("IntrusivePtr and WeakIntrusivePtr refuse non-targets and released pointers", () => {
    class T extends IntrusiveTarget {}
    refuse(
      "IntrusivePtr.make()",
      hostileObjects(),
      (v) => IntrusivePtr.make(v as T),
    );
    refuse(
      "IntrusivePtr.retain()",
      hostileObjects(),
      (v) => IntrusivePtr.retain(v as T),
    );
    refuse(
      "WeakIntrusivePtr.of()",
      hostileObjects(),
      (v) => WeakIntrusivePtr.of(v as T),
    );
    const p = IntrusivePtr.make(new T());
    p.release();
    assertRefused("IntrusivePtr.clone() after release", () => p.clone());
  });
});
