/**
 * Third outside-in review of `@allot/storage`: writes into views whose
 * elements alias through strides that are not 0 (shape `[2, 2]` with
 * strides `[1, 1]` reaches element 1 twice). Until this review `fill()` and
 * `copyFrom()` refused only stride-0 (broadcast) views; an aliasing
 * destination got whichever value the loop wrote last.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Buffer, BufferView, ShapeError } from "./mod.ts";
import { FakeBackend, FakeDeviceAllocator } from "./_test_allocators.ts";

function aliasing(): Buffer<"f32"> {
  const base = Buffer.fromData("f32", [10, 20, 30]);
  const view = base.withView(new BufferView([2, 2], { strides: [1, 1] }));
  base.release();
  return view;
}

describe("Buffer writes into aliasing views", () => {
  it("Buffer.copyFrom() refuses a destination whose elements alias through strides [1, 1], changing nothing", () => {
    const dst = aliasing();
    const src = Buffer.fromData("f32", [1, 2, 3, 4], { shape: [2, 2] });
    assert.throws(
      () => dst.copyFrom(src),
      (e: unknown) =>
        e instanceof ShapeError &&
        /strides \[1, 1\].*indices \[0, 1\] and \[1, 0\] both reach element 1/
          .test(e.message),
    );
    const whole = dst.withView(new BufferView([3]));
    assert.deepEqual([...whole.toData()], [10, 20, 30]);
    // reading an aliasing view stays allowed
    assert.deepEqual([...dst.toData()], [10, 20, 20, 30]);
    whole.release();
    dst.release();
    src.release();
  });

  it("Buffer.fill() refuses an aliasing view like a broadcast one", () => {
    const dst = aliasing();
    assert.throws(() => dst.fill(7), ShapeError);
    assert.deepEqual([...dst.toData()], [10, 20, 20, 30]);
    dst.release();
  });

  it("Buffer.copyFrom() refuses an aliasing destination on a backend's memory too", () => {
    const backend = new FakeBackend();
    const allocator = new FakeDeviceAllocator();
    const base = Buffer.zeros("f32", [3], { allocator, backend });
    const dst = base.withView(new BufferView([2, 2], { strides: [1, 1] }));
    const src = Buffer.zeros("f32", [2, 2], { allocator, backend });
    const before = backend.calls.length;
    assert.throws(() => dst.copyFrom(src), ShapeError);
    assert.throws(() => dst.fill(1), ShapeError);
    assert.equal(backend.calls.length, before);
    for (const b of [base, dst, src]) b.release();
  });

  it("Buffer.copyFrom() into any non-aliasing strided view writes every element once (model)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 3 }), {
          minLength: 1,
          maxLength: 3,
        }),
        fc.array(fc.integer({ min: -4, max: 4 }), {
          minLength: 3,
          maxLength: 3,
        }),
        (shape, rawStrides) => {
          const strides = shape.map((_, d) => rawStrides[d]);
          let low = 0, high = 0;
          shape.forEach((n, d) => {
            const s = strides[d] * (n - 1);
            if (s < 0) low += s;
            else high += s;
          });
          const offset = -low;
          const base = Buffer.zeros("f32", [high - low + 1]);
          const view = new BufferView(shape, { strides, offset });
          const dst = base.withView(view);
          const length = shape.reduce((a, b) => a * b, 1);
          const src = Buffer.fromData(
            "f32",
            Array.from({ length }, (_, i) => i + 1),
            { shape },
          );
          // brute-force aliasing
          const seen = new Set<number>();
          let aliased = false;
          const walk = (d: number, at: number) => {
            if (d === shape.length) {
              if (seen.has(at)) aliased = true;
              seen.add(at);
              return;
            }
            for (let i = 0; i < shape[d]; i++) walk(d + 1, at + i * strides[d]);
          };
          walk(0, offset);
          const before = [...base.toData()];
          if (aliased) {
            assert.throws(() => dst.copyFrom(src), ShapeError);
            assert.deepEqual([...base.toData()], before);
          } else {
            dst.copyFrom(src);
            assert.deepEqual([...dst.toData()], [...src.toData()]);
          }
          for (const b of [base, dst, src]) b.release();
        },
      ),
      { numRuns: 500 },
    );
  });
});
