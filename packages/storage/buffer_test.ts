import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "../core/_test_faults.ts";
import {
  type Allocator,
  DoubleFreeError,
  IntrusivePtr,
  InvalidArgumentError,
  UnsupportedOperationError,
  UseAfterFreeError,
} from "@allot/core";
import { Buffer, type Dtype, ShapeError, supportedDtypes } from "./mod.ts";
import * as model from "./_test_model.ts";
import {
  BumpAllocator,
  FakeBackend,
  FakeDeviceAllocator,
  WasmBumpAllocator,
} from "./_test_allocators.ts";

/** A buffer whose element k holds k (as i32), from a bump allocator. */
function indexBuffer(
  n: number,
  allocator: Allocator = new BumpAllocator(),
): Buffer<"i32"> {
  return Buffer.fromData("i32", Int32Array.from({ length: n }, (_, i) => i), {
    allocator,
  });
}

describe("Buffer", () => {
  it("Buffer.toData() and contiguous() agree with a naive reference on random view chains", () => {
    const shapeArb = fc.array(fc.integer({ min: 0, max: 5 }), {
      minLength: 0,
      maxLength: 6,
    })
      .filter((s) => model.count(s) <= 800);
    const opArb = fc.record({
      kind: fc.integer({ min: 0, max: 3 }),
      a: fc.nat(),
      b: fc.nat(),
      c: fc.integer({ min: -3, max: 3 }),
    });
    fc.assert(
      fc.property(
        shapeArb,
        fc.array(opArb, { maxLength: 6 }),
        fc.boolean(),
        (shape, ops, wasm) => {
          const allocator = wasm
            ? new WasmBumpAllocator(1)
            : new BumpAllocator();
          const liveBlocks =
            () => (allocator instanceof BumpAllocator
              ? allocator.live.size
              : allocator.live);
          const base = indexBuffer(model.count(shape), allocator);
          let buf = base.reshape(shape);
          let ref = model.modelOf(shape);
          for (const op of ops) {
            const rank = ref.shape.length;
            let next: Buffer<"i32"> | undefined;
            if (op.kind === 0 && rank >= 2) {
              const a = op.a % rank, b = op.b % rank;
              next = buf.transpose(a, b);
              ref = model.transpose(ref, a, b);
            } else if (op.kind === 1 && rank >= 1) {
              const d = op.a % rank, n = ref.shape[d];
              const step = op.c === 0 ? 2 : op.c;
              const start = step > 0
                ? op.b % (n + 1)
                : (n === 0 ? -1 : op.b % n);
              const stop = step > 0 ? n : -1;
              next = buf.slice(d, { start, stop, step });
              ref = model.slice(ref, d, start, stop, step);
            } else if (op.kind === 2 && rank < 6) {
              const target = [
                1 + (op.a % 3),
                ...ref.shape.map((n, i) =>
                  n === 1 && (op.b >> i) % 2 ? 1 + (op.b % 4) : n
                ),
              ];
              if (model.count(target) <= 3000) {
                next = buf.broadcastTo(target);
                ref = model.broadcast(ref, target);
              }
            } else if (op.kind === 3) {
              const axes = ref.shape.map((_, i) => i).reverse();
              next = buf.permute(axes);
              ref = model.permute(ref, axes);
            }
            if (next !== undefined) {
              buf.release();
              buf = next;
            }
          }
          assert.deepEqual([...buf.toData()], ref.data);
          const packed = buf.contiguous();
          assert.ok(packed.isContiguous);
          assert.equal(packed.offset, 0);
          assert.deepEqual([...packed.toData()], ref.data);
          if (buf.isContiguous && buf.offset === 0) {
            assert.ok(packed.sharesStorageWith(buf));
          } else {
            assert.ok(!packed.sharesStorageWith(buf));
          }
          packed.release();
          buf.release();
          base.release();
          assert.equal(liveBlocks(), 0);
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("Buffer.contiguous() keeps values for every dtype", () => {
    for (const dtype of supportedDtypes()) {
      const data = [0, 1, -2, 3.5, 100, 7, 0, 1, 1, 0, 2, 9];
      using b = Buffer.fromData(dtype, data, {
        shape: [3, 4],
        allocator: new BumpAllocator(),
      });
      const expected = [...b.toData()];
      using t = b.transpose();
      using packed = t.contiguous();
      using back = packed.reshape([4, 3]).transpose();
      assert.deepEqual([...back.contiguous().toData()], expected, dtype);
      if (dtype === "bool") {
        assert.deepEqual(expected, data.map((x) => (x ? 1 : 0)));
      }
    }
  });

  it("Buffer copies floats as raw bits, keeping NaN payloads of f32", () => {
    const bits = new Uint32Array([
      0x7fa00001,
      0xffc00123,
      0x3f800000,
      0x80000000,
    ]);
    using b = Buffer.fromData("u32", bits, { shape: [2, 2] });
    const f = new Buffer(IntrusivePtr.retain(b.storage), {
      dtype: "f32",
      view: b.view.transpose(),
    });
    using packed = f.contiguous();
    const out = new Uint32Array(packed.toData().buffer);
    assert.deepEqual([...out], [
      0x7fa00001,
      0x3f800000,
      0xffc00123,
      0x80000000,
    ]);
    f.release();
  });

  it("Buffer.empty(), zeros() and filled() allocate contiguous buffers", () => {
    using e = Buffer.empty("f64", [2, 3]);
    assert.equal(e.byteLength, 48);
    using z = Buffer.zeros("u16", [4], { allocator: new BumpAllocator() });
    assert.deepEqual([...z.toData()], [0, 0, 0, 0]);
    using f = Buffer.filled("bool", [2], { value: 5 });
    assert.deepEqual([...f.toData()], [1, 1]);
    using s = Buffer.filled("f32", [], { value: 2.5 });
    assert.deepEqual([...s.toData()], [2.5]);
    assert.equal(s.get([]), 2.5);
    assert.throws(() => Buffer.empty("f32", [-1]), ShapeError);
    assert.throws(() => Buffer.empty("x" as Dtype, [1]), InvalidArgumentError);
  });

  it("Buffer.copyFrom() copies between views of equal shape and refuses mismatches unchanged", () => {
    using a = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
    using b = Buffer.zeros("f32", [3, 2]);
    using bt = b.transpose();
    bt.copyFrom(a);
    assert.deepEqual([...b.toData()], [1, 4, 2, 5, 3, 6]);
    const before = [...b.toData()];
    assert.throws(() => b.copyFrom(a), /shapes must match/);
    using i = Buffer.zeros("i32", [2, 3]);
    assert.throws(
      () => i.copyFrom(a as unknown as Buffer<"i32">),
      /dtypes must match/,
    );
    using row = Buffer.zeros("f32", [3]);
    using bc = row.broadcastTo([2, 3]);
    assert.throws(() => bc.copyFrom(a), /broadcast view/);
    assert.deepEqual([...b.toData()], before);
    assert.deepEqual([...row.toData()], [0, 0, 0]);
  });

  it("Buffer.copyFrom() handles overlapping views of one storage", () => {
    using a = Buffer.fromData("i32", [0, 1, 2, 3, 4, 5, 6, 7]);
    using head = a.slice(0, { start: 0, stop: 6 });
    using tail = a.slice(0, { start: 2, stop: 8 });
    tail.copyFrom(head);
    assert.deepEqual([...a.toData()], [0, 1, 0, 1, 2, 3, 4, 5]);
    using rev = a.slice(0, { step: -1 });
    a.copyFrom(rev);
    assert.deepEqual([...a.toData()], [5, 4, 3, 2, 1, 0, 1, 0]);
  });

  it("Buffer reports storage sharing, uniqueness and in-place safety", () => {
    const a = Buffer.zeros("f32", [2, 2]);
    assert.ok(a.isStorageUnique);
    assert.ok(a.canModifyInPlace);
    const t = a.transpose();
    assert.ok(t.sharesStorageWith(a));
    assert.equal(t.storageId, a.storageId);
    assert.ok(!a.isStorageUnique);
    assert.ok(!a.canModifyInPlace);
    t.release();
    assert.ok(a.canModifyInPlace);
    using c = a.contiguous();
    assert.ok(c.sharesStorageWith(a));
    assert.ok(!a.isStorageUnique);
    a.release();
    assert.ok(c.isStorageUnique);
    assert.throws(() => a.release(), DoubleFreeError);
    assert.throws(() => a.toData(), UseAfterFreeError);
  });

  it("Buffer frees its storage when the last view is released", () => {
    const allocator = new BumpAllocator();
    const a = Buffer.zeros("u8", [16], { allocator });
    const r = a.reshape([4, 4]);
    const v = r.transpose();
    r.release();
    a.release();
    assert.equal(allocator.live.size, 1);
    assert.deepEqual(v.shape, [4, 4]);
    v.release();
    assert.equal(allocator.live.size, 0);
  });

  it("Buffer refuses views that reach past the storage", () => {
    using a = Buffer.zeros("f32", [4]);
    assert.throws(
      () => a.withView(a.view.broadcastTo([2, 4]).reshape([8])),
      ShapeError,
    );
    assert.throws(() => a.reshape([5]), /element counts differ/);
    assert.throws(() => a.get([4]), /index 4 at dim 0/);
  });

  it("Buffer on non-host memory goes through its backend", async () => {
    const allocator = new FakeDeviceAllocator();
    const backend = new FakeBackend();
    const a = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], {
      shape: [2, 3],
      allocator,
      backend,
    });
    assert.throws(() => a.toData(), /not host memory; use read\(\)/);
    const t = a.transpose();
    const c = t.contiguous();
    assert.deepEqual([...await c.read()], [1, 4, 2, 5, 3, 6]);
    const z = Buffer.zeros("f32", [3, 2], { allocator, backend });
    z.copyFrom(t);
    assert.deepEqual([...await z.read()], [1, 4, 2, 5, 3, 6]);
    assert.deepEqual(backend.calls, [
      "write",
      "copy",
      "read",
      "fill",
      "copy",
      "read",
    ]);
    const bare = Buffer.empty("f32", [2], { allocator });
    assert.throws(() => bare.fill(1), UnsupportedOperationError);
    for (const b of [a, t, c, z, bare]) b.release();
    assert.equal(allocator.live, 0);
  });

  it("Buffer.contiguous() packs transposes in place inside a WebAssembly.Memory", () => {
    const allocator = new WasmBumpAllocator(4);
    for (const dtype of ["f32", "f64", "i32", "u16"] as const) {
      for (
        const [shape, axes] of [
          [[130, 67], [1, 0]],
          [[20, 30, 40], [2, 0, 1]],
          [[20, 30, 40], [1, 2, 0]],
        ] as const
      ) {
        const n = shape.reduce((a: number, b: number) => a * b, 1);
        using base = Buffer.fromData(
          dtype,
          Array.from({ length: n }, (_, i) => i % 2000),
          { shape, allocator },
        );
        using view = base.permute(axes);
        using packed = view.contiguous();
        assert.equal(packed.storage.data.memory, allocator.memory);
        const ref = model.permute(model.modelOf([...shape]), [...axes]).data
          .map((i) => i % 2000);
        assert.deepEqual(
          [...packed.toData()],
          ref,
          `${dtype} [${shape}] axes [${axes}]`,
        );
      }
    }
    assert.equal(allocator.live, 0);
  });

  it("Buffer refuses bad calls without leaking references or allocations", () => {
    const allocator = new BumpAllocator();
    using a = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], {
      shape: [2, 3],
      allocator,
    });
    const before = a.toString();
    const uses = IntrusivePtr.retain(a.storage);
    const count = uses.useCount;
    assert.throws(() => a.reshape([7]), ShapeError);
    assert.throws(() => a.permute([0]), ShapeError);
    assert.throws(() => a.slice(0, { start: 3 }), ShapeError);
    assert.throws(() => a.broadcastTo([3, 3]), ShapeError);
    assert.throws(
      () => a.withView(a.view.broadcastTo([4, 2, 3]).reshape([24])),
      ShapeError,
    );
    assert.throws(() => a.set([2, 0], 1), ShapeError);
    assert.throws(
      () => Buffer.fromData("f32", [1, 2], { shape: [3], allocator }),
      ShapeError,
    );
    assert.equal(
      uses.useCount,
      count,
      "no reference was retained by a refused call",
    );
    assert.equal(a.toString(), before);
    assert.deepEqual([...a.toData()], [1, 2, 3, 4, 5, 6]);
    assert.equal(allocator.live.size, 1, "no allocation was left behind");
    uses.release();

    const device = new FakeDeviceAllocator();
    const g = Buffer.empty("f32", [4, 4], { allocator: device });
    const t = g.transpose();
    assert.throws(() => t.contiguous(), UnsupportedOperationError);
    assert.equal(
      device.live,
      1,
      "the packed output was freed when packing failed",
    );
    t.release();
    g.release();
    assert.equal(device.live, 0);
  });
});
