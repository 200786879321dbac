/**
 * Outside-in review of `@allot/storage`, part two: what the first
 * adversarial file (`storage_adversarial_test.ts`) does not cover. Values
 * that lie (proxies answering differently on the second read, array-likes
 * whose length changes, typed-array subclasses, look-alike views, buffers
 * and pointers), options that are not objects or booleans, collaborators
 * that are not what they claim, and a fast-check model that writes and
 * copies through random strided views (both `ArrayBuffer` and
 * `WebAssembly.Memory` storages, so the JS and WebAssembly kernels run) and
 * checks every byte of every storage, the gaps between them included.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllotError,
  ContractViolationError,
  DataPtr,
  Device,
  IntrusivePtr,
  InvalidArgumentError,
  OutOfMemoryError,
} from "@allot/core";
import {
  alignedStorageLength,
  alignedStrides,
  ArrayBufferAllocator,
  broadcastShapes,
  Buffer,
  type BufferOwner,
  BufferPool,
  BufferView,
  columnMajorStrides,
  type Dtype,
  dtypeInfo,
  dtypeOf,
  DynBuffer,
  keep,
  ManagedBufferPool,
  ownedBuffers,
  rowMajorStrides,
  ShapeError,
  Storage,
  tidy,
} from "./mod.ts";
import {
  assertRefused,
  type Hostile,
  hostileObjects,
  HostileTally,
} from "../core/_test_hostile.ts";
import { FirstFitAllocator } from "../core/_test_faults.ts";
import { type FakeBackend, WasmBumpAllocator } from "./_test_allocators.ts";
import * as M from "./_test_model.ts";

const tally = new HostileTally();
const { refuse } = tally;

/** A proxy over `values` whose index `at` answers `later` from its second read on. */
function lyingArray(values: number[], at: number, later: unknown): number[] {
  let reads = 0;
  return new Proxy(values, {
    get(target, key, receiver) {
      if (key === String(at) && reads++ > 0) return later;
      return Reflect.get(target, key, receiver);
    },
  });
}

/** Options bags that are not objects (undefined is the default: skipped). */
const badOptions = hostileObjects().filter((h) =>
  h.value === null || (typeof h.value !== "object" &&
    typeof h.value !== "function" && h.value !== undefined)
);

