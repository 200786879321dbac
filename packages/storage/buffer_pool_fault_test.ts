/**
 * Fault-injection model tests of BufferPool and ManagedBufferPool: an
 * allocator that throws, lies (short, misaligned, released, duplicate
 * blocks), re-enters the pool or whose deleter throws, at random points of
 * random runs. After each step the pool validates, its stats match the
 * model, nothing leaks, and every live block still holds the byte pattern
 * written into it (checked before each recycle).
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { AllotError, type DataPtr, Device } from "@allot/core";
import {
  ALLOCATOR_FAULTS,
  type AllocatorFault,
  checkPattern,
  faultArbitrary,
  faultsInjected,
  FaultyAllocator,
  FirstFitAllocator,
  InjectedFault,
  modelRuns,
  writePattern,
} from "../core/_test_faults.ts";
import { AllocationStrategy, BufferPool, ManagedBufferPool } from "./mod.ts";

const strategies = [
  () => AllocationStrategy.exact(),
  () => AllocationStrategy.padded(16),
  () => AllocationStrategy.pooled({ minByteLength: 16 }),
];

type Op =
  | { kind: "acquire"; n: number; fault: AllocatorFault | undefined }
  | { kind: "recycle"; pick: number; fault: AllocatorFault | undefined }
  | { kind: "cleanup"; fault: AllocatorFault | undefined };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("acquire" as const),
      n: fc.integer({ min: 0, max: 200 }),
      fault: faultArbitrary(ALLOCATOR_FAULTS),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("recycle" as const),
      pick: fc.nat(),
      fault: faultArbitrary(["deleter-throws"] as const, 2),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("cleanup" as const),
      fault: faultArbitrary(["deleter-throws"] as const, 2),
    }),
  },
);

function overlaps(a: DataPtr, b: DataPtr): boolean {
  return a.byteLength > 0 && b.byteLength > 0 && a.memory === b.memory &&
    a.byteOffset < b.byteOffset + b.byteLength &&
    b.byteOffset < a.byteOffset + a.byteLength;
}

function bytesOf(ptr: DataPtr<ArrayBuffer, unknown>): Uint8Array {
  return new Uint8Array(ptr.memory, ptr.byteOffset, ptr.byteLength);
}

/** Errors a faulty step may surface: the injected one, or a typed refusal. */
function assertExpected(error: unknown): void {
  if (error === undefined) return;
  assert.ok(
    error instanceof InjectedFault || error instanceof AllotError,
    `untyped error: ${error}`,
  );
}

