// The shared heap and its allocator from the outside (review 9): shared
// buffer descriptors whose fields are getters answering differently on each
// read (a `byteLength` that grows after it was checked, a `ticket` that moves
// to another word of the memory), and a fast-check model of two handles of
// one heap allocating, freeing each other's blocks and reading them, in
// which every live block carries a byte pattern checked after every
// operation and the stats equal a recount.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { AllotError, DoubleFreeError } from "@allot/core";
import { Buffer } from "@allot/storage";
import { checkPattern, modelRuns, writePattern } from "../core/_test_faults.ts";
import { hostileNumbers } from "../core/_test_hostile.ts";
import { SharedHeap } from "./shared_heap.ts";
import { SharedHeapAllocator } from "./shared_heap_allocator.ts";

/** `d` with `key` a getter that answers `d[key]` once, then `later`. */
function lyingOnce<T extends object>(d: T, key: keyof T, later: unknown): T {
  const copy = { ...d } as Record<string, unknown>;
  const first = copy[key as string];
  delete copy[key as string];
  let reads = 0;
  Object.defineProperty(copy, key, {
    enumerable: true,
    get: () => (reads++ === 0 ? first : later),
  });
  return copy as T;
}

describe("SharedHeapAllocator descriptors (review 9)", () => {
  it("receive() reads byteLength once: a getter that grows it after the check gets no buffer past the block", () => {
    using heap = SharedHeap.create(1 << 22);
    const here = new SharedHeapAllocator(heap);
    const a = Buffer.fromData("f32", [1, 2, 3, 4], {
      shape: [4],
      allocator: here,
    });
    const d = here.share(a);
    const liar = lyingOnce(d, "byteLength", 1 << 20);
    let received: Buffer<"f32"> | undefined;
    try {
      received = here.receive(liar);
    } catch (error) {
      assert.ok(error instanceof AllotError);
    }
    if (received !== undefined) {
      assert.equal(received.storage.byteLength, 16);
      assert.equal(received.storage.data.byteLength, 16);
      assert.deepEqual([...received.toData()], [1, 2, 3, 4]);
      received.release();
    } else {
      here.discard(d);
    }
    a.release();
    assert.equal(heap.stats().allocations.current, 0);
    heap.checkIntegrity();
  });

  it("receive() and discard() read the ticket once: a getter that moves it clears no bit elsewhere in the memory", () => {
    for (const verb of ["receive", "discard"] as const) {
      using heap = SharedHeap.create(1 << 22);
      const here = new SharedHeapAllocator(heap);
      const a = Buffer.fromData("f32", [1, 2, 3, 4], {
        shape: [4],
        allocator: here,
      });
      // a neighbour full of set bits, for a moved ticket to clear one of
      const at = heap.alloc(8192);
      heap.bytes(at, 8192).fill(0xff);
      const d = here.share(a);
      const middle = at + 4096;
      const words = Math.floor((middle - d.block) / 4);
      const liar = lyingOnce(d, "ticket", d.ticket + 32 * words);
      try {
        if (verb === "receive") here.receive(liar).release();
        else here.discard(liar);
      } catch (error) {
        assert.ok(error instanceof AllotError, String(error));
        here.discard(d);
      }
      assert.ok(
        heap.bytes(at, 8192).every((b) => b === 0xff),
        `${verb}: a byte of the neighbour changed`,
      );
      // the descriptor was used once, whatever happened
      assert.throws(() => here.discard(d), AllotError);
      a.release();
      heap.free(at);
      assert.equal(heap.stats().allocations.current, 0);
      heap.checkIntegrity();
    }
  });

  it("refCount(), receive() and discard() with descriptors of every field lying once are typed refusals or exact", () => {
    using heap = SharedHeap.create(1 << 22);
    const here = new SharedHeapAllocator(heap);
    const a = Buffer.fromData("u8", [1, 2, 3, 4, 5, 6, 7, 8], {
      shape: [8],
      allocator: here,
    });
    const fields = [
      ["kind", "x"],
      ["heapId", 1],
      ["block", 0],
      ["nonce", 0.5],
      ["dtype", "f64"],
      ["shape", [1 << 20]],
      ["strides", [1 << 20]],
      ["offset", 1 << 20],
    ] as const;
    for (const [key, later] of fields) {
      const d = here.share(a);
      const liar = lyingOnce(d, key as keyof typeof d, later);
      let b: Buffer<"u8"> | undefined;
      try {
        b = here.receive(liar) as Buffer<"u8">;
      } catch (error) {
        assert.ok(error instanceof AllotError, `${key}: ${error}`);
        here.discard(d);
      }
      if (b !== undefined) {
        assert.deepEqual([...b.toData()], [1, 2, 3, 4, 5, 6, 7, 8], key);
        b.release();
      }
      assert.equal(here.refCount(a), 1, key);
    }
    a.release();
    assert.equal(heap.stats().allocations.current, 0);
  });
});

