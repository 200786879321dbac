// The default pool's peak rule and the group's small-asker rule from the
// outside (review 8): members of one CachingGroup (one large asker, two
// small ones; some under a budget) replay steps whose phases repeat, so
// that their misses cycle (the condition of both rules); some blocks are
// freed after a fence of a side stream that completes at the next step.
// Between steps: step marks, emptyCache() of a member, a memory fraction set,
// resetPeak(). After every operation: every live block and every block
// waiting for its fence keeps its byte pattern (a give-back at a miss that
// destroyed one, or a block handed out twice, cannot), each member
// validates, its allocated bytes are a recount of its live and waiting
// blocks, its reserved bytes are its source's, and the group's held bytes
// and peak are its members'. The run counts give-backs inside an
// allocation (a miss that gave segments back) so that the rules are seen
// to act.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type CachedBlock,
  CachingAllocator,
  CachingGroup,
} from "@allot/caching";
import {
  ManualStream,
  type MockMemory,
  MockSegmentSource,
  OutOfMemoryError,
} from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";

const KiB = 1024, MiB = 2 ** 20;
const M = 3;

/** Byte positions checked in a block of `n` bytes (both ends, a middle). */
function probes(n: number): number[] {
  if (n === 0) return [];
  return [...new Set([0, 1, n >> 1, n - 2, n - 1])].filter((j) =>
    j >= 0 && j < n
  );
}

interface Ask {
  m: number;
  size: number;
  /** Freed after a side-stream fence that completes at the next step. */
  late: boolean;
  /** Where it goes in the step's free order. */
  order: number;
}

type Between =
  | { op: "none" }
  | { op: "empty"; m: number }
  | { op: "fraction"; m: number; f: number }
  | { op: "resetPeak" };

interface Live {
  m: number;
  fill: number;
  h: CachedBlock<MockMemory>;
}

