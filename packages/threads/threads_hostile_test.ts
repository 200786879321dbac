/**
 * Hostile tests of `@allot/threads` beyond the adversarial table, from the
 * public API: memories too small for the header they hold, corrupted or
 * copied headers, heaps side by side in one memory, views past their block,
 * stale and twice-received shared descriptors, a fast-check model of
 * allocations, frees, remote frees and refused calls on two handles, several
 * Workers allocating and freeing each other's blocks with byte patterns in
 * every live block (checked for overlap, stats summed across Workers), and
 * Workers that die with blocks live and spans cached, or mid-operation.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllotError,
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
  UseAfterFreeError,
} from "@allot/core";
import { Buffer, ShapeError } from "@allot/storage";
import {
  ForeignHeapError,
  HeapBusyError,
  HeapClosedError,
  NotSharedMemoryError,
  SHARED_MAX_IN_FLIGHT,
  SharedHeap,
  SharedHeapAllocator,
} from "./mod.ts";
import type {
  HostileCommand,
  HostileReport,
  LiveBlock,
} from "./_test_hostile_worker.ts";
import { assertRefused } from "../core/_test_hostile.ts";
import { H_LOCK } from "./_layout.ts";
import {
  assertDisjoint,
  attempt,
  checkPattern,
  modelRuns,
  writePattern,
} from "../core/_test_faults.ts";

const KiB = 1024, MiB = 1 << 20;

/** Everything observable about a heap from one handle (while quiet). */
function snapshot(heap: SharedHeap) {
  heap.checkIntegrity();
  return {
    stats: heap.stats(),
    arenas: heap.arenas(),
    held: heap.blocksOf(heap.arena),
  };
}

/** A copy of a heap's memory (a SharedArrayBuffer of `length` bytes). */
function copyOf(heap: SharedHeap, length = heap.buffer.byteLength) {
  const copy = new SharedArrayBuffer(length);
  new Uint8Array(copy).set(
    new Uint8Array(heap.buffer, 0, Math.min(length, heap.buffer.byteLength)),
  );
  return copy;
}

/** Allocates and frees blocks of every kind and checks they stay inside `heap.buffer`. */
function exercise(heap: SharedHeap): void {
  const end = heap.buffer.byteLength;
  const blocks = [0, 100, 8192, 8193, 100_000, 5000].map((n) => {
    const at = heap.alloc(n);
    assert.ok(at + Math.max(n, 1) <= end, `block ${at} + ${n} inside ${end}`);
    return at;
  });
  for (const at of blocks) heap.free(at);
  heap.checkIntegrity();
}