describe("SharedHeap.reclaim() with a re-entrant keep (review 9)", () => {
  it("a keep iterable that detaches the dead arena's handle and attaches another in its slot: refused, the new handle keeps its arena", () => {
    using owner = SharedHeap.create(1 << 22);
    const descriptor = owner.descriptor();
    const victim = SharedHeap.attach(descriptor);
    const gone = victim.alloc(100);
    const arena = victim.arena;
    let fresh: SharedHeap | undefined;
    const keep = {
      [Symbol.iterator](): Iterator<number> {
        victim.detach();
        fresh = SharedHeap.attach(descriptor);
        return [][Symbol.iterator]();
      },
    };
    assert.throws(() => owner.reclaim(arena, { keep }), AllotError);
    assert.ok(fresh !== undefined);
    assert.equal(fresh.arena, arena);
    assert.ok(
      owner.arenas().some((a) => a.arena === arena),
      "the new handle's arena is still attached",
    );
    // a third handle gets another arena than the live one
    using third = SharedHeap.attach(descriptor);
    assert.notEqual(third.arena, fresh.arena);
    const a = fresh.alloc(64), b = third.alloc(64);
    fresh.free(a);
    third.free(b);
    owner.free(gone); // the victim's block, abandoned at its detach
    fresh.detach();
    owner.checkIntegrity();
    assert.equal(owner.stats().allocations.current, 0);
  });

  it("a keep iterable that detaches the reclaiming handle itself: refused, as every call of a detached handle", () => {
    const owner = SharedHeap.create(1 << 22);
    const other = SharedHeap.attach(owner.descriptor());
    using dead = SharedHeap.attach(owner.descriptor());
    const at = dead.alloc(100);
    const keep = {
      [Symbol.iterator](): Iterator<number> {
        other.detach();
        return [][Symbol.iterator]();
      },
    };
    assert.throws(() => other.reclaim(dead.arena, { keep }), AllotError);
    assert.ok(owner.arenas().some((a) => a.arena === dead.arena));
    dead.free(at);
    owner.checkIntegrity();
    owner.close();
  });
});

describe("SharedHeap refusals against a twin (review 9)", () => {
  it("every refused call is typed, names a numeric value, and leaves the figures and later offsets as a twin's", () => {
    const make = () => {
      const heap = SharedHeap.create(1 << 21);
      const live = [heap.alloc(100), heap.alloc(20000), heap.alloc(64, 4096)];
      heap.free(live[0]);
      return { heap, live };
    };
    const hit = make(), twin = make();
    const [, large, aligned] = hit.live;
    const values = [
      ...hostileNumbers(),
      { name: "2^31", value: 2 ** 31 },
      { name: "2^32", value: 2 ** 32 },
      { name: "2^32 + large", value: 2 ** 32 + large },
      { name: "large - 2^32", value: large - 2 ** 32 },
      { name: "inside large", value: large + 4096 },
      { name: "freed", value: hit.live[0] },
      { name: "lying valueOf", value: { valueOf: () => large } },
      {
        name: "lying toPrimitive",
        value: { [Symbol.toPrimitive]: () => large },
      },
    ];
    const h = hit.heap;
    const calls: [string, (v: unknown) => unknown][] = [
      ["free", (v) => h.free(v as number)],
      ["bytes(offset)", (v) => h.bytes(v as number, 1)],
      ["bytes(length)", (v) => h.bytes(aligned, v as number)],
      ["usableByteLength", (v) => h.usableByteLength(v as number)],
      ["alloc(length)", (v) => h.alloc(v as number)],
      ["alloc(alignment)", (v) => h.alloc(8, v as number)],
      ["blocksOf", (v) => h.blocksOf(v as number)],
      ["reclaim", (v) => h.reclaim(v as number)],
    ];
    let refused = 0;
    const accepted: number[] = [];
    const replay: [number, unknown][] = [];
    for (const [label, call] of calls) {
      for (const { name, value } of values) {
        let result: unknown;
        try {
          result = call(value);
        } catch (error) {
          assert.ok(
            error instanceof AllotError,
            `${label}(${name}) threw ${error}`,
          );
          if (typeof value === "number" && value !== 0) {
            assert.ok(
              error.message.includes(String(value)),
              `${label}(${name}): ${error.message}`,
            );
          }
          refused++;
          continue;
        }
        assert.ok(
          label.startsWith("alloc") || label === "bytes(length)" ||
            label === "blocksOf",
          `${label}(${name}) was accepted`,
        );
        if (label.startsWith("alloc")) {
          accepted.push(result as number);
          replay.push(
            label === "alloc(length)"
              ? [value as number, undefined]
              : [8, value],
          );
        }
      }
    }
    assert.ok(refused > 100);
    for (const at of accepted) h.free(at);
    // the twin makes and frees what the hit one accepted
    const made = replay.map(([n, a]) => twin.heap.alloc(n, a as number));
    assert.deepEqual(made, accepted);
    for (const at of made) twin.heap.free(at);
    const sequence = (heap: SharedHeap) =>
      [300, 64, 9000, 1, 70000].map((n) => heap.alloc(n));
    const figures = (heap: SharedHeap) => {
      const s = heap.stats();
      return [s.allocations.current, s.allocatedBytes.current, s.freeBytes];
    };
    assert.deepEqual(figures(h), figures(twin.heap));
    assert.deepEqual(sequence(h), sequence(twin.heap));
    h.checkIntegrity();
    h.close();
    twin.heap.close();
  });
});

