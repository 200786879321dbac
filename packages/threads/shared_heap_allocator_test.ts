import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import { Buffer, Storage } from "@allot/storage";
import { ForeignHeapError, SharedHeap, SharedHeapAllocator } from "./mod.ts";
import { modelRuns } from "../core/_test_faults.ts";

const MiB = 1 << 20;

Deno.test("SharedHeapAllocator.share() and receive() hand a strided view over the same bytes", () => {
  using heap = SharedHeap.create(4 * MiB);
  using remote = SharedHeap.attach(heap.descriptor());
  const here = new SharedHeapAllocator(heap);
  const there = new SharedHeapAllocator(remote);
  using a = Buffer.fromData(
    "i32",
    Int32Array.from({ length: 12 }, (_, i) => i),
    {
      shape: [3, 4],
      allocator: here,
    },
  );
  using t = a.transpose();
  const message = structuredClone(here.share(t)); // what postMessage does
  assert.equal(here.refCount(a), 2);
  using b = there.receive(message);
  assert.deepEqual(b.shape, [4, 3]);
  assert.deepEqual([...b.toData()], [...t.toData()]);
  b.set([1, 2], -5);
  assert.equal(a.get([2, 1]), -5);
  assert.equal(heap.stats().allocations.current, 1);
});

Deno.test("SharedHeapAllocator frees once, whichever side releases last", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 4 }),
      fc.array(fc.nat(), { minLength: 8, maxLength: 8 }),
      fc.integer({ min: 0, max: 20000 }),
      (copies, order, byteLength) => {
        const heap = SharedHeap.create(4 * MiB);
        const other = SharedHeap.attach(heap.descriptor());
        const sides = [
          new SharedHeapAllocator(heap),
          new SharedHeapAllocator(other),
        ];
        const first = Buffer.empty("u8", [byteLength], {
          allocator: sides[0],
        });
        const held = [first];
        for (let i = 0; i < copies; i++) {
          const d = sides[0].share(first);
          held.push(sides[(order[i] ?? 0) % 2].receive(d));
        }
        assert.equal(sides[0].refCount(first), copies + 1);
        const releaseOrder = held
          .map((b, i) => [order[i] ?? i, b] as const)
          .sort((x, y) => x[0] - y[0]);
        for (let i = 0; i < releaseOrder.length; i++) {
          assert.equal(heap.stats().allocations.current, 1, "still live");
          releaseOrder[i][1].release();
        }
        assert.equal(heap.stats().allocations.current, 0, "freed once");
        assert.equal(heap.stats().allocatedBytes.current, 0);
        other.detach();
        heap.detach();
      },
    ),
    { numRuns: modelRuns() },
  );
});

Deno.test("SharedHeapAllocator refuses foreign, freed and malformed descriptors", () => {
  using heap = SharedHeap.create(4 * MiB);
  using stranger = SharedHeap.create(4 * MiB);
  const here = new SharedHeapAllocator(heap);
  const elsewhere = new SharedHeapAllocator(stranger);
  const a = Buffer.fromData("f32", [1, 2, 3], { allocator: here });
  const d = here.share(a);
  assert.throws(() => elsewhere.receive(d), ForeignHeapError);
  assert.throws(() => elsewhere.share(a), ForeignHeapError);
  using plain = Buffer.fromData("f32", [1, 2, 3]);
  assert.throws(() => here.share(plain), ForeignHeapError);
  assert.throws(
    () => here.receive({ ...d, byteLength: 999 }),
    /byteLength must be 12, received 999/,
  );
  assert.throws(() => here.receive({ ...d, block: 3 }), InvalidArgumentError);
  assert.equal(here.refCount(a), 2, "refused calls changed nothing");
  here.discard(d);
  a.release();
  assert.equal(heap.stats().allocations.current, 0);
  assert.throws(() => here.receive(d), UseAfterFreeError);
  assert.throws(() => here.discard(d), UseAfterFreeError);
  assert.throws(() => here.share(a), UseAfterFreeError);
});

Deno.test("SharedHeapAllocator is a core Allocator for Storage", () => {
  using heap = SharedHeap.create(4 * MiB);
  const allocator = new SharedHeapAllocator(heap);
  const owner = Storage.allocate(100, { allocator });
  owner.target.bytes().fill(3);
  assert.equal(owner.target.data.byteOffset % 64, 0);
  assert.ok(owner.target.data.memory instanceof SharedArrayBuffer);
  assert.throws(() => allocator.allocate(-1), InvalidArgumentError);
  owner.release();
  assert.equal(heap.stats().allocations.current, 0);
  assert.throws(() => owner.release(), DoubleFreeError);
});