describe("@allot/threads hostile", () => {
  it("attach() refuses a memory too small for the heap its header describes", () => {
    using heap = SharedHeap.create(4 * MiB);
    exercise(heap);
    for (const length of [HEADER_PROBE, 64 * KiB, 2 * MiB, 4 * MiB - 4096]) {
      const small = copyOf(heap, length);
      assert.throws(
        () => SharedHeap.attach({ ...heap.descriptor(), memory: small }),
        ForeignHeapError,
        `a ${length}-byte copy of a 4 MiB heap`,
      );
    }
    // The whole copy is a heap again (same id, same geometry).
    using copy = SharedHeap.attach({
      ...heap.descriptor(),
      memory: copyOf(heap),
    });
    exercise(copy);
    // A plain (not shared) copy is refused as such.
    const plain = new ArrayBuffer(4 * MiB);
    new Uint8Array(plain).set(new Uint8Array(heap.buffer));
    assert.throws(
      () =>
        SharedHeap.attach({
          ...heap.descriptor(),
          memory: plain as unknown as SharedArrayBuffer,
        }),
      NotSharedMemoryError,
    );
  });

  it("attach() to a header with any one word of its first line corrupted refuses or works in bounds", () => {
    using heap = SharedHeap.create(4 * MiB, { byteOffset: 1024 });
    const w0 = heap.byteOffset >> 2;
    let refused = 0;
    for (let word = 0; word < 16; word++) {
      for (const flip of [1, 0x5a5a, 0x40000000, -1]) {
        const copy = copyOf(heap);
        const i32 = new Int32Array(copy);
        i32[w0 + word] = flip === -1 ? -1 : i32[w0 + word] ^ flip;
        let handle: SharedHeap | undefined;
        try {
          handle = SharedHeap.attach({ ...heap.descriptor(), memory: copy });
        } catch (error) {
          assert.ok(
            error instanceof AllotError,
            `word ${word} ^ ${flip}: ${error}`,
          );
          refused++;
          continue;
        }
        try {
          exercise(handle);
        } finally {
          handle.detach();
        }
      }
    }
    // Magic, version, id, state and the four geometry words at least.
    assert.ok(refused >= 8 * 4, `${refused} corrupted headers refused`);
  });

  it("attach() names another layout version in its error", () => {
    using heap = SharedHeap.create(2 * MiB);
    const copy = copyOf(heap);
    const i32 = new Int32Array(copy);
    // The layout version is the second word of every header.
    i32[(heap.byteOffset >> 2) + 1] += 1;
    assert.throws(
      () => SharedHeap.attach({ ...heap.descriptor(), memory: copy }),
      (e: unknown) =>
        e instanceof ForeignHeapError && /layout version/.test(e.message),
    );
  });

  it("two heaps side by side in one memory refuse each other's offsets, changing nothing", () => {
    const memory = new SharedArrayBuffer(8 * MiB);
    using a = SharedHeap.create(memory, { byteLength: 4 * MiB });
    using b = SharedHeap.create(memory, { byteOffset: 4 * MiB });
    const inA = [a.alloc(64), a.alloc(100_000)];
    const inB = [b.alloc(64), b.alloc(100_000)];
    for (const at of inA) writePattern(a.bytes(at, 64), at);
    const before = [snapshot(a), snapshot(b)];
    for (const at of inB) {
      // another heap's block: an offset this heap does not hold
      assertRefused(`a.free(b's ${at})`, () => a.free(at), {
        error: DoubleFreeError,
      });
      assertRefused(`a.bytes(b's ${at})`, () => a.bytes(at, 8), {
        error: InvalidArgumentError,
      });
      assertRefused(
        `a.usableByteLength(b's ${at})`,
        () => a.usableByteLength(at),
        { error: InvalidArgumentError },
      );
    }
    assert.deepEqual([snapshot(a), snapshot(b)], before);
    for (const at of inA) checkPattern(a.bytes(at, 64), at);
    // A descriptor of b at a's offset is foreign.
    assert.throws(
      () => SharedHeap.attach({ ...b.descriptor(), byteOffset: a.byteOffset }),
      ForeignHeapError,
    );
    for (const at of inA) a.free(at);
    for (const at of inB) b.free(at);
  });

  it("a -0 byteOffset gives a heap at +0", () => {
    using heap = SharedHeap.create(new SharedArrayBuffer(MiB), {
      byteOffset: -0,
    });
    assert.ok(Object.is(heap.byteOffset, 0));
    assert.ok(Object.is(heap.descriptor().byteOffset, 0));
  });

  it("bytes() refuses a length beyond the block and offsets of no live block, naming value and limit", () => {
    using heap = SharedHeap.create(4 * MiB);
    using other = SharedHeap.attach(heap.descriptor());
    const small = heap.alloc(100); // a 128-byte class block
    const large = heap.alloc(10_000); // three pages
    const neighbour = heap.alloc(100);
    writePattern(heap.bytes(neighbour, 128), 1);
    assert.equal(heap.bytes(small, 128).length, 128);
    assert.equal(other.bytes(large, 3 * 4096).length, 3 * 4096);
    // (a block allocated and freed: before the picture, since the heap's
    // totals count it)
    const freed = heap.alloc(100);
    heap.free(freed);
    const before = snapshot(heap);
    for (
      const [at, limit] of [[small, 128], [large, 3 * 4096]] as const
    ) {
      for (const h of [heap, other]) {
        assert.throws(
          () => h.bytes(at, limit + 1),
          (e: unknown) =>
            e instanceof InvalidArgumentError && e.value === limit + 1 &&
            e.message.includes(String(limit)) &&
            e.message.includes(String(limit + 1)),
        );
      }
    }
    // Interior offsets, the slab header, pages past the end, freed blocks.
    for (
      const at of [small + 64, large + 4096, small - 64, freed, 0, -0.5]
    ) {
      assertRefused(`bytes(${at}, 8)`, () => heap.bytes(at, 8), {
        error: InvalidArgumentError,
        snapshot: () => snapshot(heap),
      });
    }
    assert.deepEqual(snapshot(heap), before);
    checkPattern(heap.bytes(neighbour, 128), 1);
    // usableByteLength and bytes agree on every live block.
    for (const at of [small, large, neighbour]) {
      const usable = heap.usableByteLength(at);
      assert.equal(heap.bytes(at, usable).length, usable);
    }
    assert.throws(() => heap.usableByteLength(freed), /Cannot measure/);
    for (const at of [small, large, neighbour]) heap.free(at);
  });

  it("receive() refuses a descriptor whose view or length would reach past its block, changing nothing", () => {
    using heap = SharedHeap.create(4 * MiB);
    const allocator = new SharedHeapAllocator(heap);
    const a = Buffer.fromData("f32", [1, 2, 3, 4], { allocator });
    const neighbour = Buffer.fromData("f32", [7, 7, 7, 7], { allocator });
    const d = allocator.share(a);
    const state = () => ({
      refs: allocator.refCount(a),
      stats: heap.stats(),
      data: [...neighbour.toData()],
    });
    const before = state();
    for (
      const forged of [
        { ...d, byteLength: 1 << 20, shape: [1 << 18], strides: [1] },
        { ...d, byteLength: 17, shape: [4], strides: [1] },
        { ...d, shape: [5], strides: [1] },
        { ...d, shape: [2], strides: [4] },
        { ...d, offset: 1, shape: [4], strides: [1] },
      ]
    ) {
      assert.throws(
        () => allocator.receive(forged),
        (e: unknown) => e instanceof InvalidArgumentError,
        JSON.stringify({ ...forged, memory: undefined }),
      );
      assert.deepEqual(state(), before);
    }
    const b = allocator.receive(d);
    assert.equal(b.storage.byteLength, 16);
    a.release();
    b.release();
    neighbour.release();
    assert.equal(heap.stats().allocations.current, 0);
  });

  it("a descriptor of freed bytes is refused even when the block was allocated again", () => {
    using heap = SharedHeap.create(4 * MiB);
    using worker = SharedHeap.attach(heap.descriptor());
    const here = new SharedHeapAllocator(heap);
    const there = new SharedHeapAllocator(worker);
    for (const n of [4, 4096]) {
      const a = Buffer.fromData("f32", new Array(n).fill(1), {
        allocator: here,
      });
      const stale = here.share(a);
      a.release();
      here.discard(stale); // the last reference: the block is freed
      const b = Buffer.fromData("f32", new Array(n).fill(9), {
        allocator: here,
      });
      assert.equal(b.storage.data.byteOffset - 64, stale.block, "reused");
      const before = { refs: here.refCount(b), stats: heap.stats() };
      assert.throws(() => there.receive(stale), UseAfterFreeError);
      assert.throws(() => there.discard(stale), UseAfterFreeError);
      assert.equal(there.refCount(stale), 0);
      assert.deepEqual({ refs: here.refCount(b), stats: heap.stats() }, before);
      assert.ok(b.toData().every((x) => x === 9));
      b.release();
      assert.equal(heap.stats().allocations.current, 0);
    }
  });

  it("a descriptor is received or discarded once; a second time is a DoubleFreeError that changes nothing", () => {
    using heap = SharedHeap.create(4 * MiB);
    using worker = SharedHeap.attach(heap.descriptor());
    const here = new SharedHeapAllocator(heap);
    const there = new SharedHeapAllocator(worker);
    const a = Buffer.fromData("i32", [1, 2, 3, 4], { allocator: here });
    const d1 = here.share(a), d2 = here.share(a);
    assert.notEqual(d1.ticket, d2.ticket);
    assert.equal(here.refCount(a), 3);
    const b = there.receive(d1);
    const state = () => ({ refs: here.refCount(a), stats: heap.stats() });
    const before = state();
    assert.throws(() => there.receive(d1), DoubleFreeError);
    assert.throws(() => there.discard(d1), DoubleFreeError);
    assert.throws(() => here.receive(structuredClone(d1)), DoubleFreeError);
    assert.deepEqual(state(), before);
    // A receive that fails on its view keeps the descriptor's ticket.
    assert.throws(
      () => there.receive({ ...d2, shape: [5], strides: [1] }),
      ShapeError,
    );
    assert.deepEqual(state(), before);
    const c = there.receive(d2);
    a.release();
    b.release();
    assert.equal(heap.stats().allocations.current, 1);
    c.release();
    assert.equal(heap.stats().allocations.current, 0);
    assert.throws(() => there.receive(d2), UseAfterFreeError);
  });

  it("share() refuses past SHARED_MAX_IN_FLIGHT descriptors in flight, changing nothing", () => {
    using heap = SharedHeap.create(4 * MiB);
    const allocator = new SharedHeapAllocator(heap);
    const a = Buffer.fromData("u8", [7], { allocator });
    const flying = Array.from(
      { length: SHARED_MAX_IN_FLIGHT },
      () => allocator.share(a),
    );
    assert.equal(new Set(flying.map((d) => d.ticket)).size, flying.length);
    assert.equal(allocator.refCount(a), SHARED_MAX_IN_FLIGHT + 1);
    assert.throws(
      () => allocator.share(a),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        e.limit === SHARED_MAX_IN_FLIGHT &&
        e.message.includes(String(SHARED_MAX_IN_FLIGHT)),
    );
    assert.equal(allocator.refCount(a), SHARED_MAX_IN_FLIGHT + 1);
    // A slot taken back is free again.
    allocator.discard(flying.pop()!);
    const again = allocator.share(a);
    for (const d of [...flying, again]) allocator.discard(d);
    assert.equal(allocator.refCount(a), 1);
    a.release();
    assert.equal(heap.stats().allocations.current, 0);
  });

  it("a model of alloc / free / remote free / double free / never-issued offsets on two handles (fast-check)", () => {
    const sizes = fc.oneof(
      fc.constantFrom(0, 1, 63, 64, 65, 8191, 8192, 8193, 4095, 4096, 4097),
      fc.integer({ min: 0, max: 200_000 }),
    );
    const alignments = fc.constantFrom(
      undefined,
      1,
      64,
      128,
      256,
      512,
      4096,
      -0,
      3,
      8192,
      NaN,
      0.5,
    );
    const op = fc.oneof(
      fc.record({
        kind: fc.constant("alloc" as const),
        by: fc.nat(1),
        n: sizes,
        alignment: alignments,
      }),
      fc.record({
        kind: fc.constant("free" as const),
        by: fc.nat(1),
        pick: fc.nat(),
      }),
      fc.record({
        kind: fc.constant("bogus" as const),
        by: fc.nat(1),
        pick: fc.nat(),
        delta: fc.constantFrom(1, 8, 32, 64, 4096, -64, 0.5),
      }),
      fc.record({
        kind: fc.constant("double" as const),
        by: fc.nat(1),
        pick: fc.nat(),
      }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const heap = SharedHeap.create(8 * MiB);
        const other = SharedHeap.attach(heap.descriptor());
        const handles = [heap, other];
        const live = new Map<number, { n: number; id: number }>();
        const freed: number[] = [];
        let id = 0;
        const usableSum = () =>
          [...live.keys()].reduce((s, at) => s + heap.usableByteLength(at), 0);
        try {
          for (const o of ops) {
            const h = handles[o.by];
            const before = heap.stats();
            if (o.kind === "alloc") {
              const valid = o.alignment === undefined ||
                (Number.isInteger(o.alignment) && o.alignment > 0 &&
                  o.alignment <= 4096 &&
                  (o.alignment & (o.alignment - 1)) === 0);
              if (!valid) {
                assert.throws(
                  () => h.alloc(o.n, o.alignment),
                  InvalidArgumentError,
                );
                assert.deepEqual(heap.stats(), before);
                continue;
              }
              const at = h.tryAlloc(o.n, o.alignment);
              if (at === undefined) continue;
              assert.equal(at % (o.alignment ?? 64), 0);
              assert.ok(h.usableByteLength(at) >= o.n);
              writePattern(h.bytes(at, o.n), ++id);
              live.set(at, { n: o.n, id });
            } else if (o.kind === "free" && live.size > 0) {
              const at = [...live.keys()][o.pick % live.size];
              const b = live.get(at)!;
              checkPattern(h.bytes(at, b.n), b.id);
              h.free(at);
              live.delete(at);
              freed.push(at);
            } else if (o.kind === "double" && freed.length > 0) {
              const at = freed[o.pick % freed.length];
              if (live.has(at)) continue; // allocated again since
              assert.throws(() => h.free(at), DoubleFreeError);
              assert.deepEqual(heap.stats(), before);
            } else if (o.kind === "bogus" && live.size > 0) {
              const at = [...live.keys()][o.pick % live.size] + o.delta;
              if (live.has(at)) continue;
              assert.throws(
                () => h.free(at),
                (e: unknown) =>
                  e instanceof InvalidArgumentError ||
                  e instanceof DoubleFreeError,
              );
              assert.deepEqual(heap.stats(), before);
            }
            const spans = [...live].map(([at]) =>
              [heap.buffer, at, at + heap.usableByteLength(at)] as const
            );
            assertDisjoint(spans);
            assert.equal(heap.stats().allocations.current, live.size);
            assert.equal(heap.stats().allocatedBytes.current, usableSum());
          }
          for (const [at, b] of live) checkPattern(heap.bytes(at, b.n), b.id);
          heap.checkIntegrity();
          for (const at of live.keys()) other.free(at);
          assert.equal(heap.stats().allocations.current, 0);
          assert.equal(heap.stats().allocatedBytes.current, 0);
          // Once both handles detach, every page is back in the core.
          using probe = SharedHeap.attach(heap.descriptor());
          other.detach();
          heap.detach();
          assert.equal(probe.stats().freeBytes, probe.stats().byteLength);
          probe.checkIntegrity();
        } finally {
          other.detach();
          heap.detach();
        }
      }),
      { numRuns: modelRuns(150) },
    );
  });
});

