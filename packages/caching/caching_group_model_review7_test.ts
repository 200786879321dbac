// CachingGroup model from the outside (review 7): members on CPU-backed mock
// sources (some with a budget, some with expandable segments) take blocks
// by handle and by id, on the default stream and on a side stream whose
// fences complete later; between them: step marks, emptyCache(), a member
// leaving, resetPeak(), a memory fraction set, a source that fails or
// throws at the next request, and a source whose freeSegment() re-enters
// the group (another member allocates or frees, a cache is emptied, a step
// is marked, a member leaves). After every operation each live block holds
// its own byte pattern, every member validates (its stats equal a recount),
// each member's reserved bytes are its source's, and the group's held bytes
// are its members'. Everything goes back at the end.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type CachedBlock,
  CachingAllocator,
  CachingGroup,
} from "@allot/caching";
import {
  AllotError,
  ManualStream,
  type MockMemory,
  MockSegmentSource,
  OutOfMemoryError,
  type Segment,
} from "@allot/core";
import { assertDisjoint, modelRuns } from "../core/_test_faults.ts";

const KiB = 1024, MiB = 2 ** 20;
const M = 3;

/** Byte positions checked in a block of `n` bytes (both ends, a middle). */
function probes(n: number): number[] {
  if (n === 0) return [];
  const at = new Set([0, 1, n >> 1, n - 2, n - 1]);
  return [...at].filter((j) => j >= 0 && j < n);
}

type Reentry = "alloc" | "free" | "empty" | "step" | "leave";

type Op =
  | { op: "alloc"; m: number; size: number; side: boolean }
  | { op: "allocId"; m: number; size: number }
  | { op: "free"; i: number }
  | { op: "record"; i: number }
  | { op: "completeSide" }
  | { op: "freeAll"; m: number }
  | { op: "empty"; m: number }
  | { op: "step" }
  | { op: "leave"; m: number }
  | { op: "resetPeak" }
  | { op: "fraction"; m: number; f: number }
  | { op: "fault"; m: number; throws: boolean; size: number }
  | { op: "arm"; m: number; what: Reentry; other: number; size: number };

/** A live block: by handle or by id, with the pattern written into it. */
interface Live {
  m: number;
  fill: number;
  size: number;
  h?: CachedBlock<MockMemory>;
  id?: number;
}

