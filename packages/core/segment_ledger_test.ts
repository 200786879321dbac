import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "./_test_faults.ts";
import { SegmentLedger } from "./segment_ledger.ts";
import type { Segment } from "./segment_source.ts";
import { DoubleFreeError, InvalidArgumentError } from "./errors.ts";

type Op =
  | { kind: "add"; bytes: number; counted: number }
  | { kind: "remove"; pick: number }
  | { kind: "removeTwice"; pick: number }
  | { kind: "clear" };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({
      kind: fc.constant("add" as const),
      bytes: fc.integer({ min: 1, max: 1 << 20 }),
      counted: fc.integer({ min: 0, max: 3 }),
    }),
    weight: 5,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant("remove" as const),
      pick: fc.nat(),
    }),
    weight: 4,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant("removeTwice" as const),
      pick: fc.nat(),
    }),
    weight: 1,
  },
  { arbitrary: fc.record({ kind: fc.constant("clear" as const) }), weight: 1 },
);

describe("SegmentLedger", () => {
  it("SegmentLedger matches a model over random add/remove/clear", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const ledger = new SegmentLedger<number>("test");
        const live = new Map<Segment<number>, number>();
        const dead: Segment<number>[] = [];
        let peak = 0, adds = 0, frees = 0, id = 0;
        const sum = () => [...live.values()].reduce((a, b) => a + b, 0);
        for (const o of ops) {
          if (o.kind === "add") {
            const segment = {
              memory: id++,
              byteOffset: 0,
              byteLength: o.bytes,
            };
            // counted bytes may exceed byteLength (a GPU buffer rounded up)
            const counted = o.bytes + o.counted;
            ledger.add(segment, counted);
            live.set(segment, counted);
            adds++;
            peak = Math.max(peak, sum());
          } else if (o.kind === "remove" && live.size > 0) {
            const segment = [...live.keys()][o.pick % live.size];
            assert.equal(ledger.remove(segment), live.get(segment));
            live.delete(segment);
            dead.push(segment);
            frees++;
          } else if (o.kind === "removeTwice" && dead.length > 0) {
            const before = [ledger.reservedBytes, ledger.freeCount];
            assert.throws(
              () => ledger.remove(dead[o.pick % dead.length]),
              DoubleFreeError,
            );
            assert.deepEqual([ledger.reservedBytes, ledger.freeCount], before);
          } else if (o.kind === "clear") {
            const cleared = ledger.clear();
            assert.deepEqual(new Set(cleared), new Set(live.keys()));
            dead.push(...cleared);
            live.clear();
          }
          assert.equal(ledger.reservedBytes, sum());
          assert.equal(ledger.liveSegmentCount, live.size);
          assert.equal(ledger.peakReservedBytes, peak);
          assert.equal(ledger.allocationCount, adds);
          assert.equal(ledger.freeCount, frees);
          for (const s of live.keys()) assert.ok(ledger.has(s));
        }
      }),
      { numRuns: modelRuns() },
    );
  });

  it("SegmentLedger.checkRequest() names the length and the limit", () => {
    const ledger = new SegmentLedger("test");
    for (const bad of [0, -1, 1.5, NaN, 2049]) {
      assert.throws(() => ledger.checkRequest(bad, 2048), InvalidArgumentError);
    }
    assert.throws(() => ledger.checkRequest(4096, 2048), /at most 2048/);
    ledger.checkRequest(2048, 2048);
  });

  it("SegmentLedger.add() refuses a segment already live or a bad count, changing nothing", () => {
    const ledger = new SegmentLedger<null>("test");
    const s = { memory: null, byteOffset: 0, byteLength: 8 };
    ledger.add(s);
    assert.throws(() => ledger.add(s), InvalidArgumentError);
    const t = { memory: null, byteOffset: 0, byteLength: 8 };
    for (const bad of [-1, 0.5, NaN, Infinity]) {
      assert.throws(() => ledger.add(t, bad), InvalidArgumentError);
    }
    assert.ok(!ledger.has(t));
    assert.equal(ledger.reservedBytes, 8);
    assert.equal(ledger.allocationCount, 1);
  });

  it("SegmentLedger.fits() compares against the capacity", () => {
    const ledger = new SegmentLedger<null>("test");
    ledger.add({ memory: null, byteOffset: 0, byteLength: 600 });
    assert.ok(ledger.fits(400, 1000));
    assert.ok(!ledger.fits(401, 1000));
    assert.ok(ledger.fits(2 ** 50, Infinity));
  });
});