const HEADER_PROBE = 12 * KiB; // holds the header, not the page records

/** Workers running `_test_hostile_worker.ts`, with typed waits. */
/** Resolves once `beat[0]` has not moved for 50 ms (at most 10 s). */
async function stopped(beat: Int32Array): Promise<void> {
  let last = Atomics.load(beat, 0);
  for (let i = 0; i < 200; i++) {
    await new Promise((r) => setTimeout(r, 50));
    const now = Atomics.load(beat, 0);
    if (now === last) return;
    last = now;
  }
  throw new Error("the terminated Worker kept running for 10 s");
}

class Crew {
  workers: Worker[] = [];
  #waiting = new Map<string, ((r: HostileReport) => void)[]>();
  errors: string[] = [];

  constructor(n: number) {
    for (let i = 0; i < n; i++) this.add();
  }

  add(): number {
    const i = this.workers.length;
    const w = new Worker(
      new URL("./_test_hostile_worker.ts", import.meta.url),
      { type: "module" },
    );
    w.onmessage = (e: MessageEvent<HostileReport>) => {
      if (e.data.type === "error") {
        this.errors.push(`worker ${i}: ${e.data.message}`);
      }
      this.#waiting.get(`${e.data.type}:${i}`)?.shift()?.(e.data);
      if (e.data.type === "error") {
        for (const [key, queue] of this.#waiting) {
          if (key.endsWith(`:${i}`)) {
            for (const f of queue.splice(0)) f(e.data);
          }
        }
      }
    };
    w.onerror = (e) => {
      e.preventDefault();
      this.errors.push(`worker ${i}: ${e.message}`);
    };
    this.workers.push(w);
    return i;
  }

