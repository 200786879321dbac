/**
 * Model test of `StepPlannedPool`s alone and in a `StepPoolGroup` of two or
 * three, over long runs (70 to 130 steps, past the 64-step window, so idle
 * trims and plans laid out inside an old arena run): steps that repeat,
 * grow slowly or change, blocks that outlive their step, `trim()` and
 * `emptyCache()` between steps, and a segment source that sometimes throws
 * or lies. After every step: no live block overlaps another or lost its
 * bytes, each pool's stats equal a recount (`validate()`), what a pool holds
 * is what its source has live (never more than the source handed out), the
 * group's live bytes add up; at the end everything is returned.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type MockMemory,
  MockSegmentSource,
  SegmentSourceError,
} from "@allot/core";
import { type PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";
import { StepPoolGroup } from "./step_pool_group.ts";
import {
  attempt,
  FaultySegmentSource,
  modelRuns,
  type SegmentFault,
} from "../core/_test_faults.ts";

interface Req {
  pool: number;
  size: number;
  /** requests after which it is freed; -1: outlives the step */
  life: number;
  /** steps a block that outlives its step stays */
  stay: number;
}

type Step =
  | { kind: "run"; template: number; mode: "repeat" | "grow" | "change" }
  | { kind: "trim"; pool: number; target: number }
  | { kind: "empty"; pool: number }
  | { kind: "fault"; pool: number; fault: SegmentFault };

const sizeArb = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 4096 }) },
  { weight: 3, arbitrary: fc.integer({ min: 4096, max: 80_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(256, 1000, 4096, 65536) },
);
const reqArb = fc.record({
  pool: fc.nat(2),
  size: sizeArb,
  life: fc.oneof(
    { weight: 5, arbitrary: fc.integer({ min: 0, max: 5 }) },
    { weight: 1, arbitrary: fc.constant(-1) },
  ),
  stay: fc.integer({ min: 1, max: 4 }),
});
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.record({
      kind: fc.constant("run" as const),
      template: fc.nat(2),
      mode: fc.constantFrom(
        "repeat" as const,
        "repeat" as const,
        "grow" as const,
        "change" as const,
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("trim" as const),
      pool: fc.nat(2),
      target: fc.nat(1 << 18),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("empty" as const),
      pool: fc.nat(2),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("fault" as const),
      pool: fc.nat(2),
      fault: fc.constantFrom<SegmentFault>(
        "throw",
        "short",
        "misaligned",
        "free-throws",
      ),
    }),
  },
);

interface Live {
  pool: number;
  block: PlannedBlock<MockMemory>;
  size: number;
  seed: number;
  /** the step after which it is freed */
  until: number;
}

function sample(l: Live, f: (at: number, want: number) => void) {
  for (
    let i = 0;
    i < l.size;
    i = i < 16 || i >= l.size - 17 ? i + 1 : Math.min(i + 97, l.size - 16)
  ) {
    f(l.block.byteOffset + i, (l.seed + i * 13) & 255);
  }
}

function fill(l: Live) {
  const bytes = l.block.memory.bytes!;
  sample(l, (at, want) => bytes[at] = want);
}

function check(l: Live) {
  const bytes = l.block.memory.bytes!;
  sample(l, (at, want) => {
    if (bytes[at] !== want) {
      assert.fail(
        `block of ${l.size} bytes at ${l.block.byteOffset} overwritten at ${at}`,
      );
    }
  });
}

const stats = { runs: 0, steps: 0, fast: 0, replans: 0, made: 0, arenas: 0 };