describe("CachingGroup: cycling misses (review 8)", () => {
  it("model: phases that repeat in one group, with budgets, after-fence frees, emptyCache and fractions: patterns kept, counts recounted, the rules act", async () => {
    const m = fc.nat(M - 1);
    const ask: fc.Arbitrary<Ask> = fc.record({
      m,
      size: fc.nat(),
      late: fc.boolean(),
      order: fc.nat(),
    });
    const between: fc.Arbitrary<Between> = fc.oneof(
      { weight: 4, arbitrary: fc.constant({ op: "none" as const }) },
      {
        weight: 1,
        arbitrary: fc.record({ op: fc.constant("empty" as const), m }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("fraction" as const),
          m,
          f: fc.constantFrom(0.5, 1),
        }),
      },
      { weight: 1, arbitrary: fc.constant({ op: "resetPeak" as const }) },
    );
    let missGiveBacks = 0, groupGiveBacks = 0, ooms = 0, steps = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.option(fc.constantFrom(24 * MiB, 48 * MiB)), {
          minLength: M,
          maxLength: M,
        }),
        fc.array(fc.array(ask, { minLength: 1, maxLength: 10 }), {
          minLength: 2,
          maxLength: 4,
        }),
        fc.integer({ min: 3, max: 6 }),
        fc.array(between, { minLength: 1, maxLength: 8 }),
        async (budgets, phases, rounds, betweens) => {
          const group = new CachingGroup();
          const sources = budgets.map((b) =>
            new MockSegmentSource({
              backed: true,
              ...(b === null ? {} : { capacityBytes: b }),
            })
          );
          const pools = sources.map((s) => new CachingAllocator(s, { group }));
          // member 0 asks for up to 6 MiB, the others for up to 64 KiB
          const sizeOf = (a: Ask) =>
            a.m === 0 ? 1 + a.size % (6 * MiB) : 1 + a.size % (64 * KiB);
          const side = new ManualStream();
          const live = new Set<Live>();
          const waiting = new Set<Live>(); // freed, behind a side fence
          let fill = 1;
          const write = (l: Live) => {
            const [mem, at, len] = where.get(l)!;
            const bytes = mem.bytes!;
            for (const j of probes(len)) bytes[at + j] = (l.fill + j) & 0xff;
          };
          const where = new Map<Live, readonly [MockMemory, number, number]>();
          const check = () => {
            let held = 0;
            const counted = new Array<number>(M).fill(0);
            const waits = new Array<number>(M).fill(0);
            for (const l of live) counted[l.m] += where.get(l)![2];
            for (const l of waiting) waits[l.m]++;
            for (let i = 0; i < M; i++) {
              pools[i].validate();
              assert.equal(pools[i].reservedBytes, sources[i].reservedBytes);
              assert.equal(pools[i].allocatedBytes, counted[i], `member ${i}`);
              // (a block behind its fence is freed, not yet reusable)
              assert.ok(pools[i].pendingFreeCount >= waits[i]);
              held += pools[i].reservedBytes;
            }
            assert.equal(group.heldBytes, held);
            assert.ok(group.peakHeldBytes >= held);
            // every block live or waiting keeps its pattern; none overlap
            const byMemory = new Map<MockMemory, [number, number][]>();
            for (const l of [...live, ...waiting]) {
              const [mem, at, len] = where.get(l)!;
              const bytes = mem.bytes!;
              for (const j of probes(len)) {
                if (bytes[at + j] !== ((l.fill + j) & 0xff)) {
                  throw new Error(
                    `a ${
                      waiting.has(l) ? "waiting" : "live"
                    } block of member ${l.m} (${len} bytes at ${at}) lost byte ${j}`,
                  );
                }
              }
              let list = byMemory.get(mem);
              if (list === undefined) byMemory.set(mem, list = []);
              list.push([at, at + len]);
            }
            for (const list of byMemory.values()) {
              list.sort((a, b) => a[0] - b[0]);
              for (let k = 1; k < list.length; k++) {
                assert.ok(list[k - 1][1] <= list[k][0], "blocks overlap");
              }
            }
          };
          const take = (a: Ask): Live | undefined => {
            const p = pools[a.m];
            const before = sources.map((s) => s.freeCount);
            let h: CachedBlock<MockMemory>;
            try {
              h = p.allocate(sizeOf(a));
            } catch (error) {
              if (error instanceof OutOfMemoryError) {
                ooms++;
                return undefined;
              }
              throw error;
            }
            if (sources.some((s, i) => s.freeCount > before[i])) {
              missGiveBacks++;
            }
            const l: Live = { m: a.m, fill: fill++ & 0xff, h };
            // (a waiting block's handle is released: where it lies is kept)
            where.set(l, [h.memory, h.byteOffset, h.blockByteLength]);
            write(l);
            return l;
          };
          let b = 0;
          for (let r = 0; r < rounds; r++) {
            for (const phase of phases) {
              steps++;
              // the previous step's side work is done: its blocks go back
              side.complete(side.submitted - side.completedCount);
              waiting.clear();
              check();
              const taken: [Ask, Live][] = [];
              for (const a of phase) {
                const l = take(a);
                if (l !== undefined) {
                  live.add(l);
                  taken.push([a, l]);
                }
                check();
              }
              taken.sort((x, y) => x[0].order - y[0].order);
              for (const [a, l] of taken) {
                live.delete(l);
                if (a.late) {
                  // used by side-stream work not yet done
                  pools[l.m].recordStream(l.h, side);
                  waiting.add(l);
                }
                l.h.release();
                check();
              }
              group.endStep();
              const o = betweens[b++ % betweens.length];
              if (o.op === "empty") pools[o.m].emptyCache();
              else if (o.op === "fraction") {
                pools[o.m].setMemoryFraction(o.f);
              } else if (o.op === "resetPeak") group.resetPeak();
              check();
            }
          }
          side.complete(side.submitted - side.completedCount);
          waiting.clear();
          await Promise.resolve();
          for (const p of pools) {
            await p.synchronize();
            p.emptyCache();
            p.validate();
          }
          check();
          for (const s of sources) assert.equal(s.reservedBytes, 0);
          groupGiveBacks += group.givenBackSegments;
        },
      ),
      { numRuns: modelRuns(60) },
    );
    console.log(
      `cycles model: ${steps} steps, ${missGiveBacks} misses that gave back, ${groupGiveBacks} group give-backs, ${ooms} OOMs`,
    );
    assert.ok(missGiveBacks > 0, "some miss gave segments back");
    assert.ok(groupGiveBacks > 0, "the group gave segments back");
  });
});