  ask<T extends HostileReport["type"]>(
    i: number,
    c: HostileCommand,
    type: T,
  ): Promise<Extract<HostileReport, { type: T }>> {
    return new Promise((resolve, reject) => {
      const key = `${type}:${i}`;
      if (!this.#waiting.has(key)) this.#waiting.set(key, []);
      const timer = setTimeout(
        () => reject(new Error(`no ${type} from worker ${i}: ${this.errors}`)),
        60_000,
      );
      this.#waiting.get(key)!.push((r) => {
        clearTimeout(timer);
        if (r.type === "error") reject(new Error(this.errors.join("; ")));
        else resolve(r as Extract<HostileReport, { type: T }>);
      });
      this.workers[i].postMessage(c);
    });
  }

  terminate(): void {
    for (const w of this.workers) w.terminate();
  }
}

describe("@allot/threads hostile: Workers", () => {
  it("3 Workers allocate, free their own and each other's blocks; patterns, overlap, stats and double frees checked each round", async () => {
    const N = 3, ROUNDS = 5, OPS = 400;
    using heap = SharedHeap.create(64 * MiB);
    const crew = new Crew(N);
    try {
      const arenas = await Promise.all(
        crew.workers.map((_, i) =>
          crew.ask(i, {
            type: "attach",
            heap: heap.descriptor(),
            worker: i + 1,
          }, "attached")
        ),
      );
      assert.equal(new Set(arenas.map((r) => r.arena)).size, N);
      // The main thread holds blocks too, written and checked each round.
      const mine: LiveBlock[] = [0, 100, 8192, 100_000].map((n, k) => {
        const b = {
          byteOffset: heap.alloc(n),
          byteLength: n,
          id: 9_000_000 + k,
        };
        writePattern(heap.bytes(b.byteOffset, n), b.id);
        return b;
      });
      let inboxes: LiveBlock[][] = crew.workers.map(() => []);
      let seed = 0x5eed;
      let remoteFrees = 0, refused = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const reports = await Promise.all(
          crew.workers.map((_, i) =>
            crew.ask(i, {
              type: "round",
              seed: seed++,
              ops: OPS,
              inbox: inboxes[i],
              poison: [],
            }, "round-done")
          ),
        );
        remoteFrees += inboxes.flat().length;
        // Quiet now: every live block, from every Worker and this thread.
        const all = [
          ...mine,
          ...reports.flatMap((r) => [...r.live, ...r.outbox]),
        ];
        assertDisjoint(
          all.map((b) => [
            heap.buffer,
            b.byteOffset,
            b.byteOffset + heap.usableByteLength(b.byteOffset),
          ]),
        );
        for (const b of all) {
          checkPattern(heap.bytes(b.byteOffset, b.byteLength), b.id);
        }
        const stats = heap.stats();
        assert.equal(stats.allocations.current, all.length, `round ${round}`);
        assert.equal(
          stats.allocatedBytes.current,
          all.reduce((s, b) => s + heap.usableByteLength(b.byteOffset), 0),
        );
        assert.equal(stats.arenas, N + 1);
        assert.equal(
          stats.freeBytes + stats.reservedBytes,
          stats.byteLength,
        );
        heap.checkIntegrity();
        // Blocks just freed by their receivers (and not allocated again):
        // each Worker in turn frees one more time, alone, and is refused.
        const liveSet = new Set(all.map((b) => b.byteOffset));
        const poison = inboxes.flat().map((b) => b.byteOffset).filter((at) =>
          !liveSet.has(at)
        ).slice(0, 4);
        for (let i = 0; i < N; i++) {
          const r = await crew.ask(i, {
            type: "round",
            seed: seed++,
            ops: 0,
            inbox: [],
            poison,
          }, "round-done");
          refused += r.doubleFreesRefused;
        }
        assert.equal(heap.stats().allocations.current, all.length);
        // Each outbox goes to the next Worker, to be freed there.
        inboxes = reports.map((_, i) => reports[(i + N - 1) % N].outbox);
      }
      for (let i = 0; i < N; i++) {
        await crew.ask(i, {
          type: "round",
          seed: 0,
          ops: 0,
          inbox: inboxes[i],
          poison: [],
        }, "round-done");
        await crew.ask(i, { type: "free-all" }, "freed");
      }
      for (const b of mine) heap.free(b.byteOffset);
      assert.equal(heap.stats().allocations.current, 0);
      assert.equal(heap.stats().allocatedBytes.current, 0);
      assert.ok(remoteFrees > 0 && refused > 0, `${remoteFrees} ${refused}`);
      for (let i = 0; i < N; i++) {
        await crew.ask(i, { type: "detach" }, "detached");
      }
      heap.checkIntegrity();
      assert.equal(heap.arenas().length, 1);
      assert.deepEqual(crew.errors, []);
      // With this thread's arena given back too, every page is free.
      using probe = SharedHeap.attach(heap.descriptor());
      heap.detach();
      assert.equal(probe.stats().freeBytes, probe.stats().byteLength);
    } finally {
      crew.terminate();
    }
  });

  it("Workers racing to receive one descriptor: exactly one gets the buffer, the others a DoubleFreeError", async () => {
    const N = 3;
    using heap = SharedHeap.create(16 * MiB);
    const allocator = new SharedHeapAllocator(heap);
    const crew = new Crew(N);
    try {
      await Promise.all(crew.workers.map((_, i) =>
        crew.ask(i, {
          type: "attach",
          heap: heap.descriptor(),
          worker: i + 1,
        }, "attached")
      ));
      for (let round = 0; round < 12; round++) {
        const a = Buffer.fromData("i32", [round, 1, 2, 3], { allocator });
        const descriptor = allocator.share(a);
        const replies = await Promise.all(
          crew.workers.map((_, i) =>
            crew.ask(i, { type: "receive", descriptor }, "received")
          ),
        );
        const got = replies.filter((r) => r.data !== undefined);
        assert.equal(got.length, 1, JSON.stringify(replies));
        assert.deepEqual(got[0].data, [round, 1, 2, 3]);
        assert.equal(
          replies.filter((r) => r.refused === "DoubleFreeError").length,
          N - 1,
        );
        assert.equal(allocator.refCount(a), 1);
        a.release();
        assert.equal(heap.stats().allocations.current, 0);
      }
      assert.deepEqual(crew.errors, []);
    } finally {
      crew.terminate();
    }
  });

  it("a terminated Worker's live blocks and cached spans are reported, kept from others, then returned by reclaim", async () => {
    using heap = SharedHeap.create(16 * MiB);
    const whole = heap.stats().freeBytes;
    const crew = new Crew(1);
    try {
      const { arena } = await crew.ask(0, {
        type: "attach",
        heap: heap.descriptor(),
        worker: 1,
      }, "attached");
      const { live } = await crew.ask(0, {
        type: "cache",
        count: 12,
        byteLength: 100 * KiB,
      }, "cached");
      crew.workers[0].terminate();
      // Its cached spans stay reserved: not free in the core.
      const liveBytes = live.reduce(
        (s, b) => s + heap.usableByteLength(b.byteOffset),
        0,
      );
      const dead = heap.stats();
      assert.ok(
        whole - dead.freeBytes > liveBytes,
        "the dead Worker's cache holds pages",
      );
      assert.deepEqual(
        heap.blocksOf(arena).map((b) => b.byteOffset),
        live.map((b) => b.byteOffset).sort((x, y) => x - y),
      );
      assert.ok(heap.arenas().some((a) => a.arena === arena && !a.self));
      const keep = live[0];
      const report = heap.reclaim(arena, { keep: [keep.byteOffset] });
      assert.deepEqual(report.kept.map((b) => b.byteOffset), [keep.byteOffset]);
      assert.equal(report.freed.length, live.length - 1);
      heap.checkIntegrity();
      const after = heap.stats();
      assert.equal(after.allocations.current, 1);
      assert.equal(
        after.freeBytes,
        whole - heap.usableByteLength(keep.byteOffset),
        "every cached span and freed block is back in the core",
      );
      checkPattern(heap.bytes(keep.byteOffset, keep.byteLength), keep.id);
      heap.free(keep.byteOffset);
      assert.equal(heap.stats().freeBytes, whole);
      assert.equal(heap.stats().allocations.current, 0);
      assert.throws(() => heap.blocksOf(arena), InvalidArgumentError);
    } finally {
      crew.terminate();
    }
  });

  it("Workers that stop mid-run with live blocks: reclaim frees their arena or, inside the core lock, refuses with HeapBusyError", async () => {
    const outcomes: string[] = [];
    for (const delay of [5, 20, 60]) {
      using heap = SharedHeap.create(32 * MiB, { lockTimeoutMs: 200 });
      const crew = new Crew(1);
      try {
        const { arena } = await crew.ask(0, {
          type: "attach",
          heap: heap.descriptor(),
          worker: 1,
        }, "attached");
        const beat = new SharedArrayBuffer(8);
        await crew.ask(0, { type: "spin", seed: delay, beat }, "spinning");
        await new Promise((r) => setTimeout(r, delay));
        // Deno's terminate() does not interrupt a running loop (the Worker
        // went on allocating after reclaim): the Worker is told to stop where
        // it is, abandoning its blocks, and is terminated once its heartbeat
        // has stopped.
        const beats = new Int32Array(beat);
        Atomics.store(beats, 1, 1);
        await stopped(beats);
        crew.workers[0].terminate();
        let report;
        try {
          report = heap.reclaim(arena);
        } catch (error) {
          assert.ok(error instanceof HeapBusyError, String(error));
          assert.equal(error.holder, arena);
          outcomes.push("busy");
          continue;
        }
        outcomes.push("reclaimed");
        heap.checkIntegrity();
        assert.equal(report.kept.length, 0);
        // At most the block it was pushing or popping may stay lost
        // (documented); everything else is back and usable.
        const stats = heap.stats();
        assert.ok(
          stats.allocations.current <= 1,
          `${stats.allocations.current} lost`,
        );
        // The lost block (at most 256 KiB, or its 64 KiB slab).
        assert.ok(stats.freeBytes >= stats.byteLength - 256 * KiB);
        const big = heap.alloc(stats.freeBytes >> 1);
        heap.free(big);
        exercise(heap);
      } finally {
        crew.terminate();
      }
    }
    assert.equal(outcomes.length, 3);
  });
});

