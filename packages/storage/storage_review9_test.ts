/**
 * Ninth outside-in review of `@allot/storage`: views of a storage that was
 * resized or reset under them, on device memory through a backend, and
 * copies between overlapping hostile views of one storage for every dtype.
 * `BufferBackend` promises that "all views passed in were validated against
 * their storage", but `binding()`, `fill()`, `copyFrom()`, `contiguous()`
 * and `read()` of a view whose storage had shrunk handed the backend a view
 * past the storage's end (a write out of bounds on a GPU; here, garbage
 * read back as NaN). Host buffers already refused. And `fill()` or
 * `copyFrom()` into an empty broadcast view (`broadcastTo([3, 0])`) was
 * refused as aliasing, though it has no elements (core's
 * `findStridedAlias` and PyTorch agree: nothing aliases, nothing to write).
 * `tidy()` of a function whose result traps when read (a proxy) threw a raw
 * error and left its scope open for good (what it made stayed live, and
 * every later buffer was tracked by a scope that never closes); `keep()`
 * and `isBufferOwner()` of such a value threw raw errors.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { AllotError, InvalidArgumentError } from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import { trapObject } from "../core/_test_hostile.ts";
import {
  Buffer,
  BufferPool,
  BufferView,
  type Dtype,
  isBufferOwner,
  keep,
  ShapeError,
  supportedDtypes,
  tidy,
} from "./mod.ts";
import { Storage } from "./storage.ts";
import {
  FakeBackend,
  FakeDeviceAllocator,
  WasmBumpAllocator,
} from "./_test_allocators.ts";

/** A device buffer of 4 f32 over a resizable storage, filled with 7, and its view of elements 2..3. */
function deviceBuffers() {
  const allocator = new FakeDeviceAllocator();
  const backend = new FakeBackend();
  const storage = Storage.allocate(16, { allocator, resizable: true });
  const whole = new Buffer(storage, { dtype: "f32", backend });
  whole.fill(7);
  const tail = whole.slice(0, { start: 2 });
  backend.calls.length = 0;
  return { allocator, backend, whole, tail };
}

describe("storage ninth review: views of a storage that shrank, through a backend", () => {
  for (
    const [how, shrink] of [
      ["resize(8)", (b: Buffer<"f32">) => b.storage.resize(8)],
      ["reset()", (b: Buffer<"f32">) => b.storage.reset()],
    ] as const
  ) {
    it(`after ${how}, binding(), fill(), copyFrom(), contiguous() and read() of a view past the end are refused before the backend is called`, async () => {
      const { allocator, backend, whole, tail } = deviceBuffers();
      shrink(whole);
      const other = Buffer.empty("f32", [2], { allocator, backend });
      backend.calls.length = 0;
      assert.throws(() => tail.binding(), ShapeError);
      assert.throws(() => tail.fill(3), ShapeError);
      assert.throws(() => tail.copyFrom(other), ShapeError);
      assert.throws(() => other.copyFrom(tail), ShapeError);
      assert.throws(() => tail.contiguous(), ShapeError);
      // read() refuses at once, as it does a released buffer
      assert.throws(() => tail.read(), ShapeError);
      assert.deepEqual(backend.calls, []);
      // a view that still fits works
      if (how === "resize(8)") {
        const head = whole.withView(BufferView.contiguous([2]));
        assert.deepEqual([...await head.read()], [7, 7]);
        head.release();
      }
      other.release();
      tail.release();
      whole.release();
    });
  }

  it("a view of a storage that grew back fits again, through the backend", async () => {
    const { backend, whole, tail } = deviceBuffers();
    whole.storage.resize(8);
    whole.storage.resize(16);
    tail.fill(5);
    assert.deepEqual(backend.calls, ["fill"]);
    assert.deepEqual([...await tail.read()], [5, 5]);
    tail.release();
    whole.release();
  });
});

