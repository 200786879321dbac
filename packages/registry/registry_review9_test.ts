// The ownership registry from the outside (review 9): allocators whose
// `allocate` is a getter that answers differently on each read, throws, or
// re-enters the registry; and a fast-check model of arrays from a heap
// allocator, system and aligned memory with aliases, in which every live
// allocation carries a byte pattern checked after every operation, the stats
// equal a recount, and everything goes back to the heap at the end.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { type Allocator, AllotError } from "@allot/core";
import { CpuAllocator } from "@allot/cpu";
import { checkPattern, modelRuns, writePattern } from "../core/_test_faults.ts";
import { OwnershipRegistry, RegistryGuard, WorkspacePool } from "./mod.ts";

/** An allocator whose `allocate` getter answers `allocate` `good` times,
 * then something that is not a function. */
function flipping(inner: Allocator, good: number) {
  let reads = 0;
  return {
    get reads() {
      return reads;
    },
    get allocate() {
      return reads++ < good
        ? (n: number) => inner.allocate(n)
        : (5 as unknown as never);
    },
  };
}

function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

describe("OwnershipRegistry allocators (review 9)", () => {
  it("newArray() reads the allocator's allocate once: a getter that changes its answer is no TypeError", () => {
    const cpu = new CpuAllocator();
    using registry = new OwnershipRegistry();
    const allocator = flipping(cpu, 1);
    const a = registry.newArray("f32", 8, { allocator: allocator as never });
    assert.equal(allocator.reads, 1);
    assert.equal(a.length, 8);
    assert.equal(cpu.allocatedBytes, 32);
    registry.unregister(a);
    assert.equal(cpu.allocatedBytes, 0);
    // a getter that never answers a function: a typed refusal, nothing made
    const before = registry.stats();
    assert.throws(
      () =>
        registry.newArray("f32", 8, { allocator: flipping(cpu, 0) as never }),
      AllotError,
    );
    assert.deepEqual(registry.stats(), before);
  });

  it("WorkspacePool and RegistryGuard over such an allocator: one read per array, nothing left on a refusal", () => {
    const cpu = new CpuAllocator();
    using registry = new OwnershipRegistry();
    const allocator = flipping(cpu, 3);
    {
      using pool = new WorkspacePool(registry, "u8", 100, {
        ranks: 3,
        allocator: allocator as never,
      });
      assert.equal(pool.ranks, 3);
      assert.equal(allocator.reads, 3);
    }
    assert.equal(cpu.allocatedBytes, 0);
    const current = () => {
      const s = registry.stats();
      return [s.pointers, s.requestedBytes.current, s.reservedBytes.current];
    };
    const before = current();
    // the third read answers 5: the pool gives back the two arrays it took
    // (the running totals count them)
    assert.throws(
      () =>
        new WorkspacePool(registry, "u8", 100, {
          ranks: 3,
          allocator: flipping(cpu, 2) as never,
        }),
      AllotError,
    );
    assert.deepEqual(current(), before);
    assert.equal(cpu.allocatedBytes, 0);
    {
      using guard = new RegistryGuard(registry, "f64", 4, {
        allocator: flipping(cpu, 1) as never,
      });
      assert.equal(guard.array.length, 4);
    }
    assert.equal(cpu.allocatedBytes, 0);
  });

  it("an allocator that throws or re-enters the registry leaves it consistent", () => {
    const cpu = new CpuAllocator();
    using registry = new OwnershipRegistry();
    const boom = new Error("boom");
    const before = registry.stats();
    assert.throws(
      () =>
        registry.newArray("f32", 4, {
          allocator: {
            allocate() {
              throw boom;
            },
          } as never,
        }),
      (e: unknown) => e === boom,
    );
    assert.deepEqual(registry.stats(), before);
    let inner: Float32Array | undefined;
    const reentrant = {
      allocate(n: number) {
        inner = registry.newArray("f32", 2, { allocator: cpu });
        return cpu.allocate(n);
      },
    };
    const outer = registry.newArray("f32", 4, {
      allocator: reentrant as never,
    });
    assert.ok(inner !== undefined);
    assert.ok(registry.isRegistered(outer) && registry.isRegistered(inner));
    assert.equal(registry.requestedBytes, 24);
    registry.unregister(inner);
    registry.unregister(outer);
    assert.equal(cpu.allocatedBytes, 0);
  });
});

