// review18: a fast-check model over the public CachingAllocator around the
// peak rule's narrowing slack (bytes16's `narrowPeakBound`): drifting and
// repeating sizes (give-backs that are regretted, then growth), a device
// budget (`capacityBytes`, failed segments), `setMemoryFraction`,
// `emptyCache`, frees that wait for another stream's fence, and refused
// calls. After every op: no two live blocks share bytes (byte patterns in
// backed segments), the stats equal a recount, `validate()`; at the end
// everything is returned. A refused call changes nothing.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  InvalidArgumentError,
  ManualStream,
  type MockMemory,
  MockSegmentSource,
  OutOfMemoryError,
} from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import { type CachedBlock, CachingAllocator, CachingGroup } from "./mod.ts";

const KiB = 1024, MiB = 2 ** 20;

type Op =
  | { k: "alloc"; size: number }
  | { k: "grow"; step: number }
  | { k: "round" }
  | { k: "free"; pick: number; stream: boolean }
  | { k: "complete"; n: number }
  | { k: "empty" }
  | { k: "fraction"; f: number }
  | { k: "fail"; n: number }
  | { k: "bad"; v: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      k: fc.constant("alloc" as const),
      size: fc.constantFrom(
        512,
        3000,
        64 * KiB,
        300 * KiB,
        MiB,
        2 * MiB + 256,
        5 * MiB,
        12 * MiB,
      ),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      k: fc.constant("grow" as const),
      step: fc.integer({ min: 0, max: 60 }),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ k: "round" as const }) },
  {
    weight: 6,
    arbitrary: fc.record({
      k: fc.constant("free" as const),
      pick: fc.nat(),
      stream: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("complete" as const),
      n: fc.integer({ min: 1, max: 4 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ k: "empty" as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("fraction" as const),
      f: fc.constantFrom(0.2, 0.5, 1, -1, 1.5, NaN),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("fail" as const),
      n: fc.integer({ min: 1, max: 3 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("bad" as const),
      v: fc.constantFrom(-1, 0.5, NaN, Infinity, 2 ** 60),
    }),
  },
);

describe("review18: the peak rule's narrowing, a model over the public allocator", () => {
  it("no overlap, stats equal a recount, refused calls change nothing, all returned", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(64 * MiB, 256 * MiB),
        fc.constantFrom(1.05, 1.2),
        fc.integer({ min: 0, max: 5 }),
        fc.boolean(),
        fc.array(op, { minLength: 1, maxLength: 70 }),
        async (capacity, ratio, rounds, grouped, rest) => {
          // (a prefix of rounds widens the slack, as in a long program)
          const ops: Op[] = [
            ...Array.from({ length: rounds }, () => ({ k: "round" as const })),
            ...rest,
          ];
          const source = new MockSegmentSource({
            capacityBytes: capacity,
            backed: true,
          });
          // (grouped: another member that holds idle segments the group
          // may give back at this one's misses)
          const group = grouped ? new CachingGroup() : undefined;
          const a = new CachingAllocator(source, {
            releaseCachedAboveRatio: ratio,
            group,
          });
          const otherSource = new MockSegmentSource();
          const other = new CachingAllocator(otherSource, { group });
          const stream = new ManualStream();
          const live: { b: CachedBlock<MockMemory>; tag: number }[] = [];
          let pending = 0; // bytes freed after a fence not yet known done
          let tag = 0;
          const state = () => ({
            stats: a.memoryStats(),
            reserved: source.reservedBytes,
            segments: source.liveSegmentCount,
            fraction: a.memoryFraction,
          });
          const check = () => {
            a.validate();
            let sum = 0;
            const spans = new Map<MockMemory, [number, number][]>();
            for (const { b, tag } of live) {
              sum += b.blockByteLength;
              const m = b.memory;
              const bytes = m.bytes!;
              assert.equal(bytes[b.byteOffset], tag, "bytes overwritten");
              assert.equal(
                bytes[b.byteOffset + b.byteLength - 1],
                tag,
                "bytes overwritten",
              );
              const r = spans.get(m) ?? [];
              for (const [o, n] of r) {
                assert.ok(
                  b.byteOffset + b.blockByteLength <= o ||
                    o + n <= b.byteOffset,
                  "overlap",
                );
              }
              r.push([b.byteOffset, b.blockByteLength]);
              spans.set(m, r);
            }
            const s = a.memoryStats();
            assert.equal(s.allocatedBytes.all.current, a.allocatedBytes);
            assert.equal(s.reservedBytes.all.current, a.reservedBytes);
            assert.equal(a.reservedBytes, source.reservedBytes);
            assert.equal(s.segment.all.current, source.liveSegmentCount);
            assert.ok(a.allocatedBytes >= sum, "allocated below live");
            assert.ok(a.allocatedBytes <= sum + pending, "allocated above");
            assert.ok(a.reservedBytes <= capacity);
            other.validate();
            if (group !== undefined) {
              assert.equal(
                group.heldBytes,
                source.reservedBytes + otherSource.reservedBytes,
              );
            }
          };
          let previous: CachedBlock<MockMemory>[] = [];
          let growth = 0;
          const drop = (b: CachedBlock<MockMemory> | undefined) => {
            const i = live.findIndex((l) => l.b === b);
            if (i >= 0) a.free(live.splice(i, 1)[0].b);
          };
          const take = (size: number) => {
            const before = state();
            const liveBefore = a.allocatedBytes;
            let b: CachedBlock<MockMemory>;
            try {
              b = a.allocate(size);
            } catch (e) {
              assert.ok(e instanceof OutOfMemoryError, String(e));
              // (the out-of-memory path may give cached segments back)
              assert.equal(a.allocatedBytes, liveBefore);
              assert.ok(source.reservedBytes <= before.reserved);
              return undefined;
            }
            tag = tag % 250 + 1;
            b.memory.bytes!.fill(tag, b.byteOffset, b.byteOffset + size);
            live.push({ b, tag });
            return b;
          };
          for (const o of ops) {
            switch (o.k) {
              case "alloc":
                take(o.size);
                break;
              case "grow": {
                // a step of growing sizes, the previous step's blocks freed
                // once it is taken (the narrowing's case)
                const k = growth++ + o.step % 4;
                const step = [0, 1, 2].map(() =>
                  take(Math.round(2 * MiB * 1.03 ** k / 256) * 256)
                );
                for (const b of previous) drop(b);
                previous = step.filter((b) => b !== undefined);
                break;
              }
              case "round": {
                // idle blocks taken and freed, then two kept: the peak rule
                // gives the idle ones back, the next round regrets them
                const idle = [0, 1, 2].map(() => take(300 * KiB));
                for (const b of idle) drop(b);
                take(200 * KiB);
                take(MiB);
                break;
              }
              case "free":
                if (live.length > 0) {
                  const { b } = live.splice(o.pick % live.length, 1)[0];
                  if (o.stream) {
                    a.recordStream(b, stream);
                    pending += b.blockByteLength;
                  }
                  a.free(b);
                  const before = state();
                  assert.throws(() => a.free(b));
                  assert.deepEqual(state(), before);
                }
                break;
              case "complete":
                stream.complete(o.n);
                if (stream.completedCount >= stream.submitted) {
                  await a.synchronize();
                  pending = 0;
                }
                break;
              case "empty":
                a.emptyCache();
                other.free(other.allocate(4 * MiB)); // an idle segment
                break;
              case "fraction": {
                const before = state();
                if (o.f > 0 && o.f <= 1) a.setMemoryFraction(o.f);
                else {
                  assert.throws(
                    () => a.setMemoryFraction(o.f),
                    InvalidArgumentError,
                  );
                  assert.deepEqual(state(), before);
                }
                break;
              }
              case "fail":
                source.failNext(o.n);
                break;
              case "bad": {
                const before = state();
                assert.throws(() => a.allocate(o.v), InvalidArgumentError);
                assert.deepEqual(state(), before);
                break;
              }
            }
            check();
          }
          source.failNext(0);
          for (const { b } of live) a.free(b);
          stream.complete(stream.submitted);
          await a.synchronize();
          assert.equal(a.allocatedBytes, 0);
          a.emptyCache();
          assert.equal(source.reservedBytes, 0);
          assert.equal(source.liveSegmentCount, 0);
          a.validate();
          other.emptyCache();
          assert.equal(otherSource.reservedBytes, 0);
        },
      ),
      { numRuns: modelRuns(200) },
    );
  });
});