describe("storage ninth review: empty views", () => {
  it("fill() and copyFrom() into an empty broadcast view write nothing and do not throw", () => {
    const allocator = new WasmBumpAllocator(1);
    const one = Buffer.fromData("i32", [9], { allocator });
    const guard = Buffer.filled("u8", [16], { allocator, value: 0x77 });
    for (const shape of [[3, 0], [0, 3], [2, 0, 2]]) {
      const empty = one.broadcastTo(shape);
      assert.equal(empty.length, 0);
      empty.fill(1);
      const zeros = Buffer.zeros("i32", shape);
      empty.copyFrom(zeros);
      assert.deepEqual([...one.toData()], [9]);
      assert.ok(guard.toData().every((x) => x === 0x77));
      zeros.release();
      empty.release();
    }
    // a non-empty broadcast view is still refused
    const wide = one.broadcastTo([3]);
    assert.throws(() => wide.fill(1), ShapeError);
    assert.deepEqual([...one.toData()], [9]);
    for (const b of [wide, guard, one]) b.release();
  });
});

const N = 48;

const viewArb = (rank: number) =>
  fc.record({
    shape: fc.array(fc.integer({ min: 0, max: 4 }), {
      minLength: rank,
      maxLength: rank,
    }),
    strides: fc.array(fc.integer({ min: -7, max: 7 }), {
      minLength: rank,
      maxLength: rank,
    }),
    offset: fc.nat(N - 1),
  });

/** The view, or undefined when the layout leaves [0, N). */
function tryView(
  shape: number[],
  strides: number[],
  offset: number,
): BufferView | undefined {
  try {
    const v = new BufferView(shape, { strides, offset });
    return v.length === 0 || v.maxIndex < N ? v : undefined;
  } catch (e) {
    assert.ok(e instanceof AllotError, String(e));
    return undefined;
  }
}

function* indices(shape: readonly number[]): Generator<number[]> {
  const n = shape.reduce((a, b) => a * b, 1);
  for (let f = 0; f < n; f++) {
    const idx = new Array<number>(shape.length);
    let r = f;
    for (let d = shape.length - 1; d >= 0; d--) {
      idx[d] = r % shape[d];
      r = Math.floor(r / shape[d]);
    }
    yield idx;
  }
}

describe("storage ninth review: copies between overlapping views of one storage", () => {
  it("copyFrom() between two views of one storage copies as if the source were read first, or refuses an aliasing destination changing nothing; every dtype, neighbours untouched", () => {
    const dtypes = supportedDtypes() as Dtype[];
    fc.assert(
      fc.property(
        fc.constantFrom(...dtypes),
        fc.integer({ min: 0, max: 3 }).chain((rank) =>
          fc.tuple(viewArb(rank), viewArb(rank))
        ),
        (dtype, [d, s]) => {
          const dst = tryView(d.shape, d.strides, d.offset);
          const src = tryView(d.shape, s.strides, s.offset);
          if (dst === undefined || src === undefined) return;
          const allocator = new WasmBumpAllocator(1);
          const before = Buffer.filled("u8", [40], { allocator, value: 0xa5 });
          const values = Array.from(
            { length: N },
            (_, i) => dtype === "bool" ? i & 1 : (i * 37 + 11) % 97,
          );
          const base = Buffer.fromData(dtype, values as never, { allocator });
          const after = Buffer.filled("u8", [40], { allocator, value: 0x5a });
          const original = base.toData();
          const bDst = base.withView(dst);
          const bSrc = base.withView(src);
          const targets = new Set<number>();
          for (const idx of indices(dst.shape)) targets.add(dst.index(idx));
          const aliases = targets.size < dst.length;
          if (aliases) {
            assert.throws(() => bDst.copyFrom(bSrc), ShapeError);
            assert.deepEqual(base.toData(), original);
          } else {
            const want = original.slice();
            for (const idx of indices(dst.shape)) {
              want[dst.index(idx)] = original[src.index(idx)];
            }
            bDst.copyFrom(bSrc);
            assert.deepEqual(base.toData(), want);
          }
          assert.ok(before.toData().every((x) => x === 0xa5));
          assert.ok(after.toData().every((x) => x === 0x5a));
          for (const b of [bDst, bSrc, base, before, after]) b.release();
        },
      ),
      { numRuns: modelRuns(400) },
    );
  });
});

