/**
 * Fourth outside-in review of `StepPlannedPool.snapshot()` (new in the
 * ninth part) and the state a step carries into the next: over random
 * steps that repeat, drift and keep blocks past their step, the snapshot
 * shows every live block once, where its handle says, with no overlap, and
 * its totals agree with `stats()` and with the segment source.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { HostSegmentSource } from "@allot/cpu";
import { type PlannedBlock, StepPlannedPool } from "./mod.ts";

const KiB = 1024;

describe("StepPlannedPool fourth review", () => {
  it("snapshot() shows each live block once at its address, no overlap, totals equal to stats() (model over steps)", () => {
    const size = fc.oneof(
      fc.integer({ min: 0, max: 2 * KiB }),
      fc.integer({ min: 0, max: 300 * KiB }),
      fc.constantFrom(0, 1, 512, 4096, 65536, 1 << 20),
    );
    const step = fc.record({
      sizes: fc.array(size, { minLength: 1, maxLength: 12 }),
      // which blocks outlive the step (carried state), which are freed early
      keep: fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
      early: fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
      repeat: fc.integer({ min: 1, max: 3 }),
      dropCarried: fc.boolean(),
      empty: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 8 }), (steps) => {
        const source = new HostSegmentSource({ capacityBytes: 64 << 20 });
        const pool = new StepPlannedPool<unknown>(source);
        let carried: PlannedBlock<unknown>[] = [];
        const check = (live: PlannedBlock<unknown>[]) => {
          const snap = pool.snapshot();
          const active = new Map<string, number>();
          let requested = 0, reserved = 0;
          const spans: [unknown, number, number][] = [];
          for (const seg of snap.segments) {
            reserved += seg.byteLength;
            requested += seg.requestedBytes;
            for (const b of seg.blocks) {
              if (b.state !== "active_allocated") continue;
              spans.push([seg.id, b.address, b.address + b.byteLength]);
              active.set(`${seg.id}:${b.address}`, b.byteLength);
            }
          }
          assert.equal(active.size, live.length, "each live block once");
          spans.sort((a, b) =>
            String(a[0]).localeCompare(String(b[0])) || a[1] - b[1]
          );
          for (let i = 1; i < spans.length; i++) {
            if (spans[i][0] === spans[i - 1][0]) {
              assert.ok(spans[i][1] >= spans[i - 1][2], "blocks overlap");
            }
          }
          const st = pool.stats();
          assert.equal(requested, st.requestedBytes.current);
          assert.equal(reserved, st.reservedBytes.current);
          assert.ok(st.requestedBytes.peak >= st.requestedBytes.current);
          assert.ok(st.reservedBytes.peak >= st.reservedBytes.current);
          // the bytes under live handles do not overlap either
          const byMemory = new Map<unknown, [number, number][]>();
          for (const b of live) {
            const list = byMemory.get(b.memory) ?? [];
            list.push([b.byteOffset, b.byteOffset + b.byteLength]);
            byMemory.set(b.memory, list);
          }
          for (const list of byMemory.values()) {
            list.sort((a, b) => a[0] - b[0]);
            for (let i = 1; i < list.length; i++) {
              assert.ok(list[i][0] >= list[i - 1][1], "handles overlap");
            }
          }
          pool.validate();
        };
        try {
          for (const s of steps) {
            for (let r = 0; r < s.repeat; r++) {
              const mine = s.sizes.map((n) => pool.allocate(n));
              check([...carried, ...mine]);
              const rest: PlannedBlock<unknown>[] = [];
              mine.forEach((b, i) => {
                if (s.early[i]) pool.free(b);
                else rest.push(b);
              });
              check([...carried, ...rest]);
              const keep = rest.filter((_, i) => s.keep[i] && r === 0);
              for (const b of rest) if (!keep.includes(b)) pool.free(b);
              carried.push(...keep);
              if (s.dropCarried && carried.length > 0) {
                pool.free(carried.shift()!);
              }
              pool.endStep();
              check(carried);
              if (s.empty) {
                pool.emptyCache();
                check(carried);
              }
            }
          }
        } finally {
          for (const b of carried) pool.free(b);
          carried = [];
          pool.emptyCache();
        }
        assert.equal(pool.stats().requestedBytes.current, 0);
      }),
      { numRuns: 150 },
    );
  });
});