describe("@allot/threads hostile: allocators over closed handles and foreign blocks", () => {
  it("an allocator over a detached handle refuses receive, discard and release, the shared count unchanged", () => {
    using heap = SharedHeap.create(4 * MiB);
    const worker = SharedHeap.attach(heap.descriptor());
    const here = new SharedHeapAllocator(heap);
    const there = new SharedHeapAllocator(worker);
    const a = Buffer.fromData("f32", [1, 2, 3], { allocator: here });
    const fromThere = Buffer.fromData("f32", [4, 5], { allocator: there });
    const d = here.share(a);
    const dThere = there.share(fromThere); // to read its count later
    worker.detach();
    const state = () => ({
      refs: [here.refCount(a), here.refCount(dThere)],
      stats: heap.stats(),
    });
    const before = state();
    assert.throws(() => there.receive(d), HeapClosedError);
    assert.throws(() => there.discard(d), HeapClosedError);
    assert.throws(() => fromThere.release(), HeapClosedError);
    assert.deepEqual(state(), before);
    // The descriptor was not taken: a live handle still receives it.
    const b = here.receive(d);
    assert.deepEqual([...b.toData()], [1, 2, 3]);
    a.release();
    b.release();
    // fromThere's reference is still counted: its descriptor frees it.
    assert.equal(here.refCount(dThere), 2);
    here.receive(dThere).release();
    assert.equal(heap.stats().allocations.current, 1);
  });

  it("a descriptor of another heap's block in the same memory is foreign, even with this heap's id", () => {
    const memory = new SharedArrayBuffer(8 * MiB);
    using a = SharedHeap.create(memory, { byteLength: 4 * MiB });
    using b = SharedHeap.create(memory, { byteOffset: 4 * MiB });
    const inA = new SharedHeapAllocator(a), inB = new SharedHeapAllocator(b);
    const x = Buffer.fromData("u8", [1, 2], { allocator: inB });
    const d = inB.share(x);
    const forged = { ...d, heapId: a.heapId };
    const before = { refs: inB.refCount(x), a: a.stats(), b: b.stats() };
    for (
      const call of [
        () => inA.receive(forged),
        () => inA.discard(forged),
        () => inA.refCount(forged),
      ]
    ) assert.throws(call, ForeignHeapError);
    assert.throws(
      () => inA.receive({ ...d, heapId: a.heapId, nonce: undefined as never }),
      InvalidArgumentError,
    );
    assert.deepEqual(
      { refs: inB.refCount(x), a: a.stats(), b: b.stats() },
      before,
    );
    inB.discard(d);
    x.release();
    assert.equal(b.stats().allocations.current, 0);
  });
});