describe("StepPlannedPool / StepPoolGroup model (long runs)", () => {
  after(() => console.log(`planned model: ${JSON.stringify(stats)}`));
  it("steps that repeat, grow, change; trims, emptyCache, faulty sources: no overlap, bytes intact, recount, held = source, all returned", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 }),
        fc.boolean(),
        fc.array(fc.array(reqArb, { minLength: 1, maxLength: 10 }), {
          minLength: 3,
          maxLength: 3,
        }),
        fc.array(stepArb, { minLength: 70, maxLength: 130 }),
        fc.boolean(),
        (count, grouped, templates, steps, capped) => {
          const group = grouped ? new StepPoolGroup() : undefined;
          const inners = Array.from(
            { length: count },
            () =>
              new MockSegmentSource({
                backed: true,
                capacityBytes: capped ? 1 << 21 : Infinity,
              }),
          );
          const sources = inners.map((i) => new FaultySegmentSource(i));
          const pools = sources.map((s) =>
            new StepPlannedPool(s, { group }) as StepPlannedPool<MockMemory>
          );
          const live: Live[] = [];
          let seed = 1;
          let grown = 0;
          const consistent = () => {
            let sum = 0;
            pools.forEach((p, i) => {
              p.validate();
              assert.equal(p.reservedBytes, inners[i].reservedBytes);
              assert.ok(p.peakReservedBytes <= inners[i].peakReservedBytes);
              assert.equal(p.segmentCount, inners[i].liveSegmentCount);
              let mine = 0;
              for (const l of live) if (l.pool === i) mine += l.size;
              assert.equal(p.requestedBytes, mine);
              sum += mine;
            });
            if (group) assert.equal(group.requestedBytes, sum);
            for (const l of live) check(l);
          };
          const endStep = (n: number) => {
            const e = attempt(() =>
              group ? group.endStep() : pools.forEach((p) => p.endStep())
            );
            if (e !== undefined && !(e instanceof SegmentSourceError)) throw e;
            // blocks that outlived their steps go when their time is up
            for (const l of live.slice()) {
              if (l.until <= n) {
                live.splice(live.indexOf(l), 1);
                pools[l.pool].free(l.block);
              }
            }
            consistent();
          };
          steps.forEach((step, n) => {
            if (step.kind === "trim") {
              const e = attempt(() => {
                if (step.pool < count) pools[step.pool].trim(step.target);
              });
              if (e !== undefined && !(e instanceof SegmentSourceError)) {
                throw e;
              }
              return consistent();
            }
            if (step.kind === "empty") {
              const e = attempt(() => {
                if (step.pool < count) pools[step.pool].emptyCache();
              });
              if (e !== undefined && !(e instanceof SegmentSourceError)) {
                throw e;
              }
              return consistent();
            }
            if (step.kind === "fault") {
              if (step.pool < count) sources[step.pool].arm(step.fault);
              return;
            }
            let reqs = templates[step.template];
            if (step.mode === "grow") {
              grown++;
              reqs = reqs.map((r) => ({
                ...r,
                size: r.size + 256 * (grown >> 1),
              }));
            } else if (step.mode === "change") {
              reqs = reqs.map((r, k) => ({
                ...r,
                size: r.size + 97 * ((n + k) % 5),
              }));
            }
            const now: (Live | undefined)[] = [];
            reqs.forEach((r, k) => {
              const pool = r.pool % count;
              let block: PlannedBlock<MockMemory> | undefined;
              const e = attempt(() => block = pools[pool].tryAllocate(r.size));
              if (e !== undefined && !(e instanceof SegmentSourceError)) {
                throw e;
              }
              if (block !== undefined) {
                for (const o of live) {
                  if (
                    o.block.memory === block.memory &&
                    o.block.byteOffset < block.byteOffset + block.byteLength &&
                    block.byteOffset < o.block.byteOffset + o.block.byteLength
                  ) assert.fail(`overlap at ${block.byteOffset}`);
                }
                const l: Live = {
                  pool,
                  block,
                  size: r.size,
                  seed: seed++,
                  until: r.life < 0 ? n + r.stay : -1,
                };
                fill(l);
                live.push(l);
                now.push(r.life < 0 ? undefined : l);
              } else now.push(undefined);
              // frees due after this request
              reqs.forEach((q, j) => {
                const l = now[j];
                if (l !== undefined && q.life >= 0 && j + q.life === k) {
                  live.splice(live.indexOf(l), 1);
                  pools[l.pool].free(l.block);
                  now[j] = undefined;
                }
              });
            });
            for (const l of now) {
              if (l !== undefined) {
                live.splice(live.indexOf(l), 1);
                pools[l.pool].free(l.block);
              }
            }
            endStep(n);
          });
          for (const s of sources) s.arm(undefined);
          for (const l of live) pools[l.pool].free(l.block);
          live.length = 0;
          endStep(Infinity);
          for (const p of pools) {
            stats.steps += p.stepCount;
            stats.fast += p.fastStepCount;
            stats.replans += p.replanCount;
            stats.made += p.segmentsCreated;
            stats.arenas += p.arenaByteLength > 0 ? 1 : 0;
          }
          stats.runs++;
          for (const p of pools) p.emptyCache();
          for (const i of inners) {
            assert.equal(i.reservedBytes, 0);
            assert.equal(i.liveSegmentCount, 0);
          }
        },
      ),
      { numRuns: modelRuns(150) },
    );
  });
});