describe("@allot/storage hostile views and collaborators", () => {
  after(() => {
    console.log(
      `storage hostile views: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("BufferView, its static makers and the stride helpers read a shape, strides and axes once", () => {
    // Validated [2], then [-5]: the view must keep what was validated.
    const v = new BufferView(lyingArray([2], 0, -5));
    assert.deepEqual(v.shape, [2]);
    assert.equal(v.length, 2);
    const s = new BufferView([4], { strides: lyingArray([1], 0, -1000) });
    assert.deepEqual(s.strides, [1]);
    assert.equal(s.minIndex, 0);
    assert.deepEqual(broadcastShapes([lyingArray([2], 0, 3)]), [2]);
    assert.equal(alignedStorageLength(lyingArray([2], 0, -5), 4), 2);
    assert.deepEqual(BufferView.fortran(lyingArray([2, 3], 1, 1e6)).shape, [
      2,
      3,
    ]);
    // permute: validated [0, 1], then [1, 1] would read outside the storage.
    const p = new BufferView([2, 3]).permute(lyingArray([0, 1], 1, 0));
    assert.deepEqual([p.shape, p.strides], [[2, 3], [3, 1]]);
    using b = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
    using q = b.permute(lyingArray([1, 0], 0, 0));
    assert.deepEqual([...q.toData()], [1, 4, 2, 5, 3, 6]);
  });

  it("BufferView refuses options, offsets and peers that are not what they claim", () => {
    refuse(
      "new BufferView(shape, options)",
      badOptions,
      (o) => new BufferView([2], o as object),
    );
    refuse(
      "BufferView.slice(dim, options)",
      badOptions,
      (o) => new BufferView([2]).slice(0, o as object),
    );
    const v = new BufferView([2, 3]);
    const lookalike = {
      shape: [2, 3],
      strides: [3, 1],
      offset: 0,
      length: 6,
    };
    for (const m of ["equals", "sameShape"] as const) {
      refuse(
        `BufferView.${m}()`,
        [...hostileObjects(), {
          name: "look-alike",
          value: lookalike,
        }, {
          name: "Object.create(BufferView.prototype)",
          value: Object.create(BufferView.prototype),
        }],
        (o) => v[m](o as BufferView),
        { error: InvalidArgumentError },
      );
    }
    // -0 is a valid offset, stored as 0.
    assert.ok(Object.is(new BufferView([2], { offset: -0 }).offset, 0));
    assert.ok(Object.is(BufferView.contiguous([2], -0).offset, 0));
  });

  it("stride helpers refuse layouts whose strides or storage exceed 2^53", () => {
    for (
      const [name, call] of [
        ["rowMajorStrides", () => rowMajorStrides([0, 2 ** 40, 2 ** 40])],
        ["columnMajorStrides", () => columnMajorStrides([2 ** 40, 2 ** 40, 0])],
        ["new BufferView", () => new BufferView([0, 2 ** 27, 2 ** 27])],
        ["alignedStrides", () => alignedStrides([3, 1], 2 ** 52)],
        ["alignedStorageLength", () => alignedStorageLength([3, 1], 2 ** 52)],
        [
          "alignedStorageLength (zero row)",
          () => alignedStorageLength([0, 2 ** 30, 2 ** 30], 1),
        ],
      ] as const
    ) {
      assertRefused(name, call, { error: ShapeError });
      tally.add(name, { calls: 1 });
    }
    // At the limit: fine.
    assert.deepEqual(rowMajorStrides([0, 2 ** 26, 2 ** 26]), [
      2 ** 52,
      2 ** 26,
      1,
    ]);
    assert.equal(
      alignedStorageLength([1, 1], 2 ** 52),
      2 ** 52,
    );
  });

  it("dtypeInfo names only own dtypes; dtypeOf goes by the typed array's brand", () => {
    refuse(
      "dtypeInfo()",
      ["toString", "__proto__", "constructor", "hasOwnProperty", "valueOf"]
        .map((k) => ({ name: k, value: k })).concat([{
          name: "{ toString: () => 'f32' }",
          value: { toString: () => "f32" } as unknown as string,
        }]),
      (d) => dtypeInfo(d as Dtype),
      { error: InvalidArgumentError },
    );
    refuse(
      "Buffer.empty(dtype)",
      ["toString", "__proto__", "constructor"].map((k) => ({
        name: k,
        value: k,
      })),
      (d) => Buffer.empty(d as Dtype, [2]),
      { error: InvalidArgumentError },
    );
    class Lying extends Float32Array {
      static override readonly BYTES_PER_ELEMENT = 1;
    }
    assert.equal(dtypeOf(new Lying(2)), "f32");
    assert.equal(dtypeOf(Object.create(Float32Array.prototype)), undefined);
    assert.equal(dtypeOf(new Proxy(new Float32Array(2), {})), undefined);
    assert.equal(
      dtypeOf({ [Symbol.toStringTag]: "Float32Array", length: 2 }),
      undefined,
    );
    assert.equal(dtypeOf(new BigInt64Array(1)), undefined);
    assert.equal(dtypeOf(new DataView(new ArrayBuffer(4))), undefined);
  });

  it("Buffer.fromData reads the length once and copies exactly that many elements", () => {
    const allocator = new FirstFitAllocator(Device.cpu(), 1 << 16);
    let reads = 0;
    const growing = {
      get length() {
        return reads++ === 0 ? 2 : 1000;
      },
      0: 1,
      1: 2,
    };
    using a = Buffer.fromData("f32", growing, { allocator });
    assert.deepEqual([...a.toData()], [1, 2]);
    reads = 0;
    const shrinking = {
      get length() {
        return reads++ === 0 ? 4 : 1;
      },
      0: 1,
      1: 2,
      2: 3,
      3: 4,
    };
    // Every element is written: none is left as the allocator's junk.
    using b = Buffer.fromData("i32", shrinking, { allocator });
    assert.deepEqual([...b.toData()], [1, 2, 3, 4]);
    class LongLie extends Float32Array {
      override get length(): number {
        return 1000;
      }
    }
    using c = Buffer.fromData("f32", new LongLie([5, 6]), { allocator });
    assert.deepEqual([...c.toData()], [5, 6]);
    assert.equal(c.length, 2);
    // Elements that turn into symbols after the scan: typed, nothing kept.
    const live = allocator.live.size;
    let turns = 0;
    const turning = {
      length: 2,
      get 0() {
        return turns++ === 0 ? 1 : Symbol("late");
      },
      1: 2,
    };
    assertRefused(
      "fromData(element turns into a Symbol)",
      () => Buffer.fromData("f32", turning as ArrayLike<number>, { allocator }),
      { error: InvalidArgumentError, snapshot: () => allocator.live.size },
    );
    assert.equal(allocator.live.size, live);
    tally.add("Buffer.fromData(lying data)", { calls: 4 });
  });

  it("Buffer.fromData refuses detached, shrunk and proxied typed arrays with typed errors", () => {
    const allocator = new FirstFitAllocator(Device.cpu(), 1 << 16);
    const detached = () => {
      const ab = new ArrayBuffer(8);
      const f = new Float32Array(ab);
      structuredClone(ab, { transfer: [ab] });
      return f;
    };
    const shrunk = () => {
      const ab = new ArrayBuffer(16, { maxByteLength: 32 });
      const f = new Float32Array(ab, 0, 4);
      ab.resize(4);
      return f;
    };
    refuse(
      "Buffer.fromData(data)",
      [
        { name: "detached Float32Array", value: detached() },
        { name: "Float32Array over a shrunk buffer", value: shrunk() },
        {
          name: "proxy of a Float32Array",
          value: new Proxy(new Float32Array(2), {}),
        },
        { name: "BigUint64Array", value: new BigUint64Array(2) },
      ],
      (d) => Buffer.fromData("f32", d as Float32Array, { allocator }),
      { snapshot: () => allocator.live.size, error: InvalidArgumentError },
    );
    // A SharedArrayBuffer source is fine.
    const shared = new Float32Array(new SharedArrayBuffer(8));
    shared[1] = 7;
    using s = Buffer.fromData("f32", shared, { allocator });
    assert.deepEqual([...s.toData()], [0, 7]);
  });

  it("Buffer and Storage constructors and factories refuse look-alikes, non-objects and non-booleans, allocating nothing", () => {
    const allocator = new FirstFitAllocator(Device.cpu(), 1 << 16);
    const state = () => allocator.live.size;
    const st = Storage.allocate(16, { allocator });
    const gone = Storage.allocate(16, { allocator });
    gone.release();
    const fakeView = {
      requiredLength: 0,
      length: 1000,
      shape: [1000],
      strides: [1],
      offset: 0,
      isContiguous: true,
      maxIndex: -1,
    };
    refuse(
      "new Buffer(storage, { view })",
      [
        { name: "look-alike view", value: fakeView },
        {
          name: "Object.create(BufferView.prototype)",
          value: Object.create(BufferView.prototype),
        },
        { name: "view past the storage", value: new BufferView([5]) },
        ...hostileObjects().filter((h) => h.value !== undefined),
      ],
      (view) => new Buffer(st, { dtype: "f32", view: view as BufferView }),
      { snapshot: state },
    );
    assert.equal(
      new Buffer(st.clone(), { dtype: "f32", view: new BufferView([4]) })
        .release(),
      undefined,
    );
    refuse(
      "new Buffer(storage)",
      [
        ...hostileObjects(),
        { name: "released pointer", value: gone },
        { name: "Storage itself", value: st.target },
        {
          name: "Object.create(IntrusivePtr.prototype)",
          value: Object.create(IntrusivePtr.prototype),
        },
      ],
      (p) => new Buffer(p as typeof st, { dtype: "f32" }),
      { snapshot: state },
    );
    refuse(
      "new Buffer(storage, options)",
      hostileObjects().filter((h) => h.name !== "{}" && h.name !== "[]"),
      (o) => new Buffer(st, o as { dtype: "f32" }),
      { snapshot: state },
    );
    const backends = [
      { name: "5", value: 5 },
      { name: "null", value: null },
      { name: "{}", value: {} },
      { name: '{ name: "x" }', value: { name: "x" } },
    ];
    refuse(
      "new Buffer(storage, { backend })",
      backends.filter((h) => h.value !== null),
      (b) => new Buffer(st, { dtype: "f32", backend: b as FakeBackend }),
      { snapshot: state, error: InvalidArgumentError },
    );
    refuse(
      "Buffer.empty(options.backend)",
      backends,
      (b) => Buffer.empty("f32", [2], { allocator, backend: b as FakeBackend }),
      { snapshot: state, error: InvalidArgumentError },
    );
    for (const f of ["empty", "lazy", "zeros"] as const) {
      refuse(
        `Buffer.${f}(options)`,
        badOptions,
        (o) => Buffer[f]("f32", [2], o as object),
        { snapshot: state },
      );
    }
    refuse(
      "Buffer.filled(options)",
      [...badOptions, { name: "undefined", value: undefined }],
      (o) => Buffer.filled("f32", [2], o as { value: number }),
      { snapshot: state },
    );
    refuse(
      "Buffer.fromData(options)",
      badOptions,
      (o) => Buffer.fromData("f32", [1], o as object),
      { snapshot: state },
    );
    refuse(
      "Storage.allocate(options)",
      [
        ...badOptions,
        { name: "{ allocator: {} }", value: { allocator: {} } },
        { name: "{ allocator: 5 }", value: { allocator: 5 } },
        { name: "{ resizable: 1 }", value: { resizable: 1, allocator } },
        { name: '{ resizable: "no" }', value: { resizable: "no", allocator } },
      ],
      (o) => Storage.allocate(8, o as object),
      { snapshot: state, error: InvalidArgumentError },
    );
    refuse(
      "Storage.lazy(options)",
      [...badOptions, { name: "{ resizable: 1 }", value: { resizable: 1 } }],
      (o) => Storage.lazy(8, o as object),
      { error: InvalidArgumentError },
    );
    const lying = {
      memory: new ArrayBuffer(4),
      byteOffset: 0,
      byteLength: 1000,
      device: Device.cpu(),
      released: false,
      release() {},
    };
    refuse(
      "new Storage(data)",
      [
        ...hostileObjects(),
        { name: "DataPtr look-alike of 1000 bytes over 4", value: lying },
        {
          name: "Object.create(DataPtr.prototype)",
          value: Object.create(DataPtr.prototype),
        },
      ],
      (d) => new Storage(d as DataPtr),
      { snapshot: state },
    );
    refuse(
      "new Storage(data, options)",
      [...badOptions, { name: "{ resizable: 1 }", value: { resizable: 1 } }],
      (o) => new Storage(allocator.allocate(8), o as object),
      { error: InvalidArgumentError },
    );
    using b = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
    refuse(
      "Buffer.slice(dim, options)",
      badOptions,
      (o) => b.slice(0, o as object),
      { snapshot: state },
    );
    using t = b.transpose();
    refuse(
      "Buffer.contiguous(options)",
      badOptions,
      (o) => t.contiguous(o as object),
      { snapshot: () => [state(), b.isStorageUnique] },
    );
    refuse(
      "Buffer.sharesStorageWith()",
      hostileObjects().filter((h) =>
        h.name !== "{}" && h.name !== "[]" && h.name !== "trap proxy"
      ),
      (o) => b.sharesStorageWith(o as Buffer),
      { error: InvalidArgumentError },
    );
    refuse(
      "new DynBuffer()",
      [{
        name: "Object.create(Buffer.prototype)",
        value: Object.create(Buffer.prototype),
      }],
      (o) => new DynBuffer(o as Buffer),
      { error: InvalidArgumentError },
    );
    refuse(
      "Buffer.copyFrom()",
      [{
        name: "Object.create(Buffer.prototype)",
        value: Object.create(Buffer.prototype),
      }],
      (o) => b.copyFrom(o as Buffer<"f32">),
      { error: InvalidArgumentError, snapshot: () => [...b.toData()] },
    );
    refuse(
      "Buffer.withView()",
      [{
        name: "Object.create(BufferView.prototype)",
        value: Object.create(BufferView.prototype),
      }, { name: "look-alike view", value: fakeView }],
      (o) => b.withView(o as BufferView),
      { error: InvalidArgumentError, snapshot: () => [...b.toData()] },
    );
    st.release();
  });

  it("set() and fill() convert a value once and refuse values that convert to a symbol", () => {
    using b = Buffer.fromData("f32", [1, 2, 3, 4]);
    const state = () => [...b.toData()];
    const values: Hostile[] = [
      {
        name: "valueOf returns a Symbol",
        value: { valueOf: () => Symbol("x") },
      },
      {
        name: "Symbol.toPrimitive returns a Symbol",
        value: { [Symbol.toPrimitive]: () => Symbol("x") },
      },
    ];
    refuse("Buffer.set(value)", values, (v) => b.set([0], v as number), {
      snapshot: state,
      error: InvalidArgumentError,
    });
    refuse("Buffer.fill(value)", values, (v) => b.fill(v as number), {
      snapshot: state,
      error: InvalidArgumentError,
    });
    let calls = 0;
    b.fill({ valueOf: () => ++calls } as unknown as number);
    assert.deepEqual([calls, ...b.toData()], [1, 1, 1, 1, 1]);
  });

  it("pools refuse non-boolean strict, bad backends and bad allocators, changing nothing", () => {
    const allocator = new ArrayBufferAllocator();
    const strictValues = [
      { name: "1", value: 1 },
      { name: '"yes"', value: "yes" },
      { name: '"false"', value: "false" },
      { name: "null", value: null },
      { name: "{}", value: {} },
      { name: "Symbol()", value: Symbol("x") },
    ];
    refuse(
      "new BufferPool(options.strict)",
      strictValues,
      (s) => new BufferPool(allocator, { strict: s as boolean }),
      { error: InvalidArgumentError },
    );
    refuse(
      "new ManagedBufferPool(options.strict)",
      strictValues,
      (s) => new ManagedBufferPool(allocator, { strict: s as boolean }),
      { error: InvalidArgumentError },
    );
    refuse(
      "new ManagedBufferPool(allocator)",
      hostileObjects(),
      (a) => new ManagedBufferPool(a as ArrayBufferAllocator),
    );
    refuse(
      "new ManagedBufferPool(options.backend)",
      [{ name: "5", value: 5 }, { name: "{}", value: {} }],
      (b) => new ManagedBufferPool(allocator, { backend: b as FakeBackend }),
      { error: InvalidArgumentError },
    );
    const pool = new ManagedBufferPool(allocator);
    refuse(
      "ManagedBufferPool.alloc(options)",
      [...badOptions, {
        name: "{ backend: {} }",
        value: { backend: {} },
      }],
      (o) => pool.alloc("f32", [2], o as object),
      { snapshot: () => JSON.stringify(pool.stats()) },
    );
    refuse(
      "ManagedBufferPool.alloc(dtype)",
      [{ name: '"toString"', value: "toString" }],
      (d) => pool.alloc(d as "f32", [2]),
      { snapshot: () => JSON.stringify(pool.stats()) },
    );
    pool.dispose();
  });

  it("allocators that return junk, their own live block or re-enter are refused with ContractViolationError, changing nothing", () => {
    const inner = new ArrayBufferAllocator();
    let mode: "ok" | "junk" | "same" | "reenter" = "ok";
    let held: DataPtr | undefined;
    let depth = 0;
    const liar = {
      device: Device.cpu(),
      allocate(n: number): DataPtr {
        if (mode === "junk") return {} as DataPtr;
        if (mode === "same" && held !== undefined) return held;
        if (mode === "reenter" && depth++ < 1) {
          // Re-enters the storage API from inside allocate().
          Storage.allocate(4, { allocator: liar }).release();
        }
        return (held = inner.allocate(n));
      },
      copyData: inner.copyData.bind(inner),
    } as unknown as ArrayBufferAllocator;
    const s = Storage.allocate(8, { allocator: liar, resizable: true });
    const first = s.target.data;
    new Uint8Array(first.memory as ArrayBuffer).set([1, 2, 3, 4, 5, 6, 7, 8]);
    const state = () => [
      inner.liveBytes,
      s.target.data === first,
      [...new Uint8Array(first.memory as ArrayBuffer)],
    ];
    mode = "junk";
    for (
      const [name, call] of [
        ["Storage.allocate", () => Storage.allocate(8, { allocator: liar })],
        ["Storage.resize", () => s.target.resize(16)],
        ["Storage.reset", () => s.target.reset()],
        [
          "lazy first access",
          () => Storage.lazy(8, { allocator: liar }).target.data,
        ],
      ] as const
    ) {
      assertRefused(`${name} (allocator returns {})`, call, {
        snapshot: state,
        error: ContractViolationError,
      });
      tally.add(`${name} (lying allocator)`, { calls: 1 });
    }
    mode = "same";
    held = first;
    assertRefused(
      "Storage.resize (allocator returns the live block)",
      () => s.target.resize(16),
      { snapshot: state },
    );
    assertRefused(
      "Storage.reset (allocator returns the live block)",
      () => s.target.reset(),
      { snapshot: state },
    );
    assert.equal(first.released, false);
    mode = "reenter";
    const r = Storage.allocate(8, { allocator: liar });
    assert.equal(r.target.byteLength, 8);
    r.release();
    s.release();
    assert.equal(inner.liveBytes, 0);
  });

  it("ArrayBufferAllocator turns a refused ArrayBuffer into OutOfMemoryError, also for lazy storages", () => {
    const allocator = new ArrayBufferAllocator();
    assertRefused(
      "ArrayBufferAllocator.allocate(2^52)",
      () => allocator.allocate(2 ** 52),
      { error: OutOfMemoryError, snapshot: () => allocator.liveBytes },
    );
    const lazy = Storage.lazy(2 ** 52, { allocator });
    assertRefused("lazy storage's first access", () => lazy.target.data, {
      error: OutOfMemoryError,
      snapshot: () => allocator.liveBytes,
    });
    assert.equal(lazy.target.isAllocated, false);
    lazy.release();
    tally.add("ArrayBufferAllocator.allocate", { calls: 2 });
  });

  it("views of released storages, tidy scopes that throw, and nested tidy keep the books straight", () => {
    const allocator = new FirstFitAllocator(Device.cpu(), 1 << 16);
    const live = () => allocator.live.size;
    const base = Buffer.fromData("f32", [1, 2, 3, 4], {
      shape: [2, 2],
      allocator,
    });
    const view = base.transpose();
    base.release();
    // The view keeps the storage alive and readable.
    assert.deepEqual([...view.toData()], [1, 3, 2, 4]);
    assert.equal(live(), 1);
    view.release();
    assert.equal(live(), 0);
    for (
      const [name, call] of [
        ["toData", () => view.toData()],
        ["transpose", () => view.transpose()],
        ["copyFrom", () => view.copyFrom(view)],
        ["contiguous", () => view.contiguous()],
        ["hostView", () => view.hostView()],
        ["fill", () => view.fill(1)],
      ] as const
    ) {
      assertRefused(`Buffer.${name}() of a released view`, call, {
        snapshot: live,
      });
      tally.add(`Buffer.${name}() of a released view`, { calls: 1 });
    }
    // A scope that throws releases what it made, nothing more.
    const outer = Buffer.zeros("f32", [4], { allocator });
    assert.throws(
      () =>
        tidy(() => {
          outer.slice(0, { step: 2 });
          Buffer.zeros("f32", [8], { allocator });
          throw new RangeError("boom");
        }),
      RangeError,
    );
    assert.equal(live(), 1);
    assert.ok(outer.isStorageUnique);
    // Nested: the inner result belongs to the outer scope, which returns it.
    let inner: Buffer<"f32"> | undefined;
    const kept = tidy(() => {
      inner = tidy(() => outer.reshape([2, 2]).transpose().contiguous());
      Buffer.zeros("f32", [3], { allocator });
      return inner;
    });
    assert.equal(kept, inner);
    assert.equal(live(), 2);
    assert.deepEqual([...kept.toData()], [0, 0, 0, 0]);
    kept.release();
    // Used after the scope released it: typed error.
    let escaped: Buffer<"f32"> | undefined;
    tidy(() => {
      escaped = outer.slice(0);
    });
    assertRefused("escaped tidy buffer", () => escaped!.toData());
    outer.release();
    assert.equal(live(), 0);
  });

  it("a storage whose ArrayBuffer is detached or shrunk under it refuses every access with a typed error", () => {
    const makers: [string, () => { storage: Storage; cut: () => void }][] = [
      ["shrunk resizable ArrayBuffer", () => {
        const ab = new ArrayBuffer(16, { maxByteLength: 64 });
        return {
          storage: new Storage(new DataPtr(ab, 0, 16, Device.cpu())),
          cut: () => ab.resize(4),
        };
      }],
      ["detached ArrayBuffer", () => {
        const ab = new ArrayBuffer(16);
        return {
          storage: new Storage(new DataPtr(ab, 0, 16, Device.cpu())),
          cut: () => void structuredClone(ab, { transfer: [ab] }),
        };
      }],
    ];
    for (const [name, make] of makers) {
      const { storage, cut } = make();
      const b = new Buffer(IntrusivePtr.make(storage), { dtype: "f32" });
      const other = Buffer.fromData("f32", [9, 8, 7, 6]);
      cut();
      for (
        const [what, call] of [
          ["toData", () => b.toData()],
          ["get", () => b.get([3])],
          ["set", () => b.set([0], 1)],
          ["hostView", () => b.hostView()],
          ["fill", () => b.fill(1)],
          ["copyFrom", () => b.copyFrom(other)],
          ["copy out", () => other.copyFrom(b)],
          ["stepped contiguous", () => b.slice(0, { step: 2 }).contiguous()],
          ["Storage.bytes", () => storage.bytes()],
        ] as const
      ) {
        assertRefused(`${name}: ${what}`, call, {
          snapshot: () => [...other.toData()],
        });
        tally.add(`${what} over a ${name}`, { calls: 1 });
      }
      b.release();
      other.release();
    }
  });

  it("a tidy() result whose owner protocol throws or lies closes the scope and releases what it made", () => {
    const allocator = new FirstFitAllocator(Device.cpu(), 1 << 16);
    const live = () => allocator.live.size;
    const owners: [string, () => unknown][] = [
      ["throws", () => {
        throw new RangeError("owner");
      }],
      ["returns 5", () => 5],
      ["returns null", () => null],
    ];
    for (const [name, owned] of owners) {
      assert.throws(
        () =>
          tidy(() => {
            Buffer.zeros("f32", [4], { allocator });
            return { [ownedBuffers]: owned };
          }),
        (e: unknown) => e instanceof AllotError,
        name,
      );
      assert.equal(live(), 0, `${name}: the scope's buffer was released`);
      // The scope is closed: a buffer made now belongs to no scope, and a
      // later scope neither releases it nor hands anything to a stale one.
      const outside = Buffer.zeros("f32", [1], { allocator });
      const back = tidy(() => Buffer.zeros("f32", [2], { allocator }));
      tidy(() => {});
      assert.equal(live(), 2, `${name}: no scope left open`);
      assert.equal(outside.released, false);
      outside.release();
      back.release();
      tally.add(`tidy() with an owner that ${name}`, { calls: 1 });
    }
    // keep() of such an owner: typed, and the scope's books unchanged.
    for (const [name, owned] of owners) {
      let inner: Buffer<"f32"> | undefined;
      assert.throws(
        () =>
          tidy(() => {
            inner = Buffer.zeros("f32", [1], { allocator });
            keep({ [ownedBuffers]: owned, inner } as unknown as BufferOwner);
          }),
        (e: unknown) => e instanceof AllotError,
        `keep: ${name}`,
      );
      assert.equal(inner?.released, true, `keep: ${name}`);
      tally.add(`keep() of an owner that ${name}`, { calls: 1 });
    }
  });

  it("copies between disjoint strided views of one storage move long runs exactly (same-buffer run path)", () => {
    for (const dtype of ["u8", "u16", "f32", "f64"] as const) {
      const n = 480;
      const model = Array.from({ length: n }, (_, i) => i % 251);
      using b = Buffer.fromData(dtype, model);
      // Rows of 60 (past the 48-element run threshold), disjoint ranges.
      using dst = b.withView(
        new BufferView([2, 60], { strides: [120, 1], offset: 5 }),
      );
      using src = b.withView(
        new BufferView([2, 60], { strides: [120, 1], offset: 250 }),
      );
      dst.copyFrom(src);
      for (let r = 0; r < 2; r++) {
        for (let c = 0; c < 60; c++) {
          model[5 + r * 120 + c] = model[250 + r * 120 + c];
        }
      }
      assert.deepEqual([...b.toData()], model, dtype);
    }
  });

  it("strided writes and copies through random views keep every byte of every storage as a plain model says (model-based)", () => {
    const dtypes = ["u8", "u16", "i32", "f32", "f64"] as const;
    const layout = fc.record({
      perm: fc.nat(),
      // Unit steps often: they make dense runs and transposes.
      steps: fc.array(
        fc.oneof(fc.constant(1), fc.integer({ min: -3, max: 3 })),
        {
          minLength: 3,
          maxLength: 3,
        },
      ),
      starts: fc.array(fc.oneof(fc.constant(0), fc.nat({ max: 3 })), {
        minLength: 3,
        maxLength: 3,
      }),
      storage: fc.nat({ max: 2 }),
      offset: fc.nat({ max: 5 }),
      broadcastDim: fc.integer({ min: -1, max: 2 }),
    });
    type Layout = typeof layout extends fc.Arbitrary<infer T> ? T : never;
    const op = fc.oneof(
      fc.record({ kind: fc.constant("copy"), dst: layout, src: layout }),
      fc.record({
        kind: fc.constant("fill"),
        dst: layout,
        value: fc.integer({ min: 0, max: 200 }),
      }),
      fc.record({ kind: fc.constant("contiguous"), src: layout }),
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...dtypes),
        fc.boolean(),
        fc.oneof(
          fc.array(fc.integer({ min: 1, max: 24 }), {
            minLength: 1,
            maxLength: 2,
          }),
          fc.array(fc.integer({ min: 1, max: 6 }), {
            minLength: 3,
            maxLength: 3,
          }),
          // Past one 64-element JS tile and the 256-element SIMD threshold.
          fc.array(fc.integer({ min: 60, max: 72 }), {
            minLength: 2,
            maxLength: 2,
          }),
        ),
        fc.array(op, { minLength: 1, maxLength: 6 }),
        (dtype, wasm, shape, ops) => {
          const rank = shape.length;
          // Parent extents: room for any step up to 3 and start up to 3.
          const parent = shape.map((n) => 3 * n + 3);
          const elements = M.count(parent) + 5;
          const wasmAllocator = new WasmBumpAllocator(4);
          const allocator = wasm ? wasmAllocator : new ArrayBufferAllocator();
          const storages = [0, 1, 2].map(() =>
            Buffer.empty(dtype, [elements], { allocator })
          );
          const models = storages.map((_, k) =>
            Array.from({ length: elements }, (_, i) => (i * 7 + k * 31) % 200)
          );
          storages.forEach((s, k) => s.hostView().set(models[k]));
          // Canary bytes between WebAssembly storages must never change.
          const mem = wasm
            ? new Uint8Array(wasmAllocator.memory.buffer)
            : undefined;
          const canary = mem?.slice();
          const made: Buffer[] = [];
          const build = (l: Layout, writable: boolean) => {
            const axes = permutationOf(rank, l.perm);
            const inverse = axes.map((_, i) => axes.indexOf(i));
            const steps = shape.map((_, d) =>
              l.steps[d] === 0 ? 1 : l.steps[d]
            );
            // The parent each slice takes from: exactly the shape for step 1
            // and start 0 (so rows merge into long runs), gaps otherwise.
            const par = shape.map((n, d) =>
              n * Math.abs(steps[d]) + l.starts[d]
            );
            // Contiguous over the permuted parent, then back to shape order.
            const permParent = axes.map((a) => par[a]);
            let view = BufferView.contiguous(permParent, l.offset).permute(
              inverse,
            );
            let model = M.permute(M.modelOf(permParent, l.offset), inverse);
            for (let d = 0; d < rank; d++) {
              const step = steps[d];
              const n = shape[d];
              const start = step > 0 ? l.starts[d] : par[d] - 1 - l.starts[d];
              const stop = start + step * n;
              const opts = { start, stop: stop < 0 ? -1 : stop, step };
              view = view.slice(d, opts);
              model = M.slice(model, d, opts.start, opts.stop, step);
            }
            if (!writable && l.broadcastDim >= 0 && l.broadcastDim < rank) {
              const d = l.broadcastDim;
              view = view.slice(d, { start: 0, stop: 1 }).broadcastTo(shape);
              model = M.broadcast(M.slice(model, d, 0, 1, 1), shape);
            }
            assert.deepEqual(view.shape, shape);
            const b = storages[l.storage].withView(view);
            made.push(b);
            return { b, model, k: l.storage };
          };
          for (const o of ops) {
            if (o.kind === "copy") {
              const dst = build(o.dst, true);
              const src = build(o.src, false);
              const values = src.model.data.map((i) => models[src.k][i]);
              dst.b.copyFrom(src.b as Buffer<typeof dtype>);
              dst.model.data.forEach((i, f) => (models[dst.k][i] = values[f]));
            } else if (o.kind === "fill") {
              const dst = build(o.dst, true);
              dst.b.fill(o.value);
              for (const i of dst.model.data) models[dst.k][i] = o.value;
            } else {
              const src = build(o.src, false);
              const packed = src.b.contiguous();
              made.push(packed);
              assert.deepEqual(
                [...packed.toData()],
                src.model.data.map((i) => models[src.k][i]),
              );
              assert.equal(packed.isContiguous, true);
            }
            storages.forEach((s, k) => {
              const got = s.hostView(), want = models[k];
              for (let i = 0; i < want.length; i++) {
                if (got[i] !== want[i]) {
                  assert.fail(
                    `storage ${k} element ${i}: ${got[i]}, model ${want[i]}`,
                  );
                }
              }
            });
            if (mem !== undefined && canary !== undefined) {
              const now = new Uint8Array(wasmAllocator.memory.buffer);
              const inside = new Uint8Array(now.length);
              for (const s of [...storages, ...made]) {
                const at = s.storage.data.byteOffset;
                inside.fill(1, at, at + s.storage.byteLength);
              }
              for (let i = 0; i < canary.length; i++) {
                if (!inside[i] && now[i] !== canary[i]) {
                  assert.fail(`byte ${i} outside every storage changed`);
                }
              }
            }
          }
          for (const b of made) b.release();
          for (const s of storages) s.release();
        },
      ),
      { numRuns: 150 },
    );
  });
});

/** The `k`-th permutation of `[0, n)` (any k: taken modulo n!). */
function permutationOf(n: number, k: number): number[] {
  const pool = Array.from({ length: n }, (_, i) => i);
  const out: number[] = [];
  for (let i = n; i > 0; i--) {
    const j = k % i;
    k = Math.floor(k / i);
    out.push(pool.splice(j, 1)[0]);
  }
  return out;
}