describe("@allot/threads hostile: strict mode", () => {
  it("a strict free refused on a closed heap leaves the block's bytes alone", () => {
    const heap = SharedHeap.create(4 * MiB, { strict: true });
    const other = SharedHeap.attach(heap.descriptor());
    const blocks = [other.alloc(100), other.alloc(100_000)];
    for (const at of blocks) writePattern(other.bytes(at, 100), at);
    heap.close();
    for (const at of blocks) {
      assert.throws(() => other.free(at), HeapClosedError);
      checkPattern(new Uint8Array(other.buffer, at, 100), at);
    }
    other.detach();
  });
});

describe("@allot/threads hostile: out of memory", () => {
  it("a fresh heap serves every whole-page size from all its free bytes down to half of them", () => {
    for (const size of [1 * MiB, 4 * MiB]) {
      using heap = SharedHeap.create(size);
      const free = heap.stats().freeBytes;
      const failed: number[] = [];
      for (let n = free; n > free / 2; n -= 4096) {
        const at = heap.tryAlloc(n);
        if (at === undefined) failed.push(n);
        else heap.free(at);
      }
      assert.deepEqual(
        failed,
        [],
        `${failed.length} sizes refused of ${free} free`,
      );
      const all = heap.alloc(free);
      assert.equal(heap.stats().freeBytes, 0);
      heap.free(all);
    }
  });

  it("a request that cannot fit even with every cache given back is refused without emptying the caches", () => {
    using heap = SharedHeap.create(4 * MiB);
    const small = heap.alloc(64); // its slab first: the rest stays contiguous
    const blocks = [1, 2, 3].map(() => heap.alloc(300 * KiB));
    for (const at of blocks) heap.free(at); // kept in the span cache
    const before = heap.stats();
    assert.ok(
      before.reservedBytes - before.allocatedBytes.current >= 900 * KiB,
    );
    for (const n of [8 * MiB, before.byteLength + 1, 2 ** 31 - 1]) {
      assert.equal(heap.tryAlloc(n), undefined);
      assert.deepEqual(heap.stats(), before, `tryAlloc(${n})`);
      assert.throws(
        () => heap.alloc(n),
        (e: unknown) =>
          e instanceof OutOfMemoryError && e.message.includes(String(n)),
      );
      assert.deepEqual(heap.stats(), before, `alloc(${n})`);
    }
    // A request that fits once the caches are given back still succeeds.
    const big = heap.alloc(before.freeBytes + 600 * KiB);
    heap.free(big);
    heap.free(small);
    heap.checkIntegrity();
  });
});

