import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
} from "@allot/core";
import {
  ForeignHeapError,
  HeapClosedError,
  NotSharedMemoryError,
  SharedHeap,
} from "./mod.ts";
import { modelRuns } from "../core/_test_faults.ts";

const MiB = 1 << 20;

Deno.test("SharedHeap.create() refuses memory that is not shared", () => {
  const plain: unknown = new ArrayBuffer(MiB);
  assert.throws(
    () => SharedHeap.create(plain as SharedArrayBuffer),
    NotSharedMemoryError,
  );
  const wasm: unknown = new WebAssembly.Memory({ initial: 16 });
  assert.throws(
    () => SharedHeap.create(wasm as WebAssembly.Memory),
    /made without shared: true/,
  );
});

Deno.test("SharedHeap.create() validates the range it is given", () => {
  const memory = new SharedArrayBuffer(MiB);
  assert.throws(
    () => SharedHeap.create(memory, { byteOffset: 4 }),
    /multiple of 8, received 4/,
  );
  assert.throws(
    () => SharedHeap.create(memory, { byteLength: 2 * MiB }),
    InvalidArgumentError,
  );
  assert.throws(
    () => SharedHeap.create(memory, { byteLength: 4096 }),
    /at least \d+ bytes, received 4096/,
  );
  assert.throws(
    () => SharedHeap.create(memory, { lockTimeoutMs: -1 }),
    /lockTimeoutMs/,
  );
  using heap = SharedHeap.create(memory, { byteOffset: 4096 });
  assert.ok(heap.alloc(64) >= 4096);
});

Deno.test("SharedHeap.attach() refuses another heap and a closed heap", () => {
  const a = SharedHeap.create(MiB);
  using b = SharedHeap.create(MiB);
  assert.throws(
    () => SharedHeap.attach({ ...a.descriptor(), heapId: b.heapId }),
    ForeignHeapError,
  );
  assert.throws(
    () => SharedHeap.attach({ ...a.descriptor(), byteOffset: 8 }),
    ForeignHeapError,
  );
  using other = SharedHeap.attach(a.descriptor());
  const block = other.alloc(64);
  assert.throws(() => other.close(), /only its creator/);
  a.close();
  assert.throws(() => SharedHeap.attach(a.descriptor()), HeapClosedError);
  assert.throws(() => other.alloc(64), HeapClosedError);
  assert.throws(() => other.free(block), HeapClosedError);
  assert.throws(() => a.alloc(64), /this handle was detached/);
});

Deno.test("SharedHeap refuses bad sizes, alignments and offsets and changes nothing", () => {
  using heap = SharedHeap.create(4 * MiB);
  const live = heap.alloc(100);
  const before = heap.stats();
  for (const bad of [-1, 1.5, NaN, Infinity, 2 ** 31]) {
    assert.throws(() => heap.alloc(bad), InvalidArgumentError);
  }
  assert.throws(() => heap.alloc(64, 48), /power of two, received 48/);
  assert.throws(() => heap.alloc(64, 8192), /at most 4096, received 8192/);
  assert.throws(() => heap.free(live + 8), /not a block start/);
  assert.throws(() => heap.free(-64), /outside the page area/);
  assert.throws(() => heap.free(0.5), InvalidArgumentError);
  assert.deepEqual(heap.stats(), before);
  heap.free(live);
  assert.throws(() => heap.free(live), DoubleFreeError);
  const large = heap.alloc(100_000);
  heap.free(large);
  assert.throws(() => heap.free(large), DoubleFreeError);
  assert.equal(heap.stats().allocations.current, 0);
  heap.checkIntegrity();
});

Deno.test("SharedHeap.alloc() throws OutOfMemoryError and tryAlloc() gives undefined", () => {
  using heap = SharedHeap.create(MiB);
  assert.equal(heap.tryAlloc(2 * MiB), undefined);
  assert.throws(() => heap.alloc(2 * MiB), OutOfMemoryError);
  assert.equal(heap.stats().reservedBytes, 0);
});