type Op =
  | { kind: "new"; dtype: "u8" | "f32" | "f64"; length: number; mode: number }
  | { kind: "alias"; pick: number; at: number }
  | { kind: "unregister"; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("new" as const),
      dtype: fc.constantFrom("u8" as const, "f32" as const, "f64" as const),
      length: fc.integer({ min: 1, max: 64 }),
      mode: fc.integer({ min: 0, max: 3 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("alias" as const),
      pick: fc.nat(),
      at: fc.nat(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("unregister" as const),
      pick: fc.nat(),
    }),
  },
);

interface Allocation {
  id: number;
  array: ArrayBufferView;
  /** Places that hold references: the array and its aliases (repeats). */
  refs: ArrayBufferView[];
  /** Bytes it took from the heap allocator (0: none). */
  heapBytes: number;
}

describe("OwnershipRegistry model with byte patterns (review 9)", () => {
  it("heap, system and aligned arrays with aliases keep their patterns; stats equal a recount; all goes back", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 50, size: "max" }), (ops) => {
        const cpu = new CpuAllocator({ byteLength: 1 << 16 });
        const registry = new OwnershipRegistry();
        const live: Allocation[] = [];
        let nextId = 1;
        const check = () => {
          let requested = 0;
          for (const a of live) {
            requested += a.array.byteLength;
            checkPattern(bytesOf(a.array), a.id, "allocation");
            for (const r of a.refs) assert.ok(registry.isRegistered(r));
          }
          assert.equal(registry.requestedBytes, requested);
          assert.equal(registry.stats().requestedBytes.current, requested);
          assert.equal(
            cpu.allocatedBytes,
            live.reduce((n, a) => n + a.heapBytes, 0),
          );
        };
        for (const op of ops) {
          if (op.kind === "new") {
            const options = op.mode === 0
              ? { allocator: cpu }
              : op.mode === 1
              ? {}
              : op.mode === 2
              ? { alignment: 64 }
              : { alignment: 64, allocator: cpu };
            const array = registry.newArray(op.dtype, op.length, options);
            const id = nextId++;
            writePattern(bytesOf(array), id);
            // aligned from an allocator: the length padded to the
            // alignment, plus room to align the start
            const heapBytes = op.mode === 0
              ? array.byteLength
              : op.mode === 3
              ? Math.ceil(array.byteLength / 64) * 64 + 63
              : 0;
            if (heapBytes !== 0) {
              assert.equal(array.buffer, cpu.heap.buffer);
            }
            live.push({ id, array, refs: [array], heapBytes });
          } else if (live.length === 0) {
            continue;
          } else if (op.kind === "alias") {
            const a = live[op.pick % live.length];
            const bytes = bytesOf(a.array);
            const alias = bytes.subarray(op.at % bytes.length);
            const refs = registry.addAlias(
              a.refs[op.at % a.refs.length],
              alias,
            );
            a.refs.push(alias);
            assert.equal(refs, a.refs.length);
          } else {
            const a = live[op.pick % live.length];
            const r = a.refs.splice(op.pick % a.refs.length, 1)[0];
            registry.unregister(r);
            if (a.refs.length === 0) {
              live.splice(live.indexOf(a), 1);
              assert.equal(registry.isRegistered(a.array), false);
            }
          }
          check();
        }
        registry.dispose();
        assert.equal(cpu.allocatedBytes, 0);
        cpu.heap.checkIntegrity();
      }),
      { numRuns: modelRuns(200) },
    );
  });
});
