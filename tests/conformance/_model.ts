/**
 * The model of the contract's random sequences: live blocks and their byte
 * patterns, the checks after every step (no overlap or corruption, stats
 * equal a recount, `validate()` passes), the operations and their runner.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { OutOfMemoryError } from "@allot/core";
import {
  assertInvalidArgument,
  hostileNumbers,
  type Subject,
  throwsTyped,
} from "./_subject.ts";

/** The byte pattern of a live block: its id in every byte, shifted. */
function pattern(id: number, i: number): number {
  return (id * 131 + i * 7 + 1) & 0xff;
}

interface Live<H> {
  id: number;
  handle: H;
  requested: number;
}

/** The model: live blocks and their patterns, checked after every step. */
export class Model<H> {
  readonly live: Live<H>[] = [];
  /** No free since the last settle: the figures must be exact. */
  settled = true;
  /** `current` when the accumulated stats were last reset. */
  base = 0;
  /** The live count then. */
  baseCount = 0;
  /** The recount of bytes in use, kept as blocks come and go. */
  current = 0;
  /** Its highest value since the start or the last peak reset. */
  peak = 0;
  /** The highest live count since then. */
  peakCount = 0;
  #next = 1;
  constructor(readonly subject: Subject<H>) {}

  add(handle: H, requested: number): void {
    const id = this.#next++;
    this.live.push({ id, handle, requested });
    this.current += this.subject.countedBytes(handle, requested);
    this.peak = Math.max(this.peak, this.current);
    this.peakCount = Math.max(this.peakCount, this.live.length);
    const bytes = this.subject.bytes?.(handle);
    if (bytes !== undefined) {
      assert.ok(
        bytes.byteLength >= requested,
        `a block of ${requested} bytes has ${bytes.byteLength}`,
      );
      for (let i = 0; i < requested; i++) bytes[i] = pattern(id, i);
    }
  }

  take(index: number): Live<H> {
    if (this.subject.pendingFrees) this.settled = false;
    const l = this.live.splice(index % this.live.length, 1)[0];
    this.current -= this.subject.countedBytes(l.handle, l.requested);
    return l;
  }

  /** The subject's peaks were reset: they are the current figures now. */
  resetPeaks(): void {
    this.peak = this.current;
    this.peakCount = this.live.length;
  }

  /** No overlap, no corruption, stats add up, validate() passes. */
  check(where: string): void {
    const s = this.subject;
    s.validate();
    for (const { id, handle, requested } of this.live) {
      const bytes = s.bytes?.(handle);
      if (bytes === undefined) continue;
      for (let i = 0; i < requested; i++) {
        if (bytes[i] !== pattern(id, i)) {
          assert.fail(
            `${where}: block ${id} (${requested} bytes) byte ${i} is ${
              bytes[i]
            }, wrote ${pattern(id, i)}: overlap or corruption`,
          );
        }
      }
    }
    const f = s.bytesInUse();
    const sum = this.live.reduce(
      (n, l) => n + s.countedBytes(l.handle, l.requested),
      0,
    );
    if (this.settled) {
      assert.equal(f.current, sum, `${where}: current == sum of live sizes`);
    } else {
      assert.ok(f.current >= sum, `${where}: current >= sum of live sizes`);
    }
    if (f.peak !== undefined) {
      assert.ok(f.peak >= f.current, `${where}: peak >= current`);
      // frees that wait on fences count until they pass: only a bound
      if (!s.pendingFrees) {
        assert.equal(f.peak, this.peak, `${where}: peak == the model's peak`);
      }
    }
    if (f.allocated !== undefined && f.freed !== undefined) {
      assert.equal(
        f.allocated - f.freed,
        f.current - this.base,
        `${where}: allocated - freed == current (less current at reset)`,
      );
    }
    const c = s.allocations?.();
    if (c !== undefined) {
      if (this.settled) {
        assert.equal(c.current, this.live.length, `${where}: live count`);
      }
      assert.ok(c.peak >= c.current, `${where}: count peak >= current`);
      if (!s.pendingFrees) {
        assert.equal(c.peak, this.peakCount, `${where}: count peak`);
      }
      assert.equal(
        c.allocated - c.freed,
        c.current - this.baseCount,
        `${where}: counts`,
      );
    }
    const r = s.reservedBytes?.();
    if (r !== undefined) {
      assert.ok(r >= f.current, `${where}: reserved ${r} >= in use`);
    }
  }
}

export type Op =
  | { kind: "allocate"; byteLength: number }
  | { kind: "tryAllocate"; byteLength: number }
  | { kind: "free"; index: number }
  | { kind: "emptyCache" }
  | { kind: "resetPeakStats" }
  | { kind: "resetAccumulatedStats" }
  | { kind: "extra"; index: number }
  | { kind: "hostile"; index: number }
  | { kind: "outOfMemory" }
  | { kind: "settle" };