describe("CachingGroup model (review 7)", () => {
  it("model: handles, ids, a side stream, budgets, expandable members, faults and re-entrant sources in one group: patterns survive, counts add up, everything goes back", async () => {
    const m = fc.nat(M - 1);
    const size = fc.oneof(
      { weight: 4, arbitrary: fc.integer({ min: 0, max: 4 * KiB }) },
      { weight: 2, arbitrary: fc.integer({ min: 1, max: 512 * KiB }) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 5 * MiB }) },
    );
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          op: fc.constant("alloc" as const),
          m,
          size,
          side: fc.boolean(),
        }),
      },
      {
        weight: 5,
        arbitrary: fc.record({ op: fc.constant("allocId" as const), m, size }),
      },
      {
        weight: 8,
        arbitrary: fc.record({ op: fc.constant("free" as const), i: fc.nat() }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("record" as const),
          i: fc.nat(),
        }),
      },
      { weight: 2, arbitrary: fc.constant({ op: "completeSide" as const }) },
      {
        weight: 1,
        arbitrary: fc.record({ op: fc.constant("freeAll" as const), m }),
      },
      {
        weight: 1,
        arbitrary: fc.record({ op: fc.constant("empty" as const), m }),
      },
      { weight: 1, arbitrary: fc.constant({ op: "step" as const }) },
      {
        weight: 1,
        arbitrary: fc.record({ op: fc.constant("leave" as const), m }),
      },
      { weight: 1, arbitrary: fc.constant({ op: "resetPeak" as const }) },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("fraction" as const),
          m,
          f: fc.constantFrom(0.25, 0.5, 1),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("fault" as const),
          m,
          throws: fc.boolean(),
          size,
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("arm" as const),
          m,
          what: fc.constantFrom<Reentry>(
            "alloc",
            "free",
            "empty",
            "step",
            "leave",
          ),
          other: m,
          size,
        }),
      },
    );
    let givenBack = 0, reentered = 0, ooms = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.option(fc.constantFrom(4 * MiB, 8 * MiB)), {
          minLength: M,
          maxLength: M,
        }),
        fc.array(fc.boolean(), { minLength: M, maxLength: M }),
        fc.array(op, { maxLength: 120, size: "max" }),
        async (budgets, expandable, ops) => {
          const group = new CachingGroup();
          const sources = budgets.map((b) =>
            new MockSegmentSource({
              backed: true,
              ...(b === null ? {} : { capacityBytes: b }),
            })
          );
          const pools = sources.map((s, i) =>
            new CachingAllocator(s, {
              group,
              expandableSegments: expandable[i],
            })
          );
          const side = new ManualStream();
          const live: Live[] = [];
          let fill = 1;
          const inGroup = new Set(pools);
          const bytesOf = (l: Live): [Uint8Array, number] => {
            const p = pools[l.m];
            if (l.h !== undefined) return [l.h.memory.bytes!, l.h.byteOffset];
            return [p.blockMemory(l.id!).bytes!, p.blockByteOffset(l.id!)];
          };
          const write = (l: Live) => {
            const [bytes, at] = bytesOf(l);
            for (const j of probes(l.size)) bytes[at + j] = (l.fill + j) & 0xff;
          };
          const check = () => {
            let held = 0;
            for (let i = 0; i < M; i++) {
              pools[i].validate();
              assert.equal(pools[i].reservedBytes, sources[i].reservedBytes);
              if (inGroup.has(pools[i])) held += pools[i].reservedBytes;
              assert.equal(group.has(pools[i]), inGroup.has(pools[i]));
            }
            assert.equal(group.heldBytes, held);
            const ranges: (readonly [unknown, number, number])[] = [];
            for (const l of live) {
              const [bytes, at] = bytesOf(l);
              for (const j of probes(l.size)) {
                if (bytes[at + j] !== ((l.fill + j) & 0xff)) {
                  throw new Error(
                    `a live block of member ${l.m} (${l.size} bytes at ${at}) lost byte ${j}`,
                  );
                }
              }
              const length = l.h !== undefined
                ? l.h.blockByteLength
                : pools[l.m].blockByteLength(l.id!);
              ranges.push([bytes, at, at + length]);
            }
            assertDisjoint(ranges);
          };
          const take = (
            i: number,
            n: number,
            how: "handle" | "side" | "id",
          ) => {
            const p = pools[i];
            let l: Live;
            try {
              if (how === "id") {
                l = { m: i, fill: fill++ & 0xff, size: n, id: p.allocateId(n) };
              } else {
                l = {
                  m: i,
                  fill: fill++ & 0xff,
                  size: n,
                  h: p.allocate(n, how === "side" ? { stream: side } : {}),
                };
              }
            } catch (error) {
              if (error instanceof OutOfMemoryError) {
                ooms++;
                return;
              }
              throw error;
            }
            write(l);
            live.push(l);
          };
          const give = (l: Live) => {
            live.splice(live.indexOf(l), 1);
            if (l.h !== undefined) l.h.release();
            else pools[l.m].freeById(l.id!);
          };
          const frees = sources.map((s) => s.freeSegment.bind(s));
          const disarm = () => {
            sources.forEach((s, i) => (s.freeSegment = frees[i]));
          };
          for (const o of ops) {
            switch (o.op) {
              case "alloc":
                take(o.m, o.size, o.side ? "side" : "handle");
                break;
              case "allocId":
                take(o.m, o.size, "id");
                break;
              case "free":
                if (live.length > 0) give(live[o.i % live.length]);
                break;
              case "record": {
                const handles = live.filter((l) => l.h !== undefined);
                if (handles.length === 0) break;
                const l = handles[o.i % handles.length];
                pools[l.m].recordStream(l.h!, side);
                break;
              }
              case "completeSide":
                side.complete(side.submitted - side.completedCount);
                break;
              case "freeAll":
                for (const l of live.filter((l) => l.m === o.m)) give(l);
                break;
              case "empty":
                pools[o.m].emptyCache();
                break;
              case "step":
                group.endStep();
                break;
              case "leave":
                group.delete(pools[o.m]);
                inGroup.delete(pools[o.m]);
                break;
              case "resetPeak":
                group.resetPeak();
                assert.equal(group.peakHeldBytes, group.heldBytes);
                break;
              case "fraction":
                pools[o.m].setMemoryFraction(o.f);
                break;
              case "fault": {
                const s = sources[o.m];
                if (o.throws) s.throwNext();
                else s.failNext();
                try {
                  take(o.m, o.size, "handle");
                } catch (error) {
                  assert.ok(
                    o.throws && error instanceof AllotError,
                    String(error),
                  );
                }
                // (a hit asked the source nothing: spend the armed fault)
                try {
                  const spare = s.tryAllocateSegment(256);
                  if (spare !== undefined) s.freeSegment(spare);
                } catch {
                  // the armed throw
                }
                break;
              }
              case "arm": {
                const s = sources[o.m];
                const free = frees[o.m];
                s.freeSegment = (seg: Segment<MockMemory>) => {
                  free(seg);
                  s.freeSegment = free; // once
                  reentered++;
                  switch (o.what) {
                    case "alloc":
                      take(o.other, o.size, "id");
                      break;
                    case "free": {
                      const l = live.find((l) => l.m === o.other);
                      if (l !== undefined) give(l);
                      break;
                    }
                    case "empty":
                      pools[o.other].emptyCache();
                      break;
                    case "step":
                      group.endStep();
                      break;
                    case "leave":
                      group.delete(pools[o.other]);
                      inGroup.delete(pools[o.other]);
                      break;
                  }
                };
                break;
              }
            }
            check();
          }
          disarm();
          if (group.givenBackSegments > 0) givenBack++;
          for (const l of [...live]) give(l);
          side.complete(side.submitted - side.completedCount);
          for (const p of pools) await p.synchronize();
          for (const p of pools) {
            p.emptyCache();
            assert.equal(p.allocatedBytes, 0);
            assert.equal(p.pendingFreeCount, 0);
          }
          for (const s of sources) assert.equal(s.reservedBytes, 0);
          assert.equal(group.heldBytes, 0);
        },
      ),
      { numRuns: modelRuns(400) },
    );
    assert.ok(givenBack > 0 && reentered > 0 && ooms > 0);
  });
});
