/**
 * Adversarial tests of `@allot/storage` from the public API outward: every
 * entry point gets the shared hostile-value table and must refuse each value
 * with a typed error, leaving the buffer's elements, the pool's stats and
 * the allocator's live count as they were.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Device, InvalidArgumentError } from "@allot/core";
import {
  AllocationStrategy,
  Buffer,
  BufferPool,
  BufferView,
  DynBuffer,
  ManagedBufferPool,
  Storage,
  tidy,
} from "./mod.ts";
import {
  assertRefused,
  type Hostile,
  hostileHandles,
  hostileNumbers,
  hostileObjects,
  HostileTally,
} from "../core/_test_hostile.ts";
import { FirstFitAllocator } from "../core/_test_faults.ts";

const tally = new HostileTally();
const numbers = hostileNumbers();
const listsOf = (values: readonly Hostile[]): Hostile[] =>
  values.map((h) => ({ name: `[${h.name}]`, value: [h.value] }));

const { refuse } = tally;

describe("@allot/storage adversarial", () => {
  after(() => {
    console.log(
      `storage adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("Buffer factories refuse hostile dtypes, shapes and data, allocating nothing", () => {
    const allocator = new FirstFitAllocator(Device.cpu(), 1 << 16);
    const state = () => allocator.live.size;
    const opts = { allocator };
    const shapes = [
      ...hostileObjects().filter((h) => h.name !== "[]"),
      ...listsOf(numbers).filter((h) =>
        h.name !== "[[8]]" && h.name !== "[new Number(8)]"
      ),
      { name: "[2^26, 2^26, 2^26]", value: [2 ** 26, 2 ** 26, 2 ** 26] },
    ];
    for (const f of ["empty", "zeros"] as const) {
      refuse(
        `Buffer.${f}(shape)`,
        shapes,
        (v) => Buffer[f]("f32", v as number[], opts),
        { snapshot: state },
      );
      refuse(
        `Buffer.${f}(dtype)`,
        [...hostileObjects(), { name: '"float32"', value: "float32" }],
        (v) => Buffer[f](v as "f32", [2], opts),
        { snapshot: state },
      );
    }
    refuse(
      "Buffer.fromData(data)",
      [
        ...hostileObjects().filter((h) =>
          h.name !== "[]" && h.name !== "trap proxy"
        ),
        { name: "[1n]", value: [1n] },
        { name: "[1, Symbol()]", value: [1, Symbol("x")] },
        { name: "BigInt64Array", value: new BigInt64Array(2) },
        { name: "DataView", value: new DataView(new ArrayBuffer(4)) },
        { name: '"abc"', value: "abc" },
      ],
      (v) => Buffer.fromData("f32", v as number[], opts),
      { snapshot: state },
    );
    refuse(
      "Buffer.fromData(shape)",
      [...shapes, { name: "[3] for 2 elements", value: [3] }].filter((h) =>
        h.value != null
      ),
      (v) => Buffer.fromData("f32", [1, 2], { shape: v as number[], ...opts }),
      { snapshot: state },
    );
  });

  it("Buffer view and element methods refuse hostile axes, indices and values, changing nothing", () => {
    const b = Buffer.fromData("f32", [1, 2, 3, 4, 5, 6], { shape: [2, 3] });
    const state = () => [...b.toData()];
    const axes = [...numbers, { name: "2", value: 2 }, {
      name: "-3",
      value: -3,
    }]
      .filter((h) => h.value != null && h.name !== "-1");
    refuse("Buffer.slice(dim)", axes, (v) => b.slice(v as number), {
      snapshot: state,
    });
    refuse(
      "Buffer.slice(step)",
      [...numbers, { name: "0", value: 0 }].filter((h) =>
        h.value !== undefined && h.value !== null && h.name !== "-1"
      ),
      (v) => b.slice(0, { step: v as number }),
      { snapshot: state },
    );
    refuse("Buffer.transpose()", axes, (v) => b.transpose(v as number, 0), {
      snapshot: state,
    });
    refuse(
      "Buffer.unsqueeze()",
      [...axes.filter((h) => h.name !== "2" && h.name !== "-3"), {
        name: "4",
        value: 4,
      }, { name: "-4", value: -4 }],
      (v) => b.unsqueeze(v as number),
      { snapshot: state },
    );
    refuse("Buffer.squeeze()", axes, (v) => b.squeeze(v as number), {
      snapshot: state,
    });
    refuse(
      "Buffer.permute()",
      [...hostileObjects(), ...listsOf(numbers), {
        name: "[0, 0]",
        value: [0, 0],
      }],
      (v) => b.permute(v as number[]),
      { snapshot: state },
    );
    refuse(
      "Buffer.reshape()",
      [
        ...hostileObjects(),
        ...listsOf(numbers).filter((h) => h.name !== "[-1]"),
        {
          name: "[4]",
          value: [4],
        },
      ],
      (v) => b.reshape(v as number[]),
      { snapshot: state },
    );
    refuse(
      "Buffer.broadcastTo()",
      [...hostileObjects(), ...listsOf(numbers), {
        name: "[3, 3]",
        value: [3, 3],
      }],
      (v) => b.broadcastTo(v as number[]),
      { snapshot: state },
    );
    const indices = [
      ...hostileObjects(),
      ...numbers.map((h) => ({ name: `[0, ${h.name}]`, value: [0, h.value] })),
      { name: "[2, 0]", value: [2, 0] },
      { name: "[0]", value: [0] },
    ];
    refuse("Buffer.get()", indices, (v) => b.get(v as number[]), {
      snapshot: state,
    });
    refuse("Buffer.set(indices)", indices, (v) => b.set(v as number[], 9), {
      snapshot: state,
    });
    refuse(
      "Buffer.set(value)",
      [{ name: "8n", value: 8n }, { name: "Symbol()", value: Symbol("x") }],
      (v) => b.set([0, 0], v as number),
      { snapshot: state },
    );
    refuse(
      "Buffer.fill()",
      [{ name: "8n", value: 8n }, { name: "Symbol()", value: Symbol("x") }],
      (v) => b.fill(v as number),
      { snapshot: state },
    );
    const other = Buffer.zeros("f32", [3, 2]);
    const i32 = Buffer.zeros("i32", [2, 3]);
    const gone = Buffer.zeros("f32", [2, 3]);
    gone.release();
    refuse(
      "Buffer.copyFrom()",
      hostileHandles({
        otherInstance: () => other,
        stale: () => gone,
        foreign: () => i32,
        lookalike: () => ({ shape: [2, 3], dtype: "f32" }),
      }),
      (v) => b.copyFrom(v as Buffer<"f32">),
      { snapshot: state },
    );
    refuse(
      "Buffer.withView()",
      [...hostileObjects(), {
        name: "a view past the storage",
        value: new BufferView([4, 4]),
      }],
      (v) => b.withView(v as BufferView),
      { snapshot: state },
    );
    other.release();
    i32.release();
    b.release();
    for (
      const [name, call] of [
        ["toData", () => b.toData()],
        ["get", () => b.get([0, 0])],
        ["slice", () => b.slice(0)],
        ["clone", () => b.clone()],
        ["release", () => b.release()],
      ] as const
    ) {
      assertRefused(`Buffer.${name}() after release`, call);
      tally.add(`Buffer.${name}() after release`, { calls: 1 });
    }
  });

  it("Storage.allocate() and resize() refuse hostile sizes, changing nothing", () => {
    const allocator = new FirstFitAllocator(Device.cpu(), 1 << 16);
    refuse(
      "Storage.allocate()",
      numbers,
      (v) => Storage.allocate(v as number, { allocator }),
      { snapshot: () => allocator.live.size },
    );
    const s = Storage.allocate(16, { allocator, resizable: true });
    const state = () => [allocator.live.size, s.target.data.byteLength];
    refuse(
      "Storage.resize()",
      numbers,
      (v) => s.target.resize(v as number),
      { snapshot: state },
    );
    s.release();
  });

  it("BufferPool and ManagedBufferPool refuse hostile sizes, options and foreign blocks, changing nothing", () => {
    const allocator = new FirstFitAllocator(Device.cpu(), 1 << 16);
    const pool = new BufferPool(allocator, { maxFreeBytes: 1024 });
    const other = new BufferPool(allocator);
    const a = pool.acquire(100);
    const b = pool.acquire(10);
    pool.recycle(b);
    const state = () => [JSON.stringify(pool.stats()), allocator.live.size];
    refuse(
      "BufferPool.acquire()",
      [...numbers, { name: "2^52+1", value: 2 ** 52 + 1 }],
      (v) => pool.acquire(v as number),
      { snapshot: state },
    );
    refuse(
      "BufferPool.recycle()",
      hostileHandles({
        otherInstance: () => other.acquire(8),
        stale: () => b,
        foreign: () => allocator.allocate(8),
      }),
      (v) => pool.recycle(v as typeof a),
      { snapshot: state },
    );
    refuse(
      "new BufferPool(allocator)",
      hostileObjects(),
      (v) => new BufferPool(v as typeof allocator),
    );
    refuse(
      "new BufferPool(options.maxFreeBytes)",
      numbers.filter((h) =>
        h.value !== undefined && h.value !== null && h.name !== "Infinity"
      ),
      (v) => new BufferPool(allocator, { maxFreeBytes: v as number }),
    );
    refuse(
      "new BufferPool(options.strategy)",
      hostileObjects().filter((h) => h.value !== undefined && h.value !== null),
      (v) =>
        new BufferPool(allocator, {
          strategy: v as ReturnType<typeof AllocationStrategy.exact>,
        }),
    );
    const managed = new ManagedBufferPool(allocator);
    refuse(
      "ManagedBufferPool.allocate()",
      numbers,
      (v) => managed.allocate(v as number),
      { snapshot: () => JSON.stringify(managed.stats()) },
    );
    refuse(
      "ManagedBufferPool.alloc(shape)",
      listsOf(numbers).filter((h) =>
        h.name !== "[[8]]" && h.name !== "[new Number(8)]"
      ),
      (v) => managed.alloc("f32", v as number[]),
      { snapshot: () => JSON.stringify(managed.stats()) },
    );
    managed.dispose();
    assertRefused(
      "ManagedBufferPool.allocate() after dispose",
      () => managed.allocate(8),
    );
    pool.recycle(a);
    pool.cleanup();
  });

  it("AllocationStrategy refuses hostile sizes and never reserves less than asked", () => {
    for (
      const s of [
        AllocationStrategy.exact(),
        AllocationStrategy.padded(64),
        AllocationStrategy.pooled(),
      ]
    ) {
      refuse(
        `AllocationStrategy.${s.kind}().reserve()`,
        numbers,
        (v) => s.reserve(v as number),
      );
      for (
        const n of [2 ** 40 + 1, 2 ** 50 - 1, 2 ** 50 + 1, 2 ** 52 - 7, 2 ** 52]
      ) {
        const r = s.reserve(n);
        assert.ok(
          Number.isSafeInteger(r) && r >= n,
          `${s.kind} reserved ${r} for ${n}`,
        );
      }
    }
    refuse(
      "AllocationStrategy.pooled().reserve() above 2^52",
      [{ name: "2^52+1", value: 2 ** 52 + 1 }, {
        name: "2^53-1",
        value: 2 ** 53 - 1,
      }],
      (v) => AllocationStrategy.pooled().reserve(v as number),
      { error: InvalidArgumentError },
    );
    refuse(
      "AllocationStrategy.padded()",
      [...numbers, { name: "48", value: 48 }, { name: "2^31", value: 2 ** 31 }],
      (v) => AllocationStrategy.padded(v as number),
    );
    refuse(
      "AllocationStrategy.pooled(minByteLength)",
      [...numbers, { name: "48", value: 48 }].filter((h) =>
        h.value !== undefined && h.value !== null
      ),
      (v) => AllocationStrategy.pooled({ minByteLength: v as number }),
    );
  });

  it("DynBuffer and tidy() refuse hostile arguments", () => {
    refuse(
      "new DynBuffer()",
      hostileObjects(),
      (v) => new DynBuffer(v as Buffer<"f32">),
    );
    const d = new DynBuffer(Buffer.zeros("f32", [2]));
    refuse(
      "DynBuffer.is()",
      [...hostileObjects(), {
        name: '"float"',
        value: "float",
      }].filter((h) => h.name !== '"abc"'),
      (v) => {
        const r = d.is(v as "f32");
        if (!r) throw new InvalidArgumentError("not", { name: "x", value: v });
      },
    );
    d.release();
    refuse(
      "tidy()",
      hostileObjects().filter((h) => typeof h.value !== "function"),
      (v) => tidy(v as () => void),
    );
  });
});