describe("@allot/threads hostile: arenas", () => {
  it("the 65th handle is refused with the limit, changing nothing; a detached slot is claimed again", () => {
    using heap = SharedHeap.create(8 * MiB);
    const handles = Array.from(
      { length: 63 },
      () => SharedHeap.attach(heap.descriptor()),
    );
    const blocks = handles.map((h) => h.alloc(100));
    const before = { stats: heap.stats(), arenas: heap.arenas() };
    assert.equal(before.stats.arenas, 64);
    assert.throws(
      () => SharedHeap.attach(heap.descriptor()),
      (e: unknown) =>
        e instanceof InvalidArgumentError && e.limit === 64 &&
        e.message.includes("64"),
    );
    assert.deepEqual({ stats: heap.stats(), arenas: heap.arenas() }, before);
    // Closing is the creator's: any other handle is refused.
    assert.throws(() => handles[5].close(), InvalidArgumentError);
    assert.ok(heap.isOpen && handles[5].isOpen);
    const freed = handles[7].arena;
    handles[7].detach();
    using again = SharedHeap.attach(heap.descriptor());
    assert.equal(again.arena, freed);
    // The detached arena's block is still live; any handle frees it.
    again.free(blocks[7]);
    handles.forEach((h, i) => i !== 7 && h.free(blocks[i]));
    assert.equal(heap.stats().allocations.current, 0);
    for (const h of handles) h.detach();
  });
});

describe("@allot/threads hostile: memory reuse", () => {
  it("create() refuses a place where an open heap has handles attached, changing nothing; after close() it may", () => {
    const memory = new SharedArrayBuffer(4 * MiB);
    const heap = SharedHeap.create(memory);
    using worker = SharedHeap.attach(heap.descriptor());
    const blocks = [worker.alloc(100), worker.alloc(100_000)];
    for (const at of blocks) writePattern(worker.bytes(at, 100), at);
    const before = snapshot(heap);
    for (const options of [{}, { byteOffset: 0 }, { byteLength: 2 * MiB }]) {
      assertRefused(
        `create(memory, ${JSON.stringify(options)})`,
        () => SharedHeap.create(memory, options),
        { error: InvalidArgumentError, snapshot: () => snapshot(heap) },
      );
    }
    assert.deepEqual(snapshot(heap), before);
    for (const at of blocks) checkPattern(worker.bytes(at, 100), at);
    for (const at of blocks) worker.free(at);
    heap.close();
    using again = SharedHeap.create(memory);
    exercise(again);
  });
});