describe("storage ninth review: option bags whose keys cannot be read", () => {
  it("Buffer, BufferView, Storage and BufferPool entry points refuse a trap proxy as options with a typed error, allocating nothing", () => {
    const allocator = new WasmBumpAllocator(1);
    const view = new BufferView([4]);
    const base = Buffer.zeros("f32", [4], { allocator });
    const next = allocator.next, live = allocator.live;
    for (
      const call of [
        () => Buffer.empty("f32", [2], trapObject() as never),
        () => Buffer.zeros("f32", [2], trapObject() as never),
        () => Buffer.fromData("f32", [1, 2], trapObject() as never),
        () => new BufferView([2], trapObject() as never),
        () => view.slice(0, trapObject() as never),
        () => base.slice(0, trapObject() as never),
        () => base.contiguous(trapObject() as never),
        () => Storage.allocate(4, trapObject() as never),
        () => new BufferPool(allocator, trapObject() as never),
      ]
    ) {
      assert.throws(call, AllotError);
    }
    assert.equal(allocator.next, next);
    assert.equal(allocator.live, live);
    assert.deepEqual([...base.toData()], [0, 0, 0, 0]);
    base.release();
  });
});

describe("storage ninth review: tidy() and keep() with results that trap when read", () => {
  it("tidy() whose result traps when read (a proxy) closes its scope, releases what it made, and refuses with a typed error", () => {
    let made: Buffer<"f32"> | undefined;
    assert.throws(
      () =>
        tidy(() => {
          made = Buffer.zeros("f32", [2]);
          return trapObject();
        }),
      InvalidArgumentError,
    );
    // the scope was left open: the buffer stayed live, and every buffer
    // made later was tracked by a scope that never closes
    assert.equal(made!.released, true);
    const outside = Buffer.zeros("f32", [2]);
    const inner = tidy(() => Buffer.zeros("f32", [2]));
    assert.equal(inner.released, false);
    assert.equal(outside.released, false);
    inner.release();
    outside.release();
  });

  it("keep() and isBufferOwner() of a value that traps when read are refused with a typed error (isBufferOwner answers false)", () => {
    const b = Buffer.zeros("f32", [2]);
    assert.equal(isBufferOwner(trapObject()), false);
    tidy(() => {
      const inner = Buffer.zeros("f32", [2]);
      assert.throws(() => keep(trapObject() as never), InvalidArgumentError);
      assert.equal(inner.released, false);
    });
    assert.equal(b.released, false);
    b.release();
  });
});

describe("storage ninth review: hostile shapes, strides and offsets (held)", () => {
  it("shapes and strides whose products pass 2^53 are refused with a ShapeError naming them; 2^31 elements are fine", () => {
    for (
      const [shape, strides, offset] of [
        [[2 ** 27, 2 ** 27], undefined, 0],
        [[2 ** 30, 2 ** 30, 0], undefined, 0],
        [[0, 2 ** 30, 2 ** 30], undefined, 0],
        [[3], [2 ** 52], 0],
        [[2], [2 ** 53], 0],
        [[3], [1], 2 ** 53 - 2],
        [[3], [-1], 0],
      ] as [number[], number[] | undefined, number][]
    ) {
      assert.throws(
        () => new BufferView(shape, { strides, offset }),
        (e) => e instanceof AllotError,
        JSON.stringify([shape, strides, offset]),
      );
    }
    const big = new BufferView([2 ** 31]);
    assert.equal(big.length, 2 ** 31);
    assert.equal(big.slice(0, { start: 2 ** 31 - 1 }).offset, 2 ** 31 - 1);
    const lazy = Buffer.lazy("u8", [2 ** 31]);
    assert.equal(lazy.length, 2 ** 31);
    lazy.release();
  });

  it("views of views keep their bytes after the base handle is released; a zero-size dim with a negative step is an empty view", () => {
    const base = Buffer.fromData("i16", [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
    const rev = base.slice(1, { step: -1 });
    const t = rev.transpose();
    base.release();
    assert.deepEqual([...t.toData()], [3, 6, 2, 5, 1, 4]);
    const empty = t.slice(0, { start: 1, stop: 1 }).slice(1, { step: -1 });
    assert.equal(empty.length, 0);
    assert.deepEqual([...empty.toData()], []);
    for (const b of [empty, t, rev]) b.release();
  });
});