Deno.test("SharedHeap.reclaim() frees a gone arena's blocks but those kept", () => {
  using heap = SharedHeap.create(8 * MiB);
  const dead = SharedHeap.attach(heap.descriptor()); // never detached
  const small = [dead.alloc(100), dead.alloc(200), dead.alloc(3000)];
  const large = [dead.alloc(50_000), dead.alloc(70_000)];
  dead.free(small[1]);
  heap.free(small[2]); // a remote free into the dead arena's slab
  assert.deepEqual(
    heap.arenas().map((a) => [a.arena, a.state, a.self]),
    [[0, "attached", true], [1, "attached", false]],
  );
  const held = heap.blocksOf(dead.arena);
  assert.deepEqual(
    held.map((b) => b.byteOffset),
    [small[0], ...large].sort((a, b) => a - b),
  );
  // Not reused while unknown: new blocks never land on held ones.
  const mine = Array.from({ length: 50 }, (_, i) => heap.alloc(64 << (i % 12)));
  for (const m of mine) {
    const len = heap.usableByteLength(m);
    for (const h of held) {
      assert.ok(
        m + len <= h.byteOffset || h.byteOffset + h.byteLength <= m,
        `block ${m} overlaps held block ${h.byteOffset}`,
      );
    }
  }
  assert.throws(() => heap.reclaim(0), /this handle's own/);
  assert.throws(() => heap.reclaim(5), /not attached/);
  const report = heap.reclaim(dead.arena, { keep: [large[0]] });
  assert.deepEqual(report.kept.map((b) => b.byteOffset), [large[0]]);
  assert.deepEqual(
    report.freed.map((b) => b.byteOffset),
    [small[0], large[1]].sort((a, b) => a - b),
  );
  assert.equal(heap.arenas().length, 1);
  heap.free(large[0]); // the kept block is freed later, from anywhere
  for (const m of mine) heap.free(m);
  const stats = heap.stats();
  assert.equal(stats.allocations.current, 0);
  assert.equal(stats.allocatedBytes.current, 0);
  heap.checkIntegrity();
});

Deno.test("SharedHeap.detach() abandons slabs that go back when their last block is freed", () => {
  const heap = SharedHeap.create(8 * MiB);
  const other = SharedHeap.attach(heap.descriptor());
  const blocks = Array.from({ length: 20 }, (_, i) => other.alloc(64 * i));
  other.detach();
  assert.throws(() => other.alloc(64), HeapClosedError);
  assert.ok(heap.stats().reservedBytes > 0);
  for (const b of blocks) heap.free(b);
  heap.detach();
  const again = SharedHeap.attach(heap.descriptor());
  assert.equal(again.arena, 0, "the freed slot is attached again");
  assert.equal(again.stats().reservedBytes, 0);
  assert.equal(again.stats().freeBytes, again.stats().byteLength);
  again.checkIntegrity();
  again.detach();
});

interface Op {
  kind: "alloc" | "free" | "double";
  handle: number;
  byteLength: number;
  alignment: number;
  pick: number;
}

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom<Op["kind"]>("alloc", "alloc", "free", "double"),
  handle: fc.nat(2),
  byteLength: fc.oneof(
    fc.integer({ min: 0, max: 300 }),
    fc.integer({ min: 0, max: 9000 }),
    fc.integer({ min: 0, max: 300_000 }),
  ),
  alignment: fc.constantFrom(64, 64, 1, 16, 128, 256, 1024, 4096),
  pick: fc.nat(),
});

Deno.test("SharedHeap matches a model: no overlap, aligned, stats add up, all returned", () => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 120 }), (ops) => {
      // strict mode (integrity checked after each change, freed blocks
      // junk-filled) in half the runs
      const root = SharedHeap.create(4 * MiB, { strict: ops.length % 2 === 0 });
      const handles = [
        root,
        SharedHeap.attach(root.descriptor()),
        SharedHeap.attach(root.descriptor()),
      ];
      const u8 = new Uint8Array(root.buffer);
      const live = new Map<number, { len: number; tag: number }>();
      const freed: number[] = [];
      let tag = 0;
      let bytes = 0;
      for (const op of ops) {
        const h = handles[op.handle];
        if (op.kind === "alloc") {
          const at = h.tryAlloc(op.byteLength, op.alignment);
          if (at === undefined) continue;
          assert.equal(at % Math.max(op.alignment, 64), 0, "aligned");
          const len = h.usableByteLength(at);
          assert.ok(len >= op.byteLength, "long enough");
          for (const [o, b] of live) {
            assert.ok(at + len <= o || o + b.len <= at, "no overlap");
          }
          tag = (tag % 250) + 1;
          u8.fill(tag, at, at + len);
          live.set(at, { len, tag });
          bytes += len;
        } else if (live.size > 0) {
          const keys = [...live.keys()];
          const at = keys[op.pick % keys.length];
          const b = live.get(at)!;
          assert.ok(
            u8.subarray(at, at + b.len).every((x) => x === b.tag),
            "pattern intact",
          );
          h.free(at);
          live.delete(at);
          freed.push(at);
          bytes -= b.len;
        } else if (op.kind === "double" && freed.length > 0) {
          const at = freed[op.pick % freed.length];
          // Freed, maybe reused by a block of another class: refused
          // either way, and nothing changes (the stats are checked below).
          if (!live.has(at)) {
            assert.throws(
              () => h.free(at),
              (e) =>
                e instanceof DoubleFreeError ||
                e instanceof InvalidArgumentError,
            );
          }
        }
        const stats = root.stats();
        assert.equal(stats.allocations.current, live.size);
        assert.equal(stats.allocatedBytes.current, bytes);
        assert.ok(stats.allocatedBytes.current <= stats.reservedBytes);
        assert.equal(stats.reservedBytes + stats.freeBytes, stats.byteLength);
      }
      root.checkIntegrity();
      for (const at of live.keys()) handles[at % 3].free(at);
      for (const h of handles.reverse()) h.detach();
      const after = SharedHeap.attach(root.descriptor());
      const stats = after.stats();
      after.checkIntegrity();
      after.detach();
      assert.equal(stats.allocations.current, 0);
      assert.equal(stats.allocatedBytes.current, 0);
      assert.equal(stats.freeBytes, stats.byteLength, "every page returned");
    }),
    { numRuns: modelRuns() },
  );
});