/** A lock holder no handle here has (arena 63, generation 1). */
const FOREIGN = (1 << 6) | 63;

/** Every page is back in the core once all handles detach. */
function assertAllReturned(heap: SharedHeap): void {
  using probe = SharedHeap.attach(heap.descriptor());
  heap.detach();
  probe.checkIntegrity();
  assert.equal(probe.stats().freeBytes, probe.stats().byteLength);
}

describe("@allot/threads hostile: reclaim and detach, all or nothing", () => {
  it("reclaim() refuses keep offsets that are not live blocks of that arena, changing nothing", () => {
    const heap = SharedHeap.create(4 * MiB);
    const worker = SharedHeap.attach(heap.descriptor());
    const other = SharedHeap.attach(heap.descriptor());
    const small = worker.alloc(100), large = worker.alloc(100_000);
    const gone = worker.alloc(64);
    worker.free(gone);
    const foreign = other.alloc(100), mine = heap.alloc(100);
    const arena = worker.arena;
    const state = () => ({
      ...snapshot(heap),
      dead: heap.blocksOf(arena),
      other: heap.blocksOf(other.arena),
    });
    const before = state();
    for (
      const stray of [
        foreign,
        mine,
        gone,
        small + 1,
        large + 4096,
        0,
        heap.buffer.byteLength - 8,
      ]
    ) {
      assertRefused(
        `reclaim(arena, { keep: [small, ${stray}] })`,
        () => heap.reclaim(arena, { keep: [small, stray] }),
        { error: InvalidArgumentError, snapshot: state },
      );
    }
    assert.deepEqual(state(), before);
    const report = heap.reclaim(arena, { keep: [small] });
    assert.deepEqual(report.kept.map((b) => b.byteOffset), [small]);
    assert.ok(report.freed.some((b) => b.byteOffset === large));
    heap.free(small);
    other.free(foreign);
    heap.free(mine);
    other.detach();
    assert.equal(heap.stats().allocations.current, 0);
    assertAllReturned(heap);
  });

  it("reclaim() with the core lock taken by another thread right after its walk either finishes or changes nothing; a second call finishes", () => {
    const heap = SharedHeap.create(4 * MiB, { lockTimeoutMs: 0 });
    const worker = SharedHeap.attach(heap.descriptor());
    const blocks = [100, 64, 100_000, 400 * KiB, 5000].map((n) =>
      worker.alloc(n)
    );
    worker.free(worker.alloc(400 * KiB)); // a cached span too
    const arena = worker.arena;
    const lockWord = (heap.byteOffset >> 2) + H_LOCK;
    const store = Atomics.store;
    let stolen = false;
    // The first unlock hands the lock to a foreign holder, as another
    // thread taking it at that moment (and then dying) would.
    (Atomics as { store: typeof Atomics.store }).store = ((
      array: Int32Array,
      index: number,
      value: number,
    ) => {
      const out = store(array, index, value);
      if (
        !stolen && array.buffer === heap.buffer && index === lockWord &&
        value === 0
      ) {
        stolen = true;
        store(array, index, FOREIGN);
      }
      return out;
    }) as typeof Atomics.store;
    let first: unknown;
    try {
      first = attempt(() => heap.reclaim(arena));
    } finally {
      (Atomics as { store: typeof Atomics.store }).store = store;
    }
    assert.ok(stolen, "the lock was never released during reclaim");
    store(new Int32Array(heap.buffer), lockWord, 0);
    if (first !== undefined) {
      assert.ok(first instanceof HeapBusyError, String(first));
      assert.deepEqual(
        heap.blocksOf(arena).map((b) => b.byteOffset).sort(),
        [...blocks].sort(),
        "a refused reclaim changed nothing",
      );
      heap.reclaim(arena); // a second call finishes
    }
    assert.ok(!heap.arenas().some((a) => a.arena === arena));
    assert.equal(heap.stats().allocations.current, 0);
    heap.checkIntegrity();
  });

  it("detach() with the core lock held throws HeapBusyError; a second call, once it is free, finishes", () => {
    const heap = SharedHeap.create(4 * MiB, { lockTimeoutMs: 0 });
    const worker = SharedHeap.attach(heap.descriptor());
    const a = worker.alloc(100), b = worker.alloc(100_000);
    worker.free(worker.alloc(400 * KiB)); // cached: detach gives it back
    const arena = worker.arena;
    const i32 = new Int32Array(heap.buffer);
    const lockWord = (heap.byteOffset >> 2) + H_LOCK;
    assert.equal(Atomics.compareExchange(i32, lockWord, 0, FOREIGN), 0);
    const first = attempt(() => worker.detach());
    Atomics.store(i32, lockWord, 0);
    if (first !== undefined) {
      assert.ok(first instanceof HeapBusyError, String(first));
      worker.detach();
    }
    assert.throws(() => worker.alloc(8), HeapClosedError);
    assert.ok(!heap.arenas().some((x) => x.arena === arena));
    heap.free(a);
    heap.free(b);
    assert.equal(heap.stats().allocations.current, 0);
    assertAllReturned(heap);
  });
});