describe("BufferPool under injected faults", () => {
  const start = faultsInjected();
  after(() => {
    console.log(
      `storage buffer pool faults: ${faultsInjected() - start} faults injected`,
    );
  });
  it("BufferPool keeps serving correct, non-overlapping, uncorrupted blocks whatever its allocator does (model-based)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 }),
        fc.boolean(),
        fc.array(opArb, { maxLength: 50 }),
        (s, strict, ops) => {
          const base = new FirstFitAllocator(Device.cpu(), 1 << 16);
          const allocator = new FaultyAllocator(base);
          const strategy = strategies[s]();
          const pool = new BufferPool(allocator, {
            strategy,
            maxFreeBytes: 1024,
            strict,
          });
          let nextId = 1;
          const live: {
            ptr: DataPtr<ArrayBuffer, unknown>;
            id: number;
            requested: number;
          }[] = [];
          const take = (n: number) => {
            const ptr = pool.acquire(n);
            assert.ok(ptr.byteLength >= n);
            for (const other of live) {
              assert.ok(!overlaps(ptr, other.ptr), "overlapping blocks");
            }
            const id = nextId++;
            writePattern(bytesOf(ptr), id);
            live.push({ ptr, id, requested: n });
          };
          allocator.onReenter = () => take(8);
          for (const op of ops) {
            let error: unknown;
            if (op.kind === "acquire") {
              allocator.arm(op.fault);
              try {
                take(op.n);
              } catch (e) {
                error = e;
              }
              allocator.arm(undefined);
              if (error instanceof AllotError && !strict) {
                // Only a broken contract is refused here.
                assert.ok(
                  ["short", "released", "duplicate"].includes(op.fault!),
                  `refused ${op.n} bytes with no fault: ${error}`,
                );
              }
            } else if (op.kind === "recycle" && live.length > 0) {
              const [gone] = live.splice(op.pick % live.length, 1);
              checkPattern(bytesOf(gone.ptr), gone.id);
              allocator.arm(op.fault);
              try {
                pool.recycle(gone.ptr);
              } catch (e) {
                error = e;
              }
              allocator.arm(undefined);
            } else if (op.kind === "cleanup") {
              allocator.arm(op.fault);
              try {
                pool.cleanup();
              } catch (e) {
                error = e;
              }
              allocator.arm(undefined);
            }
            assertExpected(error);
            pool.validate();
            const stats = pool.stats();
            assert.equal(stats.inUseHandles, live.length);
            assert.equal(
              stats.requestedBytes,
              live.reduce((a, b) => a + b.requested, 0),
            );
            assert.equal(
              stats.reserved.current,
              stats.allocatedBytes + stats.freeBytes,
            );
            assert.equal(
              allocator.liveCount,
              stats.inUseHandles + stats.freeHandles,
              "the pool leaked or lost a block",
            );
            assert.equal(base.live.size, allocator.liveCount);
          }
          for (const { ptr, id } of live) {
            checkPattern(bytesOf(ptr), id);
            pool.recycle(ptr);
          }
          pool.cleanup();
          assert.equal(base.live.size, 0, "blocks leaked");
          assert.equal(pool.stats().reserved.current, 0);
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("BufferPool in strict mode catches a write through a stale block when it is reused", () => {
    const base = new FirstFitAllocator(Device.cpu(), 1 << 12);
    const pool = new BufferPool(base, { strict: true });
    const a = pool.acquire(100);
    const stale = new Uint8Array(a.memory, a.byteOffset, 256);
    pool.recycle(a);
    stale[5] = 1; // stale write
    assert.throws(() => pool.acquire(100), /byte 5 was written after/);
    pool.validate();
    assert.equal(base.live.size, 0);
    const b = pool.acquire(100);
    assert.equal(base.live.size, 1);
    const bytes = new Uint8Array(b.memory, b.byteOffset, 256);
    pool.recycle(b);
    assert.equal(bytes[0], 0xdd);
  });
});

describe("ManagedBufferPool under injected faults", () => {
  const start = faultsInjected();
  after(() => {
    console.log(
      `storage managed pool faults: ${
        faultsInjected() - start
      } faults injected`,
    );
  });
  it("ManagedBufferPool keeps blocks disjoint and intact when its allocator fails (model-based)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.boolean(),
            fc.integer({ min: 0, max: 300 }),
            fc.nat(),
            faultArbitrary(ALLOCATOR_FAULTS),
          ),
          { maxLength: 40 },
        ),
        fc.boolean(),
        (ops, strict) => {
          const base = new FirstFitAllocator(Device.cpu(), 1 << 16);
          const allocator = new FaultyAllocator(base);
          const pool = new ManagedBufferPool(allocator, {
            maxFreeBytes: 2048,
            strict,
          });
          let nextId = 1;
          const live: { ptr: DataPtr<ArrayBuffer, unknown>; id: number }[] = [];
          for (const [allocate, n, pick, fault] of ops) {
            allocator.arm(fault);
            let error: unknown;
            try {
              if (allocate || live.length === 0) {
                const ptr = pool.allocate(n) as DataPtr<ArrayBuffer, unknown>;
                assert.equal(ptr.byteLength, n);
                for (const other of live) {
                  assert.ok(!overlaps(ptr, other.ptr), "overlapping blocks");
                }
                const id = nextId++;
                writePattern(bytesOf(ptr), id);
                live.push({ ptr, id });
              } else {
                const [gone] = live.splice(pick % live.length, 1);
                checkPattern(bytesOf(gone.ptr), gone.id);
                gone.ptr.release();
              }
            } catch (e) {
              error = e;
            }
            allocator.arm(undefined);
            assertExpected(error);
            const stats = pool.stats();
            assert.equal(stats.inUseHandles, live.length);
            assert.equal(
              allocator.liveCount,
              stats.inUseHandles + stats.freeHandles,
            );
          }
          for (const { ptr, id } of live) {
            checkPattern(bytesOf(ptr), id);
            ptr.release();
          }
          pool.dispose();
          assert.equal(base.live.size, 0, "blocks leaked");
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});

describe("ManagedBufferPool strict mode", () => {
  it("ManagedBufferPool in strict mode junk-fills released blocks and catches a write through a stale view on reuse", () => {
    const base = new FirstFitAllocator(Device.cpu(), 1 << 12);
    const pool = new ManagedBufferPool(base, { strict: true });
    const a = pool.allocate(64) as DataPtr<ArrayBuffer, unknown>;
    const stale = new Uint8Array(a.memory, a.byteOffset, 64);
    stale.fill(7);
    a.release();
    assert.ok(stale.every((b) => b === 0xdd), "released block not junk-filled");
    stale[10] = 1; // write after free
    assert.throws(() => pool.allocate(64), /byte 10 was written after/);
    const b = pool.allocate(64);
    b.release();
    pool.dispose();
    assert.equal(base.live.size, 0);
  });
});