export function opArbitrary(min: number, max: number): fc.Arbitrary<Op> {
  const size = fc.oneof(
    fc.integer({ min, max: Math.min(max, 256) }),
    fc.integer({ min, max }),
  );
  return fc.oneof(
    {
      weight: 5,
      arbitrary: size.map((n) => ({ kind: "allocate", byteLength: n }) as Op),
    },
    {
      weight: 2,
      arbitrary: size.map((n) =>
        ({ kind: "tryAllocate", byteLength: n }) as Op
      ),
    },
    {
      weight: 5,
      arbitrary: fc.nat().map((i) => ({ kind: "free", index: i }) as Op),
    },
    { weight: 1, arbitrary: fc.constant({ kind: "emptyCache" } as Op) },
    { weight: 1, arbitrary: fc.constant({ kind: "resetPeakStats" } as Op) },
    {
      weight: 1,
      arbitrary: fc.constant({ kind: "resetAccumulatedStats" } as Op),
    },
    {
      weight: 2,
      arbitrary: fc.nat().map((i) => ({ kind: "extra", index: i }) as Op),
    },
    {
      weight: 1,
      arbitrary: fc.nat().map((i) => ({ kind: "hostile", index: i }) as Op),
    },
    { weight: 1, arbitrary: fc.constant({ kind: "outOfMemory" } as Op) },
    { weight: 1, arbitrary: fc.constant({ kind: "settle" } as Op) },
  );
}

/** Runs one operation against the subject and the model. */
export async function step<H>(
  model: Model<H>,
  op: Op,
  n: number,
): Promise<void> {
  const s = model.subject;
  const where = `step ${n} ${JSON.stringify(op)}`;
  switch (op.kind) {
    case "allocate":
    case "tryAllocate": {
      let h: H | undefined | null;
      if (op.kind === "allocate") {
        try {
          h = s.allocate(op.byteLength);
        } catch (e) {
          // full: an out-of-memory error, the live blocks untouched
          throwsTyped(
            () => {
              throw e;
            },
            [OutOfMemoryError],
            where,
          );
          break;
        }
      } else {
        h = s.tryAllocate(op.byteLength);
        if (h === undefined || h === null) break;
      }
      model.add(h, op.byteLength);
      break;
    }
    case "free":
      if (model.live.length === 0) break;
      s.free(model.take(op.index).handle);
      break;
    case "emptyCache":
      s.emptyCache?.();
      break;
    case "resetPeakStats": {
      if (s.resetPeakStats === undefined) break;
      s.resetPeakStats();
      model.resetPeaks();
      const f = s.bytesInUse();
      assert.equal(f.peak, f.current, `${where}: peak == current after reset`);
      break;
    }
    case "resetAccumulatedStats": {
      if (s.resetAccumulatedStats === undefined) break;
      // (exact only once pending frees are in: settle first)
      await s.settle?.();
      model.settled = true;
      s.resetAccumulatedStats();
      const f = s.bytesInUse();
      if (f.allocated !== undefined) {
        assert.equal(f.allocated, 0, `${where}: allocated reset`);
        assert.equal(f.freed, 0, `${where}: freed reset`);
      }
      model.base = f.current;
      model.baseCount = s.allocations?.().current ?? 0;
      break;
    }
    case "extra": {
      const extra = s.extraOps ?? [];
      if (extra.length > 0) extra[op.index % extra.length].run();
      break;
    }
    case "hostile": {
      const values = hostileNumbers();
      const { label, value } = values[op.index % values.length];
      const before = s.state();
      let error: unknown;
      try {
        s.allocate(value as number);
      } catch (e) {
        error = e;
      }
      assertInvalidArgument(error, value, `allocate(${label})`);
      assert.deepEqual(
        s.state(),
        before,
        `${where}: refused call changed state`,
      );
      break;
    }
    case "outOfMemory": {
      const big = s.capacityBytes + 1;
      const usedBefore = s.bytesInUse().current;
      assert.equal(s.tryAllocate(big) ?? undefined, undefined, where);
      throwsTyped(() => s.allocate(big), [OutOfMemoryError], where);
      // (where frees wait on fences, a failed request may first take the
      // frees whose fences have passed)
      if (!s.pendingFrees) {
        assert.equal(s.bytesInUse().current, usedBefore, where);
      }
      break;
    }
    case "settle":
      await s.settle?.();
      model.settled = true;
      break;
  }
  model.check(where);
}

/** Frees everything, empties the cache, and checks nothing is held. */
export async function drain<H>(model: Model<H>, where: string): Promise<void> {
  const s = model.subject;
  while (model.live.length > 0) {
    s.free(model.take(0).handle);
    model.check(`${where}: draining`);
  }
  await s.settle?.();
  model.settled = true;
  s.emptyCache?.();
  model.check(`${where}: drained`);
  assert.equal(s.bytesInUse().current, 0, `${where}: nothing in use`);
  const r = s.reservedBytes?.();
  if (r !== undefined) assert.equal(r, 0, `${where}: reserved back to 0`);
}