type Op =
  | { kind: "alloc"; who: number; byteLength: number; alignShift: number }
  | { kind: "free"; who: number; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("alloc" as const),
      who: fc.integer({ min: 0, max: 1 }),
      byteLength: fc.oneof(
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 0, max: 40000 }),
      ),
      alignShift: fc.integer({ min: 0, max: 12 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("free" as const),
      who: fc.integer({ min: 0, max: 1 }),
      pick: fc.nat(),
    }),
  },
);

describe("SharedHeap model with byte patterns (review 9)", () => {
  it("two handles allocate and free each other's blocks; patterns survive, stats equal a recount, all goes back", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 40, size: "max" }), (ops) => {
        using owner = SharedHeap.create(1 << 21);
        using other = SharedHeap.attach(owner.descriptor());
        const handles = [owner, other];
        const live: {
          at: number;
          byteLength: number;
          alignment: number;
          id: number;
        }[] = [];
        let nextId = 1;
        for (const op of ops) {
          const heap = handles[op.who];
          if (op.kind === "alloc") {
            const alignment = 1 << op.alignShift;
            const at = heap.tryAlloc(op.byteLength, alignment);
            if (at === undefined) continue;
            const id = nextId++;
            writePattern(heap.bytes(at, op.byteLength), id);
            live.push({ at, byteLength: op.byteLength, alignment, id });
          } else if (live.length !== 0) {
            const [b] = live.splice(op.pick % live.length, 1);
            heap.free(b.at);
            assert.throws(() => heap.free(b.at), DoubleFreeError);
          }
          let allocated = 0;
          const spans: [number, number][] = [];
          for (const b of live) {
            assert.equal(b.at % b.alignment, 0, "alignment");
            const usable = owner.usableByteLength(b.at);
            assert.ok(usable >= b.byteLength);
            assert.equal(other.usableByteLength(b.at), usable);
            assert.throws(() => other.bytes(b.at, usable + 1), AllotError);
            checkPattern(owner.bytes(b.at, b.byteLength), b.id);
            allocated += usable;
            spans.push([b.at, b.at + usable]);
          }
          spans.sort((x, y) => x[0] - y[0]);
          for (let i = 1; i < spans.length; i++) {
            assert.ok(spans[i - 1][1] <= spans[i][0], "blocks overlap");
          }
          const s = owner.stats();
          assert.equal(s.allocations.current, live.length);
          assert.equal(s.allocatedBytes.current, allocated);
        }
        for (const b of live) handles[b.id % 2].free(b.at);
        assert.equal(owner.stats().allocations.current, 0);
        assert.equal(owner.stats().allocatedBytes.current, 0);
        owner.checkIntegrity();
      }),
      { numRuns: modelRuns(150) },
    );
  });
});

describe("SharedHeap.create() when shared memory cannot be made (review 9)", () => {
  it("without SharedArrayBuffer (a page not cross-origin isolated): a typed refusal, never a ReferenceError", () => {
    const g = globalThis as { SharedArrayBuffer?: unknown };
    const saved = g.SharedArrayBuffer;
    delete g.SharedArrayBuffer;
    try {
      assert.throws(() => SharedHeap.create(1 << 20), AllotError);
    } finally {
      g.SharedArrayBuffer = saved;
    }
    using heap = SharedHeap.create(1 << 20);
    heap.free(heap.alloc(100));
  });
});
