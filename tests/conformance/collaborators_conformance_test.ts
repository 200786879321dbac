/**
 * Hostile and lying collaborators, from the public API only (the fourth
 * outside-in review): for every pool that takes a segment source, a source
 * whose `tryAllocateSegment` throws on its Nth call, returns a segment
 * shorter than asked, or the same segment twice, and whose `freeSegment`
 * throws; Proxy-wrapped handles, a pool's handles after `dispose()` or
 * `emptyCache()`, callbacks that throw or re-enter the allocator, and a
 * `signal` already aborted. Each case: the refused call throws, the pool's
 * `stats()` and `snapshot()` are as before, and the pool still works (blocks
 * hold their bytes, stats equal a recount, everything comes back).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  AllotError,
  type Segment,
  type SegmentRequestOptions,
  type SegmentSource,
} from "@allot/core";
import { HostSegmentSource } from "@allot/cpu";
import { CachingAllocator, StepPlannedPool } from "@allot/caching";
import { WatermarkAllocator } from "@allot/watermark";

type HostMemory = ArrayBuffer | SharedArrayBuffer;
const KiB = 1024;
const MiB = 1024 * KiB;

/** What the lying source does on its next segment request. */
type Lie = "throw" | "short" | "twice" | "free-throws";

/** A working host source that lies once when armed. */
class LyingSource implements SegmentSource<HostMemory> {
  readonly inner = new HostSegmentSource({ capacityBytes: 256 * MiB });
  armed: Lie | undefined;
  /** Calls left before the lie (the Nth call lies). */
  countdown = 0;
  last: Segment<HostMemory> | undefined;
  /** A short record given out, and the real segment behind it. */
  readonly real = new Map<Segment<HostMemory>, Segment<HostMemory>>();
  /** Segments given out twice, and those of them freed once already. */
  readonly doubled = new Set<Segment<HostMemory>>();
  readonly freedOnce = new Set<Segment<HostMemory>>();
  /**
   * Frees of a segment given out twice after its first free: the pool
   * gave back the duplicate while it held the original (its blocks then lie
   * in freed memory), or kept both.
   */
  extraFrees = 0;
  get device() {
    return this.inner.device;
  }
  get alignment() {
    return this.inner.alignment;
  }
  get maxSegmentByteLength() {
    return this.inner.maxSegmentByteLength;
  }
  get capacityBytes() {
    return this.inner.capacityBytes;
  }
  arm(lie: Lie, nth = 1): void {
    this.armed = lie;
    this.countdown = nth - 1;
  }
  #fires(lie: Lie): boolean {
    if (this.armed !== lie) return false;
    if (this.countdown-- > 0) return false;
    this.armed = undefined;
    return true;
  }
  tryAllocateSegment(
    byteLength: number,
    options?: SegmentRequestOptions,
  ): Segment<HostMemory> | undefined {
    if (this.#fires("throw")) throw new Error("device lost (injected)");
    if (this.#fires("twice") && this.last !== undefined) {
      this.doubled.add(this.last);
      return this.last;
    }
    const seg = this.inner.tryAllocateSegment(byteLength, options);
    if (seg !== undefined) this.last = seg;
    if (seg !== undefined && this.#fires("short")) {
      const short = {
        memory: seg.memory,
        byteOffset: seg.byteOffset,
        byteLength: 64,
      };
      this.real.set(short, seg);
      return short;
    }
    return seg;
  }
  freeSegment(segment: Segment<HostMemory>): void {
    if (this.#fires("free-throws")) throw new Error("free failed (injected)");
    if (this.freedOnce.has(segment)) {
      this.extraFrees++;
      return;
    }
    if (this.doubled.has(segment)) this.freedOnce.add(segment);
    const real = this.real.get(segment);
    this.real.delete(segment);
    this.inner.freeSegment(real ?? segment);
  }
}

interface Block {
  memory: HostMemory;
  byteOffset: number;
  byteLength: number;
}

/** One pool over a lying source, seen through the few verbs the cases use. */
interface Pool {
  name: string;
  source: LyingSource;
  allocate(n: number): Block;
  free(b: Block): void;
  state(): unknown;
  inUse(): number;
  counted(b: Block, n: number): number;
  validate(): void;
  emptyCache(): void;
  dispose?(): void;
}

function pools(): Pool[] {
  const make: (() => Pool)[] = [
    () => {
      const source = new LyingSource();
      const a = new CachingAllocator(source);
      return {
        name: "CachingAllocator",
        source,
        allocate: (n) => a.allocate(n),
        free: (b) => a.free(b as never),
        state: () => ({ stats: a.stats(), snapshot: a.snapshot() }),
        inUse: () => a.stats().allocatedBytes.all.current,
        counted: (b) =>
          (b as unknown as { blockByteLength: number })
            .blockByteLength,
        validate: () => a.validate(),
        emptyCache: () => a.emptyCache(),
      };
    },
    () => {
      const source = new LyingSource();
      const p = new StepPlannedPool(source);
      return {
        name: "StepPlannedPool",
        source,
        allocate: (n) => p.allocate(n),
        free: (b) => p.free(b as never),
        state: () => ({ stats: p.stats(), snapshot: p.snapshot() }),
        inUse: () => p.stats().requestedBytes.current,
        counted: (_b, n) => n,
        validate: () => p.validate(),
        emptyCache: () => p.emptyCache(),
        dispose: () => p.dispose(),
      };
    },
    () => {
      const source = new LyingSource();
      const w = new WatermarkAllocator(source);
      return {
        name: "WatermarkAllocator",
        source,
        allocate: (n) => w.allocateBuffer(n),
        free: (b) => w.free(b as never),
        state: () => ({ stats: w.stats(), snapshot: w.snapshot() }),
        inUse: () => w.stats().allocatedBytes.current,
        counted: (b) => b.byteLength,
        validate: () => w.validate(),
        emptyCache: () => w.emptyCache(),
      };
    },
  ];
  return make.map((m) => m());
}

function fill(b: Block, n: number, tag: number): void {
  new Uint8Array(b.memory, b.byteOffset, n).fill(tag);
}

function intact(live: [Block, number, number][], where: string): void {
  for (const [b, n, tag] of live) {
    const bytes = new Uint8Array(b.memory, b.byteOffset, n);
    for (let i = 0; i < n; i++) {
      if (bytes[i] !== tag) {
        assert.fail(`${where}: block of ${n} bytes, tag ${tag}: overlap`);
      }
    }
  }
}

/** Allocates, checks, frees everything: the pool works and adds up. */
function stillWorks(p: Pool, live: [Block, number, number][], where: string) {
  for (const n of [100, 5000, 300 * KiB, 2 * MiB]) {
    const b = p.allocate(n);
    fill(b, n, live.length + 1);
    live.push([b, n, live.length + 1]);
  }
  intact(live, where);
  p.validate();
  const sum = live.reduce((s, [b, n]) => s + p.counted(b, n), 0);
  assert.equal(p.inUse(), sum, `${where}: stats equal a recount`);
  for (const [b] of live.splice(0)) p.free(b);
  p.emptyCache();
  p.validate();
  assert.equal(p.inUse(), 0, `${where}: nothing in use`);
  assert.equal(p.source.inner.reservedBytes, 0, `${where}: all given back`);
  assert.equal(p.source.extraFrees, 0, `${where}: a segment freed twice`);
}

for (const lie of ["throw", "short", "twice"] as const) {
  for (const nth of [1, 2, 3]) {
    Deno.test(`a segment source that lies (${lie}) on call ${nth}: refused, nothing changes, the pool works after`, () => {
      for (const p of pools()) {
        const where = `${p.name} ${lie} #${nth}`;
        const live: [Block, number, number][] = [];
        // one small block first: a segment is live when the source lies
        const first = p.allocate(64);
        fill(first, 64, 99);
        live.push([first, 64, 99]);
        p.source.arm(lie, nth);
        // requests of segment size each, until the source has lied
        for (let i = 0; i < 40 && p.source.armed !== undefined; i++) {
          const before = p.state();
          const n = 2 * MiB + i * 4096;
          let b: Block | undefined;
          try {
            b = p.allocate(n);
          } catch (e) {
            assert.equal(
              p.source.armed,
              undefined,
              `${where}: refused only where the source lied: ${e}`,
            );
            assert.deepEqual(p.state(), before, `${where}: state changed`);
            break;
          }
          fill(b, n, 10 + i);
          live.push([b, n, 10 + i]);
          intact(live, `${where} after request ${i}`);
        }
        assert.equal(p.source.armed, undefined, `${where}: the source lied`);
        p.validate();
        stillWorks(p, live, where);
      }
    });
  }
}

Deno.test("a segment source whose freeSegment throws: emptyCache reports it, the pool works after", () => {
  for (const p of pools()) {
    const where = `${p.name} free-throws`;
    const b = p.allocate(3 * MiB);
    p.free(b);
    p.source.arm("free-throws");
    const before = p.source.inner.reservedBytes;
    try {
      p.emptyCache();
    } catch (e) {
      assert.ok(e instanceof AllotError, `${where}: a typed error: ${e}`);
    }
    p.validate();
    // the segment the source failed to free is either still the pool's
    // (given back by the next emptyCache) or forgotten by it (the source
    // keeps it): never both, never counted twice
    p.emptyCache();
    const kept = p.source.inner.reservedBytes;
    assert.ok(kept === 0 || kept === before, `${where}: ${kept} of ${before}`);
    assert.equal(p.inUse(), 0);
    for (const n of [100, 3 * MiB]) p.free(p.allocate(n));
    p.emptyCache();
    p.validate();
    assert.equal(p.source.inner.reservedBytes, kept, `${where}: the rest back`);
  }
});

Deno.test("Proxy-wrapped and look-alike handles are refused with a typed error, nothing changes", () => {
  for (const p of pools()) {
    const b = p.allocate(1000);
    fill(b, 1000, 7);
    const before = p.state();
    for (
      const fake of [
        new Proxy(b, {}),
        { ...b },
        Object.create(b),
        new Proxy({}, {
          get() {
            throw new Error("a handle that throws on every read");
          },
        }),
      ]
    ) {
      assert.throws(
        () => p.free(fake as Block),
        (e: unknown) => e instanceof AllotError,
        `${p.name}: a fake handle is refused with a typed error (${
          fake === b ? "" : Object.keys(fake).length
        })`,
      );
      assert.deepEqual(p.state(), before, `${p.name}: a fake free changed`);
    }
    intact([[b, 1000, 7]], p.name);
    p.free(b);
    p.emptyCache();
    assert.equal(p.inUse(), 0);
  }
});

Deno.test("handles after the allocator is gone: a typed error, never a crash or a silent free", async () => {
  const { CpuHeap, SystemAllocator } = await import("@allot/cpu");
  const { SharedHeap } = await import("@allot/threads");
  const { OwnershipRegistry } = await import("@allot/registry");
  const { ManagedBufferPool } = await import("@allot/storage");
  // StepPlannedPool.dispose() with a block live
  const pool = new StepPlannedPool(new HostSegmentSource());
  const b = pool.allocate(1000);
  assert.throws(() => pool.dispose(), (e: unknown) => e instanceof AllotError);
  pool.free(b); // (refused: the pool is as it was)
  pool.dispose();
  assert.throws(() => pool.free(b), (e: unknown) => e instanceof AllotError);
  assert.throws(
    () => pool.allocate(10),
    (e: unknown) => e instanceof AllotError,
  );
  // CpuHeap.dispose()
  const heap = new CpuHeap(64 * KiB);
  const off = heap.allocate(100);
  heap.dispose();
  assert.throws(() => heap.free(off), (e: unknown) => e instanceof AllotError);
  assert.throws(
    () => heap.allocate(100),
    (e: unknown) => e instanceof AllotError,
  );
  // a detached SharedHeap handle, and a closed heap's other handle
  const shared = SharedHeap.create(1 << 20);
  const other = SharedHeap.attach(shared.descriptor());
  const o = other.allocate(100);
  other.detach();
  assert.throws(() => other.free(o), (e: unknown) => e instanceof AllotError);
  shared.free(o);
  const o2 = shared.allocate(100);
  shared.close();
  assert.throws(() => shared.free(o2), (e: unknown) => e instanceof AllotError);
  for (const verb of ["resetPeakStats", "resetAccumulatedStats", "snapshot"]) {
    assert.throws(
      () => (shared as unknown as Record<string, () => void>)[verb](),
      (e: unknown) => e instanceof AllotError,
      `${verb} after close`,
    );
  }
  // a disposed ManagedBufferPool and OwnershipRegistry
  const mp = new ManagedBufferPool(new SystemAllocator());
  const p = mp.allocate(100);
  mp[Symbol.dispose]();
  try {
    p.release();
  } catch (e) {
    assert.ok(e instanceof AllotError, `release after dispose: ${e}`);
  }
  const reg = new OwnershipRegistry();
  reg[Symbol.dispose]();
  assert.throws(
    () => reg.register(new ArrayBuffer(8) as never),
    (e: unknown) => e instanceof AllotError,
  );
});

/** A stream whose fences never complete, or whose `wait()` rejects. */
function hostileStream(kind: "never" | "rejects" | "throws", id: number) {
  return {
    id,
    fence() {
      return {
        get completed(): boolean {
          if (kind === "throws") throw new Error("completed threw (injected)");
          return false;
        },
        wait(): Promise<void> {
          if (kind === "rejects") {
            return Promise.reject(new Error("fence rejected (injected)"));
          }
          // (a fence whose `completed` throws: its work does finish)
          return kind === "throws" ? Promise.resolve() : new Promise(() => {});
        },
      };
    },
  };
}

Deno.test("a stream whose fence never completes, rejects or throws: the block is never reused early, a signal ends the wait", async () => {
  for (const kind of ["never", "rejects", "throws"] as const) {
    const source = new LyingSource();
    const a = new CachingAllocator(source);
    const b = a.allocate(1000);
    const keep = a.allocate(1000);
    fill(keep, 1000, 5);
    // (the wait counts in numSyncAllStreams, aborted or not: it began)
    const before = () => ({
      stats: { ...a.stats(), numSyncAllStreams: 0 },
      snapshot: a.snapshot(),
    });
    try {
      b.recordStream(hostileStream(kind, 7));
    } catch (e) {
      assert.ok(e instanceof AllotError, `${kind}: recordStream: ${e}`);
    }
    const bAt = b.byteOffset, bMemory = b.memory;
    a.free(b);
    // a block from the same size class: never b's bytes while its fence
    // holds (a fence that throws is reported once, with a typed error that
    // changes nothing)
    let c: ReturnType<typeof a.allocate>;
    try {
      c = a.allocate(1000);
    } catch (e) {
      assert.ok(kind === "throws" && e instanceof AllotError, `${kind}: ${e}`);
      c = a.allocate(1000);
    }
    if (kind === "never") {
      // (the same bytes: the same memory at the same offset; b and c may
      // sit in segments of their own, both at offset 0)
      assert.ok(
        c.memory !== bMemory || c.byteOffset !== bAt,
        "reused before its fence",
      );
      const was = before();
      await assert.rejects(
        a.synchronize({ signal: AbortSignal.timeout(20) }),
        `${kind}: the wait ends with the signal`,
      );
      assert.deepEqual(before(), was, `${kind}: a timed-out wait changed`);
    } else {
      // a fence that fails: its work will never run; the wait ends
      await a.synchronize();
    }
    intact([[keep, 1000, 5]], kind);
    a.free(c);
    a.free(keep);
    a.validate();
    assert.equal(a.stats().allocatedBytes.all.current, 0, kind);
  }
});
