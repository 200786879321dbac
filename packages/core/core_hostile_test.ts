/**
 * Hostile tests of `@allot/core` beyond the adversarial table: reference
 * counts under subclasses that lie and look-alike targets, deferred frees
 * whose release callbacks throw or re-enter (a fast-check model checks that
 * every item is released once, only after its fences), stats and ledgers
 * pushed past 2^53, and the helpers (`junkFill`, `collectByAge`, `alignUp`,
 * `formatBytes`, `Device`, fences) fed values outside their contract.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  acquireSegment,
  alignUp,
  AllocatorBase,
  captureCallStack,
  collectByAge,
  DataPtr,
  DeferredFrees,
  Device,
  DoubleFreeError,
  FenceError,
  finishSnapshot,
  flattenMemoryStats,
  formatBytes,
  formatCallStack,
  formatMemorySummary,
  formatSize,
  hostBuffer,
  IntrusivePtr,
  IntrusiveTarget,
  InvalidArgumentError,
  isAllotFrame,
  JUNK_BYTE,
  junkFill,
  LeakDetector,
  type LeakReport,
  ManualStream,
  type MockMemory,
  MockSegmentSource,
  PoolStats,
  PromiseFence,
  resizeSegment,
  type Segment,
  SegmentLedger,
  SegmentSourceError,
  segmentTotals,
  Stat,
  StatRecount,
  TraceRecorder,
  UniqueVoidPtr,
  UseAfterFreeError,
  validateByteLength,
  validateCapacity,
  validateInteger,
  WeakIntrusivePtr,
} from "./mod.ts";
import {
  assertRefused,
  hostileFlags,
  hostileNumbersBut,
  hostileObjectsBut,
  HostileTally,
} from "./_test_hostile.ts";
import { FaultyFence, InjectedFault, modelRuns } from "./_test_faults.ts";

const tally = new HostileTally();
const hostObjectsForBuffer = () => hostileObjectsBut("trap proxy");
const { refuse } = tally;
const MAX = Number.MAX_SAFE_INTEGER;
const gc = (globalThis as { gc?: () => void }).gc;

interface Item {
  name: string;
  waitingFences: number;
}

describe("@allot/core hostile", () => {
  it("intrusive counts: a subclass whose useCount lies cannot resurrect or double-own a target", () => {
    let released = 0;
    class Liar extends IntrusiveTarget {
      override get useCount(): number {
        const n = super.useCount;
        return n === 0 && this.resourcesReleased ? 1 : n;
      }
      override get weakUseCount(): number {
        return 0;
      }
      override get resourcesReleased(): boolean {
        return super.resourcesReleased;
      }
      protected override releaseResources(): void {
        released++;
      }
    }
    const t = new Liar();
    const p = IntrusivePtr.make(t);
    const w = p.weak();
    // a second make() while owned: the lying weakUseCount must not let it in
    assertRefused("make(owned liar)", () => IntrusivePtr.make(t), {
      snapshot: () => [p.useCount, w.weakUseCount, released],
    });
    p.release();
    assert.equal(released, 1);
    assert.throws(() => IntrusivePtr.retain(t), UseAfterFreeError);
    assert.equal(w.lock(), undefined, "a weak handle resurrected the target");
    assert.equal(w.expired, true);
    assert.equal(p.useCount, 0, "the handle reports the true count");
    w.release();
    assert.equal(released, 1);
  });

  it("intrusive counts: proxies and Object.create look-alikes are refused with a typed error", () => {
    const lookalikes = [
      { name: "proxy", value: new Proxy(new IntrusiveTarget(), {}) },
      {
        name: "Object.create",
        value: Object.create(IntrusiveTarget.prototype),
      },
      ...hostileObjectsBut(),
    ];
    refuse(
      "IntrusivePtr.make",
      lookalikes,
      (v) => IntrusivePtr.make(v as never),
      {
        error: InvalidArgumentError,
      },
    );
    refuse(
      "IntrusivePtr.retain",
      lookalikes,
      (v) => IntrusivePtr.retain(v as never),
      {
        error: InvalidArgumentError,
      },
    );
    refuse(
      "WeakIntrusivePtr.of",
      lookalikes,
      (v) => WeakIntrusivePtr.of(v as never),
      {
        error: InvalidArgumentError,
      },
    );
  });

  it("intrusive counts: releaseResources that throws or re-enters leaves consistent counts", () => {
    const log: string[] = [];
    class Reenter extends IntrusiveTarget {
      weakOut: WeakIntrusivePtr<Reenter> | undefined;
      protected override releaseResources(): void {
        log.push("release");
        assert.throws(() => IntrusivePtr.retain(this), UseAfterFreeError);
        this.weakOut = WeakIntrusivePtr.of(this); // weak count still > 0 here
        assert.equal(this.weakOut.lock(), undefined);
        throw new InjectedFault("releaseResources");
      }
    }
    const t = new Reenter();
    const p = IntrusivePtr.make(t);
    assert.throws(() => p.release(), InjectedFault);
    assert.deepEqual(log, ["release"]);
    assert.equal(t.resourcesReleased, true);
    assert.equal(t.useCount, 0);
    assert.equal(
      t.weakUseCount,
      1,
      "the made weak handle, the owners' one dropped",
    );
    assert.throws(() => p.release(), DoubleFreeError);
    t.weakOut!.release();
    assert.equal(t.finished, true);
    assert.throws(() => t.weakOut!.release(), DoubleFreeError);
    assertRefused("make(finished)", () => IntrusivePtr.make(t));
  });

  it("DataPtr and UniqueVoidPtr: a throwing or re-entering deleter runs once and the pointer stays released", () => {
    let calls = 0;
    const ptr: DataPtr<ArrayBuffer, string> = new DataPtr(
      new ArrayBuffer(16),
      0,
      16,
      Device.cpu(),
      {
        context: "ctx",
        deleter: () => {
          calls++;
          ptr.release(); // re-enters
          throw new InjectedFault("deleter");
        },
      },
    );
    assert.throws(() => ptr.release(), InjectedFault);
    assert.equal(calls, 1);
    assert.equal(ptr.released, true);
    assert.throws(() => ptr.memory, UseAfterFreeError);
    ptr.release(); // a second release is a no-op: the deleter never runs twice
    assert.equal(calls, 1);
    const u = new UniqueVoidPtr({}, 1, () => {
      calls++;
    });
    assert.equal(u.releaseContext(), 1);
    u.clear();
    assert.equal(calls, 1, "releaseContext hands ownership away");
    refuse(
      "DataPtr(byteOffset)",
      hostileNumbersBut(),
      (v) => new DataPtr(new ArrayBuffer(8), v as number, 0, Device.cpu()),
    );
    refuse(
      "DataPtr(byteLength)",
      [...hostileNumbersBut(), { name: "9 of 8", value: 9 }],
      (v) => new DataPtr(new ArrayBuffer(8), 0, v as number, Device.cpu()),
    );
    const z = new DataPtr(new ArrayBuffer(8), -0, -0, Device.cpu());
    assert.ok(Object.is(z.byteOffset, 0) && Object.is(z.byteLength, 0));
  });

  it("DeferredFrees: a throwing release callback still releases the rest of its group, and poll() rethrows", () => {
    const s = new ManualStream();
    const out: string[] = [];
    const frees = new DeferredFrees<Item>((i) => {
      out.push(i.name);
      if (i.name === "a") throw new InjectedFault("release");
    });
    const f = s.fence();
    for (const name of ["a", "b", "c"]) {
      frees.defer({ name, waitingFences: 0 }, [s.id], [f]);
    }
    s.completeAll();
    assert.throws(() => frees.poll(), InjectedFault);
    assert.deepEqual(out, ["a", "b", "c"]);
    assert.equal(frees.count, 0, "items lost in a throwing group");
    frees.poll(); // the error is reported once
  });

  it("DeferredFrees: a poll() from inside the release callback loses no queue", () => {
    const streams = [
      new ManualStream(),
      new ManualStream(),
      new ManualStream(),
    ];
    const out: string[] = [];
    const frees: DeferredFrees<Item> = new DeferredFrees<Item>((i) => {
      out.push(i.name);
      frees.poll();
    });
    frees.defer({ name: "a", waitingFences: 0 }, [streams[0].id], [
      streams[0].fence(),
    ]);
    frees.defer({ name: "a2", waitingFences: 0 }, [streams[0].id], [
      streams[0].fence(),
    ]);
    frees.defer({ name: "b", waitingFences: 0 }, [streams[1].id], [
      streams[1].fence(),
    ]);
    frees.defer({ name: "c", waitingFences: 0 }, [streams[2].id], [
      streams[2].fence(),
    ]);
    streams[0].completeAll();
    streams[1].completeAll();
    frees.poll();
    streams[2].completeAll();
    frees.poll();
    assert.deepEqual(out.sort(), ["a", "a2", "b", "c"]);
    assert.equal(frees.count, 0);
  });

  it("DeferredFrees: defer() refuses no fences or mismatched stream ids, changing nothing", () => {
    const s = new ManualStream();
    const frees = new DeferredFrees<Item>(() => {});
    const item = { name: "x", waitingFences: 0 };
    const state = () => [frees.count, item.waitingFences];
    assertRefused("defer(no fences)", () => frees.defer(item, [], []), {
      snapshot: state,
      error: InvalidArgumentError,
    });
    assertRefused(
      "defer(2 fences, 1 id)",
      () => frees.defer(item, [s.id], [s.fence(), s.fence()]),
      { snapshot: state, error: InvalidArgumentError },
    );
  });

  it("DeferredFrees: a fence whose completed getter re-enters poll() and defer() neither recurses nor loses the new item", () => {
    const s = new ManualStream();
    const out: string[] = [];
    const frees: DeferredFrees<Item> = new DeferredFrees<Item>((i) =>
      out.push(i.name)
    );
    let reads = 0;
    const fence = {
      get completed(): boolean {
        reads++;
        frees.poll();
        if (reads === 1) {
          frees.defer({ name: "late", waitingFences: 0 }, [s.id], [s.fence()]);
        }
        return true;
      },
      wait: () => Promise.resolve(),
    };
    frees.defer({ name: "a", waitingFences: 0 }, [7], [fence]);
    frees.poll();
    assert.deepEqual(out, ["a"]);
    s.completeAll();
    frees.poll();
    assert.deepEqual(out, ["a", "late"]);
    assert.equal(frees.count, 0);
  });

  it("DeferredFrees model: throwing, re-entering callbacks and faulty fences release each item once, never early", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            streams: fc.uniqueArray(fc.integer({ min: 0, max: 2 }), {
              minLength: 1,
              maxLength: 3,
            }),
            share: fc.boolean(),
            throwOnRelease: fc.boolean(),
            reenter: fc.constantFrom("none", "poll", "defer"),
          }),
          { minLength: 1, maxLength: 12 },
        ),
        fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 20 }),
        (plans, completes) => {
          const streams = [
            new ManualStream(),
            new ManualStream(),
            new ManualStream(),
          ];
          const released = new Map<string, number>();
          const fencesOf = new Map<string, { completed: boolean }[]>();
          const plansOf = new Map<string, (typeof plans)[number]>();
          let extra = 0;
          const frees: DeferredFrees<Item> = new DeferredFrees<Item>((i) => {
            for (const f of fencesOf.get(i.name)!) {
              assert.ok(f.completed, `${i.name} released before its fence`);
            }
            released.set(i.name, (released.get(i.name) ?? 0) + 1);
            const plan = plansOf.get(i.name);
            if (plan?.reenter === "poll") frees.poll();
            if (plan?.reenter === "defer" && extra < 5) {
              const name = `extra${extra++}`;
              const s = streams[extra % 3];
              const f = s.fence();
              fencesOf.set(name, [f]);
              frees.defer({ name, waitingFences: 0 }, [s.id], [f]);
            }
            if (plan?.throwOnRelease) throw new InjectedFault("release");
          });
          let last: { completed: boolean }[] = [];
          plans.forEach((plan, k) => {
            const name = `i${k}`;
            const fences = plan.share && last.length === plan.streams.length
              ? last
              : plan.streams.map((s) => streams[s].fence());
            last = fences;
            fencesOf.set(name, fences);
            plansOf.set(name, plan);
            frees.defer(
              { name, waitingFences: 0 },
              plan.streams.map((s) => streams[s].id),
              fences as never,
            );
          });
          const poll = () => {
            try {
              frees.poll();
            } catch (e) {
              assert.ok(e instanceof InjectedFault, String(e));
            }
          };
          for (const c of completes) {
            streams[c].complete(1);
            poll();
          }
          // extra items take new fences from the callback: complete again
          for (let round = 0; round < 8; round++) {
            for (const s of streams) s.completeAll();
            poll();
          }
          assert.equal(frees.count, 0);
          for (const name of fencesOf.keys()) {
            assert.equal(
              released.get(name),
              1,
              `${name} released ${released.get(name) ?? 0} times`,
            );
          }
        },
      ),
      { numRuns: modelRuns(300) },
    );
  });

  it("DeferredFrees: a fence that throws, lies or never completes holds its items back; synchronize() frees the throwing one", async () => {
    const out: string[] = [];
    const frees = new DeferredFrees<Item>((i) => out.push(i.name));
    const throwing = new FaultyFence("completed-throws");
    const lying = {
      completed: "true" as unknown as boolean,
      wait: () => Promise.resolve(),
    };
    const never = new FaultyFence("never");
    frees.defer({ name: "t", waitingFences: 0 }, [1], [throwing]);
    frees.defer({ name: "l", waitingFences: 0 }, [2], [lying]);
    frees.defer({ name: "n", waitingFences: 0 }, [3], [never]);
    assert.throws(() => frees.poll(), FenceError);
    assert.equal(out.length, 0, "a non-boolean completed is not completion");
    assert.equal(frees.faultedCount, 1);
    assert.equal(frees.count, 3);
    never.complete();
    frees.poll();
    assert.equal(out.length, 0, "a fence that never completes holds its item");
    throwing.complete();
    const other = new DeferredFrees<Item>((i) => out.push(i.name));
    const f2 = new FaultyFence("completed-throws");
    other.defer({ name: "t2", waitingFences: 0 }, [1], [f2]);
    assert.throws(() => other.poll(), FenceError);
    f2.complete();
    await other.synchronize();
    assert.deepEqual(out, ["t2"]);
    assert.equal(other.count, 0);
  });

  it("PromiseFence and ManualStream.complete refuse what is not a promise or a count", () => {
    refuse(
      "new PromiseFence",
      hostileObjectsBut(),
      (v) => new PromiseFence(v as never),
      {
        error: InvalidArgumentError,
      },
    );
    const s = new ManualStream();
    const f = s.fence();
    s.fence();
    refuse(
      "ManualStream.complete",
      hostileNumbersBut("undefined", "2^53", "2^53+2", "1e308", "Infinity")
        .filter(
          (h) => h.name !== "-0",
        ),
      (v) => s.complete(v as number),
      {
        snapshot: () => [s.completedCount, f.completed],
        error: InvalidArgumentError,
      },
    );
    s.complete(-0);
    assert.equal(s.completedCount, 0);
    s.complete(10);
    assert.equal(s.completedCount, 2, "clamped to what was submitted");
  });

  it("Stat: amounts past 2^53 are refused, current and allocated stay exact, refused calls change nothing", () => {
    const s = new Stat();
    s.increase(MAX - 10);
    const state = () => s.values();
    assertRefused("increase(past 2^53)", () => s.increase(11), {
      snapshot: state,
      error: InvalidArgumentError,
    });
    s.increase(10);
    assert.equal(s.current, MAX);
    s.decrease(MAX);
    assertRefused("increase(allocated past 2^53)", () => s.increase(1), {
      snapshot: state,
      error: InvalidArgumentError,
    });
    s.resetAccumulated();
    s.increase(5);
    assert.deepEqual(s.values(), {
      current: 5,
      peak: MAX,
      allocated: 5,
      freed: 0,
    });
    s.resetPeak();
    assert.equal(s.peak, 5);
    refuse(
      "Stat.increase",
      hostileNumbersBut(),
      (v) => s.increase(v as number),
      {
        snapshot: state,
      },
    );
    refuse(
      "Stat.decrease",
      [...hostileNumbersBut(), { name: "6 of 5", value: 6 }],
      (v) => s.decrease(v as number),
      {
        snapshot: state,
      },
    );
    s.increase(-0);
    assert.ok(Object.is(s.current, 5));
  });

  it("SegmentLedger: replace onto another live segment, null segments and sums past 2^53 are refused, changing nothing", () => {
    const ledger = new SegmentLedger<number>("hostile");
    const a: Segment<number> = { memory: 1, byteOffset: 0, byteLength: 100 };
    const b: Segment<number> = { memory: 2, byteOffset: 0, byteLength: 200 };
    ledger.add(a);
    ledger.add(b);
    const state = () => [
      ledger.reservedBytes,
      ledger.peakReservedBytes,
      ledger.liveSegmentCount,
      ledger.allocationCount,
    ];
    assertRefused("replace(a, b)", () => ledger.replace(a, b, 300), {
      snapshot: state,
      error: InvalidArgumentError,
    });
    assertRefused(
      "add(huge)",
      () => ledger.add({ memory: 3, byteOffset: 0, byteLength: MAX }),
      {
        snapshot: state,
        error: InvalidArgumentError,
      },
    );
    assertRefused(
      "replace(a, huge)",
      () => ledger.replace(a, { memory: 1, byteOffset: 0, byteLength: MAX }),
      {
        snapshot: state,
        error: InvalidArgumentError,
      },
    );
    refuse(
      "SegmentLedger.add",
      hostileObjectsBut("{}", "[]", "() => {}"),
      (v) => ledger.add(v as never),
      {
        snapshot: state,
      },
    );
    refuse(
      "SegmentLedger.add(bytes)",
      hostileNumbersBut("undefined"),
      (v) =>
        ledger.add({ memory: 9, byteOffset: 0, byteLength: 1 }, v as number),
      {
        snapshot: state,
      },
    );
    assert.throws(
      () => ledger.remove({ memory: 1, byteOffset: 0, byteLength: 100 }),
      DoubleFreeError,
    );
    assert.equal(ledger.remove(a), 100);
    assert.throws(() => ledger.remove(a), DoubleFreeError);
    assert.deepEqual(state(), [200, 300, 1, 2]);
  });

  it("junkFill: offsets and lengths outside the memory are refused, nothing written", () => {
    const memory = new ArrayBuffer(16);
    const mock = { bytes: new Uint8Array(16) };
    const state = () => [...new Uint8Array(memory), ...mock.bytes];
    for (const m of [memory, mock]) {
      refuse(
        "junkFill(byteOffset)",
        hostileNumbersBut(),
        (v) => junkFill(m, v as number, 1),
        { snapshot: state },
      );
      refuse(
        "junkFill(byteLength)",
        [...hostileNumbersBut(), { name: "17", value: 17 }],
        (v) => junkFill(m, 0, v as number),
        { snapshot: state },
      );
      assertRefused("junkFill(12 + 8 of 16)", () => junkFill(m, 12, 8), {
        snapshot: state,
        error: InvalidArgumentError,
      });
    }
    assert.equal(junkFill(mock, 15, 1), true);
    assert.equal(mock.bytes[15], JUNK_BYTE);
    assert.equal(mock.bytes[14], 0);
    assert.equal(junkFill({ gpu: true }, 0, 4), false);
  });

  it("collectByAge: NaN ages, mismatched arrays and hostile targets are refused before anything is released", () => {
    const released: string[] = [];
    const release = (c: string) => (released.push(c), true);
    const cands = ["a", "b", "c"];
    const snap = () => released.length;
    refuse(
      "collectByAge(ages[1])",
      hostileNumbersBut("0.5", "1.5", "2^53", "2^53+2", "1e308"),
      (v) => collectByAge(cands, [1, v as number, 2], [8, 8, 8], 8, release),
      { snapshot: snap },
    );
    refuse(
      "collectByAge(byteLengths[2])",
      hostileNumbersBut(),
      (v) => collectByAge(cands, [1, 2, 3], [8, 8, v as number], 8, release),
      { snapshot: snap },
    );
    refuse(
      "collectByAge(targetBytes)",
      hostileNumbersBut("0.5", "1.5", "2^53", "2^53+2", "1e308", "Infinity"),
      (v) => collectByAge(cands, [1, 2, 3], [8, 8, 8], v as number, release),
      { snapshot: snap },
    );
    refuse(
      "collectByAge(ages array)",
      [
        { name: "short", value: [1] },
        { name: "long", value: [1, 2, 3, 4] },
        ...hostileObjectsBut("[]"),
      ],
      (v) => collectByAge(cands, v as number[], [8, 8, 8], 8, release),
      { snapshot: snap },
    );
    refuse(
      "collectByAge(release)",
      hostileObjectsBut("() => {}"),
      (v) => collectByAge(cands, [1, 2, 3], [8, 8, 8], 8, v as never),
      { snapshot: snap },
    );
    refuse(
      "collectByAge(stopAtTarget)",
      hostileFlags(),
      (v) =>
        collectByAge(cands, [1, 2, 3], [8, 8, 8], 8, release, {
          stopAtTarget: v as boolean,
        }),
      { snapshot: snap },
    );
    assert.deepEqual(collectByAge(cands, [1, 2, 3], [8, 8, 8], 0.5, release), {
      releasedBytes: 16,
      releasedCount: 2,
    });
  });

  it("alignUp, formatBytes, Device: values outside the contract, rounding at unit edges, -0", () => {
    refuse(
      "alignUp(value)",
      hostileNumbersBut("2^53"),
      (v) => alignUp(v as number, 8),
      { error: InvalidArgumentError },
    );
    refuse(
      "alignUp(alignment)",
      [...hostileNumbersBut("2^53"), { name: "0", value: 0 }, {
        name: "3",
        value: 3,
      }],
      (v) => alignUp(5, v as number),
      { error: InvalidArgumentError },
    );
    assert.equal(alignUp(MAX, 8), 2 ** 53);
    assert.equal(alignUp(-0, 8), 0);
    assert.equal(formatBytes(1024 ** 2 - 1), "1.00 MiB");
    assert.equal(formatBytes(1024 ** 3 - 1), "1.00 GiB");
    assert.equal(formatBytes(1024 ** 4 - 1), "1.00 TiB");
    assert.equal(formatBytes(-(1024 ** 2 - 1)), "-1.00 MiB");
    assert.equal(formatBytes(1024 ** 2 - 6), "1023.99 KiB");
    assert.equal(formatSize(1024 ** 2 - 1), "1.00 MiB");
    assert.equal(formatBytes(-0), "0 bytes");
    assert.equal(formatBytes(1023), "1023 bytes");
    const cpu = Device.cpu();
    for (const v of [null, undefined, "cpu:0", { type: "cpu", index: 0 }, 0]) {
      assert.equal(cpu.equals(v as never), false);
    }
    assert.ok(Object.is(new Device("cpu", -0).index, 0));
    assert.equal(new Device("cpu", -0).equals(cpu), true);
    refuse(
      "Device.parse",
      [
        ...hostileObjectsBut(),
        { name: "cpu:65536", value: "cpu:65536" },
        { name: "cpu:01", value: "cpu:01" },
        { name: "CPU", value: "CPU" },
        { name: " cpu", value: " cpu" },
        { name: "cpu:-1", value: "cpu:-1" },
        { name: "__proto__", value: "__proto__:0" },
      ],
      (v) => Device.parse(v as string),
      { error: InvalidArgumentError, skip: ['"abc"'] },
    );
    refuse(
      "new Device(index)",
      hostileNumbersBut(),
      (v) => new Device("cpu", v as number),
      { error: InvalidArgumentError, skip: ["undefined"] },
    );
  });

  it("LeakDetector refuses non-boolean captureStack; PoolStats.figure refuses unknown names; stats add up across pools", () => {
    refuse(
      "new LeakDetector(captureStack)",
      hostileFlags(),
      (v) => new LeakDetector({ captureStack: v as boolean }),
      { error: InvalidArgumentError },
    );
    const stats = new PoolStats();
    stats.reserved(true, 1, 2048);
    stats.allocated(true, 512, 500, false);
    stats.reserved(false, 1, 1 << 20);
    stats.allocated(false, 4096, 4000, false);
    const snap = () => JSON.stringify(stats.memoryStats(Infinity));
    refuse(
      "PoolStats.figure",
      [
        { name: "bogus", value: "bogus" },
        { name: "__proto__", value: "__proto__" },
        { name: "toString", value: "toString" },
        ...hostileObjectsBut(),
      ],
      (v) => stats.figure(v as never),
      { snapshot: snap, error: InvalidArgumentError },
    );
    const m = stats.memoryStats(Infinity);
    for (
      const name of [
        "allocation",
        "segment",
        "allocatedBytes",
        "reservedBytes",
        "requestedBytes",
      ] as const
    ) {
      const f = m[name];
      assert.equal(
        f.all.current,
        f.smallPool.current + f.largePool.current,
        name,
      );
      assert.equal(
        f.all.allocated,
        f.smallPool.allocated + f.largePool.allocated,
        name,
      );
      assert.ok(f.all.peak >= f.all.current, name);
    }
    stats.freed(false, 4096);
    stats.resetAccumulated();
    const after = stats.figure("allocatedBytes");
    assert.deepEqual(
      [after.all.allocated, after.all.freed, after.all.current],
      [0, 0, 512],
    );
    stats.resetPeak();
    assert.equal(stats.figure("allocatedBytes").all.peak, 512);
  });

  it("UniqueVoidPtr: a deleter that is not a function is refused when given, not when freeing", () => {
    const bad = hostileObjectsBut("null", "() => {}", "undefined");
    refuse(
      "new UniqueVoidPtr(deleter)",
      bad,
      (v) => new UniqueVoidPtr({}, 1, v as never),
      {
        error: InvalidArgumentError,
      },
    );
    let freed = 0;
    const deleter = () => {
      freed++;
    };
    const u = new UniqueVoidPtr({}, 1, deleter);
    refuse(
      "compareExchangeDeleter(next)",
      [...bad, { name: "null", value: null }],
      (v) => u.compareExchangeDeleter(deleter, v as never),
      {
        snapshot: () => u.getDeleter(),
        error: InvalidArgumentError,
      },
    );
    u.clear();
    assert.equal(freed, 1);
  });

  it("history TraceRecorder refuses unknown actions, hostile numbers and flags, recording nothing", () => {
    const h = new TraceRecorder({ maxEntries: 4 });
    h.record("alloc", 0, 512, 500, 0, "t");
    const state = () =>
      JSON.stringify(h.entries().map((e) => ({ ...e, timeMs: 0 })));
    refuse(
      "record(action)",
      [{ name: "bogus", value: "bogus" }, {
        name: "__proto__",
        value: "__proto__",
      }, ...hostileObjectsBut()],
      (v) => h.record(v as never, 0, 1, 1, 0),
      { snapshot: state, error: InvalidArgumentError },
    );
    for (const at of [1, 2, 3, 4]) {
      refuse(`record(arg ${at})`, hostileNumbersBut(), (v) => {
        const args: [number, number, number, number] = [0, 1, 1, 0];
        args[at - 1] = v as number;
        h.record("alloc", ...args);
      }, { snapshot: state, error: InvalidArgumentError });
    }
    refuse(
      "record(tag)",
      hostileObjectsBut("undefined", '"abc"'),
      (v) => h.record("alloc", 0, 1, 1, 0, v as never),
      {
        snapshot: state,
        error: InvalidArgumentError,
      },
    );
    refuse(
      "new TraceRecorder(captureStack)",
      hostileFlags(),
      (v) => new TraceRecorder({ captureStack: v as boolean }),
      {
        error: InvalidArgumentError,
      },
    );
    refuse(
      "new TraceRecorder(options)",
      hostileObjectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => new TraceRecorder(v as never),
      {
        error: InvalidArgumentError,
      },
    );
    refuse(
      "finishSnapshot(history)",
      hostileObjectsBut("null"),
      (v) => finishSnapshot("cpu:0", "x", [], v as never),
      {
        snapshot: state,
        error: InvalidArgumentError,
      },
    );
    refuse(
      "finishSnapshot(segments)",
      hostileObjectsBut("[]"),
      (v) => finishSnapshot("cpu:0", "x", v as never, h),
      {
        snapshot: state,
        error: InvalidArgumentError,
      },
    );
    refuse(
      "segmentTotals",
      hostileObjectsBut("[]"),
      (v) => segmentTotals(v as never),
      { error: InvalidArgumentError },
    );
  });

  it("formatMemorySummary and flattenMemoryStats refuse stats without figures; a hostile title stays on one line of the box", () => {
    const stats = new PoolStats();
    stats.reserved(false, 1, 1 << 20);
    stats.allocated(false, 4096, 4000, false);
    const m = stats.memoryStats(Infinity);
    const broken = [
      ...hostileObjectsBut("{}", "[]", "() => {}"),
      { name: "{}", value: {} },
      {
        name: "no smallPool",
        value: { ...m, allocation: { all: m.allocation.all } },
      },
      { name: "null oversize", value: { ...m, oversizeSegments: null } },
    ];
    refuse(
      "formatMemorySummary(stats)",
      broken,
      (v) => formatMemorySummary(v as never),
      { error: InvalidArgumentError },
    );
    refuse(
      "flattenMemoryStats(stats)",
      broken,
      (v) => flattenMemoryStats(v as never),
      { error: InvalidArgumentError },
    );
    refuse(
      "formatMemorySummary(title)",
      hostileObjectsBut("undefined", '"abc"'),
      (v) => formatMemorySummary(m, { title: v as string }),
      {
        error: InvalidArgumentError,
      },
    );
    refuse(
      "formatMemorySummary(abbreviated)",
      hostileFlags(),
      (v) => formatMemorySummary(m, { abbreviated: v as boolean }),
      {
        error: InvalidArgumentError,
      },
    );
    const plain = formatMemorySummary(m).split("\n");
    const text = formatMemorySummary(m, {
      title: "evil\ntitle\r|" + "x".repeat(200),
    }).split("\n");
    assert.equal(text.length, plain.length, "the title broke the table");
    for (const row of text) assert.equal(row.length, 79, row);
  });

  it("acquireSegment: a segment whose fields throw is refused as a SegmentSourceError and handed back", () => {
    const source = new MockSegmentSource({ capacityBytes: 1 << 20 });
    let freed = 0;
    const hostile = {
      device: source.device,
      alignment: source.alignment,
      maxSegmentByteLength: source.maxSegmentByteLength,
      capacityBytes: source.capacityBytes,
      tryAllocateSegment: () => ({
        memory: {},
        byteOffset: 0,
        get byteLength(): number {
          throw new InjectedFault("byteLength");
        },
      }),
      freeSegment: () => {
        freed++;
      },
    };
    assert.throws(
      () => acquireSegment(hostile as never, 64, 64),
      SegmentSourceError,
    );
    assert.equal(freed, 1);
    const resizer = {
      ...hostile,
      tryResizeSegment: () => ({
        memory: {},
        byteOffset: 0,
        get byteLength(): number {
          throw new InjectedFault("byteLength");
        },
      }),
    };
    const seg = { memory: {}, byteOffset: 0, byteLength: 64 };
    assert.throws(
      () => resizeSegment(resizer as never, seg, 128, 128),
      SegmentSourceError,
    );
    const mover = {
      ...hostile,
      tryResizeSegment: () => ({ memory: {}, byteOffset: 0, byteLength: 128 }),
    };
    assert.throws(
      () => resizeSegment(mover as never, seg, 128, 128),
      SegmentSourceError,
    );
    const weird = { ...hostile, tryAllocateSegment: () => Symbol("segment") };
    assert.throws(
      () => acquireSegment(weird as never, 64, 64),
      SegmentSourceError,
    );
  });

  it("resizeSegment: a bad request never reaches the source (it would resize to anything); a source that lies about the result is a SegmentSourceError", () => {
    const device = new MockSegmentSource({
      capacityBytes: 1 << 20,
      maxSegmentByteLength: 1 << 16,
    });
    let calls = 0;
    // A source that checks nothing: it resizes to whatever it is asked.
    const sloppy = {
      device: device.device,
      alignment: device.alignment,
      maxSegmentByteLength: device.maxSegmentByteLength,
      capacityBytes: device.capacityBytes,
      tryAllocateSegment: (n: number) => device.tryAllocateSegment(n),
      freeSegment: (s: Segment<MockMemory>) => device.freeSegment(s),
      tryResizeSegment: (s: Segment<MockMemory>, n: number) => {
        calls++;
        return { memory: s.memory, byteOffset: s.byteOffset, byteLength: n };
      },
    };
    const seg = device.tryAllocateSegment(1024, { resizable: true })!;
    const lengths = [
      ...hostileNumbersBut(),
      { name: "0", value: 0 },
      { name: "max + 1", value: (1 << 16) + 1 },
    ];
    refuse(
      "resizeSegment(byteLength)",
      lengths,
      (v) => resizeSegment(sloppy, seg, v as number, 64),
      { error: InvalidArgumentError },
    );
    refuse(
      "resizeSegment(segment)",
      hostileNumbersBut().filter((h) =>
        typeof h.value !== "object" || h.value === null
      ),
      (v) => resizeSegment(sloppy, v as Segment<MockMemory>, 2048, 64),
      { error: InvalidArgumentError },
    );
    assert.equal(calls, 0, "a bad request reached the source");
    assert.equal(resizeSegment(sloppy, seg, 1 << 16, 64)?.byteLength, 1 << 16);
    assert.equal(calls, 1);
    // A source that resizes and then lies about it: refused, and the
    // caller's record is still the live one (nothing was committed).
    const liar = {
      ...sloppy,
      tryResizeSegment: (s: Segment<MockMemory>, n: number) => {
        const r = device.tryResizeSegment(s, n);
        return r === undefined ? r : { ...r, byteLength: n + 512 };
      },
    };
    assert.throws(
      () => resizeSegment(liar, seg, 2048, 2048),
      SegmentSourceError,
    );
  });

  it("call stacks: hostile frame counts and frames are refused; maxFrames 0 captures none", () => {
    assert.deepEqual(captureCallStack({ maxFrames: 0 }), []);
    assert.equal(captureCallStack({ maxFrames: 1 }).length, 1);
    const counts = hostileNumbersBut("undefined", "null").concat({
      name: "10001",
      value: 10_001,
    });
    refuse(
      "captureCallStack(maxFrames)",
      counts,
      (v) => captureCallStack({ maxFrames: v as number }),
      { error: InvalidArgumentError },
    );
    refuse(
      "captureCallStack(skipFrames)",
      counts,
      (v) => captureCallStack({ skipFrames: v as number }),
      { error: InvalidArgumentError },
    );
    refuse(
      "captureCallStack(options)",
      hostileObjectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => captureCallStack(v as never),
      { error: InvalidArgumentError },
    );
    refuse(
      "isAllotFrame",
      hostileObjectsBut('"abc"'),
      (v) => isAllotFrame(v as string),
      { error: InvalidArgumentError },
    );
    refuse(
      "formatCallStack",
      [...hostileObjectsBut("[]"), { name: "[null]", value: [null] }, {
        name: "[{text: 1}]",
        value: [{ text: 1, allot: false }],
      }],
      (v) => formatCallStack(v as never),
      { error: InvalidArgumentError },
    );
    assert.equal(
      formatCallStack([{ text: "a", allot: true }, {
        text: "b",
        allot: false,
      }]),
      "b\n[allot] a",
    );
  });

  it("MockSegmentSource: hostile options, failure counts and request flags are refused, changing nothing", () => {
    refuse(
      "new MockSegmentSource(options)",
      hostileObjectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => new MockSegmentSource(v as never),
      { error: InvalidArgumentError },
    );
    refuse(
      "new MockSegmentSource(backed)",
      hostileFlags(),
      (v) => new MockSegmentSource({ backed: v as boolean }),
      { error: InvalidArgumentError },
    );
    refuse(
      "new MockSegmentSource(device)",
      [...hostileObjectsBut("undefined", "null"), {
        name: "cpu:0 string",
        value: "cpu:0",
      }],
      (v) => new MockSegmentSource({ device: v as never }),
      { error: InvalidArgumentError },
    );
    const source = new MockSegmentSource({
      capacityBytes: 1 << 20,
      backed: true,
    });
    const live = source.tryAllocateSegment(4096)!;
    const state = () => [
      source.reservedBytes,
      source.allocationCount,
      source.failureCount,
      source.liveSegmentCount,
    ];
    refuse(
      "failNext",
      hostileNumbersBut("undefined"),
      (v) => source.failNext(v as number),
      { snapshot: state, error: InvalidArgumentError },
    );
    refuse(
      "throwNext",
      hostileNumbersBut("undefined"),
      (v) => source.throwNext(v as number),
      { snapshot: state, error: InvalidArgumentError },
    );
    source.failNext(1);
    refuse(
      "tryAllocateSegment(resizable)",
      hostileFlags(),
      (v) => source.tryAllocateSegment(256, { resizable: v as boolean }),
      { snapshot: state, error: InvalidArgumentError },
    );
    refuse(
      "tryAllocateSegment(hostVisible)",
      hostileFlags(),
      (v) => source.tryAllocateSegment(256, { hostVisible: v as boolean }),
      { snapshot: state, error: InvalidArgumentError },
    );
    assert.equal(
      source.tryAllocateSegment(256),
      undefined,
      "the armed failure was used by a refused call",
    );
    assert.ok(source.tryAllocateSegment(256) !== undefined);
    source.freeSegment(live);
    assert.throws(() => source.freeSegment(live), DoubleFreeError);
  });

  it("intrusive counts model: random clone/weak/lock/release (twice too) keep PyTorch's counts; releaseResources runs once, at the last strong release", () => {
    type Op =
      | {
        k: "clone" | "weak" | "lock" | "releaseStrong" | "releaseWeak";
        i: number;
      }
      | { k: "dispose"; i: number };
    const op = fc.record({
      k: fc.constantFrom(
        "clone",
        "weak",
        "lock",
        "releaseStrong",
        "releaseWeak",
        "dispose",
      ),
      i: fc.nat(),
    }) as fc.Arbitrary<Op>;
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        let released = 0;
        class T extends IntrusiveTarget {
          protected override releaseResources(): void {
            released++;
          }
        }
        const t = new T();
        const strong: IntrusivePtr<T>[] = [IntrusivePtr.make(t)];
        const weak: WeakIntrusivePtr<T>[] = [];
        let liveStrong = 1, liveWeak = 0;
        const pick = <X>(a: X[], i: number) =>
          a.length === 0 ? undefined : a[i % a.length];
        for (const o of ops) {
          const s = pick(strong, o.i), w = pick(weak, o.i);
          switch (o.k) {
            case "clone":
              if (!s) break;
              if (s.released) assert.throws(() => s.clone(), UseAfterFreeError);
              else strong.push(s.clone()), liveStrong++;
              break;
            case "weak":
              if (!s) break;
              if (s.released) assert.throws(() => s.weak(), UseAfterFreeError);
              else weak.push(s.weak()), liveWeak++;
              break;
            case "lock": {
              if (!w) break;
              if (w.released) {
                assert.throws(() => w.lock(), UseAfterFreeError);
                break;
              }
              const l = w.lock();
              if (liveStrong === 0) assert.equal(l, undefined, "resurrected");
              else strong.push(l!), liveStrong++;
              break;
            }
            case "releaseStrong":
              if (!s) break;
              if (s.released) assert.throws(() => s.release(), DoubleFreeError);
              else s.release(), liveStrong--;
              break;
            case "releaseWeak":
              if (!w) break;
              if (w.released) assert.throws(() => w.release(), DoubleFreeError);
              else w.release(), liveWeak--;
              break;
            case "dispose":
              if (!s) break;
              if (!s.released) liveStrong--;
              s[Symbol.dispose](); // never throws, never twice
              break;
          }
          assert.equal(t.useCount, liveStrong);
          assert.equal(t.weakUseCount, liveWeak + (liveStrong > 0 ? 1 : 0));
          assert.equal(released, liveStrong === 0 ? 1 : 0);
          assert.equal(t.finished, liveStrong === 0 && liveWeak === 0);
        }
      }),
      { numRuns: modelRuns(300) },
    );
  });

  it("LeakDetector.watch refuses hostile handles and infos, changing nothing", () => {
    const d = new LeakDetector();
    const kept = {};
    d.watch(kept, { label: "kept", byteLength: 8 });
    const state = () => [d.watching, d.leaks.length, d.leakedBytes];
    refuse(
      "watch(handle)",
      hostileObjectsBut("{}", "[]", "() => {}", "trap proxy"),
      (v) => d.watch(v as object, { label: "x" }),
      { snapshot: state, error: InvalidArgumentError },
    );
    refuse(
      "watch(info)",
      hostileObjectsBut("trap proxy"),
      (v) => d.watch({}, v as never),
      { snapshot: state },
    );
    refuse(
      "watch(byteLength)",
      hostileNumbersBut("undefined"),
      (v) => d.watch({}, { label: "x", byteLength: v as number }),
      { snapshot: state },
    );
    refuse(
      "watch(label)",
      hostileObjectsBut('"abc"', "trap proxy"),
      (v) => d.watch({}, { label: v as string }),
      { snapshot: state },
    );
    d.watch(kept, { label: "again" }); // a second watch replaces the first
    assert.equal(d.watching, 1);
    assert.equal(d.forget(kept), true);
    assert.equal(d.forget(kept), false);
    assert.equal(d.watching, 0);
  });

  it("host-memory look-alikes (Object.create of ArrayBuffer, SharedArrayBuffer, WebAssembly.Memory) are refused with a typed error", () => {
    const fakes = [
      { name: "fake ArrayBuffer", value: Object.create(ArrayBuffer.prototype) },
      {
        name: "fake SharedArrayBuffer",
        value: Object.create(SharedArrayBuffer.prototype),
      },
      {
        name: "fake WebAssembly.Memory",
        value: Object.create(WebAssembly.Memory.prototype),
      },
    ];
    refuse(
      "new DataPtr(look-alike memory)",
      fakes,
      (v) => new DataPtr(v, 0, 0, Device.cpu()),
      { error: InvalidArgumentError },
    );
    refuse("junkFill(look-alike memory)", fakes, (v) => junkFill(v, 0, 0), {
      error: InvalidArgumentError,
    });
    refuse(
      "hostBuffer",
      [fakes[2], ...hostObjectsForBuffer()],
      (v) => hostBuffer(v as never),
      { error: InvalidArgumentError },
    );
    const wasm = new WebAssembly.Memory({ initial: 1 });
    assert.equal(new DataPtr(wasm, 0, 65536, Device.cpu()).byteLength, 65536);
    assert.throws(
      () => new DataPtr(wasm, 0, 65537, Device.cpu()),
      InvalidArgumentError,
    );
  });

  it("validators: -0 comes back as 0, so stored options compare equal to 0", () => {
    for (
      const v of [
        validateByteLength(-0),
        validateInteger(-0, 0, 4, "n"),
        validateCapacity(-0),
        alignUp(-0, 8),
      ]
    ) {
      assert.ok(Object.is(v, 0), String(v));
    }
    const source = new MockSegmentSource({ capacityBytes: -0 });
    assert.ok(Object.is(source.capacityBytes, 0));
  });

  it("AllocatorBase.copyData and clone: a resizable buffer shrunk under a place is refused with a typed error; overlapping copies are exact", () => {
    class Host extends AllocatorBase<ArrayBuffer, number> {
      readonly device = Device.cpu();
      readonly buffer = new ArrayBuffer(64, { maxByteLength: 64 });
      allocate(byteLength: number): DataPtr<ArrayBuffer, number> {
        return new DataPtr(this.buffer, 0, byteLength, this.device);
      }
    }
    const a = new Host();
    const bytes = new Uint8Array(a.buffer);
    bytes.forEach((_, i) => (bytes[i] = i));
    const src = a.allocate(32);
    const dest = new DataPtr<ArrayBuffer, number>(a.buffer, 8, 32, a.device);
    a.copyData(dest, src, 32); // overlapping, forward
    assert.deepEqual(
      [...bytes.subarray(8, 40)],
      Array.from({ length: 32 }, (_, i) => i),
    );
    a.buffer.resize(16);
    const state = () => [...new Uint8Array(a.buffer)];
    assertRefused("copyData(shrunk)", () => a.copyData(dest, src, 32), {
      snapshot: state,
      error: InvalidArgumentError,
    });
    assertRefused("clone(shrunk)", () => a.clone(src), {
      snapshot: state,
      error: InvalidArgumentError,
    });
    refuse(
      "copyData(byteLength)",
      [...hostileNumbersBut(), { name: "33", value: 33 }],
      (v) => a.copyData(dest, src, v as number),
      { snapshot: state },
    );
    refuse(
      "copyData(dest)",
      [...hostileObjectsBut(), {
        name: "look-alike",
        value: { byteLength: 8, byteOffset: 0, memory: a.buffer },
      }],
      (v) => a.copyData(v as never, src, 0),
      { snapshot: state, error: InvalidArgumentError },
    );
  });

  it('StatRecount.add refuses prototype keys and unknown figures ("__proto__" wrote into Object.prototype)', () => {
    const r = new StatRecount();
    const state = () => JSON.stringify(r.counts);
    refuse(
      "StatRecount.add(name)",
      [
        { name: "__proto__", value: "__proto__" },
        { name: "constructor", value: "constructor" },
        { name: "toString", value: "toString" },
        { name: "bogus", value: "bogus" },
        ...hostileObjectsBut(),
      ],
      (v) => r.add(v as never, false, 1),
      { snapshot: state, error: InvalidArgumentError },
    );
    refuse(
      "StatRecount.add(value)",
      hostileNumbersBut("-1", "-2^53", "0.5", "1.5", "2^53", "2^53+2", "1e308"),
      (v) => r.add("allocation", true, v as number),
      { snapshot: state, error: InvalidArgumentError },
    );
    assert.equal(
      ({} as Record<string, unknown>)[1],
      undefined,
      "Object.prototype polluted",
    );
    r.allocatedBlock(true, 512, 500);
    assert.deepEqual(r.counts.allocatedBytes, [512, 0]);
  });

  it(
    "LeakDetector.leaks is a copy of frozen reports: a caller's push, splice or edit never reaches the detector",
    {
      skip: gc ? false : "needs --v8-flags=--expose-gc",
    },
    async () => {
      const seen: LeakReport[] = [];
      const d = new LeakDetector({ onLeak: (r) => seen.push(r) });
      (() => {
        d.watch({}, { label: "a", byteLength: 8 });
        d.watch({}, { label: "b", byteLength: 16 });
      })();
      for (let i = 0; i < 20 && d.leaks.length < 2; i++) {
        gc!();
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(d.leaks.length, 2);
      const leaks = d.leaks as LeakReport[];
      leaks.push({ label: "forged", byteLength: 1, createdAt: 0 });
      leaks.splice(0, 1);
      for (const r of [...d.leaks, ...seen]) {
        assert.throws(() => {
          r.label = "edited";
        }, TypeError);
      }
      assert.deepEqual(d.leaks.map((r) => r.label).sort(), ["a", "b"]);
      assert.notEqual(d.leaks, d.leaks);
      assert.equal(d.leakedBytes, 24);
    },
  );

  it("a look-alike DataPtr (Object.create(DataPtr.prototype)) is refused with InvalidArgumentError by copyData and clone, changing nothing", () => {
    class HostAllocator extends AllocatorBase<ArrayBuffer, number> {
      readonly device = Device.cpu();
      made = 0;
      allocate(n: number): DataPtr<ArrayBuffer, number> {
        this.made++;
        return new DataPtr(new ArrayBuffer(n), 0, n, this.device);
      }
    }
    const a = new HostAllocator();
    const real = a.allocate(8);
    new Uint8Array(real.memory).fill(7);
    const fake = Object.create(DataPtr.prototype) as DataPtr<
      ArrayBuffer,
      number
    >;
    assert.ok(fake instanceof DataPtr);
    assert.ok(!DataPtr.isDataPtr(fake));
    assert.ok(DataPtr.isDataPtr(real));
    for (const v of [null, undefined, 1, {}, real.memory]) {
      assert.ok(!DataPtr.isDataPtr(v));
    }
    const state =
      () => [a.made, real.released, [...new Uint8Array(real.memory)]];
    refuse(
      "copyData/clone(look-alike DataPtr)",
      [{ name: "Object.create(DataPtr.prototype)", value: fake }],
      (v) => a.copyData(v as typeof real, real, 1),
      { snapshot: state, error: InvalidArgumentError },
    );
    refuse(
      "copyData(src look-alike DataPtr)",
      [{ name: "Object.create(DataPtr.prototype)", value: fake }],
      (v) => a.copyData(real, v as typeof real, 1),
      { snapshot: state, error: InvalidArgumentError },
    );
    refuse(
      "clone(look-alike DataPtr)",
      [{ name: "Object.create(DataPtr.prototype)", value: fake }],
      (v) => a.clone(v as typeof real),
      { snapshot: state, error: InvalidArgumentError },
    );
  });

  it("tally", () => {
    assert.ok(tally.entryPoints >= 20, `${tally.entryPoints} entry points`);
    assert.ok(tally.calls >= 400, `${tally.calls} hostile calls`);
  });
});
